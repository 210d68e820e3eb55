// The oracle's rules for the elementwise ops of one input (relu, sin, cos,
// square, exp, log, neg, scale, gelu, gelu_erf, silu, rsqrt, sqrt, tanh,
// sigmoid, pow, hardtanh) and the bias that repeats down the rows
// (bias_add). The broadcasting binary ops are broadcast_rules.cc's, the
// sums reduce_rules.cc's.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// The constants of gelu's tanh form: sqrt(2/pi) and 0.044715.
const double kGeluC = std::sqrt(2.0 / std::numbers::pi);
constexpr double kGeluA = 0.044715;

// The magnitude of an elementwise op of one input: M(y)_i = f(x_i, M(x)_i, y_i).
template <typename F>
Tensor UnaryMagnitude(const MagnitudeArgs& a, const F& f) {
  const double* x = a.in[0]->f64();
  const double* mx = a.mags[0]->f64();
  const double* y = a.out.f64();
  Tensor m = a.NewMagnitude();
  double* mo = m.f64();
  const int64_t n = a.in[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) mo[i] = f(x[i], mx[i], y[i]);
  return m;
}

// ---------------------------------------------------------------------------
// The forward rules. FLOPs follow engines/api/kernels.h's model, so that the
// oracle's forward count can be read next to an engine's.

void ReluForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                 int64_t* flops) {
  // max(x, 0); NaN stays NaN, as jnp.maximum keeps it.
  UnaryForward(in, out, 1, flops, [](double x) { return (x > 0 || std::isnan(x)) ? x : 0.0; });
}

void SinForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return std::sin(x); });
}

void CosForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return std::cos(x); });
}

void SquareForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                   int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return x * x; });
}

void ExpForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return std::exp(x); });
}

void LogForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return std::log(x); });
}

void NegForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return -x; });
}

void ScaleForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                  int64_t* flops) {
  UnaryForward(in, out, 1, flops, [&op](double x) { return op.scalar * x; });
}

void GeluForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                 int64_t* flops) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  UnaryForward(in, out, 1, flops, [](double x) {
    const double u = kGeluC * (x + kGeluA * x * x * x);
    return 0.5 * x * (1.0 + std::tanh(u));
  });
}

void GeluErfForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                    int64_t* flops) {
  // x Phi(x), Phi the standard normal CDF = erfc(-x / sqrt 2) / 2.
  UnaryForward(in, out, 1, flops,
               [](double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); });
}

void SiluForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                 int64_t* flops) {
  // x / (1 + e^-x).
  UnaryForward(in, out, 1, flops, [](double x) { return x / (1.0 + std::exp(-x)); });
}

void RsqrtForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                  int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return 1.0 / std::sqrt(x); });
}

void SqrtForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                 int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return std::sqrt(x); });
}

void TanhForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                 int64_t* flops) {
  UnaryForward(in, out, 1, flops, [](double x) { return std::tanh(x); });
}

void SigmoidForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                    int64_t* flops) {
  // The logistic function, as e^x / (1 + e^x) for x < 0 (no overflow of e^-x).
  UnaryForward(in, out, 1, flops, [](double x) {
    return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
  });
}

// pow's exponent: the attribute as the f32 engines read it (rounded to
// float once), so that both compute the same function.
double Exponent(const Op& op) { return static_cast<double>(static_cast<float>(op.scalar)); }

void PowForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  const double p = Exponent(op);
  UnaryForward(in, out, 1, flops, [p](double x) { return std::pow(x, p); });
}

Shape HardtanhShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (op.ints.size() != 2 || op.ints[0] > op.ints[1]) {
    throw ShapeError(op, in, "takes ints = {lo, hi} with lo <= hi");
  }
  return in[0];
}

void HardtanhForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                     int64_t* flops) {
  // min(max(x, lo), hi), a NaN kept.
  const double lo = static_cast<double>(op.ints[0]), hi = static_cast<double>(op.ints[1]);
  UnaryForward(in, out, 1, flops, [lo, hi](double x) {
    return std::isnan(x) ? x : std::min(std::max(x, lo), hi);
  });
}

