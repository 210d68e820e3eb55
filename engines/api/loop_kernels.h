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
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/lane_blocks.h"
#include "engines/api/lane_math.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

// Loops over at least ParallelMinElements() elements split their rows (or
// elements) between OpenMP's threads where the including file is built with
// OpenMP (the oneDNN backend; the reference backend runs them on one
// thread): kParallelMinElementsPerThread for each thread the team would
// have. Below it a loop runs on the calling thread: starting the team costs
// about a microsecond. Per thread, because a fixed threshold would start
// every thread of a wide machine for a few hundred elements each. On two
// threads it is 16384: eager's share of its matmul bound was the same
// within a point at 8192 to 32768 on gpt, moe, transformer_stack and
// unreached, and 6 to 10 points lower on gpt and unreached at 131072 and
// up, on moe at 524288 (bench --engines=eager --windows=1, alternating).
inline constexpr int64_t kParallelMinElementsPerThread = 8192;
inline int64_t ParallelMinElements() {
#ifdef _OPENMP
  return kParallelMinElementsPerThread * omp_get_max_threads();
#else
  return kParallelMinElementsPerThread;
#endif
}

// Runs body(i) for every i in [0, count), split between OpenMP's threads
// (statically, in index order) where the including file is built with
// OpenMP and `elements`, the loop's work in elements, is at least
// ParallelMinElements(). Contract for body: index i's arithmetic is its own
// (it writes only what belongs to i, and nothing it reads is written by
// another index), so the split changes no bit; what sums over indices sums
// after the loop, in index order. body must not throw: an exception leaving
// an OpenMP loop ends the process, so inputs are checked before.
template <typename F>
void ForEachIndex(int64_t count, int64_t elements, F&& body) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (elements >= ParallelMinElements())
#endif
  for (int64_t i = 0; i < count; ++i) body(i);
}

// A row's sum is a chain of dependent additions, one every few cycles (the
// add's latency), and a kernel that sums one row after another runs at the
// chain's speed: moe's rms_norm over 256 rows of 64 took 20 us a call on
// one thread. ForRowBlocks hands a body kRowBlock rows side by side, each
// still summed in its own index order (so the bits are those of one row
// alone), so that their chains overlap.
inline constexpr int kRowBlock = 8;

// On a function whose loops keep kRowBlock scalar sums: GCC otherwise packs
// a block's sums into vectors that it stores and reloads every column, a
// chain through memory as slow as the one it replaced.
#if defined(__GNUC__) && !defined(__clang__)
#define REMAT_SCALAR_CHAINS __attribute__((optimize("no-tree-vectorize")))
#else
#define REMAT_SCALAR_CHAINS
#endif

// On an elementwise loop (each index's arithmetic its own, no sum across
// indices, so vector lanes give each element the scalar's bits): vectorize
// it where the including file is built with OpenMP. -O2's cost model will
// not vectorize a loop whose count is not known to be a multiple of the
// vector's width. (Not for clang, which builds only the fuzzers, at -O1,
// where it cannot vectorize and would say so for every loop.)
#if defined(_OPENMP) && !defined(__clang__)
#define REMAT_ELEMENTWISE_SIMD _Pragma("omp simd")
#else
#define REMAT_ELEMENTWISE_SIMD
#endif

// Calls body.template operator()<N>(r0) on rows [r0, r0 + N) for every
// block of kRows rows of `rows` (N = kRows) and then each row left over
// (N = 1), the blocks split between OpenMP's threads as ForEachIndex splits
// indices (`elements`: the loop's work). The same contract for body.
template <int kRows = kRowBlock, typename Body>
void ForRowBlocks(int64_t rows, int64_t elements, Body&& body) {
  const int64_t blocks = rows / kRows;
  ForEachIndex(blocks, elements, [&](int64_t b) { body.template operator()<kRows>(b * kRows); });
  for (int64_t r = blocks * kRows; r < rows; ++r) body.template operator()<1>(r);
}

inline int64_t IndexAt(const char* kernel, const Tensor& ids, int64_t p, int64_t bound) {
  const int32_t id = ids.i32()[p];
  if (id < 0 || id >= bound) {
    throw Error(StrCat(kernel, ": index ", id, " at position ", p, " is outside [0, ", bound, ")"));
  }
  return id;
}

// Every position's index, checked before any thread starts (an Error thrown
// inside an OpenMP loop would end the process).
inline std::vector<int64_t> CheckedIndices(const char* kernel, const Tensor& ids, int64_t count,
                                           int64_t bound) {
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) out[static_cast<size_t>(p)] = IndexAt(kernel, ids, p, bound);
  return out;
}

