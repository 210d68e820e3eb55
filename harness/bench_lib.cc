#include "harness/bench_lib.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "engines/api/error.h"

namespace remat::bench {

const char* NoiseKindName(NoiseKind kind) {
  switch (kind) {
    case NoiseKind::kNotQuiet: return "not_quiet";
    case NoiseKind::kBelowFlopFloor: return "below_flop_floor";
    case NoiseKind::kWindowsDisagree: return "windows_disagree";
    case NoiseKind::kAboveMatMulBound: return "above_matmul_bound";
    case NoiseKind::kImprecise: return "imprecise";
  }
  return "unknown";
}

bool RowResult::NoisyFor(NoiseKind kind) const {
  return std::any_of(noise.begin(), noise.end(), [kind](const Noise& n) { return n.kind == kind; });
}

std::string RowResult::NoiseText() const {
  std::string out;
  for (const Noise& n : noise) out += (out.empty() ? "" : "; ") + n.why;
  return out;
}

namespace {
// A paired ratio whose interval is wider than +-kWindowAllowance: one draw
// from a range a rerun would land anywhere in. Paired rows only: an
// unpaired row's spread is whether its least time was still falling, not
// an interval of a ratio.
std::optional<Noise> Imprecision(const RowResult& r) {
  if (!r.vs_eager_paired || !r.spread || *r.spread <= kWindowAllowance) return std::nullopt;
  char text[160];
  std::snprintf(text, sizeof text,
                "x eager %.2f known only within +-%.1f%% (%lld quiet pairs), wider than +-%.0f%%",
                *r.vs_eager_paired, 100 * *r.spread, static_cast<long long>(r.quiet_samples),
                100 * kWindowAllowance);
  return Noise{NoiseKind::kImprecise, text};
}

// The problems of dense layers, sized by N and d, where matmuls are nearly
// all the work, and time follows FLOPs (the unclamped FLOP floor).
bool DenseLayerProblem(const OrderedParams& params) {
  bool n = false, d = false;
  for (const auto& [name, value] : params) {
    n = n || name == "N";
    d = d || name == "d";
  }
  return n && d;
}
}  // namespace

void ComputeVsEager(std::vector<RowResult>* rows) {
  std::map<std::string, const RowResult*> baseline, bound;
  for (const RowResult& r : *rows) {
    if (!r.error.empty() || r.real_time_ms <= 0) continue;
    if (IsBaselineRow(r.row)) {
      baseline.emplace(r.row.case_key, &r);
    }
    if (r.row.kind == RowKind::kMatMulBound && r.gflops > 0) bound.emplace(r.row.case_key, &r);
  }
  // Copies: the pointers above are into `rows`, which the loop below writes.
  struct Baseline {
    double ms;
    int64_t flops;
    double spread;
    std::optional<double> overhead;  // eager's share of time outside kernels
    std::optional<double> overhead_ns_per_call;
  };
  std::map<std::string, Baseline> baseline_ms_flops;
  for (const auto& [key, r] : baseline) {
    baseline_ms_flops[key] = {r->real_time_ms, r->total_flops(), r->spread.value_or(0),
                              r->overhead_fraction, r->overhead_ns_per_call};
  }
  struct Bound {
    double ms;
    int64_t flops;  // of the case's matmuls
    double spread;
    bool ceiling;   // quiet and precise: a ceiling rows are held to
    std::optional<double> x_eager;  // paired with eager: the bound's time / eager's
  };
  std::map<std::string, Bound> bound_ms_spread;
  for (const auto& [key, r] : bound) {
    bound_ms_spread[key] = {r->real_time_ms, r->total_flops(), r->spread.value_or(0),
                            r->quiet && !Imprecision(*r), r->vs_eager_paired};
  }
  for (RowResult& r : *rows) {
    r.vs_eager.reset();
    r.of_matmul_bound.reset();
    r.flop_floor.reset();
    r.overhead_per_call_vs_eager.reset();
    r.noise.clear();
    if (!r.error.empty()) continue;
    // The bound row is paired with eager like a row: its share is a result
    // only within the allowance.
    if (std::optional<Noise> imprecise = Imprecision(r); imprecise &&
        (r.row.kind == RowKind::kValueAndGrad || r.row.kind == RowKind::kMatMulBound)) {
      r.noise.push_back(std::move(*imprecise));
    }
    if (r.row.kind != RowKind::kValueAndGrad) continue;
    auto base = baseline_ms_flops.find(r.row.case_key);
    if (base != baseline_ms_flops.end()) r.vs_eager = r.real_time_ms / base->second.ms;
    if (base != baseline_ms_flops.end() && base->second.overhead_ns_per_call &&
        *base->second.overhead_ns_per_call > 0 && r.overhead_ns_per_call) {
      r.overhead_per_call_vs_eager = *r.overhead_ns_per_call / *base->second.overhead_ns_per_call;
    }
    // The cases with matmuls: those with a bound row.
    const auto ceiling = bound_ms_spread.find(r.row.case_key);
    const bool has_bound = ceiling != bound_ms_spread.end();
    const bool dense = DenseLayerProblem(r.row.params);
    const double spread = r.spread.value_or(0);
    // Unpaired, the ratio carries the uncertainty of eager's row too.
    const double ratio_spread =
        spread + (r.vs_eager_paired || base == baseline_ms_flops.end() ? 0 : base->second.spread);
    // Below the FLOP model's floor: at eager's kernel rate the row cannot
    // take less than its FLOPs' share of eager's time, and recomputation
    // does not make kernels much faster (kFlopFloorAllowance). A ratio below
    // it means the eager runs were slowed and the row's were not.
    int64_t eager_flops = r.eager_flops;
    if (eager_flops == 0 && base != baseline_ms_flops.end()) eager_flops = base->second.flops;
    if (eager_flops > 0 && r.total_flops() > 0) {
      r.flop_floor = static_cast<double>(r.total_flops()) / static_cast<double>(eager_flops);
      if (!dense) r.flop_floor = std::min(*r.flop_floor, 1.0);
      // The floor holds for the time in kernels' arithmetic: an engine
      // with less overhead than eager's may take less time than eager's
      // FLOPs alone allow, so the floor is scaled by the kernel share of
      // eager's time over the row's. On the matmul problems that is a few
      // percent (eager's 5% outside kernels on scan_stack against planned's
      // 0.3%: planned/as-written at 1.16-1.22 x eager was flagged under the
      // unscaled floor of 1.34). Where time does not follow FLOPs (the
      // scalar chains are mostly engine overhead) and kernels are a small
      // share of either (kMinKernelShareForFloor), there is no floor: a
      // kernel of tens of ns takes what the caches the engine leaves allow
      // (planned's scalar sin measured 13 ns a call against eager's 16),
      // not what its FLOPs do.
      const std::optional<double> eager_overhead =
          base != baseline_ms_flops.end() ? base->second.overhead : std::nullopt;
      if (eager_overhead && r.overhead_fraction) {
        const double eager_share = 1 - *eager_overhead;
        const double row_share = 1 - *r.overhead_fraction;
        if (!dense &&
            (eager_share < kMinKernelShareForFloor || row_share < kMinKernelShareForFloor)) {
          r.flop_floor.reset();
        } else if (row_share > 0) {
          *r.flop_floor *= std::min(1.0, eager_share / row_share);
        }
      }
    }
    const std::optional<double> ratio = r.vs_eager_paired ? r.vs_eager_paired : r.vs_eager;
    char text[160];
    // A neighbour took a CPU from (nearly) every sample: even the least time
    // is a disturbed one.
    auto add_noise = [&r](NoiseKind kind, std::string why) {
      r.noise.push_back({kind, std::move(why)});
    };
    if (!r.quiet) {
      add_noise(NoiseKind::kNotQuiet, StrCat("too few quiet samples (", r.quiet_samples, " of ",
                                             r.samples, "): a neighbour kept a CPU busy"));
    }
    if (r.flop_floor && ratio &&
        *ratio < *r.flop_floor * (1 - kFlopFloorAllowance - ratio_spread)) {
      std::snprintf(text, sizeof text, "x eager %.2f below the FLOP floor %.2f", *ratio,
                    *r.flop_floor);
      add_noise(NoiseKind::kBelowFlopFloor, text);
    }
    // Windows that disagree: the row's number depends on when it was taken.
    // Apart by more than kWindowAllowance, and by more than the windows' own
    // intervals allow: two windows each within 2% of their medians, 3.3%
    // apart, are one number measured twice, not two (see kWindowAllowance).
    if (r.window_values.size() >= 2) {
      const auto [lo, hi] = std::minmax_element(r.window_values.begin(), r.window_values.end());
      auto spread = [&r](std::vector<double>::const_iterator it) {
        const size_t i = static_cast<size_t>(it - r.window_values.begin());
        return i < r.window_spreads.size() ? r.window_spreads[i] : 0.0;
      };
      if (*lo > 0 && *hi / *lo - 1 > kWindowAllowance &&
          *hi * (1 - spread(hi)) > *lo * (1 + spread(lo))) {
        std::string values;
        for (size_t i = 0; i < r.window_values.size(); ++i) {
          std::snprintf(text, sizeof text, "%s%.3f", values.empty() ? "" : ", ",
                        r.window_values[i]);
          values += text;
          if (i < r.window_spreads.size() && r.window_spreads[i] > 0) {
            std::snprintf(text, sizeof text, " +-%.1f%%", 100 * r.window_spreads[i]);
            values += text;
          }
        }
        std::snprintf(text, sizeof text, " (%.1f%% apart)", 100 * (*hi / *lo - 1));
        add_noise(NoiseKind::kWindowsDisagree, StrCat("its windows disagree: x eager ", values, text));
      }
    }
    // Above the matmul bound: oneDNN's matmuls alone, on operands already in
    // cache, are the fastest this work can run; a row past them was timed
    // while the bound's runs were slowed. The bound's rate is eager's FLOPs
    // (the matmuls' and the rest) over the bound's time: the rate of eager's
    // work were everything but its matmuls free, so that eager's share is
    // exactly the bound's time over eager's.
    if (!has_bound) continue;
    const int64_t work_flops = eager_flops > 0 ? eager_flops : ceiling->second.flops;
    const double bound_gflops =
        static_cast<double>(work_flops) / (ceiling->second.ms * 1e-3) / 1e9;
    r.of_matmul_bound = r.gflops / bound_gflops;
    // Both paired with eager: the ratio of their pairs' ratios, which the
    // machine's drift between the two rows' samples does not move (the
    // least times above were taken seconds apart).
    const std::optional<double> row_x =
        IsBaselineRow(r.row) ? std::optional<double>(1.0) : r.vs_eager_paired;
    if (ceiling->second.x_eager && row_x && *row_x > 0 && eager_flops > 0) {
      r.of_matmul_bound = static_cast<double>(r.total_flops()) / static_cast<double>(work_flops) *
                          *ceiling->second.x_eager / *row_x;
    }
    // A bound a neighbour slowed, or one known too loosely, is no ceiling:
    // nothing is held against it.
    if (ceiling->second.ceiling &&
        *r.of_matmul_bound > 1 + kBoundAllowance + spread + ceiling->second.spread) {
      std::snprintf(text, sizeof text, "%.1f GFLOP/s above the matmul bound's %.1f", r.gflops,
                    bound_gflops);
      add_noise(NoiseKind::kAboveMatMulBound, text);
    }
  }
}

void SetSampledFields(const Timings& t, RowResult* r) {
  r->timings = t;
  r->window_values.clear();
  r->window_spreads.clear();
  if (t.row_ms.empty()) return;
  double sum = 0;
  for (double v : t.row_ms) sum += v;
  r->mean_time_ms = sum / static_cast<double>(t.row_ms.size());
  r->median_time_ms = Median(t.row_ms);
  // The least quiet time and the median of quiet pairs' ratios: see
  // RowEstimate.
  const RowEstimate estimate = Estimate(t);
  r->real_time_ms = estimate.row_ms;
  r->samples = estimate.samples;
  r->spread = estimate.spread;
  r->quiet = estimate.quiet;
  r->quiet_samples = estimate.quiet_samples;
  if (t.paired()) {
    r->vs_eager_paired = estimate.value;
    r->pair_time_ms = estimate.pair_row_ms;
    r->paired_eager_ms = estimate.pair_eager_ms;
    if (!t.window_starts.empty()) {
      for (const RowEstimate& w : WindowEstimates(t)) {
        if (w.quiet_samples >= kMinQuietSamples) {
          r->window_values.push_back(w.value);
          r->window_spreads.push_back(w.spread.value_or(0));
        }
      }
    }
  }
}

}  // namespace remat::bench
