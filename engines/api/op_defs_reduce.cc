// The definitions (op_def.h) of the ops that reduce over an axis: sum, mean
// and amax over chosen axes, the softmaxes over the last axis (softmax,
// log_softmax, top_k_softmax) and cross_entropy, one entry each, with the
// table kernels they call.
#include "engines/api/op_defs_families.h"

#include <algorithm>
#include <span>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/loop_kernels_broadcast.h"
#include "engines/api/op_def.h"
#include "engines/api/op_defs_shared.h"

namespace remat {
namespace op_defs {
namespace {

// The table's kernels the ops below call (kernels.h: each backend
// implements them by name).
// cross_entropy(logits (N, C), targets (N)) = mean over rows r of
// logsumexp(logits[r]) - logits[r, t_r]; per row m = max, s = the sum of
// exp(x_j - m) (in float32 in lane_blocks::ExpShiftedSum's fixed order,
// loop_kernels_softmax.h's RowStats), lse = m + log s; rows summed in
// order, then / N. attrs.skip: the ignore_index (its rows left out, N the
// rows kept).
Shape CrossEntropyOperands(std::span<const Tensor* const> in) {
  const Shape& x = in[0]->shape();
  if (x.rank() != 2 || in[1]->shape() != Shape({x.dim(0)})) {
    throw Error(StrCat("logits ", in[0]->TypeString(), " and targets ", in[1]->TypeString(),
                       " do not fit: expected (N, C) and (N)"));
  }
  return x;
}
const KernelOp kCrossEntropyKernel = DefineKernel(
    {.name = "cross_entropy",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       CrossEntropyOperands(in);
       return Shape();
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return 4 * in[0]->num_elements(); },
     .int_operands = 0b10});
// Its gradient: dlogits[r, j] = (softmax(logits[r])_j - [j == t_r]) * dy / N.
const KernelOp kCrossEntropyBackwardKernel = DefineKernel(
    {.name = "cross_entropy_backward",
     .arity = 3,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[2]->shape().rank() != 0) throw Error("dy of cross_entropy is a scalar");
       return CrossEntropyOperands(in);
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return 4 * in[0]->num_elements(); },
     .int_operands = 0b10});

// log_softmax over the last axis (loop_kernels_softmax.h states the
// order): 5 FLOPs per element (max, subtract, exp, sum, subtract; the row's
// log is not counted); its backward, from the output y, 4 (the row sum of
// dy, exp(y), the product, the subtraction).
Shape SameShapeWithLastAxisOperands(std::span<const Tensor* const> in, const KernelAttrs& a) {
  const Shape s = SameShapeOperands(in, a);
  if (s.rank() == 0) throw Error(StrCat("works over the last axis; got the scalar ", in[0]->TypeString()));
  return s;
}
const KernelOp kLogSoftmaxKernel = DefineKernel(
    {.name = "log_softmax", .arity = 1, .shape = SameShapeWithLastAxisOperands, .flops = PerElementOfX<5>});
const KernelOp kLogSoftmaxBackwardKernel = DefineKernel(
    {.name = "log_softmax_backward", .arity = 2, .shape = SameShapeWithLastAxisOperands,
     .flops = PerElementOfX<4>});

// top_k_softmax over the last axis (loop_kernels_softmax.h states the order
// and the tie rule): 4 FLOPs per element (subtract, exp, sum, divide; the
// choice's comparisons are not counted); its backward from y, 4 (the
// product, the row sum, the subtraction, the product).
Shape TopKOperands(std::span<const Tensor* const> in, const KernelAttrs& a) {
  const Shape& s = in[0]->shape();
  if (s.rank() == 0 || a.int_a < 1 || a.int_a > s.dim(s.rank() - 1)) {
    throw Error(StrCat("top_k_softmax: k=", a.int_a, " must be in [1, C], C the last axis of ",
                       in[0]->TypeString()));
  }
  for (size_t j = 1; j < in.size(); ++j) {
    if (in[j]->shape() != s) {
      throw Error(StrCat("operand ", j, " ", in[j]->TypeString(), " is not ", in[0]->TypeString()));
    }
  }
  return s;
}
const KernelOp kTopKSoftmaxKernel = DefineKernel(
    {.name = "top_k_softmax", .arity = 1, .shape = TopKOperands, .flops = PerElementOfX<4>});
const KernelOp kTopKSoftmaxBackwardKernel = DefineKernel(
    {.name = "top_k_softmax_backward",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[0]->shape().rank() == 0 || in[1]->shape() != in[0]->shape()) {
         throw Error(StrCat("top_k_softmax's backward takes y and dy of one shape of rank >= 1, got ",
                            in[0]->TypeString(), " and ", in[1]->TypeString()));
       }
       return in[0]->shape();
     },
     .flops = PerElementOfX<4>});

