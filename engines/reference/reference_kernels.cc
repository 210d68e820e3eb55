#include "engines/reference/reference_kernels.h"

#include <cmath>
#include <cstdint>

namespace remat {
namespace {

// Applies `f` element by element; the base class has checked the shapes.
template <typename F>
void Unary(const Tensor& x, Tensor& out, F f) {
  const double* in = x.f64();
  double* o = out.f64();
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) o[i] = f(in[i]);
}

template <typename F>
void Binary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const double* pa = a.f64();
  const double* pb = b.f64();
  double* o = out.f64();
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i], pb[i]);
}

}  // namespace

void ReferenceKernels::DoMatMul(const Tensor& a, bool transpose_a, const Tensor& b,
                                bool transpose_b, Tensor& out) {
  const Shape& shape = out.shape();
  const int r = shape.rank() - 2;
  const int64_t batch = shape.rank() == 3 ? shape.dim(0) : 1;
  const int64_t m = shape.dim(r);
  const int64_t n = shape.dim(r + 1);
  const int64_t k = transpose_a ? a.shape().dim(r) : a.shape().dim(r + 1);
  for (int64_t t = 0; t < batch; ++t) {
    // Operand a is stored (m,k), or (k,m) when transposed; b is (k,n) or (n,k).
    const double* pa = a.f64() + t * m * k;
    const double* pb = b.f64() + t * k * n;
    double* o = out.f64() + t * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = transpose_a ? pa[p * m + i] : pa[i * k + p];
          const double y = transpose_b ? pb[j * k + p] : pb[p * n + j];
          acc += x * y;
        }
        o[i * n + j] = acc;
      }
    }
  }
}

void ReferenceKernels::DoRelu(const Tensor& x, Tensor& out) {
  // Not `x > 0 ? x : x * 0.0`: that gives -0.0 for negatives, where JAX,
  // PyTorch and oneDNN's JIT kernels give +0.0.
  Unary(x, out, [](double v) { return std::isnan(v) ? v : (v > 0.0 ? v : 0.0); });
}

void ReferenceKernels::DoReluBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  // dy * 0.0 rather than 0.0: this is what oneDNN's eltwise backward computes
  // (dy times the derivative), so a NaN cotangent stays NaN on both engines.
  // From relu's input: relu'(0) = 0.
  Binary(y, dy, out, [](double xv, double g) { return xv > 0.0 ? g : g * 0.0; });
}

void ReferenceKernels::DoSin(const Tensor& x, Tensor& out) {
  Unary(x, out, [](double v) { return std::sin(v); });
}

void ReferenceKernels::DoCos(const Tensor& x, Tensor& out) {
  Unary(x, out, [](double v) { return std::cos(v); });
}

void ReferenceKernels::DoSinBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  Binary(x, dy, out, [](double v, double g) { return g * std::cos(v); });
}

void ReferenceKernels::DoCosBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  Binary(x, dy, out, [](double v, double g) { return -(g * std::sin(v)); });
}

void ReferenceKernels::DoSquare(const Tensor& x, Tensor& out) {
  Unary(x, out, [](double v) { return v * v; });
}

void ReferenceKernels::DoSquareBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  // 2x is exact, so the one rounding is the product, as in oneDNN's f32 rule.
  Binary(x, dy, out, [](double v, double g) { return g * (2.0 * v); });
}

void ReferenceKernels::DoAdd(const Tensor& a, const Tensor& b, Tensor& out) {
  Binary(a, b, out, [](double x, double y) { return x + y; });
}

void ReferenceKernels::DoMul(const Tensor& a, const Tensor& b, Tensor& out) {
  Binary(a, b, out, [](double x, double y) { return x * y; });
}

void ReferenceKernels::DoSum(const Tensor& x, Tensor& out) {
  const double* in = x.f64();
  const int64_t n = x.num_elements();
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += in[i];
  out.f64()[0] = acc;
}

void ReferenceKernels::DoBroadcast(const Tensor& s, Tensor& out) {
  const double v = s.f64()[0];
  double* o = out.f64();
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) o[i] = v;
}

}  // namespace remat
