// The oracle's rules for the elementwise ops (relu, sin, cos, square, exp,
// log, neg, scale, gelu, gelu_erf, silu; add, sub, mul), the bias that
// repeats down the rows (bias_add) and the sum of every element (sum).
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

// The forward rule of an elementwise op of two inputs of one shape: y_i =
// f(a_i, b_i), one FLOP each.
template <typename F>
void BinaryForward(const std::vector<const Tensor*>& in, const Tensor& out, int64_t* flops,
                   const F& f) {
  const double* x = in[0]->f64();
  const double* b = in[1]->f64();
  double* y = out.f64();
  const int64_t n = in[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i], b[i]);
  *flops += n;
}

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

void AddForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  BinaryForward(in, out, flops, [](double a, double b) { return a + b; });
}

void SubForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  BinaryForward(in, out, flops, [](double a, double b) { return a - b; });
}

void MulForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  BinaryForward(in, out, flops, [](double a, double b) { return a * b; });
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

Shape SumShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  return Shape();
}

void SumForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  const double* x = in[0]->f64();
  const int64_t n = in[0]->num_elements();
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += x[i];
  out.f64()[0] = acc;
  *flops += n;
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

void AddVjp(const VjpArgs& a) {
  // y = a + b: da = dy, db = dy.
  const Tensor& xt = *a.in[0];
  const double* dy = a.dy.f64();
  for (int input = 0; input < 2; ++input) {
    Tensor d = a.NewGradient(xt.shape());
    for (int64_t i = 0; i < xt.num_elements(); ++i) d.f64()[i] = dy[i];
    a.Contribute(input, std::move(d));
  }
}

// The vector-Jacobian product of an elementwise op of two inputs: da_i and
// db_i from (a_i, b_i, dy_i), `flops_per_element` FLOPs each.
template <typename F, typename G>
void BinaryVjp(const VjpArgs& a, int64_t flops_per_element, const F& da_of, const G& db_of) {
  const Tensor& xt = *a.in[0];
  const double* x = xt.f64();
  const double* b = a.in[1]->f64();
  const double* dy = a.dy.f64();
  const int64_t n = xt.num_elements();
  Tensor da = a.NewGradient(xt.shape());
  Tensor db = a.NewGradient(xt.shape());
  for (int64_t i = 0; i < n; ++i) {
    da.f64()[i] = da_of(x[i], b[i], dy[i]);
    db.f64()[i] = db_of(x[i], b[i], dy[i]);
  }
  *a.flops += flops_per_element * n;
  a.Contribute(0, std::move(da));
  a.Contribute(1, std::move(db));
}

void MulVjp(const VjpArgs& a) {
  // y = a * b: da = dy * b, db = dy * a.
  BinaryVjp(
      a, 2, [](double, double b, double dy) { return dy * b; },
      [](double x, double, double dy) { return dy * x; });
}

void SubVjp(const VjpArgs& a) {
  // y = a - b: da = dy, db = -dy.
  BinaryVjp(
      a, 1, [](double, double, double dy) { return dy; },
      [](double, double, double dy) { return -dy; });
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

void SumVjp(const VjpArgs& a) {
  // y = sum_i x_i: dx_i = dy for every i.
  const double dy = a.dy.f64()[0];
  UnaryVjp(a, 0, [dy](double, double) { return dy; });
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
      {OpKind::kAdd, {SameShapeBinary, AddForward, AddVjp, SumMagnitude, LinearGradMagnitude}},
      {OpKind::kSub, {SameShapeBinary, SubForward, SubVjp, SubMagnitude, LinearGradMagnitude}},
      {OpKind::kMul,
       {SameShapeBinary, MulForward, MulVjp, ProductMagnitude, ProductGradMagnitude}},
      {OpKind::kBiasAdd,
       {BiasAddShape, BiasAddForward, BiasAddVjp, SumMagnitude, LinearGradMagnitude}},
      {OpKind::kSum, {SumShape, SumForward, SumVjp, SumMagnitude, LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
