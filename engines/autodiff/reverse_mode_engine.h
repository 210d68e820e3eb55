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
#include "engines/autodiff/plan.h"
#include "engines/autodiff/planner.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/budget/peak_budget.h"
#include "engines/exec/program_cache.h"

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
  // The plan of a case (plan.h) is made by its first run and kept
  // (engines/exec/program_cache.h): later runs of the same program
  // structure, argument signature and wrt carry it out without planning
  // again, as jax.jit plans once.
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    ReverseMode reverse_mode(kernels_.get(), planner_.get(), rules_.get());
    std::shared_ptr<const PeakBudgetResolution> resolved;
    if (planner_->honours_checkpoints() && HasPeakBudget(program)) {
      resolved = peak_budgets_.Resolve(
          program, wrt, DTypeSize(kernels_->dtype()), [&](const Program& p) {
            RunOptions dry;
            dry.plan_only = true;
            dry.on_tracker = options.on_tracker;
            return reverse_mode.Run(p, args, wrt, dry).stats;
          });
    }
    const Program& run = resolved ? resolved->program : program;
    if (options.plan_only) return reverse_mode.Run(run, args, wrt, options);
    std::shared_ptr<const Plan> plan = plans_.Find(run, args, wrt);
    if (plan == nullptr) {
      auto made = std::make_shared<Plan>();
      reverse_mode.PlanRun(run, args, wrt, options, made.get());
      plans_.Put(run, args, wrt, made);
      plan = std::move(made);
    }
    return reverse_mode.Run(run, args, wrt, options, plan.get());
  }

 private:
  std::string name_;
  std::unique_ptr<Kernels> kernels_;
  std::unique_ptr<Planner> planner_;
  std::unique_ptr<ExecutorRules> rules_;
  PeakBudgetCache peak_budgets_;
  ProgramCache<Plan> plans_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_REVERSE_MODE_ENGINE_H_
