// The loop kernels over rows of the last axis that exponentiate and sum
// (loop_kernels.h): cross_entropy, log_softmax and top_k_softmax, forward and
// backward, and the row statistics they share (RowStats).
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_SOFTMAX_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_SOFTMAX_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engines/api/lane_blocks.h"
#include "engines/api/loop_kernels_common.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

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

// `ignore` (null: none) is cross_entropy's ignore_index: rows whose target
// equals it add nothing and the mean is over the K rows kept (K = 0: 0/0,
// nan); without it K is every row and the bits are those of before.
template <typename T>
void CrossEntropy(const Tensor& logits, const Tensor& targets, const int64_t* ignore, Tensor& out) {
  const T* x = static_cast<const T*>(logits.raw());
  const int64_t rows = logits.shape().dim(0), cols = logits.shape().dim(1);
  const std::vector<int64_t> t = CheckedIndices("cross_entropy", targets, rows, cols, ignore);
  std::vector<T> loss(static_cast<size_t>(rows));
  ForEachIndex(rows, rows * cols, [&](int64_t r) {
    if (t[static_cast<size_t>(r)] < 0) return;
    const T* xr = x + r * cols;
    T m, s;
    RowStats(xr, cols, &m, &s);
    loss[static_cast<size_t>(r)] = (m + std::log(s)) - xr[t[static_cast<size_t>(r)]];
  });
  T total = 0;
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (t[static_cast<size_t>(r)] < 0) continue;
    total += loss[static_cast<size_t>(r)];
    ++kept;
  }
  static_cast<T*>(out.raw())[0] = total / static_cast<T>(kept);
}

template <typename T>
void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, const Tensor& dy,
                          const int64_t* ignore, Tensor& out) {
  const T* x = static_cast<const T*>(logits.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t rows = logits.shape().dim(0), cols = logits.shape().dim(1);
  const std::vector<int64_t> t =
      CheckedIndices("cross_entropy's backward", targets, rows, cols, ignore);
  const int64_t kept = std::count_if(t.begin(), t.end(), [](int64_t i) { return i >= 0; });
  const T g = static_cast<const T*>(dy.raw())[0] / static_cast<T>(kept);
  ForEachIndex(rows, rows * cols, [&](int64_t r) {
    const T* xr = x + r * cols;
    const int64_t target = t[static_cast<size_t>(r)];
    T* orow = o + r * cols;
    if (target < 0) {  // an ignored row: no gradient
      std::fill(orow, orow + cols, T(0));
      return;
    }
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

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_SOFTMAX_H_
