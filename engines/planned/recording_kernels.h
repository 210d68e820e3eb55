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
  // Every kernel call (kernels.h: every kernel is a kernel of the table).
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
  KernelObserver* observer_ = nullptr;
};

}  // namespace remat

#endif  // REMAT_ENGINES_PLANNED_RECORDING_KERNELS_H_
