#include "engines/eager/eager_engine.h"

#include "engines/eager/reverse_mode.h"

namespace remat {

Result EagerEngine::ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                                 const std::vector<int>& wrt, const RunOptions& options) {
  ReverseMode reverse_mode(kernels_.get());
  return reverse_mode.Run(program, args, wrt, options);
}

}  // namespace remat