template <typename T>
void GatherRows(const Tensor& table, const Tensor& ids, Tensor& out) {
  const T* t = static_cast<const T*>(table.raw());
  T* y = static_cast<T*>(out.raw());
  const int64_t v = table.shape().dim(0), d = table.shape().dim(1);
  const std::vector<int64_t> rows = CheckedIndices("embedding", ids, ids.num_elements(), v);
  ForEachIndex(static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.size()) * d,
               [&](int64_t p) {
                 const T* from = t + rows[static_cast<size_t>(p)] * d;
                 std::copy(from, from + d, y + p * d);
               });
}

template <typename T>
void ScatterAddRows(const Tensor& dy, const Tensor& ids, Tensor& out) {
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t v = out.shape().dim(0), d = out.shape().dim(1);
  const int64_t i_count = out.num_elements();
  for (int64_t i = 0; i < i_count; ++i) o[i] = 0;
  const int64_t p_count = ids.num_elements();
  for (int64_t p = 0; p < p_count; ++p) {  // increasing position
    const int64_t id = IndexAt("embedding's backward", ids, p, v);
    for (int64_t j = 0; j < d; ++j) o[id * d + j] += g[p * d + j];
  }
}

// Row r's max and sum of exp(x - max). In float64 (the
// reference table) the C library's exp, summed in j's order; in float32,
// lane_math.h's ExpLanes (within 0.99 ulp), summed in
// lane_blocks::ExpShiftedSum's fixed order of 16 partial sums, the same on
// every ISA (one chain of dependent additions and libm's expf took 270 us of
// gpt's cross-entropy over 256 rows of 512). Where `exps` is given, each
// exp(x - max) is also written to exps[j] (the terms of the sum, for a
// caller that needs them too: one exp per element instead of two).
//
// The max: in float32, lane_blocks::MaxNumber (16 partial maxima; one chain
// of dependent maxima along the row took most of gpt's cross-entropy, 256
// rows of 512); in float64, in j's order. The two differ only where the row
// has a NaN (the first element's NaN is the max in j's order, and is never
// chosen by MaxNumber), and then s is NaN either way; or in which of +0 and
// -0 is the max, which changes no x - max but -0's, and e^(+-0) is 1.
template <typename T>
void RowStats(const T* xr, int64_t cols, T* m, T* s, T* exps = nullptr) {
  if constexpr (std::is_same_v<T, float>) {
    const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
    *m = lane_blocks::MaxNumber(isa, xr, cols);
    *s = lane_blocks::ExpShiftedSum(isa, xr, *m, exps, cols);
  } else {
    // The max in a local: through *m, which xr may alias as far as the
    // compiler knows, every step also stored it.
    T row_max = xr[0];
    for (int64_t j = 1; j < cols; ++j) row_max = std::max(row_max, xr[j]);
    *m = row_max;
    *s = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const T e = std::exp(xr[j] - *m);
      if (exps != nullptr) exps[j] = e;
      *s += e;
    }
  }
}

template <typename T>
void CrossEntropy(const Tensor& logits, const Tensor& targets, Tensor& out) {
  const T* x = static_cast<const T*>(logits.raw());
  const int64_t rows = logits.shape().dim(0), cols = logits.shape().dim(1);
  const std::vector<int64_t> t = CheckedIndices("cross_entropy", targets, rows, cols);
  std::vector<T> loss(static_cast<size_t>(rows));
  ForEachIndex(rows, rows * cols, [&](int64_t r) {
    const T* xr = x + r * cols;
    T m, s;
    RowStats(xr, cols, &m, &s);
    loss[static_cast<size_t>(r)] = (m + std::log(s)) - xr[t[static_cast<size_t>(r)]];
  });
  T total = 0;
  for (int64_t r = 0; r < rows; ++r) total += loss[static_cast<size_t>(r)];
  static_cast<T*>(out.raw())[0] = total / static_cast<T>(rows);
}

