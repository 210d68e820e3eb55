// The oracle's rules for the image ops, NCHW: conv2d, max_pool2d and
// global_avg_pool.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// conv2d's geometry: x (N, C, H, W), w (O, C, KH, KW), y (N, O, OH, OW).
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, stride, pad;
  ConvGeometry(const Shape& x, const Shape& wt, const Shape& y, const std::vector<int64_t>& ints)
      : n(x.dim(0)), c(x.dim(1)), h(x.dim(2)), w(x.dim(3)), o(wt.dim(0)), kh(wt.dim(2)),
        kw(wt.dim(3)), oh(y.dim(2)), ow(y.dim(3)), stride(ints[0]), pad(ints[1]) {}
  int64_t X(int64_t b, int64_t ch, int64_t r, int64_t s) const { return ((b * c + ch) * h + r) * w + s; }
  int64_t W(int64_t oc, int64_t ch, int64_t p, int64_t q) const { return ((oc * c + ch) * kh + p) * kw + q; }
  int64_t Y(int64_t b, int64_t oc, int64_t i, int64_t j) const { return ((b * o + oc) * oh + i) * ow + j; }
};

// max_pool2d's choice for output (b, ch, i, j) of x (N, C, H, W): the
// window's valid pixel first in "greater first, NaN above every number,
// equal values by lower index", as a flat index into x.
int64_t PoolChoice(const Tensor& x, const std::vector<int64_t>& ints, int64_t plane, int64_t i,
                   int64_t j) {
  const int64_t k = ints[0], stride = ints[1], pad = ints[2];
  const int64_t h = x.shape().dim(2), w = x.shape().dim(3);
  std::vector<int64_t> taps;
  for (int64_t r = i * stride - pad; r < i * stride - pad + k; ++r) {
    for (int64_t s = j * stride - pad; s < j * stride - pad + k; ++s) {
      if (r >= 0 && r < h && s >= 0 && s < w) taps.push_back((plane * h + r) * w + s);
    }
  }
  const double* v = x.f64();
  return *std::min_element(taps.begin(), taps.end(), [v](int64_t a, int64_t b) {
    const bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na != nb) return na;
    if (!na && v[a] != v[b]) return v[a] > v[b];
    return a < b;
  });
}

// ---------------------------------------------------------------------------
// conv2d

Shape Conv2dShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (op.ints.size() != 2) throw ShapeError(op, in, "needs ints = {stride, padding}");
  const int64_t stride = op.ints[0], pad = op.ints[1];
  if (in[0].rank() != 4 || in[1].rank() != 4 || in[0].dim(1) != in[1].dim(1)) {
    throw ShapeError(op, in, "takes x (N, C, H, W) and w (O, C, KH, KW)");
  }
  if (stride < 1 || pad < 0 || in[0].dim(2) + 2 * pad < in[1].dim(2) ||
      in[0].dim(3) + 2 * pad < in[1].dim(3)) {
    throw ShapeError(op, in, "needs stride >= 1, padding >= 0 and a kernel within the padded image");
  }
  return Shape({in[0].dim(0), in[1].dim(0), (in[0].dim(2) + 2 * pad - in[1].dim(2)) / stride + 1,
                (in[0].dim(3) + 2 * pad - in[1].dim(3)) / stride + 1});
}

void Conv2dForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                   int64_t* flops) {
  // y[b,o,i,j] = sum over c, p, q of x[b, c, i s + p - pad, j s + q - pad]
  // w[o,c,p,q], the image zero outside.
  const double* x = in[0]->f64();
  double* y = out.f64();
  const ConvGeometry g(in[0]->shape(), in[1]->shape(), out.shape(), op.ints);
  const double* wt = in[1]->f64();
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oc = 0; oc < g.o; ++oc)
      for (int64_t i = 0; i < g.oh; ++i)
        for (int64_t j = 0; j < g.ow; ++j) {
          double acc = 0;
          for (int64_t ch = 0; ch < g.c; ++ch)
            for (int64_t p = 0; p < g.kh; ++p)
              for (int64_t q = 0; q < g.kw; ++q) {
                const int64_t r = i * g.stride + p - g.pad, s = j * g.stride + q - g.pad;
                if (r >= 0 && r < g.h && s >= 0 && s < g.w) acc += x[g.X(b, ch, r, s)] * wt[g.W(oc, ch, p, q)];
              }
          y[g.Y(b, oc, i, j)] = acc;
        }
  *flops += 2 * out.num_elements() * g.c * g.kh * g.kw;
}

