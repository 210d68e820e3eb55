#include "engines/reference/reference_kernels.h"

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <numbers>

#include "engines/api/error.h"
#include "engines/api/loop_kernels.h"
#include "engines/api/philox.h"

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

int64_t LastDim(const Tensor& t) { return t.shape().dim(t.shape().rank() - 1); }
int64_t NumRows(const Tensor& t) {
  const int64_t c = LastDim(t);
  return c == 0 ? 0 : t.num_elements() / c;
}

// Layer normalization's mean and rstd = 1/sqrt(var + eps) of one row.
struct RowStats {
  double mean;
  double rstd;
};

RowStats Stats(const double* x, int64_t c, double eps) {
  double sum = 0.0;
  for (int64_t j = 0; j < c; ++j) sum += x[j];
  const double mean = sum / static_cast<double>(c);
  double squares = 0.0;
  for (int64_t j = 0; j < c; ++j) squares += (x[j] - mean) * (x[j] - mean);
  const double var = squares / static_cast<double>(c);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

// gelu's tanh form and its derivative.
constexpr double kGeluA = 0.044715;
const double kGeluK = std::sqrt(2.0 / std::numbers::pi);

double GeluOf(double x) {
  return 0.5 * x * (1.0 + std::tanh(kGeluK * (x + kGeluA * x * x * x)));
}

double GeluDerivative(double x) {
  const double t = std::tanh(kGeluK * (x + kGeluA * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluK * (1.0 + 3.0 * kGeluA * x * x);
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

namespace remat {

void ReferenceKernels::DoSoftmax(const Tensor& x, Tensor& out) {
  const int64_t c = LastDim(x), rows = NumRows(x);
  for (int64_t r = 0; r < rows; ++r) {
    const double* in = x.f64() + r * c;
    double* o = out.f64() + r * c;
    // A NaN anywhere in the row makes the sum, so the whole row, NaN.
    double max = in[0];
    for (int64_t j = 1; j < c; ++j) {
      if (in[j] > max) max = in[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      o[j] = std::exp(in[j] - max);
      sum += o[j];
    }
    for (int64_t j = 0; j < c; ++j) o[j] /= sum;
  }
}

void ReferenceKernels::DoSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  const int64_t c = LastDim(y), rows = NumRows(y);
  for (int64_t r = 0; r < rows; ++r) {
    const double* yr = y.f64() + r * c;
    const double* g = dy.f64() + r * c;
    double* o = out.f64() + r * c;
    double dot = 0.0;
    for (int64_t j = 0; j < c; ++j) dot += g[j] * yr[j];
    for (int64_t j = 0; j < c; ++j) o[j] = yr[j] * (g[j] - dot);
  }
}

void ReferenceKernels::DoLayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   double eps_or_0, Tensor& out) {
  const double eps = Kernels::LayerNormEps(eps_or_0);
  const int64_t c = LastDim(x), rows = NumRows(x);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.f64() + r * c;
    double* o = out.f64() + r * c;
    const RowStats s = Stats(xr, c, eps);
    for (int64_t j = 0; j < c; ++j) {
      o[j] = (xr[j] - s.mean) * s.rstd * gamma.f64()[j] + beta.f64()[j];
    }
  }
}

void ReferenceKernels::DoLayerNormBackward(const Tensor& x, const Tensor& gamma,
                                           const Tensor& dy, double eps_or_0, Tensor& out) {
  const double eps = Kernels::LayerNormEps(eps_or_0);
  const int64_t c = LastDim(x), rows = NumRows(x);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.f64() + r * c;
    const double* dyr = dy.f64() + r * c;
    double* o = out.f64() + r * c;
    const RowStats s = Stats(xr, c, eps);
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      const double g = dyr[j] * gamma.f64()[j];
      sum_g += g;
      sum_gx += g * ((xr[j] - s.mean) * s.rstd);
    }
    const double mean_g = sum_g / static_cast<double>(c);
    const double mean_gx = sum_gx / static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) {
      const double g = dyr[j] * gamma.f64()[j];
      const double xhat = (xr[j] - s.mean) * s.rstd;
      o[j] = s.rstd * (g - mean_g - xhat * mean_gx);
    }
  }
}

