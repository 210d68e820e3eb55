#include "harness/bench_row.h"

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "harness/bench_matmul_bound.h"
#include "harness/memory_caps.h"

namespace remat::bench {
namespace {

void SetUpValueAndGrad(RowState* s) {
  const Case& c = s->session->cases.Get(s->row);
  const CaseVariant& variant = s->row.variant;
  if (variant.is_cap()) {
    s->memory_cap_bytes =
        ResolveMemoryCap(variant.spec(), c.program, c.wrt, *MakeEngine(s->row.engine), "cap:").bytes;
  }
  if (variant.is_budget_under_cap()) {
    // The static answer at the same peak: the largest budget:B whose planned
    // peak fits under the cap (dry runs), then that schedule.
    s->memory_cap_bytes = ResolveMemoryCap(variant.spec(), c.program, c.wrt, *MakeEngine("dtr"),
                                           CaseVariant::kBudgetUnderCapPrefix)
                              .bytes;
    RunOptions plan;
    plan.plan_only = true;
    const Stats eager = MakeEngine(kBaselineEngine)
                            ->ValueAndGrad(c.program, ShapeOnlyArguments(c.program), c.wrt, plan)
                            .stats;
    const int64_t activations =
        eager.high_water_bytes_by_category[static_cast<int>(Category::kActivations)];
    auto found = LargestBudgetUnder(c.program, c.wrt, s->memory_cap_bytes, activations);
    if (!found) {
      throw Error(StrCat(variant.Label(), ": no budget:B schedule plans a peak under ",
                         s->memory_cap_bytes, " bytes on ", c.ToString()));
    }
    s->budget_bytes = found->first;
    s->program = ApplySchedule(c.program, StrCat("budget:", found->first));
  } else {
    s->program = variant.Apply(c.program);
  }
  s->engine = MakeEngine(s->row.engine);
  // A big row's one run is its timed run (RunValueAndGrad): a warm-up would
  // double a minute-long row for primitives that take milliseconds to make.
  if (s->row.big) return;
  // One untimed run: oneDNN creates and caches its primitives here, so the
  // first timed iteration is not a cold one. It predicts the peak too, which
  // the timed runs skip (bookkeeping, not the work being compared), and so
  // refuses a row past --max-memory before it allocates anything.
  RunOptions options;
  options.max_memory_bytes = s->session->max_memory_bytes;
  options.memory_cap_bytes = s->row.variant.is_cap() ? s->memory_cap_bytes : 0;
  const Clock::time_point start = Clock::now();
  Result warm = s->engine->ValueAndGrad(s->program, c.inputs, c.wrt, options);
  s->runs_per_sample = RunsPerSample(SecondsSince(start));
  s->stats = warm.stats;
  warm = Result();
  options.memory_cap_bytes = 0;  // eager's runs: uncapped
  if (s->session->paired && !IsBaselineRow(s->row)) {
    try {
      s->eager_flops = s->session->baselines.Get(s->row, c, options).flops;
      s->paired = true;
    } catch (const Error&) {
      s->paired = false;  // eager cannot run this case: the row runs alone
    }
  }
}

// Samples an engine's row, paired with eager unless it is eager's own or
// eager cannot run the case.
void SampleRow(RowState* s, const Case& c, const RunOptions& options) {
  RunOptions row_options = options;
  if (s->row.variant.is_cap()) row_options.memory_cap_bytes = s->memory_cap_bytes;
  const Baseline* baseline = s->paired ? &s->session->baselines.Get(s->row, c, options) : nullptr;
  SamplePaired(s, baseline, c, options, RuleNow(*s->session, s->weight), [&] {
    // Only the row's own runs: eager's matmuls are not this row's.
    MatMulRecorder recorder;
    const Sample sample = TimeRuns(*s->engine, s->program, c, row_options, s->runs_per_sample,
                                   nullptr, &s->timed);
    s->runs += s->runs_per_sample;
    AddImpls(recorder, &s->matmul_impls);
    s->timings.row_ms.push_back(sample.ms);
    s->timings.row_delay.push_back(sample.delay);
  }, [&] {
    const Result r = s->engine->ValueAndGrad(s->program, c.inputs, c.wrt, row_options);
    benchmark::DoNotOptimize(r.value.raw());
  });
}

}  // namespace

bool EnsureReady(benchmark::State& state, RowState* s) {
  if (!s->ready && s->error.empty()) {
    ReportStart(*s->session, s->row);
    try {
      if (s->row.kind == RowKind::kValueAndGrad) {
        SetUpValueAndGrad(s);
      } else {
        SetUpMatMulBound(s);
      }
      s->ready = true;
    } catch (const std::exception& e) {
      s->error = e.what();
    }
  }
  if (!s->error.empty()) state.SkipWithError(s->error.c_str());
  return s->error.empty();
}

void SetCounters(benchmark::State& state, const RowState& s, int64_t peak_bytes,
                 int64_t total_flops, double seconds) {
  using benchmark::Counter;
  state.counters["peak_bytes"] = Counter(static_cast<double>(peak_bytes), Counter::kDefaults,
                                         Counter::OneK::kIs1024);
  state.counters["residual_bytes"] = Counter(static_cast<double>(s.stats.residual_bytes),
                                             Counter::kDefaults, Counter::OneK::kIs1024);
  state.counters["flops_fwd"] = static_cast<double>(s.stats.flops_forward);
  state.counters["flops_recomputed"] = static_cast<double>(s.stats.flops_recomputed);
  state.counters["flops_bwd"] = static_cast<double>(s.stats.flops_backward);
  // Per iteration, times the iterations, over the (manual) time: GFLOP/s.
  state.counters["GFLOP/s"] =
      Counter(static_cast<double>(total_flops) / 1e9, Counter::kIsIterationInvariantRate);
  if (s.row.kind != RowKind::kValueAndGrad || state.iterations() == 0) return;
  const double mean_ms = 1e3 * seconds / static_cast<double>(state.iterations());
  // The memory pass is not a timing: it must not replace the baseline's time.
  std::map<std::string, double>& baseline_ms = s.session->baseline_ms;
  if (IsBaselineRow(s.row) && !s.session->memory.active()) {
    baseline_ms[s.row.case_key] = mean_ms;
  }
  auto base = baseline_ms.find(s.row.case_key);
  if (base != baseline_ms.end()) state.counters["vs_eager"] = mean_ms / base->second;
}

Sample TimeRuns(Engine& engine, const Program& program, const Case& c,
                const RunOptions& options, int64_t runs, Stats* stats, EngineTime* time) {
  double kernel_seconds = 0;
  int64_t kernel_calls = 0;
  const Sample sample = TimeSample(runs, [&](int64_t i) {
    Result r = engine.ValueAndGrad(program, c.inputs, c.wrt, options);
    benchmark::DoNotOptimize(r.value.raw());
    if (options.time_kernels) {
      kernel_seconds += r.stats.seconds_in_kernels;
      kernel_calls += r.stats.kernel_calls;
    }
    if (stats && i + 1 == runs) *stats = std::move(r.stats);
  });
  if (time) {
    const double seconds = sample.ms / 1e3 * static_cast<double>(runs);
    if (options.time_kernels) {
      time->AddProbe(seconds, kernel_seconds, kernel_calls, runs);
    } else {
      time->wall_seconds += seconds;
      time->runs += runs;
    }
  }
  return sample;
}

void AddImpls(const MatMulRecorder& recorder, std::vector<std::string>* impls) {
  for (const std::string& impl : recorder.impls()) {
    if (std::find(impls->begin(), impls->end(), impl) == impls->end()) impls->push_back(impl);
  }
}

void RunValueAndGrad(benchmark::State& state, RowState* s) {
  if (!EnsureReady(state, s)) return;
  RunOptions options;
  options.max_memory_bytes = s->session->max_memory_bytes;
  // A big row has no warm-up: its timed run is the one that predicts the peak
  // (and refuses a row past --max-memory before allocating). The prediction
  // is a dry run, milliseconds against the row's minute.
  options.predict_memory = s->row.big;
  // Samples are timed without kernel timing (EngineTime); a big row's one
  // run is its probe too.
  options.time_kernels = s->row.big;
  const bool memory_pass = s->session->memory.active();
  try {
    const Case& c = s->session->cases.Get(s->row);
    for (auto _ : state) {
      if (memory_pass) {
        // The warm-up's peak (a big row's: its timed run's), see
        // TrackerMemoryManager.
        s->session->memory.Record(s->stats.peak_bytes);
        state.SetIterationTime(0);
        continue;
      }
      if (s->row.big && (s->session->child || !s->timings.row_ms.empty())) {
        // Its one run was taken in the first window.
      } else if (s->row.big) {
        // One run, no pairing (eager does not fit at that size).
        MatMulRecorder recorder;
        const Sample sample = TimeRuns(*s->engine, s->program, c, options, 1, &s->stats,
                                       &s->timed);
        s->timings.row_ms.push_back(sample.ms);
        s->timings.row_delay.push_back(sample.delay);
        s->runs += 1;
        s->matmul_impls = recorder.impls();
      } else {
        SampleRow(s, c, options);
      }
      state.SetIterationTime(Estimate(s->timings).row_ms / 1e3);
    }
    // A later window's process (session.child) takes none: it hands back
    // only its samples (SampleWindowInChild), and its probes had cost the
    // default run about 20 s for nothing.
    if (!memory_pass && !s->row.big && !s->timings.row_ms.empty() && !s->session->child) {
      // The kernels' share: kProbesPerRow probes of one sample's worth of
      // runs (two at least), untimed as samples (EngineTime uses the one
      // with the least kernel time).
      RunOptions probed = options;
      probed.time_kernels = true;
      if (s->row.variant.is_cap()) probed.memory_cap_bytes = s->memory_cap_bytes;
      for (int i = 0; i < kProbesPerRow; ++i) {
        TimeRuns(*s->engine, s->program, c, probed, std::max<int64_t>(2, s->runs_per_sample),
                 nullptr, &s->timed);
      }
    }
  } catch (const std::exception& e) {
    s->error = e.what();
    state.SkipWithError(s->error.c_str());
    return;
  }
  if (memory_pass) return;
  const RowEstimate estimate = Estimate(s->timings);
  SetCounters(state, *s, s->stats.peak_bytes,
              s->stats.flops_forward + s->stats.flops_recomputed + s->stats.flops_backward,
              estimate.row_ms / 1e3);
  state.counters["samples"] = static_cast<double>(estimate.samples);
  if (estimate.spread) state.counters["spread_pct"] = 100 * *estimate.spread;
  if (s->timings.paired()) state.counters["vs_eager"] = estimate.value;
  if (const std::optional<double> overhead = s->timed.OverheadFraction()) {
    state.counters["overhead_pct"] = 100 * *overhead;
  }
}

}  // namespace remat::bench
