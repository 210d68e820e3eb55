// Every primitive op's definition, one entry each (op_def.h). An entry reads
// top to bottom as the op's whole story: name and signature, shape rule,
// what the backward rule saves and why, forward rule, backward rule, FLOPs
// (kernels.h's model), and an example use for the tests that walk every op.
//
// Rules call the engine's Kernels and never re-derive a gradient, so every
// engine that runs the same rules on the same kernels computes the same bits.
#include "engines/api/op_def.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include "engines/api/error.h"

namespace remat {
namespace {

using Shapes = std::vector<Shape>;
using Tensors = std::vector<Tensor>;
using Needs = std::vector<bool>;

// The integer attribute i of `op`, or an error naming the op.
int64_t Int(const Op& op, size_t i) {
  if (op.ints.size() <= i) {
    throw Error(StrCat(Program::Describe(op), ": missing integer attribute ", i, " (has ",
                       op.ints.size(), ")"));
  }
  return op.ints[i];
}

Shape SameAsFirst(const Op&, const Shapes& in) { return in[0]; }

Shape SameShapes(const Op& op, const Shapes& in) {
  if (in[0] != in[1]) {
    throw Error(StrCat("operand shapes differ: ", in[0].ToString(), " and ", in[1].ToString(), " (",
                       OpKindName(op.kind), " takes operands of one shape)"));
  }
  return in[0];
}

void SavesNothing(const Needs&, Saves&) {}
// The backward rule reads input 0 (the elementwise ops' x).
void SavesInput0(const Needs& needs, Saves& s) { s.inputs[0] = needs[0]; }
// Each input's cotangent reads the other input (matmul, mul).
void SavesOther(const Needs& needs, Saves& s) {
  s.inputs[1] = needs[0];
  s.inputs[0] = needs[1];
}

int64_t NoFlops(const Shapes&, const Shape&) { return 0; }
int64_t OnePerOutput(const Shapes&, const Shape& out) { return out.num_elements(); }

int64_t LastDim(const Shape& s) { return s.rank() == 0 ? 1 : s.dim(s.rank() - 1); }
int64_t Rows(const Shape& s) {
  const int64_t c = LastDim(s);
  return c == 0 ? 0 : s.num_elements() / c;
}

// Rounding depths shared by several ops (harness/rounding_depth.h).
// Exact ops (copies, relu, name): no rounding, the cotangent passes through.
double ExactDepth(const DepthArgs& a) { return a.deepest(); }
void PassThrough(const DepthArgs&, double dy, std::vector<double>& k) {
  for (double& x : k) x = dy;
}
// One rounding forward; dx = dy * f'(x): max(dy, Kf(x)) + 2.
double OneRounding(const DepthArgs& a) { return a.deepest() + 1; }
void TimesDerivative(const DepthArgs& a, double dy, std::vector<double>& k) {
  k[0] = std::max(dy, a.kf_inputs[0]) + 2;
}

Shapes Unary34(Op&) { return {Shape({3, 4})}; }
Shapes Binary34(Op&) { return {Shape({3, 4}), Shape({3, 4})}; }

// The table's kernels the ops below call (kernels.h: each backend
// implements them by name).
const KernelOp kNegKernel = DefineKernel(
    {.name = "neg", .arity = 1, .shape = SameShapeOperands, .flops = OneFlopPerElement});
const KernelOp kSubKernel = DefineKernel(
    {.name = "sub", .arity = 2, .shape = SameShapeOperands, .flops = OneFlopPerElement});
const KernelOp kExpKernel = DefineKernel(
    {.name = "exp", .arity = 1, .shape = SameShapeOperands, .flops = OneFlopPerElement});
const KernelOp kLogKernel = DefineKernel(
    {.name = "log", .arity = 1, .shape = SameShapeOperands, .flops = OneFlopPerElement});
const KernelOp kDivKernel = DefineKernel(
    {.name = "div", .arity = 2, .shape = SameShapeOperands, .flops = OneFlopPerElement});
// dropout(x, seed; p, key): x * keep_i / (1 - p), keep_i from the bits of
// engines/api/philox.h. Its own gradient rule (the same mask on dy).
const KernelOp kDropoutKernel = DefineKernel(
    {.name = "dropout",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[1]->shape().rank() != 0) {
         throw Error(StrCat("the seed is ", in[1]->TypeString(), ", expected i32[]"));
       }
       return in[0]->shape();
     },
     .flops = [](std::span<const Tensor* const>, const Shape& out) { return out.num_elements(); },
     .int_operands = 0b10});

// embedding's kernels: rows of a table gathered by id, and the rows of dy
// added back by id in increasing position (the order CONTRACT.md states).
const KernelOp kGatherRowsKernel = DefineKernel(
    {.name = "gather_rows",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[0]->shape().rank() != 2) {
         throw Error(StrCat("the table is ", in[0]->TypeString(), ", expected rank 2 (V, D)"));
       }
       std::vector<int64_t> dims(in[1]->shape().dims().begin(), in[1]->shape().dims().end());
       dims.push_back(in[0]->shape().dim(1));
       return Shape(dims);
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; },
     .int_operands = 0b10});
// attrs.int_a = V, the table's rows.
const KernelOp kScatterAddRowsKernel = DefineKernel(
    {.name = "scatter_add_rows",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& attrs) {
       const Shape& dy = in[0]->shape();
       if (dy.rank() != in[1]->shape().rank() + 1) {
         throw Error(StrCat("dy ", in[0]->TypeString(), " does not fit ids ", in[1]->TypeString()));
       }
       return Shape({attrs.int_a, dy.dim(dy.rank() - 1)});
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return in[0]->num_elements(); },
     .int_operands = 0b10});
// masked_fill: x where mask is 0, attrs.scalar where it is not.
const KernelOp kMaskedFillKernel = DefineKernel(
    {.name = "masked_fill",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[0]->shape() != in[1]->shape()) {
         throw Error(StrCat("the mask is ", in[1]->TypeString(), ", x is ", in[0]->TypeString()));
       }
       return in[0]->shape();
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; },
     .int_operands = 0b10});
// cross_entropy(logits (N, C), targets (N)) = mean over rows r of
// logsumexp(logits[r]) - logits[r, t_r]; per row m = max, s = the sum of
// exp(x_j - m) (in float32 in lane_blocks::ExpShiftedSum's fixed order,
// loop_kernels.h's RowStats), lse = m + log s; rows summed in order, then / N.
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

// silu(x) = x / (1 + e^-x), elementwise (lane_math.h states the order, and
// its float32 exp); its backward dx = dy (s (1 + x (1 - s))), a fused rule of 2 FLOPs.
const KernelOp kSiluKernel = DefineKernel(
    {.name = "silu", .arity = 1, .shape = SameShapeOperands, .flops = OneFlopPerElement});
const KernelOp kSiluBackwardKernel = DefineKernel(
    {.name = "silu_backward",
     .arity = 2,
     .shape = SameShapeOperands,
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return 2 * in[0]->num_elements(); }});