void ReferenceKernels::DoLayerNormGammaGrad(const Tensor& x, const Tensor& dy, double eps_or_0,
                                            Tensor& out) {
  const double eps = Kernels::LayerNormEps(eps_or_0);
  const int64_t c = LastDim(x), rows = NumRows(x);
  double* o = out.f64();
  for (int64_t j = 0; j < out.num_elements(); ++j) o[j] = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.f64() + r * c;
    const double* dyr = dy.f64() + r * c;
    const RowStats s = Stats(xr, c, eps);
    for (int64_t j = 0; j < c; ++j) o[j] += dyr[j] * ((xr[j] - s.mean) * s.rstd);
  }
}

void ReferenceKernels::DoSumLeading(const Tensor& x, Tensor& out) {
  const int64_t c = LastDim(x), rows = NumRows(x);
  double* o = out.f64();
  for (int64_t j = 0; j < out.num_elements(); ++j) o[j] = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < c; ++j) o[j] += x.f64()[r * c + j];
  }
}

void ReferenceKernels::DoBiasAdd(const Tensor& x, const Tensor& b, Tensor& out) {
  const int64_t c = LastDim(x), rows = NumRows(x);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < c; ++j) out.f64()[r * c + j] = x.f64()[r * c + j] + b.f64()[j];
  }
}

void ReferenceKernels::DoGelu(const Tensor& x, Tensor& out) { Unary(x, out, GeluOf); }

void ReferenceKernels::DoGeluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  Binary(x, dy, out, [](double v, double g) { return g * GeluDerivative(v); });
}

void ReferenceKernels::DoScale(const Tensor& x, double c, Tensor& out) {
  Unary(x, out, [c](double v) { return c * v; });
}

void ReferenceKernels::DoTranspose(const Tensor& x, Tensor& out) {
  const Shape& s = x.shape();
  const int r = s.rank();
  const int64_t batch = r == 3 ? s.dim(0) : 1;
  const int64_t m = s.dim(r - 2), n = s.dim(r - 1);
  for (int64_t t = 0; t < batch; ++t) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        out.f64()[t * m * n + j * m + i] = x.f64()[t * m * n + i * n + j];
      }
    }
  }
}

void ReferenceKernels::DoSplitHeads(const Tensor& x, int64_t batch, int64_t heads, Tensor& out) {
  const int64_t seq = x.shape().dim(0) / batch, width = x.shape().dim(1), dh = width / heads;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < seq; ++t) {
        for (int64_t j = 0; j < dh; ++j) {
          out.f64()[((b * heads + h) * seq + t) * dh + j] =
              x.f64()[(b * seq + t) * width + h * dh + j];
        }
      }
    }
  }
}

void ReferenceKernels::DoMergeHeads(const Tensor& x, int64_t batch, Tensor& out) {
  const int64_t heads = x.shape().dim(0) / batch, seq = x.shape().dim(1), dh = x.shape().dim(2);
  const int64_t width = heads * dh;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < seq; ++t) {
        for (int64_t j = 0; j < dh; ++j) {
          out.f64()[(b * seq + t) * width + h * dh + j] =
              x.f64()[((b * heads + h) * seq + t) * dh + j];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The table's kernels (kernels.h's KernelDef; defined beside their ops in
// engines/api/op_defs_<family>.cc).

REMAT_KERNEL_IMPL(ReferenceKernels, neg,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { Unary(*in[0], out, [](double v) { return -v; }); });
REMAT_KERNEL_IMPL(ReferenceKernels, sub,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) {
                    Binary(*in[0], *in[1], out, [](double a, double b) { return a - b; });
                  });
REMAT_KERNEL_IMPL(ReferenceKernels, exp,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { Unary(*in[0], out, [](double v) { return std::exp(v); }); });
REMAT_KERNEL_IMPL(ReferenceKernels, log,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { Unary(*in[0], out, [](double v) { return std::log(v); }); });
REMAT_KERNEL_IMPL(ReferenceKernels, div,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) {
                    Binary(*in[0], *in[1], out, [](double a, double b) { return a / b; });
                  });

