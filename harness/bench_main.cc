// //harness:bench: every problem on every engine (and policy), timed with
// Google Benchmark; a summary table at the end; JSON into results/.
//
//   tools/bazel run //harness:bench
//   tools/bazel run //harness:bench -- --sweep=depth
//   tools/bazel run //harness:bench -- --sweep=schedules
//   tools/bazel run //harness:bench -- --sweep=scale
//   tools/bazel run //harness:bench -- --engines=eager,recompute --benchmark_filter=scan_stack
//
// Flags: harness/bench_flags.h (BenchHelp); Google Benchmark's own flags pass
// through. The rows are planned in harness/bench_plan.h, sampled by the rules
// of harness/bench_sampling.h, judged in harness/bench_lib.h and
// harness/bench_controls.h, written and printed by harness/bench_report.h;
// this file runs them.

#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "engines/onednn/kernel_traffic.h"
#include "engines/onednn/matmul_calls.h"
#include "engines/onednn/omp_wait.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/platform.h"
#include "harness/bench_controls.h"
#include "harness/bench_lib.h"
#include "harness/bench_report.h"
#include "harness/case_spec.h"
#include "harness/cpu_link.h"
#include "harness/memory_caps.h"
#include "harness/stream_rate.h"
#include "harness/case_directory.h"
#include "harness/conformance.h"
#include "engines/api/policy.h"
#include "problems/problem.h"
#include "problems/program_file.h"

extern char** environ;

namespace remat::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Feeds Google Benchmark's memory measurement from the MemoryTracker: the
// library brackets one extra, untimed pass of each row with Start and Stop,
// and the row reports its warm-up run's Stats.peak_bytes here (the peak is the
// same every run: the tracker counts what the schedule allocates, not the
// heap, so the pass need not run the row again). max_bytes_used is then the
// tracker's high-water mark (arguments, activations, gradients and oneDNN's
// scratchpad), not the process heap. Allocations are not counted.
class TrackerMemoryManager : public benchmark::MemoryManager {
 public:
  void Start() override {
    active_ = true;
    max_bytes_ = 0;
  }
  void Stop(Result& result) override {
    active_ = false;
    result.max_bytes_used = max_bytes_;
  }
  // The 1.7.1 interface still requires the deprecated pointer form.
  void Stop(Result* result) override { Stop(*result); }

  bool active() const { return active_; }
  void Record(int64_t peak_bytes) { max_bytes_ = std::max(max_bytes_, peak_bytes); }

 private:
  bool active_ = false;
  int64_t max_bytes_ = 0;
};

// The least time a matmul bound row is sampled (RunMatMulBound).
constexpr double kBoundMinSeconds = 1.0;

// The case (program, seeded inputs) of the rows now running. Rows are
// registered grouped by case, so consecutive rows share it (--sweep=scale's
// 4 GiB of weights are made once for all its rows); only one is held, so that
// a sweep's large cases are not all alive at once. The inputs differentiated
// are the row's (CaseSpec::wrt: --wrt; empty: the case's own), which every
// row of a case shares.
class CaseCache {
 public:
  const Case& Get(const PlannedRow& row) {
    if (!case_ || key_ != row.case_key) {
      case_.reset();  // free the previous inputs before making the next
      ParamValues params(row.params.begin(), row.params.end());
      if (row.program_file.empty()) {
        case_ = std::make_unique<Case>(MakeCase(FindProblem(row.problem), params, /*seed=*/1));
      } else {
        std::shared_ptr<const Problem> file = ProgramFileProblem::Read(row.program_file);
        case_ = std::make_unique<Case>(MakeCase(*file, params, /*seed=*/1));
        case_->owner = std::move(file);
      }
      case_->wrt = WrtFromFlags(row.wrt, case_->program, case_->wrt);
      key_ = row.case_key;
    }
    return *case_;
  }

 private:
  std::string key_;
  std::unique_ptr<Case> case_;
};

// The eager engine the rows of one case are paired with, warmed up once:
// made per case rather than per row, so that each row does not pay eager's
// warm-up (and its primitive creation) again. Like CaseCache, one at a time.
struct Baseline {
  std::unique_ptr<Engine> engine;
  int64_t runs_per_sample = 1;
  int64_t flops = 0;  // one run's total
};

class BaselineCache {
 public:
  // The warmed-up baseline of `row`'s case; throws what its warm-up threw
  // (eager past --max-memory: the row then runs unpaired).
  const Baseline& Get(const PlannedRow& row, const Case& c, const RunOptions& options) {
    if (key_ != row.case_key) {
      baseline_ = Baseline();
      key_.clear();
      baseline_.engine = MakeEngine(kBaselineEngine);
      const Clock::time_point start = Clock::now();
      const Result warm = baseline_.engine->ValueAndGrad(c.program, c.inputs, c.wrt, options);
      baseline_.runs_per_sample = RunsPerSample(SecondsSince(start));
      baseline_.flops =
          warm.stats.flops_forward + warm.stats.flops_recomputed + warm.stats.flops_backward;
      key_ = row.case_key;
    }
    return baseline_;
  }

