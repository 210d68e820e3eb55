// The elementwise loop kernels (loop_kernels.h): silu and gelu_erf, forward
// and backward.
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_ELEMENTWISE_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_ELEMENTWISE_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engines/api/lane_blocks.h"
#include "engines/api/lane_math.h"
#include "engines/api/loop_kernels_common.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

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

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_ELEMENTWISE_H_
