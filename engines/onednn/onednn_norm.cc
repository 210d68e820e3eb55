// Layer normalization's kernels (forward, dx, dgamma) as plain f32 loops,
// not oneDNN's primitive (engines/onednn/onednn_kernels.h says why): each
// row's statistics recomputed from x in index order, rows in SSE lanes.
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "engines/api/kernels.h"
#include "engines/api/loop_kernels.h"
#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/onednn_kernels_internal.h"

namespace remat {

using onednn_kernels_internal::LastDim;
using onednn_kernels_internal::NumRows;
using onednn_kernels_internal::SumOverRows;
#if defined(__SSE2__)
using onednn_kernels_internal::LoadTransposed4x4;
#endif

namespace {


// Layer normalization's per-row statistics, in f32, each row summed in index
// order: the forward and both backward kernels call this one function, so the
// mean and rstd they use are the same bits. The kernels take rows in
// blocks of kLaneRows (loop_kernels::ForRowBlocks), whose sums' chains
// overlap.
struct RowStats {
  float mean;
  float rstd;
};

// Layer norm's kernels take blocks of this many rows: with the rows in SSE
// lanes (RowLanes below), four groups of four, so that four chains of
// vector additions overlap.
constexpr int kLaneRows = 16;

#if defined(__SSE2__)
// Calls f(j, g, cols) for every column j of the 4G rows at each of the S
// matrices `srcs` (row stride c), group g of four rows at a time, every
// group's columns in increasing j: cols[s] holds rows 4g to 4g + 3 of
// matrix s at column j, one row a lane. A row's sums taken in f are those
// of one plain loop over the row (the same operations in the same order,
// four rows side by side). Four columns at a time are loaded as rows and
// transposed in registers. The loops over groups, matrices and columns are
// unrolled so that each group's sums stay in registers: rolled, GCC kept
// them in an array on the stack, stored and reloaded at every column (perf
// annotate of Stats<16>), and transformer_stack's layer norm kernels took
// 1.1 to 1.8 times as long (engine_loop's "alone, in cache" column).
template <int G, int S, typename F>
inline void RowLanes(const float* const (&srcs)[S], int64_t c, F&& f) {
  int64_t j = 0;
  for (; j + 4 <= c; j += 4) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      __m128 block[S][4];
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) LoadTransposed4x4(srcs[s] + 4 * g * c + j, c, block[s]);
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        __m128 col[S];
#pragma GCC unroll 4
        for (int s = 0; s < S; ++s) col[s] = block[s][t];
        f(j + t, g, col);
      }
    }
  }
  for (; j < c; ++j) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      __m128 col[S];
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const float* p = srcs[s] + 4 * g * c + j;
        col[s] = _mm_setr_ps(p[0], p[c], p[2 * c], p[3 * c]);
      }
      f(j, g, col);
    }
  }
}
#endif

// The statistics of the N rows at `x` (row stride `c`) into `out`: each
// row's sum, then the sum of its squared deviations, in index order; eps
// is layer_norm's, rounded to float.
template <int N>
REMAT_SCALAR_CHAINS void Stats(const float* x, int64_t c, float eps, RowStats* out) {
#if defined(__SSE2__)
  if constexpr (N % 4 == 0) {
    constexpr int G = N / 4;
    const float* const srcs[1] = {x};
    const __m128 cs = _mm_set1_ps(static_cast<float>(c));
    __m128 sum[G], mean[G], squares[G];
    for (int g = 0; g < G; ++g) sum[g] = squares[g] = _mm_setzero_ps();
    RowLanes<G>(srcs, c, [&](int64_t, int g, const __m128* col) {
      sum[g] = _mm_add_ps(sum[g], col[0]);
    });
    for (int g = 0; g < G; ++g) mean[g] = _mm_div_ps(sum[g], cs);
    RowLanes<G>(srcs, c, [&](int64_t, int g, const __m128* col) {
      const __m128 d = _mm_sub_ps(col[0], mean[g]);
      squares[g] = _mm_add_ps(squares[g], _mm_mul_ps(d, d));
    });
    for (int g = 0; g < G; ++g) {
      const __m128 rstd = _mm_div_ps(
          _mm_set1_ps(1.0f), _mm_sqrt_ps(_mm_add_ps(_mm_div_ps(squares[g], cs), _mm_set1_ps(eps))));
      alignas(16) float m[4], r[4];
      _mm_store_ps(m, mean[g]);
      _mm_store_ps(r, rstd);
      for (int k = 0; k < 4; ++k) out[4 * g + k] = {m[k], r[k]};
    }
    return;
  }
#endif
  float sum[N] = {};
  for (int64_t j = 0; j < c; ++j) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) sum[k] += x[k * c + j];
  }
  float mean[N], squares[N] = {};
  for (int k = 0; k < N; ++k) mean[k] = sum[k] / static_cast<float>(c);
  for (int64_t j = 0; j < c; ++j) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) {
      const float d = x[k * c + j] - mean[k];
      squares[k] += d * d;
    }
  }
  for (int k = 0; k < N; ++k) {
    const float var = squares[k] / static_cast<float>(c);
    out[k] = {mean[k], 1.0f / std::sqrt(var + eps)};
  }
}

