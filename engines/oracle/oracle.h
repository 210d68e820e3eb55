// The float64 oracle: value and gradients of a Program by a plain reverse
// mode of its own, sharing no arithmetic and no traversal with the engines it
// judges (it uses neither engines/api/rules.h, nor engines/autodiff/, nor any
// Kernels). Every f32 engine, and the old `reference` engine (eager's
// interpreter on float64 kernels), is compared with it; it is itself compared
// with central differences on every entry (harness/gradcheck_test.cc).
//
//   Result r = OracleValueAndGrad(program, args, /*wrt=*/{0, 1});
//
// What it does, all of it in float64:
// - Flattens the program into one list of primitive applications (a Wengert
//   list): checkpoint regions and chains run inline (their policies and
//   schedules decide what an engine keeps, never what it computes, so the
//   oracle ignores them); a scan is unrolled step by step, step i reading a
//   view of slice i of each stacked input.
// - Keeps every value of the list, then walks it backwards once, adding each
//   primitive's vector-Jacobian product into a map from value to adjoint.
//   Nothing is recomputed, nothing is scheduled. With `wrt` empty there is
//   no backward pass (a loss evaluated for central differences).
// - Rounding: f32 arguments are converted to f64 exactly; every sum is a
//   plain loop in f64. No bit-for-bit agreement with anyone is promised, only
//   the math: the forward semantics are engines/api/kernels.h's (softmax
//   max-subtracted, LayerNorm with the biased variance and
//   Kernels::kLayerNormEps, gelu's tanh form, relu'(0) = 0, relu(NaN) = NaN).
//
// Contract (engines/api/CONTRACT.md, as far as it is not about bits):
// - Arguments are f32 or f64 and must fit the program (ValidateArguments);
//   `value` is f64[], grads[j] is f64 of parameter wrt[j]'s shape (zeros when
//   no cotangent reaches it). The program's output must be rank 0.
// - Every byte is allocated through one MemoryTracker per run
//   (Result::tracker): f64 arguments are counted, not copied, as inputs; f32
//   ones are converted into tracked copies; values are activations, adjoints
//   gradients. Once the Result's tensors are dropped nothing is live. The
//   peak is measured, never predicted (predicted_peak_bytes is -1).
// - `residuals` lists every value the list keeps (all of them), one line per
//   op and type, scan steps stacked; residual_bytes is their total, arguments
//   and views of them excluded.
// - Bad input (arguments, a malformed program, an op kind it has no rule for)
//   throws remat::Error naming the program, the op and where it was traced.
#ifndef REMAT_ENGINES_ORACLE_ORACLE_H_
#define REMAT_ENGINES_ORACLE_ORACLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/program.h"
#include "engines/api/tensor.h"

namespace remat {

struct OracleOptions {
  // Live bytes a run may reach; the allocation that would pass it throws
  // remat::Error naming --max-memory. 0: none.
  int64_t max_memory_bytes = 0;
  // Result::schedule: one line per primitive, forward then backward.
  bool record_schedule = false;
  // RunOptions::on_tracker: called with the run's tracker when it is made.
  std::function<void(const std::shared_ptr<MemoryTracker>&)> on_tracker;
  // Test-only, null in every real run: called with each vector-Jacobian
  // product contribution (`op` the program op, `input` which of its inputs,
  // `contribution` of that input's shape; for a scan, the step's
  // contribution to a stacked input) before it is added to the input's
  // adjoint. A test that edits `contribution` plants a wrong rule and shows
  // that gradcheck catches it.
  std::function<void(const Op& op, int input, Tensor& contribution)> mutate_contribution;
};

// The value of `program` at `args` and its gradients with respect to the
// parameters `wrt`, in float64 (see above).
Result OracleValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                          const std::vector<int>& wrt, const OracleOptions& options = {});

// Beside the value, each new state and each gradient, the magnitude that
// bounds the rounding of an f32 computation of it, element by element: what
// the forward error bound of a sum is relative to (the sum of the absolute
// values of its terms, not its result), carried through every op with the
// op's sensitivity to its inputs, and back through every vector-Jacobian
// product the same way (op_rules.h: each op's rules). An f32 engine
// that rounds each of the K operations on a path (its rounding depth,
// harness/rounding_depth.h) within 2^-24 of its magnitude ends within about
// K 2^-24 M of the exact value, however much the result cancels. At least
// the value's own magnitude (|value|) for every computed value; an estimate
// (first order, errors of many terms in quadrature) that decides a
// tolerance, not an answer. (The gradients' compound through every layer of
// the backward pass; harness/conformance.h says why the suite's gradient
// bound does not use them.)
struct OracleMagnitudes {
  Tensor value;                         // f64[]
  std::map<std::string, Tensor> state;  // by parameter name, as Result::state
  std::vector<Tensor> grads;            // one per wrt entry, as Result::grads
};
// The magnitudes of `program` at `args`, with the gradients' for `wrt`
// (none when empty: a forward pass). Throws what OracleValueAndGrad throws.
OracleMagnitudes OracleRoundingMagnitudes(const Program& program, const std::vector<Tensor>& args,
                                          const std::vector<int>& wrt = {});

// The oracle as an Engine ("oracle"): OracleValueAndGrad under RunOptions.
// RunOptions::plan_only is refused (the oracle makes no plan);
// check_recompute_bits has nothing to check (nothing is recomputed).
class OracleEngine : public Engine {
 public:
  std::string name() const override { return "oracle"; }
  DType dtype() const override { return DType::kF64; }
  std::string kernels() const override { return ""; }
  bool honours_checkpoints() const override { return false; }
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options = {}) override;
};

}  // namespace remat

#endif  // REMAT_ENGINES_ORACLE_ORACLE_H_
