// The definitions (op_def.h) of the ops on NCHW images: conv2d (with
// strides, paddings and dilations per axis, and groups), conv2d_bias,
// max_pool2d, global_avg_pool and adaptive_avg_pool2d, one entry each, with the table kernels
// they call.
#include "engines/api/op_defs_families.h"

#include <algorithm>
#include <span>
#include <string>
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
// conv2d, NCHW: x (N, C, H, W) and w (O, C/G, KH, KW), G groups dividing
// C and O (depthwise: G = C), strides >= 1, zero padding >= 0 (ph rows on
// top and bottom, pw columns left and right), dilations >= 1 (attrs:
// Conv2dGeometry, kernels.h); out (N, O, OH, OW), OH = (H + 2 ph - dh (KH -
// 1) - 1) / sh + 1 (floor), OW likewise. Its backward kernels take the
// shape of what they compute as attrs.shape. The op's ints: {stride,
// padding} (square, dilation 1, groups 1) or the geometry's 7.
std::string GeometryText(const Conv2dGeometry& g) {
  return StrCat("stride [", g.stride_h, ",", g.stride_w, "], padding [", g.pad_h, ",", g.pad_w,
                "], dilation [", g.dilation_h, ",", g.dilation_w, "], groups ", g.groups);
}
Shape Conv2dShape(const Shape& x, const Shape& w, const Conv2dGeometry& g) {
  const bool ranks = x.rank() == 4 && w.rank() == 4;
  const int64_t reach_h = ranks ? g.dilation_h * (w.dim(2) - 1) + 1 : 0;
  const int64_t reach_w = ranks ? g.dilation_w * (w.dim(3) - 1) + 1 : 0;
  if (!ranks || g.groups < 1 || g.stride_h < 1 || g.stride_w < 1 || g.pad_h < 0 || g.pad_w < 0 ||
      g.dilation_h < 1 || g.dilation_w < 1 || w.dim(1) * g.groups != x.dim(1) ||
      w.dim(0) % g.groups != 0 || x.dim(2) + 2 * g.pad_h < reach_h ||
      x.dim(3) + 2 * g.pad_w < reach_w) {
    throw Error(StrCat("conv2d takes x (N, C, H, W) and w (O, C/groups, KH, KW), O divisible by "
                       "groups, the dilated kernel within the padded image, strides and dilations "
                       ">= 1, paddings >= 0; got x ", x.ToString(), ", w ", w.ToString(), ", ",
                       GeometryText(g)));
  }
  return Shape({x.dim(0), w.dim(0), (x.dim(2) + 2 * g.pad_h - reach_h) / g.stride_h + 1,
                (x.dim(3) + 2 * g.pad_w - reach_w) / g.stride_w + 1});
}
// The op's geometry: ints {s, p} or the 7 of Conv2dGeometry.
Conv2dGeometry GeometryOf(const Op& op) {
  const std::vector<int64_t>& v = op.ints;
  if (v.size() == 2) return {v[0], v[0], v[1], v[1], 1, 1, 1};
  if (v.size() == 7) return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
  std::string list;
  for (int64_t i : v) list += StrCat(list.empty() ? "" : ",", i);
  throw Error(StrCat(OpKindName(op.kind), ": ints = [", list, "]; expected [STRIDE,PADDING] or "
                     "[SH,SW,PH,PW,DH,DW,GROUPS]"));
}
KernelAttrs ConvAttrs(const Op& op, const Shape& shape = Shape()) {
  const Conv2dGeometry g = GeometryOf(op);
  return {.shape = shape,
          .conv = {g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups}};
}
// 2 FLOPs per multiply-add: 2 N O OH OW (C/G) KH KW, for the forward and
// for each backward kernel alike. `w` and `y` are the weight's and the
// output's shapes.
int64_t ConvFlops(const Shape& w, const Shape& y) {
  return 2 * y.num_elements() * w.dim(1) * w.dim(2) * w.dim(3);
}
const KernelOp kConv2dKernel = DefineKernel(
    {.name = "conv2d",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       return Conv2dShape(in[0]->shape(), in[1]->shape(), Conv2dGeometryOf(a));
     },
     .flops = [](std::span<const Tensor* const> in, const Shape& out) {
       return ConvFlops(in[1]->shape(), out);
     }});
