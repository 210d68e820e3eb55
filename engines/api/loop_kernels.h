// Loop kernels that both backends run as they are, on their own float type
// T (float for oneDNN's backend, double for the reference one): gathers,
// scatters, selects and the cross-entropy's row loops, which oneDNN has no
// primitive for. The op definitions (op_defs_<family>.cc) state each one's
// order of arithmetic; these follow it. Each throws remat::Error for an
// index outside its bound, naming the kernel, the position and the value.
//
// The kernels are templates, one header per family, all included here:
//   loop_kernels_common.h       how their loops split between threads and
//                               vector lanes; the order of choices; checked indices
//   loop_kernels_index.h        gather_rows, scatter_add_rows, masked_fill
//   loop_kernels_softmax.h      cross_entropy, log_softmax, top_k_softmax
//   loop_kernels_elementwise.h  silu, gelu_erf, rsqrt, sqrt, tanh, sigmoid,
//                               pow, hardtanh
//   loop_kernels_broadcast.h    broadcast_binary, where, sum_to, reduce
//   loop_kernels_norm.h         rms_norm, batch_norm and its running statistics;
//                               channel_sum (batch_norm's dbeta, conv2d_bias's dbias)
//   loop_kernels_layout.h       reshape, permute, slice and select, cat, expand
//   loop_kernels_pool.h         max_pool2d, global_avg_pool, adaptive_avg_pool2d
// and REMAT_LOOP_KERNELS, below, registers them all on a backend.
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_H_

#include <span>

#include "engines/api/kernels.h"
#include "engines/api/loop_kernels_broadcast.h"
#include "engines/api/loop_kernels_common.h"
#include "engines/api/loop_kernels_elementwise.h"
#include "engines/api/loop_kernels_index.h"
#include "engines/api/loop_kernels_layout.h"
#include "engines/api/loop_kernels_norm.h"
#include "engines/api/loop_kernels_pool.h"
#include "engines/api/loop_kernels_softmax.h"
#include "engines/api/tensor.h"

// Registers every loop kernel of the headers above as `Backend`'s implementation on its
// float type T (float for OneDnnKernels, double for ReferenceKernels): one
// line in each backend's source, so that an op whose kernels are loops is
// written once, here. A loop kernel of one backend only is registered in
// that backend instead.
#define REMAT_LOOP_KERNELS(Backend, T) \
  REMAT_KERNEL_IMPL(Backend, gather_rows, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GatherRows<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, scatter_add_rows, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::ScatterAddRows<T>(*in[0], *in[1], ::remat::loop_kernels::Skip(a), out); }); \
  REMAT_KERNEL_IMPL(Backend, masked_fill, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::MaskedFill<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, cross_entropy, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::CrossEntropy<T>(*in[0], *in[1], ::remat::loop_kernels::Skip(a), out); }); \
  REMAT_KERNEL_IMPL(Backend, cross_entropy_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::CrossEntropyBackward<T>(*in[0], *in[1], *in[2], ::remat::loop_kernels::Skip(a), out); }); \
  REMAT_KERNEL_IMPL(Backend, silu, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Silu<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, silu_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::SiluBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, broadcast_binary, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BroadcastBinary<T>(*in[0], *in[1], a.int_a, out); }); \
  REMAT_KERNEL_IMPL(Backend, where, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Where<T>(*in[0], *in[1], *in[2], out); }); \
  REMAT_KERNEL_IMPL(Backend, where_grad, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::WhereGrad<T>(*in[0], *in[1], a.int_a, out); }); \
  REMAT_KERNEL_IMPL(Backend, sum_to, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::SumTo<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, reduce, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Reduce<T>(*in[0], a.perm, a.int_a, out); }); \
  REMAT_KERNEL_IMPL(Backend, reduce_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::ReduceBackward<T>(in, a.perm, a.int_a, out); }); \
  REMAT_KERNEL_IMPL(Backend, amax_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::ReduceBackward<T>(in, a.perm, a.int_a, out); }); \
  REMAT_KERNEL_IMPL(Backend, rsqrt, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Rsqrt<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, rsqrt_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::RsqrtBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, sqrt, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Sqrt<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, sqrt_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::SqrtBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, tanh, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Tanh<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, tanh_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::TanhBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, sigmoid, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Sigmoid<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, sigmoid_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::SigmoidBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, pow, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Pow<T>(*in[0], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, pow_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::PowBackward<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, hardtanh, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Hardtanh<T>(*in[0], a.int_a, a.int_b, out); }); \
  REMAT_KERNEL_IMPL(Backend, hardtanh_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::HardtanhBackward<T>(*in[0], *in[1], a.int_a, a.int_b, out); }); \
  REMAT_KERNEL_IMPL(Backend, rms_norm, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::RmsNorm<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, rms_norm_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::RmsNormBackward<T>(*in[0], *in[1], *in[2], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, rms_norm_gamma_grad, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::RmsNormGammaGrad<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, log_softmax, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::LogSoftmax<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, log_softmax_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::LogSoftmaxBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, gelu_erf, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GeluErf<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, gelu_erf_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GeluErfBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, reshape, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Reshape<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, permute, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Permute<T>(*in[0], a.perm, out); }); \
  REMAT_KERNEL_IMPL(Backend, top_k_softmax, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::TopKSoftmax<T>(*in[0], a.int_a, out); }); \
  REMAT_KERNEL_IMPL(Backend, top_k_softmax_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::TopKSoftmaxBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, max_pool2d, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::MaxPool2d<T>(*in[0], a.int_a, a.int_b, a.int_c, out); }); \
  REMAT_KERNEL_IMPL(Backend, max_pool2d_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::MaxPool2dBackward<T>(*in[0], *in[1], a.int_a, a.int_b, a.int_c, out); }); \
  REMAT_KERNEL_IMPL(Backend, global_avg_pool, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GlobalAvgPool<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, global_avg_pool_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GlobalAvgPoolBackward<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, adaptive_avg_pool2d, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::AdaptiveAvgPool2d<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, adaptive_avg_pool2d_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::AdaptiveAvgPool2dBackward<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNorm<T>(*in[0], *in[1], *in[2], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormBackward<T>(*in[0], *in[1], *in[2], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_gamma_grad, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormGammaGrad<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, channel_sum, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::ChannelSum<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, conv2d_bias_grad, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::ChannelSum<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_running_mean, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormRunningMean<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_running_var, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormRunningVar<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_running_mean_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormRunningMeanBackward<T>(*in[0], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_running_var_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormRunningVarBackward<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, slice, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Slice<T>(*in[0], a.int_a, a.int_b, ::remat::loop_kernels::SliceStep(a), out); }); \
  REMAT_KERNEL_IMPL(Backend, slice_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::SliceBackward<T>(*in[0], a.int_a, a.int_b, ::remat::loop_kernels::SliceStep(a), out); }); \
  REMAT_KERNEL_IMPL(Backend, cat, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Cat<T>(*in[0], *in[1], a.int_a, out); }); \
  REMAT_KERNEL_IMPL(Backend, expand, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Expand<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, expand_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::ExpandBackward<T>(*in[0], out); })

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_H_