template <typename T>
void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, const Tensor& dy,
                          Tensor& out) {
  const T* x = static_cast<const T*>(logits.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t rows = logits.shape().dim(0), cols = logits.shape().dim(1);
  const T g = static_cast<const T*>(dy.raw())[0] / static_cast<T>(rows);
  const std::vector<int64_t> t = CheckedIndices("cross_entropy's backward", targets, rows, cols);
  ForEachIndex(rows, rows * cols, [&](int64_t r) {
    const T* xr = x + r * cols;
    const int64_t target = t[static_cast<size_t>(r)];
    T* orow = o + r * cols;
    T m, s;
    RowStats(xr, cols, &m, &s, /*exps=*/orow);
    // (e / s - [j == target]) * g, the target's element apart: the others'
    // loop then has no index compare (baseline x86-64 has no 64-bit one in
    // vector lanes) and vectorizes, each element's arithmetic its own, so
    // the lanes give the scalar's bits (e / s - 0 is e / s, -0 included).
    // The scale is in a register: read through the closure, it was loaded
    // again at every element. Scalar, the divides took most of the kernel:
    // 119 us a call on gpt's 256 rows of 512.
    const T e_target = orow[target];
    const T scale = g;
    REMAT_ELEMENTWISE_SIMD
    for (int64_t j = 0; j < cols; ++j) orow[j] = (orow[j] / s) * scale;
    orow[target] = (e_target / s - T(1)) * scale;
  });
}


// Float32 elementwise passes go in blocks of this many elements, each on
// the vector lanes of lane_blocks.h, the blocks split between OpenMP's
// threads: 16 KiB of input, a few microseconds of work.
inline constexpr int64_t kLaneBlockElements = 4096;

// Runs block(offset, length) over [0, n) in kLaneBlockElements pieces, split
// between the threads as ForEachIndex splits indices.
template <typename F>
void ForEachLaneBlock(int64_t n, F&& block) {
  const int64_t blocks = (n + kLaneBlockElements - 1) / kLaneBlockElements;
  ForEachIndex(blocks, n, [&](int64_t b) {
    const int64_t offset = b * kLaneBlockElements;
    block(offset, std::min(kLaneBlockElements, n - offset));
  });
}

template <typename T>
void MaskedFill(const Tensor& x, const Tensor& mask, double fill, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  const int32_t* m = mask.i32();
  T* y = static_cast<T*>(out.raw());
  const T c = static_cast<T>(fill);
  // In ForEachLaneBlock's pieces, each a loop the compiler vectorizes: x is
  // read at every index and the fill selected (a select, not a branch), so
  // the lanes give the scalar's bits. One index at a time, the select took
  // 18 us a call on gpt's scores (4x4x64x64), 2.4% of eager's kernel time.
  ForEachLaneBlock(x.num_elements(), [&](int64_t offset, int64_t length) {
    const T* ab = a + offset;
    const int32_t* mb = m + offset;
    T* yb = y + offset;
    // In a register: read through the closure, the fill was loaded again at
    // every index (a store to y might have changed it) and nothing was
    // vectorized.
    const T fill_value = c;
    REMAT_ELEMENTWISE_SIMD
    for (int64_t i = 0; i < length; ++i) {
      const T v = ab[i];
      yb[i] = mb[i] != 0 ? fill_value : v;
    }
  });
}

// A float32 elementwise pass of lane_blocks.h's `block` (Silu, Sin, ...) over
// x into out, on the best lanes the run may use (BestLaneIsa, which follows
// ONEDNN_MAX_CPU_ISA), in ForEachLaneBlock's pieces: every path gives the
// scalar formula's bits, so an element's bits depend on neither the ISA nor
// the thread count.
template <typename Block>
void LaneBlockPass(const Tensor& x, Tensor& out, Block block) {
  const float* in = x.f32();
  float* o = out.f32();
  const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
  ForEachLaneBlock(out.num_elements(),
                   [&](int64_t i, int64_t len) { block(isa, in + i, o + i, len); });
}

// The same for a backward block of x and the cotangent dy.
template <typename Block>
void LaneBlockPass(const Tensor& x, const Tensor& dy, Tensor& out, Block block) {
  const float* in = x.f32();
  const float* g = dy.f32();
  float* o = out.f32();
  const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
  ForEachLaneBlock(out.num_elements(),
                   [&](int64_t i, int64_t len) { block(isa, in + i, g + i, o + i, len); });
}

// silu: y = x s, s = 1 / (1 + e^-x), T's exp (lane_math.h: in float32 our
// own, in float64 the C library's).
template <typename T>
void Silu(const Tensor& x, Tensor& out) {
  if constexpr (std::is_same_v<T, float>) {
    LaneBlockPass(x, out, lane_blocks::Silu);
  } else {
    const T* a = static_cast<const T*>(x.raw());
    T* y = static_cast<T*>(out.raw());
    const int64_t n = x.num_elements();
    ForEachIndex(n, n, [&](int64_t i) { y[i] = lane_math::Silu(a[i]); });
  }
}

// dx = dy (s (1 + x (1 - s))), s as in Silu.
template <typename T>
void SiluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if constexpr (std::is_same_v<T, float>) {
    LaneBlockPass(x, dy, out, lane_blocks::SiluBackward);
  } else {
    const T* a = static_cast<const T*>(x.raw());
    const T* g = static_cast<const T*>(dy.raw());
    T* y = static_cast<T*>(out.raw());
    const int64_t n = x.num_elements();
    ForEachIndex(n, n, [&](int64_t i) { y[i] = lane_math::SiluBackward(a[i], g[i]); });
  }
}

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

