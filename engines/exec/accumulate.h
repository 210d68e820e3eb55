// Cotangent accumulation by CONTRACT.md section 3: the running sum of a
// value, and the stacked gradient of a scan's xs. A building block: an
// engine may use it (engines/autodiff's ReverseMode and engines/dtr do); an
// engine that sums its own way is held to the same rules by the suite.
#ifndef REMAT_ENGINES_EXEC_ACCUMULATE_H_
#define REMAT_ENGINES_EXEC_ACCUMULATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engines/api/kernels.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/tensor.h"

namespace remat {

// Adds one contribution to a value's running sum (CONTRACT.md 3.3): an
// undefined `*sum` becomes `contribution` itself (no zeros added, no copy);
// otherwise *sum = kernels.Add(*sum, contribution), a new tensor (never in
// place: the old sum may be another value's contribution too). The Add
// allocates in the tracker `kernels` is bound to, in its current category.
// An undefined contribution is an error: "no contribution" is the caller's
// to skip (rule 2 counts only the cotangents a backward rule returned).
void Accumulate(Kernels& kernels, Tensor* sum, Tensor contribution);

// The gradient of a scan's stacked input (CONTRACT.md 3.5): one tensor of
// the stacked shape whose slice i is step i's cotangent of that parameter,
// copied bitwise (or written there by its kernel: Slot); slices of steps that no cotangent reached are zeros
// (filled by Finish, so each slice is written once). Nothing is summed
// across steps. The scan contributes the result once (rule 2), even when
// every slice is zero (CONTRACT.md 3.5: a needed xs always gets its
// contribution).
class StackedGradient {
 public:
  StackedGradient() = default;  // not wanted: defined() is false
  // Allocates the stack (uninitialized: Finish zeroes what Set did not
  // write) in `tracker`, in its current category (the gradients, under the
  // caller's ScopedSite).
  StackedGradient(DType dtype, const Shape& stacked_shape,
                  const std::shared_ptr<MemoryTracker>& tracker);

  bool defined() const { return stack_.defined(); }
  // Step `step`'s cotangent: copied into slice `step`. An undefined
  // cotangent leaves the slice to Finish; so does a dry-run one (no data).
  // A step out of range or a cotangent of another shape is a remat::Error.
  void Set(int64_t step, const Tensor& cotangent);
  // Slice `step` of the stack, for a kernel to write step's cotangent in
  // place (Kernels::CallInto); Set of a cotangent whose elements are that
  // slice's copies nothing.
  Tensor Slot(int64_t step) const;
  // Zeroes the slices no Set reached and returns the stack; the
  // StackedGradient is then undefined.
  Tensor Finish();

 private:
  // Slice `step`, or remat::Error naming `caller` (undefined stack, step
  // out of range).
  Tensor CheckedSlot(int64_t step, const char* caller) const;

  Tensor stack_;
  std::vector<bool> filled_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_EXEC_ACCUMULATE_H_