// rms_norm(x (..., C), gamma (C); eps): y = x rstd gamma per row, rstd =
// 1 / sqrt(mean of x^2 + eps); loop_kernels.h states the order. FLOPs per
// element of x: 4 forward (square, sum, times rstd, times gamma); 9 for dx
// (3 to recompute xhat, dy gamma, its product with xhat and the sum, 3 to
// combine); 5 for dgamma (3 for xhat, dy xhat, the column sum).
void CheckRmsNormOperands(const Shape& x, const Shape& gamma, double eps) {
  if (x.rank() == 0 || gamma != Shape({x.dim(x.rank() - 1)})) {
    throw Error(StrCat("rms_norm of ", x.ToString(), " needs gamma of shape (",
                       x.rank() == 0 ? 0 : x.dim(x.rank() - 1), ") (the last axis); got ",
                       gamma.ToString()));
  }
  if (!(eps > 0) || !std::isfinite(eps)) {
    throw Error(StrCat("rms_norm's eps must be positive and finite; got ", eps));
  }
}
template <int kFlops>
int64_t PerElementOfX(std::span<const Tensor* const> in, const Shape&) {
  return kFlops * in[0]->num_elements();
}
const KernelOp kRmsNormKernel = DefineKernel(
    {.name = "rms_norm",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckRmsNormOperands(in[0]->shape(), in[1]->shape(), a.scalar);
       return in[0]->shape();
     },
     .flops = PerElementOfX<4>});
// (x, gamma, dy) -> dx
const KernelOp kRmsNormBackwardKernel = DefineKernel(
    {.name = "rms_norm_backward",
     .arity = 3,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckRmsNormOperands(in[0]->shape(), in[1]->shape(), a.scalar);
       if (in[2]->shape() != in[0]->shape()) {
         throw Error(StrCat("dy ", in[2]->TypeString(), " is not x's shape ", in[0]->TypeString()));
       }
       return in[0]->shape();
     },
     .flops = PerElementOfX<9>});
// (x, dy) -> dgamma (C)
const KernelOp kRmsNormGammaGradKernel = DefineKernel(
    {.name = "rms_norm_gamma_grad",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       const Shape& x = in[0]->shape();
       if (x.rank() == 0 || in[1]->shape() != x) {
         throw Error(StrCat("x ", in[0]->TypeString(), " and dy ", in[1]->TypeString(),
                            " must be one shape of rank >= 1"));
       }
       return Shape({x.dim(x.rank() - 1)});
     },
     .flops = PerElementOfX<5>});

// log_softmax over the last axis (loop_kernels.h states the order): 5 FLOPs
// per element (max, subtract, exp, sum, subtract; the row's log is not
// counted); its backward, from the output y, 4 (the row sum of dy, exp(y),
// the product, the subtraction).
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

// gelu, erf form, and its fused backward (2 FLOPs per element).
const KernelOp kGeluErfKernel = DefineKernel(
    {.name = "gelu_erf", .arity = 1, .shape = SameShapeOperands, .flops = OneFlopPerElement});
const KernelOp kGeluErfBackwardKernel = DefineKernel(
    {.name = "gelu_erf_backward", .arity = 2, .shape = SameShapeOperands, .flops = PerElementOfX<2>});

// reshape: the elements in order, under another shape (attrs.shape); a
// copy, no FLOPs.
const KernelOp kReshapeKernel = DefineKernel(
    {.name = "reshape",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (a.shape.num_elements() != in[0]->num_elements()) {
         throw Error(StrCat("cannot reshape ", in[0]->TypeString(), " (", in[0]->num_elements(),
                            " elements) to ", a.shape.ToString(), " (", a.shape.num_elements(),
                            " elements)"));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) -> int64_t { return 0; }});

// The output shape of permuting `s` by `perm`, or an error naming both.
Shape PermutedShape(const Shape& s, std::span<const int64_t> perm) {
  std::vector<bool> seen(static_cast<size_t>(s.rank()), false);
  bool ok = static_cast<int>(perm.size()) == s.rank();
  std::vector<int64_t> dims;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    const int64_t p = perm[i];
    ok = p >= 0 && p < s.rank() && !seen[static_cast<size_t>(p)];
    if (ok) {
      seen[static_cast<size_t>(p)] = true;
      dims.push_back(s.dim(static_cast<int>(p)));
    }
  }
  if (!ok) {
    std::string list;
    for (int64_t p : perm) list += StrCat(list.empty() ? "" : ",", p);
    throw Error(StrCat("permute: [", list, "] is not a permutation of the ", s.rank(),
                       " axes of ", s.ToString()));
  }
  return Shape(dims);
}
// permute: y[i_perm[0], ..., i_perm[r-1]] = x[i_0, ..., i_{r-1}]; a copy.
const KernelOp kPermuteKernel = DefineKernel(
    {.name = "permute",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       return PermutedShape(in[0]->shape(), a.perm);
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) -> int64_t { return 0; }});

// top_k_softmax over the last axis (loop_kernels.h states the order and the
// tie rule): 4 FLOPs per element (subtract, exp, sum, divide; the choice's
// comparisons are not counted); its backward from y, 4 (the product, the
// row sum, the subtraction, the product).
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

// conv2d, NCHW: x (N, C, H, W) and w (O, C, KH, KW), stride s >= 1 and
// zero padding p >= 0 on every side (attrs int_a = s, int_b = p); out (N, O,
// OH, OW), OH = (H + 2p - KH) / s + 1 (floor), OW likewise. Its backward
// kernels take the shape of what they compute as attrs.shape.
Shape Conv2dShape(const Shape& x, const Shape& w, int64_t stride, int64_t pad) {
  if (x.rank() != 4 || w.rank() != 4 || x.dim(1) != w.dim(1) || stride < 1 || pad < 0 ||
      x.dim(2) + 2 * pad < w.dim(2) || x.dim(3) + 2 * pad < w.dim(3)) {
    throw Error(StrCat("conv2d takes x (N, C, H, W) and w (O, C, KH, KW) with KH <= H + 2p and "
                       "KW <= W + 2p, stride >= 1 and padding p >= 0; got x ", x.ToString(), ", w ",
                       w.ToString(), ", stride ", stride, ", padding ", pad));
  }
  return Shape({x.dim(0), w.dim(0), (x.dim(2) + 2 * pad - w.dim(2)) / stride + 1,
                (x.dim(3) + 2 * pad - w.dim(3)) / stride + 1});
}
// 2 FLOPs per multiply-add: 2 N O OH OW C KH KW, for the forward and for
// each backward kernel alike. `w` and `y` are the weight's and the output's
// shapes.
int64_t ConvFlops(const Shape& w, const Shape& y) {
  return 2 * y.num_elements() * w.dim(1) * w.dim(2) * w.dim(3);
}
const KernelOp kConv2dKernel = DefineKernel(
    {.name = "conv2d",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       return Conv2dShape(in[0]->shape(), in[1]->shape(), a.int_a, a.int_b);
     },
     .flops = [](std::span<const Tensor* const> in, const Shape& out) {
       return ConvFlops(in[1]->shape(), out);
     }});
// (dy, w) -> dx of shape attrs.shape.
const KernelOp kConv2dBackwardDataKernel = DefineKernel(
    {.name = "conv2d_backward_data",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (Conv2dShape(a.shape, in[1]->shape(), a.int_a, a.int_b) != in[0]->shape()) {
         throw Error(StrCat("conv2d's backward: dy ", in[0]->TypeString(), " is not the output of x ",
                            a.shape.ToString(), " and w ", in[1]->TypeString()));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) {
       return ConvFlops(in[1]->shape(), in[0]->shape());
     }});
