// Planner: the decisions of a reverse-mode run that are made ahead, per
// structural op, apart from the execution that carries them out
// (ReverseMode, reverse_mode.h). The executor asks at each decision point of
// a planning run (a dry run), which writes the answers into a Plan
// (plan.h); the run then carries out that plan, and never asks the planner:
//
//   a checkpoint region (OpKind::kCheckpoint) being differentiated:
//     PlanRegion   honour it (keep its inputs and what it saves; recompute
//                  the rest in the backward pass) or run it inline (its ops
//                  as if they stood in the enclosing program: store all);
//     PlanSaves    a honoured region: what it keeps, by body value
//                  (SaveDecision: kSave on the device, kOffload to the host
//                  tier, kRecompute);
//   a scan or a chain (OpKind::kScan, kChain) being differentiated:
//     PlanLoop     a Schedule (engines/schedule: which carries to snapshot,
//                  what to recompute), checkpoint_every:K (a scan), or
//                  nothing (step by step, every step's residuals kept; a
//                  chain inline).
//
// None of these decisions can change the bits (CONTRACT.md section 3: the
// executor keeps the order of accumulation whatever it is told); they decide
// memory and recomputation. The planners of remat-bench (planners.h):
// eager is InlinePlanner, recompute is SchedulePlanner over PolicyPlanner.
//
// Why this shape: the decisions eager, recompute and the schedules differ in
// are all static (a function of the program, the needs and the loop's
// costs), so one executor serves them and a planner is a few lines. An
// online engine decides at allocation time instead, from what is live; its
// decision point is the tracker's pressure hook (MemoryTracker::
// set_pressure_hook, RunMemory::SetMemoryCap), not a Planner: engines/dtr
// keeps its own traversal (it must be able to evict and recompute any value
// at any allocation, which a tape of saved residuals cannot) and shares the
// building blocks of engines/exec with this executor instead.
#ifndef REMAT_ENGINES_AUTODIFF_PLANNER_H_
#define REMAT_ENGINES_AUTODIFF_PLANNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/policy.h"
#include "engines/api/program.h"
#include "engines/schedule/schedule.h"

namespace remat {

struct RegionPlan {
  bool honour = false;  // false: inline
  // A honoured region whose forward pass may keep values (its policy is not
  // nothing_saveable): the recomputation of an enclosing region must run it
  // to keep them again; one that may keep nothing is not run there (only its
  // inputs are kept).
  bool may_save = false;
};

// What the executor knows of a loop when it asks for its plan: its costs in
// the engine's dtype by the model of engines/schedule (computed on demand:
// most loops of most planners need none), and the activation bytes the run
// holds apart from the loop as it starts (what a budget:B leaves the loop is
// B less this).
struct LoopModel {
  std::function<ChainCosts()> costs;
  int64_t held_outside = 0;
};

struct LoopPlan {
  std::shared_ptr<const Schedule> schedule;  // null: no schedule
  int64_t checkpoint_every = 0;              // a scan without a schedule: checkpoint_every:K
};

class Planner {
 public:
  virtual ~Planner() = default;
  // Whether the plans can honour checkpoint regions and schedules
  // (Engine::honours_checkpoints()).
  virtual bool honours_checkpoints() const = 0;
  virtual RegionPlan PlanRegion(const Op& region) const = 0;
  // Called only for a region PlanRegion honours; `param_needs` by body
  // parameter. One decision per body value.
  virtual std::vector<SaveDecision> PlanSaves(const Op& region,
                                              const std::vector<bool>& param_needs) const = 0;
  // `loop` is a kScan or a kChain. Bad schedule text is a remat::Error.
  virtual LoopPlan PlanLoop(const Op& loop, const LoopModel& model) const = 0;
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_PLANNER_H_
