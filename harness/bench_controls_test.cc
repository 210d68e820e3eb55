#include "harness/bench_controls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/bench_fake_row.h"
#include "harness/bench_lib.h"
#include "harness/bench_report.h"

namespace remat::bench {
namespace {

RowResult Row(const std::string& engine, const std::string& policy, double vs_eager,
              const std::string& problem = "scan_stack",
              OrderedParams params = {{"L", 8}, {"d", 512}, {"N", 256}}) {
  RowResult r = Fake(problem, engine, policy, 10 * vs_eager, params);
  r.flops_backward = 2'000'000'000;
  if (engine != kBaselineEngine) r.vs_eager_paired = vs_eager;
  return r;
}

RowResult Control(double vs_eager, const std::string& problem = "scan_stack",
                  OrderedParams params = {{"L", 8}, {"d", 512}, {"N", 256}}) {
  RowResult r = Row(kBaselineEngine, CaseVariant::kAsWrittenLabel, vs_eager, problem, params);
  r.row.control = true;
  r.row.name += "/control";
  r.vs_eager_paired = vs_eager;
  return r;
}

TEST(BenchControls, TheDefaultPlanHasAnAToAControlAfterEagerOnEveryCase) {
  std::vector<std::string> rest;
  const std::vector<PlannedRow> plan =
      PlanRows(ParseBenchFlags({"bench"}, &rest), {"eager", "recompute", "planned"});
  std::string last_case;
  int cases = 0, controls = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRow& row = plan[i];
    if (row.kind != RowKind::kValueAndGrad) continue;
    if (row.case_key != last_case) {
      ++cases;
      last_case = row.case_key;
      ASSERT_TRUE(IsBaselineRow(row)) << row.name;
      ASSERT_LT(i + 1, plan.size());
      const PlannedRow& next = plan[i + 1];
      EXPECT_TRUE(next.control) << "no control after " << row.name;
      EXPECT_FALSE(IsBaselineRow(next));
      EXPECT_EQ(next.case_key, row.case_key);
      EXPECT_EQ(next.engine, kBaselineEngine);
      EXPECT_EQ(next.variant.Label(), CaseVariant::kAsWrittenLabel);
      EXPECT_EQ(next.name, row.name + "/control");
    }
    controls += row.control ? 1 : 0;
  }
  EXPECT_GT(cases, 5);
  EXPECT_EQ(controls, cases);
  // Eager alone has nothing to compare: no control.
  const std::vector<PlannedRow> alone = PlanRows(ParseBenchFlags({"bench"}, &rest), {"eager"});
  for (const PlannedRow& row : alone) EXPECT_FALSE(row.control) << row.name;
}

TEST(BenchControls, WhichRowsAreControls) {
  EXPECT_EQ(ControlOf(Control(1.0)), ControlKind::kAToA);
  EXPECT_EQ(ControlOf(Row("recompute", "everything_saveable", 1.0)), ControlKind::kSamePlan);
  RowResult recomputing = Row("recompute", "everything_saveable", 1.0);
  recomputing.flops_recomputed = 5;  // not eager's plan: no control
  EXPECT_EQ(ControlOf(recomputing), ControlKind::kNone);
  // A scalar chain (no N and d): the engines' bookkeeping is the time.
  EXPECT_EQ(ControlOf(Row("recompute", "everything_saveable", 1.0, "sin_plain", {{"D", 8}})),
            ControlKind::kNone);
  EXPECT_EQ(ControlOf(Row(kBaselineEngine, CaseVariant::kAsWrittenLabel, 1.0)), ControlKind::kNone);
  EXPECT_EQ(ControlOf(Row("recompute", "nothing_saveable", 1.0)), ControlKind::kNone);
}

TEST(BenchControls, ControlsWithinTheAllowanceKeepTheRunValid) {
  std::vector<RowResult> rows = {Row(kBaselineEngine, CaseVariant::kAsWrittenLabel, 1.0), Control(1.015),
                                 Row("recompute", "everything_saveable", 0.99),
                                 Row("recompute", "nothing_saveable", 1.3)};
  const ControlReport report = CheckControls(&rows);
  ASSERT_EQ(report.checks.size(), 2u);
  EXPECT_TRUE(report.valid());
  EXPECT_EQ(report.rows, 1);
  EXPECT_EQ(report.trusted, 1);
  for (const RowResult& r : rows) EXPECT_TRUE(r.untrusted.empty()) << r.row.name;
  const std::string text = FormatControls(report);
  EXPECT_NE(text.find("Controls: all 2 within 2%"), std::string::npos) << text;
  EXPECT_NE(text.find("Trustworthy: 1 of 1 rows"), std::string::npos) << text;
  EXPECT_EQ(text.find("NOT VALID"), std::string::npos) << text;
  const nlohmann::json json = ControlsJson(report);
  EXPECT_EQ(json["valid"], true);
  EXPECT_EQ(json["checks"].size(), 2u);
  EXPECT_EQ(json["checks"][0]["kind"], "a/a");
  EXPECT_EQ(json["checks"][1]["kind"], "same plan");
}

// The run: everything_saveable at 0.809 x eager on scan_stack L=32.
TEST(BenchControls, AnOffControlInvalidatesItsCasesRatiosAndTheRun) {
  const OrderedParams deep = {{"L", 32}, {"d", 512}, {"N", 256}};
  std::vector<RowResult> rows = {
      Row(kBaselineEngine, CaseVariant::kAsWrittenLabel, 1.0), Control(1.01),
      Row("recompute", "nothing_saveable", 1.3),
      Row(kBaselineEngine, CaseVariant::kAsWrittenLabel, 1.0, "scan_stack", deep),
      Control(1.005, "scan_stack", deep),
      Row("recompute", "everything_saveable", 0.809, "scan_stack", deep),
      Row("recompute", "as-written", 1.048, "scan_stack", deep),
      Row("recompute", "nothing_saveable", 1.4, "scan_stack", deep)};
  rows.back().noise = {{NoiseKind::kWindowsDisagree, "its windows disagree"}};
  const ControlReport report = CheckControls(&rows);
  EXPECT_FALSE(report.valid());
  EXPECT_EQ(report.rows, 3);
  EXPECT_EQ(report.trusted, 1);  // the first case's
  EXPECT_EQ(report.untrusted, 1);
  EXPECT_EQ(report.noise, 1);
  EXPECT_TRUE(rows[2].untrusted.empty());
  EXPECT_TRUE(rows[3].untrusted.empty());  // eager's own row: its time, no ratio
  EXPECT_NE(rows[6].untrusted.find("recompute/everything_saveable"), std::string::npos)
      << rows[6].untrusted;
  EXPECT_NE(rows[6].untrusted.find("0.809"), std::string::npos) << rows[6].untrusted;
  const std::string text = FormatControls(report);
  EXPECT_EQ(text.find("\nRATIOS NOT VALID: 1 of 3 controls"), 0u) << text;
  EXPECT_NE(text.find("scan_stack/L=32,d=512,N=256 recompute/everything_saveable: x eager 0.809, "
                      "19.1% from 1.00"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Trustworthy: 1 of 3 rows (1 noise"), std::string::npos) << text;
  // The summary prints no ratio for an untrusted row, and the control's own.
  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find("untrusted"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("1.05"), std::string::npos) << summary;  // recompute/as-written's 1.048
  EXPECT_NE(summary.find("eager A/A control"), std::string::npos) << summary;
  const nlohmann::json run = ResultsJson("bench", nlohmann::json::object(), "2026-11-28", rows);
  EXPECT_EQ(run["rows"][4]["control"], true);
  EXPECT_TRUE(run["rows"][6]["untrusted"].is_string());
  EXPECT_EQ(ControlsJson(report)["valid"], false);
}

// A paired row prints its median pair's two times beside its x eager, so
// that time / eager ms = x eager: not its least time (70.1, taken while the
// machine ran faster than during the eager run it was paired with), nor
// eager's own row's (taken at other moments).
TEST(BenchControls, APairedRowsTimeStandsBesideItsPairsEagerTime) {
  std::vector<RowResult> rows = {Row(kBaselineEngine, CaseVariant::kAsWrittenLabel, 1.0),
                                 Row("recompute", "everything_saveable", 1.0)};
  rows[0].real_time_ms = 66.8;
  rows[1].real_time_ms = 70.1;
  rows[1].pair_time_ms = 84.2;  // the machine slowed between eager's row and this one's
  rows[1].paired_eager_ms = 84.0;
  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find("eager ms"), std::string::npos) << summary;
  const size_t at = summary.find("recompute/everything_saveable");
  ASSERT_NE(at, std::string::npos) << summary;
  const std::string line = summary.substr(at, summary.find('\n', at) - at);
  const size_t time = line.find("84.2"), eager = line.find("84.0"), ratio = line.find("1.00");
  EXPECT_TRUE(time != std::string::npos && eager != std::string::npos &&
              ratio != std::string::npos && time < eager && eager < ratio)
      << line;
  EXPECT_EQ(line.find("70.1"), std::string::npos) << line;
  const nlohmann::json run = ResultsJson("bench", nlohmann::json::object(), "2026-11-28", rows);
  EXPECT_DOUBLE_EQ(run["rows"][1]["paired_eager_ms"].get<double>(), 84.0);
  EXPECT_DOUBLE_EQ(run["rows"][1]["pair_time_ms"].get<double>(), 84.2);
  EXPECT_DOUBLE_EQ(run["rows"][1]["real_time_ms"].get<double>(), 70.1);
  EXPECT_FALSE(run["rows"][0].contains("paired_eager_ms"));
}

TEST(BenchControls, ANoisyMissingOrFailedControlIsOffToo) {
  std::vector<RowResult> rows = {Row(kBaselineEngine, CaseVariant::kAsWrittenLabel, 1.0), Control(1.0),
                                 Row("recompute", "nothing_saveable", 1.3)};
  rows[1].noise = {{NoiseKind::kNotQuiet, "too few quiet samples"}};
  ControlReport report = CheckControls(&rows);
  EXPECT_FALSE(report.valid());
  EXPECT_NE(rows[2].untrusted.find("noise"), std::string::npos) << rows[2].untrusted;
  rows[1].noise.clear();
  rows[1].vs_eager_paired.reset();
  report = CheckControls(&rows);
  EXPECT_FALSE(report.valid());
  EXPECT_NE(report.checks[0].why.find("no x eager"), std::string::npos);
  rows[1].error = "out of memory";
  report = CheckControls(&rows);
  EXPECT_FALSE(report.valid());
  EXPECT_NE(rows[2].untrusted.find("failed"), std::string::npos) << rows[2].untrusted;
  // Marks from an earlier check are cleared: the control recovered.
  rows[1].error.clear();
  rows[1].vs_eager_paired = 1.0;
  report = CheckControls(&rows);
  EXPECT_TRUE(report.valid());
  EXPECT_TRUE(rows[2].untrusted.empty());
  // No control at all: no evidence, and the run says so.
  std::vector<RowResult> bare = {Row(kBaselineEngine, CaseVariant::kAsWrittenLabel, 1.0),
                                 Row("recompute", "nothing_saveable", 1.3)};
  report = CheckControls(&bare);
  EXPECT_FALSE(report.valid());
  EXPECT_NE(FormatControls(report).find("CONTROLS: none ran"), std::string::npos);
}

}  // namespace
}  // namespace remat::bench