// log_softmax per row: y_j = (x_j - m) - log s, m and s as RowStats.
template <typename T>
void LogSoftmax(const Tensor& x, Tensor& out) {
  const int64_t cols = x.shape().dim(x.shape().rank() - 1);
  const int64_t rows = cols == 0 ? 0 : x.num_elements() / cols;
  ForEachIndex(rows, rows * cols, [&](int64_t r) {
    const T* xr = static_cast<const T*>(x.raw()) + r * cols;
    T* yr = static_cast<T*>(out.raw()) + r * cols;
    T m, s;
    RowStats(xr, cols, &m, &s);
    const T log_s = std::log(s);
    for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - m) - log_s;
  });
}

// From log_softmax's output y: dx_j = dy_j - e^{y_j} (sum_j dy_j), per row.
template <typename T>
void LogSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  const int64_t cols = y.shape().dim(y.shape().rank() - 1);
  const int64_t rows = cols == 0 ? 0 : y.num_elements() / cols;
  ForEachIndex(rows, rows * cols, [&](int64_t r) {
    const T* yr = static_cast<const T*>(y.raw()) + r * cols;
    const T* gr = static_cast<const T*>(dy.raw()) + r * cols;
    T* o = static_cast<T*>(out.raw()) + r * cols;
    T sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += gr[j];
    if constexpr (std::is_same_v<T, float>) {
      // e^y in lanes (RowStats' exp), a piece at a time into a buffer of
      // its own (out may be dy), then the combination.
      constexpr int64_t kPiece = 256;
      float e[kPiece];
      for (int64_t j0 = 0; j0 < cols; j0 += kPiece) {
        const int64_t len = std::min(kPiece, cols - j0);
        lane_blocks::Exp(lane_blocks::BestLaneIsa(), yr + j0, e, len);
        for (int64_t j = 0; j < len; ++j) o[j0 + j] = gr[j0 + j] - e[j] * sum;
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) o[j] = gr[j] - std::exp(yr[j]) * sum;
    }
  });
}

// gelu, erf form: y = (x / 2) (1 + erf(x / sqrt 2)).
template <typename T>
void GeluErf(const Tensor& x, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  const T rsqrt2 = static_cast<T>(0.70710678118654752440);
  const int64_t i_count = x.num_elements();
  ForEachIndex(i_count, i_count, [&](int64_t i) {
    y[i] = (a[i] * T(0.5)) * (T(1) + std::erf(a[i] * rsqrt2));
  });
}

// dx = dy ((1 + erf(x / sqrt 2)) / 2 + x e^{-x^2 / 2} / sqrt(2 pi)).
template <typename T>
void GeluErfBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* y = static_cast<T*>(out.raw());
  const T rsqrt2 = static_cast<T>(0.70710678118654752440);
  const T rsqrt2pi = static_cast<T>(0.39894228040143267794);
  const int64_t i_count = x.num_elements();
  ForEachIndex(i_count, i_count, [&](int64_t i) {
    const T cdf = T(0.5) * (T(1) + std::erf(a[i] * rsqrt2));
    const T pdf = std::exp(T(-0.5) * a[i] * a[i]) * rsqrt2pi;
    y[i] = g[i] * (cdf + a[i] * pdf);
  });
}

// reshape: the elements in order (the output has the attribute's shape).
template <typename T>
void Reshape(const Tensor& x, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  const int64_t i_count = x.num_elements();
  constexpr int64_t kChunk = int64_t{1} << 14;
  ForEachIndex((i_count + kChunk - 1) / kChunk, i_count, [&](int64_t chunk) {
    const int64_t b = chunk * kChunk, e = std::min(i_count, b + kChunk);
    std::copy(a + b, a + e, y + b);
  });
}

