#include "engines/autodiff/planners.h"

#include <cstdio>

#include "engines/api/error.h"
#include "engines/plan/save_plan.h"
#include "engines/budget/budget_solver.h"

namespace remat {

std::vector<SaveDecision> InlinePlanner::PlanSaves(const Op& region,
                                                   const std::vector<bool>&) const {
  // The executor asks only for regions PlanRegion honours: none here.
  throw Error(StrCat("InlinePlanner::PlanSaves: ", Program::Describe(region),
                     " runs inline; nothing is planned for it"));
}

RegionPlan PolicyPlanner::PlanRegion(const Op& region) const {
  return {.honour = true, .may_save = PolicyMaySave(region.policy)};
}

std::vector<SaveDecision> PolicyPlanner::PlanSaves(const Op& region,
                                                   const std::vector<bool>& param_needs) const {
  if (region.policy.kind() != PolicyKind::kMemoryBudget) {
    return remat::PlanSaves(*region.body, param_needs, region.policy);
  }
  PlanKey key{region.body, param_needs, region.policy.ToString()};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = budget_plans_.find(key);
    if (it != budget_plans_.end()) return it->second;
  }
  // Solved outside the lock (a MILP may take its time limit).
  const BudgetPlan plan = PlanMemoryBudget(
      region, param_needs, dtype_bytes_, [this](const Op& op) { return PlanRegion(op).may_save; });
  std::lock_guard<std::mutex> lock(mutex_);
  budget_plans_[key] = plan.decisions;
  return plan.decisions;
}

LoopPlan SchedulePlanner::PlanLoop(const Op& loop, const LoopModel& model) const {
  if (loop.schedule.empty()) return {};
  if (loop.kind == OpKind::kScan) {
    // checkpoint_every:K is not an action list: the executor stores the
    // steps between checkpointed ones (their regions inline).
    const int64_t every = CheckpointEvery(loop.schedule);
    if (every > 0) return {.checkpoint_every = every};
  }
  const ChainCosts costs = model.costs();
  // The key is everything ParseSchedule reads; flops are printed exactly
  // (%a), so equal keys mean equal inputs.
  std::string key = StrCat(loop.schedule, "|", model.held_outside, "|", costs.after_bytes, "|");
  char flops[40];
  for (double f : costs.step_flops) {
    std::snprintf(flops, sizeof flops, "%a,", f);
    key += flops;
  }
  for (int64_t b : costs.carry_bytes) key += StrCat(b, ",");
  key += "|";
  for (int64_t b : costs.residual_bytes) key += StrCat(b, ",");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = schedules_.find(key);
    if (it != schedules_.end()) return {.schedule = it->second};
  }
  auto schedule =
      std::make_shared<const Schedule>(ParseSchedule(loop.schedule, costs, model.held_outside));
  std::lock_guard<std::mutex> lock(mutex_);
  schedules_.emplace(key, schedule);
  return {.schedule = schedule};
}

std::unique_ptr<Planner> MakeRecomputePlanner() {
  return std::make_unique<SchedulePlanner>(std::make_unique<PolicyPlanner>());
}

}  // namespace remat
