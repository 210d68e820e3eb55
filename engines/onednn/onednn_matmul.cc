// The contractions on oneDNN's primitives, with their scratchpads counted by
// the tracker (engines/onednn/onednn_kernels_internal.h): matmul (plain or
// `ba`/`acb` transposed f32 layouts) and conv2d (forward, backward data,
// backward weights; plain NCHW/OIHW layouts).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "engines/api/error.h"
#include "engines/api/tensor.h"
#include "engines/onednn/matmul_calls.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/onednn_kernels_internal.h"
#include "engines/onednn/platform.h"

namespace remat {

using onednn_kernels_internal::Dims;
using onednn_kernels_internal::F32Desc;
using onednn_kernels_internal::Guarded;
using onednn_kernels_internal::Key;
using onednn_kernels_internal::Tag;
using onednn_kernels_internal::Types;

void OneDnnKernels::State::MatMul(const Tensor& a, bool transpose_a, const Tensor& b,
                                 bool transpose_b, Tensor& out,
                                 const std::shared_ptr<MemoryTracker>& tracker) {
  const Shape& shape = out.shape();
  const bool batched = shape.rank() == 3;
  const int r = shape.rank() - 2;
  const int64_t batch = batched ? shape.dim(0) : 1;
  const int64_t m = shape.dim(r);
  const int64_t n = shape.dim(r + 1);
  const int64_t k = transpose_a ? a.shape().dim(r) : a.shape().dim(r + 1);
  // A transposed operand is the same logical (m,k) or (k,n) matrix with its
  // last two axes swapped in memory.
  const Tag plain = batched ? Tag::abc : Tag::ab;
  const Tag swapped = batched ? Tag::acb : Tag::ba;
  const Dims a_dims = batched ? Dims{batch, m, k} : Dims{m, k};
  const Dims b_dims = batched ? Dims{batch, k, n} : Dims{k, n};
  const Dims out_dims = batched ? Dims{batch, m, n} : Dims{m, n};
  const auto a_md = F32Desc(a_dims, transpose_a ? swapped : plain);
  const auto b_md = F32Desc(b_dims, transpose_b ? swapped : plain);
  const auto out_md = F32Desc(out_dims, plain);
  const std::string key =
      Key(transpose_a ? (transpose_b ? "matmul_tt" : "matmul_tn")
                      : (transpose_b ? "matmul_nt" : "matmul_nn"),
          {batch, m, k, n});
  const Cached& cached = Lookup<dnnl::matmul>(key, [&](const dnnl::primitive_attr& attr) {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, out_md), attr, engine_);
    platform_internal::RecordMatMulImpl(pd.impl_info_str());
    return pd;
  });
  // On every run, not only at creation: a recorder scoped to one stretch
  // of work (a benchmark row) sees the primitives it took from the cache.
  // A dry run plans the matmul and runs nothing: not recorded.
  if (!(tracker && tracker->dry_run())) {
    matmul_calls_internal::NoteMatMul(cached.impl);
  }
  Execute(cached,
          {{DNNL_ARG_SRC, Memory(a_md, a)},
           {DNNL_ARG_WEIGHTS, Memory(b_md, b)},
           {DNNL_ARG_DST, Memory(out_md, out)}},
          tracker);
}

void OneDnnKernels::DoMatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                             Tensor& out) {
  if (out.num_elements() == 0) return;
  const int r = a.shape().rank() - 2;
  const int64_t k = transpose_a ? a.shape().dim(r) : a.shape().dim(r + 1);
  if (k == 0) {
    if (dry_run()) return;
    // An empty dot product is 0. oneDNN 2.6 dies of SIGFPE creating a matmul
    // with k == 0, so it must never see one.
    std::memset(out.raw(), 0, out.bytes());
    return;
  }
  Guarded(
      [&] {
        return StrCat("matmul on ", a.TypeString(), transpose_a ? "^T" : "", " x ",
                      b.TypeString(), transpose_b ? "^T" : "");
      },
      [&] { state_->MatMul(a, transpose_a, b, transpose_b, out, tracker()); });
}

