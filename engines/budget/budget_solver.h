// The memory_budget:B planner (engines/api/policy.h): for one honoured
// checkpoint region, which body values to save so that its backward pass
// recomputes the fewest FLOPs while the values it saves take at most B bytes
// (torch.compile's activation_memory_budget; Checkmate, Jain et al., MLSys
// 2020), decided per value over any graph, not per block of a chain.
//
// The model is the executor's (engines/autodiff/reverse_mode.h), exactly:
// - A region's backward pass re-runs its body once (Forward with the saved
//   values substituted): an op runs iff its output is not saved and it is
//   wanted (a residual: what a backward rule reads, ResidualValues; or an
//   input of an op that runs), or it records (a scan or chain whose output
//   needs a cotangent: it always runs, saved or not; a nested honoured
//   region that may save: it runs unless its output is saved).
// - A name and the value it labels are one tensor: they form one class,
//   saved together for the bytes of one (what the executor's capture does).
// - Recomputed FLOPs are the forward FLOPs of the ops that run (the FLOP
//   model of engines/api/kernels.h, ForwardFlops); a nested region or loop
//   that runs costs its whole forward pass. A nested region's own backward
//   recomputation is its own plan's business, not counted here.
// - Saved bytes: the classes saved, each once.
//
// Why one decision per value is exact (Checkmate's R and S matrices
// collapse): each region is recomputed once, in its backward pass, and a
// value is computed at most once in that pass. Checkmate's R[t][i]
// ("computed at stage t") becomes r_i ("recomputed in the backward pass") and
// S[t][i] ("kept into stage t") becomes s_i ("kept from the forward pass"),
// with its constraints: a residual is saved or recomputed (s_i + r_i >= 1);
// an op that is recomputed has every input available (s_j + r_j >= r_i,
// region inputs always available); the saved bytes sum to at most B. For a
// save set S the cheapest r is the closure the executor runs (FLOPs are
// non-negative), so min sum(flops_i r_i) over this MILP is the least
// recomputation of any save set within B.
//
// Solvers: when no value that may be recomputed reads another value that
// may be recomputed (each is recomputed from region inputs or from loops
// that run anyway), the costs add up and the problem is a 0-1 knapsack,
// solved exactly by dynamic programming over the Pareto front of
// (bytes, FLOPs saved). Otherwise the MILP above is solved by GLPK's branch
// and cut (glp_intopt) under a limit of branch-and-bound nodes (the same
// plan on any machine) and, as a backstop, of time; a solve stopped by
// either returns its best integer solution (or, if it found none, saving nothing,
// which is always feasible) with proven_optimal false.
//
// This file's mode: the least recomputation within saved bytes B. The second
// mode, memory_budget:peak:B (the least recomputation whose whole run's peak
// is at most B), needs dry runs of the whole program, not one region: it is
// engines/budget/peak_budget.h, which turns every peak-mode region's budget
// into a fraction for this planner before the run (BudgetFront gives it the
// fractions at which a region's plan changes). A peak-mode policy that
// reaches BudgetBytes unresolved throws.
//
// After either solver, saved classes that save no FLOPs are dropped (one at
// a time, while the FLOPs stay the same): the plan never keeps more bytes
// than it needs for its FLOPs, so B = 1 keeps at most what
// everything_saveable keeps.
#ifndef REMAT_ENGINES_BUDGET_BUDGET_SOLVER_H_
#define REMAT_ENGINES_BUDGET_BUDGET_SOLVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engines/api/policy.h"
#include "engines/api/program.h"

