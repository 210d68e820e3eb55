// The memory_budget solver is optimal: on the regions of small random
// programs (the fuzzer's generator), exhaustive search over every save set
// finds none with fewer recomputed FLOPs within the budget, for the knapsack,
// the MILP, and whichever SolveBudget picks; B = 1 recomputes what
// everything_saveable recomputes with no more bytes; B = 0 keeps nothing;
// FLOPs fall and bytes rise with B; a time or node limit too short to
// prove optimality says so and still returns a plan within the budget.
#include "engines/budget/budget_solver.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <limits>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/tracer.h"
#include "engines/plan/save_plan.h"
#include "harness/random_program.h"

namespace remat {
namespace {

bool MaySave(const Op& op) { return op.policy.kind() != PolicyKind::kNothingSaveable; }

// Every checkpoint region's body in `p`, nested ones and those in scan
// bodies included.
void CollectRegions(const Program& p, std::vector<const Program*>* out) {
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCheckpoint) out->push_back(op.body.get());
    if (op.body) CollectRegions(*op.body, out);
  }
}

// The least recomputed FLOPs of any save set within `budget`, by
// enumeration of the subsets of saveable classes (-1 when too many).
int64_t BruteForce(const BudgetProblem& p, int64_t budget) {
  std::vector<int> free;
  for (size_t c = 0; c < p.classes.size(); ++c) {
    if (p.classes[c].saveable) free.push_back(static_cast<int>(c));
  }
  if (free.size() > 16) return -1;
  int64_t best = std::numeric_limits<int64_t>::max();
  std::vector<bool> saved(p.classes.size(), false);
  for (uint32_t mask = 0; mask < (1u << free.size()); ++mask) {
    for (size_t i = 0; i < free.size(); ++i) saved[free[i]] = (mask >> i) & 1;
    if (SavedBytes(p, saved) > budget) continue;
    best = std::min(best, RecomputedFlops(p, saved));
  }
  return best;
}

std::vector<bool> AllTrue(const Program& body) {
  return std::vector<bool>(body.num_params(), true);
}

TEST(BudgetSolverTest, ExhaustiveSearchFindsNothingBetterOnRandomPrograms) {
  int regions = 0, milp = 0, knapsack = 0, compared = 0, nontrivial = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    RandomOptions options;
    options.max_ops = 8;
    options.max_dim = 4;
    const RandomCase c = MakeRandomCase(seed, options);
    std::vector<const Program*> bodies;
    CollectRegions(c.program, &bodies);
    for (const Program* body : bodies) {
      ++regions;
      // All parameters needed, and only the first (fewer residuals).
      for (int variant = 0; variant < 2; ++variant) {
        std::vector<bool> needs = AllTrue(*body);
        if (variant == 1) {
          for (size_t i = 1; i < needs.size(); ++i) needs[i] = false;
        }
        const BudgetProblem p = MakeBudgetProblem(*body, needs, 4, MaySave);
        const int64_t all = EverythingSaveableBytes(*body, needs, p);
        for (double f : {0.0, 0.2, 0.5, 0.8, 1.0}) {
          const int64_t budget = static_cast<int64_t>(f * static_cast<double>(all));
          const int64_t want = BruteForce(p, budget);
          if (want < 0) continue;
          ++compared;
          BudgetOptions o;
          o.budget_bytes = budget;
          const BudgetPlan plan = SolveBudget(p, o);
          EXPECT_EQ(plan.recomputed_flops, want)
              << "seed " << seed << " budget " << budget << " solver " << plan.solver << "\n"
              << ToString(*body);
          EXPECT_LE(plan.saved_bytes, budget);
          EXPECT_TRUE(plan.proven_optimal);
          milp += plan.solver == "milp";
          if (want != RecomputedFlops(p, std::vector<bool>(p.classes.size(), false))) ++nontrivial;
          knapsack += plan.solver == "knapsack";
          o.force_milp = true;
          const BudgetPlan by_milp = SolveBudget(p, o);
          EXPECT_EQ(by_milp.recomputed_flops, want) << "seed " << seed << " (MILP)";
          EXPECT_LE(by_milp.saved_bytes, budget);
        }
      }
    }
  }
  std::cout << regions << " regions, " << compared << " (region, needs, budget) cases compared "
            << "with exhaustive search (" << nontrivial << " where saving something pays; " << milp
            << " solved by the MILP, " << knapsack << " by the knapsack)\n";
  // The generator must exercise both solvers, not only trivial regions.
  EXPECT_GT(regions, 100);
  EXPECT_GT(compared, 500);
  EXPECT_GT(milp, 50);
  EXPECT_GT(knapsack, 10);
  EXPECT_GT(nontrivial, 200);
}

