// The oracle's rules for the normalizations: layer_norm and rms_norm (over
// the last axis), batch_norm (training mode, over each channel's N H W) and
// the running mean and variance a batch_norm updates.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engines/api/kernels.h"  // Kernels::kLayerNormEps: the op's definition, no arithmetic
#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// batch_norm's per-channel statistics in f64: mean and 1 / sqrt(var + eps)
// over the channel's N H W elements.
void ChannelMoments(const double* x, const Shape& s, int64_t ch, double eps, double* mean,
                    double* rstd) {
  const int64_t n = s.dim(0), c = s.dim(1), hw = s.rank() == 4 ? s.dim(2) * s.dim(3) : 1;
  double sum = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) sum += x[(b * c + ch) * hw + i];
  *mean = sum / static_cast<double>(n * hw);
  double var = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) var += std::pow(x[(b * c + ch) * hw + i] - *mean, 2);
  *rstd = 1.0 / std::sqrt(var / static_cast<double>(n * hw) + eps);
}

// The groups a norm normalizes together, as flat indices into x: rows of
// the last axis (layer_norm, rms_norm; gamma by column), or each channel's
// N H W (batch_norm; gamma by channel).
std::vector<std::vector<int64_t>> NormGroups(const Op& op, const Shape& s) {
  std::vector<std::vector<int64_t>> groups;
  if (op.kind == OpKind::kBatchNorm) {
    const int64_t c = s.dim(1), hw = s.rank() == 4 ? s.dim(2) * s.dim(3) : 1;
    for (int64_t ch = 0; ch < c; ++ch) {
      std::vector<int64_t>& at = groups.emplace_back();
      for (int64_t b = 0; b < s.dim(0); ++b)
        for (int64_t i = 0; i < hw; ++i) at.push_back((b * c + ch) * hw + i);
    }
    return groups;
  }
  const int64_t cols = s.rank() > 0 ? s.dim(s.rank() - 1) : 1;
  for (int64_t r = 0; cols > 0 && r < s.num_elements() / cols; ++r) {
    std::vector<int64_t>& at = groups.emplace_back();
    for (int64_t j = 0; j < cols; ++j) at.push_back(r * cols + j);
  }
  return groups;
}

// ---------------------------------------------------------------------------
// layer_norm

// Its eps: attr scalar, where 0 (left out of the program) the default,
// nn.LayerNorm's 1e-5.
double LayerNormEps(const Op& op) { return op.scalar != 0 ? op.scalar : Kernels::kLayerNormEps; }

// The eps of a normalization: layer_norm's, else the scalar (rms_norm's,
// batch_norm's).
double NormEps(const Op& op) { return op.kind == OpKind::kLayerNorm ? LayerNormEps(op) : op.scalar; }

Shape LayerNormShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 3);
  if (!(LayerNormEps(op) > 0) || !std::isfinite(op.scalar)) throw ShapeError(op, in, "needs eps > 0");
  if (in[0].rank() == 0) throw ShapeError(op, in, "works over the last axis of a rank >= 1 operand");
  const Shape c({in[0].dim(in[0].rank() - 1)});
  if (in[1] != c || in[2] != c) throw ShapeError(op, in, "gamma and beta must be (C), C the last axis");
  return in[0];
}

void LayerNormForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                      int64_t* flops) {
  // Per row: y_j = (x_j - mean) / sqrt(var + eps) * gamma_j + beta_j, var
  // the biased variance (mean of squared deviations).
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t cols = LastAxis(in[0]->shape()), rows = Rows(in[0]->shape());
  const double* gamma = in[1]->f64();
  const double* beta = in[2]->f64();
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    double* yr = y + r * cols;
    double mean = 0;
    for (int64_t j = 0; j < cols; ++j) mean += xr[j];
    mean /= static_cast<double>(cols);
    double var = 0;
    for (int64_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<double>(cols);
    const double inv_std = 1.0 / std::sqrt(var + LayerNormEps(op));
    for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * inv_std * gamma[j] + beta[j];
  }
  *flops += 7 * in[0]->num_elements();
}

