// The elementwise ops' definitions (op_def.h): relu, sin, cos, square, add,
// mul, gelu, scale, bias_add, neg, sub, exp, log, silu and gelu_erf, one
// entry each, with the table kernels they call. An entry reads top to bottom
// as the op's whole story (op_defs.cc says how).
#include "engines/api/op_defs_families.h"

#include <algorithm>
#include <span>
#include <vector>

#include "engines/api/kernels.h"
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
};
// clang-format on

}  // namespace

std::span<const OpDef> ElementwiseOpDefs() { return kElementwiseOps; }

}  // namespace op_defs
}  // namespace remat