// sum, mean and amax over chosen axes (loop_kernels_broadcast.h states the
// order): KernelAttrs::perm the axes (sorted, distinct), int_a the
// reduction (loop_kernels::ReduceOp), int_b 1 to keep the reduced axes
// with size 1. One FLOP per element of x.
std::vector<int64_t> CheckedAxes(const char* what, const Shape& x, std::span<const int64_t> axes) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    const int64_t axis = a < 0 ? a + x.rank() : a;
    if (axis < 0 || axis >= x.rank()) {
      throw Error(StrCat(what, ": axis ", a, " is outside ", x.ToString(), " (rank ", x.rank(), ")"));
    }
    if (std::find(out.begin(), out.end(), axis) != out.end()) {
      throw Error(StrCat(what, ": axis ", a, " is given twice (", x.ToString(), ")"));
    }
    out.push_back(axis);
  }
  std::sort(out.begin(), out.end());
  return out;
}
Shape ReducedShape(const Shape& x, std::span<const int64_t> axes, bool keepdim) {
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) dims.push_back(x.dim(i));
    if (reduced && keepdim) dims.push_back(1);
  }
  return Shape(std::move(dims));
}
const KernelOp kReduceKernel = DefineKernel(
    {.name = "reduce",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       const Shape& x = in[0]->shape();
       const std::vector<int64_t> axes = CheckedAxes("reduce", x, a.perm);
       if (axes != a.perm || a.int_a < 0 || a.int_a > 2 || (a.int_b != 0 && a.int_b != 1)) {
         throw Error("reduce: attributes are not sorted axes, an op 0..2 and keepdim 0 or 1");
       }
       return ReducedShape(x, axes, a.int_b != 0);
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return in[0]->num_elements(); }});
// Their backwards into x's shape (KernelAttrs::shape, the other attributes
// as reduce's): reduce_backward (sum, mean) from dy; amax_backward from x,
// y and dy (y and dy of the reduced shape, kept or not).
Shape ReduceBackwardOperands(std::span<const Tensor* const> in, const KernelAttrs& a) {
  const std::vector<int64_t> axes = CheckedAxes("reduce_backward", a.shape, a.perm);
  const int64_t reduced = ReducedShape(a.shape, axes, true).num_elements();
  bool fits = in.back()->num_elements() == reduced;
  if (in.size() == 3) fits = fits && in[0]->shape() == a.shape && in[1]->num_elements() == reduced;
  if (!fits) {
    throw Error(StrCat("reduce_backward: operands ", in[0]->TypeString(), (in.size() == 3 ? " ..." : ""),
                       " do not fit x ", a.shape.ToString(), " reduced over ", axes.size(), " axes"));
  }
  return a.shape;
}
const KernelOp kReduceBackwardKernel = DefineKernel(
    {.name = "reduce_backward", .arity = 1, .shape = ReduceBackwardOperands,
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});
const KernelOp kAmaxBackwardKernel = DefineKernel(
    {.name = "amax_backward", .arity = 3, .shape = ReduceBackwardOperands,
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});

// An entry's pieces for sum, mean and amax over op.ints (none: every axis).
std::vector<int64_t> Axes(const Op& op, const Shape& x) {
  if (!op.ints.empty()) return CheckedAxes(OpKindName(op.kind), x, op.ints);
  std::vector<int64_t> all;
  for (int i = 0; i < x.rank(); ++i) all.push_back(i);
  return all;
}
Shape ReduceShape(const Op& op, const Shapes& in) {
  if (op.scalar != 0 && op.scalar != 1) {
    throw Error(StrCat(OpKindName(op.kind), ": keepdim=", op.scalar, " is not 0 or 1"));
  }
  const std::vector<int64_t> axes = Axes(op, in[0]);
  if (op.kind == OpKind::kAmax) {
    for (int64_t a : axes) {
      if (in[0].dim(static_cast<int>(a)) == 0) {
        throw Error(StrCat("amax over axis ", a, " of ", in[0].ToString(), ", which is empty"));
      }
    }
  }
  return ReducedShape(in[0], axes, op.scalar == 1);
}
Tensor ReduceForward(Kernels& k, const Op& op, const Tensor& x, loop_kernels::ReduceOp r) {
  KernelAttrs attrs;
  attrs.perm = Axes(op, x.shape());
  attrs.int_a = static_cast<int64_t>(r);
  attrs.int_b = op.scalar == 1 ? 1 : 0;
  return k.Call(kReduceKernel, {&x}, attrs);
}
Tensor ReduceBackward(Kernels& k, const Op& op, const BackwardArgs& a, loop_kernels::ReduceOp r) {
  KernelAttrs attrs;
  attrs.shape = a.input_shapes[0];
  attrs.perm = Axes(op, attrs.shape);
  attrs.int_a = static_cast<int64_t>(r);
  if (r == loop_kernels::ReduceOp::kAmax) {
    return k.Call(kAmaxBackwardKernel, {&a.saved_inputs[0], &a.saved_output, &a.dout}, attrs);
  }
  return k.Call(kReduceBackwardKernel, {&a.dout}, attrs);
}
// Terms per element of the output.
double Terms(const DepthArgs& a) {
  const int64_t n = a.output.num_elements();
  return n == 0 ? 0.0 : static_cast<double>(a.inputs[0].num_elements() / n);
}
Shapes MeanExample(Op& op) {
  op.ints = {-1};
  op.scalar = 1;  // keepdim
  return {Shape({3, 4})};
}
Shapes AmaxExample(Op& op) {
  op.ints = {0};
  return {Shape({3, 4})};
}