// (x, w, b (O)) -> conv2d(x, w) + b on every output channel: oneDNN's
// convolution with its bias; FLOPs the convolution's and one per output.
const KernelOp kConv2dBiasKernel = DefineKernel(
    {.name = "conv2d_bias",
     .arity = 3,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       const Shape y = Conv2dShape(in[0]->shape(), in[1]->shape(), Conv2dGeometryOf(a));
       if (in[2]->shape() != Shape({y.dim(1)})) {
         throw Error(StrCat("conv2d_bias: the bias is ", in[2]->TypeString(), "; expected (",
                            y.dim(1), "), one per output channel"));
       }
       return y;
     },
     .flops = [](std::span<const Tensor* const> in, const Shape& out) {
       return ConvFlops(in[1]->shape(), out) + out.num_elements();
     }});
// dy (N, O, OH, OW) -> dbias (O): each channel's sum over N, then OH OW in
// index order, accumulated in double (loop_kernels_norm.h's ChannelSum,
// batch_norm's dbeta).
const KernelOp kConv2dBiasGradKernel = DefineKernel(
    {.name = "conv2d_bias_grad",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[0]->shape().rank() != 4) throw Error("conv2d_bias's bias gradient takes dy (N, O, OH, OW)");
       return Shape({in[0]->shape().dim(1)});
     },
     .flops = OneFlopPerElement});
// (dy, w) -> dx of shape attrs.shape.
const KernelOp kConv2dBackwardDataKernel = DefineKernel(
    {.name = "conv2d_backward_data",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (Conv2dShape(a.shape, in[1]->shape(), Conv2dGeometryOf(a)) != in[0]->shape()) {
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
       if (Conv2dShape(in[0]->shape(), a.shape, Conv2dGeometryOf(a)) != in[1]->shape()) {
         throw Error(StrCat("conv2d's backward: dy ", in[1]->TypeString(), " is not the output of x ",
                            in[0]->TypeString(), " and w ", a.shape.ToString()));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const> in, const Shape& out) {
       return ConvFlops(out, in[1]->shape());
     }});
// conv2d's and conv2d_bias's dx and dw.
void ConvBackward(Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
  if (a.needs[0]) {
    d[0] = k.Call(kConv2dBackwardDataKernel, {&a.dout, &a.saved_inputs[1]}, ConvAttrs(op, a.input_shapes[0]));
  }
  if (a.needs[1]) {
    d[1] = k.Call(kConv2dBackwardWeightsKernel, {&a.saved_inputs[0], &a.dout}, ConvAttrs(op, a.input_shapes[1]));
  }
}
double ConvForwardDepth(const DepthArgs& a) {
  const Shape& w = a.inputs[1];
  return a.deepest() + static_cast<double>(w.dim(1) * w.dim(2) * w.dim(3)) + (a.inputs.size() == 3 ? 1 : 0);
}
void ConvBackwardDepth(const DepthArgs& a, double dy, std::vector<double>& k) {
  // dx sums O KH KW terms at most, dw N OH OW, db N OH OW.
  const Shape& w = a.inputs[1];
  const Shape& y = a.output;
  k[0] = std::max(dy, a.kf_inputs[1]) + static_cast<double>(w.dim(0) * w.dim(2) * w.dim(3));
  k[1] = std::max(dy, a.kf_inputs[0]) + static_cast<double>(y.dim(0) * y.dim(2) * y.dim(3));
  if (k.size() == 3) k[2] = dy + static_cast<double>(y.dim(0) * y.dim(2) * y.dim(3));
}

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

// adaptive_avg_pool2d (N, C, H, W) -> (N, C, OH, OW) (attrs.int_a = OH,
// int_b = OW): one FLOP per element of each window plus one per output;
// its backward (attrs.shape = x's) one per output plus one per element of
// each window. Any OH, OW >= 1: above H (W) PyTorch's windows repeat rows
// (columns), each of at least one element (VGG's and AlexNet's 7x7 and 6x6
// heads on small images).
Shape AdaptivePoolShape(const Shape& x, int64_t oh, int64_t ow) {
  if (x.rank() != 4 || oh < 1 || ow < 1 || x.dim(2) < 1 || x.dim(3) < 1) {
    throw Error(StrCat("adaptive_avg_pool2d to [", oh, ",", ow, "] takes x (N, C, H, W) with H, W >= 1 "
                       "and OH, OW >= 1; got ", x.ToString()));
  }
  return Shape({x.dim(0), x.dim(1), oh, ow});
}
// The elements the windows read, all told (overlaps counted each time).
int64_t AdaptiveTaps(const Shape& x, const Shape& y) {
  int64_t rows = 0, cols = 0;
  for (int64_t i = 0; i < y.dim(2); ++i) rows += ((i + 1) * x.dim(2) + y.dim(2) - 1) / y.dim(2) - i * x.dim(2) / y.dim(2);
  for (int64_t j = 0; j < y.dim(3); ++j) cols += ((j + 1) * x.dim(3) + y.dim(3) - 1) / y.dim(3) - j * x.dim(3) / y.dim(3);
  return x.dim(0) * x.dim(1) * rows * cols;
}
const KernelOp kAdaptiveAvgPoolKernel = DefineKernel(
    {.name = "adaptive_avg_pool2d",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       return AdaptivePoolShape(in[0]->shape(), a.int_a, a.int_b);
     },
     .flops = [](std::span<const Tensor* const> in, const Shape& out) {
       return AdaptiveTaps(in[0]->shape(), out) + out.num_elements();
     }});
