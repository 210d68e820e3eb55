// What a bench row measured (RowResult, EngineTime) and the plausibility
// flags, kept apart from Google Benchmark so that they can be tested. The
// flags are in harness/bench_flags.h, the rows in harness/bench_plan.h, the
// JSON and the summary in harness/bench_report.h.
//
//   BenchFlags flags = ParseBenchFlags(args, &rest);
//   std::vector<PlannedRow> plan = PlanRows(flags, EngineNames());
//   ... run them (harness/bench_main.cc, bench_row.h), one RowResult per row ...
//   ComputeVsEager(&results);  // and the plausibility flags
//   (harness/bench_report.h: ResultsJson, FormatSummary)
//
// How a row is timed (harness/bench_row.h runs it; the rules are in
// harness/bench_sampling.h, tested on synthetic timings): by default every row but eager's is
// paired, its runs interleaved with eager runs on the same case (eager, row,
// row, eager, eager, row, ...). Samples a neighbour disturbed are set aside
// (kQuietRunDelay); the row's time is its least quiet time, x eager the
// median of the quiet pairs' ratios, and sampling goes on until that
// median's confidence interval is within SamplingRule::target_spread, or
// the row's time cap is reached (Estimate, SamplingDone). ComputeVsEager
// then flags what cannot be a measurement of the row (too few quiet samples,
// faster than the matmul bound, below the FLOP model's floor) as noise.
#ifndef REMAT_HARNESS_BENCH_LIB_H_
#define REMAT_HARNESS_BENCH_LIB_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engines/api/memory_tracker.h"
#include "harness/bench_sampling.h"  // how a row is sampled and estimated
#include "harness/bench_flags.h"
#include "harness/bench_plan.h"
#include "harness/run_delay.h"  // ProcessRunDelayNs
#include "problems/problem.h"

