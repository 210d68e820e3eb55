// The conformance suite's integer inputs (part of the binary of
// conformance_test.cc, harness/conformance.bzl): an id or a target outside
// its range is an error that names it (CONTRACT.md R6.1), never clamped
// into the range (JAX's gathers clamp by default; PyTorch's raise) nor read
// past the table; an integer input takes an i32 argument only and is never
// differentiated (R2.5).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "harness/conformance.h"
#include "harness/conformance_test_util.h"
#include "problems/problem.h"

namespace remat {
namespace {

class IndexRangeTest : public ::testing::TestWithParam<std::string> {};

// Each bounded integer input of the problem (ids, targets: an
// InputIntBound below 2^31) with one element, the middle one, set to its
// bound and then to -1: the run throws remat::Error, and the message holds
// the value.
TEST_P(IndexRangeTest, AnIdOrTargetOutOfRangeIsAClearError) {
  const Problem& problem = ProblemNamed(GetParam());
  const Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  std::unique_ptr<Engine> engine = MakeEngine(EngineUnderTest());
  int bounded = 0;
  for (int j = 0; j < c.program.num_params(); ++j) {
    if (c.program.dtype(j) != DType::kI32 || c.inputs[j].num_elements() == 0) continue;
    const int64_t bound = problem.InputIntBound(c.program.param_names[j], c.params);
    if (bound >= (int64_t{1} << 31)) continue;  // a seed: any value is valid
    ++bounded;
    for (const int64_t bad : {bound, int64_t{-1}}) {
      std::vector<Tensor> inputs;
      for (const Tensor& t : c.inputs) inputs.push_back(Copy(t));
      const int64_t at = inputs[j].num_elements() / 2;
      inputs[j].i32()[at] = static_cast<int32_t>(bad);
      const std::string what = StrCat(EngineUnderTest(), " on ", c.ToString(), " with ",
                                      c.program.param_names[j], "[", at, "] = ", bad,
                                      " (its range [0, ", bound, "))");
      try {
        engine->ValueAndGrad(c.program, inputs, c.wrt);
        ADD_FAILURE() << what << " ran: an index out of range must be an error, not clamped";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos)
            << what << ": the error does not name the value: " << e.what();
      }
    }
  }
  if (bounded == 0) GTEST_SKIP() << GetParam() << " has no ids or targets";
}

// R2.5 on each problem with integer inputs (ids, targets, seeds): asking
// for an integer input's gradient, or passing a float argument where an
// i32 is declared, is an error naming that input; the problem's own run
// then leaves the integer argument as it was.
TEST_P(IndexRangeTest, AnIntegerInputTakesI32OnlyAndIsNeverDifferentiated) {
  const Problem& problem = ProblemNamed(GetParam());
  const Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  std::unique_ptr<Engine> engine = MakeEngine(EngineUnderTest());
  int integers = 0;
  for (int j = 0; j < c.program.num_params(); ++j) {
    if (c.program.dtype(j) != DType::kI32) continue;
    ++integers;
    const std::string name = c.program.param_names[j];
    const std::string what = StrCat(EngineUnderTest(), " on ", c.ToString(), " with ", name);
    std::vector<int> wrt = c.wrt;
    wrt.push_back(j);
    try {
      engine->ValueAndGrad(c.program, c.inputs, wrt);
      ADD_FAILURE() << what << " in wrt ran: an integer input is never differentiated (R2.5)";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
          << what << " in wrt: the error does not name it: " << e.what();
    }
    std::vector<Tensor> floats;
    for (const Tensor& t : c.inputs) floats.push_back(Copy(t));
    floats[j] = Tensor::Zeros(DType::kF32, c.inputs[j].shape());
    try {
      engine->ValueAndGrad(c.program, floats, c.wrt);
      ADD_FAILURE() << what << " given as f32 ran: an integer input takes an i32 argument only (R2.5)";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
          << what << " given as f32: the error does not name it: " << e.what();
    }
  }
  if (integers == 0) GTEST_SKIP() << GetParam() << " has no integer inputs";
}

INSTANTIATE_TEST_SUITE_P(Problems, IndexRangeTest, ::testing::ValuesIn(ProblemNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace remat
