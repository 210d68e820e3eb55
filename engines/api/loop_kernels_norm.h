// The normalizations' loop kernels (loop_kernels.h): rms_norm and batch_norm
// (training mode), forward and backward, and batch_norm's running
// statistics.
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_NORM_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_NORM_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engines/api/loop_kernels_common.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

// rms_norm's row statistic for the N rows at x (row stride c): rstd = 1 /
// sqrt(sum_j x_j^2 / C + eps), each row's squares summed in index order,
// eps rounded to T.
template <typename T, int N>
REMAT_SCALAR_CHAINS void RmsRstds(const T* x, int64_t c, double eps, T* rstd) {
  T ss[N] = {};
  for (int64_t j = 0; j < c; ++j) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) ss[k] += x[k * c + j] * x[k * c + j];
  }
  for (int k = 0; k < N; ++k) {
    rstd[k] = T(1) / std::sqrt(ss[k] / static_cast<T>(c) + static_cast<T>(eps));
  }
}

// y_j = (x_j rstd) gamma_j per row.
template <typename T>
void RmsNorm(const Tensor& x, const Tensor& gamma, double eps, Tensor& out) {
  const int64_t c = gamma.num_elements();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  const T* gm = static_cast<const T*>(gamma.raw());
  ForRowBlocks(rows, rows * c, [&]<int N>(int64_t r0) {
    const T* x0 = static_cast<const T*>(x.raw()) + r0 * c;
    T rstd[N];
    RmsRstds<T, N>(x0, c, eps, rstd);
    for (int k = 0; k < N; ++k) {
      const T* xr = x0 + k * c;
      T* yr = static_cast<T*>(out.raw()) + (r0 + k) * c;
      const T rs = rstd[k];
      REMAT_ELEMENTWISE_SIMD
      for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] * rs) * gm[j];
    }
  });
}

// sum_j g_j xhat_j of rms_norm's backward for the N rows at x and dy (row
// stride c), each row in index order.
template <typename T, int N>
REMAT_SCALAR_CHAINS void RmsBackwardSums(const T* x, const T* dy, const T* gamma, int64_t c,
                                         const T* rstd, T* sum) {
  T acc[N] = {}, rs[N];
  for (int k = 0; k < N; ++k) rs[k] = rstd[k];
  for (int64_t j = 0; j < c; ++j) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) acc[k] += (dy[k * c + j] * gamma[j]) * (x[k * c + j] * rs[k]);
  }
  for (int k = 0; k < N; ++k) sum[k] = acc[k];
}

// dx_j = rstd (g_j - xhat_j m), g = dy gamma, xhat = x rstd,
// m = (sum_j g_j xhat_j) / C, per row.
template <typename T>
void RmsNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy, double eps,
                     Tensor& out) {
  const int64_t c = gamma.num_elements();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  const T* gm = static_cast<const T*>(gamma.raw());
  ForRowBlocks(rows, rows * c, [&]<int N>(int64_t r0) {
    const T* x0 = static_cast<const T*>(x.raw()) + r0 * c;
    const T* dy0 = static_cast<const T*>(dy.raw()) + r0 * c;
    T rstd[N], sum[N];
    RmsRstds<T, N>(x0, c, eps, rstd);
    RmsBackwardSums<T, N>(x0, dy0, gm, c, rstd, sum);
    for (int k = 0; k < N; ++k) {
      const T* xr = x0 + k * c;
      const T* dyr = dy0 + k * c;
      T* o = static_cast<T*>(out.raw()) + (r0 + k) * c;
      const T rs = rstd[k];
      const T m = sum[k] / static_cast<T>(c);
      REMAT_ELEMENTWISE_SIMD
      for (int64_t j = 0; j < c; ++j) o[j] = rs * (dyr[j] * gm[j] - (xr[j] * rs) * m);
    }
  });
}

// dgamma_j = sum over rows, in order, of dy_j xhat_j.
template <typename T>
void RmsNormGammaGrad(const Tensor& x, const Tensor& dy, double eps, Tensor& out) {
  const int64_t c = out.num_elements();
  const int64_t rows = c == 0 ? 0 : x.num_elements() / c;
  T* o = static_cast<T*>(out.raw());
  const T* a = static_cast<const T*>(x.raw());
  const T* g = static_cast<const T*>(dy.raw());
  std::vector<T> rstd(static_cast<size_t>(rows));
  ForRowBlocks(rows, rows * c,
               [&]<int N>(int64_t r0) { RmsRstds<T, N>(a + r0 * c, c, eps, rstd.data() + r0); });
  // Each thread sums its own columns, every column's rows in order.
  constexpr int64_t kColumns = 16;
  ForEachIndex((c + kColumns - 1) / kColumns, rows * c, [&](int64_t block) {
    const int64_t j0 = block * kColumns, j1 = std::min(c, j0 + kColumns);
    for (int64_t j = j0; j < j1; ++j) o[j] = T(0);
    for (int64_t r = 0; r < rows; ++r) {
      const T row_rstd = rstd[static_cast<size_t>(r)];
      REMAT_ELEMENTWISE_SIMD  // each column its own sum
      for (int64_t j = j0; j < j1; ++j) o[j] += g[r * c + j] * (a[r * c + j] * row_rstd);
    }
  });
}

