// The rounding magnitudes that several families share (op_rules.h), and
// why every magnitude rule is what it is.
//
// The forward rules (OracleRoundingMagnitudes, oracle.h). M(v) bounds,
// element by element, what an f32 computation of v errs by, in units of
// 2^-24 per rounding on the way (the rounding depth K counts those): a
// rounding of a quantity q errs by at most |q| 2^-24, and an error d in an
// input moves the output by at most |f'| d. So for y = f(x), with K(y) at
// least K(x) + 1:
//   M(y) = max(|f'(x)| M(x), |y|)   (the input's error carried; y's own rounding)
// (a maximum, not a sum: K already counts one unit per rounding).
// For a sum or a product (add, sum, the bias, the average pool; matmul,
// mul, conv2d) the sum of the absolute values of its terms, which is what a
// cancelling sum rounds relative to (not its small result), plus the
// inputs' errors carried in quadrature (see the rule). A copy, a layout
// change, a selection or a constant factor: the same op on the magnitudes. Ops over a row (softmax, the norms,
// cross-entropy) carry the row's largest input magnitude times the op's
// sensitivity to its inputs (at most 2 for softmax's shifts; 1/std for a
// normalization). First order, and an estimate where errors add in
// quadrature: they decide a tolerance, not an answer.
//
// The gradients' rounding magnitudes: the backward pass is sums and
// products too, and an adjoint that cancels (a sum over a batch, a row's
// softmax) rounds relative to its terms, not to its small result. M(dx) is
// built from the adjoint dy of the output and its magnitude M(dy) (at least
// |dy|; 1 for the seed), by the forward rules' reasoning applied to each
// vector-Jacobian product:
// - A product of the adjoint and an input (matmul, mul, conv2d): as the
//   forward product, the terms' absolute values B(|dy|, |v|) plus the
//   errors of dy and of v carried in quadrature.
// - A single term per element, or a sum of terms of one sign (the
//   elementwise ops, the selections, the layout changes, the sums and their
//   broadcasts): the same product on M(dy), in absolute value. A smooth
//   elementwise op also carries its input's error through its derivative,
//   |dy| |f''(x)| M(x), f'' by a central difference of the rule itself. A
//   selection's choice (relu, max_pool2d) is held fixed.
// - The ops over a row or a channel whose product subtracts a mean (softmax,
//   log_softmax, cross-entropy, the norms): each term's absolute value, the
//   subtraction made an addition. The inputs' own errors are not carried
//   there (first order they move the terms, not their count).
// Contributions to one value add up. An estimate that decides a tolerance,
// as the forward rules are; never below the gradient's own |value|.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// A copy of t (tracked) with f applied to each element.
Tensor Elementwise(const Tensor& t, const std::shared_ptr<MemoryTracker>& tracker,
                   double (*f)(double)) {
  Tensor r = Copy(t, tracker);
  for (int64_t i = 0; i < r.num_elements(); ++i) r.f64()[i] = f(r.f64()[i]);
  return r;
}

double Abs(double v) { return std::abs(v); }
double Sq(double v) { return v * v; }

// A sum's magnitude: its own rounding relative to the sum of its terms'
// absolute values (the inputs' absolute values under `as`), and its terms'
// errors added in quadrature (their squared magnitudes under `as`), as a
// product's are. With `mean`, the op is a mean of `count` terms: the
// squares were divided once, not twice, so `carried` is divided again.
Tensor SumOfTerms(const MagnitudeArgs& a, const Op& as, bool mean = false, double count = 1) {
  Tensor m = a.NewMagnitude();
  double* mo = m.f64();
  std::vector<Tensor> abs_in, sq_m;
  for (size_t k = 0; k < a.in.size(); ++k) {
    abs_in.push_back(Elementwise(*a.in[k], a.tracker, Abs));
    sq_m.push_back(Elementwise(*a.mags[k], a.tracker, Sq));
  }
  std::vector<const Tensor*> abs_ptr, sq_ptr;
  for (size_t i = 0; i < a.in.size(); ++i) {
    abs_ptr.push_back(&abs_in[i]);
    sq_ptr.push_back(&sq_m[i]);
  }
  int64_t uncounted = 0;  // the magnitudes are no part of the run's work
  Tensor terms = a.NewMagnitude();
  Forward(as, abs_ptr, terms, &uncounted);
  Tensor carried = a.NewMagnitude();
  Forward(as, sq_ptr, carried, &uncounted);
  for (int64_t i = 0; i < m.num_elements(); ++i) {
    mo[i] = mean ? terms.f64()[i] + std::sqrt(carried.f64()[i] / count)
                 : terms.f64()[i] + std::sqrt(carried.f64()[i]);
  }
  return m;
}

}  // namespace

