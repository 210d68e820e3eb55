// The conformance suite's orders of summation and signs of zero (part of
// the binary of conformance_test.cc, harness/conformance.bzl): CONTRACT.md
// R2.2's reductions over axes and broadcast cotangents (from +0, in
// increasing flat index, one running sum in the kernels' dtype), R2.7's
// scatter (a repeated id's rows in increasing position, from +0) and R3.3's
// running sums (the first contribution itself, no zeros added), each on
// inputs where another order, a wider accumulator or a start from zeros
// gives other bits. The expected bits are written here from the rules, not
// taken from eager: these checks hold eager itself to the contract, and an
// engine on eager's kernels to it apart from VariantTest's comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/policy.h"
#include "engines/api/program.h"
#include "engines/api/program_text.h"
#include "engines/api/registry.h"
#include "harness/conformance_test_util.h"

namespace remat {
namespace {

constexpr float kBig = 16777216.0f;  // 2^24: kBig + 1 rounds back to kBig in float32
constexpr float kHuge = 1152921504606846976.0f;  // 2^60: kHuge + 2 rounds back to kHuge in float64

Tensor Floats(const Shape& shape, const std::vector<float>& values) {
  Tensor t = Tensor::Zeros(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = values[i];
  return t;
}

Tensor Ints(const Shape& shape, const std::vector<int32_t>& values) {
  Tensor t = Tensor::Zeros(DType::kI32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.i32()[i] = values[i];
  return t;
}

// "-0", "+0" or the value: a failure shows the sign of a zero.
std::string Describe(double v) {
  if (v == 0) return std::signbit(v) ? "-0" : "+0";
  return std::to_string(v);
}

// got equals want element for element, a zero's sign too (in the engine's
// dtype: these values are exact in float32 and float64 alike).
void ExpectBits(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size())) << what;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double g = got.at(i);
    EXPECT_TRUE(g == want[i] && std::signbit(g) == std::signbit(want[i]))
        << what << "[" << i << "] is " << Describe(g) << ", the contract's order gives "
        << Describe(want[i]);
  }
}

// Whether the engine under test runs on eager's kernels, where R2.2's,
// R2.7's and section 3's orders fix its bits (R1.5); an engine on other
// kernels (the float64 oracle, whose sums of these inputs are exact and
// whose rules add into zeros) is held to the oracle's tolerance instead.
bool OnEagersKernels() {
  return MakeEngine(EngineUnderTest())->kernels() == MakeEngine("eager")->kernels();
}
std::string NotOnEagersKernels() {
  return EngineUnderTest() + " is not on eager's kernels: the orders and signs of zero bind bits, "
                             "it is held to the oracle's tolerance (R1.5)";
}

// The program as written and with every region recomputed.
std::vector<std::pair<std::string, Program>> AsWrittenAndRecomputed(const Program& program) {
  return {{"as-written", program},
          {"nothing_saveable", ApplyPolicy(program, Policy::Parse("nothing_saveable"))}};
}

// Rows of 4 chosen so that a float64 running sum in flat order from +0,
// rounded once, gives a value no float32 accumulator and no other order
// does:
//   2^24, 1, 1, -2^24   float64 in any order: 2; a float32 running sum in
//                       flat order 0, pairwise in float32 1
//   -0, -0, -0, -0      from +0: +0 (from the first element: -0)
//   1, 1, 2^60, -2^60   float64 in flat order: 2, then 2^60 + 2 rounds to
//                       2^60, then 0; pairwise (1 + 1) + 0 = 2, last to
//                       first 0 + 1 + 1 = 2
// sum over axis 1 of x (3, 4) is read back as dv: the loss is
// sum(mul(sum(x) ints=[1], v)), whose dv is the sum itself (times 1). The
// broadcast add's db (b of shape (4), added to c (3, 4)) sums dy = w's
// columns over the rows in row order from +0: w's columns below hold the
// same three patterns, read down a column.
TEST(OrderTest, ReductionsAndBroadcastCotangentsSumInTheContractsOrder) {
  if (!OnEagersKernels()) GTEST_SKIP() << NotOnEagersKernels();
  const Program program = ParseProgram(R"(program order(x: f32[3,4], v: f32[3], c: f32[4,3], b: f32[3], w: f32[4,3]) {
  %p: f32[] = checkpoint(%x, %v, %c, %b, %w) name="sums" {
    body(x: f32[3,4], v: f32[3], c: f32[4,3], b: f32[3], w: f32[4,3])
    %r: f32[3] = sum(%x) ints=[1]
    %rv = mul(%r, %v)
    %l1: f32[] = sum(%rv)
    %a: f32[4,3] = add(%c, %b)
    %aw = mul(%a, %w)
    %l2: f32[] = sum(%aw)
    %l: f32[] = add(%l1, %l2)
    return %l
  }
  return %p
})",
                                       "order_test");
  const std::vector<Tensor> args = {
      Floats(Shape({3, 4}), {kBig, 1, 1, -kBig, -0.0f, -0.0f, -0.0f, -0.0f, 1, 1, kHuge, -kHuge}),
      Floats(Shape({3}), {1, 1, 1}), Floats(Shape({4, 3}), {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
      Floats(Shape({3}), {0, 0, 0}),
      // w's columns: (2^24, 1, 1, -2^24), (-0, -0, -0, -0), (1, 1, 2^60, -2^60).
      Floats(Shape({4, 3}), {kBig, -0.0f, 1, 1, -0.0f, 1, 1, -0.0f, kHuge, -kBig, -0.0f, -kHuge})};
  for (const auto& [spec, p] : AsWrittenAndRecomputed(program)) {
    const Result r = MakeEngine(EngineUnderTest())->ValueAndGrad(p, args, {1, 3});
    const std::string what = EngineUnderTest() + " under " + spec + ": grad ";
    ExpectBits(r.grads[0], {2, 0, 0}, what + "v (sum over axis 1, R2.2)");
    ExpectBits(r.grads[1], {2, 0, 0}, what + "b (a broadcast operand's cotangent, R2.2)");
  }
}

// embedding's backward (R2.7): id 1 at every position, the cotangent rows
// (through mul by w) 2^24, 1, 1, -2^24 in position order: row 1's gradient
// is 0 added in increasing position from +0 (1 in pairwise order, 2 in
// float64 or last position first); id 2 at no position: +0 (zeros, R1.3);
// a second table read by ids whose cotangents are all -0: +0, the scatter
// starting from zeros (where R3.3's running sums would keep -0).
TEST(OrderTest, EmbeddingAddsARepeatedIdsRowsInPositionOrderFromZeros) {
  if (!OnEagersKernels()) GTEST_SKIP() << NotOnEagersKernels();
  const Program program = ParseProgram(R"(program scatter(t: f32[3,1], ids: i32[4] data, w: f32[4,1], u: f32[2,1], zs: i32[2] data, z: f32[2,1]) {
  %e: f32[4,1] = embedding(%t, %ids)
  %ew = mul(%e, %w)
  %l1: f32[] = sum(%ew)
  %f: f32[2,1] = embedding(%u, %zs)
  %fz = mul(%f, %z)
  %l2: f32[] = sum(%fz)
  %l: f32[] = add(%l1, %l2)
  return %l
})",
                                       "order_test");
  const std::vector<Tensor> args = {Floats(Shape({3, 1}), {0.5f, 0.25f, 2}), Ints(Shape({4}), {1, 1, 1, 1}),
                                    Floats(Shape({4, 1}), {kBig, 1, 1, -kBig}), Floats(Shape({2, 1}), {3, 4}),
                                    Ints(Shape({2}), {0, 0}), Floats(Shape({2, 1}), {-0.0f, -0.0f})};
  const Result r = MakeEngine(EngineUnderTest())->ValueAndGrad(program, args, {0, 3});
  const std::string what = EngineUnderTest() + ": grad ";
  ExpectBits(r.grads[0], {0, 0, 0}, what + "t (a repeated id's rows, R2.7)");
  ExpectBits(r.grads[1], {0, 0}, what + "u (rows of -0 added to zeros, R2.7)");
}