 private:
  std::string key_;
  Baseline baseline_;
};

// Progress for sweeps: "[k/n] name" on stderr as each row starts.
struct Progress {
  bool enabled = false;
  int started = 0;
  int total = 0;
};

// What the rows of one bench process share, owned by Main and handed to
// every row (RowState::session) rather than kept in globals: the settings
// the flags give, set before any row runs, and what the rows share as they
// run (the case and its eager baseline, held one at a time; the memory pass;
// the sampling budget spent).
struct BenchSession {
  // The flags'.
  int64_t max_memory_bytes = 0;  // --max-memory: every run of a row gets it (RunOptions)
  bool paired = true;            // not --unpaired
  SamplingRule rule;             // DefaultSamplingRule(), --max-row-seconds
  double sampling_budget = 0;    // --sampling-budget; 0: none
  int windows = 1;               // --windows
  bool child = false;            // --only-window: a later window's own process
  // Shared as the rows run.
  TrackerMemoryManager memory;
  CaseCache cases;
  BaselineCache baselines;
  // The baseline's mean time per case, for Google Benchmark's vs_eager
  // counter of the rows that follow it (the JSON's vs_eager is computed
  // again at the end).
  std::map<std::string, double> baseline_ms;
  std::map<std::string, double> weight_by_case;  // RowWeight's, once per case
  Progress progress;
  int window = 1;              // the window being sampled, 1..windows
  double sampled_seconds = 0;  // by every row so far
  double window_weight = 0;    // SamplingWeight of the rows --benchmark_filter selects
  double weight_left = 0;      // of those not yet started in this window
  CpuLinkMonitor link;         // the CPUs' round trip, read before samples
  double apart_wait_left = 0;  // seconds this process may still wait (kApartWaitSeconds)
  double apart_waited = 0;     // seconds it waited
};

void ReportStart(BenchSession& session, const PlannedRow& row) {
  Progress& p = session.progress;
  if (!p.enabled) return;
  std::cerr << "[" << ++p.started << "/" << p.total << "] " << row.name << std::endl;
}

// The fewest samples (pairs) a row takes, whatever its time cap: a median
// and a spread. Beyond them SamplingDone decides: rule.min_samples quiet
// ones and a narrow spread, or the cap. The cap wins over min_samples so
// that a neighbour that slows every run several times over cannot stretch
// the run: its rows stop early, flagged or with a wide spread.
constexpr int64_t kFewestSamples = 3;

// Samples taken with the CPUs apart do not count (CpusApart), so a row does
// not take them: it waits for the CPUs to come together, reading their
// round trip every CpuLinkMonitor::kCpuLinkPeriod, asleep. The hypervisor
// keeps them apart for stretches of 15 to 40 s on the machine of
// harness/cpu_link.h, a third of the time, so a run may wait this long in
// all, or a quarter of its sampling budget if that is less (each window its
// share); then rows sample whatever the state, and those that got too few
// quiet pairs are flagged. Waiting is not sampling: it counts toward
// neither the row's time cap nor the sampling budget. (A neighbour that
// keeps a CPU busy slows the reading too, so a busy machine waits as well.)
constexpr double kApartWaitSeconds = 120;
double ApartWaitSeconds(double sampling_budget_seconds) {
  return sampling_budget_seconds > 0 ? std::min(kApartWaitSeconds, sampling_budget_seconds / 4)
                                     : kApartWaitSeconds;
}

// The rule for the next row: the session's, its time cap cut to its fair share of
// what is left of the sampling budget: that left to the window, over the
// rows the window has still to sample, this one included (nothing left: the
// row stops at kFewestSamples). Window w of N may have sampled w/N of the
// budget by its end: a window that ran short leaves its time to the next.
// A fair share rather than first come, first served: the rows that settle
// fast leave their time to the rows after them, and no row takes what the
// rows after it need for their fewest samples (with the whole remainder on
// offer, the first slow rows took all of it and the last problems of the
// run were left 3 pairs). A row short of quiet pairs at its cap may go on to
// kCapStretch times it (SamplingRule::quiet_samples_at_cap); SamplePaired
// counts that stretch outside the budget.
SamplingRule RuleNow(BenchSession& session, double weight) {
  SamplingRule rule = session.rule;
  const double weight_left = session.weight_left;
  session.weight_left = std::max(0.0, session.weight_left - weight);
  if (session.sampling_budget <= 0) return rule;
  const double left =
      session.sampling_budget * session.window / session.windows - session.sampled_seconds;
  rule.max_seconds = std::min(rule.max_seconds, SampleShareSeconds(left, weight, weight_left));
  if (rule.quiet_samples_at_cap > 0) rule.stretched_max_seconds = kCapStretch * rule.max_seconds;
  return rule;
}

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
  // kMatMulBound: eager's matmuls on the case, in eager's order, on
  // operands and into outputs that alias as eager's did
  // (harness/bench_plan.h, kMatMulBound).
  struct BoundCall {
    Tensor a, b, out;
    bool transpose_a = false, transpose_b = false;
  };
  std::unique_ptr<OneDnnKernels> kernels;
  std::shared_ptr<MemoryTracker> tracker;
  std::vector<BoundCall> bound_calls;
  int64_t flops = 0;  // of one pass over bound_calls
  // Eager's other kernels at the stream rate (RowResult::stream_floor_ms);
  // unset in a later window's process, whose parent has it.
  std::optional<StreamFloor> stream_floor;
};

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

