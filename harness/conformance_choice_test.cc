// The conformance suite's choosing ops (part of the binary of
// conformance_test.cc, harness/conformance.bzl): CONTRACT.md R2.8's order,
// end to end and exactly, on inputs built to reach its every clause: equal
// values, NaNs of either sign among numbers, and several NaNs in a row or a
// window. The problems reach ties (moe's router, boundaries' image); NaNs
// among numbers only these do.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/policy.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "harness/conformance_test_util.h"

namespace remat {
namespace {

Tensor Filled(const Shape& shape, const std::vector<float>& values) {
  Tensor t = Tensor::Zeros(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = values[i];
  return t;
}

// "NaN" for a NaN, else the value's text.
std::string Describe(double v) { return std::isnan(v) ? "NaN" : std::to_string(v); }

// Each element of `got` is NaN exactly where `want` is, and equal elsewhere.
void ExpectPattern(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size())) << what;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double g = got.at(i), w = want[i];
    EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w)
        << what << "[" << i << "] is " << Describe(g) << ", want " << Describe(w);
  }
}

// A region of the program under each of two policies, so that an engine
// that recomputes chooses again.
std::vector<std::pair<std::string, Program>> AsWrittenAndSaved(const Program& program) {
  return {{"as-written", program},
          {"everything_saveable", ApplyPolicy(program, Policy::Parse("everything_saveable"))}};
}

// max_pool2d, 2x2 windows at stride 2 over one 2x6 plane, times v, summed:
//   window 0: 1, 3 / 3, 2       two 3s: the first, (0, 1), is chosen
//   window 1: -NaN, 5 / NaN, 5  two NaNs of either sign above two 5s: the
//                               first, (0, 2), whatever its sign
//   window 2: 7, 7 / 0, NaN     a NaN after equal numbers: (1, 5)
// dx is v at the chosen taps and 0 elsewhere (finite: the NaNs reach the
// value and dv only). A pool that takes the last of equal taps, or lets a
// later NaN replace an earlier one (PyTorch's CPU kernel does), moves a v.
TEST(ChoiceTest, MaxPoolChoosesTheFirstOfEqualTapsAndOfNaNs) {
  const Program program = Trace(
      "max_pool_choice", {{"x", Shape({1, 1, 2, 6})}, {"v", Shape({1, 1, 1, 3})}},
      [](const std::vector<Var>& in) {
        auto region = checkpoint(
            [](Var x, Var v) {
              return sum(mul(apply("max_pool2d", {x}, {.ints = {2, 2, 0}}), v));
            },
            Policy(), "pool");
        return region(in[0], in[1]);
      });
  const std::vector<Tensor> args = {
      Filled(program.shapes[0], {1, 3, -NAN, 5, 7, 7, 3, 2, NAN, 5, 0, NAN}),
      Filled(program.shapes[1], {2, 3, 4})};
  for (const auto& [spec, p] : AsWrittenAndSaved(program)) {
    const Result r = MakeEngine(EngineUnderTest())->ValueAndGrad(p, args, {0, 1});
    const std::string what = EngineUnderTest() + " under " + spec + ": grad ";
    ExpectPattern(r.grads[0], {0, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 4}, what + "x");
    ExpectPattern(r.grads[1], {3, NAN, NAN}, what + "v");
  }
}

// top_k_softmax with k = 2:
//   row 0: 1, NaN, 2, -NaN, 2   two NaNs, of either sign, above every
//                               number: 1 and 3 chosen
//   row 1: 4, 9, 1, 9, 9        three equal largest: the first two, 1 and 3
// du is the gates: 0 at every element not chosen; row 0's chosen are NaN
// (a softmax over NaNs), row 1's are 1/2 each. Row 1's dx is the softmax's
// gradient over the chosen, u = 2 and 4 about their mean 3: -1/2, 1/2, and
// 0 elsewhere. (Row 0's dx is NaN throughout in eager's kernel, 0 * NaN at
// the elements not chosen; the contract does not fix it.)
TEST(ChoiceTest, TopKRanksNaNsAboveNumbersAndTiesByTheLowerIndex) {
  const Program program = Trace(
      "top_k_choice", {{"x", Shape({2, 5})}, {"u", Shape({2, 5})}},
      [](const std::vector<Var>& in) {
        auto region = checkpoint(
            [](Var x, Var u) { return sum(mul(apply("top_k_softmax", {x}, {.ints = {2}}), u)); },
            Policy(), "route");
        return region(in[0], in[1]);
      });
  const std::vector<Tensor> args = {
      Filled(program.shapes[0], {1, NAN, 2, -NAN, 2, 4, 9, 1, 9, 9}),
      Filled(program.shapes[1], {1, 2, 3, 4, 5, 1, 2, 3, 4, 5})};
  for (const auto& [spec, p] : AsWrittenAndSaved(program)) {
    const Result r = MakeEngine(EngineUnderTest())->ValueAndGrad(p, args, {0, 1});
    const std::string what = EngineUnderTest() + " under " + spec + ": grad ";
    ExpectPattern(r.grads[1], {0, NAN, 0, NAN, 0, 0, 0.5, 0, 0.5, 0}, what + "u");
    ASSERT_EQ(r.grads[0].num_elements(), 10) << what << "x";
    for (int64_t i = 5; i < 10; ++i) {
      const double want[] = {0, -0.5, 0, 0.5, 0};
      EXPECT_EQ(r.grads[0].at(i), want[i - 5])
          << what << "x[" << i << "] is " << Describe(r.grads[0].at(i));
    }
  }
}

}  // namespace
}  // namespace remat
