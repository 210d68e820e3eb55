// Conformance checks shared by the test suite and the command line: a case
// (problem, parameters, seeded inputs) and the comparisons that decide
// whether an engine's value and gradients are right.
#ifndef REMAT_HARNESS_CONFORMANCE_H_
#define REMAT_HARNESS_CONFORMANCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "problems/problem.h"

namespace remat {

struct Case {
  const Problem* problem = nullptr;
  // Keeps `problem` alive when no registry owns it (a program file's).
  std::shared_ptr<const Problem> owner;
  ParamValues params;
  Program program;
  std::vector<Tensor> inputs;  // f32, seeded
  std::vector<int> wrt;
  std::string ToString() const;  // "layer_loss d=16 N=8"
};

Case MakeCase(const Problem& problem, const ParamValues& params, uint64_t seed = 1);

// Gradcheck of the float64 oracle on `c`, whose oracle result is `oracle`:
// for each input of c.wrt, at `per_input` elements spread over it (every
// element for 0), the central difference of the loss over [x - step, x +
// step] (divided by the distance the two float32 points really are)
// against the oracle's gradient there; one line for each element farther
// than tolerance(oracle's gradient): "d loss / d NAME[j]: central
// difference N, oracle A". Empty when every element agrees.
std::vector<std::string> CentralDifferenceDisagreements(
    const Case& c, const Result& oracle, float step, int64_t per_input,
    const std::function<double(double analytic)>& tolerance);

// One f32 tensor per parameter of `program`, with shape but no data (a
// dry-run tracker's): what RunOptions::plan_only takes, so that a plan of a
// problem bigger than the machine allocates nothing.
std::vector<Tensor> ShapeOnlyArguments(const Program& program);

// Tolerance of an f32 engine against the float64 oracle (engines/oracle, a
// reverse mode of its own that shares no rule or kernel with the engines),
// per element i of each tensor:
//   |got_i - ref_i| <= kF32ToleranceFactor * K * 2^-24 * max(M_i, max_j |ref_j|)
// where K is that tensor's rounding depth (harness/rounding_depth.h: the
// most roundings any path from the inputs to one of its elements passes
// through, from the program's structure, separately for the value and for
// each gradient) and M its rounding magnitude: for the value and the new
// state, the oracle's (OracleRoundingMagnitudes: what the roundings are
// relative to, the sum of the absolute values of a sum's terms rather than
// its result, so that an honest engine is not punished where a sum
// cancels), element by element, never below the tensor's largest |ref|
// (the bound before magnitudes: where an element's M is an estimate short
// of its error, the tensor's scale still holds it). For a gradient, M is 0:
// its bound is relative to its own largest |ref|. The oracle carries the
// gradients' magnitudes too (OracleMagnitudes::grads), and they are not
// used: each vector-Jacobian product's worst case compounds layer after
// layer of the backward pass, to 244518x max|grad x| on transformer_stack
// at test sizes (2467x without the forward values' errors carried), where
// an f32 engine's errors stay under 1% of the bound relative to max|ref|
// (tools/bazel run //harness:tolerance_margins): a bound that loose would
// pass any gradient there. To first order an f32 result is within K *
// 2^-24 of that magnitude; the factor covers the few roundings per term
// the count merges.
inline constexpr double kF32ToleranceFactor = 4.0;

struct Agreement {
  bool ok = true;
  // What kind of disagreement `detail` names, so that a caller reports a
  // wrong shape as a wrong shape, not as a number over its tolerance.
  enum class Kind {
    kNone,      // ok
    kCount,     // a gradient or a new state missing or extra
    kDType,     // a tensor of another dtype than the engine's
    kShape,     // a tensor of another shape than the oracle's
    kValue,     // a number outside its tolerance
  };
  Kind kind = Kind::kNone;
  // The largest error over its allowed tolerance, over all tensors (<= 1 is ok).
  double worst_ratio = 0;
  // The worst tensor, element (its index per axis: "grad w1[3,5]"), values
  // and tolerance; or the tensor and its expected type ("f32[16,16]").
  std::string detail;
  // Each tensor's bound and how much of it was used: the margin.
  struct TensorMargin {
    std::string name;        // "value", "grad w1", ...
    double k = 0;            // its rounding depth
    double tolerance = 0;    // the largest: kF32ToleranceFactor * k * 2^-24 * magnitude
    double max_abs = 0;      // max|oracle|
    double worst_ratio = 0;  // max over elements of error / its tolerance (<= 1 is ok)
    double magnitude = 0;    // the largest max(M_i, max_abs) (max_abs without M)
    double worst_ratio_own = 0;  // the same against max_abs alone (the tolerance before M)
  };
  std::vector<TensorMargin> tensors;
};

// Compares value and gradients of `got` with the oracle's `oracle`: every
// tensor of dtype `expected` (the engine's: f32 stays f32 end to end) and of
// the oracle's shape, within its tolerance; and the new state (a tensor for
// each of the oracle's, within the tolerance of its forward depth).
// The magnitudes are the oracle's only where the
// outputs' own would not do (they are never smaller), unless
// `always_magnitudes` (a report of the margins).
Agreement CompareWithOracle(const Case& c, const Result& got, const Result& oracle,
                            DType expected = DType::kF32, bool always_magnitudes = false);

// Where two results' value and gradients differ in a single bit, as
// "value" or "gradient i"; nothing when they are bit-for-bit equal (NaNs
// compare by bits). The check every engine-vs-eager equality test uses.
std::optional<std::string> FirstBitDifference(const Result& a, const Result& b);
// Where two results' new state (Result::state) differs: a name only one
// has, or the first whose bits differ, as "state NAME"; nothing when equal.
std::optional<std::string> StateDiffers(const Result& a, const Result& b);

// A run and the tensor storage it allocated outside the trackers it
// reported (RunOptions::on_tracker, and Result::tracker): the growth of the
// process's storage ledger (TensorStorageBytes) over the run, less what
// those trackers counted (MemoryTracker::storage_bytes). Every byte of a run
// is allocated through its trackers (engines/api/CONTRACT.md section 4), so
// it must be at most 0: a buffer allocated with no tracker (Copy(t) for
// Copy(t, tracker)) or through a tracker the engine keeps to itself is
// memory no reported peak includes. Below 0: the run used storage allocated
// before it (an arena the engine keeps between runs), which its trackers
// counted as the run's (CONTRACT.md section 4). Not thread-safe against other runs at the same
// time (the ledger is the process's).
struct CountedRun {
  Result result;
  int64_t untracked_bytes = 0;
  std::vector<std::shared_ptr<MemoryTracker>> trackers;  // those reported, in order
};
// Calls `options.on_tracker` too, if set. Exceptions propagate.
CountedRun RunCountingStorage(Engine& engine, const Program& program,
                              const std::vector<Tensor>& args, const std::vector<int>& wrt,
                              RunOptions options = {});

// Compares an engine's residual listing with eager's on the same program,
// line by line (shape, stacked or not, without the dtype; source; count), as
// CONTRACT.md section 4 states: `exact` (an engine that stores everything)
// requires the same lines, arguments included; otherwise no line of `got`
// that eager lacks, arguments excluded (a region keeps a subset of what eager
// keeps, and its inputs). Returns what differs, or nothing.
// With `values_only`, lines are compared as the values they stand for: a
// stacked line as `count` values of one step's shape, checkpoint_name
// labels left out (how a listing groups and labels values is compared on
// the problems; the fuzzer compares which values are saved).
std::optional<std::string> ResidualListingDiffers(const Stats& eager, const Stats& got, bool exact,
                                                  bool values_only = false);

// Where an engine's Stats (and schedule) contradict their definitions
// (engines/api/stats.h, CONTRACT.md sections 4 and 5), one sentence each,
// naming the field; empty when none does. `got` is the engine's run and
// `eager` eager's run of the same program, arguments and wrt (both with
// RunOptions::record_schedule when `schedules` is true); `same_kernels`
// when the engine runs on remat's Kernels (Engine::kernels() not ""), which
// count FLOPs and kernel calls one way for every engine. The rules:
// - no byte count, FLOP count or time below 0 (predicted_peak_bytes and
//   arena_bytes: -1 for none); seconds_in_kernels within the run's time;
// - every byte field the tracker keeps is the tracker's (Result::tracker):
//   peak_bytes, peak_bytes_by_category, high_water_bytes_by_category,
//   host_peak_bytes;
// - the forward pass is the program's, whatever is recomputed:
//   flops_forward is eager's; op_runs has eager's ops, each run at least as
//   often; flops_recomputed is 0 when every op ran as often as in eager,
//   and on remat's Kernels, the FLOP model's count (engines/api/op_defs_*.cc)
//   of the runs beyond eager's;
// - on remat's Kernels, the backward pass is eager's too: flops_backward is
//   eager's (recomputation excluded);
// - no argument listed twice in the residual listing;
// - the schedule: every line labelled forward, recompute or backward; on
//   remat's Kernels, one line per kernel run: as many forward lines as
//   eager's (the program once), forward and recompute lines adding up to
//   op_runs, as many backward lines as eager's.
std::vector<std::string> StatsContradictions(const Program& program, const Result& got,
                                             const Result& eager, bool schedules,
                                             bool same_kernels);

// Names of value/gradient tensors in Result order: "value", "grad w1", ...
std::vector<std::string> OutputNames(const Case& c);

// The name of a (problem, variant) test case as GoogleTest accepts it:
// "scan_stack" and "policy:dots_saveable" -> "scan_stack_policy_dots_saveable".
std::string PairTestName(const std::string& problem, const std::string& variant);

}  // namespace remat

#endif  // REMAT_HARNESS_CONFORMANCE_H_