// One pass over eager's matmuls (RowState::bound_calls), each product
// written into the buffer that stands for the address eager wrote it to.
void RunCaseMatMuls(RowState& s) {
  for (const RowState::BoundCall& c : s.bound_calls) {
    Tensor out = s.kernels->MatMulInto(c.out, c.a, c.transpose_a, c.b, c.transpose_b);
    benchmark::DoNotOptimize(out.raw());
  }
}

void SetUpMatMulBound(RowState* s) {
  const Case& c = s->session->cases.Get(s->row);
  // Eager's matmuls on the case, from one run of it, with where each
  // operand's elements were.
  std::vector<RecordedMatMul> calls;
  KernelTrafficByName traffic;
  int64_t eager_peak_bytes = 0;
  {
    MatMulRecorder recorder(MatMulRecorder::Detail::kCalls);
    KernelTrafficRecorder traffic_recorder;
    RunOptions options;
    options.max_memory_bytes = s->session->max_memory_bytes;
    eager_peak_bytes =
        MakeEngine(kBaselineEngine)->ValueAndGrad(c.program, c.inputs, c.wrt, options).stats.peak_bytes;
    calls = recorder.calls();
    traffic = traffic_recorder.traffic();
  }
  // Measured once, by the first window's process (about 50 ms a kernel).
  if (!s->session->child) {
    const StreamFloor floor =
        NonMatMulStreamFloor(traffic, eager_peak_bytes);
    if (floor.bytes > 0) s->stream_floor = floor;
  }
  if (calls.empty()) {
    throw Error(StrCat("matmul bound: eager makes no matmul on ", c.ToString()));
  }
  s->kernels = std::make_unique<OneDnnKernels>();
  s->tracker = std::make_shared<MemoryTracker>();
  s->kernels->Bind(s->tracker);
  // One buffer per address eager's matmuls read or wrote, as large as the
  // largest operand or output there: where eager read one buffer twice (a
  // weight in the forward and the backward), the replay does too; where
  // eager read L weights, so does the replay, from memory rather than
  // cache; and where eager wrote L activations it keeps for the backward,
  // the replay writes L buffers, not one output buffer that the allocator
  // hands back hot after every call (README: the bound's outputs).
  std::map<const void*, int64_t> elements_at;
  for (const RecordedMatMul& call : calls) {
    const Shape out_shape = Kernels::MatMulShape(call.call.a, call.call.transpose_a,
                                                 call.call.b, call.call.transpose_b);
    for (const auto& [data, shape] :
         {std::pair{call.a_data, call.call.a}, std::pair{call.b_data, call.call.b},
          std::pair{call.out_data, out_shape}}) {
      int64_t& n = elements_at[data];
      n = std::max(n, shape.num_elements());
    }
  }
  // Values in [-1, 1): the same arithmetic the problems' inputs make (no
  // zeros or denormals that some kernels might shortcut).
  uint64_t state = 1;
  std::map<const void*, Tensor> buffer_at;
  for (const auto& [data, n] : elements_at) {
    Tensor t = Tensor::Zeros(DType::kF32, Shape({n}), s->tracker, Category::kInputs);
    float* values = t.f32();
    for (int64_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      values[i] = static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-52 - 1.0);
    }
    buffer_at.emplace(data, std::move(t));
  }
  for (const RecordedMatMul& call : calls) {
    const Shape out_shape = Kernels::MatMulShape(call.call.a, call.call.transpose_a,
                                                 call.call.b, call.call.transpose_b);
    s->bound_calls.push_back({buffer_at.at(call.a_data).View(0, call.call.a),
                              buffer_at.at(call.b_data).View(0, call.call.b),
                              buffer_at.at(call.out_data).View(0, out_shape),
                              call.call.transpose_a, call.call.transpose_b});
  }
  // Warm-up: creates the primitives and counts the FLOPs, as the engines
  // count them.
  s->kernels->reset_flops();
  const Clock::time_point start = Clock::now();
  RunCaseMatMuls(*s);
  s->runs_per_sample = RunsPerSample(SecondsSince(start));
  s->flops = s->kernels->flops();
  if (s->session->paired) {
    // Eager ran above, so it runs here too (the same options as the rows').
    RunOptions options;
    options.max_memory_bytes = s->session->max_memory_bytes;
    s->eager_flops = s->session->baselines.Get(s->row, c, options).flops;
    s->paired = true;
  }
}