void LayerNormVjp(const VjpArgs& a) {
  // Back through the row's steps (mu = sum x / C, d_j = x_j - mu,
  // v = sum d_j^2 / C, r = (v + eps)^(-1/2), xh_j = d_j r,
  // y_j = xh_j gamma_j + beta_j):
  //   dbeta_j += dy_j,  dgamma_j += dy_j xh_j        (summed over rows)
  //   dxh_j = dy_j gamma_j
  //   through xh_j = d_j r:    dd_j = dxh_j r,  dr = sum_j dxh_j d_j
  //   through r:               dv = dr * (-1/2) (v + eps)^(-3/2)
  //   through v:               dd_j += dv * 2 d_j / C
  //   through d_j = x_j - mu:  dx_j = dd_j,  dmu = -sum_j dd_j
  //   through mu:              dx_j += dmu / C
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const int64_t cols = LastAxis(xs), rows = Rows(xs);
  const double* gamma = a.in[1]->f64();
  Tensor dx = a.NewGradient(xs);
  Tensor dgamma = a.NewGradient(a.in[1]->shape());
  Tensor dbeta = a.NewGradient(a.in[2]->shape());
  const double c = static_cast<double>(cols);
  std::vector<double> d(cols), dd(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const double* dyr = dy + r * cols;
    double mu = 0;
    for (int64_t j = 0; j < cols; ++j) mu += xr[j];
    mu /= c;
    double v = 0;
    for (int64_t j = 0; j < cols; ++j) {
      d[j] = xr[j] - mu;
      v += d[j] * d[j];
    }
    v /= c;
    const double rs = 1.0 / std::sqrt(v + LayerNormEps(a.op));
    double drs = 0;
    for (int64_t j = 0; j < cols; ++j) {
      dbeta.f64()[j] += dyr[j];
      dgamma.f64()[j] += dyr[j] * d[j] * rs;
      const double dxh = dyr[j] * gamma[j];
      dd[j] = dxh * rs;
      drs += dxh * d[j];
    }
    const double dv = drs * -0.5 * rs * rs * rs;
    double dmu = 0;
    for (int64_t j = 0; j < cols; ++j) {
      dd[j] += dv * 2.0 * d[j] / c;
      dmu -= dd[j];
    }
    for (int64_t j = 0; j < cols; ++j) dx.f64()[r * cols + j] = dd[j] + dmu / c;
  }
  *a.flops += 20 * xs.num_elements();
  a.Contribute(0, std::move(dx));
  a.Contribute(1, std::move(dgamma));
  a.Contribute(2, std::move(dbeta));
}

// ---------------------------------------------------------------------------
// rms_norm

Shape RmsNormShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (in[0].rank() == 0 || in[1] != Shape({in[0].dim(in[0].rank() - 1)})) {
    throw ShapeError(op, in, "takes x of rank >= 1 and gamma (C), C the last axis");
  }
  if (!(op.scalar > 0) || !std::isfinite(op.scalar)) throw ShapeError(op, in, "needs eps > 0");
  return in[0];
}

void RmsNormForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                    int64_t* flops) {
  // Per row: y_j = x_j gamma_j / sqrt(mean of x^2 + eps).
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t cols = LastAxis(in[0]->shape()), rows = Rows(in[0]->shape());
  const double* gamma = in[1]->f64();
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    double ms = 0;
    for (int64_t j = 0; j < cols; ++j) ms += xr[j] * xr[j];
    ms /= static_cast<double>(cols);
    const double inv_rms = 1.0 / std::sqrt(ms + op.scalar);
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = xr[j] * inv_rms * gamma[j];
  }
  *flops += 4 * in[0]->num_elements();
}

void RmsNormVjp(const VjpArgs& a) {
  // Back through the row's steps (q = sum x_j^2 / C, r = (q + eps)^(-1/2),
  // y_j = x_j r gamma_j):
  //   dgamma_j += dy_j x_j r                      (summed over rows)
  //   g_j = dy_j gamma_j;  dx_j = g_j r;  dr = sum_j g_j x_j
  //   through r:  dq = dr * (-1/2) (q + eps)^(-3/2)
  //   through q:  dx_j += dq * 2 x_j / C
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const int64_t cols = LastAxis(xs), rows = Rows(xs);
  const double* gamma = a.in[1]->f64();
  Tensor dx = a.NewGradient(xs);
  Tensor dgamma = a.NewGradient(a.in[1]->shape());
  const double c = static_cast<double>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    const double* dyr = dy + r * cols;
    double q = 0;
    for (int64_t j = 0; j < cols; ++j) q += xr[j] * xr[j];
    q /= c;
    const double rs = 1.0 / std::sqrt(q + a.op.scalar);
    double dr = 0;
    for (int64_t j = 0; j < cols; ++j) {
      dgamma.f64()[j] += dyr[j] * xr[j] * rs;
      const double g = dyr[j] * gamma[j];
      dx.f64()[r * cols + j] = g * rs;
      dr += g * xr[j];
    }
    const double dq = dr * -0.5 * rs * rs * rs;
    for (int64_t j = 0; j < cols; ++j) dx.f64()[r * cols + j] += dq * 2.0 * xr[j] / c;
  }
  *a.flops += 14 * xs.num_elements();
  a.Contribute(0, std::move(dx));
  a.Contribute(1, std::move(dgamma));
}

