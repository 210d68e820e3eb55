// Case expansion: the rows a run has (problems x sizes x engines x
// variants, the A/A controls, the matmul bound rows), in the order they run,
// from the flags (harness/bench_flags.h). Each row is a CaseSpec
// (harness/case_spec.h) and how the bench runs it.
//
//   std::vector<PlannedRow> plan = PlanRows(flags, EngineNames());
#ifndef REMAT_HARNESS_BENCH_PLAN_H_
#define REMAT_HARNESS_BENCH_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/bench_flags.h"
#include "harness/case_spec.h"
#include "problems/problem.h"

namespace remat::bench {

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

// --sweep=budget: the memory_budget:B curve (engines/budget) on every
// problem at its first bench size (transformer_stack at L=4), B = 0, 0.1,
// ..., 1, with JAX's policies and the default run's schedules as points.
inline constexpr char kBudgetSweepPolicies[] =
    "memory_budget:0;memory_budget:0.1;memory_budget:0.2;memory_budget:0.3;memory_budget:0.4;"
    "memory_budget:0.5;memory_budget:0.6;memory_budget:0.7;memory_budget:0.8;memory_budget:0.9;"
    "memory_budget:1;as-written;nothing_saveable;dots_saveable;dots_with_no_batch_dims_saveable;"
    "everything_saveable;schedule:sqrt;schedule:revolve:4;schedule:budget:4MiB";
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
// --sweep=models: the engines (unless --engines) and policies of every model:
// eager, and recompute as the model is written (its own checkpoint regions)
// and at the least peak it can plan (engines/budget).
inline constexpr const char* kModelEngines[] = {"eager", "recompute"};
inline constexpr char kModelPolicies[] = "as-written;memory_budget:peak:min";
// The store-everything baseline every row's time is compared with (vs_eager).
inline constexpr char kBaselineEngine[] = "eager";
// Whether `engine` is one of the float64 checks (kOracleEngine,
// kReferenceEngine).
bool IsFloat64Check(const std::string& engine);
// The engine name of the oneDNN matmul bound rows.
inline constexpr char kBoundEngine[] = "onednn";

// Engines that run every checkpoint region inline, whatever its policy
// (eager, the reference, and any registered engine whose
// honours_checkpoints() is false): they get one row per problem and size
// ("as-written"), not one per policy.
bool IgnoresPolicies(const std::string& engine);
// Engines whose honours_memory_cap() is true: they get the cap rows.
bool HonoursMemoryCaps(const std::string& engine);

enum class RowKind {
  kValueAndGrad,  // engine->ValueAndGrad on a problem
  // oneDNN alone on the contractions (matmuls and convolutions,
  // IsContraction) one eager run makes on a case: the same kernels, shapes
  // and attributes in the same order, on operands that alias as eager's did
  // (one buffer per address eager's contractions read), with nothing
  // between them: the least time any engine's contractions of that run
  // take. Named for the matmuls, which were all it timed until it took the
  // convolutions too (2026-12-08): a convolution network's bound had been
  // its one classifier matmul, and its ceiling its other kernels' bytes.
  kMatMulBound,
};

// A row: a case (problem, size, engine, variant, wrt; harness/case_spec.h)
// and how the bench runs it. kMatMulBound rows: the case's problem, params,
// program file, wrt and case key, engine kBoundEngine, as written. A program file's row
// (--program): problem is its program's name, program_file the path.
struct PlannedRow : CaseSpec {
  RowKind kind = RowKind::kValueAndGrad;
  // "BM_ValueAndGrad/scan_stack/L=32,d=512,N=256/eager/as-written",
  // "BM_OneDnnMatMulBound/scan_stack/L=32,d=512,N=256".
  std::string name;
  // "scan_stack/L=32,d=512,N=256": rows with the same key are compared.
  std::string case_key;
  // An A/A control (harness/bench_controls.h): a second instance of the
  // baseline engine on the case as written, paired with the case's eager
  // like any other row; its x eager must come out 1.00. engine is
  // kBaselineEngine, as written; the name ends in "/control".
  bool control = false;
  // A row whose one run takes a minute or more (--sweep=scale): it runs once,
  // with no warm-up run before it (oneDNN's primitive creation is noise at
  // that size), and the memory pass records that run's peak instead of
  // running it again. kValueAndGrad only.
  bool big = false;
};

// The key of a problem's case, "scan_stack/L=32,d=512,N=256", or of a
// program file's, "NAME@FILE/..." (the program's name, the file's base
// name); no "/..." when the case has no parameters. (A model's case,
// --sweep=models, is keyed by its label instead.)
std::string CaseKeyOf(const std::string& problem, const std::string& program_file,
                      const OrderedParams& params);
// A row's name from its kind, case key, engine, variant and control:
// PlannedRow::name's forms.
std::string RowName(const PlannedRow& row);

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
// Before the rows of each case whose program has a matmul, the case's
// kMatMulBound row (not under --sweep=scale). A sweep's rows take SweepPolicies where it has them; --sweep=scale's
// are big. A program file's rows (--program) come after the problems', its
// case key "NAME@FILE" (the program's name, the file's base name). Throws
// remat::Error naming an unknown engine (with the registered ones), policy
// or problem, a bad program file (file:line:column), or for --problems or
// --program with --sweep.
// --sweep=models: `models` are the exported models' (label, program file):
// each a case keyed by its label, with eager (and its control), recompute
// under kModelPolicies (default engines: kModelEngines) and the matmul bound.
std::vector<PlannedRow> PlanRows(
    const BenchFlags& flags, const std::vector<std::string>& registered_engines,
    const std::vector<std::pair<std::string, std::string>>& models = {});

// The case's baseline row: eager's, not its A/A control.
inline bool IsBaselineRow(const PlannedRow& row) {
  return row.kind == RowKind::kValueAndGrad && row.engine == kBaselineEngine && !row.control;
}

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_PLAN_H_
