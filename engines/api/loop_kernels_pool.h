// The pooling loop kernels over NCHW images (loop_kernels.h): max_pool2d,
// global_avg_pool and adaptive_avg_pool2d, forward and backward.
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_POOL_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_POOL_H_

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engines/api/loop_kernels_common.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

// The choice in window (i, j) of one (H, W) plane under the order
// `replaces(chosen, tap)`: the window's taps in row-major order (increasing
// index), the first valid one chosen, then replaced by each later tap for
// which `replaces` is true. Padding taps are skipped (never chosen); -1 for
// a window with none valid.
template <typename T, typename Replaces>
int64_t PoolChoiceBy(const T* plane, int64_t h, int64_t w, int64_t i, int64_t j, int64_t k,
                     int64_t stride, int64_t pad, Replaces replaces) {
  int64_t best = -1;
  for (int64_t p = 0; p < k; ++p) {
    const int64_t r = i * stride + p - pad;
    if (r < 0 || r >= h) continue;
    for (int64_t q = 0; q < k; ++q) {
      const int64_t s = j * stride + q - pad;
      if (s < 0 || s >= w) continue;
      const int64_t at = r * w + s;
      if (best < 0 || replaces(plane[best], plane[at])) best = at;
    }
  }
  return best;
}

// max_pool2d's choice: replaced only by a value ChosenBefore it (greater,
// or NaN over a number): among equal values the lowest index
// (CONTRACT.md's tie rule).
template <typename T>
int64_t PoolChoice(const T* plane, int64_t h, int64_t w, int64_t i, int64_t j, int64_t k,
                   int64_t stride, int64_t pad) {
  return PoolChoiceBy(plane, h, w, i, j, k, stride, pad,
                      [](T chosen, T tap) { return ChosenBefore(tap, chosen); });
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

// adaptive_avg_pool2d's window on one axis (PyTorch's): output index i of
// `out` over an axis of `in` spans [floor(i in / out), ceil((i + 1) in / out)).
inline int64_t AdaptiveBegin(int64_t i, int64_t in, int64_t out) { return i * in / out; }
inline int64_t AdaptiveEnd(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

// Calls f(o, plane, r0, r1, c0, c1) for each output o (flat index into
// y's shape) of x's shape, planes split between threads and, within one, in
// increasing position: `plane` is the flat index of its (H, W) plane's
// first element in x, its window rows [r0, r1) and columns [c0, c1).
template <typename F>
void ForEachAdaptiveWindow(const Shape& x, const Shape& y, F&& f) {
  const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t oh = y.dim(2), ow = y.dim(3);
  ForEachIndex(planes, planes * h * w, [&](int64_t pl) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        f((pl * oh + i) * ow + j, pl * h * w, AdaptiveBegin(i, h, oh), AdaptiveEnd(i, h, oh),
          AdaptiveBegin(j, w, ow), AdaptiveEnd(j, w, ow));
      }
    }
  });
}

// adaptive_avg_pool2d: y[n, c, i, j] = (the window's sum, row-major from +0)
// / (its element count); out is (N, C, OH, OW).
template <typename T>
void AdaptiveAvgPool2d(const Tensor& x, Tensor& out) {
  const int64_t w = x.shape().dim(3);
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  ForEachAdaptiveWindow(x.shape(), out.shape(),
                        [&](int64_t o, int64_t plane, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                          T s = 0;
                          for (int64_t r = r0; r < r1; ++r) {
                            for (int64_t c = c0; c < c1; ++c) s += a[plane + r * w + c];
                          }
                          y[o] = s / static_cast<T>((r1 - r0) * (c1 - c0));
                        });
}

// Its backward: dx = 0, then for each output (i, j) in increasing
// row-major position, v = dy / count added to each element of its window
// (row-major); overlapping windows add in that order. out has x's shape.
template <typename T>
void AdaptiveAvgPool2dBackward(const Tensor& dy, Tensor& out) {
  const int64_t w = out.shape().dim(3);
  const T* g = static_cast<const T*>(dy.raw());
  T* dx = static_cast<T*>(out.raw());
  std::fill(dx, dx + out.num_elements(), T(0));
  ForEachAdaptiveWindow(out.shape(), dy.shape(),
                        [&](int64_t o, int64_t plane, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                          const T v = g[o] / static_cast<T>((r1 - r0) * (c1 - c0));
                          for (int64_t r = r0; r < r1; ++r) {
                            for (int64_t c = c0; c < c1; ++c) dx[plane + r * w + c] += v;
                          }
                        });
}

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_POOL_H_
