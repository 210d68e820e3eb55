// The eager engine: stores every residual and ignores checkpoint regions and
// policies. The baseline every other engine is compared with, bit for bit.
#ifndef REMAT_ENGINES_EAGER_EAGER_ENGINE_H_
#define REMAT_ENGINES_EAGER_EAGER_ENGINE_H_

#include <memory>
#include <string>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"

namespace remat {

class EagerEngine : public Engine {
 public:
  // Runs ReverseMode on `kernels`; `name` is how the registry lists it.
  EagerEngine(std::string name, std::unique_ptr<Kernels> kernels)
      : name_(std::move(name)), kernels_(std::move(kernels)) {}

  std::string name() const override { return name_; }
  DType dtype() const override { return kernels_->dtype(); }
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override;

 private:
  std::string name_;
  std::unique_ptr<Kernels> kernels_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_EAGER_EAGER_ENGINE_H_
