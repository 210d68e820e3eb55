// ReverseModeEngine: an Engine that runs the ReverseMode executor on a set
// of Kernels under a Planner. eager and reference are this class with
// InlinePlanner, recompute with SchedulePlanner over PolicyPlanner
// (engines/eager, engines/recompute).
#ifndef REMAT_ENGINES_AUTODIFF_REVERSE_MODE_ENGINE_H_
#define REMAT_ENGINES_AUTODIFF_REVERSE_MODE_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"
#include "engines/autodiff/planner.h"
#include "engines/autodiff/reverse_mode.h"

namespace remat {

class ReverseModeEngine : public Engine {
 public:
  // `fault` is test-only (harness/gallery).
  ReverseModeEngine(std::string name, std::unique_ptr<Kernels> kernels,
                    std::unique_ptr<Planner> planner, Fault fault = Fault::kNone)
      : name_(std::move(name)),
        kernels_(std::move(kernels)),
        planner_(std::move(planner)),
        fault_(fault) {}

  std::string name() const override { return name_; }
  DType dtype() const override { return kernels_->dtype(); }
  std::string kernels() const override { return kernels_->name(); }
  bool honours_checkpoints() const override { return planner_->honours_checkpoints(); }
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    ReverseMode reverse_mode(kernels_.get(), planner_.get(), fault_);
    return reverse_mode.Run(program, args, wrt, options);
  }

 private:
  std::string name_;
  std::unique_ptr<Kernels> kernels_;
  std::unique_ptr<Planner> planner_;
  Fault fault_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_REVERSE_MODE_ENGINE_H_
