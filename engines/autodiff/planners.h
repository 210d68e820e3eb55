// The planners of remat-bench's reverse-mode engines (planner.h):
//   InlinePlanner     eager and reference: every region inline, no
//                     schedules: everything stored.
//   PolicyPlanner     every region honoured under its own policy
//                     (Op::policy: JAX's policies, checkpoint_name labels,
//                     offload; memory_budget:B by engines/budget's solver);
//                     no schedules.
//   SchedulePlanner   a region planner, plus the schedule a scan or chain
//                     carries (Op::schedule, set by ApplySchedule), parsed
//                     by engines/schedule against the executor's cost model.
// recompute is SchedulePlanner over PolicyPlanner.
#ifndef REMAT_ENGINES_AUTODIFF_PLANNERS_H_
#define REMAT_ENGINES_AUTODIFF_PLANNERS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "engines/autodiff/planner.h"

namespace remat {

class InlinePlanner : public Planner {
 public:
  bool honours_checkpoints() const override { return false; }
  RegionPlan PlanRegion(const Op&) const override { return {}; }
  std::vector<SaveDecision> PlanSaves(const Op& region,
                                      const std::vector<bool>& param_needs) const override;
  LoopPlan PlanLoop(const Op&, const LoopModel&) const override { return {}; }
};

class PolicyPlanner : public Planner {
 public:
  // `dtype_bytes`: the size of an element of the engine's dtype, what a
  // memory_budget:B in bytes counts in (recompute runs in f32).
  explicit PolicyPlanner(int64_t dtype_bytes = 4) : dtype_bytes_(dtype_bytes) {}
  bool honours_checkpoints() const override { return true; }
  // may_save: false for nothing_saveable and for a memory_budget whose
  // budget is 0 bytes (it keeps nothing either).
  RegionPlan PlanRegion(const Op& region) const override;
  // PlanSaves of save_plan.h under the region's policy; under memory_budget,
  // PlanMemoryBudget's decisions (engines/budget/budget_solver.h), solved
  // once per region body and needs and remembered.
  std::vector<SaveDecision> PlanSaves(const Op& region,
                                      const std::vector<bool>& param_needs) const override;
  LoopPlan PlanLoop(const Op&, const LoopModel&) const override { return {}; }

 private:
  int64_t dtype_bytes_;
  // Plans by (region body, needs, policy text). The key holds the body, so
  // its address is not reused by another program while it is remembered.
  using PlanKey = std::tuple<std::shared_ptr<const Program>, std::vector<bool>, std::string>;
  mutable std::map<PlanKey, std::vector<SaveDecision>> budget_plans_;
  mutable std::mutex mutex_;
};

class SchedulePlanner : public Planner {
 public:
  explicit SchedulePlanner(std::unique_ptr<Planner> regions) : regions_(std::move(regions)) {}
  bool honours_checkpoints() const override { return true; }
  RegionPlan PlanRegion(const Op& region) const override { return regions_->PlanRegion(region); }
  std::vector<SaveDecision> PlanSaves(const Op& region,
                                      const std::vector<bool>& param_needs) const override {
    return regions_->PlanSaves(region, param_needs);
  }
  // No schedule text: none. A scan's checkpoint_every:K: that K. Anything
  // else: ParseSchedule(text, model.costs(), model.held_outside), solved once
  // per (text, costs, held bytes) and kept: a budget:B on a chain of
  // differing blocks is a DP of up to a few hundred ms that every later run
  // of the same shapes would otherwise pay again (jax.jit plans once).
  LoopPlan PlanLoop(const Op& loop, const LoopModel& model) const override;

 private:
  std::unique_ptr<Planner> regions_;
  mutable std::map<std::string, std::shared_ptr<const Schedule>> schedules_;
  mutable std::mutex mutex_;
};

// recompute's planner: SchedulePlanner over PolicyPlanner.
std::unique_ptr<Planner> MakeRecomputePlanner();

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_PLANNERS_H_