// Sets up the row on its first call; false (after SkipWithError) if that
// failed, now or before.
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
                EngineTime* time = nullptr) {
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

// Adds the impls `recorder` saw to `impls`, those not there yet.
void AddImpls(const MatMulRecorder& recorder, std::vector<std::string>* impls) {
  for (const std::string& impl : recorder.impls()) {
    if (std::find(impls->begin(), impls->end(), impl) == impls->end()) impls->push_back(impl);
  }
}

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

// A row is one Google Benchmark iteration (Iterations(1)): its whole
// sampling, whose estimate (the least quiet time of one run) is the iteration's
// manual time. The library's own iteration-count search would only decide
// how many runs to average, which is what the sampling rule decides here.
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
    if (!memory_pass && !s->row.big && !s->timings.row_ms.empty()) {
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

void RunMatMulBound(benchmark::State& state, RowState* s) {
  if (!EnsureReady(state, s)) return;
  const bool memory_pass = s->session->memory.active();
  // Eager's runs beside the bound's: as the rows' pairs run them.
  RunOptions options;
  options.max_memory_bytes = s->session->max_memory_bytes;
  options.predict_memory = false;
  options.time_kernels = false;
  try {
    const Case& c = s->session->cases.Get(s->row);
    for (auto _ : state) {
      if (memory_pass) {
        state.SetIterationTime(0);
        continue;
      }
      // Sampled by the same rule as the rows, paired with eager like them:
      // eager's share of its matmuls' time is then the median of pairs
      // taken milliseconds apart, not two least times taken seconds apart
      // while the machine's speed drifted (mlp_chain's eager moved 25.8 to
      // 31.0 ms between three back-to-back engine_loop runs). For at least
      // kBoundMinSeconds: every row of its case is checked against it, a
      // bound taken while a neighbour ran would flag them all, and its
      // samples are milliseconds, so a second more costs little.
      SamplingRule rule = RuleNow(*s->session, s->weight);
      rule.min_seconds = std::max(rule.min_seconds, kBoundMinSeconds);
      rule.max_samples = std::max<int64_t>(rule.max_samples, 1000);
      SamplePaired(s, s->paired ? &s->session->baselines.Get(s->row, c, options) : nullptr, c,
                   options, rule, [&] {
                     MatMulRecorder recorder;
                     const Sample sample =
                         TimeSample(s->runs_per_sample, [&](int64_t) { RunCaseMatMuls(*s); });
                     s->timings.row_ms.push_back(sample.ms);
                     s->timings.row_delay.push_back(sample.delay);
                     s->runs += s->runs_per_sample;
                     AddImpls(recorder, &s->matmul_impls);
                   },
                   [&] { RunCaseMatMuls(*s); });
      state.SetIterationTime(Estimate(s->timings).row_ms / 1e3);
    }
  } catch (const std::exception& e) {
    s->error = e.what();
    state.SkipWithError(s->error.c_str());
    return;
  }
  if (memory_pass) {
    s->session->memory.Record(s->tracker->peak_bytes());
    return;
  }
  s->stats.peak_bytes = s->tracker->peak_bytes();
  for (int c = 0; c < kNumCategories; ++c) {
    s->stats.peak_bytes_by_category[c] = s->tracker->peak_bytes(static_cast<Category>(c));
  }
  s->stats.flops_forward = s->flops;
  const RowEstimate estimate = Estimate(s->timings);
  SetCounters(state, *s, s->tracker->peak_bytes(), s->flops, estimate.row_ms / 1e3);
  state.counters["samples"] = static_cast<double>(estimate.samples);
  if (estimate.spread) state.counters["spread_pct"] = 100 * *estimate.spread;
}

// Hands every run on to the reporter --benchmark_format chose, and keeps
// what the JSON and the summary need.
class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  struct Collected {
    std::vector<double> times_ms;  // per repetition
    int64_t iterations = 0;
    std::optional<double> mean_ms;  // the "mean" aggregate, with repetitions
    int64_t max_bytes_used = -1;
    std::string error;
  };

  explicit CollectingReporter(benchmark::BenchmarkReporter* display) : display_(display) {}

  bool ReportContext(const Context& context) override { return display_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) Collect(run);
    display_->ReportRuns(runs);
  }
  void Finalize() override { display_->Finalize(); }

  const std::map<std::string, Collected>& collected() const { return collected_; }

 private:
  static double ToMs(double value, benchmark::TimeUnit unit) {
    switch (unit) {
      case benchmark::kNanosecond:
        return value * 1e-6;
      case benchmark::kMicrosecond:
        return value * 1e-3;
      case benchmark::kMillisecond:
        return value;
      case benchmark::kSecond:
        return value * 1e3;
    }
    return value;
  }

  void Collect(const Run& run) {
    // The name as registered, without "/manual_time" or repetition suffixes.
    Collected& c = collected_[run.run_name.function_name];
    if (run.error_occurred) {
      c.error = run.error_message;
      return;
    }
    if (run.run_type == Run::RT_Aggregate) {
      if (run.aggregate_name == "mean") c.mean_ms = ToMs(run.GetAdjustedRealTime(), run.time_unit);
      return;
    }
    c.times_ms.push_back(ToMs(run.GetAdjustedRealTime(), run.time_unit));
    c.iterations += run.iterations;
    if (run.memory_result) c.max_bytes_used = run.memory_result->max_bytes_used;
  }

  benchmark::BenchmarkReporter* display_;
  std::map<std::string, Collected> collected_;
};

