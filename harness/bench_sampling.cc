#include "harness/bench_sampling.h"

#include <algorithm>
#include <cstdint>
#include <cmath>

#include "harness/cpu_link.h"

namespace remat::bench {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

SamplingRule DefaultSamplingRule() {
  SamplingRule rule;
  rule.quiet_samples_at_cap = kQuietSamplesAtCap;
  return rule;
}

int64_t RunsPerSample(double run_seconds) {
  if (!(run_seconds > 0)) return 1;
  const double runs = std::ceil(kMinSampleSeconds / run_seconds);
  // Capped: a run too fast to time (a broken row) must not spin for ever.
  return static_cast<int64_t>(std::clamp(runs, 1.0, 10000.0));
}

std::vector<PairRun> PairRuns(int64_t index, std::optional<PairSide> before, bool paired) {
  std::vector<PairRun> runs;
  std::vector<PairSide> order;
  if (!paired) {
    order = {PairSide::kRow};
  } else if (index % 2 == 0) {
    order = {PairSide::kEager, PairSide::kRow};
  } else {
    order = {PairSide::kRow, PairSide::kEager};
  }
  for (const PairSide side : order) {
    if (before != side) runs.push_back({side, /*timed=*/false});
    runs.push_back({side, /*timed=*/true});
    before = side;
  }
  return runs;
}

std::optional<double> MedianHalfWidth(std::vector<double> values) {
  const size_t n = values.size();
  if (n < 2) return std::nullopt;
  std::sort(values.begin(), values.end());
  const double median = Median(values);
  const double half = static_cast<double>(n) / 2;
  const double j = std::max(1.0, std::round(half - 1.96 * std::sqrt(static_cast<double>(n)) / 2));
  const size_t lo = static_cast<size_t>(j) - 1;  // ranks j and n + 1 - j, 0-based
  const size_t hi = n - static_cast<size_t>(j);
  return (values[hi] - values[lo]) / 2 / median;
}

RowEstimate Estimate(const Timings& t) {
  RowEstimate e;
  const bool paired = t.paired();
  const size_t n = paired ? std::min(t.row_ms.size(), t.eager_ms.size()) : t.row_ms.size();
  e.samples = static_cast<int64_t>(n);
  if (n == 0) return e;
  // A sample without a delay measured counts as quiet.
  auto quiet = [](const std::vector<double>& delay, size_t i) {
    return i >= delay.size() || delay[i] <= kQuietRunDelay;
  };
  auto apart = [&t](size_t i) {
    return i < t.link_ns.size() && CpusApart(t.link_ns[i], t.reference_link_ns);
  };
  std::vector<size_t> chosen;  // the samples (pairs) that count, in order
  for (size_t i = 0; i < n; ++i) {
    if (apart(i)) {
      ++e.apart_samples;
    } else if (quiet(t.row_delay, i) && (!paired || quiet(t.eager_delay, i))) {
      chosen.push_back(i);
    }
  }
  e.quiet_samples = static_cast<int64_t>(chosen.size());
  e.quiet = e.quiet_samples >= std::min<int64_t>(kMinQuietSamples, e.samples);
  if (chosen.empty()) {
    for (size_t i = 0; i < n; ++i) chosen.push_back(i);
  }
  // The least times over the first k chosen samples.
  auto least = [&](const std::vector<double>& ms, size_t k) {
    double out = ms[chosen[0]];
    for (size_t i = 1; i < k; ++i) out = std::min(out, ms[chosen[i]]);
    return out;
  };
  e.row_ms = least(t.row_ms, chosen.size());
  if (!paired) {
    e.value = e.row_ms;
    if (n >= 2) {
      // The first half against the whole (not two disjoint halves): whether
      // the minimum is still falling, i.e. whether more samples would still
      // move it.
      e.spread = std::abs(least(t.row_ms, (chosen.size() + 1) / 2) / e.row_ms - 1);
    }
    return e;
  }
  e.eager_ms = least(t.eager_ms, chosen.size());
  std::vector<double> ratios;
  for (size_t i : chosen) ratios.push_back(t.row_ms[i] / t.eager_ms[i]);
  // The low median's pair: of equal ratios, the earliest.
  std::vector<size_t> by_ratio(ratios.size());
  for (size_t k = 0; k < by_ratio.size(); ++k) by_ratio[k] = k;
  std::stable_sort(by_ratio.begin(), by_ratio.end(),
                   [&](size_t a, size_t b) { return ratios[a] < ratios[b]; });
  const size_t pair = chosen[by_ratio[(by_ratio.size() - 1) / 2]];
  e.pair_row_ms = t.row_ms[pair];
  e.pair_eager_ms = t.eager_ms[pair];
  e.value = e.pair_row_ms / e.pair_eager_ms;
  if (n >= 2) e.spread = MedianHalfWidth(ratios).value_or(std::abs(ratios[0] / e.value - 1));
  return e;
}

double SamplingWeight(int64_t eager_flops) {
  return 2 * static_cast<double>(std::max<int64_t>(eager_flops, 0)) / kEstimateFlopsPerSecond +
         kPairFloorSeconds;
}

double SampleShareSeconds(double left_seconds, double weight, double weight_left) {
  if (!(left_seconds > 0) || !(weight > 0)) return 0;
  return left_seconds * std::min(1.0, weight / std::max(weight, weight_left));
}

Timings SamplesIn(const Timings& t, size_t begin, size_t end) {
  auto cut = [begin, end](const std::vector<double>& v) {
    const size_t b = std::min(begin, v.size()), e = std::max(b, std::min(end, v.size()));
    return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(b),
                               v.begin() + static_cast<std::ptrdiff_t>(e));
  };
  Timings out;
  out.row_ms = cut(t.row_ms);
  out.eager_ms = cut(t.eager_ms);
  out.row_delay = cut(t.row_delay);
  out.eager_delay = cut(t.eager_delay);
  out.link_ns = cut(t.link_ns);
  out.reference_link_ns = t.reference_link_ns;
  return out;
}

