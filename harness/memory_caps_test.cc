#include "harness/memory_caps.h"

#include <gtest/gtest.h>

#include <string>

#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat {
namespace {

Case ScanStack() {
  const Problem& p = FindProblem("scan_stack");
  return MakeCase(p, ResolveParams(p, {{"L", 16}, {"d", 16}, {"N", 8}}));
}

int64_t EagerPeak(const Case& c) {
  RunOptions plan;
  plan.plan_only = true;
  return MakeEngine("eager")
      ->ValueAndGrad(c.program, ShapeOnlyArguments(c.program), c.wrt, plan)
      .stats.peak_bytes;
}

TEST(ResolveMemoryCapTest, BytesAndFractionsOfEagersPeak) {
  const Case c = ScanStack();
  std::unique_ptr<Engine> dtr = MakeEngine("dtr");
  EXPECT_EQ(ResolveMemoryCap("", c.program, c.wrt, *dtr).bytes, 0);
  EXPECT_EQ(ResolveMemoryCap("64KiB", c.program, c.wrt, *dtr).bytes, 65536);
  const ResolvedCap half = ResolveMemoryCap("0.5x", c.program, c.wrt, *dtr);
  EXPECT_EQ(half.bytes, EagerPeak(c) / 2);
  EXPECT_NE(half.how.find("eager's peak"), std::string::npos) << half.how;
}

TEST(ResolveMemoryCapTest, BadTextAndEnginesThatDoNotEvictAreNamed) {
  const Case c = ScanStack();
  std::unique_ptr<Engine> dtr = MakeEngine("dtr");
  for (const char* bad : {"x", "-1x", "nanx", "0x", "12 apples", "0.5xx"}) {
    try {
      ResolveMemoryCap(bad, c.program, c.wrt, *dtr, "cap:");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(StrCat("cap: '", bad, "'")), std::string::npos)
          << e.what();
    }
  }
  try {
    ResolveMemoryCap("0.5x", c.program, c.wrt, *MakeEngine("recompute"));
    ADD_FAILURE() << "recompute accepted a cap";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("recompute does not honour a memory cap"), std::string::npos) << m;
    EXPECT_NE(m.find("dtr"), std::string::npos) << m;
  }
}

// The budget found is the largest that fits: its planned peak is under the
// cap, and a budget 1% larger plans a peak over it (or changes nothing).
TEST(LargestBudgetUnderTest, IsTheLargestBudgetThatFits) {
  const Case c = ScanStack();
  const int64_t eager = EagerPeak(c);
  // Caps from the smallest feasible budget's planned peak up to eager's.
  int64_t smallest = 0;
  ASSERT_FALSE(PlanBudget(c.program, c.wrt, 1, &smallest).has_value());
  const std::optional<Stats> low = PlanBudget(c.program, c.wrt, smallest, &smallest);
  ASSERT_TRUE(low.has_value());
  ASSERT_LT(low->peak_bytes, eager);
  for (int k = 0; k < 3; ++k) {
    const int64_t cap = low->peak_bytes + (eager - low->peak_bytes) * k / 3;
    SCOPED_TRACE(StrCat("cap ", cap, " of eager's ", eager));
    auto found = LargestBudgetUnder(c.program, c.wrt, cap, eager);
    ASSERT_TRUE(found.has_value());
    EXPECT_LE(found->second.peak_bytes, cap);
    const int64_t larger = found->first + found->first / 100 + 1;
    if (larger <= eager) {
      std::optional<Stats> over = PlanBudget(c.program, c.wrt, larger, &smallest);
      ASSERT_TRUE(over.has_value());
      EXPECT_TRUE(over->peak_bytes > cap ||
                  over->flops_recomputed == found->second.flops_recomputed)
          << "budget:" << larger << " fits under the cap and recomputes less";
    }
  }
  // Under the smallest feasible budget's own peak, nothing fits.
  EXPECT_FALSE(LargestBudgetUnder(c.program, c.wrt, low->peak_bytes - 1, eager).has_value());
}

}  // namespace
}  // namespace remat