namespace remat::bench {

// Allowances of the plausibility checks (ComputeVsEager), beyond the spreads
// of the rows involved. The FLOP floor assumes the row's kernels run at
// eager's rate, and they do not quite: a recomputed activation is still in
// cache when the backward pass reads it, eager's stored one is not. On the
// 2-core EPYC this was written on, quiet runs put recompute/as-written on
// scan_stack L=32 at 1.24-1.29 x eager against a floor of 1.34, and the
// lowest quiet rows of whole default runs at 0.93 of their floors; 8% (plus
// the row's spread) keeps those and still flags the 1.21 (0.905 of
// its floor). The bound's three matmuls on operands in cache are the fastest
// this work runs; 3% covers its shapes not being exactly a problem's.
inline constexpr double kFlopFloorAllowance = 0.08;
// Off the matmul problems, the FLOP floor is checked only where kernels'
// arithmetic is at least this share of both eager's time and the row's.
inline constexpr double kMinKernelShareForFloor = 0.5;
inline constexpr double kBoundAllowance = 0.03;

// Why a row's numbers are physically implausible (RowResult::noise).
enum class NoiseKind {
  kNotQuiet,          // too few quiet samples: a neighbour kept a CPU busy
  kBelowFlopFloor,    // x eager below the FLOP model's floor
  kWindowsDisagree,   // its windows' ratios differ by more than kWindowAllowance
  kAboveMatMulBound,  // faster than oneDNN's matmuls alone
  kImprecise,         // its x eager's 95% interval wider than +-kWindowAllowance
};
// "windows_disagree": the JSON's name of a kind.
const char* NoiseKindName(NoiseKind kind);

struct Noise {
  NoiseKind kind;
  std::string why;  // "x eager 1.02 below the FLOP floor 1.33"
};

// What one row measured.
struct RowResult {
  PlannedRow row;
  std::string error;  // non-empty: the row failed with this message
  int64_t iterations = 0;
  // The least time of one run over the row's quiet samples (RowEstimate):
  // what the summary, vs_eager, GFLOP/s and the report use. The median and
  // mean of all its samples, for reference.
  double real_time_ms = 0;
  // Paired: the times of the median pair (RowEstimate), the row's and the
  // eager run's next to it, whose ratio is the row's x eager. The machine's
  // speed drifts (by a quarter between two processes, or within one, on
  // the 2-core VMs this runs on), so the least times, eager's own row's
  // included, were taken at moments of other speeds and need not agree
  // with x eager: the summary prints these two beside it. 0 when unpaired.
  double pair_time_ms = 0;
  double paired_eager_ms = 0;
  double median_time_ms = 0;
  double mean_time_ms = 0;
  // How many samples (pairs when paired), and the spread of the row's
  // estimate (of x eager when paired, of its time otherwise): see
  // RowEstimate. Empty for rows run once.
  int64_t samples = 0;
  std::optional<double> spread;
  // Whether the estimate came from enough quiet samples (RowEstimate::quiet);
  // a row that did not is flagged as noise. And how many there were.
  bool quiet = true;
  int64_t quiet_samples = 0;
  // Wall time spent sampling the row (eager's interleaved runs included):
  // where the run's time went.
  double sampling_seconds = 0;
  // Every sample in the order taken (Timings), for auditing a row's estimate.
  Timings timings;
  // Paired, sampled in more than one window: each window's x eager
  // (WindowEstimates), those with kMinQuietSamples quiet pairs, and beside
  // each its spread (half its 95% interval, relative; 0 where it has none).
  std::vector<double> window_values;
  std::vector<double> window_spreads;
  int64_t peak_bytes = 0;
  // The live bytes by category at the peak (arguments, activations,
  // gradients, scratchpad, host): what a schedule controls is the activations.
  std::array<int64_t, kNumCategories> peak_bytes_by_category{};
  int64_t max_bytes_used = -1;  // from the MemoryManager; -1 if it did not run
  int64_t predicted_peak_bytes = -1;
  int64_t residual_bytes = 0;
  int64_t flops_forward = 0;
  int64_t flops_recomputed = 0;
  int64_t flops_backward = 0;
  double gflops = 0;  // (forward + recomputed + backward) FLOPs / time, in GFLOP/s
  // real_time_ms / the baseline's on the same case_key; empty when the run
  // has no baseline row for the case (or either failed).
  std::optional<double> vs_eager;
  // Paired: the median over the quiet pairs of the row's time / the eager
  // run's next to it (RowEstimate::value). The summary's x eager shows it
  // when present.
  std::optional<double> vs_eager_paired;
  // Paired: the total FLOPs of one eager run on the case (from the eager
  // runs interleaved with the row), so that the FLOP floor needs no eager row.
  int64_t eager_flops = 0;
  // The FLOP model's floor of x eager: total_flops() / eager's, what the row
  // would take at eager's kernel rate, where matmuls dominate the work (the
  // dense-layer cases, sized by N and d). Elsewhere (the scalar
  // chains, the attention stack) time does not follow the FLOP count, and the
  // floor is only that a row doing at least eager's FLOPs on the same kernels
  // does not take less than eager's time: min(1, that ratio).
  std::optional<double> flop_floor;
  // Non-empty: the row's numbers are physically implausible, a measurement
  // of interference rather than of the row, and the summary prints "noise"
  // instead of its ratio; each entry one reason.
  std::vector<Noise> noise;
  bool noisy() const { return !noise.empty(); }
  bool NoisyFor(NoiseKind kind) const;
  // The reasons joined by "; ": "x eager 1.02 below the FLOP floor 1.33;
  // 62.0 GFLOP/s above the matmul bound's 48.0"; empty when not noisy.
  std::string NoiseText() const;
  // Non-empty: the case's controls say its ratios cannot be trusted
  // (CheckControls, harness/bench_controls.h), and why; the summary prints
  // no ratio for the row. Its time stands.
  std::string untrusted;
  // The distinct impl_info_str of the oneDNN matmuls the row's own timed
  // runs executed (MatMulRecorder; eager's interleaved runs excluded).
  std::vector<std::string> matmul_impls;
  // gflops / the case's matmul bound's rate (eager's FLOPs over the bound's
  // time: for eager, the bound's time over eager's); empty if none.
  std::optional<double> of_matmul_bound;
  // A bound row's: eager's kernels besides matmul on the case, one run's,
  // at this machine's stream rate (harness/stream_rate.h,
  // NonContractionStreamFloor over eager's peak), and their bytes. The least
  // time an engine that runs them as passes of their own adds to its
  // matmuls: with the bound's, the most of the bound such an engine can
  // reach. Empty where not measured (another window's process; a case
  // with no such kernel).
  std::optional<double> stream_floor_ms;
  int64_t stream_floor_bytes = 0;
  // The engine's overhead (EngineTime): the share of its wall time spent
  // outside kernels' arithmetic, and that time per kernel call, in ns;
  // empty for bound rows (and per call, for engines that report no calls).
  std::optional<double> overhead_fraction;
  std::optional<double> overhead_ns_per_call;
  // overhead_ns_per_call / eager's on the same case (the eager row's).
  std::optional<double> overhead_per_call_vs_eager;

  // A cap row's RunOptions::memory_cap_bytes; a budget-under-cap row's cap
  // and the budget B it found (0 where none).
  int64_t memory_cap_bytes = 0;
  int64_t budget_bytes = 0;

