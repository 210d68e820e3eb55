// RecordingKernels: eager's oneDNN kernels (OneDnnKernels), which tell an
// observer of every kernel call (the compiler's recorder) what they compute
// from what. With no observer they are OneDnnKernels exactly: planned runs
// its compiled instructions on the same instance, so both share oneDNN's
// primitive cache and give eager's bits.
#ifndef REMAT_ENGINES_PLANNED_RECORDING_KERNELS_H_
#define REMAT_ENGINES_PLANNED_RECORDING_KERNELS_H_

#include <cstdint>
#include <vector>

#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/planned/compiled_plan.h"

namespace remat {

struct KernelCall {
  KernelOp op = KernelOp::kAdd;
  std::vector<const Tensor*> operands;
  const Tensor* out = nullptr;
  KernelAttrs attrs;
};

class KernelObserver {
 public:
  virtual ~KernelObserver() = default;
  // Called when a kernel starts (its output already allocated) and when it
  // ends: what it allocates in between (its scratchpad) is its own.
  virtual void OnKernelBegin(const KernelCall& call) = 0;
  virtual void OnKernelEnd() = 0;
};

class RecordingKernels : public OneDnnKernels {
 public:
  // Null: no observer.
  void set_observer(KernelObserver* observer) { observer_ = observer; }

 protected:
  void DoMatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                Tensor& out) override;
  void DoRelu(const Tensor& x, Tensor& out) override;
  void DoReluBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoSin(const Tensor& x, Tensor& out) override;
  void DoCos(const Tensor& x, Tensor& out) override;
  void DoSinBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoCosBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoSquare(const Tensor& x, Tensor& out) override;
  void DoSquareBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoAdd(const Tensor& a, const Tensor& b, Tensor& out) override;
  void DoMul(const Tensor& a, const Tensor& b, Tensor& out) override;
  void DoSum(const Tensor& x, Tensor& out) override;
  void DoBroadcast(const Tensor& s, Tensor& out) override;
  void DoSoftmax(const Tensor& x, Tensor& out) override;
  void DoSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) override;
  void DoLayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& out) override;
  void DoLayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                           Tensor& out) override;
  void DoLayerNormGammaGrad(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoSumLeading(const Tensor& x, Tensor& out) override;
  void DoGelu(const Tensor& x, Tensor& out) override;
  void DoGeluBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoScale(const Tensor& x, double c, Tensor& out) override;
  void DoTranspose(const Tensor& x, Tensor& out) override;
  void DoSplitHeads(const Tensor& x, int64_t batch, int64_t heads, Tensor& out) override;
  void DoMergeHeads(const Tensor& x, int64_t batch, Tensor& out) override;
  void DoBiasAdd(const Tensor& x, const Tensor& b, Tensor& out) override;
  void RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                      const KernelAttrs& attrs, Tensor& out) override;

 private:
  // Tells the observer of the call for its scope.
  class Observed {
   public:
    Observed(KernelObserver* observer, const KernelCall& call) : observer_(observer) {
      if (observer_) observer_->OnKernelBegin(call);
    }
    ~Observed() {
      if (observer_) observer_->OnKernelEnd();
    }
    Observed(const Observed&) = delete;
    Observed& operator=(const Observed&) = delete;

   private:
    KernelObserver* observer_;
  };
  KernelCall Describe(KernelOp op, std::vector<const Tensor*> operands, const Tensor& out) const {
    KernelCall call;
    call.op = op;
    call.operands = std::move(operands);
    call.out = &out;
    return call;
  }

  KernelObserver* observer_ = nullptr;
};

}  // namespace remat

#endif  // REMAT_ENGINES_PLANNED_RECORDING_KERNELS_H_
