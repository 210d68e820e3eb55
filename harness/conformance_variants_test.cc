// The conformance suite's variants (one binary per engine with
// conformance_test.cc, harness/conformance.bzl): every problem under every
// policy and schedule, and CONTRACT.md's zero-contribution rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "harness/case_spec.h"
#include "harness/conformance.h"
#include "harness/conformance_test_util.h"
#include "problems/problem.h"
#include "problems/program_file.h"

namespace remat {
namespace {

// Every problem under every policy and, where it has a scan or a chain of
// blocks, every kind of schedule: what the engine under test must do with
// each, whatever it is.
// - Agree with the float64 oracle within the tolerance (policies and
//   schedules change what is stored, never the arithmetic).
// - On eager's kernels (Engine::kernels()), equal eager bit for bit: eager
//   runs the program as written and ignores policies and schedules, so any
//   difference is the engine's order of summation or a wrong recomputation.
// - Where it predicts its peak (predicted_peak_bytes >= 0), measure exactly
//   that peak, at the same site.
// - Give back every byte: once the Result is dropped, nothing is live.
// - Allocate every byte through the trackers it reports: the process's
//   storage ledger grows by what they counted, no more.
// - Never throw on these valid programs.
const std::vector<std::string> kVariants = {
    "as-written",
    "policy:everything_saveable",
    "policy:nothing_saveable",
    "policy:dots_saveable",
    "policy:dots_with_no_batch_dims_saveable",
    "policy:save_only_these_names:a",
    "policy:save_anything_except_these_names:b",
    "policy:offload_dot_with_no_batch_dims",
    // engines/budget's planner: nothing kept, half and all of what
    // everything_saveable keeps, and a budget in bytes.
    "policy:memory_budget:0",
    "policy:memory_budget:0.5",
    "policy:memory_budget:1",
    "policy:memory_budget:8KiB",
    // Its second mode (engines/budget/peak_budget.h): the smallest peak of
    // the family, and a limit every test size fits (resolved to fraction 1).
    "policy:memory_budget:peak:min",
    "policy:memory_budget:peak:1GiB",
    "schedule:every:2",
    "schedule:checkpoint_every:2",
    "schedule:sqrt",
    "schedule:bisect",
    "schedule:revolve:1",
    "schedule:budget:1GiB",
};

class VariantTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    const Problem& problem = ProblemNamed(std::get<0>(GetParam()));
    case_ = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
    case_.wrt = AllInputs(case_.program);
    const std::string& variant = std::get<1>(GetParam());
    program_ = CaseVariant::Parse(variant).Apply(case_.program);
    engine_ = MakeEngine(EngineUnderTest());
  }
  std::string What() const {
    return StrCat(EngineUnderTest(), " on ", case_.ToString(), " under ", std::get<1>(GetParam()));
  }
  // The engine's run of the variant, counting its storage; a remat::Error
  // on these valid programs is a failure that says so.
  std::optional<CountedRun> RunVariant() {
    try {
      const std::vector<std::string> before = ArgumentBytes(case_.inputs);
      CountedRun run = RunCountingStorage(*engine_, program_, case_.inputs, case_.wrt);
      ExpectArgumentsUnwritten(before, program_, case_.inputs, What());
      return run;
    } catch (const Error& e) {
      ADD_FAILURE() << What() << ": threw on a valid program: " << e.what();
      return std::nullopt;
    }
  }

