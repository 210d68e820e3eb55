#include "problems/problem.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engines/api/error.h"

namespace remat {
namespace {

TEST(ProblemTest, EveryProblemBuildsAtDefaultAndTestSizes) {
  for (const auto& p : AllProblems()) {
    for (bool test_sizes : {false, true}) {
      SCOPED_TRACE(p->name());
      ParamValues params = ResolveParams(*p, {}, test_sizes);
      Program program = p->Build(params);
      EXPECT_EQ(program.shapes[program.output], Shape());
      EXPECT_FALSE(WrtIndices(*p, program).empty());
    }
  }
}

TEST(ProblemTest, InputsAreSeededAndReproducible) {
  const Problem& p = FindProblem("layer_loss");
  ParamValues params = ResolveParams(p, {}, /*test_sizes=*/true);
  Program program = p.Build(params);
  auto a = MakeInputs(p, program, params, 7);
  auto b = MakeInputs(p, program, params, 7);
  auto c = MakeInputs(p, program, params, 8);
  ASSERT_EQ(a.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(BitwiseEqual(a[i], b[i]));
    EXPECT_FALSE(BitwiseEqual(a[i], c[i]));
  }
  // He-uniform weights: |w| < sqrt(6/d).
  const double bound = std::sqrt(6.0 / 16.0);
  for (int64_t j = 0; j < a[0].num_elements(); ++j) EXPECT_LE(std::abs(a[0].f32()[j]), bound);
}

TEST(ProblemTest, SeedShapes) {
  Program chain = FindProblem("sin_chain").Build({});
  EXPECT_EQ(chain.shapes[0], Shape({5, 4}));
  EXPECT_EQ(chain.shapes[3], Shape({4, 1}));
  EXPECT_EQ(chain.CountOps(OpKind::kCheckpoint), 3);
  const Problem& stack = FindProblem("scan_stack");
  Program s = stack.Build(ResolveParams(stack, {{"L", 3}, {"d", 4}, {"N", 2}}));
  EXPECT_EQ(s.shapes[0], Shape({3, 4, 4}));
  const Problem& rec = FindProblem("sin_recursive");
  Program r = rec.Build(ResolveParams(rec, {{"D", 16}}));
  EXPECT_EQ(r.CountOps(OpKind::kSin), 16);
  EXPECT_GT(r.CountOps(OpKind::kCheckpoint), 3);
}

TEST(ProblemTest, BadNamesListTheValidOnes) {
  try {
    FindProblem("layer_los");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scan_stack"), std::string::npos) << e.what();
  }
  const Problem& p = FindProblem("scan_stack");
  try {
    ResolveParams(p, {{"depth", 3}});
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'depth'"), std::string::npos) << m;
    EXPECT_NE(m.find("L (default 8)"), std::string::npos) << m;
  }
  EXPECT_THROW(ResolveParams(p, {{"L", 0}}), Error);
  EXPECT_THROW(ResolveParams(FindProblem("sin_chain"), {{"d", 3}}), Error);
}

TEST(ProblemTest, SelectInputsByNameAndPrefix) {
  const Problem& p = FindProblem("layer_loss");
  const Program program = p.Build(ResolveParams(p, {}, /*test_sizes=*/true));
  ASSERT_EQ(program.param_names, (std::vector<std::string>{"w1", "w2", "w3", "x"}));
  // In the order named; a prefix in input order.
  EXPECT_EQ(SelectInputs(program, {"x", "w*"}, "--wrt"), (std::vector<int>{3, 0, 1, 2}));
  EXPECT_EQ(SelectInputs(program, {"w2"}, "--wrt"), (std::vector<int>{1}));
  EXPECT_EQ(WrtIndices(p, program), (std::vector<int>{0, 1, 2}));
  auto message = [&](const std::vector<std::string>& names) -> std::string {
    try {
      SelectInputs(program, names, "--wrt");
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(message({"y"}),
            "--wrt names 'y', which is not an input of layer_loss (w1, w2, w3, x)");
  EXPECT_EQ(message({"q*"}),
            "--wrt names 'q*', which is not an input of layer_loss (w1, w2, w3, x)");
  EXPECT_EQ(message({"x", "x"}), "--wrt names x twice");
  EXPECT_EQ(message({"w*", "w2"}), "--wrt names w2 twice ('w*' and 'w2')");
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// The --param flags every command line takes (remat, engine_loop, dtr_sweep).
TEST(ParseParamFlagsTest, IntegersByNameOrAnErrorNamingTheFlag) {
  const std::map<std::string, int64_t> got = ParseParamFlags({"D=8", "L=-3"});
  EXPECT_EQ(got, (std::map<std::string, int64_t>{{"D", 8}, {"L", -3}}));
  for (const std::string bad : {"D", "=8", "D=", "D=8x", "D=x"}) {
    try {
      ParseParamFlags({bad});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace remat
