// The oracle's rules for the softmax family, over the last axis: softmax,
// log_softmax, top_k_softmax (softmax over the k largest of a row) and
// cross_entropy (the mean over rows of -log softmax at the target).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// log(sum_j e^(x_j)) of a row, with its max subtracted before the
// exponentials (log_softmax's and cross-entropy's normalizer).
double RowLogSumExp(const double* xr, int64_t cols) {
  double m = xr[0];
  for (int64_t j = 1; j < cols; ++j) m = std::max(m, xr[j]);
  double s = 0;
  for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
  return m + std::log(s);
}

// top_k_softmax's choice in a row: the k positions first in the order
// "greater first, NaN above every number, equal values by lower index".
std::vector<bool> TopKChoice(const double* xr, int64_t cols, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(), [xr](int64_t a, int64_t b) {
    const bool na = std::isnan(xr[a]), nb = std::isnan(xr[b]);
    if (na != nb) return na;
    return !na && xr[a] > xr[b];
  });
  std::vector<bool> chosen(static_cast<size_t>(cols), false);
  for (int64_t t = 0; t < k; ++t) chosen[order[t]] = true;
  return chosen;
}

// top_k_softmax's row from x: softmax over the chosen, 0 elsewhere.
void TopKSoftmaxRow(const double* xr, int64_t cols, int64_t k, double* yr) {
  const std::vector<bool> chosen = TopKChoice(xr, cols, k);
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (int64_t j = 0; j < cols; ++j) {
    if (!chosen[j]) continue;
    nan = nan || std::isnan(xr[j]);
    m = std::max(m, xr[j]);
  }
  if (nan) m = std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (int64_t j = 0; j < cols; ++j) s += chosen[j] ? std::exp(xr[j] - m) : 0.0;
  for (int64_t j = 0; j < cols; ++j) yr[j] = chosen[j] ? std::exp(xr[j] - m) / s : 0.0;
}

// The largest magnitude in row r of mx (0 for none).
double RowMax(const double* mx, int64_t r, int64_t cols) {
  double best = 0;
  for (int64_t j = 0; j < cols; ++j) best = std::max(best, mx[r * cols + j]);
  return best;
}

Shape LastAxisShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (in[0].rank() == 0) throw ShapeError(op, in, "works over the last axis of a rank >= 1 operand");
  return in[0];
}

// ---------------------------------------------------------------------------
// softmax

void SoftmaxForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                    int64_t* flops) {
  // Per row: y_j = exp(x_j - m) / sum_l exp(x_l - m), m the row's max.
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t cols = LastAxis(in[0]->shape()), rows = Rows(in[0]->shape());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    double* yr = y + r * cols;
    double m = xr[0];
    for (int64_t j = 1; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
    for (int64_t j = 0; j < cols; ++j) yr[j] = std::exp(xr[j] - m) / s;
  }
  *flops += 5 * in[0]->num_elements();
}

void SoftmaxVjp(const VjpArgs& a) {
  // Back through the row's steps (m = max x, e_j = exp(x_j - m),
  // s = sum_j e_j, y_j = e_j / s), from x, not from the closed form:
  //   through y_j = e_j / s:  de_j = dy_j / s,  ds = -sum_j dy_j e_j / s^2
  //   through s = sum e:      de_j += ds
  //   through e_j = exp(..):  dx_j = de_j e_j
  // m's path contributes sum_j dm e_j (dy_j / s - sum_l dy_l e_l / s^2),
  // which is exactly zero (y does not depend on the shift), so it is left out.
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const int64_t cols = LastAxis(xs), rows = Rows(xs);
  Tensor dx = a.NewGradient(xs);
  std::vector<double> ex(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const double* dyr = dy + r * cols;
    double m = xr[0];
    for (int64_t j = 1; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) {
      ex[j] = std::exp(xr[j] - m);
      s += ex[j];
    }
    double ds = 0;
    for (int64_t j = 0; j < cols; ++j) ds -= dyr[j] * ex[j] / (s * s);
    for (int64_t j = 0; j < cols; ++j) dx.f64()[r * cols + j] = (dyr[j] / s + ds) * ex[j];
  }
  *a.flops += 9 * xs.num_elements();
  a.Contribute(0, std::move(dx));
}

