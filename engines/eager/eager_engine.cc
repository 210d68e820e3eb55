#include "engines/eager/eager_engine.h"

#include "engines/autodiff/reverse_mode.h"

namespace remat {

Result EagerEngine::ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                                 const std::vector<int>& wrt, const RunOptions& options) {
  // The store-everything baseline: checkpoint regions run inline.
  ReverseMode reverse_mode(kernels_.get(), ReverseModeOptions{.honour_checkpoints = false});
  return reverse_mode.Run(program, args, wrt, options);
}

}  // namespace remat
