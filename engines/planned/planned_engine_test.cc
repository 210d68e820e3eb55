// planned against eager, bit for bit, on every problem at test sizes (as
// written, and under nothing_saveable and a schedule); and what makes it
// planned: the measured peak is the prediction, the arena is packed to its
// lower bound, nothing but the arena and the results is allocated, and a
// second run of the same shapes reuses the compiled plan.
#include "engines/planned/planned_engine.h"

#include <cstdio>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/program_identity.h"
#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "problems/problem.h"

namespace remat {
namespace {

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.bytes())) == 0;
}

int64_t ResultBytes(const Result& r) {
  int64_t bytes = r.value.bytes();
  for (const Tensor& g : r.grads) bytes += g.bytes();
  for (const auto& [name, t] : r.state) bytes += t.bytes();
  return bytes;
}

struct Case {
  std::string problem;
  std::string variant;  // "as-written", "nothing_saveable", or a schedule spec
};

Program Variant(const Program& p, const std::string& variant) {
  if (variant == "as-written") return p;
  if (variant == "nothing_saveable") {
    return WrapInCheckpoint(p, Policy::Parse("nothing_saveable"), "planned_engine_test");
  }
  return ApplySchedule(p, variant);
}

class PlannedProblemTest : public ::testing::TestWithParam<Case> {};

TEST_P(PlannedProblemTest, EagerBitsPredictedPeakTightArena) {
  const Problem& problem = FindProblem(GetParam().problem);
  const ParamValues params = ResolveParams(problem, {}, /*test_sizes=*/true);
  const Program program = Variant(problem.Build(params), GetParam().variant);
  const std::vector<Tensor> args = MakeInputs(problem, program, params, /*seed=*/3);
  const std::vector<int> wrt = WrtIndices(problem, program);

  std::unique_ptr<Engine> eager = MakeEngine("eager");
  PlannedEngine planned;
  const Result want = eager->ValueAndGrad(program, args, wrt, {});
  const int64_t ledger = TensorStorageBytes();
  const Result got = planned.ValueAndGrad(program, args, wrt, {});
  const std::shared_ptr<const CompiledPlan> plan = planned.PlanFor(program, args, wrt);

  ASSERT_TRUE(SameBits(got.value, want.value));
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t j = 0; j < want.grads.size(); ++j) EXPECT_TRUE(SameBits(got.grads[j], want.grads[j]));

  // measured = predicted, at the same site; the arena is what was planned
  // and is packed to the most bytes its buffers hold at once.
  EXPECT_EQ(got.stats.peak_bytes, got.stats.predicted_peak_bytes);
  EXPECT_EQ(got.stats.peak_site, got.stats.predicted_peak_site);
  EXPECT_EQ(got.stats.arena_bytes, plan->arena_bytes);
  // Packing is NP-hard in general: the heuristics reach the lower bound on
  // every problem but transformer_stack's (3.7% above it at test sizes).
  if (GetParam().problem == "transformer_stack") {
    EXPECT_LE(plan->arena_bytes, plan->arena_live_bytes + plan->arena_live_bytes / 20);
  } else {
    EXPECT_EQ(plan->arena_bytes, plan->arena_live_bytes);
  }
  EXPECT_GT(got.stats.seconds_compile, 0);
  // In-place stacking: every step's stacked-gradient copy is elided where a
  // scan stacks a gradient (scan_stack's weights, transformer_stack's).
  std::printf("%s %s: %d copies elided (%lld bytes)\n", GetParam().problem.c_str(),
              GetParam().variant.c_str(), plan->elided_copies,
              static_cast<long long>(plan->elided_copy_bytes));
  if (GetParam().problem == "scan_stack") {
    EXPECT_GT(plan->elided_copies, 0);
  }
  // The run's storage: the arena, the results and the host tier; nothing else.
  if (got.stats.host_peak_bytes == 0) {
    EXPECT_EQ(got.tracker->storage_bytes(), plan->arena_bytes + ResultBytes(got));
    EXPECT_EQ(TensorStorageBytes() - ledger, plan->arena_bytes + ResultBytes(got));
  } else {
    EXPECT_EQ(got.tracker->storage_bytes(),
              plan->arena_bytes + ResultBytes(got) + got.stats.host_peak_bytes);
  }
  // The peak, by category, is the arena's bytes live then plus the
  // arguments and the results: at most the arena and both.
  int64_t inputs = 0;
  for (const Tensor& a : args) inputs += a.bytes();
  EXPECT_LE(got.stats.peak_bytes, plan->arena_bytes + inputs + ResultBytes(got));

  // A second run of the same shapes compiles nothing and repeats the first,
  // in the arena the first left (kept, and poisoned here: nothing is read
  // before it is written), allocating only its results.
  const size_t plans = planned.cached_plans();
  EXPECT_EQ(planned.arena_reserved_bytes(), plan->arena_bytes);
  planned.PoisonArenaForTesting();
  const int64_t ledger_again = TensorStorageBytes();
  const Result again = planned.ValueAndGrad(program, args, wrt, {});
  if (again.stats.host_peak_bytes == 0) {
    EXPECT_EQ(TensorStorageBytes() - ledger_again, ResultBytes(again));
  }
  EXPECT_EQ(again.tracker->storage_bytes(), got.tracker->storage_bytes());
  EXPECT_EQ(planned.cached_plans(), plans);
  EXPECT_EQ(again.stats.seconds_compile, 0);
  EXPECT_EQ(again.stats.peak_bytes, got.stats.peak_bytes);
  for (size_t j = 0; j < want.grads.size(); ++j)
    EXPECT_TRUE(SameBits(again.grads[j], want.grads[j]));
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const auto& p : AllProblems()) {
    for (const char* v : {"as-written", "nothing_saveable"}) cases.push_back({p->name(), v});
  }
  cases.push_back({"scan_stack", "revolve:2"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Problems, PlannedProblemTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.problem + "_" + info.param.variant;
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name + "_" + std::to_string(info.index);
                         });

