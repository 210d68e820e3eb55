// The flags of //harness:bench, kept apart from Google Benchmark's so that
// they can be tested: what a run is asked for (problems, engines, variants,
// sweeps, sampling, windows, peers), read once into a BenchFlags.
//
//   std::vector<std::string> rest;  // Google Benchmark's own, for benchmark::Initialize
//   BenchFlags flags = ParseBenchFlags(args, &rest);
//   (harness/bench_plan.h turns them into rows)
#ifndef REMAT_HARNESS_BENCH_FLAGS_H_
#define REMAT_HARNESS_BENCH_FLAGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace remat::bench {

// A --policies entry is a CaseVariant label (harness/case_spec.h): the
// problem as written, a policy, "schedule:revolve:4" (rows only on problems
// with a scan or a chain of checkpointed blocks), "cap:0.5x" (rows only for
// the engines that honour memory caps, under RunOptions::memory_cap_bytes:
// a fraction of eager's peak on the case, or bytes), or
// "budget-under-cap:0.5x": the static answer at the same memory, the scan's
// or chain's budget:B schedule for the largest B whose planned peak (every
// category) is at most that cap (LargestBudgetUnder), on the engines that
// honour checkpoints.
// What --policies is when not given.
inline constexpr char kDefaultPolicies[] =
    "as-written,nothing_saveable,dots_with_no_batch_dims_saveable,everything_saveable,"
    "schedule:every:4,schedule:segments:4,schedule:sqrt,schedule:bisect,schedule:revolve:4,"
    "schedule:budget:4MiB,memory_budget:0.5";
// --sweep=transformer's: checkpoint every block (the problem as written),
// one block in 2 and in 4 (PyTorch's checkpoint_every, seed 004), and
// Megatron's selective recomputation (keep the attention, recompute the
// FFN) and its reverse.
inline constexpr char kTransformerPolicies[] =
    "as-written;schedule:checkpoint_every:2;schedule:checkpoint_every:4;"
    "save_only_these_names:attn_probs,attn_out;save_only_these_names:ffn_hidden";
// The float64 engines, left out of the default engine list (they are slow,
// and they are checks, not something to measure): the oracle the conformance
// suite compares with, and the old reference (eager's interpreter on float64
// kernels).
inline constexpr char kOracleEngine[] = "oracle";
inline constexpr char kReferenceEngine[] = "reference";
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
  kModels,       // the real-size models (harness/bench_models.h), exported programs
};

// The default --sampling-budget. A pair's ratio (row / eager next to it)
// varies by 2-4% (median absolute deviation) from pair to pair on this
// 2-core machine, with tails past 30%; with 2 OpenMP threads, about twice
// what one thread sees. The median of n pairs is then uncertain by about
// 1.25 x that / sqrt(n): a window needs 20 or more pairs to place a row
// within 2%, while 150 s for both windows gave the matrix rows 3 to 9 pairs
// a window, and 1, 6 and 10 of 24 controls came out more than 2% off 1.00
// in three default runs. At 480 s the same rows got 15 to 60 pairs a window
// and 1 control (a microsecond row's) was off; the run took about 8
// minutes instead of 4. 360 s with SamplingRule::target_spread at 1.5%
// gives the same verdicts on the same samples: replayed
// (harness/sampling_replay.h) on the three default runs of 2026-12-03,
// every control within 2% in each, sampling 277 and 309 s natively (357
// and 389 as recorded) and 507 s under the AVX2 cap (612); at 330 s one
// control came out off in two of the three. The run then takes about 6
// minutes.
inline constexpr double kDefaultSamplingBudgetSeconds = 360;

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
//
// Apart means by more than kWindowAllowance and by more than the two
// windows' 95% intervals allow (the lower's upper end below the higher's
// lower end). A window's median of 20-40 pairs that vary 2-4% from pair to
// pair is itself only known within 1.5-2.5% on a noisy machine: in five
// default runs on a 2-CPU Xeon (`bazel-bin/harness/bench`, three at 670e6c6,
// two at d5efe26), 7-9% of rows had windows more than 3% apart, and by that
// alone 1, 1, 1, 0 and 3 of the 24 controls were off; judged by both
// measures (the runs' samples re-read), 2.7-3.6% of rows and no control.
inline constexpr int kDefaultWindows = 2;
inline constexpr double kWindowAllowance = 0.03;

