// Registers "recompute" (oneDNN kernels, f32).
#include "engines/recompute/recompute_engine.h"

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {

REMAT_REGISTER_ENGINE(recompute, "recompute",
                      "honours checkpoint regions and JAX's policies, recomputes in the backward "
                      "pass (oneDNN, f32)",
                      [] {
                        return std::make_unique<RecomputeEngine>(
                            "recompute", std::make_unique<OneDnnKernels>());
                      });

}  // namespace remat