namespace remat {

// A region's problem in classes (a value and the names that label it).
struct BudgetProblem {
  int num_values = 0;         // of the body
  std::vector<int> class_of;  // by body value; -1 for a region input
  struct Class {
    std::vector<int> values;   // body values in the class (the root first)
    int64_t bytes = 0;         // one tensor
    int64_t flops = 0;         // its ops' forward FLOPs when it runs
    std::vector<int> inputs;   // classes its ops read (region inputs left out)
    bool saveable = true;      // false: a loop's output (the executor never substitutes it)
    bool must_have = false;    // a residual, or a nested region that records
    bool always_runs = false;  // a loop that records: runs whatever is saved
  };
  std::vector<Class> classes;  // in program order
};

// The problem of region `body` under `param_needs`, for values of
// `dtype_bytes` bytes per element. `may_save(op)`: whether the nested
// honoured checkpoint `op` may save (RegionPlan::may_save), i.e. must run in
// a recomputation to keep its values again.
BudgetProblem MakeBudgetProblem(const Program& body, const std::vector<bool>& param_needs,
                                int64_t dtype_bytes,
                                const std::function<bool(const Op&)>& may_save);

// The FLOPs a recomputation runs when the classes with saved[c] true are
// kept (the executor's closure), and the bytes they take.
int64_t RecomputedFlops(const BudgetProblem& problem, const std::vector<bool>& saved);
int64_t SavedBytes(const BudgetProblem& problem, const std::vector<bool>& saved);

struct BudgetOptions {
  int64_t budget_bytes = 0;
  // The MILP's limits. Nodes first: GLPK's branch and bound stops after
  // this many subproblems, wherever it runs, so the plan does not depend on
  // the machine's speed (GLPK searches some 2,000 nodes a second on a
  // MobileNetV2's whole-program region; its hard budgets kept the same best
  // plan from 500 nodes to the 20,000 of 10 s). Time is the backstop
  // (GLPK's tm_lim) for a problem whose nodes are slow.
  int64_t node_limit = 1000;
  double time_limit_seconds = 10;
  // Tests: use the MILP even where the knapsack applies.
  bool force_milp = false;
};

struct BudgetPlan {
  std::vector<bool> saved;              // by class
  std::vector<SaveDecision> decisions;  // by body value (kSave / kRecompute)
  int64_t saved_bytes = 0;
  int64_t recomputed_flops = 0;
  bool proven_optimal = true;
  std::string solver;  // "knapsack", "milp", "trivial" (nothing to decide)
};

// The least-recomputation plan within options.budget_bytes (>= 0).
BudgetPlan SolveBudget(const BudgetProblem& problem, const BudgetOptions& options);

// The bytes everything_saveable keeps in region `body` (engines/autodiff's
// PlanSaves), classes counted once: what a fraction B is a fraction of.
int64_t EverythingSaveableBytes(const Program& body, const std::vector<bool>& param_needs,
                                const BudgetProblem& problem);

// The byte budget memory_budget:B gives region `body`: B itself, or the
// fraction B of EverythingSaveableBytes, rounded down. Throws for an
// unresolved memory_budget:peak:... (see peak_budget.h).
int64_t BudgetBytes(const MemoryBudget& budget, const Program& body,
                    const std::vector<bool>& param_needs, const BudgetProblem& problem);

// The whole planner: SaveDecisions for region `op` (a kCheckpoint under a
// memory_budget policy), with the plan that made them.
BudgetPlan PlanMemoryBudget(const Op& region, const std::vector<bool>& param_needs,
                            int64_t dtype_bytes, const std::function<bool(const Op&)>& may_save,
                            double time_limit_seconds = 10);

// The saved bytes of the plans SolveBudget returns as the budget falls from
// `most` to 0: the first at `most`, each next at one byte less than the
// previous plan keeps, down to a plan that keeps nothing. Between two of
// these the least recomputation is constant (it only falls as the budget
// grows, and the plan at the higher end is feasible down to its own bytes):
// with the knapsack the plan itself is too; the MILP may return another
// save set of the same FLOPs. One solve per point of the front.
std::vector<int64_t> BudgetFront(const BudgetProblem& problem, int64_t most,
                                 double time_limit_seconds = 10);

// Whether a honoured region under `policy` may keep values
// (RegionPlan::may_save of PolicyPlanner): false for nothing_saveable and for
// a memory_budget of 0 (bytes or fraction), which keeps nothing either; true
// for an unresolved memory_budget:peak:... .
bool PolicyMaySave(const Policy& policy);

// One line per memory_budget region of `program` (nested ones and those in
// scan bodies included; a scan's step after the first, whose needs every
// later step shares), differentiated for `wrt`: its budget, the bytes it
// keeps of what everything_saveable would, the FLOPs it recomputes, the
// solver, and whether the plan is proven optimal ("NOT proven optimal" when
// the MILP's node or time limit stopped it). What `remat run` prints.
std::vector<std::string> DescribeBudgetPlans(const Program& program, const std::vector<int>& wrt,
                                             int64_t dtype_bytes);

}  // namespace remat

#endif  // REMAT_ENGINES_BUDGET_BUDGET_SOLVER_H_
