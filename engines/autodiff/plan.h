// Plan: every decision a Planner (planner.h) makes for one run of one
// program, made before the run and then carried out by it. ReverseMode
// makes it with a planning run: the executor on a dry-run tracker (shapes
// and bytes counted, nothing allocated, no kernel run) under a
// PlanRecorder, which asks the engine's planner at each decision point and
// writes the answer down, in order. The run itself then executes under a
// PlanReader over that Plan, which answers from the plan alone, decision by
// decision: a decision point the plan does not have next (another op,
// another kind of decision, other needs), or a loop that starts with other
// bytes live than the planning run saw, is a remat::Error, and so is a
// decision the run never came to (CheckAllRead). So the plan that is
// printed is the plan that ran.
//
// Why a planning run rather than a walk of the program: a loop's schedule
// may depend on what is live when the loop starts (budget:B leaves the loop
// B less the bytes held outside it), which only a simulation of the run
// knows; XLA's rematerialization pass simulates its memory the same way.
// Why a sequence: the executor is deterministic and a dry run takes the
// run's path exactly (that is what makes its predicted peak the measured
// one), so the run asks the same questions in the same order. A Plan holds
// no pointer into the program: it holds for every program of the same
// structure (program_identity.h), so an engine keeps it for the runs of the
// same case (engines/exec/program_cache.h) and plans once, as jax.jit does.
#ifndef REMAT_ENGINES_AUTODIFF_PLAN_H_
#define REMAT_ENGINES_AUTODIFF_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/autodiff/planner.h"

namespace remat {

class Plan {
 public:
  enum class Kind { kRegion, kSaves, kLoop };
  struct Decision {
    Kind kind;
    OpKind op_kind;
    std::string site;   // the op's: with op_kind, what the run's op must match
    std::string scope;  // the op's, for messages and Lines
    // The op's number among the ops the planning run decided for, in order
    // of their first decision: ops of one site (a region traced in a loop)
    // are told apart, and the run's op must be the same one.
    int op = 0;
    RegionPlan region;                   // kRegion
    std::vector<bool> param_needs;       // kSaves
    std::vector<SaveDecision> saves;     // kSaves: by body value id
    LoopPlan loop;                       // kLoop
    int64_t instance = 0;                // kLoop: the how-manieth run of this loop
    int64_t held_outside_bytes = 0;      // kLoop: live as the loop started
  };

  // One line per distinct decision, in the order first made:
  //   region [N] <op>: honour (may save) | honour (saves nothing) | inline
  //   saves  [N] <op> needs <0110>: %<body value>=save|offload|recompute ...
  //   loop   [N] <op> #<instance> (<held> bytes held outside): schedule <name> (...)
  //          | checkpoint_every:<K> | no schedule (...)
  std::vector<std::string> Lines() const;
  const std::vector<Decision>& decisions() const { return decisions_; }
  // The decision's op as Program::Describe names it.
  static std::string Describe(const Decision& d);

  // The planning run's peak: the run's, predicted.
  int64_t predicted_peak_bytes = -1;
  std::string predicted_peak_site;

 private:
  friend class PlanRecorder;
  std::vector<Decision> decisions_;
};

// Asks `inner` and appends every answer to `plan`. One run at a time.
class PlanRecorder : public Planner {
 public:
  PlanRecorder(const Planner* inner, Plan* plan) : inner_(inner), plan_(plan) {}
  bool honours_checkpoints() const override { return inner_->honours_checkpoints(); }
  RegionPlan PlanRegion(const Op& region) const override;
  std::vector<SaveDecision> PlanSaves(const Op& region,
                                      const std::vector<bool>& param_needs) const override;
  LoopPlan PlanLoop(const Op& loop, const LoopModel& model) const override;

 private:
  Plan::Decision& Append(Plan::Kind kind, const Op& op) const;
  const Planner* inner_;
  Plan* plan_;
  mutable std::unordered_map<const Op*, int> ops_;  // the ops' numbers
  mutable std::vector<int64_t> instances_;          // by op number
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
  // Throws remat::Error if the run did not come to every decision.
  void CheckAllRead() const;

 private:
  const Plan::Decision& Next(Plan::Kind kind, const Op& op) const;
  const Plan* plan_;
  bool honours_checkpoints_;
  mutable size_t next_ = 0;
  mutable std::unordered_map<const Op*, int> ops_;  // numbered as the recorder did
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_PLAN_H_
