#include "engines/api/stats.h"

#include <gtest/gtest.h>

namespace remat {
namespace {

// Copies of Stats share the listing and the counts; changing one copy's
// counts leaves the others as they were.
TEST(StatsTest, CopiesShareUntilChanged) {
  Stats a;
  a.op_runs["sin at x.cc:1"] = 3;
  a.residuals = std::vector<Residual>{{"f32[]", "output of sin at x.cc:1", 4, false, 1}};
  Stats b = a;
  EXPECT_EQ(&a.op_runs.map(), &b.op_runs.map());
  EXPECT_EQ(&a.residuals.lines(), &b.residuals.lines());
  ++b.op_runs["sin at x.cc:1"];
  b.op_runs["cos at x.cc:2"] = 1;
  EXPECT_EQ(a.op_runs.at("sin at x.cc:1"), 3);
  EXPECT_EQ(a.op_runs.size(), 1u);
  EXPECT_EQ(b.op_runs.at("sin at x.cc:1"), 4);
  EXPECT_FALSE(a.op_runs == b.op_runs);
  ASSERT_EQ(b.residuals.size(), 1u);
  EXPECT_EQ(b.residuals[0].bytes, 4);
  EXPECT_TRUE(Stats().op_runs.empty());
  EXPECT_TRUE(Stats().residuals.empty());
}

}  // namespace
}  // namespace remat
