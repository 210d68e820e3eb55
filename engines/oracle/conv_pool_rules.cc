// The oracle's rules for the image ops, NCHW: conv2d (strides, paddings,
// dilations, groups) and conv2d_bias, max_pool2d and global_avg_pool.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// conv2d's geometry: x (N, C, H, W), w (O, C/G, KH, KW), y (N, O, OH, OW);
// ints {stride, padding} or {sh, sw, ph, pw, dh, dw, G}.
struct ConvGeometry {
  int64_t n, c, h, w, o, cg, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
  ConvGeometry(const Shape& x, const Shape& wt, const Shape& y, const std::vector<int64_t>& v)
      : n(x.dim(0)), c(x.dim(1)), h(x.dim(2)), w(x.dim(3)), o(wt.dim(0)), cg(wt.dim(1)),
        kh(wt.dim(2)), kw(wt.dim(3)), oh(y.dim(2)), ow(y.dim(3)), sh(v[0]),
        sw(v.size() == 7 ? v[1] : v[0]), ph(v.size() == 7 ? v[2] : v[1]),
        pw(v.size() == 7 ? v[3] : v[1]), dh(v.size() == 7 ? v[4] : 1), dw(v.size() == 7 ? v[5] : 1),
        groups(v.size() == 7 ? v[6] : 1) {}
  int64_t X(int64_t b, int64_t ch, int64_t r, int64_t s) const { return ((b * c + ch) * h + r) * w + s; }
  int64_t W(int64_t oc, int64_t ch, int64_t p, int64_t q) const { return ((oc * cg + ch) * kh + p) * kw + q; }
  int64_t Y(int64_t b, int64_t oc, int64_t i, int64_t j) const { return ((b * o + oc) * oh + i) * ow + j; }
  // Calls f(x index, w index, y index) for every tap that reads the image:
  // y[b,oc,i,j] += x[b, group's first channel + ch, i sh + p dh - ph, j sw
  // + q dw - pw] w[oc,ch,p,q].
  template <typename F>
  void ForEachTap(const F& f) const {
    // One flat walk over y's elements, each output's taps (ch, p, q) in
    // turn; the multi-index by division.
    for (int64_t yi = 0; yi < n * o * oh * ow; ++yi) {
      const int64_t j = yi % ow, i = (yi / ow) % oh, oc = (yi / ow / oh) % o, b = yi / ow / oh / o;
      const int64_t first = oc / (o / groups) * cg;  // the group's first input channel
      for (int64_t t = 0; t < cg * kh * kw; ++t) {
        const int64_t ch = t / (kh * kw), p = (t / kw) % kh, q = t % kw;
        const int64_t r = i * sh + p * dh - ph, s = j * sw + q * dw - pw;
        if (r >= 0 && r < h && s >= 0 && s < w) f(X(b, first + ch, r, s), W(oc, ch, p, q), yi);
      }
    }
  }
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
  const bool bias = op.kind == OpKind::kConv2dBias;
  WantInputs(op, in, bias ? 3 : 2);
  if (op.ints.size() != 2 && op.ints.size() != 7) {
    throw ShapeError(op, in, "needs ints = {stride, padding} or {sh, sw, ph, pw, dh, dw, groups}");
  }
  if (in[0].rank() != 4 || in[1].rank() != 4) throw ShapeError(op, in, "takes x (N, C, H, W) and w (O, C/G, KH, KW)");
  const ConvGeometry g(in[0], in[1], Shape({1, 1, 1, 1}), op.ints);
  if (g.groups < 1 || g.cg * g.groups != g.c || g.o % g.groups != 0) {
    throw ShapeError(op, in, "needs groups dividing C and O, and w's second axis C / groups");
  }
  const int64_t reach_h = g.dh * (g.kh - 1) + 1, reach_w = g.dw * (g.kw - 1) + 1;
  if (g.sh < 1 || g.sw < 1 || g.ph < 0 || g.pw < 0 || g.dh < 1 || g.dw < 1 ||
      g.h + 2 * g.ph < reach_h || g.w + 2 * g.pw < reach_w) {
    throw ShapeError(op, in, "needs strides and dilations >= 1, paddings >= 0 and a dilated kernel "
                             "within the padded image");
  }
  if (bias && in[2] != Shape({g.o})) throw ShapeError(op, in, "needs a bias (O)");
  return Shape({g.n, g.o, (g.h + 2 * g.ph - reach_h) / g.sh + 1, (g.w + 2 * g.pw - reach_w) / g.sw + 1});
}

void Conv2dForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                   int64_t* flops) {
  // y[b,o,i,j] = sum over the taps of x w (the image zero outside), plus
  // conv2d_bias's b[o].
  const double* x = in[0]->f64();
  double* y = out.f64();
  const ConvGeometry g(in[0]->shape(), in[1]->shape(), out.shape(), op.ints);
  const double* wt = in[1]->f64();
  g.ForEachTap([&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x[xi] * wt[wi]; });
  *flops += 2 * out.num_elements() * g.cg * g.kh * g.kw;
  if (in.size() < 3) return;
  for (int64_t i = 0; i < out.num_elements(); ++i) y[i] += in[2]->f64()[(i / (g.oh * g.ow)) % g.o];
  *flops += out.num_elements();
}

