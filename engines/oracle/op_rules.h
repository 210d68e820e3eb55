// The oracle's rules: one entry per primitive op in a table of the oracle's
// own (op_table.cc), holding the op's output shape, its forward rule, its
// vector-Jacobian product and its two rounding-magnitude rules
// (OracleRoundingMagnitudes, oracle.h) side by side. Written from the ops'
// definitions (engines/api/program.h, kernels.h), and independent of every
// engine: no engines/api/op_defs.cc or rules.h, no autodiff/, no Kernels.
// The traversal that applies them (regions inline, scans unrolled, one walk
// backwards) is oracle.cc's.
//
// The entries, by family (each file states its ops' rules):
//   elementwise_rules.cc  relu, sin, cos, square, exp, log, neg, scale,
//                         gelu, gelu_erf, silu, rsqrt, sqrt, tanh, sigmoid,
//                         pow, hardtanh; bias_add
//   broadcast_rules.cc    add, sub, mul, div, where (numpy broadcasting)
//   reduce_rules.cc       sum, mean, amax over chosen axes
//   matmul_rules.cc       matmul, transpose, split_heads, merge_heads
//   layout_rules.cc       name, state, reshape, permute, expand, cat
//   indexing_rules.cc     slice, select, embedding (padding_idx), masked_fill
//   softmax_rules.cc      softmax, log_softmax, top_k_softmax, cross_entropy
//                         (ignore_index)
//   norm_rules.cc         layer_norm, rms_norm, batch_norm and its running
//                         mean and variance
//   conv_pool_rules.cc    conv2d, conv2d_bias, max_pool2d, global_avg_pool,
//                         adaptive_avg_pool2d
//   random_rules.cc       dropout
//   magnitude_rules.cc    the magnitude rules that several families share
//
// Everything in float64; every rule is a plain loop, its sums in order.
#ifndef REMAT_ENGINES_ORACLE_OP_RULES_H_
#define REMAT_ENGINES_ORACLE_OP_RULES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/program.h"
#include "engines/api/shape.h"
#include "engines/api/tensor.h"

namespace remat {
namespace oracle {

// The output shape of primitive `op` on operands of shapes `in`; throws
// remat::Error (ShapeError) where the operands or attributes do not fit.
using ShapeRule = Shape (*)(const Op& op, const std::vector<Shape>& in);

// The forward rule: writes `op` applied to `in` (f64 tensors the shape rule
// accepted) into `out` (zeros of the shape rule's shape) and adds its FLOPs,
// in engines/api/kernels.h's model, to *flops.
using ForwardRule = void (*)(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                             int64_t* flops);

// What a vector-Jacobian product reads, and where it hands its results.
struct VjpArgs {
  const Op& op;
  std::vector<const Tensor*> in;  // the op's input values
  const Tensor& dy;               // the adjoint of its output
  const std::shared_ptr<MemoryTracker>& tracker;
  int64_t* flops;  // the backward pass's FLOPs, added to
  // Receives the contribution to input `input`'s adjoint.
  std::function<void(int input, Tensor contribution)> contribute;

  // A new zero gradient (the tracker's Category::kGradients).
  Tensor NewGradient(const Shape& shape) const {
    return Tensor::Zeros(DType::kF64, shape, tracker, Category::kGradients);
  }
  void Contribute(int input, Tensor contribution) const {
    contribute(input, std::move(contribution));
  }
};
// The backward rule: calls args.Contribute once for each input a gradient
// reaches (none for an integer input: ids, targets, masks, seeds), each a
// new tensor of that input's shape, in input order.
using VjpRule = void (*)(const VjpArgs& args);

// What a forward magnitude rule reads (OracleRoundingMagnitudes).
struct MagnitudeArgs {
  const Op& op;
  std::vector<const Tensor*> in;    // the input values
  std::vector<const Tensor*> mags;  // their magnitudes (an integer's is its value)
  const Tensor& out;                // the output's value
  const std::shared_ptr<MemoryTracker>& tracker;

