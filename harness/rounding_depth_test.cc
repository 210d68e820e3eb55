#include "harness/rounding_depth.h"

#include <gtest/gtest.h>

#include "engines/api/tracer.h"

namespace remat {
namespace {

// loss = sum(square(relu(x @ w))), x (8, 16), w (16, 4):
//   x @ w: 16-term sums, K 16; relu exact; square +1: 17; the sum of 32: 49.
//   Backward: d(sum) broadcast: 0; d(square) = 2y * dy from square's input
//   (relu's output, K 16): max(0, 16) + 2 = 18; relu exact: 18;
//   dx = dC w^T (4 terms): max(18, 0) + 4 = 22; dw = x^T dC (8 rows):
//   max(0, 18) + 8 = 26. The loss's 32-term sum is in the value's K only:
//   a gradient of a sum is exact.
TEST(RoundingDepthTest, CountsEachOutputsOwnChain) {
  Program p = Trace("dense", {{"x", Shape({8, 16})}, {"w", Shape({16, 4})}},
                    [](const std::vector<Var>& in) {
                      return sum(square(relu(matmul(in[0], in[1]))));
                    });
  EXPECT_EQ(RoundingDepths(p, {0, 1}), (std::vector<double>{49, 22, 26}));
  EXPECT_EQ(RoundingDepths(p, {1}), (std::vector<double>{49, 26}));
}

// A value read twice gets two contributions: one more rounding.
// loss = sum(mul(x, x)) over 4: Kf(mul) = 1, value 1 + 4 = 5; dx: each
// contribution max(0, 0) + 1 = 1, their sum 2.
TEST(RoundingDepthTest, ASecondContributionIsOneMoreRounding) {
  Program p = Trace("square_by_mul", {{"x", Shape({4})}},
                    [](const std::vector<Var>& in) { return sum(mul(in[0], in[0])); });
  EXPECT_EQ(RoundingDepths(p, {0}), (std::vector<double>{5, 2}));
}

// A scan of L steps of y @ w (d = 4) grows the carry's depth by d per step,
// and checkpointing changes nothing.
TEST(RoundingDepthTest, ScansCountTheirStepsAndRegionsTheirBodies) {
  auto build = [](bool checkpointed) {
    return Trace("stack", {{"ws", Shape({3, 4, 4})}, {"x", Shape({2, 4})}},
                 [checkpointed](const std::vector<Var>& in) {
                   auto step = [](Var y, Var w) { return matmul(y, w); };
                   Var y = checkpointed
                               ? scan(checkpoint(step), in[1], in[0])
                               : scan(step, in[1], in[0]);
                   return sum(y);
                 });
  };
  const std::vector<double> plain = RoundingDepths(build(false), {0, 1});
  // Forward: 3 steps of 4-term sums, then the sum of 8: 12 + 8 = 20.
  EXPECT_EQ(plain[0], 20);
  // dx: back through 3 steps of dC w^T (4 terms each): 12.
  EXPECT_EQ(plain[2], 12);
  // dws: the deepest slice: step 2's dW = y2^T dC: max(8, 0) + 2 rows = 10;
  // step 0's: max(0, 8) + 2 = 10.
  EXPECT_EQ(plain[1], 10);
  EXPECT_EQ(RoundingDepths(build(true), {0, 1}), plain);
}

TEST(RoundingDepthTest, AnUnreachedGradientIsExact) {
  Program p = Trace("unused", {{"x", Shape({3})}, {"v", Shape({3})}},
                    [](const std::vector<Var>& in) { return sum(in[0]); });
  EXPECT_EQ(RoundingDepths(p, {0, 1}), (std::vector<double>{3, 0, 0}));
}

}  // namespace
}  // namespace remat