Shape BiasAddShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (in[0].rank() == 0) throw ShapeError(op, in, "adds the bias to the rows of a rank >= 1 operand");
  if (in[1] != Shape({in[0].dim(in[0].rank() - 1)})) {
    throw ShapeError(op, in, "the bias must be (C), C the last axis of x");
  }
  return in[0];
}

void BiasAddForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                    int64_t* flops) {
  // y[r,j] = x[r,j] + b[j]: the bias repeats down the rows.
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t cols = LastAxis(in[0]->shape()), rows = Rows(in[0]->shape());
  const double* b = in[1]->f64();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = x[r * cols + j] + b[j];
  }
  *flops += in[0]->num_elements();
}

// ---------------------------------------------------------------------------
// The vector-Jacobian products, each derived here from the forward rule
// above. FLOPs: the oracle's own count of the loops, only so that a run
// reports its backward work; it is not an engine's count.

void ReluVjp(const VjpArgs& a) {
  // y = x for x > 0, else 0: dx = dy where x > 0 and 0 elsewhere, x = 0
  // included (relu'(0) = 0, as JAX and PyTorch).
  UnaryVjp(a, 1, [](double x, double dy) { return x > 0 ? dy : 0.0; });
}

void SinVjp(const VjpArgs& a) {
  // d sin(x) / dx = cos(x).
  UnaryVjp(a, 2, [](double x, double dy) { return dy * std::cos(x); });
}

void CosVjp(const VjpArgs& a) {
  // d cos(x) / dx = -sin(x).
  UnaryVjp(a, 2, [](double x, double dy) { return -dy * std::sin(x); });
}

void SquareVjp(const VjpArgs& a) {
  // d x^2 / dx = 2x.
  UnaryVjp(a, 2, [](double x, double dy) { return dy * 2.0 * x; });
}

void LogVjp(const VjpArgs& a) {
  // y = ln x: dx = dy / x.
  UnaryVjp(a, 1, [](double x, double dy) { return dy / x; });
}

void ExpVjp(const VjpArgs& a) {
  // y = e^x: dx = dy e^x.
  UnaryVjp(a, 1, [](double x, double dy) { return dy * std::exp(x); });
}

void NegVjp(const VjpArgs& a) {
  // y = -x: dx = -dy.
  UnaryVjp(a, 1, [](double, double dy) { return -dy; });
}

void ScaleVjp(const VjpArgs& a) {
  // y = c x: dx = c dy.
  UnaryVjp(a, 1, [&a](double, double dy) { return a.op.scalar * dy; });
}

void GeluVjp(const VjpArgs& a) {
  // y = x g(x) / 2 with g = 1 + tanh(u), u = c (x + a x^3):
  //   dy/dx = g / 2 + x / 2 * (1 - tanh(u)^2) * c (1 + 3 a x^2).
  UnaryVjp(a, 2, [](double x, double dy) {
    const double t = std::tanh(kGeluC * (x + kGeluA * x * x * x));
    const double du = kGeluC * (1.0 + 3.0 * kGeluA * x * x);
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
  });
}

void GeluErfVjp(const VjpArgs& a) {
  // d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = e^(-x^2 / 2) / sqrt(2 pi).
  UnaryVjp(a, 2, [](double x, double dy) {
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
    return dy * (cdf + x * pdf);
  });
}

void SiluVjp(const VjpArgs& a) {
  // y = x s, s = 1 / (1 + e^-x), ds/dx = s (1 - s): dy/dx = s + x s (1 - s).
  UnaryVjp(a, 2, [](double x, double dy) {
    const double s = 1.0 / (1.0 + std::exp(-x));
    return dy * (s + x * s * (1.0 - s));
  });
}

void RsqrtVjp(const VjpArgs& a) {
  // d x^(-1/2) / dx = -x^(-3/2) / 2.
  UnaryVjp(a, 2, [](double x, double dy) { return -0.5 * dy / (x * std::sqrt(x)); });
}