// ---------------------------------------------------------------------------
// batch_norm

Shape BatchNormShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 3);
  if ((in[0].rank() != 2 && in[0].rank() != 4) || in[1] != Shape({in[0].dim(1)}) || in[2] != in[1]) {
    throw ShapeError(op, in, "takes x (N, C) or (N, C, H, W), gamma and beta (C)");
  }
  if (!(op.scalar > 0)) throw ShapeError(op, in, "needs eps > 0");
  return in[0];
}

void BatchNormForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                      int64_t* flops) {
  // Per channel: (x - mean) / sqrt(var + eps) * gamma + beta, the batch's
  // mean and biased variance over N H W.
  const double* x = in[0]->f64();
  double* y = out.f64();
  const Shape& s = in[0]->shape();
  const int64_t c = s.dim(1), hw = s.rank() == 4 ? s.dim(2) * s.dim(3) : 1;
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean, rstd;
    ChannelMoments(x, s, ch, op.scalar, &mean, &rstd);
    for (int64_t b = 0; b < s.dim(0); ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t at = (b * c + ch) * hw + i;
        y[at] = (x[at] - mean) * rstd * in[1]->f64()[ch] + in[2]->f64()[ch];
      }
  }
  *flops += 7 * in[0]->num_elements();
}

void BatchNormVjp(const VjpArgs& a) {
  // xhat = (x - mean) rstd, y = xhat gamma + beta, mean and rstd
  // functions of the whole channel. Per channel, with g = dy gamma and M
  // elements: dx = rstd (g - mean(g) - xhat mean(g xhat)) (the chain
  // rule through mean and var), dgamma = sum dy xhat, dbeta = sum dy.
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const double* gamma = a.in[1]->f64();
  const int64_t c = xs.dim(1), hw = xs.rank() == 4 ? xs.dim(2) * xs.dim(3) : 1;
  const double m = static_cast<double>(xs.dim(0) * hw);
  Tensor dx = a.NewGradient(xs);
  Tensor dgamma = a.NewGradient(Shape({c}));
  Tensor dbeta = a.NewGradient(Shape({c}));
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean, rstd;
    ChannelMoments(x, xs, ch, a.op.scalar, &mean, &rstd);
    double sum_g = 0, sum_gx = 0;
    for (int64_t b = 0; b < xs.dim(0); ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t at = (b * c + ch) * hw + i;
        const double xhat = (x[at] - mean) * rstd;
        sum_g += dy[at] * gamma[ch];
        sum_gx += dy[at] * gamma[ch] * xhat;
        dgamma.f64()[ch] += dy[at] * xhat;
        dbeta.f64()[ch] += dy[at];
      }
    for (int64_t b = 0; b < xs.dim(0); ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t at = (b * c + ch) * hw + i;
        const double xhat = (x[at] - mean) * rstd;
        dx.f64()[at] = rstd * (dy[at] * gamma[ch] - sum_g / m - xhat * sum_gx / m);
      }
  }
  *a.flops += 14 * xs.num_elements();
  a.Contribute(0, std::move(dx));
  a.Contribute(1, std::move(dgamma));
  a.Contribute(2, std::move(dbeta));
}

// ---------------------------------------------------------------------------
// The three norms' magnitudes.

