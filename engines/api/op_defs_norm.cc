// The normalizations' definitions (op_def.h): layer_norm, rms_norm,
// batch_norm in training mode and its running statistics, one entry each,
// with the table kernels they call.
#include "engines/api/op_defs_families.h"

#include <algorithm>
#include <cmath>
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
// rms_norm(x (..., C), gamma (C); eps): y = x rstd gamma per row, rstd =
// 1 / sqrt(mean of x^2 + eps); loop_kernels_norm.h states the order.
// FLOPs per element of x: 4 forward (square, sum, times rstd, times gamma);
// 9 for dx (3 to recompute xhat, dy gamma, its product with xhat and the
// sum, 3 to combine); 5 for dgamma (3 for xhat, dy xhat, the column sum).
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

// batch_norm in training mode over x (N, C) or (N, C, H, W), gamma and beta
// (C), eps > 0 (attrs.scalar); statistics per channel over N H W
// (loop_kernels_norm.h states the order). FLOPs per element: forward 7 (mean,
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

// clang-format off
const OpDef kNormOps[] = {
    // layer_norm  y = (x - mean) rstd gamma + beta, rstd = 1/sqrt(var + eps),
    //         over the last axis; inputs x (..., C), gamma (C), beta (C);
    //         attr scalar = eps > 0, optional: 0 (left out) is 1e-5
    //         (Kernels::LayerNormEps; BERT writes 1e-12, ViT 1e-6)
    //         saves x for dx and dgamma, gamma for dx; mean and rstd are
    //         recomputed from x by the backward kernels rather than saved (the
    //         IR has one output per op, and two (rows) vectors would be
    //         residuals no policy could name)
    //         dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma
    //         dgamma = sum over rows of dy xhat, dbeta = sum over rows of dy
    //         FLOPs 7 per element
    {.kind = OpKind::kLayerNorm, .name = "layer_norm", .arity = 3, .has_scalar = false,
     .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       Kernels::CheckLayerNormShapes(in[0], in[1], in[2]);
       Kernels::CheckLayerNormEps(op.scalar);
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) {
       s.inputs[0] = needs[0] || needs[1];
       s.inputs[1] = needs[0];
     },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.LayerNorm(in[0], in[1], in[2], op.scalar);
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.LayerNormBackward(a.saved_inputs[0], a.saved_inputs[1], a.dout, op.scalar);
       if (a.needs[1]) d[1] = k.LayerNormGammaGrad(a.saved_inputs[0], a.dout, op.scalar);
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
     .normalizes = true,
     .default_scalar = Kernels::kLayerNormEps},

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
};
// clang-format on

}  // namespace

std::span<const OpDef> NormOpDefs() { return kNormOps; }

}  // namespace op_defs
}  // namespace remat