// clang-format off
const OpDef kReduceOps[] = {
    // sum     without ints: y = sum(x), rank 0 (the kernel table's sum, in
    //         its own order); saves nothing (x's shape is static);
    //         dx = broadcast(dy). With ints = the axes (negative from the
    //         end) and scalar 1 for keepdim (text: keepdim=1): the sum over
    //         those axes in the reduce kernel's order; dx = dy at every
    //         element it summed. FLOPs one per element of x
    {.kind = OpKind::kSum, .name = "sum", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) {
       return op.ints.empty() && op.scalar == 0 ? Shape() : ReduceShape(op, in);
     },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       if (op.ints.empty() && op.scalar == 0) return k.Sum(in[0]);
       return ReduceForward(k, op, in[0], loop_kernels::ReduceOp::kSum);
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (!a.needs[0]) return;
       d[0] = op.ints.empty() && op.scalar == 0 ? k.Broadcast(a.dout, a.input_shapes[0])
                                                : ReduceBackward(k, op, a, loop_kernels::ReduceOp::kSum);
     },
     .flops = [](const Shapes& in, const Shape&) { return in[0].num_elements(); },
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + Terms(a); },
     .backward_depth = PassThrough,
     .example = Unary34,
     .reduces_axes = true},

    // mean    sum's attributes; y = the sum over the axes (sum's order) / the
    //         number of terms; saves nothing; dx = dy / the number of terms
    {.kind = OpKind::kMean, .name = "mean", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = ReduceShape,
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return ReduceForward(k, op, in[0], loop_kernels::ReduceOp::kMean);
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = ReduceBackward(k, op, a, loop_kernels::ReduceOp::kMean);
     },
     .flops = [](const Shapes& in, const Shape&) { return in[0].num_elements(); },
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + Terms(a) + 1; },
     .backward_depth = [](const DepthArgs&, double dy, std::vector<double>& k) { k[0] = dy + 1; },
     .example = MeanExample,
     .reduces_axes = true},

    // amax    sum's attributes; y = the max over the axes (a NaN
    //         propagates; no axis of size 0); saves x and y; the gradient
    //         is split evenly among ties, as PyTorch's amax:
    //         dx = dy / t at each of the t elements equal to y, else 0
    {.kind = OpKind::kAmax, .name = "amax", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = ReduceShape,
     .saves = [](const Needs& needs, Saves& s) {
       s.inputs[0] = needs[0];
       s.output = needs[0];
     },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return ReduceForward(k, op, in[0], loop_kernels::ReduceOp::kAmax);
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = ReduceBackward(k, op, a, loop_kernels::ReduceOp::kAmax);
     },
     .flops = [](const Shapes& in, const Shape&) { return in[0].num_elements(); },
     .forward_depth = ExactDepth,
     .backward_depth = [](const DepthArgs&, double dy, std::vector<double>& k) { k[0] = dy + 1; },
     .example = AmaxExample,
     .reduces_axes = true},

    // softmax over the last axis; saves y (as JAX's custom JVP)
    //         dx = y * (dy - sum(dy * y, last axis)); FLOPs 5 per element
    {.kind = OpKind::kSoftmax, .name = "softmax", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) {
       if (in[0].rank() == 0) {
         throw Error(StrCat("works over the last axis; got the scalar ", in[0].ToString()));
       }
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) { s.output = needs[0]; },
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Softmax(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.SoftmaxBackward(a.saved_output, a.dout);
     },
     .flops = [](const Shapes&, const Shape& out) { return 5 * out.num_elements(); },
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + static_cast<double>(LastDim(a.inputs[0])) + 3; },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_output) + static_cast<double>(LastDim(a.inputs[0])) + 3;
     },
     .example = Unary34,
     .normalizes = true},

    // cross_entropy  loss = mean over rows r of logsumexp(x[r]) - x[r, t_r]:
    //         inputs logits (N, C) and targets (i32 (N), each in [0, C));
    //         a scalar (kCrossEntropyKernel states the order). Saves both;
    //         dx = (softmax(x) - onehot(t)) dy / N. FLOPs 4 per logit.
    //         Optional attr `ints` = {IGNORE_INDEX} (any value; Hugging
    //         Face's -100): rows whose target equals it add nothing, N is
    //         then K, the rows kept (K = 0: nan loss, zero gradient), and
    //         the other targets are in [0, C); left out, every row counts.
    {.kind = OpKind::kCrossEntropy, .name = "cross_entropy", .arity = 2, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) {
       if (in[0].rank() != 2 || in[1] != Shape({in[0].dim(0)})) {
         throw Error(StrCat("logits ", in[0].ToString(), " and targets ", in[1].ToString(),
                            " do not fit; cross_entropy takes (N, C) and (N)"));
       }
       if (op.ints.size() > 1) {
         throw Error(StrCat("cross_entropy's ints=", IntsText(op.ints),
                            ": expected ints=[IGNORE_INDEX] or no ints"));
       }
       return Shape();
     },
     .saves = [](const Needs& needs, Saves& s) {
       s.inputs[0] = needs[0];
       s.inputs[1] = needs[0];
     },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kCrossEntropyKernel, {&in[0], &in[1]}, {.skip = op.ints});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kCrossEntropyBackwardKernel, {&a.saved_inputs[0], &a.saved_inputs[1], &a.dout},
                       {.skip = op.ints});
       }
     },
     .flops = [](const Shapes& in, const Shape&) { return 4 * in[0].num_elements(); },
     .forward_depth = [](const DepthArgs& a) {
       // The float32 exp is within 0.99 ulp (lane_math.h's ExpLanes): two
       // roundings where a correctly rounded one would be one.
       return a.deepest() + static_cast<double>(LastDim(a.inputs[0]) + Rows(a.inputs[0])) + 5;
     },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_inputs[0]) + static_cast<double>(LastDim(a.inputs[0])) + 6;
     },
     .example = [](Op&) { return Shapes{Shape({3, 4}), Shape({3})}; },
     .int_inputs = 0b10,
     .int_bound = [](const Shapes& in, int) { return LastDim(in[0]); },
     .optional_ints = true},

    // log_softmax  y = x - logsumexp(x) over the last axis; saves y;
    //         dx = dy - softmax(x) sum(dy), softmax(x) = e^y
    {.kind = OpKind::kLogSoftmax, .name = "log_softmax", .arity = 1, .has_scalar = false,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) {
       if (in[0].rank() == 0) {
         throw Error(StrCat("log_softmax works over the last axis; got a scalar ", in[0].ToString()));
       }
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) { s.output = needs[0]; },
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kLogSoftmaxKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kLogSoftmaxBackwardKernel, {&a.saved_output, &a.dout});
     },
     .flops = [](const Shapes&, const Shape& out) { return 5 * out.num_elements(); },
     .forward_depth = [](const DepthArgs& a) {
       return a.deepest() + static_cast<double>(LastDim(a.inputs[0])) + 6;  // exp: two (ExpLanes)
     },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy + static_cast<double>(LastDim(a.inputs[0])), a.kf_output) + 5;
     },
     .example = Unary34},

    // top_k_softmax  over the last axis: the k largest x_j of each row
    //         (attr ints = {k}, 1 <= k <= C; among equal values the lowest
    //         index first, NaN above every number; CONTRACT.md's tie rule)
    //         get softmax over those k, the others 0 (a mixture of experts'
    //         top-k routing weights); saves y; dx = y * (dy - sum(dy * y)),
    //         the choice held fixed (0 off it); FLOPs 4 per element
    {.kind = OpKind::kTopKSoftmax, .name = "top_k_softmax", .arity = 1, .has_scalar = false,
     .num_ints = 1,
     .shape = [](const Op& op, const Shapes& in) {
       const int64_t k = op.ints[0];
       if (in[0].rank() == 0 || k < 1 || k > LastDim(in[0])) {
         throw Error(StrCat("top_k_softmax: k=", k, " must be in [1, C], C the last axis of ",
                            in[0].ToString()));
       }
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) { s.output = needs[0]; },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kTopKSoftmaxKernel, {&in[0]}, {.int_a = Int(op, 0)});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kTopKSoftmaxBackwardKernel, {&a.saved_output, &a.dout});
     },
     .flops = [](const Shapes&, const Shape& out) { return 4 * out.num_elements(); },
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + static_cast<double>(LastDim(a.inputs[0])) + 3; },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_output) + static_cast<double>(LastDim(a.inputs[0])) + 3;
     },
     .example = [](Op& op) {
       op.ints = {2};
       return Shapes{Shape({3, 4})};
     },
     .normalizes = true},
};
// clang-format on

}  // namespace

std::span<const OpDef> ReduceOpDefs() { return kReduceOps; }

}  // namespace op_defs
}  // namespace remat