TEST(PlannedEngineTest, CastArgumentsArePlacedInTheArena) {
  const Problem& problem = FindProblem("layer_loss");
  const ParamValues params = ResolveParams(problem, {}, /*test_sizes=*/true);
  const Program program = problem.Build(params);
  std::vector<Tensor> args = MakeInputs(problem, program, params, /*seed=*/5);
  for (Tensor& a : args) a = Cast(a, DType::kF64);
  const std::vector<int> wrt = WrtIndices(problem, program);
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  PlannedEngine planned;
  const Result want = eager->ValueAndGrad(program, args, wrt, {});
  const Result got = planned.ValueAndGrad(program, args, wrt, {});
  EXPECT_TRUE(SameBits(got.value, want.value));
  for (size_t j = 0; j < want.grads.size(); ++j) EXPECT_TRUE(SameBits(got.grads[j], want.grads[j]));
  EXPECT_EQ(got.stats.peak_bytes, got.stats.predicted_peak_bytes);
  EXPECT_EQ(got.tracker->storage_bytes(), got.stats.arena_bytes + ResultBytes(got));
}

// bias_add in a compiled plan. Found by the fuzzer (seed 14, --engine=planned,
// once the generator drew bias_add): RecordingKernels did not observe
// DoBiasAdd, so the compiled plan had no instruction for it and replays left
// its output unwritten: the value differed from eager's. Also its backward
// (the bias's gradient, SumLeading) and a rank-1 x.
TEST(PlannedEngineTest, BiasAddIsCompiled) {
  const Program program = Trace(
      "bias", {{"x", Shape({3, 4})}, {"b", Shape({4})}}, [](const std::vector<Var>& in) {
        Var y = bias_add(sin(in[0]), in[1]);
        Var z = checkpoint([](Var y, Var b) { return bias_add(relu(y), b); })(y, in[1]);
        return add(sum(square(z)), sum(bias_add(cos(in[1]), in[1])));
      });
  std::vector<Tensor> args;
  for (int i = 0; i < 2; ++i) {
    Tensor t = Tensor::Zeros(DType::kF32, program.shapes[i]);
    for (int64_t j = 0; j < t.num_elements(); ++j) t.f32()[j] = 0.25f * ((j * 5 + i) % 7) - 0.7f;
    args.push_back(t);
  }
  const std::vector<int> wrt = {0, 1};
  const Result eager = MakeEngine("eager")->ValueAndGrad(program, args, wrt);
  PlannedEngine planned;
  for (int run = 0; run < 2; ++run) {  // compiled, then replayed from the cache
    SCOPED_TRACE(run);
    const Result r = planned.ValueAndGrad(program, args, wrt, {});
    EXPECT_TRUE(SameBits(eager.value, r.value));
    ASSERT_EQ(r.grads.size(), 2u);
    for (int g = 0; g < 2; ++g) EXPECT_TRUE(SameBits(eager.grads[g], r.grads[g])) << "grad " << g;
  }
}

TEST(PlannedEngineTest, PlansAreKeyedByShapesAndWrt) {
  const Problem& problem = FindProblem("sin_plain");
  PlannedEngine planned;
  for (int64_t d : {8, 16}) {
    const ParamValues params = ResolveParams(problem, {{"D", d}}, /*test_sizes=*/true);
    const Program program = problem.Build(params);
    const std::vector<Tensor> args = MakeInputs(problem, program, params, 1);
    planned.ValueAndGrad(program, args, WrtIndices(problem, program), {});
    planned.ValueAndGrad(program, args, WrtIndices(problem, program), {});
  }
  EXPECT_EQ(planned.cached_plans(), 2u);
}

