// The benchmark's planning, kept apart from Google Benchmark so that it can
// be tested: the flags of //harness:bench, which rows a run has (problems x
// engines x policies x sizes), what a row measured and the plausibility
// flags (the JSON and the summary: harness/bench_report.h).
//
//   BenchFlags flags = ParseBenchFlags(args, &rest);
//   std::vector<PlannedRow> plan = PlanRows(flags, EngineNames());
//   ... run them (harness/bench_main.cc), one RowResult per row ...
//   ComputeVsEager(&results);  // and the plausibility flags
//   (harness/bench_report.h: ResultsJson, FormatSummary)
//
// How a row is timed (bench_main.cc runs it; the rules are in
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
#include "harness/run_delay.h"  // ProcessRunDelayNs
#include "problems/problem.h"

namespace remat::bench {

// The row of an engine that is not given a policy: the problem as written.
inline constexpr char kAsWritten[] = "as-written";
// A --policies entry that is a schedule (engines/schedule) rather than a
// policy: "schedule:revolve:4". Such rows run only on problems with a scan or
// a chain of checkpointed blocks.
inline constexpr char kSchedulePrefix[] = "schedule:";
inline bool IsSchedule(const std::string& policy) {
  return policy.rfind(kSchedulePrefix, 0) == 0;
}
// A --policies entry that runs an engine that honours memory caps (dtr)
// under RunOptions::memory_cap_bytes: "cap:0.5x" (a fraction of eager's
// peak on the case) or "cap:64MiB". Such rows go to those engines only.
inline constexpr char kCapPrefix[] = "cap:";
inline bool IsCap(const std::string& policy) { return policy.rfind(kCapPrefix, 0) == 0; }
// The static answer at the same memory: "budget-under-cap:0.5x" runs the
// scan's or chain's budget:B schedule for the largest B whose planned peak
// (every category) is at most that cap (LargestBudgetUnder). Rows go to the
// engines that honour checkpoints, on problems with a scan or a chain.
inline constexpr char kBudgetUnderCapPrefix[] = "budget-under-cap:";
inline bool IsBudgetUnderCap(const std::string& policy) {
  return policy.rfind(kBudgetUnderCapPrefix, 0) == 0;
}
// --sweep=dtr: dtr against budget:B at the same peak, timed. Each problem's
// depths, and the caps (fractions of eager's peak) between the smallest at
// which budget:B runs and eager's peak (results/dtr_sweep-*.txt: below
// about 0.75x on scan_stack dtr's recomputation grows as L^2).
struct DtrSweepCase {
  const char* problem;
  std::vector<int64_t> depths;
  std::vector<const char*> caps;
};
std::vector<DtrSweepCase> DtrSweepCases();

// What --policies is when not given.
inline constexpr char kDefaultPolicies[] =
    "as-written,nothing_saveable,dots_with_no_batch_dims_saveable,everything_saveable,"
    "schedule:every:4,schedule:segments:4,schedule:sqrt,schedule:bisect,schedule:revolve:4,"
    "schedule:budget:4MiB,memory_budget:0.5";
// --sweep=budget: the memory_budget:B curve (engines/budget) on every
// problem at its first bench size (transformer_stack at L=4), B = 0, 0.1,
// ..., 1, with JAX's policies and the default run's schedules as points.
inline constexpr char kBudgetSweepPolicies[] =
    "memory_budget:0;memory_budget:0.1;memory_budget:0.2;memory_budget:0.3;memory_budget:0.4;"
    "memory_budget:0.5;memory_budget:0.6;memory_budget:0.7;memory_budget:0.8;memory_budget:0.9;"
    "memory_budget:1;as-written;nothing_saveable;dots_saveable;dots_with_no_batch_dims_saveable;"
    "everything_saveable;schedule:sqrt;schedule:revolve:4;schedule:budget:4MiB";
// --sweep=transformer's: checkpoint every block (the problem as written),
// one block in 2 and in 4 (PyTorch's checkpoint_every, seed 004), and
// Megatron's selective recomputation (keep the attention, recompute the
// FFN) and its reverse.
inline constexpr char kTransformerPolicies[] =
    "as-written;schedule:checkpoint_every:2;schedule:checkpoint_every:4;"
    "save_only_these_names:attn_probs,attn_out;save_only_these_names:ffn_hidden";
// --sweep=schedules: every schedule on one case, scan_stack at L =
// kFrontierDepth, d=512, N=256 (the frontier: peak memory against time), next
// to eager and JAX's checkpointed body (as written, and saving the matmuls).
// The budgets span the chain's range: 1 MiB is the least any schedule needs
// there, 128.5 MiB keeps every step's residuals at once; from about 17 MiB up
// every step is recomputed once (as sqrt does).
inline constexpr int64_t kFrontierDepth = 256;
inline constexpr char kFrontierPolicies[] =
    "as-written;dots_with_no_batch_dims_saveable;schedule:every:16;schedule:segments:16;"
    "schedule:sqrt;schedule:bisect;schedule:revolve:4;schedule:revolve:8;schedule:revolve:16;"
    "schedule:budget:4MiB;schedule:budget:8MiB;schedule:budget:16MiB;schedule:budget:64MiB;"
    "schedule:checkpoint_every:4";
// --sweep=schedules at every depth (kScheduleDepths): how each kind of
// schedule's peak grows with L (linearly, as sqrt L, as log L, bounded).
inline constexpr char kDepthSchedulePolicies[] =
    "as-written;schedule:sqrt;schedule:bisect;schedule:revolve:8;schedule:budget:16MiB";
inline constexpr int64_t kScheduleDepths[] = {16, 64, 256, 1024};
// --sweep=scale: scan_stack at L=2048, d=1024, N=1024, where the weights and
// their gradient take 16 GiB and eager's stored activations 16 GiB more: 32
// GiB, past this 24 GiB machine (and the default --max-memory, 80% of it), so
// eager is refused before allocating, while every schedule fits in the 16 GiB
// plus a few hundred MiB. The budget is of the schedule's memory model
// (activations only: kept carries, residuals), about a third of what sqrt
// keeps there.
inline constexpr char kScalePolicies[] =
    "schedule:sqrt;schedule:revolve:8;schedule:budget:128MiB";
// The store-everything baseline every row's time is compared with (vs_eager).
inline constexpr char kBaselineEngine[] = "eager";
// The float64 engines, left out of the default engine list (they are slow,
// and they are checks, not something to measure): the oracle the conformance
// suite compares with, and the old reference (eager's interpreter on float64
// kernels).
inline constexpr char kOracleEngine[] = "oracle";
inline constexpr char kReferenceEngine[] = "reference";
bool IsFloat64Check(const std::string& engine);
// The problem and engine names of the oneDNN matmul bound rows.
inline constexpr char kBoundProblem[] = "onednn_matmul";
inline constexpr char kBoundEngine[] = "onednn";

// Engines that run every checkpoint region inline, whatever its policy
// (eager, the reference, and any registered engine whose
// honours_checkpoints() is false): they get one row per problem and size
// ("as-written"), not one per policy.
bool IgnoresPolicies(const std::string& engine);
// Engines whose honours_memory_cap() is true: they get the cap rows.
bool HonoursMemoryCaps(const std::string& engine);

enum class Sweep {
  kNone,   // every problem at its bench sizes (DefaultBenchSizes)
  kDepth,  // scan_stack at d=512, N=256, L = 8, 16, ..., 1024
  kWidth,  // layer_loss at N=256, d = 128, 256, ..., 2048
  kTransformer,  // transformer_stack at its defaults, kTransformerPolicies
  kSchedules,    // scan_stack: kFrontierPolicies at L = kFrontierDepth, and
                 // kDepthSchedulePolicies at every L of kScheduleDepths
  kScale,        // scan_stack at L=2048, d=1024, N=1024, kScalePolicies; big rows
  kDtr,          // DtrSweepCases(): cap:F rows for dtr, budget-under-cap:F for recompute
  kBudget,       // every problem at its first bench size, kBudgetSweepPolicies
};

// The default --sampling-budget: the default run samples for 115 to 145
// seconds on this 2-core machine when it is quiet; past 150 a neighbour is
// slowing it, and more samples would mostly wait for it.
inline constexpr double kDefaultSamplingBudgetSeconds = 150;

// The default run samples its rows in two windows: every row once, then
// every row again (--windows). Two runs of the whole job minutes apart
// disagreed on rows that had settled within 1% in each (the machine's speed,
// as each process sees it, drifts by a few percent for minutes at a time,
// and eager's and the row's runs do not drift alike): one window measures a
// row in one such state only. Pooling two windows a minute or more apart
// halves the weight of each state, and their disagreement is what a rerun
// would see, so a row whose windows disagree by more than
// kWindowAllowance is flagged (ComputeVsEager). Sweeps, whose big rows run
// once, default to one window. Each window after the first runs in a
// process of its own (bench starts itself with --only-window=K): which
// physical pages a process's buffers got shifts a row's x eager by a few
// percent for that process's whole life (two runs disagreed by 4-8% on every
// transformer_stack row while each run's two in-process windows agreed), so
// windows in one process would share that draw, and windows in two
// processes average over two draws, and see when they differ.
inline constexpr int kDefaultWindows = 2;
inline constexpr double kWindowAllowance = 0.03;

struct BenchFlags {
  // --engines=a,b; empty: every registered engine but the float64 checks.
  std::vector<std::string> engines;
  std::vector<std::string> policies;  // --policies=...; kAsWritten or text Policy::Parse reads
  std::vector<std::string> problems;  // --problems=a,b; empty: every problem
  // --program=FILE, repeatable: program files (engines/api/program_text.h)
  // to run; given without --problems, only they run.
  std::vector<std::string> programs;
  Sweep sweep = Sweep::kNone;         // --sweep=depth|width
  std::string out_dir;                // --out=DIR; empty: see ResultsDir
  // --max-memory=BYTES (ParseBytes' forms; 0: none): a row whose predicted
  // peak is past it fails with the engine's error before allocating.
  // ParseBenchFlags starts from DefaultMaxMemoryBytes().
  int64_t max_memory_bytes = 0;
  // --peer[=jax,torch,torch-compile]: the field's engines (tools/peer_time.py)
  // timed on the run's peer problems, each case beside eager's row; empty:
  // none. `--peer` alone is all three (kPeerEngines).
  std::vector<std::string> peers;
  // Ratios from eager runs interleaved with each row's (the default;
  // --unpaired turns it off, --paired is accepted and changes nothing).
  bool paired = true;
  // --max-row-seconds=S: the time cap of one row's sampling (0: the
  // default of DefaultSamplingRule()).
  double max_row_seconds = 0;
  // --sampling-budget=S: once the run's rows have been sampled this long in
  // all, each further row stops after 3 samples; 0: no budget.
  double sampling_budget_seconds = kDefaultSamplingBudgetSeconds;
  // --windows=N: passes over the rows, each sampling every row afresh and
  // taking 1/N of the sampling budget; 0: kDefaultWindows for the default
  // run, 1 for a sweep (Windows()).
  int windows = 0;
  int Windows() const { return windows > 0 ? windows : sweep == Sweep::kNone ? kDefaultWindows : 1; }
  // --only-window=K (internal): this process samples window K of Windows()
  // only and writes its samples for the process that started it; 0: all.
  int only_window = 0;
  // --memory-cap=BYTES|FRACx: the engines that honour memory caps run under
  // it (their rows become "cap:SPEC" instead of "as-written").
  std::string memory_cap;
  // --wrt=..., repeatable: the inputs every case differentiates
  // (WrtFromFlags, problems/problem.h); empty: each case's own.
  std::vector<std::string> wrt;
  bool help = false;                  // --help (also handed on to Google Benchmark)
};


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

// Takes this binary's own flags out of `args` (args[0] is the program name)
// and returns them; every other argument, args[0] first, goes to `rest` in
// order, for benchmark::Initialize. Flags are `--name=value` or `--name
// value`. --policies is split at ';' if it has one, else at ',', where a
// piece that is not a policy name continues the labels of the previous
// "name:labels" piece ("save_only_these_names:a,b,everything_saveable" is two
// policies). Throws remat::Error for an unknown --sweep or a flag without its
// value, an unreadable --max-memory, or --policies with a sweep that picks its
// own rows (schedules, scale); names are checked by PlanRows.
BenchFlags ParseBenchFlags(const std::vector<std::string>& args, std::vector<std::string>* rest);
// 80% of the machine's physical memory, as `remat run --max-memory`'s default.
int64_t DefaultMaxMemoryBytes();
// The help of this binary's own flags (Google Benchmark prints its own after).
std::string BenchHelp();

// Parameters in the order the problem declares them ("L=8,d=512,N=256"),
// which is how row names print them.
using OrderedParams = std::vector<std::pair<std::string, int64_t>>;
OrderedParams OrderParams(const Problem& problem, const ParamValues& params);
std::string FormatOrderedParams(const OrderedParams& params);  // "L=8,d=512,N=256"; "" if none

enum class RowKind {
  kValueAndGrad,  // engine->ValueAndGrad on a problem
  kMatMulBound,   // oneDNN alone on a dense layer's three matmuls: the GFLOP/s ceiling
};

// The engines --peer knows, as tools/peer_time.py --engine names them, and
// the problems they time (every size the run has eager rows at).
inline constexpr const char* kPeerEngines[] = {"jax", "torch", "torch-compile"};
inline constexpr const char* kPeerProblems[] = {"scan_stack", "mlp_chain", "transformer_stack", "gpt"};

struct PlannedRow {
  RowKind kind = RowKind::kValueAndGrad;
  std::string problem;   // kMatMulBound: kBoundProblem; a program file's: its program's name
  // A program file's row (--program): the file's path; empty for problems.
  std::string program_file;
  OrderedParams params;  // kMatMulBound: N and d
  std::string engine;    // kMatMulBound: kBoundEngine
  std::string policy;    // kAsWritten or a policy's text; kMatMulBound: empty
  // "BM_ValueAndGrad/scan_stack/L=32,d=512,N=256/eager/as-written",
  // "BM_OneDnnMatMulBound/N=256,d=512".
  std::string name;
  // "scan_stack/L=32,d=512,N=256": rows with the same key are compared.
  std::string case_key;
  // An A/A control (harness/bench_controls.h): a second instance of the
  // baseline engine on the case as written, paired with the case's eager
  // like any other row; its x eager must come out 1.00. engine is
  // kBaselineEngine, policy kAsWritten; the name ends in "/control".
  bool control = false;
  // A row whose one run takes a minute or more (--sweep=scale): it runs once,
  // with no warm-up run before it (oneDNN's primitive creation is noise at
  // that size), and the memory pass records that run's peak instead of
  // running it again. kValueAndGrad only.
  bool big = false;
};

// The sizes a run without --sweep measures `problem` at: a few sizes chosen
// so that the whole default run takes about three minutes on a 2-core
// machine; a problem this file does not know is measured at its defaults.
std::vector<ParamValues> DefaultBenchSizes(const Problem& problem);
// The sizes of a sweep: depth (scan_stack, L doubling from 8 to 1024) or
// width (layer_loss, d doubling from 128 to 2048), schedules (scan_stack at
// kScheduleDepths), scale (one scan_stack size) or transformer (one size).
std::vector<ParamValues> SweepSizes(Sweep sweep);
// The policies a sweep that picks its own rows runs at `size` (one of
// SweepSizes(sweep)), in order: kFrontierPolicies then the rest of
// kDepthSchedulePolicies at L = kFrontierDepth, kDepthSchedulePolicies at the
// other depths, kScalePolicies. Empty for the sweeps that take --policies.
std::vector<std::string> SweepPolicies(Sweep sweep, const ParamValues& size);

// The rows of a run, in the order they run: per problem and size, the
// baseline engine first (so its time is known when the others finish), then
// the other engines by name, each with its policies in --policies order.
// Before them, one kMatMulBound row per distinct (N, d) the planned problems
// use. A sweep's rows take SweepPolicies where it has them; --sweep=scale's
// are big. A program file's rows (--program) come after the problems', its
// case key "NAME@FILE" (the program's name, the file's base name). Throws
// remat::Error naming an unknown engine (with the registered ones), policy
// or problem, a bad program file (file:line:column), or for --problems or
// --program with --sweep.
std::vector<PlannedRow> PlanRows(const BenchFlags& flags,
                                 const std::vector<std::string>& registered_engines);

// The case's baseline row: eager's, not its A/A control.
inline bool IsBaselineRow(const PlannedRow& row) {
  return row.kind == RowKind::kValueAndGrad && row.engine == kBaselineEngine && !row.control;
}

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
  // (WindowEstimates), those with kMinQuietSamples quiet pairs.
  std::vector<double> window_values;
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
  // cases with N and d, which have a matmul bound). Elsewhere (the scalar
  // chains, the attention stack) time does not follow the FLOP count, and the
  // floor is only that a row doing at least eager's FLOPs on the same kernels
  // does not take less than eager's time: min(1, that ratio).
  std::optional<double> flop_floor;
  // Non-empty: the row's numbers are physically implausible, a measurement
  // of interference rather than of the row, and the summary prints "noise"
  // instead of its ratio: "x eager 1.02 below the FLOP floor 1.33", "62.0
  // GFLOP/s above the matmul bound's 48.0".
  std::string noise;
  // Non-empty: the case's controls say its ratios cannot be trusted
  // (CheckControls, harness/bench_controls.h), and why; the summary prints
  // no ratio for the row. Its time stands.
  std::string untrusted;
  // The distinct impl_info_str of the oneDNN matmuls the row's own timed
  // runs executed (MatMulImplRecorder; eager's interleaved runs excluded).
  std::vector<std::string> matmul_impls;
  // gflops / the matmul bound's on the same N and d; empty if none.
  std::optional<double> of_matmul_bound;
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
// of the lower (a rerun would not find the row's number). Eager's
// FLOPs come from eager_flops when set, else from the eager row of the case.
void ComputeVsEager(std::vector<RowResult>* rows);

// A bound row's key, shared by the rows of the same N and d ("N=256,d=512");
// empty for params without both.
std::optional<std::string> BoundKey(const OrderedParams& params);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_LIB_H_
