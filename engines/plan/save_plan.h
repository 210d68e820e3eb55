// What a program's backward pass reads, and what a checkpoint region under
// a policy keeps (CONTRACT.md sections 2 and 3; JAX's policies). Static
// analysis of a Program: no tensors. Shared by ReverseMode (the executor)
// and the policy planner (planners.h).
#ifndef REMAT_ENGINES_PLAN_SAVE_PLAN_H_
#define REMAT_ENGINES_PLAN_SAVE_PLAN_H_

#include <vector>

#include "engines/api/policy.h"
#include "engines/api/program.h"

namespace remat {

// needs[v]: value v's cotangent leads to a wanted gradient, i.e. v depends
// on a parameter whose param_needs[i] is true (CONTRACT.md section 2: the OR
// of its inputs' needs, in program order).
std::vector<bool> ValueNeeds(const Program& p, const std::vector<bool>& param_needs);

// The values the backward pass of `p` reads when values want cotangents as
// `value_needs` says: each primitive's residuals (SavesFor) and every input
// of a structural op (checkpoint, scan, chain).
std::vector<bool> ResidualValues(const Program& p, const std::vector<bool>& value_needs);

// What a honoured checkpoint region whose body is `body` keeps under
// `policy`, by body value id (kSave, kOffload, or kRecompute: not kept).
// A policy only says what may be saved (jax.checkpoint's policies); the
// region keeps what its recomputation would otherwise have to produce:
// - the candidates are the values the backward pass reads, and everything
//   the recomputation of those would compute on the way;
// - a name and the value it labels are one tensor: keeping one keeps both;
// - a candidate is kept only if the recomputation, given everything else
//   kept, would read it (everything_saveable keeps what eager keeps, not the
//   inputs of values it already keeps).
std::vector<SaveDecision> PlanSaves(const Program& body, const std::vector<bool>& param_needs,
                                    const Policy& policy);

// Which parameters of a honoured region's body its backward pass reads,
// given what the region keeps (`decisions`, by body value: PlanSaves' or any
// planner's): a backward rule reads it, or a value that is not kept and must
// be recomputed does. The others need not be kept: under
// everything_saveable a region keeps what eager keeps, not its inputs too.
std::vector<bool> ParamsRead(const Program& body, const std::vector<bool>& param_needs,
                             const std::vector<SaveDecision>& decisions);

}  // namespace remat

#endif  // REMAT_ENGINES_PLAN_SAVE_PLAN_H_