// A model of --sweep=models, as --models names it: "gpt2" at its default
// size (tools/real_models.py's SIZES), or "gpt2@fit" at the largest batch
// whose eager step fits the run's --max-memory (FitBatch,
// harness/bench_models.h), at its default tokens.
struct SweepModel {
  std::string name;
  bool fit_batch = false;
  // Reads "NAME" or "NAME@fit"; throws remat::Error naming the text and the
  // models there are (kSweepModels) or the one suffix there is.
  static SweepModel Parse(const std::string& text);
  std::string Text() const { return fit_batch ? name + "@fit" : name; }
  friend bool operator==(const SweepModel& a, const SweepModel& b) {
    return a.name == b.name && a.fit_batch == b.fit_batch;
  }
};

struct BenchFlags {
  // --engines=a,b; empty: every registered engine but the float64 checks.
  std::vector<std::string> engines;
  // --policies=...: CaseVariant labels, as given (PlanRows parses them).
  std::vector<std::string> policies;
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
  // --models-dir=DIR: where --sweep=models keeps its exports (empty: .models/
  // in the workspace); --models=a,b: the models it runs (empty: kSweepModels).
  std::string models_dir;
  std::vector<SweepModel> models;
  bool help = false;                  // --help (also handed on to Google Benchmark)

  // Sweeps (harness/sweep_cases.h). --write-cases=FILE: write the rows the
  // other flags plan as a case list, and run nothing. --cases=FILE: run the
  // rows of a case list instead of planning them (it does not combine with
  // the flags that plan rows); with --task=K (and --tasks=N, --out=DIR) only
  // task K's share of its cases, skipping those with a current results file
  // in DIR, and one results file per case into DIR instead of
  // bench-<UTC>.json. --merge=DIR (with --cases): the cases' files in DIR
  // into one results JSON (--out). --submit=slurm (with --cases, --tasks,
  // --out): the list as a Slurm job array (harness/sweep_submit.h), its
  // options from --slurm-config=FILE and --slurm-KEY=VALUE.
  std::string write_cases;
  std::string cases;
  // The first --out given: a task's sweep directory, where it looks for
  // current results (a window's process, started with --only-window, gets
  // an --out of its own after the task's).
  std::string sweep_dir;
  int task = -1;  // -1: not a task
  int tasks = 1;
  std::string merge_dir;
  std::string submit;
  std::string slurm_config;
  std::vector<std::pair<std::string, std::string>> slurm;  // --slurm-KEY=VALUE, in order
};


// The engines --peer knows, as tools/peer_time.py --engine names them, and
// the problems they time (every size the run has eager rows at).
inline constexpr const char* kPeerEngines[] = {"jax", "torch", "torch-compile"};
inline constexpr const char* kPeerProblems[] = {"scan_stack", "mlp_chain", "transformer_stack", "gpt"};
// The peers of --sweep=models (harness/bench_models.h): JAX on the exported
// program, PyTorch on the model itself (tools/model_time.py --engine).
inline constexpr const char* kModelPeerEngines[] = {"jax", "torch", "torch-checkpoint",
                                                    "torch-compile"};
// The models of --sweep=models (tools/real_models.py names them), in order.
// --sweep=models samples each row for this long (unless --max-row-seconds),
// with no sampling budget (unless --sampling-budget): a GPT-2 small step
// takes seconds, so a row gets a few pairs with eager.
inline constexpr double kModelRowSeconds = 30;
inline constexpr const char* kSweepModels[] = {"nanogpt", "gpt2", "llama-100m", "resnet50"};
// What --sweep=models runs without --models: GPT-2 small at the largest
// batch eager fits (as people train it: the batch as large as memory
// allows), the others at their sizes.
inline constexpr const char* kDefaultSweepModels[] = {"nanogpt", "gpt2@fit", "llama-100m",
                                                      "resnet50"};

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
// A --policies value as CaseVariant labels, in order: split at ';' if it
// has one, else at ',' as ParseBenchFlags describes.
std::vector<std::string> SplitPolicies(const std::string& text);
// 80% of the machine's physical memory, as `remat run --max-memory`'s default.
int64_t DefaultMaxMemoryBytes();
// The help of this binary's own flags (Google Benchmark prints its own after).
std::string BenchHelp();

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_FLAGS_H_