// dropout: x * keep * s, s = 1 / (1 - p) in f64; the mask's
// bits from philox.h, four elements per Philox call.
REMAT_KERNEL_IMPL(ReferenceKernels, dropout,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs& attrs,
                     Tensor& out) {
                    const double* x = in[0]->f64();
                    const int32_t seed = in[1]->i32()[0];
                    const uint32_t threshold = DropThreshold(attrs.scalar);
                    const double scale = 1.0 / (1.0 - attrs.scalar);
                    double* y = out.f64();
                    const int64_t n = out.num_elements();
                    for (int64_t b = 0; b * 4 < n; ++b) {
                      const PhiloxWords w = RandomBlock(seed, attrs.key, b);
                      for (int64_t j = 0; j < 4 && b * 4 + j < n; ++j) {
                        const int64_t i = b * 4 + j;
                        y[i] = w[j] >= threshold ? x[i] * scale : 0.0;
                      }
                    }
                  });

REMAT_LOOP_KERNELS(ReferenceKernels, double);

// ---------------------------------------------------------------------------
// The kernels several ops share (kernels.h's KernelOp ids), in the table.
#define REMAT_SHARED_KERNEL(kernel_name, call)                                            \
  REMAT_KERNEL_IMPL(ReferenceKernels, kernel_name,                                                    \
      [](ReferenceKernels& k, std::span<const Tensor* const> in, [[maybe_unused]] const KernelAttrs& a, \
         Tensor& out) { call; })
