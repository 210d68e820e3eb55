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
#include "engines/autodiff/executor_rules.h"
#include "engines/autodiff/planner.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/budget/peak_budget.h"

namespace remat {

class ReverseModeEngine : public Engine {
 public:
  // `rules`: the executor's bookkeeping rules (executor_rules.h); null: the
  // contract's.
  ReverseModeEngine(std::string name, std::unique_ptr<Kernels> kernels,
                    std::unique_ptr<Planner> planner, std::unique_ptr<ExecutorRules> rules = nullptr)
      : name_(std::move(name)),
        kernels_(std::move(kernels)),
        planner_(std::move(planner)),
        rules_(std::move(rules)) {}

  std::string name() const override { return name_; }
  DType dtype() const override { return kernels_->dtype(); }
  std::string kernels() const override { return kernels_->name(); }
  bool honours_checkpoints() const override { return planner_->honours_checkpoints(); }
  // A program with memory_budget:peak:... regions runs resolved
  // (engines/budget/peak_budget.h): dry runs of this executor choose the
  // fraction every peak-mode region gets, once per (program, wrt). An engine
  // that runs regions inline (eager, reference) ignores policies, this one
  // included.
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    ReverseMode reverse_mode(kernels_.get(), planner_.get(), rules_.get());
    if (planner_->honours_checkpoints() && HasPeakBudget(program)) {
      const std::shared_ptr<const PeakBudgetResolution> resolved = peak_budgets_.Resolve(
          program, wrt, DTypeSize(kernels_->dtype()), [&](const Program& p) {
            RunOptions dry;
            dry.plan_only = true;
            dry.on_tracker = options.on_tracker;
            return reverse_mode.Run(p, args, wrt, dry).stats;
          });
      return reverse_mode.Run(resolved->program, args, wrt, options);
    }
    return reverse_mode.Run(program, args, wrt, options);
  }

 private:
  std::string name_;
  std::unique_ptr<Kernels> kernels_;
  std::unique_ptr<Planner> planner_;
  std::unique_ptr<ExecutorRules> rules_;
  PeakBudgetCache peak_budgets_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_REVERSE_MODE_ENGINE_H_
