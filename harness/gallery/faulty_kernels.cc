#include "harness/gallery/faulty_kernels.h"

#include <cmath>
#include <cstdint>
#include <string_view>

namespace remat {
namespace {

// Rows and the last axis of a rank >= 1 operand.
int64_t LastDim(const Tensor& t) { return t.shape().dim(t.shape().rank() - 1); }
int64_t NumRows(const Tensor& t) {
  const int64_t c = LastDim(t);
  return c == 0 ? 0 : t.num_elements() / c;
}

// The fault's epsilon; the contract's is Kernels::kLayerNormEps (1e-5).
constexpr float kWrongEpsilon = 1e-6f;

struct RowStats {
  float mean;
  float rstd;
};

// Layer normalization's row statistics in f32, in index order, as the real
// kernels compute them but for the epsilon.
RowStats WrongStats(const float* x, int64_t c) {
  float sum = 0.0f;
  for (int64_t j = 0; j < c; ++j) sum += x[j];
  const float mean = sum / static_cast<float>(c);
  float squares = 0.0f;
  for (int64_t j = 0; j < c; ++j) squares += (x[j] - mean) * (x[j] - mean);
  return {mean, 1.0f / std::sqrt(squares / static_cast<float>(c) + kWrongEpsilon)};
}

}  // namespace

void FaultyKernels::ScrubNans(Tensor& out) const {
  if (fault_ != KernelFault::kNanCotangentsToZero || dry_run() || !tracker() ||
      tracker()->category() != Category::kGradients) {
    return;
  }
  float* o = out.f32();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    if (std::isnan(o[i])) o[i] = 0.0f;
  }
}

void FaultyKernels::DoReluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  OneDnnKernels::DoReluBackward(x, dy, out);
  if (fault_ == KernelFault::kReluGradAtZeroIsOne && !dry_run()) {
    for (int64_t i = 0; i < out.num_elements(); ++i) {
      if (x.f32()[i] == 0.0f) out.f32()[i] = dy.f32()[i];
    }
  }
  ScrubNans(out);
}

void FaultyKernels::DoSum(const Tensor& x, Tensor& out) {
  OneDnnKernels::DoSum(x, out);  // its scratchpad, as the real kernel
  if (fault_ == KernelFault::kSumInFloat64 && !dry_run()) {
    double sum = 0.0;
    for (int64_t i = 0; i < x.num_elements(); ++i) sum += x.f32()[i];
    out.f32()[0] = static_cast<float>(sum);
  }
}

void FaultyKernels::DoLayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                Tensor& out) {
  OneDnnKernels::DoLayerNorm(x, gamma, beta, out);
  if (fault_ != KernelFault::kLayerNormEpsilon1e6 || dry_run()) return;
  const int64_t c = LastDim(x), rows = NumRows(x);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * c;
    float* o = out.f32() + r * c;
    const RowStats s = WrongStats(xr, c);
    for (int64_t j = 0; j < c; ++j) {
      o[j] = (xr[j] - s.mean) * s.rstd * gamma.f32()[j] + beta.f32()[j];
    }
  }
}

void FaultyKernels::DoLayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                        Tensor& out) {
  OneDnnKernels::DoLayerNormBackward(x, gamma, dy, out);
  if (fault_ == KernelFault::kLayerNormEpsilon1e6 && !dry_run()) {
    // dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma.
    const int64_t c = LastDim(x), rows = NumRows(x);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * c;
      const float* dyr = dy.f32() + r * c;
      float* o = out.f32() + r * c;
      const RowStats s = WrongStats(xr, c);
      float sum_g = 0.0f, sum_gx = 0.0f;
      for (int64_t j = 0; j < c; ++j) {
        const float g = dyr[j] * gamma.f32()[j];
        sum_g += g;
        sum_gx += g * ((xr[j] - s.mean) * s.rstd);
      }
      const float mean_g = sum_g / static_cast<float>(c);
      const float mean_gx = sum_gx / static_cast<float>(c);
      for (int64_t j = 0; j < c; ++j) {
        const float g = dyr[j] * gamma.f32()[j];
        o[j] = s.rstd * (g - mean_g - ((xr[j] - s.mean) * s.rstd) * mean_gx);
      }
    }
  }
  ScrubNans(out);
}

