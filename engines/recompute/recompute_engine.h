// The recompute engine: honours checkpoint regions (nested to any depth),
// JAX's policies and checkpoint_name labels, and scan schedules, and
// recomputes in the backward pass what it did not save. Same kernels, same
// shapes and the same order of cotangent accumulation as eager (both are
// engines/autodiff's ReverseMode), so its gradients equal eager's bit for bit.
#ifndef REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_
#define REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_

#include <memory>
#include <string>

#include "engines/autodiff/reverse_mode_engine.h"

namespace remat {

class RecomputeEngine : public ReverseModeEngine {
 public:
  RecomputeEngine(std::string name, std::unique_ptr<Kernels> kernels)
      : ReverseModeEngine(std::move(name), std::move(kernels),
                          ReverseModeOptions{.honour_checkpoints = true}) {}
};

}  // namespace remat

#endif  // REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_