TEST(PlannedEngineTest, ScheduleIsRecomputesAndLimitRefusesBeforeAllocating) {
  const Problem& problem = FindProblem("sin_recursive");
  const ParamValues params = ResolveParams(problem, {}, /*test_sizes=*/true);
  const Program program = problem.Build(params);
  const std::vector<Tensor> args = MakeInputs(problem, program, params, 2);
  const std::vector<int> wrt = WrtIndices(problem, program);
  RunOptions options;
  options.record_schedule = true;
  PlannedEngine planned;
  const Result got = planned.ValueAndGrad(program, args, wrt, options);
  const Result want = MakeEngine("recompute")->ValueAndGrad(program, args, wrt, options);
  EXPECT_EQ(got.schedule, want.schedule);
  EXPECT_EQ(got.stats.op_runs, want.stats.op_runs);

  options.max_memory_bytes = got.stats.peak_bytes - 1;
  std::vector<std::shared_ptr<MemoryTracker>> trackers;
  options.on_tracker = [&](const std::shared_ptr<MemoryTracker>& t) { trackers.push_back(t); };
  try {
    planned.ValueAndGrad(program, args, wrt, options);
    FAIL() << "a run over the limit ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
  }
  // The plan was cached: the run's own tracker is the only one, and it
  // never held a byte.
  ASSERT_EQ(trackers.size(), 1u);
  EXPECT_EQ(trackers[0]->peak_bytes(), 0);
  EXPECT_EQ(trackers[0]->storage_bytes(), 0);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST(PlannedEngineTest, TheCacheKeyIsTheStructureNotTheObject) {
  const Problem& problem = FindProblem("sin_recursive");
  const ParamValues params = ResolveParams(problem, {}, /*test_sizes=*/true);
  const Program a = problem.Build(params);
  const Program b = problem.Build(params);  // another object, the same structure
  EXPECT_TRUE(SameStructure(a, b));
  EXPECT_EQ(StructureHash(a), StructureHash(b));
  // A policy (what is saved) and a site (what the peak names) are the plan's.
  const Program saving = ApplyPolicy(a, Policy::Parse("everything_saveable"));
  EXPECT_FALSE(SameStructure(a, saving));
  Program moved = a;
  moved.ops.back().site += "x";
  EXPECT_FALSE(SameStructure(a, moved));

  const std::vector<Tensor> args = MakeInputs(problem, a, params, 1);
  const std::vector<int> wrt = WrtIndices(problem, a);
  PlannedEngine planned;
  planned.ValueAndGrad(a, args, wrt, {});
  planned.ValueAndGrad(b, args, wrt, {});
  EXPECT_EQ(planned.cached_plans(), 1u);
  planned.ValueAndGrad(saving, args, wrt, {});
  EXPECT_EQ(planned.cached_plans(), 2u);
}

// The cache's fast path confirms the last plan used against the program
// it is given: a program changed in place between runs (the same object,
// another structure) is compiled again, and its gradients are its own.
TEST(PlannedEngineTest, AProgramChangedInPlaceIsCompiledAgain) {
  const Problem& problem = FindProblem("sin_plain");
  const ParamValues params = ResolveParams(problem, {}, /*test_sizes=*/true);
  Program program = problem.Build(params);
  const std::vector<Tensor> args = MakeInputs(problem, program, params, 1);
  const std::vector<int> wrt = WrtIndices(problem, program);
  PlannedEngine planned;
  auto eager = MakeEngine("eager");
  const Result first = planned.ValueAndGrad(program, args, wrt, {});
  // sin -> cos on the first sin: another function of the same shapes.
  bool changed = false;
  for (Op& op : program.ops) {
    if (op.kind == OpKind::kSin) {
      op.kind = OpKind::kCos;
      changed = true;
      break;
    }
  }
  ASSERT_TRUE(changed);
  const Result second = planned.ValueAndGrad(program, args, wrt, {});
  EXPECT_EQ(planned.cached_plans(), 2u);
  const Result expected = eager->ValueAndGrad(program, args, wrt, {});
  EXPECT_TRUE(BitwiseEqual(second.value, expected.value));
  ASSERT_EQ(second.grads.size(), expected.grads.size());
  for (size_t i = 0; i < expected.grads.size(); ++i) {
    EXPECT_TRUE(BitwiseEqual(second.grads[i], expected.grads[i])) << "gradient " << i;
  }
  EXPECT_FALSE(BitwiseEqual(first.value, second.value));
}

// On the sin chains the arena holds everything of the run at its peak but
// the argument and the returned value: measured peak = predicted = arena +
// those, to the byte.
TEST(PlannedEngineTest, SinChainsPeakIsTheArenaPlusArgumentAndValue) {
  for (const char* name : {"sin_plain", "sin_recursive"}) {
    for (int64_t d : {8, 64, 1024}) {
      const Problem& problem = FindProblem(name);
      const ParamValues params = ResolveParams(problem, {{"D", d}}, /*test_sizes=*/true);
      const Program program = problem.Build(params);
      const std::vector<Tensor> args = MakeInputs(problem, program, params, 4);
      PlannedEngine planned;
      const Result r = planned.ValueAndGrad(program, args, WrtIndices(problem, program), {});
      EXPECT_EQ(r.stats.peak_bytes, r.stats.predicted_peak_bytes) << name << " D=" << d;
      EXPECT_EQ(r.stats.peak_bytes, r.stats.arena_bytes + args[0].bytes() + r.value.bytes())
          << name << " D=" << d;
    }
  }
}

}  // namespace
}  // namespace remat
