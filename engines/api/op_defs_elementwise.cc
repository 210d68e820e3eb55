// The elementwise ops' definitions (op_def.h): relu, sin, cos, square, add,
// mul, gelu, scale, bias_add, neg, sub, exp, log, silu and gelu_erf, and the
// broadcasting binary family's div and where, one entry each, with the table
// kernels they call. An entry reads top to bottom as the op's whole story
// (op_defs.cc says how).
//
// add, sub, mul, div and where broadcast as numpy does (shape.h's
// BroadcastShapes). Operands of one shape run the same-shape kernels they
// always ran (add, sub, mul, div: the same bits as before broadcasting
// existed); others run broadcast_binary, the same IEEE operation per
// element. A broadcast operand's cotangent is the output's summed back to
// its shape by sum_to, in loop_kernels_broadcast.h's order (CONTRACT.md,
// "Broadcasting and reductions").
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

// a OP b with numpy broadcasting (KernelAttrs::int_a: loop_kernels::BinaryOp).
const KernelOp kBroadcastBinaryKernel = DefineKernel(
    {.name = "broadcast_binary",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (a.int_a < 0 || a.int_a > 3) throw Error(StrCat("broadcast_binary: op code ", a.int_a, " is not 0..3"));
       return BroadcastShapes(in[0]->shape(), in[1]->shape());
     },
     .flops = [](std::span<const Tensor* const>, const Shape& out) { return out.num_elements(); }});
// where(cond, a, b), the three broadcast together; cond i32.
const KernelOp kWhereKernel = DefineKernel(
    {.name = "where",
     .arity = 3,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       return BroadcastShapes(BroadcastShapes(in[0]->shape(), in[1]->shape()), in[2]->shape());
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; },
     .int_operands = 0b001});
// where's cotangent for side int_a (0: a, 1: b): dy where cond picks it, else 0.
const KernelOp kWhereGradKernel = DefineKernel(
    {.name = "where_grad",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       const Shape& dy = in[1]->shape();
       if (BroadcastShapes(in[0]->shape(), dy) != dy) {
         throw Error(StrCat("where_grad: cond ", in[0]->TypeString(), " does not broadcast to dy ",
                            in[1]->TypeString()));
       }
       return dy;
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; },
     .int_operands = 0b01});
// dy summed back to KernelAttrs::shape, a shape that broadcasts to dy's: one
// FLOP per element of dy.
const KernelOp kSumToKernel = DefineKernel(
    {.name = "sum_to",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       const Shape& dy = in[0]->shape();
       if (a.shape.rank() > dy.rank() || BroadcastShapes(a.shape, dy) != dy) {
         throw Error(StrCat("sum_to: ", a.shape.ToString(), " does not broadcast to ", in[0]->TypeString()));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return in[0]->num_elements(); }});

// A broadcast operand's cotangent: g (the output's shape) summed to
// `shape`; g itself where the shapes are one.
Tensor SumTo(Kernels& k, const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  KernelAttrs attrs;
  attrs.shape = shape;
  return k.Call(kSumToKernel, {&g}, attrs);
}

// a OP b: the same-shape kernel where the shapes are one (the bits and the
// kernel calls of the ops before broadcasting), else broadcast_binary.
Tensor Binary(Kernels& k, loop_kernels::BinaryOp op, const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) {
    switch (op) {
      case loop_kernels::BinaryOp::kAdd: return k.Add(a, b);
      case loop_kernels::BinaryOp::kSub: return k.Call(kSubKernel, {&a, &b});
      case loop_kernels::BinaryOp::kMul: return k.Mul(a, b);
      case loop_kernels::BinaryOp::kDiv: return k.Call(kDivKernel, {&a, &b});
    }
  }
  KernelAttrs attrs;
  attrs.int_a = static_cast<int64_t>(op);
  return k.Call(kBroadcastBinaryKernel, {&a, &b}, attrs);
}

Shape BroadcastOperands(const Op& op, const Shapes& in) {
  try {
    Shape out = BroadcastShapes(in[0], in[1]);
    if (in.size() == 3) out = BroadcastShapes(out, in[2]);
    return out;
  } catch (const Error& e) {
    throw Error(StrCat(OpKindName(op.kind), ": ", e.what()));
  }
}

// How many elements of the output each element of input i sums in its
// cotangent, when it is broadcast (0: not broadcast): the roundings its
// sum_to adds to the rounding depth.
double Summed(const DepthArgs& a, size_t i) {
  const int64_t n = a.inputs[i].num_elements(), m = a.output.num_elements();
  return n == 0 || n == m ? 0.0 : static_cast<double>(m / n);
}

using loop_kernels::BinaryOp;

// silu(x) = x / (1 + e^-x), elementwise (lane_math.h states the order, and
// its float32 exp); its backward dx = dy (s (1 + x (1 - s))), a fused rule of 2 FLOPs.
const KernelOp kSiluKernel = DefineKernel(
    {.name = "silu", .arity = 1, .shape = SameShapeOperands, .flops = OneFlopPerElement});
const KernelOp kSiluBackwardKernel = DefineKernel(
    {.name = "silu_backward",
     .arity = 2,
     .shape = SameShapeOperands,
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return 2 * in[0]->num_elements(); }});

// gelu, erf form, and its fused backward (2 FLOPs per element).
const KernelOp kGeluErfKernel = DefineKernel(
    {.name = "gelu_erf", .arity = 1, .shape = SameShapeOperands, .flops = OneFlopPerElement});
