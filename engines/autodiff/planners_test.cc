#include "engines/autodiff/planners.h"

#include <gtest/gtest.h>

#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/tracer.h"
#include "engines/plan/save_plan.h"

namespace remat {
namespace {

// relu(x @ w) in a region under `policy`, and a scan of it.
Program Region(const std::string& policy) {
  return Trace("region", {{"x", Shape({2, 4})}, {"w", Shape({4, 4})}},
               [&](const std::vector<Var>& in) {
                 auto f = checkpoint([](Var x, Var w) { return relu(matmul(x, w)); },
                                     Policy::Parse(policy), "block");
                 return sum(f(in[0], in[1]));
               });
}

Program Scan() {
  return Trace("scan", {{"c", Shape({4})}, {"xs", Shape({6, 4})}}, [](const std::vector<Var>& in) {
    return sum(scan([](Var c, Var x) { return sin(mul(c, x)); }, in[0], in[1]));
  });
}

const Op& FirstOf(const Program& p, OpKind kind) {
  for (const Op& op : p.ops) {
    if (op.kind == kind) return op;
  }
  throw Error("no such op");
}

TEST(PlannersTest, InlinePlannerInlinesEverythingAndSchedulesNothing) {
  InlinePlanner planner;
  EXPECT_FALSE(planner.honours_checkpoints());
  const Program p = Region("dots_saveable");
  EXPECT_FALSE(planner.PlanRegion(FirstOf(p, OpKind::kCheckpoint)).honour);
  EXPECT_THROW(planner.PlanSaves(FirstOf(p, OpKind::kCheckpoint), {true, true}), Error);
  const Program s = ApplySchedule(Scan(), "sqrt");
  EXPECT_EQ(planner.PlanLoop(FirstOf(s, OpKind::kScan), {}).schedule, nullptr);
}

TEST(PlannersTest, PolicyPlannerKeepsWhatThePolicyAllowsAndTheBackwardReads) {
  PolicyPlanner planner;
  const Program dots = Region("dots_saveable");
  const Op& region = FirstOf(dots, OpKind::kCheckpoint);
  const RegionPlan plan = planner.PlanRegion(region);
  EXPECT_TRUE(plan.honour);
  EXPECT_TRUE(plan.may_save);
  const std::vector<SaveDecision> saves = planner.PlanSaves(region, {true, true});
  // Body values: x, w, x@w, relu: the matmul's output is kept (relu reads
  // it), relu's output is not read by any backward rule.
  ASSERT_EQ(saves.size(), 4u);
  EXPECT_EQ(saves[2], SaveDecision::kSave);
  EXPECT_EQ(saves[3], SaveDecision::kRecompute);
  EXPECT_EQ(saves, PlanSaves(*region.body, {true, true}, region.policy));
  const Program none = Region("nothing_saveable");
  EXPECT_FALSE(planner.PlanRegion(FirstOf(none, OpKind::kCheckpoint)).may_save);
}

TEST(PlannersTest, SchedulePlannerParsesTheLoopsScheduleAgainstTheModel) {
  std::unique_ptr<Planner> planner = MakeRecomputePlanner();
  EXPECT_TRUE(planner->honours_checkpoints());
  int costed = 0;
  LoopModel model;
  model.costs = [&] {
    ++costed;
    return ChainCosts::Uniform(6, 10, 16, 32);
  };
  const Program plain = Scan();
  EXPECT_EQ(planner->PlanLoop(FirstOf(plain, OpKind::kScan), model).schedule, nullptr);
  EXPECT_EQ(costed, 0);  // no schedule: no cost model asked for
  const Program every = ApplySchedule(Scan(), "checkpoint_every:2");
  EXPECT_EQ(planner->PlanLoop(FirstOf(every, OpKind::kScan), model).checkpoint_every, 2);
  const Program sqrt = ApplySchedule(Scan(), "sqrt");
  const LoopPlan plan = planner->PlanLoop(FirstOf(sqrt, OpKind::kScan), model);
  ASSERT_NE(plan.schedule, nullptr);
  EXPECT_EQ(plan.schedule->name, "sqrt");
  EXPECT_EQ(costed, 1);
  // The same schedule on the same costs is solved once: the second run of a
  // program reuses the first's plan; other costs or budgets are solved anew.
  const Program budget = ApplySchedule(Scan(), "budget:100");
  const LoopPlan first = planner->PlanLoop(FirstOf(budget, OpKind::kScan), model);
  const LoopPlan again = planner->PlanLoop(FirstOf(budget, OpKind::kScan), model);
  ASSERT_NE(first.schedule, nullptr);
  EXPECT_EQ(first.schedule, again.schedule);
  LoopModel other = model;
  other.costs = [] { return ChainCosts::Uniform(6, 10, 16, 64); };
  const LoopPlan differs = planner->PlanLoop(FirstOf(budget, OpKind::kScan), other);
  EXPECT_NE(differs.schedule, first.schedule);
  other.held_outside = 4;
  EXPECT_NE(planner->PlanLoop(FirstOf(budget, OpKind::kScan), other).schedule, differs.schedule);
}

}  // namespace
}  // namespace remat
