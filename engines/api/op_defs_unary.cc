// The definitions (op_def.h) of the unary elementwise ops that transformers
// and mobile convnets add to the basic ones (op_defs_elementwise.cc): rsqrt,
// sqrt, tanh, sigmoid, pow by a constant and hardtanh (relu6), one entry
// each, with the table kernels they call (loop_kernels_elementwise.h states
// each formula, operation by operation). Each forward is one FLOP per
// element and each fused backward two, as gelu's (kernels.h's model).
#include <algorithm>
#include <span>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/op_def.h"
#include "engines/api/op_defs_families.h"
#include "engines/api/op_defs_shared.h"

namespace remat {
namespace op_defs {
namespace {

KernelOp Forward(const char* name) {
  return DefineKernel({.name = name, .arity = 1, .shape = SameShapeOperands, .flops = OneFlopPerElement});
}
KernelOp Backward(const char* name) {
  return DefineKernel({.name = name, .arity = 2, .shape = SameShapeOperands, .flops = PerElementOfX<2>});
}

const KernelOp kRsqrtKernel = Forward("rsqrt");
const KernelOp kRsqrtBackwardKernel = Backward("rsqrt_backward");
const KernelOp kSqrtKernel = Forward("sqrt");
const KernelOp kSqrtBackwardKernel = Backward("sqrt_backward");
const KernelOp kTanhKernel = Forward("tanh");
const KernelOp kTanhBackwardKernel = Backward("tanh_backward");
const KernelOp kSigmoidKernel = Forward("sigmoid");
const KernelOp kSigmoidBackwardKernel = Backward("sigmoid_backward");
const KernelOp kPowKernel = Forward("pow");
const KernelOp kPowBackwardKernel = Backward("pow_backward");
const KernelOp kHardtanhKernel = Forward("hardtanh");
const KernelOp kHardtanhBackwardKernel = Backward("hardtanh_backward");

// The rule of an op whose backward reads its output y: dx = kernel(y, dy).
void SavesOutput(const Needs& needs, Saves& s) { s.output = needs[0]; }

// hardtanh's bounds {lo, hi}, lo <= hi, as the kernels' attributes.
KernelAttrs Bounds(const Op& op) {
  KernelAttrs attrs;
  attrs.int_a = Int(op, 0);
  attrs.int_b = Int(op, 1);
  return attrs;
}

// Rounding depths: `forward` roundings on the way to y; the backward's
// `backward` roundings after max(dy, K of what it reads).
template <int kForward>
double Roundings(const DepthArgs& a) {
  return a.deepest() + kForward;
}
template <int kBackward>
void FromOutput(const DepthArgs& a, double dy, std::vector<double>& k) {
  k[0] = std::max(dy, a.kf_output) + kBackward;
}
template <int kBackward>
void FromInput(const DepthArgs& a, double dy, std::vector<double>& k) {
  k[0] = std::max(dy, a.kf_inputs[0]) + kBackward;
}

// clang-format off
const OpDef kUnaryOps[] = {
    // rsqrt   y = 1 / sqrt(x), x > 0; saves y; dx = (-0.5 dy) ((y y) y)
    {.kind = OpKind::kRsqrt, .name = "rsqrt", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesOutput,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kRsqrtKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kRsqrtBackwardKernel, {&a.saved_output, &a.dout});
     },
     .flops = OnePerOutput,
     .forward_depth = Roundings<2>,
     .backward_depth = FromOutput<4>,
     .example = Unary34,
     .positive_inputs = true},

    // sqrt    y = sqrt(x), x >= 0; saves y; dx = dy / (2 y)
    {.kind = OpKind::kSqrt, .name = "sqrt", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesOutput,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kSqrtKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kSqrtBackwardKernel, {&a.saved_output, &a.dout});
     },
     .flops = OnePerOutput,
     .forward_depth = Roundings<1>,
     .backward_depth = FromOutput<2>,
     .example = Unary34,
     .positive_inputs = true},

    // tanh    y = tanh(x); saves y; dx = dy (1 - y y)
    //         (the C library's tanh: within 2 ulp in float32, two roundings)
    {.kind = OpKind::kTanh, .name = "tanh", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesOutput,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kTanhKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kTanhBackwardKernel, {&a.saved_output, &a.dout});
     },
     .flops = OnePerOutput,
     .forward_depth = Roundings<2>,
     .backward_depth = FromOutput<3>,
     .example = Unary34},

    // sigmoid y = 1 / (1 + e^-x); saves y; dx = dy (y (1 - y))
    //         (exp two roundings, the add, the division)
    {.kind = OpKind::kSigmoid, .name = "sigmoid", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesOutput,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Call(kSigmoidKernel, {&in[0]}); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kSigmoidBackwardKernel, {&a.saved_output, &a.dout});
     },
     .flops = OnePerOutput,
     .forward_depth = Roundings<4>,
     .backward_depth = FromOutput<3>,
     .example = Unary34},

    // pow     y = x^p (attr scalar = p, rounded to the kernels' dtype once;
    //         x > 0 where p is not an integer); saves x;
    //         dx = dy (p x^(p-1)), 0 where p = 0
    {.kind = OpKind::kPow, .name = "pow", .arity = 1, .has_scalar = true, .num_ints = 0,
     .shape = SameAsFirst,
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kPowKernel, {&in[0]}, {.scalar = op.scalar});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kPowBackwardKernel, {&a.saved_inputs[0], &a.dout}, {.scalar = op.scalar});
     },
     .flops = OnePerOutput,
     .forward_depth = Roundings<2>,
     .backward_depth = FromInput<5>,
     .example = [](Op& op) {
       op.scalar = 1.5;
       return Shapes{Shape({3, 4})};
     },
     .positive_inputs = true},

    // hardtanh  y = clamp(x, lo, hi) (attr ints = {lo, hi}, lo <= hi;
    //         relu6 is {0, 6}); NaN stays NaN; saves x; dx = dy where
    //         lo < x < hi, else 0 (PyTorch's hardtanh_backward); exact
    {.kind = OpKind::kHardtanh, .name = "hardtanh", .arity = 1, .has_scalar = false, .num_ints = 2,
     .shape = [](const Op& op, const Shapes& in) {
       if (Int(op, 0) > Int(op, 1)) {
         throw Error(StrCat("hardtanh: ints=[", op.ints[0], ",", op.ints[1],
                            "]: the lower bound is above the upper one"));
       }
       return in[0];
     },
     .saves = SavesInput0,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kHardtanhKernel, {&in[0]}, Bounds(op));
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kHardtanhBackwardKernel, {&a.saved_inputs[0], &a.dout}, Bounds(op));
     },
     .flops = OnePerOutput,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {-1, 1};
       return Shapes{Shape({3, 4})};
     }},
};
// clang-format on

}  // namespace

std::span<const OpDef> UnaryOpDefs() { return kUnaryOps; }

}  // namespace op_defs
}  // namespace remat
