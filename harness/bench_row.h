// One row of the bench as Google Benchmark runs it (RowState): its set-up,
// its samples paired with eager's (SamplePaired), its counters; and the
// engines' rows (RunValueAndGrad). The matmul bound's rows:
// harness/bench_matmul_bound.h.
#ifndef REMAT_HARNESS_BENCH_ROW_H_
#define REMAT_HARNESS_BENCH_ROW_H_

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/program.h"
#include "engines/onednn/matmul_calls.h"
#include "engines/onednn/onednn_kernels.h"
#include "harness/bench_lib.h"
#include "harness/bench_plan.h"
#include "harness/bench_sampling.h"
#include "harness/bench_session.h"
#include "harness/cpu_link.h"
#include "harness/run_delay.h"
#include "harness/stream_rate.h"

namespace remat::bench {

// What a row keeps between the calls Google Benchmark makes (one per
// iteration-count trial, per repetition, and the memory pass).
struct RowState {
  PlannedRow row;
  BenchSession* session = nullptr;  // Main's
  bool ready = false;
  std::string error;  // set up failed: every later call reports it at once
  // kValueAndGrad
  std::unique_ptr<Engine> engine;
  Program program;
  Stats stats;  // of the warm-up run (all but the times repeat exactly)
  // Every sample (warm: set-up ran one already): the row's and, paired,
  // eager's next to it; each the mean of runs_per_sample runs.
  Timings timings;
  int64_t runs = 0;  // timed runs of the row
  int64_t runs_per_sample = 1;
  int window = 1;  // the last window that sampled the row (--windows)
  double weight = kPairFloorSeconds;  // SamplingWeight: its share of the budget
  // Paired with eager on the case as written (the session's baselines', taken again at
  // every call: the cache holds one case, and repetitions may interleave).
  bool paired = false;
  int64_t eager_flops = 0;  // paired: one eager run's total
  EngineTime timed;  // the row's own timed runs (first window)
  std::vector<std::string> matmul_impls;  // what the row's own runs executed
  double sampling_seconds = 0;
  // cap: rows, their RunOptions::memory_cap_bytes; budget-under-cap: rows,
  // the cap and the budget B found under it.
  int64_t memory_cap_bytes = 0;
  int64_t budget_bytes = 0;
  // kMatMulBound: eager's contractions on the case (its matmuls and
  // convolutions, IsContraction), replayed in eager's order, on operands
  // and into outputs that alias as eager's did (harness/bench_plan.h,
  // kMatMulBound).
  struct BoundCall {
    KernelOp op;
    KernelAttrs attrs;
    std::vector<Tensor> operands;
    Tensor out;
  };
  std::unique_ptr<OneDnnKernels> kernels;
  std::shared_ptr<MemoryTracker> tracker;
  std::vector<BoundCall> bound_calls;
  int64_t flops = 0;  // of one pass over bound_calls
  // Eager's other kernels at the stream rate (RowResult::stream_floor_ms);
  // unset in a later window's process, whose parent has it.
  std::optional<StreamFloor> stream_floor;
};

// Sets up the row on its first call; false (after SkipWithError) if that
// failed, now or before.
bool EnsureReady(benchmark::State& state, RowState* s);

void SetCounters(benchmark::State& state, const RowState& s, int64_t peak_bytes,
                 int64_t total_flops, double seconds);

// One sample: the mean wall time of one run, in ms, and the run delay the
// process saw meanwhile, as a share of the wall time (Timings).
struct Sample {
  double ms = 0;
  double delay = 0;
};

// Times `runs` calls of `work` together (ProcessRunDelayNs is read around
// them, outside the timing).
template <typename Work>
Sample TimeSample(int64_t runs, Work work) {
  const int64_t delay_before = ProcessRunDelayNs();
  const Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < runs; ++i) work(i);
  const double seconds = SecondsSince(start);
  const int64_t delay_after = ProcessRunDelayNs();
  Sample sample;
  sample.ms = 1e3 * seconds / static_cast<double>(runs);
  if (delay_before >= 0 && delay_after >= 0 && seconds > 0) {
    sample.delay = 1e-9 * static_cast<double>(delay_after - delay_before) / seconds;
  }
  return sample;
}

// `runs` runs of `engine` on the case, timed together. Each result is
// released inside the timing (freeing is part of a run). `stats`, if given,
// gets the last run's stats; `time`, if given, adds the runs' wall time (the
// sample's) to the timed runs, or, probed (options.time_kernels), adds them
// as a probe with what the engine reports of its kernels.
Sample TimeRuns(Engine& engine, const Program& program, const Case& c,
                const RunOptions& options, int64_t runs, Stats* stats = nullptr,
                EngineTime* time = nullptr);

