// A Plan records what a planner decided and a PlanReader answers from it
// alone (plan.h).
#include "engines/autodiff/plan.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"

namespace remat {
namespace {

// Honours every region, saves its first body value, and gives each loop
// checkpoint_every:N where N counts the loops asked so far.
class CountingPlanner : public Planner {
 public:
  bool honours_checkpoints() const override { return true; }
  RegionPlan PlanRegion(const Op&) const override {
    ++region_asks;
    return {.honour = true, .may_save = true};
  }
  std::vector<SaveDecision> PlanSaves(const Op& region, const std::vector<bool>&) const override {
    std::vector<SaveDecision> d(region.body->num_values(), SaveDecision::kRecompute);
    d.back() = SaveDecision::kSave;
    return d;
  }
  LoopPlan PlanLoop(const Op&, const LoopModel&) const override {
    return {.schedule = nullptr, .checkpoint_every = ++loops};
  }
  mutable int region_asks = 0;
  mutable int loops = 0;
};

Op MakeOp(OpKind kind, const std::string& site) {
  Op op;
  op.kind = kind;
  op.site = site;
  auto body = std::make_shared<Program>();
  body->param_names = {"x"};
  body->shapes = {Shape({2}), Shape({2})};
  body->output = 1;
  op.body = body;
  return op;
}

TEST(PlanTest, RecordsEveryDecisionInOrderAndPrintsEachOnce) {
  const Op region = MakeOp(OpKind::kCheckpoint, "a.cc:1");
  const Op scan = MakeOp(OpKind::kScan, "a.cc:2");
  CountingPlanner inner;
  Plan plan;
  PlanRecorder recorder(&inner, &plan);
  EXPECT_TRUE(recorder.PlanRegion(region).honour);
  EXPECT_TRUE(recorder.PlanRegion(region).honour);
  recorder.PlanSaves(region, {true});
  LoopModel model;
  model.held_outside = 100;
  EXPECT_EQ(recorder.PlanLoop(scan, model).checkpoint_every, 1);
  model.held_outside = 200;
  EXPECT_EQ(recorder.PlanLoop(scan, model).checkpoint_every, 2) << "every instance is planned";
  EXPECT_EQ(plan.decisions().size(), 5u);

  const std::vector<std::string> lines = plan.Lines();
  ASSERT_EQ(lines.size(), 4u) << "the region's decision is printed once";
  EXPECT_EQ(lines[0], "region [0] checkpoint at a.cc:1: honour (may save)");
  EXPECT_EQ(lines[1], "saves  [0] checkpoint at a.cc:1 needs 1: %1=save");
  EXPECT_EQ(lines[2], "loop   [1] scan at a.cc:2 #0 (100 bytes held outside): checkpoint_every:1");
  EXPECT_EQ(lines[3], "loop   [1] scan at a.cc:2 #1 (200 bytes held outside): checkpoint_every:2");

  // The reader answers the same questions in the same order, from the plan
  // alone; the op in the same place of a program of the same structure
  // (another object) is the same op to it.
  const Op same_region = MakeOp(OpKind::kCheckpoint, "a.cc:1");
  const Op same_scan = MakeOp(OpKind::kScan, "a.cc:2");
  {
    PlanReader other(&plan, true);
    EXPECT_TRUE(other.PlanRegion(same_region).honour);
    EXPECT_TRUE(other.PlanRegion(same_region).honour);
    other.PlanSaves(same_region, {true});
    model.held_outside = 100;
    EXPECT_EQ(other.PlanLoop(same_scan, model).checkpoint_every, 1);
  }
  PlanReader reader(&plan, true);
  EXPECT_TRUE(reader.PlanRegion(region).honour);
  EXPECT_TRUE(reader.PlanRegion(region).honour);
  EXPECT_EQ(reader.PlanSaves(region, {true}).back(), SaveDecision::kSave);
  model.held_outside = 100;
  EXPECT_EQ(reader.PlanLoop(scan, model).checkpoint_every, 1);
  EXPECT_THROW(reader.CheckAllRead(), Error) << "instance 1 was never read";
  model.held_outside = 200;
  EXPECT_EQ(reader.PlanLoop(scan, model).checkpoint_every, 2);
  EXPECT_NO_THROW(reader.CheckAllRead());
  EXPECT_EQ(inner.loops, 2) << "the reader never asks the planner";
  EXPECT_EQ(inner.region_asks, 2);
}

void ExpectError(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(PlanTest, TheReaderRefusesARunThatStraysFromThePlan) {
  const Op region = MakeOp(OpKind::kCheckpoint, "b.cc:7");
  const Op other = MakeOp(OpKind::kCheckpoint, "b.cc:9");
  const Op scan = MakeOp(OpKind::kScan, "b.cc:8");
  CountingPlanner inner;
  Plan plan;
  PlanRecorder recorder(&inner, &plan);
  recorder.PlanSaves(region, {true});
  LoopModel model;
  model.held_outside = 64;
  recorder.PlanLoop(scan, model);

  {
    PlanReader reader(&plan, true);
    ExpectError([&] { reader.PlanRegion(region); },
                "asked whether to honour checkpoint at b.cc:7 where decision 1 of its plan is "
                "what to save in checkpoint at b.cc:7");
  }
  {
    PlanReader reader(&plan, true);
    ExpectError([&] { reader.PlanSaves(other, {true}); }, "decision 1 of its plan");
  }
  {
    // Two regions of one site (a region traced in a loop): the run must
    // ask for them in the plan's order.
    const Op twin = MakeOp(OpKind::kCheckpoint, "b.cc:7");
    Plan two;
    PlanRecorder twice(&inner, &two);
    twice.PlanRegion(region);
    twice.PlanRegion(twin);
    EXPECT_EQ(two.Lines().size(), 2u) << "two ops, two lines";
    PlanReader reader(&two, true);
    reader.PlanRegion(region);
    ExpectError([&] { reader.PlanRegion(region); }, "decision 2 of its plan");
  }
  {
    PlanReader reader(&plan, true);
    ExpectError([&] { reader.PlanSaves(region, {false}); },
                "with needs 0 where its plan decided for needs 1");
  }
  PlanReader reader(&plan, true);
  reader.PlanSaves(region, {true});
  model.held_outside = 65;
  ExpectError([&] { reader.PlanLoop(scan, model); },
              "starts with 65 bytes held outside it, where the planning run held 64");
  ExpectError([&] { reader.PlanLoop(scan, model); }, "after the 2 decisions of its plan");
}

}  // namespace
}  // namespace remat