// (x, dy) -> dw of shape attrs.shape.
const KernelOp kConv2dBackwardWeightsKernel = DefineKernel(
    {.name = "conv2d_backward_weights",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (Conv2dShape(in[0]->shape(), a.shape, a.int_a, a.int_b) != in[1]->shape()) {
         throw Error(StrCat("conv2d's backward: dy ", in[1]->TypeString(), " is not the output of x ",
                            in[0]->TypeString(), " and w ", a.shape.ToString()));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const> in, const Shape& out) {
       return ConvFlops(out, in[1]->shape());
     }});

// max_pool2d over (H, W) of x (N, C, H, W): k x k windows, stride s >= 1,
// padding 0 <= p <= k / 2 (PyTorch's bound: every window holds a pixel);
// OH = (H + 2p - k) / s + 1. Ties and order: loop_kernels.h.
Shape PoolShape(const Shape& x, int64_t k, int64_t stride, int64_t pad) {
  if (x.rank() != 4 || k < 1 || stride < 1 || pad < 0 || 2 * pad > k || x.dim(2) + 2 * pad < k ||
      x.dim(3) + 2 * pad < k) {
    throw Error(StrCat("max_pool2d takes x (N, C, H, W), kernel k >= 1 within the padded image, "
                       "stride >= 1 and padding 0 <= p <= k/2; got x ", x.ToString(), ", k ", k,
                       ", stride ", stride, ", padding ", pad));
  }
  return Shape({x.dim(0), x.dim(1), (x.dim(2) + 2 * pad - k) / stride + 1,
                (x.dim(3) + 2 * pad - k) / stride + 1});
}
const KernelOp kMaxPool2dKernel = DefineKernel(
    {.name = "max_pool2d",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       return PoolShape(in[0]->shape(), a.int_a, a.int_b, a.int_c);
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) -> int64_t { return 0; }});
// (x, dy) -> dx; one addition per output.
const KernelOp kMaxPool2dBackwardKernel = DefineKernel(
    {.name = "max_pool2d_backward",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (PoolShape(in[0]->shape(), a.int_a, a.int_b, a.int_c) != in[1]->shape()) {
         throw Error(StrCat("max_pool2d's backward: dy ", in[1]->TypeString(),
                            " is not the output of x ", in[0]->TypeString()));
       }
       return in[0]->shape();
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return in[1]->num_elements(); }});

// global_avg_pool (N, C, H, W) -> (N, C): one FLOP per input element (the
// sums) plus one per output (the division); its backward one per input.
Shape GlobalPoolShape(const Shape& x) {
  if (x.rank() != 4) {
    throw Error(StrCat("global_avg_pool takes x (N, C, H, W); got ", x.ToString()));
  }
  return Shape({x.dim(0), x.dim(1)});
}
const KernelOp kGlobalAvgPoolKernel = DefineKernel(
    {.name = "global_avg_pool",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) { return GlobalPoolShape(in[0]->shape()); },
     .flops = [](std::span<const Tensor* const> in, const Shape& out) {
       return in[0]->num_elements() + out.num_elements();
     }});
// dy (N, C) -> dx of shape attrs.shape (N, C, H, W).
const KernelOp kGlobalAvgPoolBackwardKernel = DefineKernel(
    {.name = "global_avg_pool_backward",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (GlobalPoolShape(a.shape) != in[0]->shape()) {
         throw Error(StrCat("global_avg_pool's backward: dy ", in[0]->TypeString(),
                            " is not the output of x ", a.shape.ToString()));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const>, const Shape& out) { return out.num_elements(); }});

// batch_norm in training mode over x (N, C) or (N, C, H, W), gamma and beta
// (C), eps > 0 (attrs.scalar); statistics per channel over N H W
// (loop_kernels.h states the order). FLOPs per element: forward 7 (mean,
// deviation, square, variance sum, normalize, scale, shift), backward 9,
// gamma's gradient 5 (the statistics again and the product and sum).
void CheckBatchNormOperands(const Shape& x, const Shape& gamma, double eps) {
  if ((x.rank() != 2 && x.rank() != 4) || gamma != Shape({x.dim(1)}) || !(eps > 0) ||
      !std::isfinite(eps)) {
    throw Error(StrCat("batch_norm takes x (N, C) or (N, C, H, W), gamma and beta (C) and eps > 0; "
                       "got x ", x.ToString(), ", gamma ", gamma.ToString(), ", eps ", eps));
  }
}
const KernelOp kBatchNormKernel = DefineKernel(
    {.name = "batch_norm",
     .arity = 3,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckBatchNormOperands(in[0]->shape(), in[1]->shape(), a.scalar);
       if (in[2]->shape() != in[1]->shape()) throw Error("batch_norm: beta is not gamma's shape");
       return in[0]->shape();
     },
     .flops = PerElementOfX<7>});
// (x, gamma, dy) -> dx.
const KernelOp kBatchNormBackwardKernel = DefineKernel(
    {.name = "batch_norm_backward",
     .arity = 3,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckBatchNormOperands(in[0]->shape(), in[1]->shape(), a.scalar);
       if (in[2]->shape() != in[0]->shape()) throw Error("batch_norm's backward: dy is not x's shape");
       return in[0]->shape();
     },
     .flops = PerElementOfX<9>});
// (x, dy) -> dgamma (C).
const KernelOp kBatchNormGammaGradKernel = DefineKernel(
    {.name = "batch_norm_gamma_grad",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       const Shape& x = in[0]->shape();
       if (x.rank() < 2) throw Error("batch_norm's gamma gradient takes x of rank 2 or 4");
       CheckBatchNormOperands(x, Shape({x.dim(1)}), a.scalar);
       if (in[1]->shape() != x) throw Error("batch_norm's gamma gradient: dy is not x's shape");
       return Shape({x.dim(1)});
     },
     .flops = PerElementOfX<5>});
// dy (N, C[, H, W]) -> its sum per channel (C): beta's gradient.
const KernelOp kChannelSumKernel = DefineKernel(
    {.name = "channel_sum",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       const Shape& x = in[0]->shape();
       if (x.rank() != 2 && x.rank() != 4) throw Error("channel_sum takes (N, C) or (N, C, H, W)");
       return Shape({x.dim(1)});
     },
     .flops = OneFlopPerElement});