void SqrtVjp(const VjpArgs& a) {
  // d sqrt(x) / dx = 1 / (2 sqrt(x)).
  UnaryVjp(a, 2, [](double x, double dy) { return dy / (2.0 * std::sqrt(x)); });
}

void TanhVjp(const VjpArgs& a) {
  // d tanh(x) / dx = 1 / cosh(x)^2.
  UnaryVjp(a, 2, [](double x, double dy) {
    const double c = std::cosh(x);
    return dy / (c * c);
  });
}

void SigmoidVjp(const VjpArgs& a) {
  // s = 1 / (1 + e^-x): ds/dx = e^-x / (1 + e^-x)^2 = s (1 - s), written
  // with e^-|x| so that neither side overflows.
  UnaryVjp(a, 2, [](double x, double dy) {
    const double e = std::exp(-std::abs(x));
    return dy * e / ((1.0 + e) * (1.0 + e));
  });
}

void PowVjp(const VjpArgs& a) {
  // d x^p / dx = p x^(p-1); 0 for p = 0 (a constant), as PyTorch.
  const double p = Exponent(a.op);
  UnaryVjp(a, 2, [p](double x, double dy) { return p == 0 ? 0.0 : dy * p * std::pow(x, p - 1); });
}

void HardtanhVjp(const VjpArgs& a) {
  // The identity strictly inside (lo, hi), a constant outside; at a bound
  // itself 0 (PyTorch's hardtanh_backward).
  const double lo = static_cast<double>(a.op.ints[0]), hi = static_cast<double>(a.op.ints[1]);
  UnaryVjp(a, 1, [lo, hi](double x, double dy) { return (x <= lo || x >= hi) ? 0.0 : dy; });
}

void BiasAddVjp(const VjpArgs& a) {
  // y[r,j] = x[r,j] + b[j]: dy/dx[r,j] = 1, so dx = dy; b[j] reaches
  // every row's column j, so db[j] = sum_r dy[r,j].
  const Tensor& xt = *a.in[0];
  const double* dy = a.dy.f64();
  const int64_t n = xt.num_elements();
  const int64_t cols = LastAxis(xt.shape()), rows = Rows(xt.shape());
  Tensor dx = a.NewGradient(xt.shape());
  for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i];
  Tensor db = a.NewGradient(Shape({cols}));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) db.f64()[j] += dy[r * cols + j];
  }
  *a.flops += n;
  a.Contribute(0, std::move(dx));
  a.Contribute(1, std::move(db));
}

// ---------------------------------------------------------------------------
// The magnitudes (magnitude_rules.cc): max(|f'(x)| M(x), |y|).

Tensor ReluMagnitude(const MagnitudeArgs& a) {
  // relu's derivative is 0 or 1 and its choice may flip within the error:
  // M(x) covers both.
  return UnaryMagnitude(a, [](double, double mx, double) { return mx; });
}

Tensor SinMagnitude(const MagnitudeArgs& a) {
  return UnaryMagnitude(
      a, [](double x, double mx, double y) { return std::max(std::abs(std::cos(x)) * mx, std::abs(y)); });
}

Tensor CosMagnitude(const MagnitudeArgs& a) {
  return UnaryMagnitude(
      a, [](double x, double mx, double y) { return std::max(std::abs(std::sin(x)) * mx, std::abs(y)); });
}

Tensor SquareMagnitude(const MagnitudeArgs& a) {
  return UnaryMagnitude(
      a, [](double x, double mx, double y) { return std::max(2 * std::abs(x) * mx, std::abs(y)); });
}

Tensor ExpMagnitude(const MagnitudeArgs& a) {
  return UnaryMagnitude(a, [](double, double mx, double y) { return std::max(y * mx, y); });
}

Tensor LogMagnitude(const MagnitudeArgs& a) {
  return UnaryMagnitude(
      a, [](double x, double mx, double y) { return std::max(mx / std::abs(x), std::abs(y)); });
}