// softmax and top_k_softmax: dy_i = y_i (dx_i - sum_j y_j dx_j): at most
// 2 y_i max|dx|.
Tensor SoftmaxMagnitude(const MagnitudeArgs& a) {
  const double* mx = a.mags[0]->f64();
  const double* y = a.out.f64();
  Tensor m = a.NewMagnitude();
  double* mo = m.f64();
  const int64_t cols = LastAxis(a.in[0]->shape()), rows = Rows(a.in[0]->shape());
  for (int64_t r = 0; r < rows; ++r) {
    const double mr = RowMax(mx, r, cols);
    for (int64_t j = 0; j < cols; ++j) mo[r * cols + j] = y[r * cols + j] * std::max(2 * mr, 1.0);
  }
  return m;
}

// The gradients' of softmax and top_k_softmax: dx_j = y_j (dy_j - sum_l
// y_l dy_l), as y_j (M_j + sum_l y_l M_l); of log_softmax: dx_j = dy_j -
// p_j sum_l dy_l, as M_j + p_j sum_l M_l (p = e^y).
std::vector<Tensor> RowGradMagnitude(const GradMagnitudeArgs& a, bool log) {
  std::vector<Tensor> m(a.in.size());
  const Tensor& yv = a.y;
  const int64_t cols = LastAxis(yv.shape());
  m[0] = MapTensor(yv, a.tracker, [](double, int64_t) { return 0.0; });
  for (int64_t r = 0; cols > 0 && r < yv.num_elements() / cols; ++r) {
    const double* y = yv.f64() + r * cols;
    const double* md = a.mdy.f64() + r * cols;
    double total = 0;
    for (int64_t j = 0; j < cols; ++j) total += (log ? 1.0 : y[j]) * md[j];
    for (int64_t j = 0; j < cols; ++j) {
      m[0].f64()[r * cols + j] = log ? md[j] + std::exp(y[j]) * total : y[j] * (md[j] + total);
    }
  }
  return m;
}

std::vector<Tensor> SoftmaxGradMagnitude(const GradMagnitudeArgs& a) {
  return RowGradMagnitude(a, /*log=*/false);
}

// ---------------------------------------------------------------------------
// log_softmax

void LogSoftmaxForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                       int64_t* flops) {
  // Per row: y_j = x_j - log(sum_k e^(x_k - m)) - m, m the row's max.
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t cols = LastAxis(in[0]->shape()), rows = Rows(in[0]->shape());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const double lse = RowLogSumExp(xr, cols);
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = xr[j] - lse;
  }
  *flops += 5 * in[0]->num_elements();
}

void LogSoftmaxVjp(const VjpArgs& a) {
  // y_j = x_j - lse(x): dx_j = dy_j - p_j sum_k dy_k, p the row's softmax
  // (recomputed from x here, not read from y).
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const int64_t cols = LastAxis(xs), rows = Rows(xs);
  Tensor dx = a.NewGradient(xs);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const double* dyr = dy + r * cols;
    double m = xr[0];
    for (int64_t j = 1; j < cols; ++j) m = std::max(m, xr[j]);
    double s = 0, total = 0;
    for (int64_t j = 0; j < cols; ++j) {
      s += std::exp(xr[j] - m);
      total += dyr[j];
    }
    for (int64_t j = 0; j < cols; ++j) {
      dx.f64()[r * cols + j] = dyr[j] - std::exp(xr[j] - m) / s * total;
    }
  }
  *a.flops += 4 * xs.num_elements();
  a.Contribute(0, std::move(dx));
}