void Conv2dVjp(const VjpArgs& a) {
  // Each tap y[yi] += x[xi] w[wi] sends dy[yi] w[wi] to dx[xi] and x[xi]
  // dy[yi] to dw[wi]; conv2d_bias's db[o] sums dy over channel o.
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const Tensor& w_tensor = *a.in[1];
  const double* wt = w_tensor.f64();
  const ConvGeometry g(xs, w_tensor.shape(), a.dy.shape(), a.op.ints);
  Tensor dx = a.NewGradient(xs);
  Tensor dw = a.NewGradient(w_tensor.shape());
  g.ForEachTap([&](int64_t xi, int64_t wi, int64_t yi) {
    dx.f64()[xi] += dy[yi] * wt[wi];
    dw.f64()[wi] += x[xi] * dy[yi];
  });
  *a.flops += 4 * a.dy.num_elements() * g.cg * g.kh * g.kw;
  a.Contribute(0, std::move(dx));
  a.Contribute(1, std::move(dw));
  if (a.in.size() < 3) return;
  Tensor db = a.NewGradient(a.in[2]->shape());
  for (int64_t i = 0; i < a.dy.num_elements(); ++i) db.f64()[(i / (g.oh * g.ow)) % g.o] += dy[i];
  *a.flops += a.dy.num_elements();
  a.Contribute(2, std::move(db));
}

// conv2d_bias: the convolution's product magnitude, plus the bias's on its
// channel; at least |y| (the sum's own rounding).
Tensor Conv2dBiasMagnitude(const MagnitudeArgs& a) {
  Op conv = a.op;
  conv.kind = OpKind::kConv2d;
  const MagnitudeArgs product{conv, {a.in[0], a.in[1]}, {a.mags[0], a.mags[1]}, a.out, a.tracker};
  Tensor m = ProductMagnitude(product);
  const Shape& y = a.out.shape();
  const int64_t plane = y.dim(2) * y.dim(3);
  for (int64_t i = 0; i < m.num_elements(); ++i) {
    m.f64()[i] = std::max(m.f64()[i] + a.mags[2]->f64()[(i / plane) % y.dim(1)], std::abs(a.out.f64()[i]));
  }
  return m;
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

// ---------------------------------------------------------------------------
// adaptive_avg_pool2d: output (i, j) is the mean of rows floor(i H / OH) to
// ceil((i + 1) H / OH) - 1 and the columns likewise (PyTorch's windows;
// OH > H repeats rows, each window at least one element).

Shape AdaptiveAvgPoolShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (in[0].rank() != 4 || op.ints.size() != 2 || op.ints[0] < 1 || op.ints[1] < 1 || in[0].dim(2) < 1 ||
      in[0].dim(3) < 1) {
    throw ShapeError(op, in, "takes x (N, C, H, W), H, W >= 1, and ints=[OH,OW], OH, OW >= 1");
  }
  return Shape({in[0].dim(0), in[0].dim(1), op.ints[0], op.ints[1]});
}

// Calls f(output index, x index, window count) for every window element,
// outputs in increasing position, each window row-major.
template <typename F>
void ForEachWindowTap(const Shape& xs, const Shape& ys, const F& f) {
  const int64_t h = xs.dim(2), w = xs.dim(3), oh = ys.dim(2), ow = ys.dim(3);
  for (int64_t pl = 0; pl < xs.dim(0) * xs.dim(1); ++pl) {
    for (int64_t i = 0; i < oh; ++i) {
      const int64_t r0 = i * h / oh, r1 = ((i + 1) * h + oh - 1) / oh;
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t c0 = j * w / ow, c1 = ((j + 1) * w + ow - 1) / ow;
        const double count = static_cast<double>((r1 - r0) * (c1 - c0));
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t c = c0; c < c1; ++c) f((pl * oh + i) * ow + j, (pl * h + r) * w + c, count);
        }
      }
    }
  }
}

void AdaptiveAvgPoolForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                            int64_t* flops) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  for (int64_t o = 0; o < out.num_elements(); ++o) y[o] = 0;
  ForEachWindowTap(in[0]->shape(), out.shape(), [&](int64_t o, int64_t at, double count) {
    y[o] += x[at] / count;
    ++*flops;
  });
  *flops += out.num_elements();
}

void AdaptiveAvgPoolVjp(const VjpArgs& a) {
  // Each element gets dy / count from every window holding it.
  const double* dy = a.dy.f64();
  Tensor dx = a.NewGradient(a.in[0]->shape());
  ForEachWindowTap(a.in[0]->shape(), a.dy.shape(), [&](int64_t o, int64_t at, double count) {
    dx.f64()[at] += dy[o] / count;
    ++*a.flops;
  });
  a.Contribute(0, std::move(dx));
}

}  // namespace

const std::vector<OpEntry>& ConvPoolRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kConv2d,
       {Conv2dShape, Conv2dForward, Conv2dVjp, ProductMagnitude, ProductGradMagnitude}},
      {OpKind::kConv2dBias,
       {Conv2dShape, Conv2dForward, Conv2dVjp, Conv2dBiasMagnitude, ProductGradMagnitude}},
      {OpKind::kMaxPool2d,
       {MaxPool2dShape, MaxPool2dForward, MaxPool2dVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kGlobalAvgPool,
       {GlobalAvgPoolShape, GlobalAvgPoolForward, GlobalAvgPoolVjp, MeanPoolMagnitude,
        LinearGradMagnitude}},
      {OpKind::kAdaptiveAvgPool2d,
       {AdaptiveAvgPoolShape, AdaptiveAvgPoolForward, AdaptiveAvgPoolVjp, AdaptivePoolMagnitude,
        LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
