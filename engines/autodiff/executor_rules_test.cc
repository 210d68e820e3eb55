// The contract's rules as ExecutorRules states them (executor_rules.h).
#include "engines/autodiff/executor_rules.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace {

TEST(CotangentSumsTest, TheFirstContributionIsTheSumThenAddIsOutOfPlace) {
  OneDnnKernels kernels;
  auto tracker = std::make_shared<MemoryTracker>();
  kernels.Bind(tracker);
  CotangentSums sums(&kernels, 3);
  EXPECT_FALSE(sums.Take(0).defined()) << "nothing reached value 0";

  const Tensor a = Tensor::FromF32(Shape({2}), {1.0f, -0.0f});
  const Tensor b = Tensor::FromF32(Shape({2}), {2.0f, -0.0f});
  sums.Add(1, a);
  const Tensor only = sums.Take(1);
  EXPECT_EQ(only.buffer(), a.buffer()) << "one contribution is the sum itself, not a copy";
  EXPECT_FALSE(sums.Take(1).defined()) << "Take leaves no sum behind";

  sums.Add(2, a);
  sums.Add(2, b);
  const Tensor sum = sums.Take(2);
  ASSERT_TRUE(sum.defined());
  EXPECT_NE(sum.buffer(), a.buffer()) << "the sum of two is a new tensor";
  EXPECT_EQ(sum.f32()[0], 3.0f);
  EXPECT_TRUE(std::signbit(sum.f32()[1])) << "-0 + -0 is -0: no zeros were added first";
  EXPECT_EQ(a.f32()[0], 1.0f) << "the first contribution is not written";
}

TEST(CotangentSumsTest, StartSetsASumThatAddContinues) {
  OneDnnKernels kernels;
  kernels.Bind(std::make_shared<MemoryTracker>());
  CotangentSums sums(&kernels, 1);
  sums.Start(0, Tensor::FromF32(Shape({1}), {1.0f}));
  sums.Add(0, Tensor::FromF32(Shape({1}), {0.5f}));
  EXPECT_EQ(sums.Take(0).f32()[0], 1.5f);
}

std::vector<bool> Carry(const std::vector<bool>& needs, int64_t length) {
  return ContractRules().CarryNeeds(Op(), needs, length);
}

TEST(ExecutorRulesTest, ScanCarryNeedsAreContractSection3Point5) {
  // The carry needs one if the scan's carry does...
  EXPECT_EQ(Carry({true, false}, 3), (std::vector<bool>{true, true, true}));
  // ...and from step 1 on if any stacked input does (it depends on earlier
  // slices), whether or not the body's output depends on them.
  EXPECT_EQ(Carry({false, true}, 3), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(Carry({false, false, true}, 2), (std::vector<bool>{false, true}));
  EXPECT_EQ(Carry({false, false}, 2), (std::vector<bool>{false, false}));
  EXPECT_TRUE(Carry({true}, 0).empty());
}

TEST(ExecutorRulesTest, TheDefaultsChangeNothing) {
  ExecutorRules& rules = ContractRules();
  OneDnnKernels kernels;
  std::vector<Tensor> din = {Tensor(), Tensor::FromF32(Shape({1}), {2.0f})};
  rules.FinishInputCotangents(Op(), {true, true}, {false, true}, kernels, &din);
  EXPECT_FALSE(din[0].defined());
  EXPECT_EQ(din[1].f32()[0], 2.0f);
  Tensor residual = Tensor::FromF32(Shape({1, 2}), {1.0f, 2.0f});
  rules.OnResidual(/*recomputing=*/true, &residual);
  EXPECT_EQ(residual.shape(), Shape({1, 2}));
  const std::map<int, Tensor> saved = {{3, residual}};
  EXPECT_EQ(rules.SavedForRecompute(Program(), &saved), &saved);
}

}  // namespace
}  // namespace remat
