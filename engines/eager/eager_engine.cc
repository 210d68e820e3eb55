#include "engines/eager/eager_engine.h"

#include "engines/api/registry.h"
#include "engines/eager/reverse_mode.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {

Result EagerEngine::ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                                 const std::vector<int>& wrt, const RunOptions& options) {
  ReverseMode reverse_mode(kernels_.get());
  return reverse_mode.Run(program, args, wrt, options);
}

REMAT_REGISTER_ENGINE(eager, "eager",
                      "stores every residual, ignores checkpoints (oneDNN, f32): the baseline",
                      [] {
                        return std::make_unique<EagerEngine>("eager",
                                                             std::make_unique<OneDnnKernels>());
                      });

}  // namespace remat