void OneDnnKernels::State::Conv2d(int which, const Tensor& a, const Tensor& b, const Tensor* bias,
                                 Tensor& out, const Conv2dGeometry& g,
                                 const std::shared_ptr<MemoryTracker>& tracker) {
  const Shape& xs = which == 1 ? out.shape() : a.shape();
  const Shape& ws = which == 0 ? b.shape() : which == 1 ? b.shape() : out.shape();
  const Shape& ys = which == 0 ? out.shape() : which == 1 ? a.shape() : b.shape();
  auto dims = [](const Shape& s) { return Dims(s.dims().begin(), s.dims().end()); };
  const auto x_md = F32Desc(dims(xs), Tag::nchw);
  // Groups: w (O, C/G, KH, KW) read as (G, O/G, C/G, KH, KW), the same
  // elements in the same order.
  const auto w_md = g.groups == 1 ? F32Desc(dims(ws), Tag::oihw)
                                  : F32Desc({g.groups, ws.dim(0) / g.groups, ws.dim(1), ws.dim(2), ws.dim(3)},
                                            Tag::goihw);
  const auto y_md = F32Desc(dims(ys), Tag::nchw);
  const auto b_md = F32Desc({ws.dim(0)}, Tag::x);
  // oneDNN's dilation counts the gaps: 0 is PyTorch's 1. With none, the
  // dilated descriptors are the plain ones (oneDNN fills in zeros).
  const Dims strides = {g.stride_h, g.stride_w}, padding = {g.pad_h, g.pad_w},
             dilates = {g.dilation_h - 1, g.dilation_w - 1};
  const dnnl::algorithm direct = dnnl::algorithm::convolution_direct;
  auto forward_pd = [&](const dnnl::primitive_attr& attr, bool with_bias) {
    const dnnl::prop_kind training = dnnl::prop_kind::forward_training;
    return dnnl::convolution_forward::primitive_desc(
        with_bias ? dnnl::convolution_forward::desc(training, direct, x_md, w_md, b_md, y_md, strides,
                                                    dilates, padding, padding)
                  : dnnl::convolution_forward::desc(training, direct, x_md, w_md, y_md, strides,
                                                    dilates, padding, padding),
        attr, engine_);
  };
  Dims key_dims = dims(xs);
  for (int64_t d : ws.dims()) key_dims.push_back(d);
  for (int64_t v : {g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups}) {
    key_dims.push_back(v);
  }
  if (which == 0) {
    const bool with_bias = bias != nullptr;
    const Cached& cached = Lookup<dnnl::convolution_forward>(
        Key(with_bias ? "conv_fwd_bias" : "conv_fwd", key_dims),
        [&](const dnnl::primitive_attr& attr) { return forward_pd(attr, with_bias); });
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, Memory(x_md, a)},
                                                  {DNNL_ARG_WEIGHTS, Memory(w_md, b)},
                                                  {DNNL_ARG_DST, Memory(y_md, out)}};
    if (with_bias) args.emplace(DNNL_ARG_BIAS, Memory(b_md, *bias));
    Execute(cached, args, tracker);
  } else if (which == 1) {
    const Cached& cached = Lookup<dnnl::convolution_backward_data>(
        Key("conv_bwd_data", key_dims), [&](const dnnl::primitive_attr& attr) {
          return dnnl::convolution_backward_data::primitive_desc(
              dnnl::convolution_backward_data::desc(direct, x_md, w_md, y_md, strides, dilates,
                                                    padding, padding),
              attr, engine_, forward_pd(dnnl::primitive_attr(), false));
        });
    Execute(cached,
            {{DNNL_ARG_DIFF_DST, Memory(y_md, a)},
             {DNNL_ARG_WEIGHTS, Memory(w_md, b)},
             {DNNL_ARG_DIFF_SRC, Memory(x_md, out)}},
            tracker);
  } else {
    const Cached& cached = Lookup<dnnl::convolution_backward_weights>(
        Key("conv_bwd_weights", key_dims), [&](const dnnl::primitive_attr& attr) {
          return dnnl::convolution_backward_weights::primitive_desc(
              dnnl::convolution_backward_weights::desc(direct, x_md, w_md, y_md, strides, dilates,
                                                       padding, padding),
              attr, engine_, forward_pd(dnnl::primitive_attr(), false));
        });
    Execute(cached,
            {{DNNL_ARG_SRC, Memory(x_md, a)},
             {DNNL_ARG_DIFF_DST, Memory(y_md, b)},
             {DNNL_ARG_DIFF_WEIGHTS, Memory(w_md, out)}},
            tracker);
  }
}

void OneDnnKernels::DoConv2d(int which, const Tensor& a, const Tensor& b, const Tensor* bias,
                             const Conv2dGeometry& g, Tensor& out) {
  if (out.num_elements() == 0) return;
  if (a.num_elements() == 0 || b.num_elements() == 0) {
    // An empty sum is 0 (oneDNN refuses empty operands), plus the bias.
    if (dry_run()) return;
    std::memset(out.raw(), 0, out.bytes());
    if (bias != nullptr) {
      const int64_t o = out.shape().dim(1), plane = out.shape().dim(2) * out.shape().dim(3);
      for (int64_t i = 0; i < out.num_elements(); ++i) out.f32()[i] = bias->f32()[(i / plane) % o];
    }
    return;
  }
  static const char* const kNames[] = {"conv2d", "conv2d_backward_data", "conv2d_backward_weights"};
  Guarded([&] { return StrCat(bias ? "conv2d_bias" : kNames[which], " on ", Types({&a, &b}), " -> ", out.TypeString()); },
          [&] { state_->Conv2d(which, a, b, bias, out, g, tracker()); });
}

}  // namespace remat