// Whether Google Benchmark's --benchmark_filter selects `name` (its regex is
// POSIX extended; a leading '-' negates; empty or "all" selects all), to
// count a sweep's rows.
bool FilterSelects(std::string filter, const std::string& name) {
  if (filter.empty() || filter == "all") filter = ".";
  bool negate = false;
  if (filter[0] == '-') {
    negate = true;
    filter = filter.substr(1);
  }
  try {
    return std::regex_search(name, std::regex(filter, std::regex::extended)) != negate;
  } catch (const std::regex_error&) {
    return true;  // the library reports a bad filter itself
  }
}

RowResult MakeResult(const RowState& s, const CollectingReporter::Collected& c) {
  RowResult r;
  r.row = s.row;
  r.error = c.error;
  // The timed runs (a sample may average several), not Google Benchmark's
  // iterations (one per row and repetition).
  r.iterations = s.runs;
  const std::vector<double>& samples = s.timings.row_ms;
  if (!samples.empty()) {
    double sum = 0;
    for (double t : samples) sum += t;
    r.mean_time_ms = sum / static_cast<double>(samples.size());
    r.median_time_ms = Median(samples);
    // The least quiet time and the median of quiet pairs' ratios: see
    // RowEstimate.
    const RowEstimate estimate = Estimate(s.timings);
    r.real_time_ms = estimate.row_ms;
    r.samples = estimate.samples;
    r.spread = estimate.spread;
    r.quiet = estimate.quiet;
    r.quiet_samples = estimate.quiet_samples;
    if (s.timings.paired()) {
      r.vs_eager_paired = estimate.value;
      r.pair_time_ms = estimate.pair_row_ms;
      r.paired_eager_ms = estimate.pair_eager_ms;
      r.eager_flops = s.eager_flops;
    }
  } else if (!c.times_ms.empty()) {
    r.real_time_ms = r.median_time_ms = r.mean_time_ms = c.times_ms.front();
  }
  r.matmul_impls = s.matmul_impls;
  if (s.stream_floor) {
    r.stream_floor_ms = 1e3 * s.stream_floor->seconds;
    r.stream_floor_bytes = s.stream_floor->bytes;
  }
  r.memory_cap_bytes = s.memory_cap_bytes;
  r.budget_bytes = s.budget_bytes;
  r.sampling_seconds = s.sampling_seconds;
  r.timings = s.timings;
  if (s.timings.paired() && !s.timings.window_starts.empty()) {
    for (const RowEstimate& w : WindowEstimates(s.timings)) {
      if (w.quiet_samples >= kMinQuietSamples) {
        r.window_values.push_back(w.value);
        r.window_spreads.push_back(w.spread.value_or(0));
      }
    }
  }
  r.max_bytes_used = c.max_bytes_used;
  r.peak_bytes = s.stats.peak_bytes;
  r.peak_bytes_by_category = s.stats.peak_bytes_by_category;
  r.predicted_peak_bytes = s.stats.predicted_peak_bytes;
  r.residual_bytes = s.stats.residual_bytes;
  r.flops_forward = s.stats.flops_forward;
  r.flops_recomputed = s.stats.flops_recomputed;
  r.flops_backward = s.stats.flops_backward;
  if (r.real_time_ms > 0) r.gflops = static_cast<double>(r.total_flops()) / (r.real_time_ms * 1e6);
  r.overhead_fraction = s.timed.OverheadFraction();
  // From the row's time (the least quiet sample), as x eager is.
  r.overhead_ns_per_call = s.timed.OverheadNsPerCall(
      r.real_time_ms > 0 ? std::optional<double>(r.real_time_ms / 1e3) : std::nullopt);
  return r;
}

// SamplingWeight of a row: from one eager run's FLOPs on its case, planned on
// shapes alone (a dry run: milliseconds), once per case. A bound row weighs
// its second of samples; big rows (one run) and program files (no problem to
// build) weigh the floor.
double RowWeight(BenchSession& session, const PlannedRow& row) {
  std::map<std::string, double>& by_case = session.weight_by_case;
  if (row.kind == RowKind::kMatMulBound) return kBoundMinSeconds;
  if (row.big || !row.program_file.empty()) {
    return SamplingWeight(0);
  }
  auto it = by_case.find(row.case_key);
  if (it != by_case.end()) return it->second;
  double weight = SamplingWeight(0);
  try {
    const Problem& problem = FindProblem(row.problem);
    const ParamValues values(row.params.begin(), row.params.end());
    const Program program = problem.Build(values);
    RunOptions options;
    options.plan_only = true;
    const Stats s = MakeEngine(kBaselineEngine)
                        ->ValueAndGrad(program, ShapeOnlyArguments(program),
                                       WrtIndices(problem, program), options)
                        .stats;
    weight = SamplingWeight(s.flops_forward + s.flops_recomputed + s.flops_backward);
  } catch (const std::exception&) {
    // The row reports its error when it runs; here it weighs the floor.
  }
  by_case.emplace(row.case_key, weight);
  return weight;
}

