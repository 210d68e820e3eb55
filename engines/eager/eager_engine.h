// The eager engine: stores every residual and ignores checkpoint regions and
// policies. The baseline every other engine is compared with, bit for bit.
#ifndef REMAT_ENGINES_EAGER_EAGER_ENGINE_H_
#define REMAT_ENGINES_EAGER_EAGER_ENGINE_H_

#include <memory>
#include <string>

#include "engines/autodiff/planners.h"
#include "engines/autodiff/reverse_mode_engine.h"

namespace remat {

class EagerEngine : public ReverseModeEngine {
 public:
  // The ReverseMode executor under InlinePlanner: checkpoint regions run
  // inline, scans step by step, chains as their blocks: everything stored.
  EagerEngine(std::string name, std::unique_ptr<Kernels> kernels)
      : ReverseModeEngine(std::move(name), std::move(kernels),
                          std::make_unique<InlinePlanner>()) {}
};

}  // namespace remat

#endif  // REMAT_ENGINES_EAGER_EAGER_ENGINE_H_