  int64_t total_flops() const { return flops_forward + flops_recomputed + flops_backward; }
};

// What an engine's runs took: the wall time of the timed runs (each call of
// value_and_grad, the result's release included; run without kernel timing,
// RunOptions::time_kernels, whose clock reads would add tens of ns to every
// kernel call), and probes: samples of runs of their own, timed together,
// with what the engine reports of its kernels in them
// (Stats::seconds_in_kernels, Stats::kernel_calls). Everything the engine
// does around its kernels (looking up a plan, allocating, bookkeeping) is
// overhead, whether or not its own clocks cover it. The probe used is the
// one whose runs spent the least time in kernels a run: a sample the
// process was preempted in counts the preemption in whichever call it hit,
// a kernel's as likely as any (one such probe put planned's kernels at
// twice their time on sin_recursive D=8, and its per call at 0).
// - OverheadFraction: of that probe's wall time, the share outside
//   kernels' arithmetic (both from the same runs: on the matrix problems a
//   difference of a few percent between two means of runs taken apart would
//   be noise);
// - OverheadNsPerCall: a run's wall time less the probe's kernel time a
//   run, per kernel call (the probes' own cost, tens of ns a call, would
//   otherwise be most of a compiled engine's on the scalar chains). The
//   run's wall time is the row's time (`run_seconds`: the bench passes the
//   table's, its least quiet sample), else the timed runs' mean: a mean
//   over every sample takes in the ones the process was preempted in (on
//   sin_plain D=8, one run's mean put planned's per call at 63 ns where its
//   quiet samples gave 44). Rows run once (big rows) have only a probe:
//   their wall time is its. Only where the overhead is at least
//   kMinOverheadShareForPerCall of the time: below it (the matrix problems:
//   0.3-7%) the difference is within the noise (it measured 0 to 27 us a
//   call on scan_stack's rows of one run).
inline constexpr double kMinOverheadShareForPerCall = 0.1;
// Probes a row takes (per window); the bench's are one sample's worth of
// runs each.
inline constexpr int kProbesPerRow = 3;
struct EngineTime {
  double wall_seconds = 0;  // of the timed (unprobed) runs
  int64_t runs = 0;
  struct Probe {
    double wall_seconds = 0;
    double kernel_seconds = 0;
    int64_t kernel_calls = 0;
    int64_t runs = 0;
  };
  std::vector<Probe> probes;

  void AddProbe(double wall, double kernel, int64_t calls, int64_t probe_runs) {
    probes.push_back({wall, kernel, calls, probe_runs});
  }
  // The probe with the least kernel time a run (null: none with runs).
  const Probe* Best() const {
    const Probe* best = nullptr;
    for (const Probe& p : probes) {
      if (p.runs <= 0 || p.wall_seconds <= 0) continue;
      if (best == nullptr || p.kernel_seconds / static_cast<double>(p.runs) <
                                 best->kernel_seconds / static_cast<double>(best->runs)) {
        best = &p;
      }
    }
    return best;
  }
  std::optional<double> WallPerRun() const {
    if (runs > 0 && wall_seconds > 0) return wall_seconds / static_cast<double>(runs);
    if (const Probe* p = Best()) return p->wall_seconds / static_cast<double>(p->runs);
    return std::nullopt;
  }
  std::optional<double> OverheadFraction() const {
    const Probe* p = Best();
    if (p == nullptr) return std::nullopt;
    return std::max(0.0, 1 - p->kernel_seconds / p->wall_seconds);
  }
  std::optional<double> OverheadNsPerCall(std::optional<double> run_seconds = std::nullopt) const {
    const std::optional<double> wall = run_seconds ? run_seconds : WallPerRun();
    const std::optional<double> share = OverheadFraction();
    const Probe* p = Best();
    if (!wall || !share || *share < kMinOverheadShareForPerCall || p->kernel_calls <= 0) {
      return std::nullopt;
    }
    const double runs_d = static_cast<double>(p->runs);
    return std::max(0.0, *wall - p->kernel_seconds / runs_d) * 1e9 /
           (static_cast<double>(p->kernel_calls) / runs_d);
  }
};

// Fills vs_eager, of_matmul_bound and flop_floor of every row from the other
// rows, and flags noise: a row with too few quiet samples (RowResult::quiet), a
// row whose x eager (paired if it has one) is below
// flop_floor * (1 - kFlopFloorAllowance - its spread), or whose GFLOP/s is
// above its bound's by more than kBoundAllowance plus both spreads (unless
// the bound row itself had too few quiet samples: then it is no ceiling), or
// whose windows' x eager (window_values) differ by more than kWindowAllowance
// of the lower and whose 95% intervals (window_spreads) do not overlap (a
// rerun would not find the row's number), or whose paired x eager has a
// spread (half its 95% interval) above kWindowAllowance (the bound row's
// too, which is then no ceiling either): the bench's claim
// for a ratio is that a rerun finds it within that allowance, and a median
// of a few pairs that vary by tens of percent (a deep row capped at 3-5
// pairs) supports no such claim, however central the value. Eager's
// FLOPs come from eager_flops when set, else from the eager row of the case.
void ComputeVsEager(std::vector<RowResult>* rows);

// Sets what `r` takes from its samples `t` (RowEstimate, WindowEstimates):
// its times (least quiet, median, mean), samples, quiet samples, spread,
// paired x eager and the median pair's times, each window's x eager and
// spread, and r->timings itself. What the bench does with a row's samples
// (MakeResult) and what a replay of recorded samples does
// (harness/sampling_replay.h), one definition. Leaves the rest of `r`.
void SetSampledFields(const Timings& t, RowResult* r);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_LIB_H_