// Samples window `window` in a process of its own (this binary, with
// --only-window=K and a scratch --out) and adds each row's samples to its
// state as a window of its own (Timings::window_starts). Returns the
// seconds the child sampled; throws remat::Error if it failed.
double SampleWindowInChild(const std::vector<std::string>& args, int window,
                           const std::vector<std::unique_ptr<RowState>>& states) {
  char dir_template[] = "/tmp/remat-bench-window-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) throw Error("cannot create a scratch directory for the window's process");
  std::vector<std::string> child_args = args;
  child_args.push_back(StrCat("--only-window=", window));
  child_args.push_back(StrCat("--out=", dir));
  std::vector<char*> argv;
  for (std::string& a : child_args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) {
    std::filesystem::remove_all(dir);
    throw Error("cannot start the window's process");
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const std::filesystem::path latest = std::filesystem::path(dir) / "latest.json";
  nlohmann::json run;
  {
    std::ifstream in(latest);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !in) {
      std::filesystem::remove_all(dir);
      throw Error(StrCat("its process failed (status ", status, ")"));
    }
    run = nlohmann::json::parse(in);
  }
  std::filesystem::remove_all(dir);
  std::map<std::string, const nlohmann::json*> rows;
  for (const nlohmann::json& row : run["rows"]) rows[row["name"].get<std::string>()] = &row;
  double seconds = 0;
  for (const auto& s : states) {
    auto it = rows.find(s->row.name);
    if (it == rows.end()) continue;
    const nlohmann::json& row = *it->second;
    const nlohmann::json& samples = row["samples_ms"];
    if (samples["row"].empty()) continue;
    Timings& t = s->timings;
    if (!t.row_ms.empty()) t.window_starts.push_back(t.row_ms.size());
    auto append = [&samples](const char* key, std::vector<double>* to) {
      for (const nlohmann::json& v : samples[key]) to->push_back(v.get<double>());
    };
    append("row", &t.row_ms);
    append("eager", &t.eager_ms);
    append("row_delay", &t.row_delay);
    append("eager_delay", &t.eager_delay);
    // Readings line up with the samples they were taken for (the first
    // window's rows may have samples without one).
    t.link_ns.resize(t.row_ms.size() - samples["row"].size(), 0);
    if (samples.contains("link_ns")) {
      // The window's readings count toward the run's reference, each once:
      // a reading stands for every sample taken within kCpuLinkPeriod of
      // it, so a run of equal values is one reading.
      double last = 0;
      for (const nlohmann::json& v : samples["link_ns"]) {
        const double ns = v.get<double>();
        if (ns != last) s->session->link.Saw(ns);
        last = ns;
        t.link_ns.push_back(ns);
      }
    }
    s->window = window;
    s->runs += row["iterations"].get<int64_t>();
    s->sampling_seconds += row["sampling_seconds"].get<double>();
    seconds += row["sampling_seconds"].get<double>();
  }
  return seconds;
}