// permute: output axis i is input axis perm[i]. The output is walked in
// runs: the trailing output axes that are the input's trailing axes in
// order (perm[i] == i) are one contiguous run in both; where there are
// none, a run is the last output axis, read at its input stride. Runs are
// split between threads in chunks of kPermuteChunkRuns; a chunk finds its
// first run's input offset by division and steps to the next ones as an
// odometer. (A division and a remainder per axis for every run took moe's
// permutes, runs of 64 floats, 17 us a call alone in cache, 12% of its
// eager run: engine_loop --problem=moe, "alone, in cache".)
inline constexpr int64_t kPermuteChunkRuns = 256;
template <typename T>
void Permute(const Tensor& x, std::span<const int64_t> perm, Tensor& out) {
  const int r = x.shape().rank();
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  const int64_t o_count = out.num_elements();
  if (o_count == 0) return;
  if (r == 0) {
    y[0] = a[0];
    return;
  }
  std::vector<int64_t> in_stride(static_cast<size_t>(r), 1);
  for (int i = r - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * x.shape().dim(i + 1);
  // The input stride of each output axis.
  std::vector<int64_t> stride(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) stride[i] = in_stride[static_cast<size_t>(perm[i])];
  int first_run_axis = r;
  while (first_run_axis > 0 && perm[first_run_axis - 1] == first_run_axis - 1) --first_run_axis;
  int64_t run = 1, run_stride = 1;
  if (first_run_axis < r) {
    for (int i = first_run_axis; i < r; ++i) run *= out.shape().dim(i);
  } else {
    first_run_axis = r - 1;
    run = out.shape().dim(r - 1);
    run_stride = stride[r - 1];
  }
  // The output's extents, read once (Shape::dim checks its axis, out of line).
  std::vector<int64_t> extent(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) extent[static_cast<size_t>(i)] = out.shape().dim(i);
  const int64_t runs = o_count / run;
  const int64_t chunks = (runs + kPermuteChunkRuns - 1) / kPermuteChunkRuns;
  const int last = first_run_axis - 1;  // the odometer's fastest axis (-1: one run)
  ForEachIndex(chunks, o_count, [&](int64_t chunk) {
    const int64_t first = chunk * kPermuteChunkRuns;
    const int64_t end = std::min(runs, first + kPermuteChunkRuns);
    // The first run's index along each output axis before the run's, and
    // its input offset.
    std::vector<int64_t> index(static_cast<size_t>(std::max(0, first_run_axis)));
    int64_t from = 0, rest = first;
    for (int i = last; i >= 0; --i) {
      index[static_cast<size_t>(i)] = rest % extent[static_cast<size_t>(i)];
      from += index[static_cast<size_t>(i)] * stride[static_cast<size_t>(i)];
      rest /= extent[static_cast<size_t>(i)];
    }
    for (int64_t row = first; row < end; ++row) {
      const T* src = a + from;
      T* dst = y + row * run;
      if (run_stride == 1) {
        std::copy(src, src + run, dst);
      } else {
        for (int64_t j = 0; j < run; ++j) dst[j] = src[j * run_stride];
      }
      // The next run: the fastest axis steps, carrying into slower ones.
      for (int i = last; i >= 0; --i) {
        from += stride[static_cast<size_t>(i)];
        if (++index[static_cast<size_t>(i)] < extent[static_cast<size_t>(i)]) break;
        from -= extent[static_cast<size_t>(i)] * stride[static_cast<size_t>(i)];
        index[static_cast<size_t>(i)] = 0;
      }
    }
  });
}

// The contract's order for choices: a before b when a > b, or a is NaN and b
// is not; among equal values the lower index (the caller's scan order).
template <typename T>
bool ChosenBefore(T a, T b) {
  return a > b || (std::isnan(a) && !std::isnan(b));
}

// One row of top_k_softmax under the order `before(a, b)` (a is chosen
// before b): the k chosen one at a time, each the first j, in increasing j,
// that `before` puts ahead of every unchosen value met so far; m the first
// chosen, s = sum over chosen j, in increasing j, of e^{x_j - m};
// y_j = e^{x_j - m} / s where chosen, else 0. `chosen` has cols entries.
template <typename T, typename Before>
void TopKSoftmaxRow(const T* xr, int64_t cols, int64_t k, Before before, char* chosen, T* yr) {
  std::fill(chosen, chosen + cols, 0);
  int64_t first = -1;
  for (int64_t t = 0; t < k; ++t) {
    int64_t best = -1;
    for (int64_t j = 0; j < cols; ++j) {
      if (!chosen[j] && (best < 0 || before(xr[j], xr[best]))) best = j;
    }
    chosen[best] = 1;
    if (first < 0) first = best;
  }
  // Each chosen e^{x_j - m} once, held in yr until s is known (x_j read
  // before y_j is written, as before: yr may be xr).
  const T m = xr[first];
  T s = 0;
  for (int64_t j = 0; j < cols; ++j) {
    const T e = chosen[j] ? std::exp(xr[j] - m) : T(0);
    if (chosen[j]) s += e;
    yr[j] = e;
  }
  for (int64_t j = 0; j < cols; ++j) {
    if (chosen[j]) yr[j] /= s;
  }
}

// top_k_softmax per row, under the contract's order (ChosenBefore, so that
// of equal values the lowest index is chosen).
template <typename T>
void TopKSoftmax(const Tensor& x, int64_t k, Tensor& out) {
  const int64_t cols = x.shape().dim(x.shape().rank() - 1);
  const int64_t rows = cols == 0 ? 0 : x.num_elements() / cols;
  std::vector<char> chosen(static_cast<size_t>(rows * cols));
  ForEachIndex(rows, rows * cols, [&](int64_t r) {
    // The order as a lambda, not ChosenBefore<T>'s address: a function
    // pointer is called, not inlined, at every comparison (moe's routers,
    // rows of 8: 14 us a call of 256 rows alone in cache).
    TopKSoftmaxRow(static_cast<const T*>(x.raw()) + r * cols, cols, k,
                   [](T a, T b) { return ChosenBefore(a, b); },
                   chosen.data() + r * cols, static_cast<T*>(out.raw()) + r * cols);
  });
}

// From top_k_softmax's output y: sum = sum_j y_j dy_j in increasing j (every
// j), dx_j = y_j (dy_j - sum).
template <typename T>
void TopKSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  const int64_t cols = y.shape().dim(y.shape().rank() - 1);
  const int64_t rows = cols == 0 ? 0 : y.num_elements() / cols;
  ForEachIndex(rows, rows * cols, [&](int64_t r) {
    const T* yr = static_cast<const T*>(y.raw()) + r * cols;
    const T* gr = static_cast<const T*>(dy.raw()) + r * cols;
    T* o = static_cast<T*>(out.raw()) + r * cols;
    T sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += yr[j] * gr[j];
    for (int64_t j = 0; j < cols; ++j) o[j] = yr[j] * (gr[j] - sum);
  });
}

