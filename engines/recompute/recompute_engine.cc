#include "engines/recompute/recompute_engine.h"

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {

Result RecomputeEngine::ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                                     const std::vector<int>& wrt, const RunOptions& options) {
  ReverseMode reverse_mode(kernels_.get(), ReverseModeOptions{.honour_checkpoints = true});
  return reverse_mode.Run(program, args, wrt, options);
}

REMAT_REGISTER_ENGINE(recompute, "recompute",
                      "honours checkpoint regions and JAX's policies, recomputes in the backward "
                      "pass (oneDNN, f32)",
                      [] {
                        return std::make_unique<RecomputeEngine>(
                            "recompute", std::make_unique<OneDnnKernels>());
                      });

}  // namespace remat