// A product of two inputs (matmul, mul, conv2d: bilinear), C = B(a, b):
// its own rounding relative to B(|a|, |b|), the sum of the absolute
// values of its terms; and each input's error carried by the other
// input's values, added in quadrature, sqrt(B(a^2, M(b)^2) +
// B(M(a)^2, b^2)): rounding errors of many terms have random signs, and
// carrying them by |a| |b| instead would grow like a product of absolute
// matrices, layer after layer, far past any error an f32 run makes.
Tensor ProductMagnitude(const MagnitudeArgs& a) {
  Tensor m = a.NewMagnitude();
  double* mo = m.f64();
  const Tensor abs_a = Elementwise(*a.in[0], a.tracker, Abs);
  const Tensor abs_b = Elementwise(*a.in[1], a.tracker, Abs);
  const Tensor sq_a = Elementwise(*a.in[0], a.tracker, Sq);
  const Tensor sq_b = Elementwise(*a.in[1], a.tracker, Sq);
  const Tensor sq_ma = Elementwise(*a.mags[0], a.tracker, Sq);
  const Tensor sq_mb = Elementwise(*a.mags[1], a.tracker, Sq);
  const Tensor terms = a.Apply({&abs_a, &abs_b});
  const Tensor via_b = a.Apply({&sq_a, &sq_mb});
  const Tensor via_a = a.Apply({&sq_ma, &sq_b});
  for (int64_t i = 0; i < m.num_elements(); ++i) {
    mo[i] = terms.f64()[i] + std::sqrt(via_b.f64()[i] + via_a.f64()[i]);
  }
  return m;
}

// A sum (add, sum, the bias, the running mean).
Tensor SumMagnitude(const MagnitudeArgs& a) { return SumOfTerms(a, a.op); }

// sub's terms are |a| + |b|: on absolute values, add's rule.
Tensor SubMagnitude(const MagnitudeArgs& a) {
  Op as_add;
  as_add.kind = OpKind::kAdd;
  return SumOfTerms(a, as_add);
}

// The average pool: a mean over the plane.
Tensor MeanPoolMagnitude(const MagnitudeArgs& a) {
  const Shape& s = a.in[0]->shape();
  return SumOfTerms(a, a.op, /*mean=*/true, static_cast<double>(s.dim(2) * s.dim(3)));
}

namespace {
// The fewest elements of PyTorch's adaptive windows over an axis of `in`
// elements to `out` outputs: [floor(i in / out), ceil((i + 1) in / out)).
int64_t SmallestAdaptiveWindow(int64_t in, int64_t out) {
  int64_t least = in;
  for (int64_t i = 0; i < out; ++i) least = std::min(least, ((i + 1) * in + out - 1) / out - i * in / out);
  return least;
}
}  // namespace

// adaptive_avg_pool2d: a mean of at least the smallest window's terms per
// output (the largest carried share); one term where OH > H repeats rows.
Tensor AdaptivePoolMagnitude(const MagnitudeArgs& a) {
  const Shape& s = a.in[0]->shape();
  const Shape& y = a.out.shape();
  return SumOfTerms(a, a.op, /*mean=*/true,
                    static_cast<double>(SmallestAdaptiveWindow(s.dim(2), y.dim(2)) *
                                        SmallestAdaptiveWindow(s.dim(3), y.dim(3))));
}

// A mean over chosen axes: a mean of the input's elements per output one.
Tensor MeanMagnitude(const MagnitudeArgs& a) {
  const int64_t n = a.out.num_elements();
  return SumOfTerms(a, a.op, /*mean=*/true,
                    n == 0 ? 1.0 : static_cast<double>(a.in[0]->num_elements() / n));
}