void Conv2dVjp(const VjpArgs& a) {
  // Each input element's adjoint gathers the outputs it reached: x[b,c,r,s]
  // reached y[b,o,i,j] through tap (p, q) where r = i s + p - pad, so
  // dx[b,c,r,s] = sum over o, p, q with (r + pad - p) / s a whole i in
  // range (and j likewise) of dy[b,o,i,j] w[o,c,p,q];
  // dw[o,c,p,q] = sum over b, i, j of x[b, c, i s + p - pad, ...] dy[b,o,i,j].
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const Tensor& w_tensor = *a.in[1];
  const double* wt = w_tensor.f64();
  const ConvGeometry g(xs, w_tensor.shape(), a.dy.shape(), a.op.ints);
  Tensor dx = a.NewGradient(xs);
  Tensor dw = a.NewGradient(w_tensor.shape());
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t r = 0; r < g.h; ++r)
        for (int64_t s = 0; s < g.w; ++s) {
          double acc = 0;
          for (int64_t oc = 0; oc < g.o; ++oc)
            for (int64_t p = 0; p < g.kh; ++p)
              for (int64_t q = 0; q < g.kw; ++q) {
                const int64_t ti = r + g.pad - p, tj = s + g.pad - q;
                if (ti < 0 || tj < 0 || ti % g.stride != 0 || tj % g.stride != 0) continue;
                const int64_t i = ti / g.stride, j = tj / g.stride;
                if (i < g.oh && j < g.ow) acc += dy[g.Y(b, oc, i, j)] * wt[g.W(oc, ch, p, q)];
              }
          dx.f64()[g.X(b, ch, r, s)] = acc;
        }
  for (int64_t oc = 0; oc < g.o; ++oc)
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t p = 0; p < g.kh; ++p)
        for (int64_t q = 0; q < g.kw; ++q) {
          double acc = 0;
          for (int64_t b = 0; b < g.n; ++b)
            for (int64_t i = 0; i < g.oh; ++i)
              for (int64_t j = 0; j < g.ow; ++j) {
                const int64_t r = i * g.stride + p - g.pad, s = j * g.stride + q - g.pad;
                if (r >= 0 && r < g.h && s >= 0 && s < g.w) acc += x[g.X(b, ch, r, s)] * dy[g.Y(b, oc, i, j)];
              }
          dw.f64()[g.W(oc, ch, p, q)] = acc;
        }
  *a.flops += 4 * a.dy.num_elements() * g.c * g.kh * g.kw;
  a.Contribute(0, std::move(dx));
  a.Contribute(1, std::move(dw));
}

// ---------------------------------------------------------------------------
// max_pool2d

Shape MaxPool2dShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (op.ints.size() != 3) throw ShapeError(op, in, "needs ints = {kernel, stride, padding}");
  const int64_t k = op.ints[0], stride = op.ints[1], pad = op.ints[2];
  if (in[0].rank() != 4 || k < 1 || stride < 1 || pad < 0 || 2 * pad > k ||
      in[0].dim(2) + 2 * pad < k || in[0].dim(3) + 2 * pad < k) {
    throw ShapeError(op, in,
                     "takes x (N, C, H, W), a kernel within the padded image, stride >= 1, 0 <= padding <= k/2");
  }
  return Shape({in[0].dim(0), in[0].dim(1), (in[0].dim(2) + 2 * pad - k) / stride + 1,
                (in[0].dim(3) + 2 * pad - k) / stride + 1});
}

void MaxPool2dForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                      int64_t*) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  const Shape& s = out.shape();
  for (int64_t pl = 0; pl < s.dim(0) * s.dim(1); ++pl)
    for (int64_t i = 0; i < s.dim(2); ++i)
      for (int64_t j = 0; j < s.dim(3); ++j) {
        y[(pl * s.dim(2) + i) * s.dim(3) + j] = x[PoolChoice(*in[0], op.ints, pl, i, j)];
      }
}

void MaxPool2dVjp(const VjpArgs& a) {
  // Each output's adjoint goes to the pixel it chose.
  const double* dy = a.dy.f64();
  Tensor dx = a.NewGradient(a.in[0]->shape());
  const Shape& s = a.dy.shape();
  for (int64_t pl = 0; pl < s.dim(0) * s.dim(1); ++pl)
    for (int64_t i = 0; i < s.dim(2); ++i)
      for (int64_t j = 0; j < s.dim(3); ++j) {
        dx.f64()[PoolChoice(*a.in[0], a.op.ints, pl, i, j)] += dy[(pl * s.dim(2) + i) * s.dim(3) + j];
      }
  *a.flops += a.dy.num_elements();
  a.Contribute(0, std::move(dx));
}

// ---------------------------------------------------------------------------
// global_avg_pool

Shape GlobalAvgPoolShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (in[0].rank() != 4) throw ShapeError(op, in, "takes x (N, C, H, W)");
  return Shape({in[0].dim(0), in[0].dim(1)});
}

void GlobalAvgPoolForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                          int64_t* flops) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t hw = in[0]->shape().dim(2) * in[0]->shape().dim(3);
  for (int64_t pl = 0; pl < out.num_elements(); ++pl) {
    double acc = 0;
    for (int64_t i = 0; i < hw; ++i) acc += x[pl * hw + i];
    y[pl] = acc / static_cast<double>(hw);
  }
  *flops += in[0]->num_elements() + out.num_elements();
}

void GlobalAvgPoolVjp(const VjpArgs& a) {
  // y = mean of the plane: each pixel gets dy / (H W).
  const Shape& xs = a.in[0]->shape();
  const int64_t hw = xs.dim(2) * xs.dim(3);
  const double* dy = a.dy.f64();
  Tensor dx = a.NewGradient(xs);
  for (int64_t i = 0; i < xs.num_elements(); ++i) dx.f64()[i] = dy[i / hw] / static_cast<double>(hw);
  *a.flops += xs.num_elements();
  a.Contribute(0, std::move(dx));
}

}  // namespace

const std::vector<OpEntry>& ConvPoolRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kConv2d,
       {Conv2dShape, Conv2dForward, Conv2dVjp, ProductMagnitude, ProductGradMagnitude}},
      {OpKind::kMaxPool2d,
       {MaxPool2dShape, MaxPool2dForward, MaxPool2dVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kGlobalAvgPool,
       {GlobalAvgPoolShape, GlobalAvgPoolForward, GlobalAvgPoolVjp, MeanPoolMagnitude,
        LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