// max_pool2d's choice in window (i, j) of one (H, W) plane: the window's
// taps in row-major order (increasing index), the first valid one chosen,
// then replaced only by a value ChosenBefore it (greater, or NaN over a
// number): among equal values the lowest index (CONTRACT.md's tie rule).
// Padding taps are skipped (never chosen); -1 for a window with none valid.
template <typename T>
int64_t PoolChoice(const T* plane, int64_t h, int64_t w, int64_t i, int64_t j, int64_t k,
                   int64_t stride, int64_t pad) {
  int64_t best = -1;
  for (int64_t p = 0; p < k; ++p) {
    const int64_t r = i * stride + p - pad;
    if (r < 0 || r >= h) continue;
    for (int64_t q = 0; q < k; ++q) {
      const int64_t s = j * stride + q - pad;
      if (s < 0 || s >= w) continue;
      const int64_t at = r * w + s;
      if (best < 0 || ChosenBefore(plane[at], plane[best])) best = at;
    }
  }
  return best;
}

// max_pool2d: y = x at each window's choice (attrs: int_a = k, int_b =
// stride, int_c = padding); a window with no valid tap (not from a valid
// op) gives -inf.
template <typename T>
void MaxPool2d(const Tensor& x, int64_t k, int64_t stride, int64_t pad, Tensor& out) {
  const Shape& xs = x.shape();
  const int64_t planes = xs.dim(0) * xs.dim(1), h = xs.dim(2), w = xs.dim(3);
  const int64_t oh = out.shape().dim(2), ow = out.shape().dim(3);
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  ForEachIndex(planes, planes * oh * ow * k * k, [&](int64_t pl) {
    const T* plane = a + pl * h * w;
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t at = PoolChoice(plane, h, w, i, j, k, stride, pad);
        y[(pl * oh + i) * ow + j] = at < 0 ? -std::numeric_limits<T>::infinity() : plane[at];
      }
    }
  });
}