  Case case_;
  Program program_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(VariantTest, AgreesWithTheOracleAndWithEagersBits) {
  std::optional<CountedRun> run = RunVariant();
  if (!run) return;
  const Result& got = run->result;
  Result ref = MakeEngine("oracle")->ValueAndGrad(case_.program, case_.inputs, case_.wrt);
  const Agreement a = CompareWithOracle(case_, got, ref, engine_->dtype());
  EXPECT_TRUE(a.ok) << What() << " disagrees with the float64 oracle: worst error is "
                    << a.worst_ratio << "x the tolerance: " << a.detail;
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  if (engine_->kernels() == eager->kernels()) {
    Result base = eager->ValueAndGrad(case_.program, case_.inputs, case_.wrt);
    const std::optional<std::string> diff = FirstBitDifference(base, got);
    EXPECT_FALSE(diff.has_value()) << What() << ": the " << diff.value_or("")
                                   << " differs from eager's in some bit (the engine declares "
                                      "eager's kernels, "
                                   << engine_->kernels() << ")";
  }
}

// Every line of the residual listing says where its value comes from, as
// print_saved_residuals does (CONTRACT.md section 4): "from the argument
// NAME" for a parameter of the program, or "output of OP at SITE" for an op
// of it, under every policy and schedule (offloaded residuals included: a
// copy on the host is still its op's output).
TEST_P(VariantTest, ListsWhereEveryResidualComesFrom) {
  if (EngineUnderTest() == "oracle") return;  // the judge, not under the contract
  std::optional<CountedRun> run = RunVariant();
  if (!run) return;
  std::vector<std::string> sites;
  std::function<void(const Program&)> collect = [&](const Program& p) {
    for (const Op& op : p.ops) {
      sites.push_back(StrCat("output of ", Program::Describe(op)));
      if (op.body) collect(*op.body);
    }
  };
  collect(program_);
  for (const Residual& r : run->result.stats.residuals) {
    // Where in a scan or a scheduled chain: "scan step 3: ", "chain block 1: ".
    std::string source = r.source;
    for (const char* where : {"scan step ", "chain block "}) {
      for (size_t pos; (pos = source.find(where)) != std::string::npos;) {
        const size_t colon = source.find(": ", pos);
        if (colon == std::string::npos) break;
        source.erase(pos, colon + 2 - pos);
      }
    }
    bool known = false;
    if (source.rfind("from the argument ", 0) == 0) {
      const std::string name = source.substr(18);
      for (const std::string& p : program_.param_names) known = known || name.rfind(p, 0) == 0;
    }
    for (const std::string& site : sites) known = known || source.rfind(site, 0) == 0;
    EXPECT_TRUE(known) << What() << ": the residual listing's line '" << r.type << " " << r.source
                       << "' names no argument and no op of the program";
  }
}

TEST_P(VariantTest, MeasuresThePeakItPredictsAndGivesEveryByteBack) {
  std::shared_ptr<MemoryTracker> tracker;
  {
    std::optional<CountedRun> run = RunVariant();
    if (!run) return;
    Result& r = run->result;
    tracker = r.tracker;
    ASSERT_NE(tracker, nullptr) << What() << ": Result::tracker is not set";
    EXPECT_EQ(r.stats.peak_bytes, tracker->peak_bytes())
        << What() << ": the reported peak is not the tracker's high-water mark";
    if (r.stats.predicted_peak_bytes >= 0) {
      EXPECT_EQ(r.stats.peak_bytes, r.stats.predicted_peak_bytes)
          << What() << ": the measured peak is not the predicted one";
      EXPECT_EQ(r.stats.peak_site, r.stats.predicted_peak_site)
          << What() << ": the measured peak is not where the predicted one is";
    }
    EXPECT_LE(run->untracked_bytes, 0)
        << What() << ": allocated " << run->untracked_bytes
        << " bytes of tensor storage outside the trackers it reported";
    for (int c = 0; c < kNumCategories; ++c) {
      EXPECT_GE(r.stats.high_water_bytes_by_category[c], r.stats.peak_bytes_by_category[c])
          << What() << ": " << CategoryName(static_cast<Category>(c));
    }
    // Every residual is live when the forward pass ends (on the device, as
    // an activation, or offloaded to the host), so those high-water marks
    // cover them all: less means a residual was freed, in the tracker's
    // books, before the backward pass read it.
    const int64_t covered =
        r.stats.high_water_bytes_by_category[static_cast<int>(Category::kActivations)] +
        r.stats.high_water_bytes_by_category[static_cast<int>(Category::kHost)];
    EXPECT_GE(covered, r.stats.residual_bytes)
        << What() << ": the residuals (" << r.stats.residual_bytes
        << " bytes) were never live at once: the activations' and host's high-water marks are "
        << covered << " bytes (a residual freed before the backward pass read it)";
  }
  EXPECT_EQ(tracker->live_bytes(), 0) << What() << ": bytes still live after the Result is gone";
  EXPECT_EQ(tracker->live_bytes(Category::kHost), 0) << What();
}

// Every reported field by its definition under every policy and schedule,
// where the engine saves and recomputes differently (StatsContradictions).
TEST_P(VariantTest, ReportsEveryFieldByItsDefinition) {
  RunOptions options;
  options.record_schedule = true;
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  const Result want = eager->ValueAndGrad(program_, case_.inputs, case_.wrt, options);
  Result got;
  try {
    got = engine_->ValueAndGrad(program_, case_.inputs, case_.wrt, options);
  } catch (const Error& e) {
    FAIL() << What() << ": threw on a valid program: " << e.what();
  }
  for (const std::string& c : StatsContradictions(program_, got, want, /*schedules=*/true, !engine_->kernels().empty())) {
    ADD_FAILURE() << What() << ": " << c;
  }
}

// An engine that honours a memory cap keeps eager's bits under one on every
// variant too: at 70% of its uncapped peak, or the smallest cap that works if
// that is more.
TEST_P(VariantTest, KeepsEagersBitsUnderAMemoryCap) {
  if (!engine_->honours_memory_cap()) {
    GTEST_SKIP() << EngineUnderTest() << " does not honour a memory cap";
  }
  const Result uncapped = engine_->ValueAndGrad(program_, case_.inputs, case_.wrt);
  RunOptions options;
  options.memory_cap_bytes = 1;
  int64_t smallest = -1;
  try {
    engine_->ValueAndGrad(program_, case_.inputs, case_.wrt, options);
  } catch (const Error& e) {
    smallest = SmallestCapIn(e);
  }
  ASSERT_GT(smallest, 0) << What() << ": a 1-byte cap did not fail naming the smallest that works";
  options.memory_cap_bytes =
      std::max(smallest, static_cast<int64_t>(0.7 * uncapped.stats.peak_bytes));
  const Result r = engine_->ValueAndGrad(program_, case_.inputs, case_.wrt, options);
  EXPECT_LE(r.stats.peak_bytes, options.memory_cap_bytes) << What();
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  const Result base = eager->ValueAndGrad(case_.program, case_.inputs, case_.wrt);
  const std::optional<std::string> diff =
      engine_->kernels() == eager->kernels() ? FirstBitDifference(base, r) : std::nullopt;
  EXPECT_FALSE(diff.has_value()) << What() << " under a cap of " << options.memory_cap_bytes
                                 << " bytes: the " << diff.value_or("") << " differs from eager's";
}

// Problems x variants, schedules only where there is a scan or a chain.
std::vector<std::tuple<std::string, std::string>> ProblemsTimesVariants() {
  std::vector<std::tuple<std::string, std::string>> out;
  for (const std::string& name : ProblemNames()) {
    const Problem& problem = ProblemNamed(name);
    const bool has_loop =
        Schedulable(problem.Build(ResolveParams(problem, {}, /*test_sizes=*/true)));
    for (const std::string& variant : kVariants) {
      if (CaseVariant::Parse(variant).needs_loop() && !has_loop) continue;
      out.emplace_back(name, variant);
    }
  }
  return out;
}

std::string VariantName(const ::testing::TestParamInfo<VariantTest::ParamType>& info) {
  return PairTestName(std::get<0>(info.param), std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(ProblemsTimesVariants, VariantTest,
                         ::testing::ValuesIn(ProblemsTimesVariants()), VariantName);

// CONTRACT.md's rules 3.4 and 3.5 on the cases where a zero is or is not a
// contribution. Each program feeds a parameter a -0.0 contribution from
// elsewhere (mul by z = -0.0), so adding a zeros tensor to its running sum
// (-0 + +0 = +0) changes its bits; or needs a cotangent where only eager's
// rule of needs computes one, which changes the FLOPs and the residuals.
// They bind engines on eager's kernels (sections 2 and 3 are their rules);
// an engine on kernels of its own is held to the oracle instead.
class ZeroContributionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = MakeEngine(EngineUnderTest());
    eager_ = MakeEngine("eager");
    if (engine_->kernels() != eager_->kernels()) {
      GTEST_SKIP() << EngineUnderTest() << " runs on kernels of its own";
    }
  }

  // Inputs: sin's points 0.5, 1.0, ...; z = -0.0.
  static std::vector<Tensor> Inputs(const Program& program) {
    std::vector<Tensor> args;
    for (int i = 0; i < program.num_params(); ++i) {
      Tensor t = Tensor::Zeros(DType::kF32, program.shapes[i]);
      for (int64_t j = 0; j < t.num_elements(); ++j) {
        t.f32()[j] = program.param_names[i] == "z" ? -0.0f : 0.5f * static_cast<float>(j + 1);
      }
      args.push_back(t);
    }
    return args;
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Engine> eager_;
};

bool AllNegativeZero(const Tensor& t) {
  for (int64_t j = 0; j < t.num_elements(); ++j) {
    if (t.at(j) != 0 || !std::signbit(t.at(j))) return false;
  }
  return true;
}

bool AllPositiveZero(const Tensor& t) {
  for (int64_t j = 0; j < t.num_elements(); ++j) {
    if (t.at(j) != 0 || std::signbit(t.at(j))) return false;
  }
  return true;
}

// 3.4: a checkpoint region's needed parameter that no cotangent reaches
// (b: the body never reads it) contributes nothing, not zeros:
// loss = sum(checkpoint(f)(a, b)) + sum(b * z), f(a, b) = sin(a). Eager:
// d/db = z = -0.0 exactly. Honoured or inline alike.
TEST_F(ZeroContributionTest, ARegionInputNoCotangentReachedContributesNothing) {
  const Program program = Trace(
      "unreached_region_input", {{"a", Shape({4})}, {"b", Shape({4})}, {"z", Shape({4})}},
      [](const std::vector<Var>& in) {
        auto f = checkpoint([](Var a, Var b) { return sin(a); }, Policy(), "ignores b");
        return add(sum(f(in[0], in[1])), sum(mul(in[1], in[2])));
      });
  const std::vector<Tensor> args = Inputs(program);
  for (const std::string& spec : {std::string("as-written"), std::string("everything_saveable")}) {
    const Program p = spec == "as-written" ? program : ApplyPolicy(program, Policy::Parse(spec));
    const Result want = eager_->ValueAndGrad(p, args, {0, 1});
    ASSERT_TRUE(AllNegativeZero(want.grads[1])) << "eager's d/db is not -0.0: the check is vacuous";
    const Result got = engine_->ValueAndGrad(p, args, {0, 1});
    EXPECT_TRUE(AllNegativeZero(got.grads[1]))
        << EngineUnderTest() << " under " << spec
        << ": d/db is not -0.0 (eager's bits); a checkpoint contributes nothing for a region "
           "input no cotangent reached (CONTRACT.md 3.4), not zeros";
    EXPECT_EQ(FirstBitDifference(got, want), std::nullopt) << spec;
  }
}

// loss = sum(scan(body, c, xs)) + sum(xs * z), body(c, x) = sin(c): x never
// reaches the carry. Differentiated with respect to xs alone.
Program UnreachedStackedInput() {
  return Trace("unreached_stacked_input",
               {{"c", Shape({4})}, {"xs", Shape({3, 4})}, {"z", Shape({3, 4})}},
               [](const std::vector<Var>& in) {
                 Var out = scan([](Var c, Var x) { return sin(c); }, in[0], in[1]);
                 return add(sum(out), sum(mul(in[1], in[2])));
               });
}

// 3.5: a needed stacked input's gradient is contributed even when no step's
// cotangent reached it (all zeros): d/dxs = z + zeros = +0.0 in eager,
// where leaving it out would keep z's -0.0.
TEST_F(ZeroContributionTest, AnAllZeroStackedGradientIsContributed) {
  const Program program = UnreachedStackedInput();
  const std::vector<Tensor> args = Inputs(program);
  const Result want = eager_->ValueAndGrad(program, args, {1});
  ASSERT_TRUE(AllPositiveZero(want.grads[0])) << "eager's d/dxs is not +0.0: the check is vacuous";
  const Result got = engine_->ValueAndGrad(program, args, {1});
  EXPECT_TRUE(AllPositiveZero(got.grads[0]))
      << EngineUnderTest()
      << ": d/dxs is not +0.0 (eager's bits); an all-zero stacked gradient is contributed "
         "(CONTRACT.md 3.5)";
  EXPECT_EQ(FirstBitDifference(got, want), std::nullopt);
}

// 3.5: the carry entering step i > 0 needs a cotangent when the scan's
// carry input does or any stacked input does (it depends on earlier xs),
// whatever the body computes: here c is not differentiated and x never
// reaches the carry, and still eager differentiates sin at steps 2 and 1
// and saves their inputs. An engine that needs by dependence computes
// less: other FLOPs and residuals than eager's.
TEST_F(ZeroContributionTest, TheScanCarrysNeedsAreEagers) {
  const Program program = UnreachedStackedInput();
  const std::vector<Tensor> args = Inputs(program);
  const Result want = eager_->ValueAndGrad(program, args, {1});
  ASSERT_GT(want.stats.residual_bytes, 0) << "eager saves nothing: the check is vacuous";
  const Result got = engine_->ValueAndGrad(program, args, {1});
  EXPECT_EQ(got.stats.flops_backward, want.stats.flops_backward)
      << EngineUnderTest() << ": not the backward FLOPs of eager; the scan carry's needs are "
      << "eager's (CONTRACT.md 3.5: step i > 0's carry needs a cotangent when any xs does)";
  EXPECT_EQ(got.stats.residual_bytes, want.stats.residual_bytes)
      << EngineUnderTest() << ": not the residuals of eager; the scan carry's needs are eager's "
      << "(CONTRACT.md 3.5)";
}

}  // namespace
}  // namespace remat
