// Loop kernels that both backends run as they are, on their own float type
// T (float for oneDNN's backend, double for the reference one): gathers,
// scatters, selects and the cross-entropy's row loops, which oneDNN has no
// primitive for. op_defs.cc states each one's order of arithmetic; these
// follow it. Each throws remat::Error for an index outside its bound,
// naming the kernel, the position and the value.
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

inline int64_t IndexAt(const char* kernel, const Tensor& ids, int64_t p, int64_t bound) {
  const int32_t id = ids.i32()[p];
  if (id < 0 || id >= bound) {
    throw Error(StrCat(kernel, ": index ", id, " at position ", p, " is outside [0, ", bound, ")"));
  }
  return id;
}

template <typename T>
void GatherRows(const Tensor& table, const Tensor& ids, Tensor& out) {
  const T* t = static_cast<const T*>(table.raw());
  T* y = static_cast<T*>(out.raw());
  const int64_t v = table.shape().dim(0), d = table.shape().dim(1);
  for (int64_t p = 0; p < ids.num_elements(); ++p) {
    const int64_t id = IndexAt("embedding", ids, p, v);
    for (int64_t j = 0; j < d; ++j) y[p * d + j] = t[id * d + j];
  }
}

template <typename T>
void ScatterAddRows(const Tensor& dy, const Tensor& ids, Tensor& out) {
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t v = out.shape().dim(0), d = out.shape().dim(1);
  for (int64_t i = 0; i < out.num_elements(); ++i) o[i] = 0;
  for (int64_t p = 0; p < ids.num_elements(); ++p) {  // increasing position
    const int64_t id = IndexAt("embedding's backward", ids, p, v);
    for (int64_t j = 0; j < d; ++j) o[id * d + j] += g[p * d + j];
  }
}

template <typename T>
void MaskedFill(const Tensor& x, const Tensor& mask, double fill, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  const int32_t* m = mask.i32();
  T* y = static_cast<T*>(out.raw());
  const T c = static_cast<T>(fill);
  for (int64_t i = 0; i < x.num_elements(); ++i) y[i] = m[i] != 0 ? c : a[i];
}

// Row r's max and sum of exp(x - max), j in order.
template <typename T>
void RowStats(const T* xr, int64_t cols, T* m, T* s) {
  *m = xr[0];
  for (int64_t j = 1; j < cols; ++j) *m = std::max(*m, xr[j]);
  *s = 0;
  for (int64_t j = 0; j < cols; ++j) *s += std::exp(xr[j] - *m);
}

template <typename T>
void CrossEntropy(const Tensor& logits, const Tensor& targets, Tensor& out) {
  const T* x = static_cast<const T*>(logits.raw());
  const int64_t rows = logits.shape().dim(0), cols = logits.shape().dim(1);
  T total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const int64_t t = IndexAt("cross_entropy", targets, r, cols);
    T m, s;
    RowStats(xr, cols, &m, &s);
    total += (m + std::log(s)) - xr[t];
  }
  static_cast<T*>(out.raw())[0] = total / static_cast<T>(rows);
}

template <typename T>
void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, const Tensor& dy,
                          Tensor& out) {
  const T* x = static_cast<const T*>(logits.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t rows = logits.shape().dim(0), cols = logits.shape().dim(1);
  const T g = static_cast<const T*>(dy.raw())[0] / static_cast<T>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const int64_t t = IndexAt("cross_entropy's backward", targets, r, cols);
    T m, s;
    RowStats(xr, cols, &m, &s);
    for (int64_t j = 0; j < cols; ++j) {
      o[r * cols + j] = (std::exp(xr[j] - m) / s - (j == t ? T(1) : T(0))) * g;
    }
  }
}


// silu: s = 1 / (1 + e^-x) (T's exp), y = x s.
template <typename T>
void Silu(const Tensor& x, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const T s = T(1) / (T(1) + std::exp(-a[i]));
    y[i] = a[i] * s;
  }
}

// dx = dy (s (1 + x (1 - s))), s as in Silu.
template <typename T>
void SiluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* y = static_cast<T*>(out.raw());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const T s = T(1) / (T(1) + std::exp(-a[i]));
    y[i] = g[i] * (s * (T(1) + a[i] * (T(1) - s)));
  }
}

// rms_norm's row statistic: rstd = 1 / sqrt(sum_j x_j^2 / C + eps), the
// squares summed in index order, eps rounded to T.
template <typename T>
T RmsRstd(const T* x, int64_t c, double eps) {
  T ss = T(0);
  for (int64_t j = 0; j < c; ++j) ss += x[j] * x[j];
  return T(1) / std::sqrt(ss / static_cast<T>(c) + static_cast<T>(eps));
}

// y_j = (x_j rstd) gamma_j per row.
template <typename T>
void RmsNorm(const Tensor& x, const Tensor& gamma, double eps, Tensor& out) {
  const int64_t c = gamma.num_elements();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  const T* gm = static_cast<const T*>(gamma.raw());
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = static_cast<const T*>(x.raw()) + r * c;
    T* yr = static_cast<T*>(out.raw()) + r * c;
    const T rstd = RmsRstd(xr, c, eps);
    for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] * rstd) * gm[j];
  }
}

