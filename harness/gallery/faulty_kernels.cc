#include "harness/gallery/faulty_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engines/api/loop_kernels.h"
#include "engines/api/philox.h"

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

// Each wrong kernel runs the real one first (its scratchpad, as the real
// kernel's), then rewrites its output.

void FaultyKernels::ReluGradAtZeroIsOne(const Tensor& x, const Tensor& dy, Tensor& out) const {
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    if (x.f32()[i] == 0.0f) out.f32()[i] = dy.f32()[i];
  }
}

void FaultyKernels::SumInFloat64(const Tensor& x, Tensor& out) const {
  double sum = 0.0;
  for (int64_t i = 0; i < x.num_elements(); ++i) sum += x.f32()[i];
  out.f32()[0] = static_cast<float>(sum);
}

void FaultyKernels::SumToInFloat32(const Tensor& dy, Tensor& out) const {
  // dy's element at multi-index i goes to out's at i aligned on the right,
  // an axis where out has size 1 at 0; each of out's elements one float32
  // running sum in flat order (the rule before CONTRACT.md R2.2 took
  // float64 accumulators).
  const Shape& from = dy.shape();
  const Shape& to = out.shape();
  const int extra = from.rank() - to.rank();
  std::vector<float> acc(static_cast<size_t>(out.num_elements()), 0.0f);
  std::vector<int64_t> index(static_cast<size_t>(from.rank()), 0);
  for (int64_t i = 0; i < dy.num_elements(); ++i) {
    int64_t rest = i, at = 0, stride = 1;
    for (int d = from.rank() - 1; d >= 0; --d) {
      index[d] = rest % from.dim(d);
      rest /= from.dim(d);
    }
    for (int d = to.rank() - 1; d >= 0; --d) {
      at += (to.dim(d) == 1 ? 0 : index[d + extra]) * stride;
      stride *= to.dim(d);
    }
    acc[at] += dy.f32()[i];
  }
  for (int64_t j = 0; j < out.num_elements(); ++j) out.f32()[j] = acc[j];
}

void FaultyKernels::LayerNormWrongEpsilon(const Tensor& x, const Tensor& gamma,
                                          const Tensor& beta, Tensor& out) const {
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

void FaultyKernels::LayerNormBackwardWrongEpsilon(const Tensor& x, const Tensor& gamma,
                                                  const Tensor& dy, Tensor& out) const {
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

void FaultyKernels::LayerNormGammaGradWrongEpsilon(const Tensor& x, const Tensor& dy,
                                                   Tensor& out) const {
  const int64_t c = LastDim(x), rows = NumRows(x);
  float* o = out.f32();
  for (int64_t j = 0; j < c; ++j) o[j] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * c;
    const RowStats s = WrongStats(xr, c);
    for (int64_t j = 0; j < c; ++j) o[j] += dy.f32()[r * c + j] * ((xr[j] - s.mean) * s.rstd);
  }
}

void FaultyKernels::TopKSoftmaxHigherIndexFirst(const Tensor& x, int64_t k, Tensor& out) const {
  const int64_t cols = LastDim(x), rows = NumRows(x);
  std::vector<char> chosen(static_cast<size_t>(cols));
  // a before b unless b is strictly before a: an equal value later in the
  // row replaces the one chosen so far.
  const auto later_on_ties = [](float a, float b) { return !loop_kernels::ChosenBefore(b, a); };
  for (int64_t r = 0; r < rows; ++r) {
    loop_kernels::TopKSoftmaxRow(x.f32() + r * cols, cols, k, later_on_ties, chosen.data(),
                                 out.f32() + r * cols);
  }
}

template <typename Replaces>
void FaultyKernels::MaxPoolBackwardChoosing(const Tensor& x, const Tensor& dy,
                                            const KernelAttrs& attrs, Replaces replaces,
                                            Tensor& out) const {
  const int64_t k = attrs.int_a, stride = attrs.int_b, pad = attrs.int_c;
  const int64_t planes = x.shape().dim(0) * x.shape().dim(1);
  const int64_t h = x.shape().dim(2), w = x.shape().dim(3);
  const int64_t oh = dy.shape().dim(2), ow = dy.shape().dim(3);
  float* o = out.f32();
  for (int64_t i = 0; i < out.num_elements(); ++i) o[i] = 0.0f;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* plane = x.f32() + pl * h * w;
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t best =
            loop_kernels::PoolChoiceBy(plane, h, w, i, j, k, stride, pad, replaces);
        if (best >= 0) o[pl * h * w + best] += dy.f32()[(pl * oh + i) * ow + j];
      }
    }
  }
}