// Layer norm's backward sums for the N rows at x and dy (row stride c), each
// row's two in its index order: sum_j g_j and sum_j g_j xhat_j, g = dy gamma.
template <int N>
REMAT_SCALAR_CHAINS void LayerNormBackwardSums(const float* x, const float* dy,
                                               const float* gamma, int64_t c, const RowStats* s,
                                               float* sum_g, float* sum_gx) {
#if defined(__SSE2__)
  if constexpr (N % 4 == 0) {
    constexpr int G = N / 4;
    const float* const srcs[2] = {x, dy};
    __m128 mean[G], rstd[G], acc_g[G], acc_gx[G];
    for (int g = 0; g < G; ++g) {
      mean[g] = _mm_setr_ps(s[4 * g].mean, s[4 * g + 1].mean, s[4 * g + 2].mean,
                            s[4 * g + 3].mean);
      rstd[g] = _mm_setr_ps(s[4 * g].rstd, s[4 * g + 1].rstd, s[4 * g + 2].rstd,
                            s[4 * g + 3].rstd);
      acc_g[g] = acc_gx[g] = _mm_setzero_ps();
    }
    RowLanes<G>(srcs, c, [&](int64_t j, int g, const __m128* col) {
      const __m128 gj = _mm_mul_ps(col[1], _mm_set1_ps(gamma[j]));
      const __m128 xhat = _mm_mul_ps(_mm_sub_ps(col[0], mean[g]), rstd[g]);
      acc_g[g] = _mm_add_ps(acc_g[g], gj);
      acc_gx[g] = _mm_add_ps(acc_gx[g], _mm_mul_ps(gj, xhat));
    });
    for (int g = 0; g < G; ++g) {
      _mm_storeu_ps(sum_g + 4 * g, acc_g[g]);
      _mm_storeu_ps(sum_gx + 4 * g, acc_gx[g]);
    }
    return;
  }
#endif
  float mean[N], rstd[N], acc_g[N] = {}, acc_gx[N] = {};
  for (int k = 0; k < N; ++k) {
    mean[k] = s[k].mean;
    rstd[k] = s[k].rstd;
  }
  for (int64_t j = 0; j < c; ++j) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) {
      const float gj = dy[k * c + j] * gamma[j];
      const float xhat = (x[k * c + j] - mean[k]) * rstd[k];
      acc_g[k] += gj;
      acc_gx[k] += gj * xhat;
    }
  }
  for (int k = 0; k < N; ++k) {
    sum_g[k] = acc_g[k];
    sum_gx[k] = acc_gx[k];
  }
}

// Every row's statistics, in row order.
std::vector<RowStats> AllStats(const float* x, int64_t c, int64_t rows, float eps) {
  std::vector<RowStats> stats(static_cast<size_t>(rows));
  loop_kernels::ForRowBlocks<kLaneRows>(rows, rows * c, [&]<int N>(int64_t r0) {
    Stats<N>(x + r0 * c, c, eps, stats.data() + r0);
  });
  return stats;
}

}  // namespace

void OneDnnKernels::DoLayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                double eps_or_0, Tensor& out) {
  if (dry_run()) return;
  const float eps = static_cast<float>(Kernels::LayerNormEps(eps_or_0));
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* g = gamma.f32();
  const float* b = beta.f32();
  // Rows are independent: blocks of them are split among the OpenMP threads.
  loop_kernels::ForRowBlocks<kLaneRows>(rows, rows * c, [&]<int N>(int64_t r0) {
    RowStats s[N];
    Stats<N>(x.f32() + r0 * c, c, eps, s);
    for (int k = 0; k < N; ++k) {
      const float* xr = x.f32() + (r0 + k) * c;
      float* o = out.f32() + (r0 + k) * c;
      const float mean = s[k].mean, rstd = s[k].rstd;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) o[j] = (xr[j] - mean) * rstd * g[j] + b[j];
    }
  });
}

void OneDnnKernels::DoLayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                        double eps_or_0, Tensor& out) {
  if (dry_run()) return;
  const float eps = static_cast<float>(Kernels::LayerNormEps(eps_or_0));
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* g = gamma.f32();
  loop_kernels::ForRowBlocks<kLaneRows>(rows, rows * c, [&]<int N>(int64_t r0) {
    const float* x0 = x.f32() + r0 * c;
    const float* dy0 = dy.f32() + r0 * c;
    RowStats s[N];
    Stats<N>(x0, c, eps, s);
    float sum_g[N], sum_gx[N];
    LayerNormBackwardSums<N>(x0, dy0, g, c, s, sum_g, sum_gx);
    for (int k = 0; k < N; ++k) {
      const float* xr = x0 + k * c;
      const float* dyr = dy0 + k * c;
      float* o = out.f32() + (r0 + k) * c;
      const float mean = s[k].mean, rstd = s[k].rstd;
      const float mean_g = sum_g[k] / static_cast<float>(c);
      const float mean_gx = sum_gx[k] / static_cast<float>(c);
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) {
        const float gj = dyr[j] * g[j];
        const float xhat = (xr[j] - mean) * rstd;
        o[j] = rstd * (gj - mean_g - xhat * mean_gx);
      }
    }
  });
}

void OneDnnKernels::DoLayerNormGammaGrad(const Tensor& x, const Tensor& dy, double eps_or_0,
                                         Tensor& out) {
  if (dry_run()) return;
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* x0 = x.f32();
  const float* dy0 = dy.f32();
  const std::vector<RowStats> stats =
      AllStats(x0, c, rows, static_cast<float>(Kernels::LayerNormEps(eps_or_0)));
  SumOverRows(rows, c, out.f32(), [&](int64_t r, int64_t j) {
    return dy0[r * c + j] * ((x0[r * c + j] - stats[r].mean) * stats[r].rstd);
  });
}

}  // namespace remat