void FaultyKernels::DoLayerNormGammaGrad(const Tensor& x, const Tensor& dy, Tensor& out) {
  OneDnnKernels::DoLayerNormGammaGrad(x, dy, out);
  if (fault_ == KernelFault::kLayerNormEpsilon1e6 && !dry_run()) {
    const int64_t c = LastDim(x), rows = NumRows(x);
    float* o = out.f32();
    for (int64_t j = 0; j < c; ++j) o[j] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * c;
      const RowStats s = WrongStats(xr, c);
      for (int64_t j = 0; j < c; ++j) o[j] += dy.f32()[r * c + j] * ((xr[j] - s.mean) * s.rstd);
    }
  }
  ScrubNans(out);
}

// The rest only scrub, for kNanCotangentsToZero.

void FaultyKernels::DoMatMul(const Tensor& a, bool transpose_a, const Tensor& b,
                             bool transpose_b, Tensor& out) {
  OneDnnKernels::DoMatMul(a, transpose_a, b, transpose_b, out);
  ScrubNans(out);
}

void FaultyKernels::DoAdd(const Tensor& a, const Tensor& b, Tensor& out) {
  OneDnnKernels::DoAdd(a, b, out);
  ScrubNans(out);
}

void FaultyKernels::DoMul(const Tensor& a, const Tensor& b, Tensor& out) {
  OneDnnKernels::DoMul(a, b, out);
  ScrubNans(out);
}

void FaultyKernels::DoBroadcast(const Tensor& s, Tensor& out) {
  OneDnnKernels::DoBroadcast(s, out);
  ScrubNans(out);
}

void FaultyKernels::DoSinBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  OneDnnKernels::DoSinBackward(x, dy, out);
  ScrubNans(out);
}

void FaultyKernels::DoCosBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  OneDnnKernels::DoCosBackward(x, dy, out);
  ScrubNans(out);
}

void FaultyKernels::DoSquareBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  OneDnnKernels::DoSquareBackward(x, dy, out);
  ScrubNans(out);
}

void FaultyKernels::DoSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  OneDnnKernels::DoSoftmaxBackward(y, dy, out);
  ScrubNans(out);
}

void FaultyKernels::DoSumLeading(const Tensor& x, Tensor& out) {
  OneDnnKernels::DoSumLeading(x, out);
  ScrubNans(out);
}

void FaultyKernels::DoGeluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  OneDnnKernels::DoGeluBackward(x, dy, out);
  ScrubNans(out);
}

void FaultyKernels::DoScale(const Tensor& x, double c, Tensor& out) {
  OneDnnKernels::DoScale(x, c, out);
  ScrubNans(out);
}

void FaultyKernels::RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                                   const KernelAttrs& attrs, Tensor& out) {
  if (fault_ != KernelFault::kFreshDropoutMaskOnRecompute ||
      std::string_view(TableKernel(op).name) != "dropout" || dry_run() || !tracker()) {
    return OneDnnKernels::RunTableKernel(op, operands, attrs, out);
  }
  if (run_ != tracker().get()) {
    run_ = tracker().get();
    draws_.clear();
  }
  const std::pair<int32_t, int64_t> stream = {operands[1]->i32()[0], attrs.key};
  int64_t& draws = draws_[stream];
  // A cotangent's call (the backward pass) reuses the latest mask; any
  // other call (forward, recomputation) draws anew.
  if (tracker()->category() != Category::kGradients || draws == 0) ++draws;
  KernelAttrs advanced = attrs;
  advanced.key = attrs.key + (draws - 1) * 1000003;  // draw 1: the contract's own bits
  OneDnnKernels::RunTableKernel(op, operands, advanced, out);
}

}  // namespace remat