  // Zeros of the output's shape (Category::kActivations).
  Tensor NewMagnitude() const;
  // `op`'s own forward rule on other operands, into a new tensor; its
  // FLOPs are no part of the run's.
  Tensor Apply(const std::vector<const Tensor*>& operands) const;
};
// The magnitude of the output: element by element, at least |value|.
using MagnitudeRule = Tensor (*)(const MagnitudeArgs& args);

// Replaces an input value v of magnitude m (GradMagnitudeArgs::vjp_with).
using Substitute = std::function<Tensor(const Tensor& v, const Tensor& m)>;

// What a gradient magnitude rule reads (OracleRoundingMagnitudes).
struct GradMagnitudeArgs {
  const Op& op;
  std::vector<const Tensor*> in;    // the input values
  std::vector<const Tensor*> mags;  // their magnitudes
  const Tensor& y;                  // the output's value
  const Tensor& dy;                 // its adjoint
  const Tensor& mdy;                // the adjoint's magnitude
  const std::shared_ptr<MemoryTracker>& tracker;
  // The op's VjpRule with each non-integer input's value v (magnitude m)
  // replaced by substitute(v, m), for adjoint `dy`: one contribution per
  // input (undefined where the rule gives none). Adds to no adjoint, counts
  // no FLOPs.
  std::function<std::vector<Tensor>(const Substitute& substitute, const Tensor& dy)> vjp_with;
};
// The magnitudes of the contributions to each input's adjoint, one per
// input (undefined where none); the traversal adds their absolute values up
// (integer inputs excluded).
using GradMagnitudeRule = std::vector<Tensor> (*)(const GradMagnitudeArgs& args);

// One primitive's entry: every field set.
struct OpRules {
  ShapeRule shape = nullptr;
  ForwardRule forward = nullptr;
  VjpRule vjp = nullptr;
  MagnitudeRule magnitude = nullptr;
  GradMagnitudeRule grad_magnitude = nullptr;
};

// An entry of a family's list.
struct OpEntry {
  OpKind kind;
  OpRules rules;
};

// The families' entries (their files).
const std::vector<OpEntry>& ElementwiseRules();
const std::vector<OpEntry>& BroadcastRules();
const std::vector<OpEntry>& ReduceRules();
const std::vector<OpEntry>& MatMulRules();
const std::vector<OpEntry>& LayoutRules();
const std::vector<OpEntry>& IndexingRules();
const std::vector<OpEntry>& SoftmaxRules();
const std::vector<OpEntry>& NormRules();
const std::vector<OpEntry>& ConvPoolRules();
const std::vector<OpEntry>& RandomRules();

// The table (op_table.cc): the entry of `kind`, or null for a structural op
// (checkpoint, scan, chain) or one the oracle has no rules for.
const OpRules* FindRules(OpKind kind);
// FindRules(op.kind), or remat::Error "oracle: no rule for op kind N (op)".
const OpRules& RulesFor(const Op& op);

// RulesFor(op).forward.
void Forward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
             int64_t* flops);

// ---------------------------------------------------------------------------
// Helpers of the rules.

// "oracle: <op>: <why> (operands <shapes>)": what a shape rule throws.
Error ShapeError(const Op& op, const std::vector<Shape>& in, const std::string& why);
// Throws ShapeError unless there are `n` operands.
void WantInputs(const Op& op, const std::vector<Shape>& in, size_t n);

// The shape rules of ops that keep their operand's shape: one operand; two
// of one shape.
Shape SameShape(const Op& op, const std::vector<Shape>& in);
Shape SameShapeBinary(const Op& op, const std::vector<Shape>& in);

// The last axis of `s` (1 for a scalar) and the rows of it: what the ops
// over the last axis read x as.
int64_t LastAxis(const Shape& s);
int64_t Rows(const Shape& s);

// Integer input element i as an index below `bound`, or an error naming the
// op, the position and the value.
int64_t Index(const Op& op, const Tensor& ids, int64_t i, int64_t bound);

// A new f64 tensor of t's shape (Category::kGradients) whose element i is
// f(t[i], i).
template <typename F>
Tensor MapTensor(const Tensor& t, const std::shared_ptr<MemoryTracker>& tracker, const F& f) {
  Tensor r = Tensor::Zeros(DType::kF64, t.shape(), tracker, Category::kGradients);
  for (int64_t i = 0; i < t.num_elements(); ++i) r.f64()[i] = f(t.f64()[i], i);
  return r;
}

// The vector-Jacobian product of an elementwise op of one input: dx_i =
// f(x_i, dy_i), `flops_per_element` FLOPs each.
template <typename F>
void UnaryVjp(const VjpArgs& a, int64_t flops_per_element, const F& f) {
  const Tensor& xt = *a.in[0];
  const double* x = xt.f64();
  const double* dy = a.dy.f64();
  Tensor dx = a.NewGradient(xt.shape());
  for (int64_t i = 0; i < xt.num_elements(); ++i) dx.f64()[i] = f(x[i], dy[i]);
  *a.flops += flops_per_element * xt.num_elements();
  a.Contribute(0, std::move(dx));
}

// The forward rule of an elementwise op of one input: y_i = f(x_i),
// `flops_per_element` FLOPs each.
template <typename F>
void UnaryForward(const std::vector<const Tensor*>& in, const Tensor& out,
                  int64_t flops_per_element, int64_t* flops, const F& f) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t n = in[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
  *flops += flops_per_element * n;
}

// ---------------------------------------------------------------------------
// The magnitude rules several families share (magnitude_rules.cc, which
// states their reasons).

// A product of two inputs (matmul, mul, conv2d).
Tensor ProductMagnitude(const MagnitudeArgs& a);
// A sum (add, sum, bias_add, the running mean); sub: its terms added; the
// average pool: a mean.
Tensor SumMagnitude(const MagnitudeArgs& a);
Tensor SubMagnitude(const MagnitudeArgs& a);
Tensor MeanPoolMagnitude(const MagnitudeArgs& a);
Tensor AdaptivePoolMagnitude(const MagnitudeArgs& a);
// A mean over chosen axes (mean).
Tensor MeanMagnitude(const MagnitudeArgs& a);
// The same op on the magnitudes, in absolute value (a copy, a layout, a
// selection); and with the output's own rounding (a constant factor, a
// dropout's division: a rounded product).
Tensor SameOpMagnitude(const MagnitudeArgs& a);
Tensor RoundedSameOpMagnitude(const MagnitudeArgs& a);

// The gradients': a product of the adjoint and an input (matmul, mul,
// conv2d); a smooth elementwise op (its input's error carried through f'');
// a single term per element or terms of one sign (the rest).
std::vector<Tensor> ProductGradMagnitude(const GradMagnitudeArgs& a);
std::vector<Tensor> SmoothGradMagnitude(const GradMagnitudeArgs& a);
std::vector<Tensor> LinearGradMagnitude(const GradMagnitudeArgs& a);

}  // namespace oracle
}  // namespace remat

#endif  // REMAT_ENGINES_ORACLE_OP_RULES_H_
