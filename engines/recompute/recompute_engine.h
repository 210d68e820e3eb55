// The recompute engine: honours checkpoint regions (nested to any depth),
// JAX's policies and checkpoint_name labels, and scan schedules, and
// recomputes in the backward pass what it did not save: the ReverseMode
// executor under SchedulePlanner over PolicyPlanner (regions by their
// policy, loops by their schedule; engines/autodiff/planners.h). Same kernels, same
// shapes and the same order of cotangent accumulation as eager (both are
// engines/autodiff's ReverseMode), so its gradients equal eager's bit for bit.
#ifndef REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_
#define REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_

#include <memory>
#include <string>

#include "engines/autodiff/planners.h"
#include "engines/autodiff/reverse_mode_engine.h"

namespace remat {

class RecomputeEngine : public ReverseModeEngine {
 public:
  RecomputeEngine(std::string name, std::unique_ptr<Kernels> kernels)
      : ReverseModeEngine(std::move(name), std::move(kernels),
                          MakeRecomputePlanner()) {}
};

}  // namespace remat

#endif  // REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_