// Batch normalization's layout: x (N, C) or (N, C, H, W); channel c's M =
// N H W elements, visited n-major then spatially in index order.
struct ChannelLayout {
  int64_t n, c, hw;
  explicit ChannelLayout(const Shape& s)
      : n(s.dim(0)), c(s.dim(1)), hw(s.rank() == 4 ? s.dim(2) * s.dim(3) : 1) {}
  int64_t m() const { return n * hw; }
  int64_t At(int64_t b, int64_t ch, int64_t i) const { return (b * c + ch) * hw + i; }
};

// batch_norm's channel sums (its statistics, its backward's two sums,
// dgamma, dbeta, the running statistics) accumulate in double whatever T
// is, in visiting order (batch, then position), each term formed in T and
// widened, the sum rounded once to T. PyTorch's CPU batch norm accumulates
// float in double too. A float sum over a channel's M = N*H*W elements
// loses up to M 2^-24 of its terms' magnitude, and a ReLU network's conv
// weight gradients amplify what the backward's mean subtraction leaves
// (torchvision ResNet-50, batch 8, 64x64: 1.1e-2 from float64 with float
// sums where PyTorch is 2.4e-4; 2.1e-3 with double; issue 62).
using ChannelAcc = double;

// Channel ch's batch statistics: mean = T(sum in visiting order / M),
// rstd = T(1 / sqrt((sum of (x - mean)^2 in that order) / M + eps)), the
// squares formed in T.
template <typename T>
void BatchStats(const T* x, const ChannelLayout& l, int64_t ch, double eps, T* mean, T* rstd) {
  ChannelAcc s = 0;
  for (int64_t b = 0; b < l.n; ++b)
    for (int64_t i = 0; i < l.hw; ++i) s += x[l.At(b, ch, i)];
  *mean = static_cast<T>(s / static_cast<ChannelAcc>(l.m()));
  ChannelAcc v = 0;
  for (int64_t b = 0; b < l.n; ++b)
    for (int64_t i = 0; i < l.hw; ++i) {
      const T d = x[l.At(b, ch, i)] - *mean;
      v += static_cast<T>(d * d);
    }
  *rstd = static_cast<T>(1 / std::sqrt(v / static_cast<ChannelAcc>(l.m()) + eps));
}

// batch_norm (training mode): y = ((x - mean) rstd) gamma + beta per channel.
template <typename T>
void BatchNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, Tensor& out) {
  const ChannelLayout l(x.shape());
  const T* a = static_cast<const T*>(x.raw());
  const T* gm = static_cast<const T*>(gamma.raw());
  const T* bt = static_cast<const T*>(beta.raw());
  T* y = static_cast<T*>(out.raw());
  // Channels are independent: split between threads.
  ForEachIndex(l.c, l.c * l.m(), [&](int64_t ch) {
    T mean, rstd;
    BatchStats(a, l, ch, eps, &mean, &rstd);
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const int64_t at = l.At(b, ch, i);
        y[at] = ((a[at] - mean) * rstd) * gm[ch] + bt[ch];
      }
  });
}

// dx = rstd (g - sum_g / M - xhat (sum_gx / M)), g = dy gamma, xhat =
// (x - mean) rstd, the sums over the channel in visiting order in
// ChannelAcc, each rounded once to T.
template <typename T>
void BatchNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy, double eps,
                       Tensor& out) {
  const ChannelLayout l(x.shape());
  const T* a = static_cast<const T*>(x.raw());
  const T* gm = static_cast<const T*>(gamma.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const T m = static_cast<T>(l.m());
  ForEachIndex(l.c, l.c * l.m(), [&](int64_t ch) {
    T mean, rstd;
    BatchStats(a, l, ch, eps, &mean, &rstd);
    ChannelAcc acc_g = 0, acc_gx = 0;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const int64_t at = l.At(b, ch, i);
        const T gi = g[at] * gm[ch];
        acc_g += gi;
        acc_gx += static_cast<T>(gi * ((a[at] - mean) * rstd));
      }
    const T sum_g = static_cast<T>(acc_g), sum_gx = static_cast<T>(acc_gx);
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const int64_t at = l.At(b, ch, i);
        o[at] = rstd * ((g[at] * gm[ch] - sum_g / m) - ((a[at] - mean) * rstd) * (sum_gx / m));
      }
  });
}