// max_pool2d's backward from x: dx = 0, then for each output in increasing
// position dx[its choice] += dy (overlapping windows add in that order).
template <typename T>
void MaxPool2dBackward(const Tensor& x, const Tensor& dy, int64_t k, int64_t stride, int64_t pad,
                       Tensor& out) {
  const Shape& xs = x.shape();
  const int64_t planes = xs.dim(0) * xs.dim(1), h = xs.dim(2), w = xs.dim(3);
  const int64_t oh = dy.shape().dim(2), ow = dy.shape().dim(3);
  const T* a = static_cast<const T*>(x.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  // A plane's adds land in its own plane: planes split between threads.
  ForEachIndex(planes, planes * oh * ow * k * k, [&](int64_t pl) {
    T* op = o + pl * h * w;
    for (int64_t i = 0; i < h * w; ++i) op[i] = T(0);
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t at = PoolChoice(a + pl * h * w, h, w, i, j, k, stride, pad);
        if (at >= 0) op[at] += g[(pl * oh + i) * ow + j];
      }
    }
  });
}

// global_avg_pool: y[n, c] = (sum of the (H, W) plane in index order) / (H W).
template <typename T>
void GlobalAvgPool(const Tensor& x, Tensor& out) {
  const Shape& xs = x.shape();
  const int64_t planes = xs.dim(0) * xs.dim(1), hw = xs.dim(2) * xs.dim(3);
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  ForEachIndex(planes, planes * hw, [&](int64_t pl) {
    T s = 0;
    for (int64_t i = 0; i < hw; ++i) s += a[pl * hw + i];
    y[pl] = s / static_cast<T>(hw);
  });
}

// dx[n, c, :, :] = dy[n, c] / (H W); out has x's shape.
template <typename T>
void GlobalAvgPoolBackward(const Tensor& dy, Tensor& out) {
  const Shape& xs = out.shape();
  const int64_t planes = xs.dim(0) * xs.dim(1), hw = xs.dim(2) * xs.dim(3);
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  ForEachIndex(planes, planes * hw, [&](int64_t pl) {
    const T v = g[pl] / static_cast<T>(hw);
    for (int64_t i = 0; i < hw; ++i) o[pl * hw + i] = v;
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

// Channel ch's batch statistics: mean = (sum in visiting order) / M,
// rstd = 1 / sqrt((sum of (x - mean)^2 in that order) / M + eps).
template <typename T>
void BatchStats(const T* x, const ChannelLayout& l, int64_t ch, double eps, T* mean, T* rstd) {
  const T m = static_cast<T>(l.m());
  T s = 0;
  for (int64_t b = 0; b < l.n; ++b)
    for (int64_t i = 0; i < l.hw; ++i) s += x[l.At(b, ch, i)];
  *mean = s / m;
  T v = 0;
  for (int64_t b = 0; b < l.n; ++b)
    for (int64_t i = 0; i < l.hw; ++i) {
      const T d = x[l.At(b, ch, i)] - *mean;
      v += d * d;
    }
  *rstd = T(1) / std::sqrt(v / m + static_cast<T>(eps));
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
// (x - mean) rstd, sums over the channel in visiting order.
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
    T sum_g = 0, sum_gx = 0;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const int64_t at = l.At(b, ch, i);
        const T gi = g[at] * gm[ch];
        sum_g += gi;
        sum_gx += gi * ((a[at] - mean) * rstd);
      }
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const int64_t at = l.At(b, ch, i);
        o[at] = rstd * ((g[at] * gm[ch] - sum_g / m) - ((a[at] - mean) * rstd) * (sum_gx / m));
      }
  });
}

// dgamma[ch] = sum of dy xhat over the channel, in visiting order.
template <typename T>
void BatchNormGammaGrad(const Tensor& x, const Tensor& dy, double eps, Tensor& out) {
  const ChannelLayout l(x.shape());
  const T* a = static_cast<const T*>(x.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  ForEachIndex(l.c, l.c * l.m(), [&](int64_t ch) {
    T mean, rstd;
    BatchStats(a, l, ch, eps, &mean, &rstd);
    T s = 0;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const int64_t at = l.At(b, ch, i);
        s += g[at] * ((a[at] - mean) * rstd);
      }
    o[ch] = s;
  });
}

// dbeta[ch] = sum of dy over the channel, in visiting order.
template <typename T>
void ChannelSum(const Tensor& dy, Tensor& out) {
  const ChannelLayout l(dy.shape());
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  ForEachIndex(l.c, l.c * l.m(), [&](int64_t ch) {
    T s = 0;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) s += g[l.At(b, ch, i)];
    o[ch] = s;
  });
}