Timings SamplesFrom(const Timings& t, size_t begin) { return SamplesIn(t, begin, SIZE_MAX); }

std::vector<RowEstimate> WindowEstimates(const Timings& t) {
  std::vector<RowEstimate> out;
  std::vector<size_t> bounds = {0};
  for (size_t start : t.window_starts) {
    if (start > bounds.back()) bounds.push_back(start);
  }
  for (size_t w = 0; w < bounds.size(); ++w) {
    Timings window = SamplesFrom(t, bounds[w]);
    if (w + 1 < bounds.size()) {
      const size_t n = bounds[w + 1] - bounds[w];
      window.row_ms.resize(std::min(n, window.row_ms.size()));
      window.eager_ms.resize(std::min(n, window.eager_ms.size()));
      window.row_delay.resize(std::min(n, window.row_delay.size()));
      window.eager_delay.resize(std::min(n, window.eager_delay.size()));
      window.link_ns.resize(std::min(n, window.link_ns.size()));
    }
    out.push_back(Estimate(window));
  }
  return out;
}

SamplingRule CappedRule(SamplingRule rule, double left_seconds, double weight,
                        double weight_left) {
  rule.max_seconds = std::min(rule.max_seconds, SampleShareSeconds(left_seconds, weight, weight_left));
  if (rule.quiet_samples_at_cap > 0) rule.stretched_max_seconds = kCapStretch * rule.max_seconds;
  return rule;
}

SamplingRule BoundRule(SamplingRule rule) {
  rule.min_seconds = std::max(rule.min_seconds, kBoundMinSeconds);
  rule.max_samples = std::max(rule.max_samples, kBoundMaxSamples);
  return rule;
}

bool SamplingDone(const Timings& timings, const SamplingRule& rule, double seconds_spent) {
  const RowEstimate e = Estimate(timings);
  if (e.samples >= rule.max_samples) return true;
  if (seconds_spent >= rule.max_seconds &&
      (e.quiet_samples >= rule.quiet_samples_at_cap || !rule.stretched_max_seconds ||
       seconds_spent >= *rule.stretched_max_seconds)) {
    return true;
  }
  // A busy machine: more samples would mostly wait for the neighbour, and
  // the row is flagged whatever it takes; stop rather than spend the cap.
  if (seconds_spent >= rule.busy_seconds && e.samples >= kMinQuietSamples &&
      e.quiet_samples * 4 < e.samples) {
    return true;
  }
  return e.quiet_samples >= rule.min_samples && seconds_spent >= rule.min_seconds && e.spread &&
         *e.spread <= rule.target_spread;
}

}  // namespace remat::bench