// Runs `command` through the shell; returns its exit status and its output
// (stdout and stderr together).
int Capture(const std::string& command, std::string* output) {
  output->clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The field's engines (--peer) on the run's peer cases: for every eager row
// of a kPeerProblems problem, the case as written and under
// everything_saveable (no checkpointing), written as remat conform writes a
// case (program.txt, <input>.npy, case.json) with eager's inputs, and timed
// by tools/peer_time.py in the workspace's .venv (or $REMAT_VENV). Each peer
// row's time is its least run, as the bench's rows', and vs_eager is that
// over the eager row's time in this run. A peer that is not installed, that
// refuses a case (unsupported) or fails is a row with the error: the run
// goes on.
void AddPeerRows(const std::vector<RowResult>& results, const std::vector<std::string>& peers,
                 nlohmann::json* run, std::ostream& out) {
  namespace fs = std::filesystem;
  const std::string root = WorkspaceDir();
  const char* venv = std::getenv("REMAT_VENV");
  const std::string python = StrCat(venv ? std::string(venv) : root + "/.venv", "/bin/python");
  const std::string script = root + "/tools/peer_time.py";
  (*run)["peer"] = {{"engines", peers}, {"python", python}, {"script", script}};
  if (!fs::exists(python)) {
    out << "\npeer: " << python << " not found (tools/python_env.sh makes .venv with JAX and "
        << "PyTorch); no peer rows\n";
    (*run)["peer"]["error"] = python + " not found";
    return;
  }
  std::string pattern = (fs::temp_directory_path() / "remat-peer-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw Error("peer: cannot create a temporary directory");
  const fs::path tmp = pattern;
  out << "\npeer: " << python << " " << script << " --engine {" << Join(peers, ",")
      << "} (least of 5 runs after 2 warm-ups)\n";
  for (const RowResult& r : results) {
    if (!IsBaselineRow(r.row) || !r.error.empty() || !r.row.program_file.empty() ||
        r.row.kind != RowKind::kValueAndGrad ||
        std::find(std::begin(kPeerProblems), std::end(kPeerProblems), r.row.problem) ==
            std::end(kPeerProblems)) {
      continue;
    }
    const ParamValues params(r.row.params.begin(), r.row.params.end());
    nlohmann::json params_json = nlohmann::json::object();
    std::string params_text;
    for (const auto& [name, value] : r.row.params) {
      params_json[name] = value;
      params_text += StrCat(params_text.empty() ? "" : ",", name, "=", value);
    }
    for (const CaseVariant& v : {CaseVariant(), CaseVariant::OfPolicy("everything_saveable")}) {
      const std::string variant = v.Label();
      Case c = MakeCase(FindProblem(r.row.problem), params, /*seed=*/1);  // eager's row's inputs
      c.program = v.Apply(c.program);
      const fs::path dir = tmp / StrCat(r.row.problem, ".", params_text, ".", variant);
      WriteCaseDirectory(c, v, dir.string());
      for (const std::string& peer : peers) {
        nlohmann::json row = {{"name", StrCat("peer/", r.row.problem, "/", params_text, "/", peer, "/",
                                              variant)},
                              {"problem", r.row.problem},
                              {"params", params_json},
                              {"engine", peer},
                              {"policy", variant},
                              {"peer", true}};
        std::string output;
        const int status = Capture(StrCat(python, " ", script, " --engine ", peer, " --repeats 5 '",
                                          dir.string(), "'"),
                                   &output);
        const size_t last = output.find_last_of('\n', output.size() >= 2 ? output.size() - 2 : 0);
        const std::string last_line = output.substr(last == std::string::npos ? 0 : last + 1);
        std::string shown;
        if (status == 0) {
          try {
            const nlohmann::json j = nlohmann::json::parse(last_line);
            row["real_time_ms"] = j.at("min_ms");
            row["median_time_ms"] = j.at("median_ms");
            row["times_ms"] = j.at("times_ms");
            row["compile_seconds"] = j.at("compile_seconds");
            row["version"] = j.at("version");
            row["threads"] = j.at("threads");
            row["vs_eager"] = j.at("min_ms").get<double>() / r.real_time_ms;
            char line[64];
            std::snprintf(line, sizeof line, "%9.1f ms  x eager %.2f", j.at("min_ms").get<double>(),
                          row["vs_eager"].get<double>());
            shown = line;
          } catch (const std::exception& e) {
            row["error"] = StrCat("tools/peer_time.py printed no result: ", last_line);
          }
        } else {
          std::string why = last_line;
          while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
          row["error"] = status == 77 ? why : StrCat("exit ", status, ": ", why);
        }
        if (row.contains("error")) shown = "error: " + row["error"].get<std::string>();
        out << "  " << r.row.problem << " " << params_text << "  " << peer << "/" << variant << "  "
            << shown << "\n"
            << std::flush;
        (*run)["rows"].push_back(row);
      }
    }
  }
  fs::remove_all(tmp);
}

int Main(int argc, char** argv) {
  // A short OpenMP spin on a shared machine (engines/onednn/omp_wait.h):
  // single rows ran 10-20 times slower at random under libgomp's default;
  // and the heap in huge pages, so that a case's ratios do not depend on
  // the cases run before it.
  UseMeasurementSettings(argv);
  const std::vector<std::string> args(argv, argv + argc);
  std::vector<std::string> rest;
  BenchFlags flags;
  std::vector<PlannedRow> plan;
  BenchSession session;
  try {
    flags = ParseBenchFlags(args, &rest);
    if (flags.help) std::cout << BenchHelp() << "\nGoogle Benchmark's flags:\n";
    plan = PlanRows(flags, EngineNames());
    session.max_memory_bytes = flags.max_memory_bytes;
    session.paired = flags.paired;
    session.rule = DefaultSamplingRule();
    if (flags.max_row_seconds > 0) {
      session.rule.max_seconds = flags.max_row_seconds;
      session.rule.quiet_samples_at_cap = 0;  // the user's cap is a cap
    }
    session.sampling_budget = flags.sampling_budget_seconds;
    session.windows = flags.Windows();
    session.child = flags.only_window > 0;
    session.apart_wait_left = ApartWaitSeconds(session.sampling_budget) / session.windows;
  } catch (const std::exception& e) {
    std::cerr << "bench: " << e.what() << "\n";
    return 2;
  }

  // Google Benchmark takes the rest (and prints its help and exits on --help).
  std::vector<char*> bench_argv;
  for (std::string& a : rest) bench_argv.push_back(a.data());
  int bench_argc = static_cast<int>(bench_argv.size());
  bench_argv.push_back(nullptr);
  benchmark::Initialize(&bench_argc, bench_argv.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, bench_argv.data())) return 2;
  bool console = true;
  for (const std::string& a : rest) {
    if (a.rfind("--benchmark_format=", 0) == 0 && a != "--benchmark_format=console") {
      console = false;
    }
  }

  std::vector<std::unique_ptr<RowState>> states;
  const std::string filter = benchmark::GetBenchmarkFilter();
  for (const PlannedRow& row : plan) {
    auto s = std::make_unique<RowState>();
    s->row = row;
    s->session = &session;
    RowState* raw = s.get();
    benchmark::internal::Benchmark* b =
        row.kind == RowKind::kValueAndGrad
            ? benchmark::RegisterBenchmark(row.name.c_str(), RunValueAndGrad, raw)
            : benchmark::RegisterBenchmark(row.name.c_str(), RunMatMulBound, raw);
    // Matrix problems take milliseconds; the scalar sin chains, microseconds.
    const bool matrices = std::any_of(row.params.begin(), row.params.end(),
                                      [](const auto& p) { return p.first == "d"; });
    b->UseManualTime()->Unit(matrices ? benchmark::kMillisecond : benchmark::kMicrosecond);
    // One iteration, whatever --benchmark_min_time says: the row's whole
    // sampling (RunValueAndGrad), or a big row's one run (PlannedRow::big).
    b->Iterations(1);
    // The name Google Benchmark filters: it appends the settings.
    const std::string full_name = row.name + "/iterations:1/manual_time";
    raw->weight = RowWeight(session, row);
    if (FilterSelects(filter, full_name)) {
      session.progress.total += flags.Windows();
      session.window_weight += raw->weight;
    }
    states.push_back(std::move(s));
  }
  session.progress.enabled = flags.sweep != Sweep::kNone;

  const std::time_t started = std::time(nullptr);
  // Read before the first row: the binary was built from the tree as it is
  // now, and an edit made while the run goes on is not its source.
  const nlohmann::json source = SourceInfo();
  // The default display reporter is the library's (it honours
  // --benchmark_format); it is never freed, as the library's own is not.
  CollectingReporter reporter(benchmark::CreateDefaultDisplayReporter());
  if (session.child) {
    // Window K of N: the windows before it had their share of the budget.
    session.weight_left = session.window_weight;
    session.window = flags.only_window;
    session.sampled_seconds =
        session.sampling_budget * (session.window - 1) / session.windows;
    benchmark::RunSpecifiedBenchmarks(&reporter);
  }
  for (session.window = 1; !session.child && session.window <= session.windows; ++session.window) {
    session.weight_left = session.window_weight;
    if (session.windows > 1) {
      std::cerr << "bench: window " << session.window << " of " << session.windows
                << (session.window == 1 ? " (every row; then every row again, in a process of its own: "
                                    "see --windows)"
                                  : " (in a process of its own; each row's numbers pool its "
                                    "windows)")
                << std::endl;
    }
    if (session.window == 1) {
      // The memory pass (one untimed run a row) once: its peak repeats exactly.
      benchmark::RegisterMemoryManager(&session.memory);
      benchmark::RunSpecifiedBenchmarks(&reporter);
      benchmark::RegisterMemoryManager(nullptr);
    } else {
      try {
        session.sampled_seconds += SampleWindowInChild(args, session.window, states);
      } catch (const std::exception& e) {
        std::cerr << "bench: window " << session.window << " left out: " << e.what() << "\n";
      }
    }
  }
  benchmark::Shutdown();

  if (session.apart_waited > 0) {
    std::cerr << "bench: " << (session.child ? StrCat("window ", flags.only_window, " ") : "")
              << "waited " << std::lround(session.apart_waited)
              << " s for the CPUs to come together (harness/cpu_link.h; at most "
              << std::lround(ApartWaitSeconds(session.sampling_budget) / session.windows)
              << " s a window)\n";
  }
  std::vector<RowResult> results;
  for (const auto& s : states) {
    // Every sample is judged against the reference round trip of the whole
    // run, both windows', not the one when it was taken.
    s->timings.reference_link_ns = session.link.reference_ns();
    auto it = reporter.collected().find(s->row.name);
    if (it != reporter.collected().end()) results.push_back(MakeResult(*s, it->second));
  }
  if (results.empty()) {
    std::cerr << "bench: no benchmark ran (see --benchmark_filter); no results written\n";
    return 0;
  }
  if (session.child) {
    // Only the samples, for the process that started this one.
    try {
      WriteResults(ResultsDir(flags.out_dir), UtcStamp(started),
                   ResultsJson(CommandLine(args), nlohmann::json::object(), UtcDate(started),
                               results));
    } catch (const std::exception& e) {
      std::cerr << "bench: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  ComputeVsEager(&results);
  const ControlReport controls = CheckControls(&results);
  (console ? std::cout : std::cerr)
      << FormatControls(controls) << FormatSummary(results, FormatPlatform(DescribePlatform()))
      << std::flush;

  try {
    nlohmann::json run = ResultsJson(CommandLine(args), MachineInfo(), UtcDate(started), results);
    run["controls"] = ControlsJson(controls);
    run["source"] = source;
    if (!flags.peers.empty()) AddPeerRows(results, flags.peers, &run, console ? std::cout : std::cerr);
    const std::vector<std::string> written =
        WriteResults(ResultsDir(flags.out_dir), UtcStamp(started), run);
    std::cerr << "\nbench: wrote " << Join(written, " and ") << "\n";
  } catch (const std::exception& e) {
    std::cerr << "bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace remat::bench

int main(int argc, char** argv) { return remat::bench::Main(argc, argv); }
