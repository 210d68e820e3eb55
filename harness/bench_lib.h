// The benchmark's planning and reporting, kept apart from Google Benchmark so
// that it can be tested: the flags of //harness:bench, which rows a run has
// (problems x engines x policies x sizes), the JSON it writes to results/ and
// the summary table it prints at the end.
//
//   BenchFlags flags = ParseBenchFlags(args, &rest);
//   std::vector<PlannedRow> plan = PlanRows(flags, EngineNames());
//   ... run them (harness/bench_main.cc), one RowResult per row ...
//   ComputeVsEager(&results);
//   nlohmann::json run = ResultsJson(CommandLine(args), MachineInfo(), UtcDate(now), results);
//   std::cout << FormatSummary(results);
#ifndef REMAT_HARNESS_BENCH_LIB_H_
#define REMAT_HARNESS_BENCH_LIB_H_

#include <array>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engines/api/memory_tracker.h"
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
// What --policies is when not given.
inline constexpr char kDefaultPolicies[] =
    "as-written,nothing_saveable,dots_with_no_batch_dims_saveable,everything_saveable,"
    "schedule:every:4,schedule:segments:4,schedule:sqrt,schedule:bisect,schedule:revolve:4,"
    "schedule:budget:4MiB";
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
// The float64 oracle: left out of the default engine list (it is slow, and it
// is what the conformance suite checks against, not something to measure).
inline constexpr char kOracleEngine[] = "reference";
// The problem and engine names of the oneDNN matmul bound rows.
inline constexpr char kBoundProblem[] = "onednn_matmul";
inline constexpr char kBoundEngine[] = "onednn";

// Engines that run every checkpoint region inline, whatever its policy
// (eager, the reference, and any registered engine whose
// honours_checkpoints() is false): they get one row per problem and size
// ("as-written"), not one per policy.
bool IgnoresPolicies(const std::string& engine);

enum class Sweep {
  kNone,   // every problem at its bench sizes (DefaultBenchSizes)
  kDepth,  // scan_stack at d=512, N=256, L = 8, 16, ..., 1024
  kWidth,  // layer_loss at N=256, d = 128, 256, ..., 2048
  kTransformer,  // transformer_stack at its defaults, kTransformerPolicies
  kSchedules,    // scan_stack: kFrontierPolicies at L = kFrontierDepth, and
                 // kDepthSchedulePolicies at every L of kScheduleDepths
  kScale,        // scan_stack at L=2048, d=1024, N=1024, kScalePolicies; big rows
};

struct BenchFlags {
  std::vector<std::string> engines;   // --engines=a,b; empty: every registered engine but the oracle
  std::vector<std::string> policies;  // --policies=...; kAsWritten or text Policy::Parse reads
  std::vector<std::string> problems;  // --problems=a,b; empty: every problem
  Sweep sweep = Sweep::kNone;         // --sweep=depth|width
  std::string out_dir;                // --out=DIR; empty: see ResultsDir
  // --max-memory=BYTES (ParseBytes' forms; 0: none): a row whose predicted
  // peak is past it fails with the engine's error before allocating.
  // ParseBenchFlags starts from DefaultMaxMemoryBytes().
  int64_t max_memory_bytes = 0;
  bool peer = false;                  // --peer: add the PyTorch peer's rows
  bool paired = false;                // --paired: ratios from interleaved eager runs
  bool help = false;                  // --help (also handed on to Google Benchmark)
};

// The median of `values` (the mean of the middle two for an even count);
// 0 for none.
double Median(std::vector<double> values);

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

