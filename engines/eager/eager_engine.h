// The eager engine: stores every residual and ignores checkpoint regions and
// policies. The baseline every other engine is compared with, bit for bit.
#ifndef REMAT_ENGINES_EAGER_EAGER_ENGINE_H_
#define REMAT_ENGINES_EAGER_EAGER_ENGINE_H_

#include <memory>
#include <string>

#include "engines/autodiff/reverse_mode_engine.h"

namespace remat {

class EagerEngine : public ReverseModeEngine {
 public:
  // Checkpoint regions run inline: everything is stored.
  EagerEngine(std::string name, std::unique_ptr<Kernels> kernels)
      : ReverseModeEngine(std::move(name), std::move(kernels),
                          ReverseModeOptions{.honour_checkpoints = false}) {}
};

}  // namespace remat

#endif  // REMAT_ENGINES_EAGER_EAGER_ENGINE_H_