// dx_j = rstd (g_j - xhat_j m), g = dy gamma, xhat = x rstd,
// m = (sum_j g_j xhat_j) / C, per row.
template <typename T>
void RmsNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy, double eps,
                     Tensor& out) {
  const int64_t c = gamma.num_elements();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  const T* gm = static_cast<const T*>(gamma.raw());
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = static_cast<const T*>(x.raw()) + r * c;
    const T* dyr = static_cast<const T*>(dy.raw()) + r * c;
    T* o = static_cast<T*>(out.raw()) + r * c;
    const T rstd = RmsRstd(xr, c, eps);
    T sum = T(0);
    for (int64_t j = 0; j < c; ++j) sum += (dyr[j] * gm[j]) * (xr[j] * rstd);
    const T m = sum / static_cast<T>(c);
    for (int64_t j = 0; j < c; ++j) o[j] = rstd * (dyr[j] * gm[j] - (xr[j] * rstd) * m);
  }
}

// dgamma_j = sum over rows, in order, of dy_j xhat_j.
template <typename T>
void RmsNormGammaGrad(const Tensor& x, const Tensor& dy, double eps, Tensor& out) {
  const int64_t c = out.num_elements();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  T* o = static_cast<T*>(out.raw());
  for (int64_t j = 0; j < c; ++j) o[j] = T(0);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = static_cast<const T*>(x.raw()) + r * c;
    const T* dyr = static_cast<const T*>(dy.raw()) + r * c;
    const T rstd = RmsRstd(xr, c, eps);
    for (int64_t j = 0; j < c; ++j) o[j] += dyr[j] * (xr[j] * rstd);
  }
}

// log_softmax per row: y_j = (x_j - m) - log s, m and s as RowStats.
template <typename T>
void LogSoftmax(const Tensor& x, Tensor& out) {
  const int64_t cols = x.shape().dim(x.shape().rank() - 1);
  const int64_t rows = cols == 0 ? 0 : x.num_elements() / cols;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = static_cast<const T*>(x.raw()) + r * cols;
    T* yr = static_cast<T*>(out.raw()) + r * cols;
    T m, s;
    RowStats(xr, cols, &m, &s);
    const T log_s = std::log(s);
    for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m) - log_s;
  }
}

// From log_softmax's output y: dx_j = dy_j - e^{y_j} (sum_j dy_j), per row.
template <typename T>
void LogSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  const int64_t cols = y.shape().dim(y.shape().rank() - 1);
  const int64_t rows = cols == 0 ? 0 : y.num_elements() / cols;
  for (int64_t r = 0; r < rows; ++r) {
    const T* yr = static_cast<const T*>(y.raw()) + r * cols;
    const T* gr = static_cast<const T*>(dy.raw()) + r * cols;
    T* o = static_cast<T*>(out.raw()) + r * cols;
    T sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += gr[j];
    for (int64_t j = 0; j < cols; ++j) o[j] = gr[j] - std::exp(yr[j]) * sum;
  }
}

// gelu, erf form: y = (x / 2) (1 + erf(x / sqrt 2)).
template <typename T>
void GeluErf(const Tensor& x, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  const T rsqrt2 = static_cast<T>(0.70710678118654752440);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    y[i] = (a[i] * T(0.5)) * (T(1) + std::erf(a[i] * rsqrt2));
  }
}

// dx = dy ((1 + erf(x / sqrt 2)) / 2 + x e^{-x^2 / 2} / sqrt(2 pi)).
template <typename T>
void GeluErfBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* y = static_cast<T*>(out.raw());
  const T rsqrt2 = static_cast<T>(0.70710678118654752440);
  const T rsqrt2pi = static_cast<T>(0.39894228040143267794);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const T cdf = T(0.5) * (T(1) + std::erf(a[i] * rsqrt2));
    const T pdf = std::exp(T(-0.5) * a[i] * a[i]) * rsqrt2pi;
    y[i] = g[i] * (cdf + a[i] * pdf);
  }
}

}  // namespace loop_kernels
}  // namespace remat

// Registers every loop kernel above as `Backend`'s implementation on its
// float type T (float for OneDnnKernels, double for ReferenceKernels): one
// line in each backend's source, so that an op whose kernels are loops is
// written once, here. A loop kernel of one backend only is registered in
// that backend instead.
#define REMAT_LOOP_KERNELS(Backend, T) \
  REMAT_KERNEL_IMPL(Backend, gather_rows, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GatherRows<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, scatter_add_rows, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::ScatterAddRows<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, masked_fill, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::MaskedFill<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, cross_entropy, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::CrossEntropy<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, cross_entropy_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::CrossEntropyBackward<T>(*in[0], *in[1], *in[2], out); }); \
  REMAT_KERNEL_IMPL(Backend, silu, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Silu<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, silu_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::SiluBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, rms_norm, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::RmsNorm<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, rms_norm_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::RmsNormBackward<T>(*in[0], *in[1], *in[2], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, rms_norm_gamma_grad, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::RmsNormGammaGrad<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, log_softmax, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::LogSoftmax<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, log_softmax_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::LogSoftmaxBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, gelu_erf, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GeluErf<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, gelu_erf_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GeluErfBackward<T>(*in[0], *in[1], out); })

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_H_