// batch_norm's running statistics: x (N, C) or (N, C, H, W) with M = N H W
// >= 2 elements a channel (PyTorch refuses one value a channel in training),
// running (C), momentum in [0, 1] (attrs.scalar). FLOPs per channel: the
// mean's M + 1 and the update's 3; the variance adds 3 M + 1 (deviation,
// square, sum; the division). Backward: the mean's 1 per element, the
// variance's the mean again and 2 per element.
void CheckRunningOperands(const char* op, const Shape& x, const Shape& running, double momentum) {
  if ((x.rank() != 2 && x.rank() != 4) || running != Shape({x.dim(1)}) ||
      x.num_elements() / std::max<int64_t>(1, x.dim(1)) < 2 || !(momentum >= 0 && momentum <= 1)) {
    throw Error(StrCat(op, " takes x (N, C) or (N, C, H, W) with at least 2 values a channel "
                       "(N H W >= 2), its running statistic (C) and a momentum in [0, 1]; got x ",
                       x.ToString(), ", running ", running.ToString(), ", momentum ", momentum));
  }
}
int64_t RunningMeanFlops(const Shape& x) { return x.num_elements() + 4 * x.dim(1); }
int64_t RunningVarFlops(const Shape& x) { return 4 * x.num_elements() + 5 * x.dim(1); }
const KernelOp kBatchNormRunningMeanKernel = DefineKernel(
    {.name = "batch_norm_running_mean",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckRunningOperands("batch_norm_running_mean", in[0]->shape(), in[1]->shape(), a.scalar);
       return in[1]->shape();
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return RunningMeanFlops(in[0]->shape()); }});
const KernelOp kBatchNormRunningVarKernel = DefineKernel(
    {.name = "batch_norm_running_var",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckRunningOperands("batch_norm_running_var", in[0]->shape(), in[1]->shape(), a.scalar);
       return in[1]->shape();
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return RunningVarFlops(in[0]->shape()); }});
// dy (C) -> dx of shape attrs.shape.
const KernelOp kBatchNormRunningMeanBackwardKernel = DefineKernel(
    {.name = "batch_norm_running_mean_backward",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckRunningOperands("batch_norm_running_mean's backward", a.shape, in[0]->shape(), a.scalar);
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const>, const Shape& out) { return out.num_elements(); }});
// (x, dy (C)) -> dx.
const KernelOp kBatchNormRunningVarBackwardKernel = DefineKernel(
    {.name = "batch_norm_running_var_backward",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckRunningOperands("batch_norm_running_var's backward", in[0]->shape(), in[1]->shape(), a.scalar);
       return in[0]->shape();
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) {
       return 3 * in[0]->num_elements() + in[0]->shape().dim(1);
     }});

// The identity's rules (name, state): the output is the input's buffer,
// and dx = dy.
Tensor IdentityForward(Kernels&, const Op&, const Tensors& in) { return in[0]; }
void IdentityBackward(Kernels&, const Op&, const BackwardArgs& a, Tensors& d) {
  if (a.needs[0]) d[0] = a.dout;
}

// slice: ints = {axis, start, length}, 0 <= start, length >= 0, start +
// length <= the axis' size. A copy: no FLOPs.
Shape SliceShape(const Op& op, const Shape& x) {
  const int64_t axis = op.ints[0], start = op.ints[1], length = op.ints[2];
  if (axis < 0 || axis >= x.rank() || start < 0 || length < 0 ||
      start + length > x.dim(static_cast<int>(axis))) {
    throw Error(StrCat("slice: ints = {axis, start, length} = {", axis, ", ", start, ", ", length,
                       "} is not within x ", x.ToString()));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) dims.push_back(i == axis ? length : x.dim(i));
  return Shape(dims);
}
// x -> attrs.shape (the slice's), axis int_a, start int_b.
const KernelOp kSliceKernel = DefineKernel(
    {.name = "slice",
     .arity = 1,
     .shape = [](std::span<const Tensor* const>, const KernelAttrs& a) { return a.shape; },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});
// dy -> dx of shape attrs.shape (x's).
const KernelOp kSliceBackwardKernel = DefineKernel(
    {.name = "slice_backward",
     .arity = 1,
     .shape = [](std::span<const Tensor* const>, const KernelAttrs& a) { return a.shape; },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});

// The reshape op's dims as a shape, each >= 0.
Shape DimsOf(const Op& op) {
  for (int64_t d : op.ints) {
    if (d < 0) throw Error(StrCat("reshape: dim ", d, " is negative (no -1 inference: give every dim)"));
  }
  return Shape(op.ints);
}

