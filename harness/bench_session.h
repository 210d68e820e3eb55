// What the rows of one bench process share (BenchSession): the flags'
// settings, the case and its eager baseline (held one at a time), the
// memory pass, the sampling budget spent and the CPUs' round trip; and the
// rule each row is sampled by, its share of what is left of the budget.
#ifndef REMAT_HARNESS_BENCH_SESSION_H_
#define REMAT_HARNESS_BENCH_SESSION_H_

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "engines/api/engine.h"
#include "engines/api/registry.h"
#include "harness/bench_plan.h"
#include "harness/bench_sampling.h"
#include "harness/case_directory.h"
#include "harness/case_spec.h"
#include "harness/conformance.h"
#include "harness/cpu_link.h"
#include "problems/problem.h"
#include "problems/program_file.h"

namespace remat::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
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
      if (!row.inputs_dir.empty()) ReadCaseInputs(row.inputs_dir, case_.get());
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

void ReportStart(BenchSession& session, const PlannedRow& row);


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
double ApartWaitSeconds(double sampling_budget_seconds);

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
SamplingRule RuleNow(BenchSession& session, double weight);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_SESSION_H_
