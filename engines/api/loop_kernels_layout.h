// The loop kernels that copy elements to new places (loop_kernels.h):
// reshape, permute, slice and select (and their backward), cat, expand
// (and its backward, which sums).
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_LAYOUT_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_LAYOUT_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engines/api/kernels.h"
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

// The extents of x around `axis`: the product of the axes before it
// (outer), its own (n) and the product of those after (inner).
struct AxisExtents {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisExtents ExtentsAround(const Shape& s, int64_t axis) {
  AxisExtents e;
  for (int i = 0; i < axis; ++i) e.outer *= s.dim(i);
  e.n = s.dim(static_cast<int>(axis));
  for (int i = static_cast<int>(axis) + 1; i < s.rank(); ++i) e.inner *= s.dim(i);
  return e;
}

// The step of a slice kernel's call: attrs.int_c, where 0 (a call that
// does not set it) is 1.
inline int64_t SliceStep(const KernelAttrs& a) { return a.int_c == 0 ? 1 : a.int_c; }

// slice and select: out[p, j, q] = x[p, start + j step, q] on `axis` (p
// over the axes before it, q after), j < len, len = out's elements / (outer
// inner): the slice's length on the axis, or 1 where select drops it.
// Walked in out's order.
template <typename T>
void Slice(const Tensor& x, int64_t axis, int64_t start, int64_t step, Tensor& out) {
  const AxisExtents e = ExtentsAround(x.shape(), axis);
  if (e.outer * e.inner == 0) return;
  const int64_t len = out.num_elements() / (e.outer * e.inner);
  const T* a = static_cast<const T*>(x.raw());
  T* o = static_cast<T*>(out.raw());
  for (int64_t p = 0; p < e.outer; ++p)
    for (int64_t j = 0; j < len; ++j)
      for (int64_t q = 0; q < e.inner; ++q) {
        o[(p * len + j) * e.inner + q] = a[(p * e.n + start + j * step) * e.inner + q];
      }
}

// slice's and select's backward: dx = 0 but where the slice took x's
// elements, which get dy's (out has x's shape).
template <typename T>
void SliceBackward(const Tensor& dy, int64_t axis, int64_t start, int64_t step, Tensor& out) {
  const AxisExtents e = ExtentsAround(out.shape(), axis);
  T* o = static_cast<T*>(out.raw());
  const int64_t i_count = out.num_elements();
  for (int64_t i = 0; i < i_count; ++i) o[i] = T(0);
  if (e.outer * e.inner == 0) return;
  const int64_t len = dy.num_elements() / (e.outer * e.inner);
  const T* g = static_cast<const T*>(dy.raw());
  for (int64_t p = 0; p < e.outer; ++p)
    for (int64_t j = 0; j < len; ++j)
      for (int64_t q = 0; q < e.inner; ++q) {
        o[(p * e.n + start + j * step) * e.inner + q] = g[(p * len + j) * e.inner + q];
      }
}

// cat: out = a then b along `axis` (their other axes equal).
template <typename T>
void Cat(const Tensor& a, const Tensor& b, int64_t axis, Tensor& out) {
  const AxisExtents ea = ExtentsAround(a.shape(), axis), eb = ExtentsAround(b.shape(), axis);
  const int64_t na = ea.n * ea.inner, nb = eb.n * eb.inner;
  const T* pa = static_cast<const T*>(a.raw());
  const T* pb = static_cast<const T*>(b.raw());
  T* o = static_cast<T*>(out.raw());
  for (int64_t p = 0; p < ea.outer; ++p) {
    std::copy(pa + p * na, pa + (p + 1) * na, o + p * (na + nb));
    std::copy(pb + p * nb, pb + (p + 1) * nb, o + p * (na + nb) + na);
  }
}

// Calls f(i, k) for every element i of `out` in increasing order, k the
// element of x (numpy-broadcast to out: x's axes aligned to out's last
// ones, each of x's extent 1 or out's) that it reads.
template <typename F>
void ForEachBroadcastElement(const Shape& x, const Shape& out, F&& f) {
  const int r = out.rank(), lead = out.rank() - x.rank();
  std::vector<int64_t> stride(static_cast<size_t>(r), 0), extent(static_cast<size_t>(r));
  int64_t s = 1;
  for (int i = r - 1; i >= 0; --i) {
    extent[static_cast<size_t>(i)] = out.dim(i);
    if (i >= lead) {
      const int64_t d = x.dim(i - lead);
      if (d != 1) stride[static_cast<size_t>(i)] = s;
      s *= d;
    }
  }
  const int64_t count = out.num_elements();
  std::vector<int64_t> index(static_cast<size_t>(r), 0);
  int64_t k = 0;
  for (int64_t i = 0; i < count; ++i) {
    f(i, k);
    for (int a = r - 1; a >= 0; --a) {  // the next element: an odometer
      const size_t u = static_cast<size_t>(a);
      k += stride[u];
      if (++index[u] < extent[u]) break;
      k -= extent[u] * stride[u];
      index[u] = 0;
    }
  }
}

// expand: out[i] = x[k(i)], x broadcast to out's shape.
template <typename T>
void Expand(const Tensor& x, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  T* o = static_cast<T*>(out.raw());
  ForEachBroadcastElement(x.shape(), out.shape(),
                          [&](int64_t i, int64_t k) { o[i] = a[k]; });
}

// expand's backward: dx[k] = the dy[i] that read x[k] added to +0 one at
// a time, in increasing i (out has x's shape).
template <typename T>
void ExpandBackward(const Tensor& dy, Tensor& out) {
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t x_count = out.num_elements();
  for (int64_t k = 0; k < x_count; ++k) o[k] = T(0);
  ForEachBroadcastElement(out.shape(), dy.shape(),
                          [&](int64_t i, int64_t k) { o[k] += g[i]; });
}

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_LAYOUT_H_
