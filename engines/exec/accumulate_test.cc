#include "engines/exec/accumulate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "engines/api/error.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace {

Tensor Vec(std::vector<float> v, const std::shared_ptr<MemoryTracker>& tracker = nullptr) {
  Tensor t = Tensor::Zeros(DType::kF32, Shape({static_cast<int64_t>(v.size())}), tracker);
  for (size_t i = 0; i < v.size(); ++i) t.f32()[i] = v[i];
  return t;
}

TEST(AccumulateTest, TheFirstContributionIsTheSumItself) {
  OneDnnKernels k;
  Tensor sum;
  Tensor c = Vec({-0.0f, 1.0f});
  Accumulate(k, &sum, c);
  EXPECT_EQ(sum.buffer(), c.buffer());  // no zeros added, no copy: -0.0 stays -0.0
  EXPECT_TRUE(std::signbit(sum.f32()[0]));
}

TEST(AccumulateTest, LaterContributionsAreAddedOutOfPlace) {
  OneDnnKernels k;
  auto tracker = std::make_shared<MemoryTracker>();
  k.Bind(tracker);
  Tensor first = Vec({-0.0f, 1.0f}, tracker);
  Tensor sum;
  Accumulate(k, &sum, first);
  Accumulate(k, &sum, Vec({0.0f, 2.0f}, tracker));
  EXPECT_NE(sum.buffer(), first.buffer());   // a new tensor
  EXPECT_TRUE(std::signbit(first.f32()[0]));  // the old sum is untouched
  EXPECT_FALSE(std::signbit(sum.f32()[0]));  // -0 + +0 = +0: zeros added change bits
  EXPECT_EQ(sum.f32()[1], 3.0f);
  k.Bind(nullptr);
}

TEST(AccumulateTest, AnUndefinedContributionIsAnError) {
  OneDnnKernels k;
  Tensor sum;
  EXPECT_THROW(Accumulate(k, &sum, Tensor()), Error);
}

TEST(StackedGradientTest, SlicesAreCopiedBitwiseAndTheRestIsZero) {
  auto tracker = std::make_shared<MemoryTracker>();
  StackedGradient g(DType::kF32, Shape({3, 2}), tracker);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(tracker->live_bytes(), 24);
  g.Set(2, Vec({-0.0f, 5.0f}));
  g.Set(0, Tensor());  // no cotangent reached step 0
  Tensor t = g.Finish();
  EXPECT_FALSE(g.defined());
  const float want[] = {0, 0, 0, 0, -0.0f, 5};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(t.f32()[i], want[i]) << i;
    EXPECT_EQ(std::signbit(t.f32()[i]), std::signbit(want[i])) << i;
  }
}

// A cotangent written into its slot (a kernel's CallInto) is not copied:
// Set sees the slice itself and marks it filled, so Finish leaves it.
TEST(StackedGradientTest, ASlotWrittenInPlaceIsKeptAsItIs) {
  StackedGradient g(DType::kF32, Shape({3, 2}), nullptr);
  Tensor slot = g.Slot(1);
  slot.f32()[0] = 7;
  slot.f32()[1] = -0.0f;
  g.Set(1, slot);
  const Tensor t = g.Finish();
  const float want[] = {0, 0, 7, -0.0f, 0, 0};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(t.f32()[i], want[i]) << i;
    EXPECT_EQ(std::signbit(t.f32()[i]), std::signbit(want[i])) << i;
  }
  StackedGradient h(DType::kF32, Shape({2, 2}), nullptr);
  EXPECT_THROW(h.Slot(2), Error);
  EXPECT_THROW(StackedGradient().Slot(0), Error);
}

TEST(StackedGradientTest, BadStepsAndShapesAreErrors) {
  StackedGradient g(DType::kF32, Shape({2, 2}), nullptr);
  EXPECT_THROW(g.Set(2, Vec({1, 2})), Error);
  EXPECT_THROW(g.Set(-1, Vec({1, 2})), Error);
  EXPECT_THROW(g.Set(0, Vec({1, 2, 3})), Error);
  EXPECT_THROW(StackedGradient(DType::kF32, Shape(), nullptr), Error);
}

TEST(StackedGradientTest, ADryRunCountsTheStackAndWritesNothing) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_dry_run(true);
  StackedGradient g(DType::kF32, Shape({4, 8}), tracker);
  g.Set(1, Tensor::Zeros(DType::kF32, Shape({8}), tracker));
  Tensor t = g.Finish();
  EXPECT_TRUE(t.dry());
  EXPECT_EQ(tracker->peak_bytes(), 4 * 8 * 4 + 8 * 4);
}

}  // namespace
}  // namespace remat
