// The elementwise loop kernels (loop_kernels.h): silu, gelu_erf, rsqrt,
// sqrt, tanh, sigmoid, pow by a constant and hardtanh, forward and backward.
// Each element is the formula written, operation by operation in T (no
// contraction, T's own sqrt, exp, tanh and pow: in float32 the C library's
// float overloads), so an element's bits do not depend on the thread count.
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

// y[i] = f(x[i]) and dx[i] = f(v[i], dy[i]) (v: x or y, as the op saves).
template <typename T, typename F>
void MapUnary(const Tensor& x, Tensor& out, F f) {
  const T* a = static_cast<const T*>(x.raw());
  T* y = static_cast<T*>(out.raw());
  const int64_t n = x.num_elements();
  ForEachIndex(n, n, [&](int64_t i) { y[i] = f(a[i]); });
}
template <typename T, typename F>
void MapBinary(const Tensor& v, const Tensor& dy, Tensor& out, F f) {
  const T* a = static_cast<const T*>(v.raw());
  const T* g = static_cast<const T*>(dy.raw());
  T* y = static_cast<T*>(out.raw());
  const int64_t n = v.num_elements();
  ForEachIndex(n, n, [&](int64_t i) { y[i] = f(a[i], g[i]); });
}

// rsqrt: y = 1 / sqrt(x) (two roundings, as PyTorch's CPU rsqrt);
// dx = (-0.5 dy) ((y y) y), from y.
template <typename T>
void Rsqrt(const Tensor& x, Tensor& out) {
  MapUnary<T>(x, out, [](T v) { return T(1) / std::sqrt(v); });
}
template <typename T>
void RsqrtBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  MapBinary<T>(y, dy, out, [](T v, T g) { return (T(-0.5) * g) * ((v * v) * v); });
}

// sqrt: y = sqrt(x); dx = dy / (2 y), from y.
template <typename T>
void Sqrt(const Tensor& x, Tensor& out) {
  MapUnary<T>(x, out, [](T v) { return std::sqrt(v); });
}
template <typename T>
void SqrtBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  MapBinary<T>(y, dy, out, [](T v, T g) { return g / (T(2) * v); });
}

// tanh: y = tanh(x); dx = dy (1 - y y), from y.
template <typename T>
void Tanh(const Tensor& x, Tensor& out) {
  MapUnary<T>(x, out, [](T v) { return std::tanh(v); });
}
template <typename T>
void TanhBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  MapBinary<T>(y, dy, out, [](T v, T g) { return g * (T(1) - v * v); });
}

// sigmoid: y = 1 / (1 + exp(-x)); dx = dy (y (1 - y)), from y.
template <typename T>
void Sigmoid(const Tensor& x, Tensor& out) {
  MapUnary<T>(x, out, [](T v) { return T(1) / (T(1) + std::exp(-v)); });
}
template <typename T>
void SigmoidBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  MapBinary<T>(y, dy, out, [](T v, T g) { return g * (v * (T(1) - v)); });
}

// pow by a constant p (rounded to T once): y = pow(x, p); dx = dy (p
// pow(x, p - 1)), from x, and +0 where p = 0 (as PyTorch's pow_backward).
template <typename T>
void Pow(const Tensor& x, double p, Tensor& out) {
  const T e = static_cast<T>(p);
  MapUnary<T>(x, out, [e](T v) { return std::pow(v, e); });
}
template <typename T>
void PowBackward(const Tensor& x, const Tensor& dy, double p, Tensor& out) {
  const T e = static_cast<T>(p);
  MapBinary<T>(x, dy, out, [e](T v, T g) { return e == T(0) ? T(0) : g * (e * std::pow(v, e - T(1))); });
}

// hardtanh: y = lo where x < lo, hi where x > hi, else x (NaN stays NaN);
// dx = 0 where x <= lo or x >= hi, else dy (PyTorch's hardtanh_backward).
template <typename T>
void Hardtanh(const Tensor& x, int64_t lo, int64_t hi, Tensor& out) {
  const T l = static_cast<T>(lo), h = static_cast<T>(hi);
  MapUnary<T>(x, out, [l, h](T v) { return v < l ? l : (v > h ? h : v); });
}
template <typename T>
void HardtanhBackward(const Tensor& x, const Tensor& dy, int64_t lo, int64_t hi, Tensor& out) {
  const T l = static_cast<T>(lo), h = static_cast<T>(hi);
  MapBinary<T>(x, dy, out, [l, h](T v, T g) { return (v <= l || v >= h) ? T(0) : g; });
}

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_ELEMENTWISE_H_