Tensor NormMagnitude(const MagnitudeArgs& a) {
  // y = xhat gamma (+ beta), xhat = (x - mean) / std over a row (over
  // a channel's N H W for batch_norm; rms_norm: x / rms, no mean). An
  // error d in x moves xhat_i by (d_i - mean d - xhat_i mean(xhat d)) /
  // std: in quadrature, sqrt(M_i^2 + (1 + xhat_i^2) mean(M^2)) / std
  // (rms: without the mean's term). x - mean cancels relative to |x|
  // and |mean|, both within sqrt(mean(M^2)).
  const Op& op = a.op;
  const Tensor& xv = *a.in[0];
  const double* x = xv.f64();
  const double* mx = a.mags[0]->f64();
  const double* y = a.out.f64();
  Tensor m = a.NewMagnitude();
  double* mo = m.f64();
  const bool rms = op.kind == OpKind::kRmsNorm;
  const double* g = a.in[1]->f64();
  const double* mg = a.mags[1]->f64();
  const double* mb = rms ? nullptr : a.mags[2]->f64();
  const Shape& s = xv.shape();
  const bool by_channel = op.kind == OpKind::kBatchNorm;
  const std::vector<std::vector<int64_t>> groups = NormGroups(op, s);
  for (int64_t grp = 0; grp < static_cast<int64_t>(groups.size()); ++grp) {
    const std::vector<int64_t>& at = groups[grp];
    const double count = static_cast<double>(at.size());
    double mean = 0, sq = 0, msq = 0;
    for (int64_t i : at) mean += x[i];
    mean = rms ? 0 : mean / count;
    for (int64_t i : at) {
      sq += (x[i] - mean) * (x[i] - mean);
      msq += mx[i] * mx[i];
    }
    const double eps = NormEps(op);
    const double std = std::sqrt(sq / count + eps);
    msq /= count;
    for (size_t k = 0; k < at.size(); ++k) {
      const int64_t i = at[k];
      const int64_t gi = by_channel ? grp : static_cast<int64_t>(k);  // gamma's index
      const double xhat = std::abs(x[i] - mean) / std;
      const double carried =
          std::abs(g[gi]) * std::sqrt(mx[i] * mx[i] + ((rms ? 0 : 1) + xhat * xhat) * msq) / std;
      mo[i] = std::max(carried + xhat * mg[gi] + (rms ? 0 : mb[gi]), std::abs(y[i]));
    }
  }
  return m;
}

std::vector<Tensor> NormGradMagnitude(const GradMagnitudeArgs& a) {
  // Per group (a row; a channel's N H W for batch_norm), g = dy gamma:
  // dx = (g - mean(g) - xhat mean(g xhat)) / std (rms_norm: without
  // mean(g)), as (M(g) + mean(M(g)) + |xhat| mean(M(g) |xhat|)) / std;
  // dgamma = sum dy xhat and dbeta = sum dy, as sums of M(dy) |xhat| and
  // of M(dy).
  const Op& op = a.op;
  std::vector<Tensor> m(a.in.size());
  const bool rms = op.kind == OpKind::kRmsNorm;
  const bool by_channel = op.kind == OpKind::kBatchNorm;
  const Tensor& xv = *a.in[0];
  const double* x = xv.f64();
  const double* gamma = a.in[1]->f64();
  const double* md = a.mdy.f64();
  const auto zero = [](double, int64_t) { return 0.0; };
  m[0] = MapTensor(xv, a.tracker, zero);
  m[1] = MapTensor(*a.in[1], a.tracker, zero);
  if (!rms) m[2] = MapTensor(*a.in[2], a.tracker, zero);
  const double eps = NormEps(op);
  const std::vector<std::vector<int64_t>> groups = NormGroups(op, xv.shape());
  for (int64_t grp = 0; grp < static_cast<int64_t>(groups.size()); ++grp) {
    const std::vector<int64_t>& at = groups[grp];
    const double count = static_cast<double>(at.size());
    double mean = 0, sq = 0;
    for (int64_t i : at) mean += x[i];
    mean = rms ? 0 : mean / count;
    for (int64_t i : at) sq += (x[i] - mean) * (x[i] - mean);
    const double std = std::sqrt(sq / count + eps);
    double mean_g = 0, mean_gx = 0;
    for (size_t k = 0; k < at.size(); ++k) {
      const int64_t i = at[k], gi = by_channel ? grp : static_cast<int64_t>(k);
      const double g = md[i] * std::abs(gamma[gi]);
      mean_g += g / count;
      mean_gx += g * std::abs(x[i] - mean) / std / count;
    }
    for (size_t k = 0; k < at.size(); ++k) {
      const int64_t i = at[k], gi = by_channel ? grp : static_cast<int64_t>(k);
      const double xhat = std::abs(x[i] - mean) / std;
      m[0].f64()[i] = (md[i] * std::abs(gamma[gi]) + (rms ? 0 : mean_g) + xhat * mean_gx) / std;
      m[1].f64()[gi] += md[i] * xhat;
      if (!rms) m[2].f64()[gi] += md[i];
    }
  }
  return m;
}

// ---------------------------------------------------------------------------
// batch_norm's running mean and variance

Shape RunningStatShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if ((in[0].rank() != 2 && in[0].rank() != 4) || in[1] != Shape({in[0].dim(1)})) {
    throw ShapeError(op, in, "takes x (N, C) or (N, C, H, W) and a running statistic (C)");
  }
  if (in[0].num_elements() / std::max<int64_t>(1, in[0].dim(1)) < 2) {
    throw ShapeError(op, in, "needs at least 2 values a channel");
  }
  if (!(op.scalar >= 0 && op.scalar <= 1)) throw ShapeError(op, in, "needs a momentum in [0, 1]");
  return in[1];
}

void RunningStatForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                        int64_t* flops) {
  // r' = (1 - m) r + m s per channel, s the batch's mean or its
  // unbiased variance (sum of squares of deviations / (M - 1)).
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t n = in[0]->num_elements();
  const Shape& s = in[0]->shape();
  const int64_t c = s.dim(1), m = s.num_elements() / c;
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean, rstd;
    ChannelMoments(x, s, ch, 1.0, &mean, &rstd);
    double stat = mean;
    if (op.kind == OpKind::kBatchNormRunningVar) {
      // The squares of the deviations summed again (rstd's variance is
      // the biased one, with eps).
      double v = 0;
      for (int64_t b = 0; b < s.dim(0); ++b)
        for (int64_t i = 0; i < m / s.dim(0); ++i) {
          v += std::pow(x[(b * c + ch) * (m / s.dim(0)) + i] - mean, 2);
        }
      stat = v / static_cast<double>(m - 1);
    }
    y[ch] = (1 - op.scalar) * in[1]->f64()[ch] + op.scalar * stat;
  }
  *flops += op.kind == OpKind::kBatchNormRunningMean ? n + 4 * c : 4 * n + 5 * c;
}

void RunningStatVjp(const VjpArgs& a) {
  // r' = (1 - m) r + m s: dr = (1 - m) dy; through the mean, each
  // element gets m dy / M; through the unbiased variance, m dy 2 (x -
  // mean) / (M - 1) (the mean's own term sums to zero).
  const Op& op = a.op;
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const int64_t c = xs.dim(1), m = xs.num_elements() / c, hw = m / xs.dim(0);
  Tensor dx = a.NewGradient(xs);
  Tensor dr = a.NewGradient(Shape({c}));
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean, rstd;
    ChannelMoments(x, xs, ch, 1.0, &mean, &rstd);
    dr.f64()[ch] = (1 - op.scalar) * dy[ch];
    for (int64_t b = 0; b < xs.dim(0); ++b)
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t at = (b * c + ch) * hw + i;
        dx.f64()[at] = op.kind == OpKind::kBatchNormRunningMean
                           ? op.scalar * dy[ch] / static_cast<double>(m)
                           : op.scalar * dy[ch] * 2 * (x[at] - mean) / static_cast<double>(m - 1);
      }
  }
  *a.flops += 3 * xs.num_elements() + c;
  a.Contribute(0, std::move(dx));
  a.Contribute(1, std::move(dr));
}

Tensor RunningVarMagnitude(const MagnitudeArgs& a) {
  // (1 - m) r + m var, var = sum (x - mean)^2 / (M - 1): its error is
  // at most 2 mean|x - mean| max|dx| M/(M-1), and its own rounding
  // relative to itself.
  const double* x = a.in[0]->f64();
  const double* mx = a.mags[0]->f64();
  Tensor m = a.NewMagnitude();
  double* mo = m.f64();
  const Shape& s = a.in[0]->shape();
  const int64_t c = s.dim(1), per = s.num_elements() / c, inner = per / s.dim(0);
  const double* mr = a.mags[1]->f64();
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean, rstd;
    ChannelMoments(x, s, ch, 1.0, &mean, &rstd);
    double dev = 0, sq = 0, mc = 0;
    for (int64_t b = 0; b < s.dim(0); ++b)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (b * c + ch) * inner + i;
        dev += std::abs(x[at] - mean);
        sq += (x[at] - mean) * (x[at] - mean);
        mc = std::max(mc, mx[at]);
      }
    const double var_m = std::max(2 * mc * dev, sq) / static_cast<double>(per - 1);
    mo[ch] = (1 - a.op.scalar) * mr[ch] + a.op.scalar * var_m;
  }
  return m;
}

}  // namespace

const std::vector<OpEntry>& NormRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kLayerNorm,
       {LayerNormShape, LayerNormForward, LayerNormVjp, NormMagnitude, NormGradMagnitude}},
      {OpKind::kRmsNorm,
       {RmsNormShape, RmsNormForward, RmsNormVjp, NormMagnitude, NormGradMagnitude}},
      {OpKind::kBatchNorm,
       {BatchNormShape, BatchNormForward, BatchNormVjp, NormMagnitude, NormGradMagnitude}},
      {OpKind::kBatchNormRunningMean,
       {RunningStatShape, RunningStatForward, RunningStatVjp, SumMagnitude, LinearGradMagnitude}},
      {OpKind::kBatchNormRunningVar,
       {RunningStatShape, RunningStatForward, RunningStatVjp, RunningVarMagnitude,
        LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