// A running sum starts as its first contribution (R3.3): x read once by
// mul(x, c) with c = -0 gets dx = 1 * -0 = -0, kept; y read twice, by
// mul(y, c) and mul(y, c), gets -0 + -0 = -0. An engine that adds
// contributions to zeros gives +0 for both, and an engine that contributes
// zeros for an input a checkpoint region does not read (R3.4) turns the
// region's -0 into +0.
TEST(OrderTest, ARunningSumStartsAsItsFirstContributionAndKeepsMinusZero) {
  if (!OnEagersKernels()) GTEST_SKIP() << NotOnEagersKernels();
  const Program program = ParseProgram(R"(program signs(x: f32[2], y: f32[2], c: f32[2], q: f32[2]) {
  %p: f32[] = checkpoint(%x, %y, %c, %q) name="region" {
    body(x: f32[2], y: f32[2], c: f32[2], q: f32[2])
    %a = mul(%x, %c)
    %b = mul(%y, %c)
    %d = mul(%y, %c)
    %ab = add(%a, %b)
    %abd = add(%ab, %d)
    %s: f32[] = sum(%abd)
    return %s
  }
  %qc = mul(%q, %c)
  %t: f32[] = sum(%qc)
  %l: f32[] = add(%p, %t)
  return %l
})",
                                       "order_test");
  const std::vector<Tensor> args = {Floats(Shape({2}), {1, 2}), Floats(Shape({2}), {3, 4}),
                                    Floats(Shape({2}), {-0.0f, -0.0f}), Floats(Shape({2}), {5, 6})};
  for (const auto& [spec, p] : AsWrittenAndRecomputed(program)) {
    const Result r = MakeEngine(EngineUnderTest())->ValueAndGrad(p, args, {0, 1, 3});
    const std::string what = EngineUnderTest() + " under " + spec + ": grad ";
    ExpectBits(r.grads[0], {-0.0f, -0.0f}, what + "x (one contribution, R3.3)");
    ExpectBits(r.grads[1], {-0.0f, -0.0f}, what + "y (two, R3.3)");
    ExpectBits(r.grads[2], {-0.0f, -0.0f}, what + "q (outside the region, R3.3)");
  }
}

}  // namespace
}  // namespace remat
