// OneDnnKernels' table (engines/onednn/onednn_kernels.h): its set-up, the
// call every table kernel goes through, and the registration of every
// kernel, those of one op defined here, those several ops share defined by
// family in the other onednn_*.cc files (onednn_kernels_internal.h lists
// them).
#include "engines/onednn/onednn_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "engines/api/kernels.h"
#include "engines/api/loop_kernels.h"
#include "engines/api/philox.h"
#include "engines/api/tensor.h"
#include "engines/onednn/kernel_traffic.h"
#include "engines/onednn/onednn_kernels_internal.h"

namespace remat {

using onednn_kernels_internal::Guarded;
using onednn_kernels_internal::ParallelMinElements;

namespace {

// Elementwise loops one element at a time, for the ops oneDNN 2.6 lacks
// and that have no lanes of their own here.
template <typename F>
void UnaryLoop(const Tensor& x, Tensor& out, F f) {
  const float* in = x.f32();
  float* o = out.f32();
  const int64_t n = out.num_elements();
  loop_kernels::ForEachIndex(n, n, [&](int64_t i) { o[i] = f(in[i]); });
}

template <typename F>
void BinaryLoop(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* o = out.f32();
  const int64_t n = out.num_elements();
  loop_kernels::ForEachIndex(n, n, [&](int64_t i) { o[i] = f(pa[i], pb[i]); });
}

}  // namespace

void OneDnnKernels::RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                                   const KernelAttrs& attrs, Tensor& out) {
  RunImpl(*this, op, operands, attrs, out);
  // A dry run moves no data.
  if (kernel_traffic_internal::Recording() && !dry_run()) {
    kernel_traffic_internal::NoteKernelCall(op, operands, attrs, out);
  }
}

OneDnnKernels::OneDnnKernels() {
  Guarded([] { return std::string("setup (cpu engine 0)"); },
          [&] { state_ = std::make_unique<State>(); });
}

OneDnnKernels::~OneDnnKernels() = default;

// ---------------------------------------------------------------------------
// The table's kernels (kernels.h's KernelDef; defined beside their ops in
// engines/api/op_defs_<family>.cc). Plain f32 loops where the result is exact or
// std:: gives the f32-rounded function.

REMAT_KERNEL_IMPL(OneDnnKernels, neg,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { UnaryLoop(*in[0], out, [](float v) { return -v; }); });
REMAT_KERNEL_IMPL(OneDnnKernels, sub,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) {
                    BinaryLoop(*in[0], *in[1], out, [](float a, float b) { return a - b; });
                  });
// std::exp's float overload: f32 in, f32 out (oneDNN's eltwise_exp is
// faster but its bits differ by ISA; the loop is the same everywhere).
REMAT_KERNEL_IMPL(OneDnnKernels, exp,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { UnaryLoop(*in[0], out, [](float v) { return std::exp(v); }); });
REMAT_KERNEL_IMPL(OneDnnKernels, log,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { UnaryLoop(*in[0], out, [](float v) { return std::log(v); }); });
REMAT_KERNEL_IMPL(OneDnnKernels, div,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) {
                    BinaryLoop(*in[0], *in[1], out, [](float a, float b) { return a / b; });
                  });

// dropout: x * keep * s, s = 1 / (1 - p) rounded to f32 once; the mask's
// bits from philox.h, four elements per Philox block, drawn a chunk of
// blocks at a time (RandomBlocks: vector registers where the CPU has them;
// one block per call took gpt's eager 16% of its samples).
REMAT_KERNEL_IMPL(OneDnnKernels, dropout,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs& attrs,
                     Tensor& out) {
                    const float* x = in[0]->f32();
                    const int32_t seed = in[1]->i32()[0];
                    const uint32_t threshold = DropThreshold(attrs.scalar);
                    const float scale = static_cast<float>(1.0 / (1.0 - attrs.scalar));
                    float* y = out.f32();
                    const int64_t n = out.num_elements();
                    // Each block of four has its own Philox counter: the
                    // threads' split changes no bit.
                    constexpr int64_t kChunkBlocks = 256;
                    const int64_t blocks = (n + 3) / 4;
                    const int64_t chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
                    _Pragma("omp parallel for schedule(static) if (n >= ParallelMinElements())")
                    for (int64_t c = 0; c < chunks; ++c) {
                      uint32_t bits[4 * kChunkBlocks];
                      const int64_t first = c * kChunkBlocks;
                      RandomBlocks(seed, attrs.key, first,
                                   std::min(kChunkBlocks, blocks - first), bits);
                      const int64_t begin = 4 * first;
                      const int64_t count = std::min(n, 4 * (first + kChunkBlocks)) - begin;
                      const float* xc = x + begin;
                      float* yc = y + begin;
                      // Branch-free, so that it vectorizes: unsigned bits >=
                      // threshold as a signed compare of both with the sign
                      // bit flipped (baseline x86-64 has no unsigned vector
                      // compare), and the product taken for every element
                      // and masked to +0 where dropped (the same bits as
                      // `kept ? x * s : 0.0f`, which GCC leaves as a branch:
                      // "control flow in loop", 25% of the kernel's samples
                      // on one scalar store in perf annotate).
                      const int32_t signed_threshold =
                          static_cast<int32_t>(threshold ^ 0x80000000u);
                      _Pragma("omp simd")
                      for (int64_t j = 0; j < count; ++j) {
                        const int32_t b = static_cast<int32_t>(bits[j] ^ 0x80000000u);
                        const float kept = xc[j] * scale;
                        uint32_t k;
                        std::memcpy(&k, &kept, sizeof k);
                        k &= -static_cast<uint32_t>(b >= signed_threshold);
                        std::memcpy(&yc[j], &k, sizeof k);
                      }
                    }
                  });

REMAT_LOOP_KERNELS(OneDnnKernels, float);

// ---------------------------------------------------------------------------
// The kernels several ops share (kernels.h's KernelOp ids), in the table.
// Registered as allocating: each makes its oneDNN primitive, and counts its
// scratchpad, in dry runs too, and skips its arithmetic there itself.
#define REMAT_SHARED_KERNEL(kernel_name, call)                                            \
  REMAT_KERNEL_IMPL_ALLOCATING(OneDnnKernels, kernel_name,                                                    \
      [](OneDnnKernels& k, std::span<const Tensor* const> in, [[maybe_unused]] const KernelAttrs& a, \
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
REMAT_SHARED_KERNEL(conv2d, k.DoConv2d(0, *in[0], *in[1], nullptr, Conv2dGeometryOf(a), out));
REMAT_SHARED_KERNEL(conv2d_bias, k.DoConv2d(0, *in[0], *in[1], in[2], Conv2dGeometryOf(a), out));
REMAT_SHARED_KERNEL(conv2d_backward_data, k.DoConv2d(1, *in[0], *in[1], nullptr, Conv2dGeometryOf(a), out));
REMAT_SHARED_KERNEL(conv2d_backward_weights, k.DoConv2d(2, *in[0], *in[1], nullptr, Conv2dGeometryOf(a), out));
#undef REMAT_SHARED_KERNEL

}  // namespace remat
