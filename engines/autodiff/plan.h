// Plan: every decision a Planner (planner.h) makes for one run of one
// program, made before the run and then carried out by it. ReverseMode::Run
// makes it with a planning run: the executor on a dry-run tracker (shapes
// and bytes counted, nothing allocated, no kernel run) under a
// PlanRecorder, which asks the engine's planner at each decision point and
// writes the answer down. The run itself then executes under a PlanReader
// over that Plan, which answers from the plan alone: a decision point the
// planning run did not reach, or a loop that starts with other bytes live
// than the planning run saw, is a remat::Error, and so is a decision the run
// never came to (CheckAllRead). So the plan that is printed is the plan
// that ran.
//
// Why a planning run rather than a walk of the program: a loop's schedule
// may depend on what is live when the loop starts (budget:B leaves the loop
// B less the bytes held outside it), which only a simulation of the run
// knows; XLA's rematerialization pass simulates its memory the same way.
// Region decisions depend only on the region (and its needs), so they are
// kept once per region; loop decisions once per instance of the loop (a
// scan inside a scan body, or in a region that is recomputed, is planned at
// every instance).
#ifndef REMAT_ENGINES_AUTODIFF_PLAN_H_
#define REMAT_ENGINES_AUTODIFF_PLAN_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engines/autodiff/planner.h"

namespace remat {

class Plan {
 public:
  struct Saves {
    std::vector<bool> param_needs;
    std::vector<SaveDecision> decisions;  // by body value id
  };
  struct Loop {
    LoopPlan plan;
    int64_t held_outside_bytes = 0;  // what the planning run held as the loop started
  };

  // One line per decision, in the order the planning run made them first:
  //   region <op>: honour (may save) | inline
  //   saves  <op> needs <0110>: <body value> save|offload|recompute ...
  //   loop   <op> #<instance> (<held> bytes held outside): schedule <name> |
  //          checkpoint_every:<K> | step by step | inline
  std::vector<std::string> Lines() const;
  bool empty() const { return order_.empty(); }

 private:
  friend class PlanRecorder;
  friend class PlanReader;
  enum class Kind { kRegion, kSaves, kLoop };
  std::map<const Op*, RegionPlan> regions_;
  std::map<std::pair<const Op*, std::vector<bool>>, std::vector<SaveDecision>> saves_;
  std::map<std::pair<const Op*, int64_t>, Loop> loops_;
  // First-made order, for Lines: (kind, op, needs or instance).
  struct Entry {
    Kind kind;
    const Op* op;
    std::vector<bool> needs;
    int64_t instance = 0;
  };
  std::vector<Entry> order_;
};

// Asks `inner` and writes every answer into `plan`. One run at a time.
class PlanRecorder : public Planner {
 public:
  PlanRecorder(const Planner* inner, Plan* plan) : inner_(inner), plan_(plan) {}
  bool honours_checkpoints() const override { return inner_->honours_checkpoints(); }
  RegionPlan PlanRegion(const Op& region) const override;
  std::vector<SaveDecision> PlanSaves(const Op& region,
                                      const std::vector<bool>& param_needs) const override;
  LoopPlan PlanLoop(const Op& loop, const LoopModel& model) const override;

 private:
  const Planner* inner_;
  Plan* plan_;
  mutable std::map<const Op*, int64_t> instances_;
};

// Answers from `plan` only (see the file comment). One run at a time.
class PlanReader : public Planner {
 public:
  PlanReader(const Plan* plan, bool honours_checkpoints)
      : plan_(plan), honours_checkpoints_(honours_checkpoints) {}
  bool honours_checkpoints() const override { return honours_checkpoints_; }
  RegionPlan PlanRegion(const Op& region) const override;
  std::vector<SaveDecision> PlanSaves(const Op& region,
                                      const std::vector<bool>& param_needs) const override;
  LoopPlan PlanLoop(const Op& loop, const LoopModel& model) const override;
  // Throws remat::Error naming the first loop instance of the plan the run
  // did not reach (regions and saves may be asked more than once or, for a
  // region whose forward pass the run skips, not at all: a loop cannot).
  void CheckAllRead() const;

 private:
  const Plan* plan_;
  bool honours_checkpoints_;
  mutable std::map<const Op*, int64_t> instances_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_PLAN_H_