// Adds the impls `recorder` saw to `impls`, those not there yet.
void AddImpls(const MatMulRecorder& recorder, std::vector<std::string>* impls);

// Samples the row until SamplingDone under `rule`: `time_row()` takes one
// sample of the row (into s->timings.row_ms and row_delay) and, with a
// baseline, one of eager is taken next to it; `run_row()` runs the row once,
// untimed. Each pair's runs are PairRuns': each timed run follows a run of
// its own side, and the side that goes first alternates. The two timed runs
// of a pair are then milliseconds apart (Estimate).
template <typename TimeRow, typename RunRow>
void SamplePaired(RowState* s, const Baseline* baseline, const Case& c,
                  const RunOptions& eager_options, const SamplingRule& rule, TimeRow time_row,
                  RunRow run_row) {
  const Clock::time_point start = Clock::now();
  Timings& t = s->timings;
  auto time_eager = [&] {
    const Sample sample =
        TimeRuns(*baseline->engine, c.program, c, eager_options, baseline->runs_per_sample);
    t.eager_ms.push_back(sample.ms);
    t.eager_delay.push_back(sample.delay);
  };
  auto run_eager = [&] {
    const Result r = baseline->engine->ValueAndGrad(c.program, c.inputs, c.wrt, eager_options);
    benchmark::DoNotOptimize(r.value.raw());
  };
  // The side of the last run: none yet in this call (other rows ran before).
  std::optional<PairSide> before;
  // Repetitions (--benchmark_repetitions) add to the samples of the last:
  // each call takes kFewestSamples afresh, and judges all of them. A later
  // window (--windows) starts afresh too, and judges only its own samples:
  // it is a second measurement, not more of the first.
  const size_t before_samples = t.row_ms.size();
  if (s->session->window > s->window && before_samples > 0) {
    t.window_starts.push_back(before_samples);
    s->window = s->session->window;
  }
  const size_t window_start = t.window_starts.empty() ? 0 : t.window_starts.back();
  double waited_seconds = 0;  // for the CPUs to come together
  do {
    // Whether the CPUs are apart, for the pair (or sample) about to be taken
    // (Timings::link_ns; samples taken elsewhere read nothing).
    BenchSession& session = *s->session;
    double link_ns = session.link.Reading();
    if (CpusApart(link_ns, session.link.reference_ns()) && session.apart_wait_left > 0) {
      const Clock::time_point wait_start = Clock::now();
      while (CpusApart(link_ns, session.link.reference_ns()) &&
             SecondsSince(wait_start) < session.apart_wait_left) {
        std::this_thread::sleep_for(CpuLinkMonitor::kCpuLinkPeriod);
        link_ns = session.link.Reading();
      }
      const double waited = SecondsSince(wait_start);
      session.apart_wait_left -= waited;
      session.apart_waited += waited;
      waited_seconds += waited;
    }
    t.link_ns.resize(t.row_ms.size(), 0);
    t.link_ns.push_back(link_ns);
    t.reference_link_ns = session.link.reference_ns();
    for (const PairRun& run : PairRuns(static_cast<int64_t>(t.row_ms.size() - before_samples),
                                       before, baseline != nullptr)) {
      if (run.side == PairSide::kEager) {
        run.timed ? time_eager() : run_eager();
      } else {
        run.timed ? time_row() : run_row();
      }
      before = run.side;
    }
  } while (t.row_ms.size() - before_samples < static_cast<size_t>(kFewestSamples) ||
           !SamplingDone(window_start == 0 ? t : SamplesFrom(t, window_start), rule,
                         SecondsSince(start) - waited_seconds));
  std::sort(s->matmul_impls.begin(), s->matmul_impls.end());
  const double sampled = SecondsSince(start) - waited_seconds;
  s->sampling_seconds += sampled;
  // Past its cap a row sampled because it was short of quiet pairs
  // (SamplingRule::stretched_max_seconds): that stretch, like waiting, is
  // outside the budget, or the rows after a stretched one would be left
  // the fewer pairs.
  s->session->sampled_seconds += std::min(sampled, rule.max_seconds);
}

// A row is one Google Benchmark iteration (Iterations(1)): its whole
// sampling, whose estimate (the least quiet time of one run) is the iteration's
// manual time. The library's own iteration-count search would only decide
// how many runs to average, which is what the sampling rule decides here.
void RunValueAndGrad(benchmark::State& state, RowState* s);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_ROW_H_