// dgamma[ch] = sum of dy xhat over the channel, in visiting order in
// ChannelAcc, rounded once.
template <typename T>
void BatchNormGammaGrad(const Tensor& x, const Tensor& dy, double eps, Tensor& out) {
  const ChannelLayout l(x.shape());
  const T* a = static_cast<const T*>(x.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  ForEachIndex(l.c, l.c * l.m(), [&](int64_t ch) {
    T mean, rstd;
    BatchStats(a, l, ch, eps, &mean, &rstd);
    ChannelAcc s = 0;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const int64_t at = l.At(b, ch, i);
        s += static_cast<T>(g[at] * ((a[at] - mean) * rstd));
      }
    o[ch] = static_cast<T>(s);
  });
}

// dbeta[ch] = sum of dy over the channel, in visiting order in
// ChannelAcc, rounded once.
template <typename T>
void ChannelSum(const Tensor& dy, Tensor& out) {
  const ChannelLayout l(dy.shape());
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  ForEachIndex(l.c, l.c * l.m(), [&](int64_t ch) {
    ChannelAcc s = 0;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) s += g[l.At(b, ch, i)];
    o[ch] = static_cast<T>(s);
  });
}

// batch_norm's running statistics (PyTorch's update of running_mean and
// running_var in training mode): r' = T(1 - m) r + T(m) s per channel, m
// the momentum, s the batch's mean (as BatchStats: T(the sum in visiting
// order in ChannelAcc / M)) or its unbiased variance (T(the squares of x -
// mean, formed in T, summed in visiting order in ChannelAcc, / (M - 1))).
template <typename T>
T ChannelMean(const T* x, const ChannelLayout& l, int64_t ch) {
  ChannelAcc s = 0;
  for (int64_t b = 0; b < l.n; ++b)
    for (int64_t i = 0; i < l.hw; ++i) s += x[l.At(b, ch, i)];
  return static_cast<T>(s / static_cast<ChannelAcc>(l.m()));
}
template <typename T>
void BatchNormRunningMean(const Tensor& x, const Tensor& running, double momentum, Tensor& out) {
  const ChannelLayout l(x.shape());
  const T* a = static_cast<const T*>(x.raw());
  const T* r = static_cast<const T*>(running.raw());
  T* o = static_cast<T*>(out.raw());
  const T keep = static_cast<T>(1 - momentum), take = static_cast<T>(momentum);
  for (int64_t ch = 0; ch < l.c; ++ch) o[ch] = keep * r[ch] + take * ChannelMean(a, l, ch);
}
template <typename T>
void BatchNormRunningVar(const Tensor& x, const Tensor& running, double momentum, Tensor& out) {
  const ChannelLayout l(x.shape());
  const T* a = static_cast<const T*>(x.raw());
  const T* r = static_cast<const T*>(running.raw());
  T* o = static_cast<T*>(out.raw());
  const T keep = static_cast<T>(1 - momentum), take = static_cast<T>(momentum);
  for (int64_t ch = 0; ch < l.c; ++ch) {
    const T mean = ChannelMean(a, l, ch);
    ChannelAcc v = 0;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const T d = a[l.At(b, ch, i)] - mean;
        v += static_cast<T>(d * d);
      }
    o[ch] = keep * r[ch] + take * static_cast<T>(v / static_cast<ChannelAcc>(l.m() - 1));
  }
}

// The running mean's dx = dy[ch] (T(m) / T(M)) on every element of channel
// ch; out has x's shape.
template <typename T>
void BatchNormRunningMeanBackward(const Tensor& dy, double momentum, Tensor& out) {
  const ChannelLayout l(out.shape());
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const T f = static_cast<T>(momentum) / static_cast<T>(l.m());
  for (int64_t ch = 0; ch < l.c; ++ch) {
    const T v = g[ch] * f;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) o[l.At(b, ch, i)] = v;
  }
}

// The running variance's dx = (dy[ch] (T(2 m) / T(M - 1))) (x - mean).
template <typename T>
void BatchNormRunningVarBackward(const Tensor& x, const Tensor& dy, double momentum, Tensor& out) {
  const ChannelLayout l(x.shape());
  const T* a = static_cast<const T*>(x.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const T f = static_cast<T>(2 * momentum) / static_cast<T>(l.m() - 1);
  for (int64_t ch = 0; ch < l.c; ++ch) {
    const T mean = ChannelMean(a, l, ch);
    const T v = g[ch] * f;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const int64_t at = l.At(b, ch, i);
        o[at] = v * (a[at] - mean);
      }
  }
}

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_NORM_H_