const KernelOp kGeluErfBackwardKernel = DefineKernel(
    {.name = "gelu_erf_backward", .arity = 2, .shape = SameShapeOperands, .flops = PerElementOfX<2>});

// clang-format off
const OpDef kElementwiseOps[] = {
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

    // add     y = a + b, broadcast; saves nothing; da = sum_to(dy), db = sum_to(dy)
    //         (dy itself for an operand of the output's shape)
    {.kind = OpKind::kAdd, .name = "add", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = BroadcastOperands,
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return Binary(k, BinaryOp::kAdd, in[0], in[1]);
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = SumTo(k, a.dout, a.input_shapes[0]);
       if (a.needs[1]) d[1] = SumTo(k, a.dout, a.input_shapes[1]);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       for (size_t i = 0; i < 2; ++i) k[i] = dy + Summed(a, i);
     },
     .example = Binary34},

    // mul     y = a * b, broadcast; saves b for da, a for db
    //         da = sum_to(dy * b), db = sum_to(dy * a)
    {.kind = OpKind::kMul, .name = "mul", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = BroadcastOperands,
     .saves = SavesOther,
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return Binary(k, BinaryOp::kMul, in[0], in[1]);
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = SumTo(k, Binary(k, BinaryOp::kMul, a.dout, a.saved_inputs[1]), a.input_shapes[0]);
       if (a.needs[1]) d[1] = SumTo(k, Binary(k, BinaryOp::kMul, a.dout, a.saved_inputs[0]), a.input_shapes[1]);
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_inputs[1]) + 1 + Summed(a, 0);
       k[1] = std::max(dy, a.kf_inputs[0]) + 1 + Summed(a, 1);
     },
     .example = Binary34},

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

    // sub     y = a - b, broadcast; saves nothing; da = sum_to(dy),
    //         db = -sum_to(dy) (the negation last: exact, so the same bits
    //         as the sum of the negated terms)
    {.kind = OpKind::kSub, .name = "sub", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = BroadcastOperands,
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return Binary(k, BinaryOp::kSub, in[0], in[1]);
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = SumTo(k, a.dout, a.input_shapes[0]);
       if (a.needs[1]) {
         const Tensor g = SumTo(k, a.dout, a.input_shapes[1]);
         d[1] = k.Call(kNegKernel, {&g});
       }
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       for (size_t i = 0; i < 2; ++i) k[i] = dy + Summed(a, i);  // a negation is exact
     },
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

    // div     y = a / b, broadcast; saves b for da, a and b for db
    //         da = sum_to(dy / b); db = -sum_to((dy * a) / (b * b))
    //         (PyTorch's -grad * a / (b * b), the product first)
    {.kind = OpKind::kDiv, .name = "div", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = BroadcastOperands,
     .saves = [](const Needs& needs, Saves& s) {
       s.inputs[1] = needs[0] || needs[1];
       s.inputs[0] = needs[1];
     },
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return Binary(k, BinaryOp::kDiv, in[0], in[1]);
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       const Tensor& b = a.saved_inputs[1];
       if (a.needs[0]) d[0] = SumTo(k, Binary(k, BinaryOp::kDiv, a.dout, b), a.input_shapes[0]);
       if (a.needs[1]) {
         const Tensor bb = k.Mul(b, b);
         const Tensor t = Binary(k, BinaryOp::kDiv, Binary(k, BinaryOp::kMul, a.dout, a.saved_inputs[0]), bb);
         const Tensor g = SumTo(k, t, a.input_shapes[1]);
         d[1] = k.Call(kNegKernel, {&g});
       }
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = std::max(dy, a.kf_inputs[1]) + 1 + Summed(a, 0);
       k[1] = std::max({dy, a.kf_inputs[0], a.kf_inputs[1]}) + 3 + Summed(a, 1);
     },
     .example = [](Op&) { return Shapes{Shape({3, 4}), Shape({4})}; },
     .positive_inputs = true},

    // where   y = cond != 0 ? a : b; cond i32 (never differentiated), the
    //         three broadcast together; saves cond; da = sum_to(dy where
    //         cond, else 0), db = sum_to(dy where not cond, else 0)
    {.kind = OpKind::kWhere, .name = "where", .arity = 3, .has_scalar = false, .num_ints = 0,
     .shape = BroadcastOperands,
     .saves = [](const Needs& needs, Saves& s) { s.inputs[0] = needs[1] || needs[2]; },
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return k.Call(kWhereKernel, {&in[0], &in[1], &in[2]});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       for (size_t side = 0; side < 2; ++side) {
         if (!a.needs[side + 1]) continue;
         KernelAttrs attrs;
         attrs.int_a = static_cast<int64_t>(side);
         const Tensor g = k.Call(kWhereGradKernel, {&a.saved_inputs[0], &a.dout}, attrs);
         d[side + 1] = SumTo(k, g, a.input_shapes[side + 1]);
       }
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       for (size_t i = 0; i < 3; ++i) k[i] = dy + Summed(a, i);
     },
     .example = [](Op&) { return Shapes{Shape({3, 4}), Shape({3, 4}), Shape({3, 1})}; },
     .int_inputs = 0b001,
     .int_bound = [](const Shapes&, int) { return int64_t{2}; }},
};
// clang-format on

}  // namespace

std::span<const OpDef> ElementwiseOpDefs() { return kElementwiseOps; }

}  // namespace op_defs
}  // namespace remat