REMAT_SHARED_KERNEL(matmul, k.DoMatMul(*in[0], a.transpose_a, *in[1], a.transpose_b, out));
REMAT_SHARED_KERNEL(relu, k.DoRelu(*in[0], out));
REMAT_SHARED_KERNEL(relu_backward, k.DoReluBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(sin, k.DoSin(*in[0], out));
REMAT_SHARED_KERNEL(cos, k.DoCos(*in[0], out));
REMAT_SHARED_KERNEL(sin_backward, k.DoSinBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(cos_backward, k.DoCosBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(square, k.DoSquare(*in[0], out));
REMAT_SHARED_KERNEL(square_backward, k.DoSquareBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(add, k.DoAdd(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(mul, k.DoMul(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(sum, k.DoSum(*in[0], out));
REMAT_SHARED_KERNEL(broadcast, k.DoBroadcast(*in[0], out));
REMAT_SHARED_KERNEL(softmax, k.DoSoftmax(*in[0], out));
REMAT_SHARED_KERNEL(softmax_backward, k.DoSoftmaxBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(layer_norm, k.DoLayerNorm(*in[0], *in[1], *in[2], a.scalar, out));
REMAT_SHARED_KERNEL(layer_norm_backward, k.DoLayerNormBackward(*in[0], *in[1], *in[2], a.scalar, out));
REMAT_SHARED_KERNEL(layer_norm_gamma_grad, k.DoLayerNormGammaGrad(*in[0], *in[1], a.scalar, out));
REMAT_SHARED_KERNEL(sum_leading, k.DoSumLeading(*in[0], out));
REMAT_SHARED_KERNEL(gelu, k.DoGelu(*in[0], out));
REMAT_SHARED_KERNEL(gelu_backward, k.DoGeluBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(scale, k.DoScale(*in[0], a.scalar, out));
REMAT_SHARED_KERNEL(transpose, k.DoTranspose(*in[0], out));
REMAT_SHARED_KERNEL(split_heads, k.DoSplitHeads(*in[0], a.int_a, a.int_b, out));
REMAT_SHARED_KERNEL(merge_heads, k.DoMergeHeads(*in[0], a.int_a, out));
REMAT_SHARED_KERNEL(bias_add, k.DoBiasAdd(*in[0], *in[1], out));
#undef REMAT_SHARED_KERNEL

// conv2d and its backward kernels in f64 loops over the one index map
// (ForEachConvTap): y[n,o,i,j] += x[n, gr C/G + c, i sh + p dh - ph, j sw + q
// dw - pw] w[o,c,p,q], gr = o / (O/G) the output channel's group.
namespace {
template <typename F>
void ForEachConvTap(const Shape& x, const Shape& w, const Shape& y, const Conv2dGeometry& g, F f) {
  const int64_t batch = x.dim(0), chans = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t outs = w.dim(0), group_chans = w.dim(1), kh = w.dim(2), kw = w.dim(3);
  const int64_t oh = y.dim(2), ow = y.dim(3), group_outs = outs / g.groups;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < outs; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t c = 0; c < group_chans; ++c)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t r = i * g.stride_h + p * g.dilation_h - g.pad_h;
                const int64_t s = j * g.stride_w + q * g.dilation_w - g.pad_w;
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                const int64_t xc = (o / group_outs) * group_chans + c;
                f(((n * chans + xc) * h + r) * wd + s, ((o * group_chans + c) * kh + p) * kw + q,
                  ((n * outs + o) * oh + i) * ow + j);
              }
}
void Zero(Tensor& t) {
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f64()[i] = 0.0;
}
// y = x (*) w, plus bias[o] on output channel o where bias is not null.
void Conv2dForward(std::span<const Tensor* const> in, const Tensor* bias, const KernelAttrs& a,
                   Tensor& out) {
  Zero(out);
  const double* x = in[0]->f64();
  const double* w = in[1]->f64();
  ForEachConvTap(in[0]->shape(), in[1]->shape(), out.shape(), Conv2dGeometryOf(a),
                 [&](int64_t xi, int64_t wi, int64_t yi) { out.f64()[yi] += x[xi] * w[wi]; });
  if (bias == nullptr) return;
  const int64_t o = out.shape().dim(1), plane = out.shape().dim(2) * out.shape().dim(3);
  for (int64_t i = 0; i < out.num_elements(); ++i) out.f64()[i] += bias->f64()[(i / plane) % o];
}
}  // namespace

REMAT_KERNEL_IMPL(ReferenceKernels, conv2d,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs& a,
                     Tensor& out) { Conv2dForward(in, nullptr, a, out); });
REMAT_KERNEL_IMPL(ReferenceKernels, conv2d_bias,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs& a,
                     Tensor& out) { Conv2dForward(in, in[2], a, out); });
REMAT_KERNEL_IMPL(ReferenceKernels, conv2d_backward_data,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs& a,
                     Tensor& out) {
                    Zero(out);
                    const double* dy = in[0]->f64();
                    const double* w = in[1]->f64();
                    ForEachConvTap(out.shape(), in[1]->shape(), in[0]->shape(), Conv2dGeometryOf(a),
                                   [&](int64_t xi, int64_t wi, int64_t yi) {
                                     out.f64()[xi] += dy[yi] * w[wi];
                                   });
                  });
REMAT_KERNEL_IMPL(ReferenceKernels, conv2d_backward_weights,
                  [](ReferenceKernels&, std::span<const Tensor* const> in, const KernelAttrs& a,
                     Tensor& out) {
                    Zero(out);
                    const double* x = in[0]->f64();
                    const double* dy = in[1]->f64();
                    ForEachConvTap(in[0]->shape(), out.shape(), in[1]->shape(), Conv2dGeometryOf(a),
                                   [&](int64_t xi, int64_t wi, int64_t yi) {
                                     out.f64()[wi] += x[xi] * dy[yi];
                                   });
                  });

}  // namespace remat