Tensor LogSoftmaxMagnitude(const MagnitudeArgs& a) {
  // dy_i = dx_i - sum_j p_j dx_j; x_i - lse cancels relative to |x|.
  const double* mx = a.mags[0]->f64();
  const double* y = a.out.f64();
  Tensor m = a.NewMagnitude();
  double* mo = m.f64();
  const int64_t cols = LastAxis(a.in[0]->shape()), rows = Rows(a.in[0]->shape());
  for (int64_t r = 0; r < rows; ++r) {
    const double mr = RowMax(mx, r, cols);
    for (int64_t j = 0; j < cols; ++j) mo[r * cols + j] = std::max(2 * mr, std::abs(y[r * cols + j]));
  }
  return m;
}

std::vector<Tensor> LogSoftmaxGradMagnitude(const GradMagnitudeArgs& a) {
  return RowGradMagnitude(a, /*log=*/true);
}

// ---------------------------------------------------------------------------
// top_k_softmax

Shape TopKSoftmaxShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (in[0].rank() == 0 || op.ints.size() != 1 || op.ints[0] < 1 ||
      op.ints[0] > in[0].dim(in[0].rank() - 1)) {
    throw ShapeError(op, in, "needs ints = {k}, 1 <= k <= the last axis");
  }
  return in[0];
}

void TopKSoftmaxForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                        int64_t* flops) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t cols = LastAxis(in[0]->shape()), rows = Rows(in[0]->shape());
  for (int64_t r = 0; r < rows; ++r) TopKSoftmaxRow(x + r * cols, cols, op.ints[0], y + r * cols);
  *flops += 4 * in[0]->num_elements();
}

void TopKSoftmaxVjp(const VjpArgs& a) {
  // The choice held fixed, y is softmax over the chosen: dx_j =
  // y_j (dy_j - sum_l y_l dy_l), y recomputed from x; 0 off the choice.
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const int64_t cols = LastAxis(xs), rows = Rows(xs);
  Tensor dx = a.NewGradient(xs);
  std::vector<double> yr(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    TopKSoftmaxRow(x + r * cols, cols, a.op.ints[0], yr.data());
    const double* dyr = dy + r * cols;
    double total = 0;
    for (int64_t j = 0; j < cols; ++j) total += yr[j] * dyr[j];
    for (int64_t j = 0; j < cols; ++j) dx.f64()[r * cols + j] = yr[j] * (dyr[j] - total);
  }
  *a.flops += 4 * xs.num_elements();
  a.Contribute(0, std::move(dx));
}

// ---------------------------------------------------------------------------
// cross_entropy

Shape CrossEntropyShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (in[0].rank() != 2 || in[1] != Shape({in[0].dim(0)})) {
    throw ShapeError(op, in, "takes logits (N, C) and targets (N)");
  }
  if (op.ints.size() > 1) throw ShapeError(op, in, "takes ints=[IGNORE_INDEX] or no ints");
  return Shape();
}

// Row r's target, or -1 where it equals the ignore_index (op.ints[0], if
// given): that row is left out of the loss and of the mean's count.
int64_t Target(const Op& op, const Tensor& targets, int64_t r, int64_t cols) {
  if (op.ints.size() == 1 && targets.at(r) == static_cast<double>(op.ints[0])) return -1;
  return Index(op, targets, r, cols);
}

// The rows the mean is over: those not ignored (K; 0 gives a nan loss).
double KeptRows(const Op& op, const Tensor& targets, int64_t rows, int64_t cols) {
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; ++r) kept += Target(op, targets, r, cols) >= 0 ? 1 : 0;
  return static_cast<double>(kept);
}

void CrossEntropyForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                         int64_t* flops) {
  // The mean over rows of -log p(target), p the row's softmax.
  const double* x = in[0]->f64();
  const int64_t cols = LastAxis(in[0]->shape()), rows = Rows(in[0]->shape());
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const int64_t t = Target(op, *in[1], r, cols);
    if (t >= 0) total += RowLogSumExp(xr, cols) - xr[t];
  }
  out.f64()[0] = total / KeptRows(op, *in[1], rows, cols);
  *flops += 4 * in[0]->num_elements();
}

