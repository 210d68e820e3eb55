// The solver's model is the executor's: a random program (the fuzzer's
// generator) in one memory_budget region, run by ReverseMode under
// PolicyPlanner, recomputes exactly the FLOPs and keeps exactly the bytes
// that the plan says, at every budget.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engines/autodiff/planners.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/budget/budget_solver.h"
#include "engines/onednn/onednn_kernels.h"
#include "harness/random_program.h"

namespace remat {
namespace {

TEST(BudgetExecutorTest, MeasuredFlopsAndBytesArePlanned) {
  OneDnnKernels kernels;
  PolicyPlanner planner;
  ReverseMode run(&kernels, &planner);
  int nontrivial = 0;
  for (uint64_t seed = 0; seed < 120; ++seed) {
    const RandomCase c = MakeRandomCase(seed);
    const Program flat = InlineCheckpoints(c.program);
    for (const char* b : {"0", "0.3", "0.6", "1"}) {
      const Program p =
          WrapInCheckpoint(flat, Policy::Parse(StrCat("memory_budget:", b)), "--policy");
      std::vector<bool> needs(p.num_params(), false);
      for (int w : c.wrt) needs[w] = true;
      const BudgetPlan plan = PlanMemoryBudget(p.ops[0], needs, 4, [](const Op&) { return true; });
      RunOptions o;
      o.plan_only = true;
      const Result r = run.Run(p, c.inputs, c.wrt, o);
      EXPECT_EQ(r.stats.flops_recomputed, plan.recomputed_flops) << "seed " << seed << " B " << b;
      EXPECT_EQ(r.stats.residual_bytes, plan.saved_bytes) << "seed " << seed << " B " << b;
      nontrivial += plan.saved_bytes > 0;
    }
  }
  EXPECT_GT(nontrivial, 100);
}

}  // namespace
}  // namespace remat
