// The conformance suite: every problem on the engine under test, checked
// against the float64 reference and for what every engine must do.
// One binary per engine (see conformance.bzl): `--engine=NAME` picks it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat {
namespace {

std::string& EngineUnderTest() {
  static std::string name = "eager";
  return name;
}

std::vector<std::string> ProblemNames() {
  std::vector<std::string> names;
  for (const auto& p : AllProblems()) names.push_back(p->name());
  return names;
}

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const Problem& problem = FindProblem(GetParam());
    case_ = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
    engine_ = MakeEngine(EngineUnderTest());
  }

  Result Run(const RunOptions& options = {}) {
    return engine_->ValueAndGrad(case_.program, case_.inputs, case_.wrt, options);
  }

  Case case_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(ConformanceTest, AgreesWithTheFloat64Reference) {
  Result got = Run();
  Result ref = MakeEngine("reference")->ValueAndGrad(case_.program, case_.inputs, case_.wrt);
  Agreement a = CompareWithReference(case_, got, ref);
  EXPECT_TRUE(a.ok) << EngineUnderTest() << ": worst error is " << a.worst_ratio
                    << "x the tolerance: " << a.detail;
  // The gradients are not all zero (a vacuous comparison proves nothing).
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    double norm = 0;
    for (int64_t j = 0; j < ref.grads[i].num_elements(); ++j) norm += std::abs(ref.grads[i].at(j));
    EXPECT_GT(norm, 0) << case_.ToString() << ": reference gradient " << i << " is all zero";
  }
}

TEST_P(ConformanceTest, SameInputsGiveTheSameBits) {
  Result a = Run();
  Result b = Run();
  EXPECT_TRUE(BitwiseEqual(a.value, b.value));
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    EXPECT_TRUE(BitwiseEqual(a.grads[i], b.grads[i])) << "gradient " << i;
  }
}

TEST_P(ConformanceTest, TrackerReturnsToZeroLiveBytes) {
  std::shared_ptr<MemoryTracker> tracker;
  int64_t held = 0;
  {
    Result r = Run();
    tracker = r.tracker;
    held = r.value.bytes();
    for (const Tensor& g : r.grads) held += g.bytes();
    // Only the results (and the caller's arguments, no longer counted) remain.
    EXPECT_EQ(tracker->live_bytes(), held);
    EXPECT_GE(r.stats.peak_bytes, held + r.stats.residual_bytes);
    EXPECT_GT(r.stats.flops_forward, 0);
    EXPECT_GT(r.stats.flops_backward, 0);
    EXPECT_FALSE(r.stats.peak_site.empty());
  }
  EXPECT_EQ(tracker->live_bytes(), 0);
}

TEST_P(ConformanceTest, ResidualListingNamesEverySavedValue) {
  Result r = Run();
  ASSERT_FALSE(r.stats.residuals.empty());
  int64_t computed = 0;
  for (const Residual& res : r.stats.residuals) {
    EXPECT_FALSE(res.source.empty());
    EXPECT_NE(res.source.find(res.is_argument ? "from the argument" : "output of"),
              std::string::npos)
        << res.source;
    if (!res.is_argument) computed += res.bytes;
  }
  EXPECT_EQ(computed, r.stats.residual_bytes);
}

TEST_P(ConformanceTest, NonFiniteInputsPropagateWithoutCrashing) {
  for (float bad : {NAN, INFINITY}) {
    std::vector<Tensor> inputs;
    for (const Tensor& t : case_.inputs) inputs.push_back(Copy(t));
    Tensor& last = inputs.back();
    last.f32()[last.num_elements() / 2] = bad;
    Result r = engine_->ValueAndGrad(case_.program, inputs, case_.wrt);
    Result again = engine_->ValueAndGrad(case_.program, inputs, case_.wrt);
    EXPECT_TRUE(BitwiseEqual(r.value, again.value));
    EXPECT_FALSE(std::isfinite(r.value.at(0)) && bad != bad)
        << case_.ToString() << ": a NaN input vanished from the loss";
  }
}

TEST_P(ConformanceTest, BadArgumentsAreClearErrors) {
  std::vector<Tensor> fewer(case_.inputs.begin(), case_.inputs.end() - 1);
  try {
    engine_->ValueAndGrad(case_.program, fewer, case_.wrt);
    ADD_FAILURE() << "missing argument accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(case_.program.name), std::string::npos) << e.what();
  }
  std::vector<Tensor> reshaped = case_.inputs;
  reshaped[0] = Tensor::Zeros(DType::kF32, Shape({3, 1, 2}));
  try {
    engine_->ValueAndGrad(case_.program, reshaped, case_.wrt);
    ADD_FAILURE() << "wrong shape accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(case_.program.param_names[0]), std::string::npos) << m;
    EXPECT_NE(m.find("[3,1,2]"), std::string::npos) << m;
  }
  EXPECT_THROW(engine_->ValueAndGrad(case_.program, case_.inputs, {case_.program.num_params()}),
               Error);
}

TEST_P(ConformanceTest, MemoryLimitIsAnErrorAndLeaksNothing) {
  Result r = Run();
  RunOptions options;
  options.max_memory_bytes = r.stats.peak_bytes - 1;
  try {
    Run(options);
    ADD_FAILURE() << "a run past --max-memory succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
  }
  options.max_memory_bytes = r.stats.peak_bytes;
  Result exact = Run(options);  // the measured peak is enough
  EXPECT_EQ(exact.stats.peak_bytes, r.stats.peak_bytes);
}

INSTANTIATE_TEST_SUITE_P(Problems, ConformanceTest, ::testing::ValuesIn(ProblemNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  // --engine=NAME is read before GoogleTest registers the parameterized tests.
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--engine=", 9) == 0) remat::EngineUnderTest() = argv[i] + 9;
  }
  ::testing::InitGoogleTest(&argc, argv);
  try {
    remat::MakeEngine(remat::EngineUnderTest());
  } catch (const remat::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  std::printf("engine under test: %s\n", remat::EngineUnderTest().c_str());
  return RUN_ALL_TESTS();
}
