// Registers "eager": the store-everything baseline on oneDNN's f32 kernels.
#include <memory>

#include "engines/api/registry.h"
#include "engines/eager/eager_engine.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {

REMAT_REGISTER_ENGINE(eager, "eager",
                      "stores every residual, ignores checkpoints (oneDNN, f32): the baseline",
                      [] {
                        return std::make_unique<EagerEngine>("eager",
                                                             std::make_unique<OneDnnKernels>());
                      });

}  // namespace remat
