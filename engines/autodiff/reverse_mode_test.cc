// The executor's guarantee to any planner (reverse_mode.h): whatever a
// Planner decides, the bits are eager's and the measured peak is the
// predicted one. A planner of remat-bench's would prove less: here, one
// that no engine registers.
#include "engines/autodiff/reverse_mode.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "engines/autodiff/planners.h"
#include "engines/autodiff/reverse_mode_engine.h"
#include "engines/plan/save_plan.h"
#include "engines/onednn/onednn_kernels.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat {
namespace {

// Honours every region under everything_saveable but sends every kept value
// to the host tier, and reverses every scan and chain under revolve:1.
class OffloadAllPlanner : public Planner {
 public:
  bool honours_checkpoints() const override { return true; }
  RegionPlan PlanRegion(const Op&) const override { return {.honour = true, .may_save = true}; }
  std::vector<SaveDecision> PlanSaves(const Op& region,
                                      const std::vector<bool>& param_needs) const override {
    std::vector<SaveDecision> d =
        remat::PlanSaves(*region.body, param_needs, Policy(PolicyKind::kEverythingSaveable));
    for (SaveDecision& s : d) {
      if (s == SaveDecision::kSave) s = SaveDecision::kOffload;
    }
    return d;
  }
  LoopPlan PlanLoop(const Op&, const LoopModel& model) const override {
    return {.schedule = std::make_shared<Schedule>(ParseSchedule("revolve:1", model.costs()))};
  }
};

class ReverseModeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReverseModeTest, AnyPlannerGetsEagersBitsAndItsPredictedPeak) {
  const Problem& problem = FindProblem(GetParam());
  Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  OneDnnKernels kernels;
  OffloadAllPlanner offload;
  InlinePlanner inline_all;
  ReverseMode eager(&kernels, &inline_all);
  const Result want = eager.Run(c.program, c.inputs, c.wrt, RunOptions());
  // Chains exist once ApplySchedule groups a loop of blocks; the schedule
  // text is the planner's to ignore (it reverses every loop under revolve:1).
  bool has_loop = false;
  for (const Op& op : c.program.ops) has_loop = has_loop || op.kind == OpKind::kScan;
  const Program grouped =
      has_loop || GetParam() == "mlp_chain" ? ApplySchedule(c.program, "sqrt") : c.program;
  ReverseMode planned(&kernels, &offload);
  const Result got = planned.Run(grouped, c.inputs, c.wrt, RunOptions());
  EXPECT_EQ(FirstBitDifference(got, want), std::nullopt) << c.ToString();
  EXPECT_EQ(got.stats.peak_bytes, got.stats.predicted_peak_bytes) << c.ToString();
  EXPECT_EQ(got.stats.peak_site, got.stats.predicted_peak_site) << c.ToString();
  // sin_chain's regions stand outside any loop and keep sin's input: the
  // planner sends it to the host tier.
  if (GetParam() == "sin_chain") {
    EXPECT_GT(got.stats.host_peak_bytes, 0) << c.ToString() << ": nothing offloaded";
  }
}

// The run carries out the plan its planning run made (plan.h), and reports
// it: a loop instance per scan step's nested loop, the schedule's name.
TEST(ReverseModePlanTest, TheRunReportsThePlanItCarriedOut) {
  const Problem& problem = FindProblem("scan_stack");
  Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  OneDnnKernels kernels;
  OffloadAllPlanner offload;
  ReverseMode planned(&kernels, &offload);
  RunOptions options;
  options.record_plan = true;
  const Result r = planned.Run(ApplySchedule(c.program, "sqrt"), c.inputs, c.wrt, options);
  ASSERT_FALSE(r.plan.empty());
  bool loop = false;
  for (const std::string& line : r.plan) {
    loop = loop || (line.rfind("loop   [", 0) == 0 && line.find("] scan at ") != std::string::npos &&
                    line.find("#0") != std::string::npos &&
                    line.find("schedule revolve:1") != std::string::npos);
  }
  EXPECT_TRUE(loop) << "no line for the scan's revolve:1 schedule; first: " << r.plan[0];
  options.record_plan = false;
  EXPECT_TRUE(planned.Run(c.program, c.inputs, c.wrt, options).plan.empty()) << "not asked for";
}