TEST(BudgetSolverTest, EndsMatchJaxPoliciesAndCurveIsMonotone) {
  int checked = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const RandomCase c = MakeRandomCase(seed, RandomOptions{});
    std::vector<const Program*> bodies;
    CollectRegions(c.program, &bodies);
    for (const Program* body : bodies) {
      const std::vector<bool> needs = AllTrue(*body);
      const BudgetProblem p = MakeBudgetProblem(*body, needs, 4, MaySave);
      const int64_t all = EverythingSaveableBytes(*body, needs, p);
      // everything_saveable's own save set in classes, and its FLOPs.
      const std::vector<SaveDecision> d =
          PlanSaves(*body, needs, Policy(PolicyKind::kEverythingSaveable));
      std::vector<bool> everything(p.classes.size(), false);
      for (int v = body->num_params(); v < body->num_values(); ++v) {
        if (d[v] != SaveDecision::kRecompute) everything[p.class_of[v]] = true;
      }
      std::vector<bool> nothing(p.classes.size(), false);
      int64_t last_flops = std::numeric_limits<int64_t>::max(), last_bytes = -1;
      for (int i = 0; i <= 10; ++i) {
        BudgetOptions o;
        o.budget_bytes = static_cast<int64_t>(i / 10.0 * static_cast<double>(all));
        const BudgetPlan plan = SolveBudget(p, o);
        EXPECT_LE(plan.recomputed_flops, last_flops) << "seed " << seed;
        last_flops = plan.recomputed_flops;
        last_bytes = plan.saved_bytes;
        if (i == 0) {
          EXPECT_EQ(plan.saved_bytes, 0) << "seed " << seed;
          EXPECT_EQ(plan.recomputed_flops, RecomputedFlops(p, nothing)) << "seed " << seed;
        }
      }
      // B = 1: at most everything_saveable's FLOPs (fewer where it does not
      // keep a nested region's output that its recomputation re-runs), at
      // most its bytes.
      EXPECT_LE(last_flops, RecomputedFlops(p, everything)) << "seed " << seed;
      EXPECT_LE(last_bytes, all) << "seed " << seed;
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

// A long chain of sin ops where every value is a residual and each is read
// by the next: a MILP with hundreds of binaries. A 1 ms limit stops GLPK
// before it proves anything; the plan is still within the budget, and says
// it is not proven optimal. With time, it is.
TEST(BudgetSolverTest, TimeLimitReturnsAValidPlanMarkedNotProven) {
  Program body =
      Trace("long", {{"x", Shape({16})}, {"w", Shape({16})}}, [](const std::vector<Var>& in) {
        Var y = in[0];
        for (int i = 0; i < 400; ++i) y = i % 3 == 0 ? mul(sin(y), in[1]) : cos(sin(y));
        return sum(y);
      });
  const std::vector<bool> needs = AllTrue(body);
  const BudgetProblem p = MakeBudgetProblem(body, needs, 4, MaySave);
  const int64_t all = EverythingSaveableBytes(body, needs, p);
  BudgetOptions o;
  o.budget_bytes = all / 3 + 4;
  o.time_limit_seconds = 0.001;
  const BudgetPlan rushed = SolveBudget(p, o);
  EXPECT_EQ(rushed.solver, "milp");
  EXPECT_FALSE(rushed.proven_optimal);
  EXPECT_LE(rushed.saved_bytes, o.budget_bytes);
  std::vector<bool> nothing(p.classes.size(), false);
  EXPECT_LE(rushed.recomputed_flops, RecomputedFlops(p, nothing));
  EXPECT_EQ(rushed.recomputed_flops, RecomputedFlops(p, rushed.saved));
}

// The node limit: random programs, each whole as one region, solved by the
// MILP stopped after one subproblem with all the time it could want. Where
// that stop leaves the plan unproven (some must), the plan is within the
// budget, the same save set on every solve (the limit is work, not the
// machine's speed), and no better than the unlimited solve's, which is
// proven.
TEST(BudgetSolverTest, NodeLimitReturnsTheSamePlanEveryTimeMarkedNotProven) {
  int stopped = 0;
  for (uint64_t seed = 0; seed < 200 && stopped < 5; ++seed) {
    const RandomCase c = MakeRandomCase(seed);
    const Program body = InlineCheckpoints(c.program);
    const std::vector<bool> needs = AllTrue(body);
    const BudgetProblem p = MakeBudgetProblem(body, needs, 4, MaySave);
    const int64_t all = EverythingSaveableBytes(body, needs, p);
    for (double f : {0.3, 0.5, 0.7}) {
      BudgetOptions o;
      o.budget_bytes = static_cast<int64_t>(f * static_cast<double>(all));
      o.force_milp = true;
      o.node_limit = 1;
      o.time_limit_seconds = 600;
      const BudgetPlan first = SolveBudget(p, o);
      if (first.proven_optimal) continue;
      ++stopped;
      EXPECT_LE(first.saved_bytes, o.budget_bytes) << "seed " << seed;
      for (int i = 0; i < 3; ++i) EXPECT_EQ(SolveBudget(p, o).saved, first.saved) << "seed " << seed;
      o.node_limit = 0;
      const BudgetPlan unlimited = SolveBudget(p, o);
      EXPECT_TRUE(unlimited.proven_optimal) << "seed " << seed;
      EXPECT_LE(unlimited.recomputed_flops, first.recomputed_flops) << "seed " << seed;
    }
  }
  EXPECT_GT(stopped, 0) << "no random program needed more than one node";
}

TEST(BudgetSolverTest, NegativeBudgetIsAnError) {
  Program body =
      Trace("one", {{"x", Shape({4})}}, [](const std::vector<Var>& in) { return sum(sin(in[0])); });
  const BudgetProblem p = MakeBudgetProblem(body, AllTrue(body), 4, MaySave);
  BudgetOptions o;
  o.budget_bytes = -1;
  EXPECT_THROW(SolveBudget(p, o), Error);
}

}  // namespace
}  // namespace remat
