// FaultyKernels: oneDNN's f32 kernels (OneDnnKernels) with one planted
// fault, for the gallery of faulty engines (harness/gallery/gallery.h).
// Test-only.
//
// Each fault keeps every allocation of the kernel it changes (the base
// kernel runs first, its scratchpad included, and the fault rewrites the
// output), so that the accounting is the real kernels' and only the
// arithmetic is wrong.
#ifndef REMAT_HARNESS_GALLERY_FAULTY_KERNELS_H_
#define REMAT_HARNESS_GALLERY_FAULTY_KERNELS_H_

#include <map>
#include <set>
#include <string>
#include <utility>

#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {

enum class KernelFault {
  // relu'(0) = 1: relu_backward passes the cotangent where x == 0 (either
  // sign), as x >= 0 ? dy : 0 would.
  kReluGradAtZeroIsOne,
  // Every kernel that computes a cotangent (one that runs while the bound
  // tracker's category is kGradients: the backward pass, recomputation
  // excepted) writes 0 where its output is NaN, as a "NaN-safe" backward
  // would.
  kNanCotangentsToZero,
  // LayerNorm and its backward kernels with epsilon 1e-6, not 1e-5.
  kLayerNormEpsilon1e6,
  // sum accumulates in float64 and rounds once: float32 promoted inside a
  // kernel.
  kSumInFloat64,
  // A broadcast operand's cotangent (sum_to) is one float32 running sum in
  // flat order per element, not a float64 one rounded once (CONTRACT.md
  // R2.2).
  kBroadcastSumInFloat32,
  // dropout draws fresh bits each time the forward pass or a recomputation
  // runs it (a generator whose state advances per call, as PyTorch's
  // without preserve_rng_state), and the backward pass reuses the latest
  // draw's mask: right without recomputation, wrong after one.
  kFreshDropoutMaskOnRecompute,
  // A forward kernel call (category kActivations) that repeats an earlier
  // call of the run, the same kernel on operands of the same bits, as a
  // recomputation does, gives its first element one ulp up: kernels that
  // are not reproducible (a reduction split by the threads free at the time,
  // atomics), so that a recomputed value differs from the forward pass's.
  kRepeatedCallOneUlpOff,
  // embedding's backward adds the rows of a repeated id in decreasing
  // position, not increasing (CONTRACT.md's scatter order): an atomic or
  // sorted scatter-add whose order is not the stated one.
  kEmbeddingRowsInReverseOrder,
  // top_k_softmax, on a forward call that repeats an earlier call of the
  // run (a recomputation), breaks ties by the higher index, not the lower
  // (CONTRACT.md's tie rule): a kernel whose choice depends on the path it
  // took (a parallel or sorted top-k), so that a recomputed routing is not
  // the forward's.
  kTopKTiesToHigherIndexOnRecompute,
  // batch_norm_running_mean and _var give the batch's statistic itself (the
  // mean, the unbiased variance) as the new running one: the batch's
  // statistics confused with the running ones (momentum 1 where it is m).
  kRunningStatIsBatchStat,
  // max_pool2d's backward gives an output's cotangent to the last of a
  // window's equal largest taps, not the first (CONTRACT.md R2.8): a pool
  // that scans with `>=`. The forward values are the same.
  kMaxPoolTiesToLastTap,
  // max_pool2d's backward lets a NaN replace the choice so far, another NaN
  // included (PyTorch's CPU kernel: `val > max || isnan(val)`): the
  // cotangent of a window with several NaNs goes to the last of them, not
  // the first (CONTRACT.md R2.8). Equal numbers still go to the first.
  kMaxPoolLastNaN,
  // dropout keeps an element when its bits are strictly above
  // DropThreshold(p), not at or above it (CONTRACT.md R2.6): the element
  // whose bits equal the threshold is dropped, forward and backward alike.
  kDropoutStrictThreshold,
};

class FaultyKernels : public OneDnnKernels {
 public:
  // `name` is what name() returns: "onednn" to claim eager's kernels (and
  // be held to eager's bits), anything else to be held to the oracle.
  FaultyKernels(KernelFault fault, std::string name)
      : fault_(fault), name_(std::move(name)) {}

  std::string name() const override { return name_; }

 protected:
  // Every kernel call: the real kernel, then the fault's rewrite of its
  // output where the fault concerns the kernel.
  void RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                      const KernelAttrs& attrs, Tensor& out) override;

 private:
  // kNanCotangentsToZero: zeroes the NaNs of a cotangent, for the kernels a
  // backward rule calls.
  void ScrubNans(Tensor& out) const;
  static bool ComputesCotangents(KernelOp op);
  void ReluGradAtZeroIsOne(const Tensor& x, const Tensor& dy, Tensor& out) const;
  void SumInFloat64(const Tensor& x, Tensor& out) const;
  void SumToInFloat32(const Tensor& dy, Tensor& out) const;
  void LayerNormWrongEpsilon(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                             Tensor& out) const;
  void LayerNormBackwardWrongEpsilon(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                     Tensor& out) const;
  void LayerNormGammaGradWrongEpsilon(const Tensor& x, const Tensor& dy, Tensor& out) const;
  // kFreshDropoutMaskOnRecompute: dropout with an advancing generator.
  void RunFreshDropout(KernelOp op, std::span<const Tensor* const> operands,
                       const KernelAttrs& attrs, Tensor& out);

  KernelFault fault_;
  std::string name_;
  // kFreshDropoutMaskOnRecompute: draws so far per (seed, key) in this run
  // (the run is the bound tracker).
  const MemoryTracker* run_ = nullptr;
  std::map<std::pair<int32_t, int64_t>, int64_t> draws_;
  // kRepeatedCallOneUlpOff: the hashes of this run's forward calls.
  std::set<uint64_t> calls_;
  // kTopKTiesToHigherIndexOnRecompute: top_k_softmax with the higher index
  // first among equal values, the kernel's arithmetic otherwise.
  void TopKSoftmaxHigherIndexFirst(const Tensor& x, int64_t k, Tensor& out) const;
  // kMaxPoolTiesToLastTap, kMaxPoolLastNaN: max_pool2d_backward with a
  // later tap replacing the choice when `replaces(chosen, tap)`.
  template <typename Replaces>
  void MaxPoolBackwardChoosing(const Tensor& x, const Tensor& dy, const KernelAttrs& attrs,
                               Replaces replaces, Tensor& out) const;
  // kDropoutStrictThreshold: zeroes the elements whose bits equal the
  // threshold.
  void DropAtThreshold(const Tensor& seed, const KernelAttrs& attrs, Tensor& out) const;
  // Resets the per-run state when the bound tracker (the run) changed.
  void StartRunIfNew();
};

}  // namespace remat

#endif  // REMAT_HARNESS_GALLERY_FAULTY_KERNELS_H_