// clang-format off
const OpDef kOps[] = {
    // matmul  y = a @ b (rank 2, or rank 3 with one batch)
    //         saves b for da, a for db; da = dy @ b^T, db = a^T @ dy
    //         FLOPs 2mkn (times the batch)
    {.kind = OpKind::kMatMul, .name = "matmul", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) { return Kernels::MatMulShape(in[0], false, in[1], false); },
     .saves = SavesOther,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.MatMul(in[0], false, in[1], false); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       // Each cotangent is one kernel call: written where the engine asks.
       if (a.needs[0]) {
         d[0] = a.Into(0) ? k.MatMulInto(*a.Into(0), a.dout, false, a.saved_inputs[1], true)
                          : k.MatMul(a.dout, false, a.saved_inputs[1], true);
       }
       if (a.needs[1]) {
         d[1] = a.Into(1) ? k.MatMulInto(*a.Into(1), a.saved_inputs[0], true, a.dout, false)
                          : k.MatMul(a.saved_inputs[0], true, a.dout, false);
       }
     },
     .flops = [](const Shapes& in, const Shape& out) {
       return 2 * out.num_elements() * in[0].dim(in[0].rank() - 1);
     },
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + static_cast<double>(LastDim(a.inputs[0])); },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       // dA = dC B^T sums n terms, dB = A^T dC sums m.
       const int r = a.output.rank() - 2;
       const double m = static_cast<double>(a.output.dim(r)), n = static_cast<double>(a.output.dim(r + 1));
       k[0] = std::max(dy, a.kf_inputs[1]) + n;
       k[1] = std::max(dy, a.kf_inputs[0]) + m;
     },
     .example = [](Op&) { return Shapes{Shape({3, 4}), Shape({4, 5})}; }},

    // relu    y = relu(x); saves x (as JAX saves x > 0; PyTorch saves y,
    //         which would make every pre-activation free)
    //         dx = dy where x > 0 (relu'(0) = 0)
    {.kind = OpKind::kRelu, .name = "relu", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Relu(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.ReluBackward(a.saved_inputs[0], a.dout);
     },
     .flops = OnePerOutput,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = Unary34},

    // sin     y = sin(x); saves x; dx = dy * cos(x)
    {.kind = OpKind::kSin, .name = "sin", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Sin(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.SinBackward(a.saved_inputs[0], a.dout);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = TimesDerivative,
     .example = Unary34},

    // cos     y = cos(x); saves x; dx = -(dy * sin(x))
    {.kind = OpKind::kCos, .name = "cos", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Cos(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.CosBackward(a.saved_inputs[0], a.dout);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = TimesDerivative,
     .example = Unary34},

    // square  y = x^2; saves x; dx = dy * 2x
    {.kind = OpKind::kSquare, .name = "square", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Square(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.SquareBackward(a.saved_inputs[0], a.dout);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = TimesDerivative,
     .example = Unary34},

    // add     y = a + b (one shape); saves nothing; da = dy, db = dy
    {.kind = OpKind::kAdd, .name = "add", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = SameShapes,
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Add(in[0], in[1]); },
     .backward = [](Kernels&, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = a.dout;
       if (a.needs[1]) d[1] = a.dout;
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = PassThrough,
     .example = Binary34},

    // mul     y = a * b (one shape); saves b for da, a for db
    //         da = dy * b, db = dy * a
    {.kind = OpKind::kMul, .name = "mul", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = SameShapes,
     .saves = SavesOther,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Mul(in[0], in[1]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Mul(a.dout, a.saved_inputs[1]);
       if (a.needs[1]) d[1] = k.Mul(a.dout, a.saved_inputs[0]);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_inputs[1]) + 1;
       k[1] = std::max(dy, a.kf_inputs[0]) + 1;
     },
     .example = Binary34},

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

    // name    y = x, labelled (attr name: checkpoint_name); saves nothing
    //         dx = dy; its output is its input's buffer
    {.kind = OpKind::kName, .name = "name", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       if (op.name.empty()) throw Error("name needs a non-empty label (checkpoint_name's)");
       return in[0];
     },
     .saves = SavesNothing,
     .forward = IdentityForward,
     .backward = IdentityBackward,
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.name = "label";
       return Shapes{Shape({3, 4})};
     }},

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

    // layer_norm  y = (x - mean) rstd gamma + beta, rstd = 1/sqrt(var + 1e-5),
    //         over the last axis; inputs x (..., C), gamma (C), beta (C)
    //         saves x for dx and dgamma, gamma for dx; mean and rstd are
    //         recomputed from x by the backward kernels rather than saved (the
    //         IR has one output per op, and two (rows) vectors would be
    //         residuals no policy could name)
    //         dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma
    //         dgamma = sum over rows of dy xhat, dbeta = sum over rows of dy
    //         FLOPs 7 per element
    {.kind = OpKind::kLayerNorm, .name = "layer_norm", .arity = 3, .has_scalar = false,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) {
       Kernels::CheckLayerNormShapes(in[0], in[1], in[2]);
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) {
       s.inputs[0] = needs[0] || needs[1];
       s.inputs[1] = needs[0];
     },
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.LayerNorm(in[0], in[1], in[2]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.LayerNormBackward(a.saved_inputs[0], a.saved_inputs[1], a.dout);
       if (a.needs[1]) d[1] = k.LayerNormGammaGrad(a.saved_inputs[0], a.dout);
       if (a.needs[2]) d[2] = k.SumLeading(a.dout);
     },
     .flops = [](const Shapes&, const Shape& out) { return 7 * out.num_elements(); },
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + 2.0 * static_cast<double>(LastDim(a.inputs[0])) + 4; },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       const double c = static_cast<double>(LastDim(a.inputs[0]));
       const double rows = static_cast<double>(Rows(a.inputs[0]));
       k[0] = std::max({dy, a.kf_inputs[0], a.kf_inputs[1]}) + 3 * c + 6;
       k[1] = std::max(dy, a.kf_inputs[0]) + 2 * c + rows + 4;
       k[2] = dy + rows;
     },
     .example = [](Op&) { return Shapes{Shape({3, 4}), Shape({4}), Shape({4})}; },
     .normalizes = true},

    // gelu    y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the tanh
    //         form (PyTorch's GELU(approximate='tanh')); saves x;
    //         dx = dy * gelu'(x)
    {.kind = OpKind::kGelu, .name = "gelu", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Gelu(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.GeluBackward(a.saved_inputs[0], a.dout);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = TimesDerivative,
     .example = Unary34},

    // scale   y = c x (attr scalar = c); saves nothing; dx = c dy
    {.kind = OpKind::kScale, .name = "scale", .arity = 1, .has_scalar = true, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) { return k.Scale(in[0], op.scalar); },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Scale(a.dout, op.scalar);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = TimesDerivative,
     .example = [](Op& op) {
       op.scalar = 0.5;
       return Shapes{Shape({3, 4})};
     }},

    // transpose  y = x with the last two axes swapped (rank 2 or 3)
    //         saves nothing; dx = transpose(dy); a copy: no FLOPs
    {.kind = OpKind::kTranspose, .name = "transpose", .arity = 1, .has_scalar = false,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) { return Kernels::TransposeShape(in[0]); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Transpose(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Transpose(a.dout);
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op&) { return Shapes{Shape({2, 3, 4})}; }},

    // split_heads  (B*S, D) -> (B*H, S, D/H) (attrs ints = {B, H})
    //         out[b*H + h, s, j] = x[b*S + s, h*(D/H) + j]
    //         saves nothing; dx = merge_heads(dy, B); a copy: no FLOPs
    {.kind = OpKind::kSplitHeads, .name = "split_heads", .arity = 1, .has_scalar = false,
     .num_ints = 2,
     .shape = [](const Op& op, const Shapes& in) {
       return Kernels::SplitHeadsShape(in[0], op.ints[0], op.ints[1]);
     },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.SplitHeads(in[0], Int(op, 0), Int(op, 1));
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.MergeHeads(a.dout, Int(op, 0));
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {2, 2};
       return Shapes{Shape({6, 8})};
     }},

    // merge_heads  (B*H, S, Dh) -> (B*S, H*Dh) (attr ints = {B})
    //         saves nothing; dx = split_heads(dy, B, H), H = (B*H) / B from
    //         x's shape; a copy: no FLOPs
    {.kind = OpKind::kMergeHeads, .name = "merge_heads", .arity = 1, .has_scalar = false,
     .num_ints = 1,
     .shape = [](const Op& op, const Shapes& in) { return Kernels::MergeHeadsShape(in[0], op.ints[0]); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) { return k.MergeHeads(in[0], Int(op, 0)); },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (!a.needs[0]) return;
       const int64_t batch = Int(op, 0);
       d[0] = k.SplitHeads(a.dout, batch, a.input_shapes[0].dim(0) / batch);
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {2};
       return Shapes{Shape({4, 3, 4})};
     }},

    // bias_add  y[r, j] = x[r, j] + b[j], x (..., C), b (C); saves nothing
    //         dx = dy; db = SumLeading(dy): db[j] = sum over rows r of dy[r, j],
    //         summed in row order from zero, ((0 + dy[0, j]) + dy[1, j]) + ...,
    //         one running sum per column in the kernels' dtype (part of the
    //         bit-for-bit contract: every engine gets these bits for db)
    {.kind = OpKind::kBiasAdd, .name = "bias_add", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) {
       Kernels::CheckBiasAddShapes(in[0], in[1]);
       return in[0];
     },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.BiasAdd(in[0], in[1]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = a.dout;
       if (a.needs[1]) d[1] = k.SumLeading(a.dout);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       // db sums dy over the rows: one rounding per row.
       k[0] = dy;
       k[1] = dy + static_cast<double>(Rows(a.inputs[0]));
     },
     .example = [](Op&) { return Shapes{Shape({3, 4}), Shape({4})}; }},

    // neg     y = -x; saves nothing; dx = -dy; exact (a sign flip)
    {.kind = OpKind::kNeg, .name = "neg", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kNegKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kNegKernel, {&a.dout});
     },
     .flops = OnePerOutput,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = Unary34},

    // sub     y = a - b (one shape); saves nothing; da = dy, db = -dy
    {.kind = OpKind::kSub, .name = "sub", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = SameShapes,
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return k.Call(kSubKernel, {&in[0], &in[1]});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = a.dout;
       if (a.needs[1]) d[1] = k.Call(kNegKernel, {&a.dout});
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = PassThrough,  // a negation is exact
     .example = Binary34},

    // exp     y = e^x; saves y (the derivative is the output, as JAX's and
    //         PyTorch's exp save it); dx = dy * y
    {.kind = OpKind::kExp, .name = "exp", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = [](const Needs& needs, Saves& s) { s.output = needs[0]; },
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kExpKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Mul(a.dout, a.saved_output);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_output) + 1;  // one multiply by y
     },
     .example = Unary34,
     .bounded_inputs = true},

    // log     y = ln x, for x > 0 (NaN below 0, -inf at 0, as std::log);
    //         saves x; dx = dy / x
    {.kind = OpKind::kLog, .name = "log", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kLogKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kDivKernel, {&a.dout, &a.saved_inputs[0]});
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_inputs[0]) + 1;  // one division by x
     },
     .example = Unary34,
     .positive_inputs = true},

    // dropout y = x * keep / (1 - p): inputs x and a seed (i32[]); attrs
    //         `scalar` = p, the drop probability in [0, 1), and `ints` =
    //         {key}, the op's stable key. keep_i is 1 when
    //         RandomBits(seed, key, i) >= DropThreshold(p) (philox.h): a
    //         pure function of (seed, key, i), so a recomputation draws the
    //         forward's mask (CONTRACT.md, randomness). Saves the seed alone
    //         (4 bytes): dx = dropout(dy, seed), the same mask, redrawn.
    {.kind = OpKind::kDropout, .name = "dropout", .arity = 2, .has_scalar = true, .num_ints = 1,
     .shape = [](const Op& op, const Shapes& in) {
       if (in[1].rank() != 0) {
         throw Error(StrCat("the seed is of shape ", in[1].ToString(), "; dropout takes a scalar seed"));
       }
       if (!(op.scalar >= 0 && op.scalar < 1)) {
         throw Error(StrCat("drop probability ", op.scalar, " is outside [0, 1)"));
       }
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) { s.inputs[1] = needs[0]; },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kDropoutKernel, {&in[0], &in[1]}, {.scalar = op.scalar, .key = Int(op, 0)});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kDropoutKernel, {&a.dout, &a.saved_inputs[1]},
                       {.scalar = op.scalar, .key = Int(op, 0)});
       }
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs&, double dy, std::vector<double>& k) {
       k[0] = dy + 1;  // one multiply by the mask's scale
     },
     .example = [](Op& op) {
       op.scalar = 0.25;
       op.ints = {7};
       return Shapes{Shape({3, 4}), Shape()};
     },
     .int_inputs = 0b10},

    // embedding y[..., :] = table[ids[...], :]: inputs table (V, D) and ids
    //         (i32, any shape, each in [0, V)); y is ids' shape + (D).
    //         Saves the ids; dtable = rows of dy added by id in increasing
    //         position of ids (row-major), so repeated ids sum in a stated
    //         order. FLOPs 0 (a gather).
    {.kind = OpKind::kEmbedding, .name = "embedding", .arity = 2, .has_scalar = false,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) {
       if (in[0].rank() != 2) throw Error(StrCat("the table is ", in[0].ToString(), ", expected (V, D)"));
       std::vector<int64_t> dims(in[1].dims().begin(), in[1].dims().end());
       dims.push_back(in[0].dim(1));
       return Shape(dims);
     },
     .saves = [](const Needs& needs, Saves& s) { s.inputs[1] = needs[0]; },
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return k.Call(kGatherRowsKernel, {&in[0], &in[1]});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kScatterAddRowsKernel, {&a.dout, &a.saved_inputs[1]},
                       {.int_a = a.input_shapes[0].dim(0)});
       }
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = dy + static_cast<double>(a.inputs[1].num_elements());  // a row sums up to every position
     },
     .example = [](Op&) { return Shapes{Shape({5, 4}), Shape({3})}; },
     .int_inputs = 0b10,
     .int_bound = [](const Shapes& in, int) { return in[0].dim(0); }},

    // masked_fill y = mask ? c : x (attr `scalar` = c, e.g. -1e9 above a
    //         causal diagonal): inputs x and mask (i32, x's shape; nonzero
    //         fills). Saves the mask; dx = masked_fill(dy, mask, 0). FLOPs 0.
    {.kind = OpKind::kMaskedFill, .name = "masked_fill", .arity = 2, .has_scalar = true,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) {
       if (in[0] != in[1]) {
         throw Error(StrCat("the mask is ", in[1].ToString(), ", x is ", in[0].ToString(),
                            "; masked_fill takes a mask of x's shape"));
       }
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) { s.inputs[1] = needs[0]; },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kMaskedFillKernel, {&in[0], &in[1]}, {.scalar = op.scalar});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kMaskedFillKernel, {&a.dout, &a.saved_inputs[1]}, {.scalar = 0});
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.scalar = -1e9;
       return Shapes{Shape({3, 4}), Shape({3, 4})};
     },
     .int_inputs = 0b10,
     .int_bound = [](const Shapes&, int) { return int64_t{2}; }},

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

    // silu    y = x sigmoid(x); saves x; dx = dy (s (1 + x (1 - s)))
    {.kind = OpKind::kSilu, .name = "silu", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kSiluKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kSiluBackwardKernel, {&a.saved_inputs[0], &a.dout});
     },
     .flops = OnePerOutput,
     // exp (two: float32's is within 0.99 ulp, up to 2^-23 relative,
     // lane_math.h), add, divide, multiply; the backward's s (four), its
     // five roundings after it
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + 5; },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_inputs[0]) + 9;
     },
     .example = Unary34},

    // rms_norm  y = x rstd gamma over the last axis (attr scalar = eps > 0),
    //         rstd = 1 / sqrt(mean(x^2) + eps) (LLaMA's RMSNorm); saves x
    //         (for dx and dgamma) and gamma (for dx)
    {.kind = OpKind::kRmsNorm, .name = "rms_norm", .arity = 2, .has_scalar = true, .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       CheckRmsNormOperands(in[0], in[1], op.scalar);
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) {
       s.inputs[0] = needs[0] || needs[1];
       s.inputs[1] = needs[0];
     },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kRmsNormKernel, {&in[0], &in[1]}, {.scalar = op.scalar});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kRmsNormBackwardKernel, {&a.saved_inputs[0], &a.saved_inputs[1], &a.dout},
                       {.scalar = op.scalar});
       }
       if (a.needs[1]) {
         d[1] = k.Call(kRmsNormGammaGradKernel, {&a.saved_inputs[0], &a.dout}, {.scalar = op.scalar});
       }
     },
     .flops = [](const Shapes&, const Shape& out) { return 4 * out.num_elements(); },
     .forward_depth = [](const DepthArgs& a) {
       return a.deepest() + static_cast<double>(LastDim(a.inputs[0])) + 5;
     },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       const double c = static_cast<double>(LastDim(a.inputs[0]));
       const double rows = static_cast<double>(Rows(a.inputs[0]));
       k[0] = std::max({dy, a.kf_inputs[0], a.kf_inputs[1]}) + 2 * c + 8;
       k[1] = std::max(dy, a.kf_inputs[0]) + c + rows + 6;
     },
     .example = [](Op& op) {
       op.scalar = 1e-6;
       return Shapes{Shape({3, 4}), Shape({4})};
     }},

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

    // gelu_erf  y = x Phi(x) = (x / 2) (1 + erf(x / sqrt 2)); saves x;
    //         dx = dy (Phi(x) + x phi(x))
    {.kind = OpKind::kGeluErf, .name = "gelu_erf", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kGeluErfKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kGeluErfBackwardKernel, {&a.saved_inputs[0], &a.dout});
     },
     .flops = OnePerOutput,
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + 4; },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_inputs[0]) + 9;
     },
     .example = Unary34},

    // reshape  the elements in order under the dims of attr ints (one
    //         element count, every dim given); saves nothing;
    //         dx = reshape(dy) to x's shape; a copy: no FLOPs
    {.kind = OpKind::kReshape, .name = "reshape", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) {
       const Shape out = DimsOf(op);
       if (out.num_elements() != in[0].num_elements()) {
         throw Error(StrCat("cannot reshape ", in[0].ToString(), " (", in[0].num_elements(),
                            " elements) to ", out.ToString(), " (", out.num_elements(), " elements)"));
       }
       return out;
     },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kReshapeKernel, {&in[0]}, {.shape = DimsOf(op)});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kReshapeKernel, {&a.dout}, {.shape = a.input_shapes[0]});
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {2, 6};
       return Shapes{Shape({3, 4})};
     }},

    // permute  output axis i is input axis ints[i] (a permutation of x's
    //         axes); saves nothing; dx = permute(dy) by the inverse
    //         permutation; a copy: no FLOPs
    {.kind = OpKind::kPermute, .name = "permute", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) { return PermutedShape(in[0], op.ints); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kPermuteKernel, {&in[0]}, {.perm = op.ints});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (!a.needs[0]) return;
       std::vector<int64_t> inverse(op.ints.size());
       for (size_t i = 0; i < op.ints.size(); ++i) inverse[static_cast<size_t>(op.ints[i])] = static_cast<int64_t>(i);
       d[0] = k.Call(kPermuteKernel, {&a.dout}, {.perm = inverse});
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {2, 0, 1};
       return Shapes{Shape({2, 3, 4})};
     }},

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

    // conv2d  y = x (*) w: NCHW cross-correlation (PyTorch's nn.Conv2d
    //         without bias, groups 1, dilation 1), attr ints = {stride,
    //         padding}, zero padding on every side; oneDNN's convolution.
    //         Saves w for dx and x for dw; dx = its backward-data, dw = its
    //         backward-weights; FLOPs 2 N O OH OW C KH KW
    {.kind = OpKind::kConv2d, .name = "conv2d", .arity = 2, .has_scalar = false, .num_ints = 2,
     .shape = [](const Op& op, const Shapes& in) { return Conv2dShape(in[0], in[1], op.ints[0], op.ints[1]); },
     .saves = SavesOther,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kConv2dKernel, {&in[0], &in[1]}, {.int_a = Int(op, 0), .int_b = Int(op, 1)});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kConv2dBackwardDataKernel, {&a.dout, &a.saved_inputs[1]},
                       {.int_a = Int(op, 0), .int_b = Int(op, 1), .shape = a.input_shapes[0]});
       }
       if (a.needs[1]) {
         d[1] = k.Call(kConv2dBackwardWeightsKernel, {&a.saved_inputs[0], &a.dout},
                       {.int_a = Int(op, 0), .int_b = Int(op, 1), .shape = a.input_shapes[1]});
       }
     },
     .flops = [](const Shapes& in, const Shape& out) { return ConvFlops(in[1], out); },
     .forward_depth = [](const DepthArgs& a) {
       const Shape& w = a.inputs[1];
       return a.deepest() + static_cast<double>(w.dim(1) * w.dim(2) * w.dim(3));
     },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       // dx sums O KH KW terms, dw N OH OW.
       const Shape& w = a.inputs[1];
       const Shape& y = a.output;
       k[0] = std::max(dy, a.kf_inputs[1]) + static_cast<double>(w.dim(0) * w.dim(2) * w.dim(3));
       k[1] = std::max(dy, a.kf_inputs[0]) + static_cast<double>(y.dim(0) * y.dim(2) * y.dim(3));
     },
     .example = [](Op& op) {
       op.ints = {2, 1};
       return Shapes{Shape({2, 3, 5, 5}), Shape({4, 3, 3, 3})};
     }},

    // max_pool2d  over (H, W) of x (N, C, H, W), attr ints = {k, stride,
    //         padding}: each k x k window's largest pixel (NaN above every
    //         number; among equal values the lowest index: CONTRACT.md's
    //         tie rule); padding is never chosen. Saves x (the backward
    //         chooses again from it); dx gets each output's dy at its
    //         choice, outputs in increasing position; no forward FLOPs
    {.kind = OpKind::kMaxPool2d, .name = "max_pool2d", .arity = 1, .has_scalar = false, .num_ints = 3,
     .shape = [](const Op& op, const Shapes& in) { return PoolShape(in[0], op.ints[0], op.ints[1], op.ints[2]); },
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kMaxPool2dKernel, {&in[0]}, {.int_a = Int(op, 0), .int_b = Int(op, 1), .int_c = Int(op, 2)});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kMaxPool2dBackwardKernel, {&a.saved_inputs[0], &a.dout},
                       {.int_a = Int(op, 0), .int_b = Int(op, 1), .int_c = Int(op, 2)});
       }
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       // An input pixel sums the outputs whose windows chose it: at most
       // the plane's outputs (ceil(k / s)^2, bounded without the attrs).
       k[0] = dy + static_cast<double>(a.output.dim(2) * a.output.dim(3));
     },
     .example = [](Op& op) {
       op.ints = {3, 2, 1};
       return Shapes{Shape({2, 3, 5, 5})};
     }},

    // global_avg_pool  (N, C, H, W) -> (N, C): each plane's sum in index
    //         order over H W; saves nothing; dx = dy / (H W) over the plane
    {.kind = OpKind::kGlobalAvgPool, .name = "global_avg_pool", .arity = 1, .has_scalar = false,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) { return GlobalPoolShape(in[0]); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kGlobalAvgPoolKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kGlobalAvgPoolBackwardKernel, {&a.dout}, {.shape = a.input_shapes[0]});
     },
     .flops = [](const Shapes& in, const Shape& out) { return in[0].num_elements() + out.num_elements(); },
     .forward_depth = [](const DepthArgs& a) {
       return a.deepest() + static_cast<double>(a.inputs[0].dim(2) * a.inputs[0].dim(3)) + 1;
     },
     .backward_depth = [](const DepthArgs&, double dy, std::vector<double>& k) { k[0] = dy + 1; },
     .example = [](Op&) { return Shapes{Shape({2, 3, 4, 5})}; }},

    // batch_norm  training mode (PyTorch's nn.BatchNorm2d in train(), JAX's
    //         BatchNorm with use_running_average=False): x (N, C) or (N, C,
    //         H, W), gamma and beta (C), attr scalar = eps > 0; y = ((x -
    //         mean) rstd) gamma + beta with the batch's statistics per
    //         channel over N H W (biased variance). Saves x (dx, dgamma) and
    //         gamma (dx); dbeta = dy summed per channel. The running
    //         statistics are not computed here (CONTRACT.md, state)
    {.kind = OpKind::kBatchNorm, .name = "batch_norm", .arity = 3, .has_scalar = true, .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       CheckBatchNormOperands(in[0], in[1], op.scalar);
       if (in[2] != in[1]) throw Error(StrCat("batch_norm: beta ", in[2].ToString(), " is not gamma's shape ", in[1].ToString()));
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) {
       s.inputs[0] = needs[0] || needs[1];
       s.inputs[1] = needs[0];
     },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kBatchNormKernel, {&in[0], &in[1], &in[2]}, {.scalar = op.scalar});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kBatchNormBackwardKernel, {&a.saved_inputs[0], &a.saved_inputs[1], &a.dout},
                       {.scalar = op.scalar});
       }
       if (a.needs[1]) d[1] = k.Call(kBatchNormGammaGradKernel, {&a.saved_inputs[0], &a.dout}, {.scalar = op.scalar});
       if (a.needs[2]) d[2] = k.Call(kChannelSumKernel, {&a.dout});
     },
     .flops = [](const Shapes& in, const Shape&) { return 7 * in[0].num_elements(); },
     .forward_depth = [](const DepthArgs& a) {
       const double m = static_cast<double>(a.inputs[0].num_elements() / std::max<int64_t>(1, a.inputs[0].dim(1)));
       return a.deepest() + 2 * m + 6;
     },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       const double m = static_cast<double>(a.inputs[0].num_elements() / std::max<int64_t>(1, a.inputs[0].dim(1)));
       k[0] = std::max({dy, a.kf_inputs[0], a.kf_inputs[1]}) + 4 * m + 10;
       k[1] = std::max(dy, a.kf_inputs[0]) + 3 * m + 6;
       k[2] = dy + m;
     },
     .example = [](Op& op) {
       op.scalar = 1e-5;
       return Shapes{Shape({4, 3}), Shape({3}), Shape({3})};  // rank 2: the fuzzer's generic rule draws it
     },
     .normalizes = true},

    // batch_norm_running_mean  the new running mean of batch_norm in
    //         training mode (PyTorch's running_mean after a forward pass): x
    //         (N, C[, H, W]) with N H W >= 2, running (C), attr scalar = the
    //         momentum m in [0, 1]: r' = (1 - m) r + m mean(x) per channel.
    //         Saves nothing; dx = dy m / M on the channel, dr = dy (1 - m).
    //         Its output is meant for a state op (CONTRACT.md, state)
    {.kind = OpKind::kBatchNormRunningMean, .name = "batch_norm_running_mean", .arity = 2,
     .has_scalar = true, .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       CheckRunningOperands("batch_norm_running_mean", in[0], in[1], op.scalar);
       return in[1];
     },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kBatchNormRunningMeanKernel, {&in[0], &in[1]}, {.scalar = op.scalar});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kBatchNormRunningMeanBackwardKernel, {&a.dout},
                       {.scalar = op.scalar, .shape = a.input_shapes[0]});
       }
       if (a.needs[1]) d[1] = k.Scale(a.dout, 1 - op.scalar);
     },
     .flops = [](const Shapes& in, const Shape&) { return RunningMeanFlops(in[0]); },
     .forward_depth = [](const DepthArgs& a) {
       return a.deepest() + static_cast<double>(a.inputs[0].num_elements() / a.inputs[0].dim(1)) + 4;
     },
     .backward_depth = [](const DepthArgs&, double dy, std::vector<double>& k) {
       k[0] = dy + 3;
       k[1] = dy + 2;
     },
     .example = [](Op& op) {
       op.scalar = 0.1;
       return Shapes{Shape({2, 3, 2, 2}), Shape({3})};
     }},

    // batch_norm_running_var  the new running variance: as the mean's, with
    //         the batch's unbiased variance (sum of (x - mean)^2 / (M - 1),
    //         PyTorch's). Saves x for dx = dy m 2 (x - mean) / (M - 1);
    //         dr = dy (1 - m)
    {.kind = OpKind::kBatchNormRunningVar, .name = "batch_norm_running_var", .arity = 2,
     .has_scalar = true, .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       CheckRunningOperands("batch_norm_running_var", in[0], in[1], op.scalar);
       return in[1];
     },
     .saves = [](const Needs& needs, Saves& s) { s.inputs[0] = needs[0]; },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kBatchNormRunningVarKernel, {&in[0], &in[1]}, {.scalar = op.scalar});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kBatchNormRunningVarBackwardKernel, {&a.saved_inputs[0], &a.dout}, {.scalar = op.scalar});
       }
       if (a.needs[1]) d[1] = k.Scale(a.dout, 1 - op.scalar);
     },
     .flops = [](const Shapes& in, const Shape&) { return RunningVarFlops(in[0]); },
     .forward_depth = [](const DepthArgs& a) {
       const double m = static_cast<double>(a.inputs[0].num_elements() / a.inputs[0].dim(1));
       return a.deepest() + 2 * m + 8;
     },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       const double m = static_cast<double>(a.inputs[0].num_elements() / a.inputs[0].dim(1));
       k[0] = std::max(dy, a.kf_inputs[0]) + m + 6;
       k[1] = dy + 2;
     },
     .example = [](Op& op) {
       op.scalar = 0.1;
       return Shapes{Shape({2, 3, 2, 2}), Shape({3})};
     }},

    // state   y = x, the new value of the program's parameter named by attr
    //         name (a running statistic): engines return it in
    //         Result::state, from the forward pass, once per run
    //         (CONTRACT.md, state). Saves nothing; dx = dy; its output is
    //         its input's buffer
    {.kind = OpKind::kState, .name = "state", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       if (op.name.empty()) throw Error("state needs the name of the parameter it updates");
       return in[0];
     },
     .saves = SavesNothing,
     .forward = IdentityForward,
     .backward = IdentityBackward,
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.name = "x0";
       return Shapes{Shape({3, 4})};
     }},

    // slice   y = x[..., start:start + length, ...] on one axis (attr ints =
    //         {axis, start, length}): torch's narrow, split and chunk, one
    //         piece each. Saves nothing; dx = dy in the slice, 0 elsewhere
    {.kind = OpKind::kSlice, .name = "slice", .arity = 1, .has_scalar = false, .num_ints = 3,
     .shape = [](const Op& op, const Shapes& in) { return SliceShape(op, in[0]); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kSliceKernel, {&in[0]},
                     {.int_a = op.ints[0], .int_b = op.ints[1], .shape = SliceShape(op, in[0].shape())});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kSliceBackwardKernel, {&a.dout},
                       {.int_a = op.ints[0], .int_b = op.ints[1], .shape = a.input_shapes[0]});
       }
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {1, 1, 2};
       return Shapes{Shape({3, 4})};
     }},
};
// clang-format on

constexpr size_t kNumPrimitives = sizeof(kOps) / sizeof(kOps[0]);

// The table is indexed by OpKind: checked once, at first use.
const OpDef* Checked() {
  static const OpDef* table = [] {
    for (size_t i = 0; i < kNumPrimitives; ++i) {
      if (static_cast<size_t>(kOps[i].kind) != i) {
        throw Error(StrCat("op_defs.cc: entry ", i, " (", kOps[i].name,
                           ") is out of OpKind order"));
      }
    }
    return kOps;
  }();
  return table;
}

}  // namespace

double DepthArgs::deepest() const {
  double d = 0;
  for (double k : kf_inputs) d = std::max(d, k);
  return d;
}

std::span<const OpDef> OpDefs() { return {Checked(), kNumPrimitives}; }

const OpDef& Def(OpKind kind) {
  const size_t i = static_cast<size_t>(kind);
  if (i >= kNumPrimitives) {
    throw Error(StrCat(OpKindName(kind), " is not a primitive op: it has no OpDef"));
  }
  return Checked()[i];
}

const OpDef* FindOpDef(std::string_view name) {
  for (const OpDef& def : OpDefs()) {
    if (name == def.name) return &def;
  }
  return nullptr;
}

}  // namespace remat