void CrossEntropyVjp(const VjpArgs& a) {
  // d/dx[r, j] of (lse_r - x[r, t]) / N = (p_rj - [j == t]) / N.
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const int64_t cols = LastAxis(xs), rows = Rows(xs);
  const Tensor& targets = *a.in[1];
  Tensor dx = a.NewGradient(xs);
  const double kept = KeptRows(a.op, targets, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const int64_t t = Target(a.op, targets, r, cols);
    if (t < 0) continue;  // ignored: no gradient
    double m = xr[0];
    for (int64_t j = 1; j < cols; ++j) m = std::max(m, xr[j]);
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
    for (int64_t j = 0; j < cols; ++j) {
      const double p = std::exp(xr[j] - m) / s;
      dx.f64()[r * cols + j] = (p - (j == t ? 1.0 : 0.0)) * dy[0] / kept;
    }
  }
  *a.flops += 4 * xs.num_elements();
  a.Contribute(0, std::move(dx));
}

Tensor CrossEntropyMagnitude(const MagnitudeArgs& a) {
  // The mean over rows of lse - x_t: each row as log_softmax's.
  const double* x = a.in[0]->f64();
  const double* mx = a.mags[0]->f64();
  Tensor m = a.NewMagnitude();
  const int64_t cols = LastAxis(a.in[0]->shape()), rows = Rows(a.in[0]->shape());
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const int64_t t = Target(a.op, *a.in[1], r, cols);
    if (t >= 0) total += std::max(2 * RowMax(mx, r, cols), std::abs(RowLogSumExp(xr, cols) - xr[t]));
  }
  const double kept = KeptRows(a.op, *a.in[1], rows, cols);
  m.f64()[0] = kept > 0 ? total / kept : 0;
  return m;
}

std::vector<Tensor> CrossEntropyGradMagnitude(const GradMagnitudeArgs& a) {
  // dx_rj = (p_rj - [j == t_r]) dy / N, as (p_rj + [j == t_r]) M(dy) / N.
  std::vector<Tensor> m(a.in.size());
  const Tensor& xv = *a.in[0];
  const int64_t cols = xv.shape().dim(1), rows = xv.shape().dim(0);
  m[0] = MapTensor(xv, a.tracker, [](double, int64_t) { return 0.0; });
  const double kept = KeptRows(a.op, *a.in[1], rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = xv.f64() + r * cols;
    const double lse = RowLogSumExp(x, cols);
    const int64_t t = Target(a.op, *a.in[1], r, cols);
    if (t < 0) continue;
    for (int64_t j = 0; j < cols; ++j) {
      m[0].f64()[r * cols + j] =
          (std::exp(x[j] - lse) + (j == t ? 1.0 : 0.0)) * a.mdy.f64()[0] / kept;
    }
  }
  return m;
}

}  // namespace

const std::vector<OpEntry>& SoftmaxRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kSoftmax,
       {LastAxisShape, SoftmaxForward, SoftmaxVjp, SoftmaxMagnitude, SoftmaxGradMagnitude}},
      {OpKind::kLogSoftmax,
       {LastAxisShape, LogSoftmaxForward, LogSoftmaxVjp, LogSoftmaxMagnitude,
        LogSoftmaxGradMagnitude}},
      {OpKind::kTopKSoftmax,
       {TopKSoftmaxShape, TopKSoftmaxForward, TopKSoftmaxVjp, SoftmaxMagnitude,
        SoftmaxGradMagnitude}},
      {OpKind::kCrossEntropy,
       {CrossEntropyShape, CrossEntropyForward, CrossEntropyVjp, CrossEntropyMagnitude,
        CrossEntropyGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