// The engine plans a case once (a planning run: one more tracker) and
// carries the kept plan out on later runs of the same case.
TEST(ReverseModeEngineTest, PlansACaseOnce) {
  const Problem& problem = FindProblem("transformer_stack");
  Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  ReverseModeEngine engine("recompute", std::make_unique<OneDnnKernels>(),
                           MakeRecomputePlanner());
  int trackers = 0;
  RunOptions options;
  options.predict_memory = false;
  options.on_tracker = [&](const std::shared_ptr<MemoryTracker>&) { ++trackers; };
  const Program sqrt = ApplySchedule(c.program, "sqrt");
  const Result first = engine.ValueAndGrad(sqrt, c.inputs, c.wrt, options);
  EXPECT_EQ(trackers, 2) << "a planning run and the run";
  const Program again = ApplySchedule(c.program, "sqrt");  // another object, the same case
  const Result second = engine.ValueAndGrad(again, c.inputs, c.wrt, options);
  EXPECT_EQ(trackers, 3) << "the plan was kept";
  EXPECT_EQ(FirstBitDifference(first, second), std::nullopt);
  EXPECT_EQ(first.stats.peak_bytes, second.stats.peak_bytes);
  EXPECT_EQ(first.stats.flops_recomputed, second.stats.flops_recomputed);
  engine.ValueAndGrad(ApplySchedule(c.program, "revolve:2"), c.inputs, c.wrt, options);
  EXPECT_EQ(trackers, 5) << "another schedule is another case";
}

// A scan's stacked gradient is written slice by slice by the kernel that
// makes each step's cotangent (ReverseMode::StepCotangentPlaces), as XLA
// updates a slice in place, so no step's weight cotangent is made apart and
// copied: the run allocates that much less storage, and its memory as
// accounted (by allocation, CONTRACT.md section 4) is the same to the byte,
// whether the body reads the weight itself or inside a checkpoint. The same
// scans with the weight passed through name() first (an identity, whose
// rule returns dout as it is: so the matmul's output is made apart) are the
// copying path. (The bits: eager's conformance suite holds these scans,
// transformer_stack's checkpointed block among them, to the f64 oracle, and
// recompute's and planned's to eager's, bit for bit.)
TEST(ReverseModeEngineTest, WritesEachStepsStackedCotangentInItsSlice) {
  constexpr int64_t kSteps = 4, kWidth = 64;
  const int64_t step_bytes = kWidth * kWidth * 4;
  std::vector<float> x(kWidth), w(kSteps * kWidth * kWidth);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 7);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.02f * static_cast<float>(i % 11) - 0.1f;
  const std::vector<Tensor> inputs = {Tensor::FromF32(Shape({1, kWidth}), x),
                                      Tensor::FromF32(Shape({kSteps, kWidth, kWidth}), w)};
  for (bool checkpointed : {false, true}) {
    struct Run {
      Result result;
      int64_t storage_bytes = 0;
    };
    auto run = [&](bool named) {
      const Program p = Trace(
          "stack", {{"x", Shape({1, kWidth})}, {"w", Shape({kSteps, kWidth, kWidth})}},
          [&](const std::vector<Var>& in) {
            auto step = [named](Var c, Var wi) {
              return sin(matmul(c, named ? name(wi, "w_i") : wi));
            };
            if (!checkpointed) return sum(scan(step, in[0], in[1]));
            return sum(scan(
                [&](Var c, Var wi) { return checkpoint(step, Policy(), "block")(c, wi); }, in[0],
                in[1]));
          });
      std::shared_ptr<MemoryTracker> tracker;
      RunOptions options;
      options.on_tracker = [&](const std::shared_ptr<MemoryTracker>& t) { tracker = t; };
      Run r;
      r.result = MakeEngine("eager")->ValueAndGrad(p, inputs, {0, 1}, options);
      r.storage_bytes = tracker->storage_bytes();
      return r;
    };
    const Run placed = run(false), copied = run(true);
    const char* where = checkpointed ? "checkpointed" : "plain";
    EXPECT_EQ(copied.storage_bytes - placed.storage_bytes, kSteps * step_bytes) << where;
    EXPECT_EQ(placed.result.stats.peak_bytes, copied.result.stats.peak_bytes) << where;
    EXPECT_EQ(placed.result.stats.high_water_bytes_by_category,
              copied.result.stats.high_water_bytes_by_category)
        << where;
    EXPECT_EQ(FirstBitDifference(placed.result, copied.result), std::nullopt) << where;
  }
}

INSTANTIATE_TEST_SUITE_P(Problems, ReverseModeTest,
                         ::testing::Values("layer_loss", "scan_stack", "sin_chain", "sin_recursive",
                                           "mlp_chain", "transformer_stack"));

}  // namespace
}  // namespace remat
