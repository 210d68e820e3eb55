#include "engines/planned/recording_kernels.h"

namespace remat {

// Each call is described to the observer, then computed by OneDnnKernels.

void RecordingKernels::RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                                      const KernelAttrs& attrs, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::RunTableKernel(op, operands, attrs, out);
  KernelCall call;
  call.op = op;
  call.operands.assign(operands.begin(), operands.end());
  call.out = &out;
  call.attrs = attrs;
  const Observed observed(observer_, call);
  OneDnnKernels::RunTableKernel(op, operands, attrs, out);
}

}  // namespace remat
