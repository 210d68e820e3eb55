// Tests of what the bench needs of a planned row before it runs
// (harness/bench_register.h): which rows --benchmark_filter selects (the
// count of a sweep's rows and their share of the budget), and each row's
// sampling weight.

#include "harness/bench_register.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engines/api/registry.h"
#include "harness/bench_flags.h"
#include "harness/bench_matmul_bound.h"
#include "harness/bench_plan.h"
#include "harness/bench_sampling.h"
#include "harness/bench_session.h"

namespace remat::bench {
namespace {

constexpr char kEager[] = "BM_ValueAndGrad/layer_loss/d=512,N=256/eager/as-written/iterations:1/manual_time";
constexpr char kRecompute[] =
    "BM_ValueAndGrad/layer_loss/d=512,N=256/recompute/nothing_saveable/iterations:1/manual_time";

TEST(BenchRegister, AFilterSelectsOnlyTheRowsItNames) {
  // Empty and "all": every row.
  EXPECT_TRUE(FilterSelects("", kEager));
  EXPECT_TRUE(FilterSelects("all", kRecompute));
  // A regex (POSIX extended) selects what it matches, a leading '-' the rest.
  EXPECT_TRUE(FilterSelects("eager", kEager));
  EXPECT_FALSE(FilterSelects("eager", kRecompute));
  EXPECT_TRUE(FilterSelects("recompute/(nothing|dots)_saveable", kRecompute));
  EXPECT_FALSE(FilterSelects("-recompute", kRecompute));
  EXPECT_TRUE(FilterSelects("-recompute", kEager));
  // A bad regex selects everything: the library reports it itself.
  EXPECT_TRUE(FilterSelects("(", kEager));
}

TEST(BenchRegister, RowsWeighTheirCasesWorkOnceEachCase) {
  std::vector<std::string> rest;
  const std::vector<PlannedRow> plan = PlanRows(
      ParseBenchFlags({"bench", "--problems=layer_loss", "--engines=eager,recompute"}, &rest),
      EngineNames());
  ASSERT_FALSE(plan.empty());
  BenchSession session;
  for (const PlannedRow& row : plan) {
    const double weight = RowWeight(session, row);
    if (row.kind == RowKind::kMatMulBound) {
      EXPECT_EQ(weight, kBoundMinSeconds) << row.name;
    } else {
      // Eager's FLOPs on the case: more than the floor, the same for every
      // row of the case.
      EXPECT_GE(weight, SamplingWeight(0)) << row.name;
      EXPECT_EQ(weight, session.weight_by_case.at(row.case_key)) << row.name;
    }
  }
  EXPECT_FALSE(session.weight_by_case.empty());
}

}  // namespace
}  // namespace remat::bench
