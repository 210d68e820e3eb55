// The loop kernels that copy elements to new places (loop_kernels.h):
// reshape, permute and slice (and slice's backward).
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_LAYOUT_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_LAYOUT_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engines/api/loop_kernels_common.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

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

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_LAYOUT_H_