// The same op on the magnitudes (a copy, a layout, a selection, a
// constant factor), then its absolute value (a negative scale, a
// negation). max_pool2d: the largest magnitude in the window, whichever is
// chosen.
Tensor SameOpMagnitude(const MagnitudeArgs& a) {
  Tensor m = a.Apply(a.mags);
  double* mo = m.f64();
  for (int64_t i = 0; i < m.num_elements(); ++i) mo[i] = std::abs(mo[i]);
  return m;
}

// A rounded product (scale, dropout): as SameOpMagnitude, and at least |y|.
Tensor RoundedSameOpMagnitude(const MagnitudeArgs& a) {
  Tensor m = SameOpMagnitude(a);
  double* mo = m.f64();
  const double* y = a.out.f64();
  for (int64_t i = 0; i < m.num_elements(); ++i) mo[i] = std::max(mo[i], std::abs(y[i]));
  return m;
}

std::vector<Tensor> ProductGradMagnitude(const GradMagnitudeArgs& a) {
  const auto abs = [](double v, int64_t) { return std::abs(v); };
  const auto sq = [](double v, int64_t) { return v * v; };
  const Tensor abs_dy = MapTensor(a.dy, a.tracker, abs);
  const Tensor sq_dy = MapTensor(a.dy, a.tracker, sq);
  const Tensor sq_mdy = MapTensor(a.mdy, a.tracker, sq);
  const auto abs_v = [&](const Tensor& v, const Tensor&) { return MapTensor(v, a.tracker, abs); };
  const auto sq_v = [&](const Tensor& v, const Tensor&) { return MapTensor(v, a.tracker, sq); };
  const auto sq_m = [&](const Tensor&, const Tensor& mv) { return MapTensor(mv, a.tracker, sq); };
  const std::vector<Tensor> terms = a.vjp_with(abs_v, abs_dy);
  const std::vector<Tensor> via_dy = a.vjp_with(sq_v, sq_mdy);
  const std::vector<Tensor> via_v = a.vjp_with(sq_m, sq_dy);
  std::vector<Tensor> m(a.in.size());
  for (size_t k = 0; k < m.size(); ++k) {
    if (!terms[k].defined()) continue;
    m[k] = MapTensor(terms[k], a.tracker, [&](double t, int64_t i) {
      return std::abs(t) + std::sqrt(std::abs(via_dy[k].f64()[i]) + std::abs(via_v[k].f64()[i]));
    });
  }
  return m;
}

std::vector<Tensor> SmoothGradMagnitude(const GradMagnitudeArgs& a) {
  // |f'(x)| M(dy) + |dy| |f''(x)| M(x): f''(x) |dy| by a central
  // difference of the rule, at a step that keeps x's sign (log).
  std::vector<Tensor> m = LinearGradMagnitude(a);
  const Tensor abs_dy = MapTensor(a.dy, a.tracker, [](double v, int64_t) { return std::abs(v); });
  const Tensor& xv = *a.in[0];
  const Tensor step = MapTensor(xv, a.tracker, [](double x, int64_t) {
    return x != 0 ? std::min(1e-5 * std::max(std::abs(x), 1e-3), std::abs(x) / 2) : 1e-8;
  });
  const auto shifted = [&](double sign) {
    return [&, sign](const Tensor& v, const Tensor&) {
      return MapTensor(v, a.tracker, [&](double x, int64_t i) { return x + sign * step.f64()[i]; });
    };
  };
  const Tensor up = a.vjp_with(shifted(1), abs_dy)[0];
  const Tensor down = a.vjp_with(shifted(-1), abs_dy)[0];
  const double* mx = a.mags[0]->f64();
  m[0] = MapTensor(m[0], a.tracker, [&](double t, int64_t i) {
    const double carried = std::abs(up.f64()[i] - down.f64()[i]) / (2 * step.f64()[i]) * mx[i];
    return std::abs(t) + (std::isfinite(carried) ? carried : 0.0);
  });
  return m;
}

std::vector<Tensor> LinearGradMagnitude(const GradMagnitudeArgs& a) {
  return a.vjp_with([](const Tensor& v, const Tensor&) { return v; }, a.mdy);
}

}  // namespace oracle
}  // namespace remat