const KernelOp kAdaptiveAvgPoolBackwardKernel = DefineKernel(
    {.name = "adaptive_avg_pool2d_backward",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       const Shape& dy = in[0]->shape();
       if (dy.rank() != 4 || AdaptivePoolShape(a.shape, dy.dim(2), dy.dim(3)) != dy) {
         throw Error(StrCat("adaptive_avg_pool2d's backward: dy ", in[0]->TypeString(),
                            " is not an output of x ", a.shape.ToString()));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const> in, const Shape& out) {
       return AdaptiveTaps(out, in[0]->shape()) + in[0]->num_elements();
     }});

// clang-format off
const OpDef kConvOps[] = {
    // conv2d  y = x (*) w: NCHW cross-correlation (PyTorch's nn.Conv2d
    //         without bias), attr ints = {stride, padding} (square, dilation
    //         1, groups 1) or {sh, sw, ph, pw, dh, dw, groups} (w (O,
    //         C/groups, KH, KW); depthwise: groups = C), zero padding;
    //         oneDNN's convolution. Saves w for dx and x for dw; dx = its
    //         backward-data, dw = its backward-weights; FLOPs 2 N O OH OW
    //         (C/groups) KH KW
    {.kind = OpKind::kConv2d, .name = "conv2d", .arity = 2, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) { return Conv2dShape(in[0], in[1], GeometryOf(op)); },
     .saves = SavesOther,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kConv2dKernel, {&in[0], &in[1]}, ConvAttrs(op));
     },
     .backward = ConvBackward,
     .flops = [](const Shapes& in, const Shape& out) { return ConvFlops(in[1], out); },
     .forward_depth = ConvForwardDepth,
     .backward_depth = ConvBackwardDepth,
     .example = [](Op& op) {
       op.ints = {2, 1};
       return Shapes{Shape({2, 3, 5, 5}), Shape({4, 3, 3, 3})};
     }},

    // conv2d_bias  y = conv2d(x, w) + b on every output channel (nn.Conv2d
    //         with its bias), b (O); conv2d's ints. Saves x and w as conv2d
    //         does; db = dy summed per channel over N, then OH OW in index
    //         order; FLOPs conv2d's and one per output
    {.kind = OpKind::kConv2dBias, .name = "conv2d_bias", .arity = 3, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) {
       const Shape y = Conv2dShape(in[0], in[1], GeometryOf(op));
       if (in[2] != Shape({y.dim(1)})) {
         throw Error(StrCat("conv2d_bias: the bias is ", in[2].ToString(), "; expected (", y.dim(1),
                            "), one per output channel"));
       }
       return y;
     },
     .saves = SavesOther,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kConv2dBiasKernel, {&in[0], &in[1], &in[2]}, ConvAttrs(op));
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       ConvBackward(k, op, a, d);
       if (a.needs[2]) d[2] = k.Call(kConv2dBiasGradKernel, {&a.dout});
     },
     .flops = [](const Shapes& in, const Shape& out) { return ConvFlops(in[1], out) + out.num_elements(); },
     .forward_depth = ConvForwardDepth,
     .backward_depth = ConvBackwardDepth,
     .example = [](Op& op) {
       op.ints = {1, 2, 1, 0, 2, 1, 2};  // depthwise-ish: 2 groups, dilated rows
       return Shapes{Shape({2, 4, 6, 5}), Shape({6, 2, 3, 2}), Shape({6})};
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

    // adaptive_avg_pool2d  (N, C, H, W) -> (N, C, OH, OW), attr ints =
    //         {OH, OW} (OH, OW >= 1; H, W >= 1): output (i, j) is the
    //         mean of rows floor(i H / OH) .. ceil((i + 1) H / OH) - 1 and
    //         the columns likewise (PyTorch's windows; they overlap where OH
    //         does not divide H, repeat rows where OH > H), summed
    //         row-major from +0, / the count.
    //         Saves nothing; dx = 0, then for each output in increasing
    //         row-major position dy / count added to its window's elements
    //         (row-major). [1, 1] gives global_avg_pool's bits.
    {.kind = OpKind::kAdaptiveAvgPool2d, .name = "adaptive_avg_pool2d", .arity = 1, .has_scalar = false,
     .num_ints = 2,
     .shape = [](const Op& op, const Shapes& in) { return AdaptivePoolShape(in[0], Int(op, 0), Int(op, 1)); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kAdaptiveAvgPoolKernel, {&in[0]}, {.int_a = Int(op, 0), .int_b = Int(op, 1)});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kAdaptiveAvgPoolBackwardKernel, {&a.dout}, {.shape = a.input_shapes[0]});
     },
     .flops = [](const Shapes& in, const Shape& out) { return AdaptiveTaps(in[0], out) + out.num_elements(); },
     .forward_depth = [](const DepthArgs& a) {
       // The largest window: ceil(H / OH) + 1 rows by as many columns.
       const int64_t rows = (a.inputs[0].dim(2) + a.output.dim(2) - 1) / a.output.dim(2) + 1;
       const int64_t cols = (a.inputs[0].dim(3) + a.output.dim(3) - 1) / a.output.dim(3) + 1;
       return a.deepest() + static_cast<double>(rows * cols) + 1;
     },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       // One division, then up to as many adds as windows overlap an element (2 by 2).
       k[0] = dy + 1 + static_cast<double>(a.output.dim(2) < a.inputs[0].dim(2) ? 4 : 1);
     },
     .example = [](Op& op) {
       op.ints = {3, 2};
       return Shapes{Shape({2, 3, 7, 5})};
     }},
};
// clang-format on

}  // namespace

std::span<const OpDef> ConvOpDefs() { return kConvOps; }

}  // namespace op_defs
}  // namespace remat
