// The definitions (op_def.h) of the ops that reduce over an axis: sum, the
// softmaxes over the last axis (softmax, log_softmax, top_k_softmax) and
// cross_entropy, one entry each, with the table kernels they call.
#include "engines/api/op_defs_families.h"

#include <algorithm>
#include <span>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/kernels.h"
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
// order, then / N.
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

// clang-format off
const OpDef kReduceOps[] = {
    // sum     y = sum(x), rank 0; saves nothing (x's shape is static)
    //         dx = broadcast(dy); FLOPs one per element of x
    {.kind = OpKind::kSum, .name = "sum", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op&, const Shapes&) { return Shape(); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Sum(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Broadcast(a.dout, a.input_shapes[0]);
     },
     .flops = [](const Shapes& in, const Shape&) { return in[0].num_elements(); },
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + static_cast<double>(a.inputs[0].num_elements()); },
     .backward_depth = PassThrough,
     .example = Unary34},

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
    {.kind = OpKind::kCrossEntropy, .name = "cross_entropy", .arity = 2, .has_scalar = false,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) {
       if (in[0].rank() != 2 || in[1] != Shape({in[0].dim(0)})) {
         throw Error(StrCat("logits ", in[0].ToString(), " and targets ", in[1].ToString(),
                            " do not fit; cross_entropy takes (N, C) and (N)"));
       }
       return Shape();
     },
     .saves = [](const Needs& needs, Saves& s) {
       s.inputs[0] = needs[0];
       s.inputs[1] = needs[0];
     },
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return k.Call(kCrossEntropyKernel, {&in[0], &in[1]});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kCrossEntropyBackwardKernel, {&a.saved_inputs[0], &a.saved_inputs[1], &a.dout});
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
     .int_bound = [](const Shapes& in, int) { return LastDim(in[0]); }},

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
