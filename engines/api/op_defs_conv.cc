// The definitions (op_def.h) of the ops on NCHW images: conv2d, max_pool2d
// and global_avg_pool, one entry each, with the table kernels they call.
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
// OH = (H + 2p - k) / s + 1. Ties and order: loop_kernels_pool.h.
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

// clang-format off
const OpDef kConvOps[] = {
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
};
// clang-format on

}  // namespace

std::span<const OpDef> ConvOpDefs() { return kConvOps; }

}  // namespace op_defs
}  // namespace remat