Tensor GeluMagnitude(const MagnitudeArgs& a) {
  // |gelu'| < 1.13 (both forms), |silu'| < 1.1.
  return UnaryMagnitude(a, [](double, double mx, double y) { return std::max(1.13 * mx, std::abs(y)); });
}

Tensor RsqrtMagnitude(const MagnitudeArgs& a) {
  return UnaryMagnitude(a, [](double x, double mx, double y) {
    return std::max(0.5 * std::abs(y / x) * mx, std::abs(y));
  });
}

Tensor SqrtMagnitude(const MagnitudeArgs& a) {
  return UnaryMagnitude(a, [](double, double mx, double y) {
    return std::max(mx / (2.0 * std::abs(y)), std::abs(y));
  });
}

Tensor TanhMagnitude(const MagnitudeArgs& a) {
  // |tanh'| = 1 - y^2 <= 1.
  return UnaryMagnitude(
      a, [](double, double mx, double y) { return std::max((1.0 - y * y) * mx, std::abs(y)); });
}

Tensor SigmoidMagnitude(const MagnitudeArgs& a) {
  // |s'| = s (1 - s) <= 1/4.
  return UnaryMagnitude(
      a, [](double, double mx, double y) { return std::max(y * (1.0 - y) * mx, std::abs(y)); });
}

Tensor PowMagnitude(const MagnitudeArgs& a) {
  const double p = Exponent(a.op);
  return UnaryMagnitude(a, [p](double x, double mx, double y) {
    const double d = p == 0 ? 0.0 : std::abs(p * std::pow(x, p - 1));
    return std::max(std::isfinite(d) ? d * mx : 0.0, std::abs(y));
  });
}

}  // namespace

const std::vector<OpEntry>& ElementwiseRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kRelu, {SameShape, ReluForward, ReluVjp, ReluMagnitude, LinearGradMagnitude}},
      {OpKind::kSin, {SameShape, SinForward, SinVjp, SinMagnitude, SmoothGradMagnitude}},
      {OpKind::kCos, {SameShape, CosForward, CosVjp, CosMagnitude, SmoothGradMagnitude}},
      {OpKind::kSquare, {SameShape, SquareForward, SquareVjp, SquareMagnitude, SmoothGradMagnitude}},
      {OpKind::kExp, {SameShape, ExpForward, ExpVjp, ExpMagnitude, SmoothGradMagnitude}},
      {OpKind::kLog, {SameShape, LogForward, LogVjp, LogMagnitude, SmoothGradMagnitude}},
      {OpKind::kNeg, {SameShape, NegForward, NegVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kScale,
       {SameShape, ScaleForward, ScaleVjp, RoundedSameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kGelu, {SameShape, GeluForward, GeluVjp, GeluMagnitude, SmoothGradMagnitude}},
      {OpKind::kGeluErf,
       {SameShape, GeluErfForward, GeluErfVjp, GeluMagnitude, SmoothGradMagnitude}},
      {OpKind::kSilu, {SameShape, SiluForward, SiluVjp, GeluMagnitude, SmoothGradMagnitude}},
      {OpKind::kBiasAdd,
       {BiasAddShape, BiasAddForward, BiasAddVjp, SumMagnitude, LinearGradMagnitude}},
      {OpKind::kRsqrt, {SameShape, RsqrtForward, RsqrtVjp, RsqrtMagnitude, SmoothGradMagnitude}},
      {OpKind::kSqrt, {SameShape, SqrtForward, SqrtVjp, SqrtMagnitude, SmoothGradMagnitude}},
      {OpKind::kTanh, {SameShape, TanhForward, TanhVjp, TanhMagnitude, SmoothGradMagnitude}},
      {OpKind::kSigmoid,
       {SameShape, SigmoidForward, SigmoidVjp, SigmoidMagnitude, SmoothGradMagnitude}},
      {OpKind::kPow, {SameShape, PowForward, PowVjp, PowMagnitude, SmoothGradMagnitude}},
      {OpKind::kHardtanh,
       {HardtanhShape, HardtanhForward, HardtanhVjp, ReluMagnitude, LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
