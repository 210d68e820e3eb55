// The conformance suite's needs (part of the binary of conformance_test.cc,
// harness/conformance.bzl): CONTRACT.md R2.4, an input's cotangent is
// computed only if the input depends on a parameter in `wrt`. Seen from
// outside through the backward pass's FLOPs (Stats::flops_backward, which
// excludes recomputation): with each float input of a problem alone in
// `wrt`, an engine's backward FLOPs are eager's, since its backward rules
// are called with the same needs. An engine that computes every cotangent
// (needs ignored) counts more; one that derives needs its own way (a scan
// carry's by dependence) counts other FLOPs where the ways differ.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/registry.h"
#include "harness/conformance.h"
#include "harness/conformance_test_util.h"
#include "problems/problem.h"

namespace remat {
namespace {

class NeedsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NeedsTest, EachFloatInputAloneCostsEagersBackwardFlops) {
  const Problem& problem = ProblemNamed(GetParam());
  const Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  std::unique_ptr<Engine> engine = MakeEngine(EngineUnderTest());
  if (engine->kernels().empty()) {
    GTEST_SKIP() << EngineUnderTest() << " runs on no kernel table: its FLOPs are not the op "
                                         "definitions' counts (R5.5), so they say nothing of its needs";
  }
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  for (const int j : AllInputs(c.program)) {
    const Result want = eager->ValueAndGrad(c.program, c.inputs, {j});
    const Result got = engine->ValueAndGrad(c.program, c.inputs, {j});
    EXPECT_EQ(got.stats.flops_backward, want.stats.flops_backward)
        << EngineUnderTest() << " on " << c.ToString() << " with wrt = " << c.program.param_names[j]
        << " alone: backward FLOPs differ from eager's (R2.4: a cotangent is computed exactly where "
           "an input depends on one in wrt)";
    ASSERT_EQ(got.grads.size(), 1u) << c.program.param_names[j];
  }
}

INSTANTIATE_TEST_SUITE_P(Problems, NeedsTest, ::testing::ValuesIn(ProblemNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace remat
