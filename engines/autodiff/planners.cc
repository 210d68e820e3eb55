#include "engines/autodiff/planners.h"

#include "engines/api/error.h"
#include "engines/autodiff/save_plan.h"

namespace remat {

std::vector<SaveDecision> InlinePlanner::PlanSaves(const Op& region,
                                                   const std::vector<bool>&) const {
  // The executor asks only for regions PlanRegion honours: none here.
  throw Error(StrCat("InlinePlanner::PlanSaves: ", Program::Describe(region),
                     " runs inline; nothing is planned for it"));
}

RegionPlan PolicyPlanner::PlanRegion(const Op& region) const {
  return {.honour = true, .may_save = region.policy.kind() != PolicyKind::kNothingSaveable};
}

std::vector<SaveDecision> PolicyPlanner::PlanSaves(const Op& region,
                                                   const std::vector<bool>& param_needs) const {
  return remat::PlanSaves(*region.body, param_needs, region.policy);
}

LoopPlan SchedulePlanner::PlanLoop(const Op& loop, const LoopModel& model) const {
  if (loop.schedule.empty()) return {};
  if (loop.kind == OpKind::kScan) {
    // checkpoint_every:K is not an action list: the executor stores the
    // steps between checkpointed ones (their regions inline).
    const int64_t every = CheckpointEvery(loop.schedule);
    if (every > 0) return {.checkpoint_every = every};
  }
  return {.schedule = std::make_shared<Schedule>(
              ParseSchedule(loop.schedule, model.costs(), model.held_outside))};
}

std::unique_ptr<Planner> MakeRecomputePlanner() {
  return std::make_unique<SchedulePlanner>(std::make_unique<PolicyPlanner>());
}

}  // namespace remat