void FaultyKernels::DropAtThreshold(const Tensor& seed, const KernelAttrs& attrs,
                                    Tensor& out) const {
  const uint32_t threshold = DropThreshold(attrs.scalar);
  float* o = out.f32();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    if (RandomBits(seed.i32()[0], attrs.key, i) == threshold) o[i] = 0.0f;
  }
}

namespace {

// FNV-1a over bytes.
uint64_t Mix(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// A call's identity: the kernel, its attributes and its operands' shapes
// and bits.
uint64_t CallHash(KernelOp op, std::span<const Tensor* const> in, const KernelAttrs& a) {
  uint64_t h = 14695981039346656037ull;
  const int id = static_cast<int>(op);
  h = Mix(h, &id, sizeof id);
  h = Mix(h, &a.transpose_a, sizeof a.transpose_a);
  h = Mix(h, &a.transpose_b, sizeof a.transpose_b);
  h = Mix(h, &a.scalar, sizeof a.scalar);
  h = Mix(h, &a.key, sizeof a.key);
  h = Mix(h, &a.int_a, sizeof a.int_a);
  h = Mix(h, &a.int_b, sizeof a.int_b);
  h = Mix(h, &a.int_c, sizeof a.int_c);
  for (int64_t d : a.shape.dims()) h = Mix(h, &d, sizeof d);
  for (int64_t p : a.perm) h = Mix(h, &p, sizeof p);
  for (const Tensor* t : in) {
    for (int64_t d : t->shape().dims()) h = Mix(h, &d, sizeof d);
    h = Mix(h, t->raw(), static_cast<size_t>(t->bytes()));
  }
  return h;
}

}  // namespace

void FaultyKernels::StartRunIfNew() {
  if (run_ == tracker().get()) return;
  run_ = tracker().get();
  draws_.clear();
  calls_.clear();
}

bool FaultyKernels::ComputesCotangents(KernelOp op) {
  switch (op) {
    case KernelOp::kReluBackward:
    case KernelOp::kLayerNormBackward:
    case KernelOp::kLayerNormGammaGrad:
    case KernelOp::kMatMul:
    case KernelOp::kAdd:
    case KernelOp::kMul:
    case KernelOp::kBroadcast:
    case KernelOp::kSinBackward:
    case KernelOp::kCosBackward:
    case KernelOp::kSquareBackward:
    case KernelOp::kSoftmaxBackward:
    case KernelOp::kSumLeading:
    case KernelOp::kGeluBackward:
    case KernelOp::kScale:
      return true;
    default:
      return false;
  }
}

void FaultyKernels::RunTableKernel(KernelOp op, std::span<const Tensor* const> in,
                                   const KernelAttrs& attrs, Tensor& out) {
  if (fault_ == KernelFault::kFreshDropoutMaskOnRecompute) return RunFreshDropout(op, in, attrs, out);
  OneDnnKernels::RunTableKernel(op, in, attrs, out);
  if (dry_run()) return;
  switch (fault_) {
    case KernelFault::kEmbeddingRowsInReverseOrder:
      if (std::string_view(TableKernel(op).name) == "scatter_add_rows") {
        // (dy (n, D), ids (n)) -> (V, D), the rows added last position first.
        const int64_t d = out.shape().dim(1), n = in[1]->num_elements();
        float* o = out.f32();
        for (int64_t i = 0; i < out.num_elements(); ++i) o[i] = 0.0f;
        for (int64_t p = n - 1; p >= 0; --p) {
          const int64_t id = in[1]->i32()[p];
          for (int64_t j = 0; j < d; ++j) o[id * d + j] += in[0]->f32()[p * d + j];
        }
      }
      break;
    case KernelFault::kRepeatedCallOneUlpOff:
      if (tracker() && tracker()->category() == Category::kActivations &&
          out.num_elements() > 0) {
        StartRunIfNew();
        if (!calls_.insert(CallHash(op, in, attrs)).second) {
          out.f32()[0] = std::nextafter(out.f32()[0], INFINITY);
        }
      }
      break;
    case KernelFault::kTopKTiesToHigherIndexOnRecompute:
      if (std::string_view(TableKernel(op).name) == "top_k_softmax" && tracker() &&
          tracker()->category() == Category::kActivations) {
        StartRunIfNew();
        if (!calls_.insert(CallHash(op, in, attrs)).second) {
          TopKSoftmaxHigherIndexFirst(*in[0], attrs.int_a, out);
        }
      }
      break;
    case KernelFault::kRunningStatIsBatchStat: {
      const std::string_view name = TableKernel(op).name;
      if (name == "batch_norm_running_mean" || name == "batch_norm_running_var") {
        // The kernel again with momentum 1: r' = 0 r + 1 s.
        KernelAttrs all = attrs;
        all.scalar = 1.0;
        OneDnnKernels::RunTableKernel(op, in, all, out);
      }
      break;
    }
    case KernelFault::kMaxPoolTiesToLastTap:
      if (std::string_view(TableKernel(op).name) == "max_pool2d_backward") {
        // An equal value later in the window replaces the choice.
        MaxPoolBackwardChoosing(
            *in[0], *in[1], attrs,
            [](float chosen, float tap) { return !loop_kernels::ChosenBefore(chosen, tap); }, out);
      }
      break;
    case KernelFault::kMaxPoolLastNaN:
      if (std::string_view(TableKernel(op).name) == "max_pool2d_backward") {
        MaxPoolBackwardChoosing(
            *in[0], *in[1], attrs,
            [](float chosen, float tap) { return tap > chosen || std::isnan(tap); }, out);
      }
      break;
    case KernelFault::kDropoutStrictThreshold:
      if (std::string_view(TableKernel(op).name) == "dropout") DropAtThreshold(*in[1], attrs, out);
      break;
    case KernelFault::kReluGradAtZeroIsOne:
      if (op == KernelOp::kReluBackward) ReluGradAtZeroIsOne(*in[0], *in[1], out);
      break;
    case KernelFault::kSumInFloat64:
      if (op == KernelOp::kSum) SumInFloat64(*in[0], out);
      break;
    case KernelFault::kBroadcastSumInFloat32:
      if (std::string_view(TableKernel(op).name) == "sum_to") SumToInFloat32(*in[0], out);
      break;
    case KernelFault::kLayerNormEpsilon1e6:
      if (op == KernelOp::kLayerNorm) LayerNormWrongEpsilon(*in[0], *in[1], *in[2], out);
      if (op == KernelOp::kLayerNormBackward) {
        LayerNormBackwardWrongEpsilon(*in[0], *in[1], *in[2], out);
      }
      if (op == KernelOp::kLayerNormGammaGrad) LayerNormGammaGradWrongEpsilon(*in[0], *in[1], out);
      break;
    case KernelFault::kNanCotangentsToZero:
    case KernelFault::kFreshDropoutMaskOnRecompute:
      break;
  }
  if (ComputesCotangents(op)) ScrubNans(out);
}

void FaultyKernels::RunFreshDropout(KernelOp op, std::span<const Tensor* const> operands,
                                    const KernelAttrs& attrs, Tensor& out) {
  if (fault_ != KernelFault::kFreshDropoutMaskOnRecompute ||
      std::string_view(TableKernel(op).name) != "dropout" || dry_run() || !tracker()) {
    return OneDnnKernels::RunTableKernel(op, operands, attrs, out);
  }
  StartRunIfNew();
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
