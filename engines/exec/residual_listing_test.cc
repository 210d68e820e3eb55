#include "engines/exec/residual_listing.h"

#include <gtest/gtest.h>

namespace remat {
namespace {

TEST(ResidualListingTest, ArgumentsFirstThenValuesAndScanStepsStacked) {
  Tensor w = Tensor::Zeros(DType::kF32, Shape({4, 4}));
  Tensor a = Tensor::Zeros(DType::kF32, Shape({2, 4}));
  Tensor s0 = Tensor::Zeros(DType::kF32, Shape({2, 4}));
  Tensor s1 = Tensor::Zeros(DType::kF32, Shape({2, 4}));
  Tensor s2 = Tensor::Zeros(DType::kF32, Shape({2, 4}));
  ResidualListing l;
  l.AddSaved(a, "output of relu at x.cc:3");
  l.AddSaved(s0, "output of sin at x.cc:7", "sin at x.cc:7");
  l.AddArgument(w, "from the argument w");
  l.AddSaved(s1, "output of sin at x.cc:7", "sin at x.cc:7");
  l.AddSaved(s2, "output of sin at x.cc:7", "sin at x.cc:7");
  l.AddSaved(a.Reshaped(Shape({8})), "output of name", "");  // same storage: once
  l.AddArgument(w, "from the argument w");                     // once
  Stats stats;
  l.Fill(&stats);
  ASSERT_EQ(stats.residuals.size(), 3u);
  EXPECT_EQ(stats.residuals[0].source, "from the argument w");
  EXPECT_TRUE(stats.residuals[0].is_argument);
  EXPECT_EQ(stats.residuals[0].type, "f32[4,4]");
  EXPECT_EQ(stats.residuals[1].type, "f32[2,4]");
  EXPECT_EQ(stats.residuals[2].type, "f32[3,2,4]");
  EXPECT_EQ(stats.residuals[2].count, 3);
  EXPECT_EQ(stats.residuals[2].bytes, 3 * 32);
  EXPECT_EQ(stats.residual_bytes, 4 * 32);  // arguments excluded
}

TEST(ResidualListingTest, ScalarsStackToOneAxisAndOtherTypesStayApart) {
  // Held, as an engine holds its residuals (the listing knows buffers by
  // address).
  const Tensor a = Tensor::Zeros(DType::kF32, Shape());
  const Tensor b = Tensor::Zeros(DType::kF32, Shape());
  const Tensor c = Tensor::Zeros(DType::kF32, Shape({3}));
  ResidualListing l;
  l.AddSaved(a, "output of sum", "k");
  l.AddSaved(b, "output of sum", "k");
  l.AddSaved(c, "output of sum", "k");
  std::vector<Residual> lines = l.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].type, "f32[2]");
  EXPECT_EQ(lines[1].type, "f32[3]");
  EXPECT_EQ(l.residual_bytes(), 4 + 4 + 12);
}

}  // namespace
}  // namespace remat