struct PlannedRow {
  RowKind kind = RowKind::kValueAndGrad;
  std::string problem;   // kMatMulBound: kBoundProblem
  OrderedParams params;  // kMatMulBound: N and d
  std::string engine;    // kMatMulBound: kBoundEngine
  std::string policy;    // kAsWritten or a policy's text; kMatMulBound: empty
  // "BM_ValueAndGrad/scan_stack/L=32,d=512,N=256/eager/as-written",
  // "BM_OneDnnMatMulBound/N=256,d=512".
  std::string name;
  // "scan_stack/L=32,d=512,N=256": rows with the same key are compared.
  std::string case_key;
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
// are big. Throws remat::Error naming an unknown engine (with the registered
// ones), policy or problem, or for --problems with --sweep.
std::vector<PlannedRow> PlanRows(const BenchFlags& flags,
                                 const std::vector<std::string>& registered_engines);

// What one row measured.
struct RowResult {
  PlannedRow row;
  std::string error;  // non-empty: the row failed with this message
  int64_t iterations = 0;
  // The median wall time of one timed iteration (every iteration Google
  // Benchmark ran, over every repetition): what the summary, vs_eager and
  // the report use. And the mean, as Google Benchmark reports it.
  double real_time_ms = 0;
  double mean_time_ms = 0;
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
  // With --paired: the median over the row's timed iterations of its time /
  // that of an eager run on the same case made right before or after it (the
  // order alternating). Noise that lasts longer than one pair cancels out.
  // The summary's x eager shows it when present.
  std::optional<double> vs_eager_paired;
  // gflops / the matmul bound's on the same N and d; empty if none.
  std::optional<double> of_matmul_bound;
  // The engine's overhead: the share of its time spent outside kernel calls
  // (Stats::seconds_in_kernels, over the timed runs); empty for bound rows.
  std::optional<double> overhead_fraction;

  int64_t total_flops() const { return flops_forward + flops_recomputed + flops_backward; }
};

// Fills vs_eager and of_matmul_bound of every row from the other rows.
void ComputeVsEager(std::vector<RowResult>* rows);

// The machine the run is on: hostname, cores (CPUs this process may run on,
// as `nproc` counts them), cpu (model name from /proc/cpuinfo), memory_bytes
// (MemTotal), omp_num_threads and omp_wait_policy (the environment's, or
// "unset") and onednn (the library's version).
nlohmann::json MachineInfo();
// The command that reproduces the run: "tools/bazel run //harness:bench",
// then " -- " and the arguments (args[0] excluded), shell-quoted where needed.
std::string CommandLine(const std::vector<std::string>& args);
// "2024-05-01T12:34:56Z", and the compact form for file names "20240501T123456Z".
std::string UtcDate(std::time_t when);
std::string UtcStamp(std::time_t when);

// The results file: {"command", "machine", "date", "rows": [...]}; each row
// has name, problem, params, engine, policy, iterations, real_time_ms,
// peak_bytes, peak_bytes_by_category ({"inputs": ..., "activations": ...}),
// max_bytes_used, predicted_peak_bytes, residual_bytes,
// flops_forward, flops_recomputed, flops_backward, gflops, vs_eager (null
// when unknown), of_matmul_bound (when known), big (when true) and error
// (when failed).
nlohmann::json ResultsJson(const std::string& command, const nlohmann::json& machine,
                           const std::string& date, const std::vector<RowResult>& rows);

// The table printed at the end of a run: one line per row (problem and size,
// engine/policy, time ms, x eager, peak, activations at the peak, residual,
// recomputed FLOP, overhead),
// then the oneDNN bound and how close the baseline gets to it.
std::string FormatSummary(const std::vector<RowResult>& rows);

// Where results go: --out if given; else $BUILD_WORKSPACE_DIRECTORY/results
// (set by `bazel run`); else the current directory.
std::string ResultsDir(const std::string& out_flag);
// Writes `run` to DIR/bench-<stamp>.json and DIR/latest.json (each through a
// .tmp file renamed into place), creating DIR; returns the two paths. Throws
// remat::Error if a file cannot be written.
std::vector<std::string> WriteResults(const std::string& dir, const std::string& stamp,
                                      const nlohmann::json& run);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_LIB_H_
