#include "engines/exec/accumulate.h"

#include <cstring>
#include <utility>

#include "engines/api/buffer_hooks.h"
#include "engines/api/error.h"

namespace remat {

void Accumulate(Kernels& kernels, Tensor* sum, Tensor contribution) {
  if (!contribution.defined()) {
    throw Error("Accumulate: an undefined contribution (skip it: rule 2 counts only the "
                "cotangents a backward rule returned)");
  }
  if (!sum->defined()) {
    *sum = std::move(contribution);
    return;
  }
  *sum = kernels.Add(*sum, contribution);
}

StackedGradient::StackedGradient(DType dtype, const Shape& stacked_shape,
                                 const std::shared_ptr<MemoryTracker>& tracker) {
  if (stacked_shape.rank() < 1) {
    throw Error(StrCat("StackedGradient: shape ", stacked_shape.ToString(),
                       " has no leading (step) axis"));
  }
  // Uninitialized: zero-filling the whole stack up front would be one more
  // pass over it; Finish zeroes only the slices no step wrote.
  stack_ = Tensor::Uninitialized(dtype, stacked_shape, tracker);
  filled_.assign(static_cast<size_t>(stacked_shape.dim(0)), false);
}

Tensor StackedGradient::CheckedSlot(int64_t step, const char* caller) const {
  if (!stack_.defined()) throw Error(StrCat("StackedGradient::", caller, " on an undefined stack"));
  if (step < 0 || step >= static_cast<int64_t>(filled_.size())) {
    throw Error(
        StrCat("StackedGradient::", caller, ": step ", step, " of a stack of ", filled_.size()));
  }
  return stack_.Slice(step);
}

void StackedGradient::Set(int64_t step, const Tensor& cotangent) {
  const Tensor slot = CheckedSlot(step, "Set");
  if (!cotangent.defined()) return;
  const size_t i = static_cast<size_t>(step);
  if (cotangent.dry()) {
    // A dry run copies nothing; a recorder (buffer_hooks.h) notes the copy
    // and Finish the slices it must zero.
    if (BufferRecorder* r = ActiveRecorder()) {
      r->OnCopyInto(cotangent, slot);
      filled_[i] = true;
    }
    return;
  }
  if (cotangent.shape() != slot.shape() || cotangent.dtype() != slot.dtype()) {
    throw Error(StrCat("StackedGradient::Set: step ", step, "'s cotangent is ",
                       cotangent.TypeString(), ", a slice of the stack is ", slot.TypeString()));
  }
  if (slot.dry()) return;
  // A cotangent whose kernel wrote it in the slice (Slot) is there already.
  if (cotangent.raw() != slot.raw()) {
    std::memcpy(slot.raw(), cotangent.raw(), static_cast<size_t>(slot.bytes()));
  }
  filled_[i] = true;
}

Tensor StackedGradient::Slot(int64_t step) const { return CheckedSlot(step, "Slot"); }

Tensor StackedGradient::Finish() {
  if (stack_.dry()) {
    if (BufferRecorder* r = ActiveRecorder()) {
      for (size_t i = 0; i < filled_.size(); ++i) {
        if (!filled_[i]) r->OnZeroFill(stack_.Slice(static_cast<int64_t>(i)));
      }
    }
  } else {
    for (size_t i = 0; i < filled_.size(); ++i) {
      if (filled_[i]) continue;
      Tensor slot = stack_.Slice(static_cast<int64_t>(i));
      std::memset(slot.raw(), 0, static_cast<size_t>(slot.bytes()));
    }
  }
  filled_.clear();
  return std::move(stack_);
}

}  // namespace remat