// batch_norm's running statistics (PyTorch's update of running_mean and
// running_var in training mode): r' = T(1 - m) r + T(m) s per channel, m
// the momentum, s the batch's mean (as BatchStats: the sum in visiting order
// / M) or its unbiased variance (the squares of x - mean summed in visiting
// order, / (M - 1)).
template <typename T>
T ChannelMean(const T* x, const ChannelLayout& l, int64_t ch) {
  T s = 0;
  for (int64_t b = 0; b < l.n; ++b)
    for (int64_t i = 0; i < l.hw; ++i) s += x[l.At(b, ch, i)];
  return s / static_cast<T>(l.m());
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
    T v = 0;
    for (int64_t b = 0; b < l.n; ++b)
      for (int64_t i = 0; i < l.hw; ++i) {
        const T d = a[l.At(b, ch, i)] - mean;
        v += d * d;
      }
    o[ch] = keep * r[ch] + take * (v / static_cast<T>(l.m() - 1));
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

// slice: out = x[..., start:start + length, ...] on `axis` (out's shape
// says the length); walked in out's order.
template <typename T>
void Slice(const Tensor& x, int64_t axis, int64_t start, Tensor& out) {
  const Shape& xs = x.shape();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= xs.dim(i);
  for (int i = static_cast<int>(axis) + 1; i < xs.rank(); ++i) inner *= xs.dim(i);
  const int64_t n = xs.dim(static_cast<int>(axis)), len = out.shape().dim(static_cast<int>(axis));
  const T* a = static_cast<const T*>(x.raw());
  T* o = static_cast<T*>(out.raw());
  for (int64_t p = 0; p < outer; ++p)
    for (int64_t j = 0; j < len; ++j)
      for (int64_t q = 0; q < inner; ++q) o[(p * len + j) * inner + q] = a[(p * n + start + j) * inner + q];
}

// slice's backward: dx = 0 but for the slice, which is dy (out has x's shape).
template <typename T>
void SliceBackward(const Tensor& dy, int64_t axis, int64_t start, Tensor& out) {
  const Shape& xs = out.shape();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= xs.dim(i);
  for (int i = static_cast<int>(axis) + 1; i < xs.rank(); ++i) inner *= xs.dim(i);
  const int64_t n = xs.dim(static_cast<int>(axis)), len = dy.shape().dim(static_cast<int>(axis));
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t i_count = out.num_elements();
  for (int64_t i = 0; i < i_count; ++i) o[i] = T(0);
  for (int64_t p = 0; p < outer; ++p)
    for (int64_t j = 0; j < len; ++j)
      for (int64_t q = 0; q < inner; ++q) o[(p * n + start + j) * inner + q] = g[(p * len + j) * inner + q];
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
  REMAT_KERNEL_IMPL(Backend, gelu_erf_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GeluErfBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, reshape, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Reshape<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, permute, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Permute<T>(*in[0], a.perm, out); }); \
  REMAT_KERNEL_IMPL(Backend, top_k_softmax, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::TopKSoftmax<T>(*in[0], a.int_a, out); }); \
  REMAT_KERNEL_IMPL(Backend, top_k_softmax_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::TopKSoftmaxBackward<T>(*in[0], *in[1], out); }); \
  REMAT_KERNEL_IMPL(Backend, max_pool2d, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::MaxPool2d<T>(*in[0], a.int_a, a.int_b, a.int_c, out); }); \
  REMAT_KERNEL_IMPL(Backend, max_pool2d_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::MaxPool2dBackward<T>(*in[0], *in[1], a.int_a, a.int_b, a.int_c, out); }); \
  REMAT_KERNEL_IMPL(Backend, global_avg_pool, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GlobalAvgPool<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, global_avg_pool_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::GlobalAvgPoolBackward<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNorm<T>(*in[0], *in[1], *in[2], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormBackward<T>(*in[0], *in[1], *in[2], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_gamma_grad, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormGammaGrad<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, channel_sum, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::ChannelSum<T>(*in[0], out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_running_mean, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormRunningMean<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_running_var, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormRunningVar<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_running_mean_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormRunningMeanBackward<T>(*in[0], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, batch_norm_running_var_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::BatchNormRunningVarBackward<T>(*in[0], *in[1], a.scalar, out); }); \
  REMAT_KERNEL_IMPL(Backend, slice, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::Slice<T>(*in[0], a.int_a, a.int_b, out); }); \
  REMAT_KERNEL_IMPL(Backend, slice_backward, [](Backend&, std::span<const ::remat::Tensor* const> in, [[maybe_unused]] const ::remat::KernelAttrs& a, ::remat::Tensor& out) { ::remat::loop_kernels::SliceBackward<T>(*in[0], a.int_a, a.int_b, out); })

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_H_
