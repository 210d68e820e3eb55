#include "harness/gallery/decorator.h"

#include "engines/autodiff/planners.h"
#include "engines/autodiff/reverse_mode_engine.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {

std::unique_ptr<Engine> Recompute(const std::string& name, std::unique_ptr<Kernels> kernels,
                                  std::unique_ptr<ExecutorRules> rules) {
  return std::make_unique<ReverseModeEngine>(name, std::move(kernels), MakeRecomputePlanner(),
                                             std::move(rules));
}

Decorator::Decorator(std::string name)
    : name_(std::move(name)), inner_(Recompute("recompute", std::make_unique<OneDnnKernels>())) {}

Decorator::Decorator(std::string name, std::unique_ptr<Engine> inner)
    : name_(std::move(name)), inner_(std::move(inner)) {}

}  // namespace remat
