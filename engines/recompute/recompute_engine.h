// The recompute engine: honours checkpoint regions (nested to any depth),
// JAX's policies and checkpoint_name labels, and recomputes in the backward
// pass what it did not save. Same kernels, same shapes and the same order of
// cotangent accumulation as eager (both are engines/autodiff's ReverseMode),
// so its gradients equal eager's bit for bit.
#ifndef REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_
#define REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_

#include <memory>
#include <string>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"

namespace remat {

class RecomputeEngine : public Engine {
 public:
  RecomputeEngine(std::string name, std::unique_ptr<Kernels> kernels)
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

#endif  // REMAT_ENGINES_RECOMPUTE_RECOMPUTE_ENGINE_H_
