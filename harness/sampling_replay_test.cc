#include "harness/sampling_replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "harness/bench_controls.h"
#include "harness/bench_fake_row.h"
#include "harness/bench_report.h"
#include "harness/bench_sampling.h"

namespace remat::bench {
namespace {

// `n` pairs a window over `windows` windows: eager 10 ms, the row
// 10 * ratio(i) ms, every sample quiet; `seconds` of sampling in all.
template <typename Ratio>
Timings Pairs(int n, int windows, Ratio ratio) {
  Timings t;
  for (int w = 0; w < windows; ++w) {
    if (w > 0) t.window_starts.push_back(t.row_ms.size());
    for (int i = 0; i < n; ++i) {
      const int k = w * n + i;
      t.eager_ms.push_back(10);
      t.row_ms.push_back(10 * ratio(k));
      t.row_delay.push_back(0);
      t.eager_delay.push_back(0);
    }
  }
  return t;
}

RowResult Sampled(RowResult r, const Timings& t, double seconds) {
  SetSampledFields(t, &r);
  r.sampling_seconds = seconds;
  return r;
}

// A case as the bench records it: eager's own row (unpaired), its A/A
// control and a recompute row paired with it, 40 pairs a window in two
// windows. `control` gives the control's ratio of pair k.
template <typename Ratio>
nlohmann::json RecordedRun(Ratio control) {
  std::vector<RowResult> rows;
  Timings eager;
  for (int w = 0; w < 2; ++w) {
    if (w > 0) eager.window_starts.push_back(eager.row_ms.size());
    for (int i = 0; i < 40; ++i) {
      eager.row_ms.push_back(10);
      eager.row_delay.push_back(0);
    }
  }
  rows.push_back(Sampled(Fake("toy", "eager", "as-written", 10), eager, 2));
  RowResult c = Fake("toy", "eager", "as-written", 10);
  c.row.control = true;
  c.row.name += "/control";
  rows.push_back(Sampled(c, Pairs(40, 2, control), 4));
  rows.push_back(Sampled(Fake("toy", "recompute", "nothing_saveable", 12),
                         Pairs(40, 2, [](int k) { return 1.2 + 0.01 * (k % 3); }), 4));
  for (RowResult& r : rows) r.flops_backward = 2'000'000'000;
  return ResultsJson("bench", nlohmann::json::object(), "2026-12-08T00:00:00Z", rows);
}

double Steady(int) { return 1.0; }

TEST(SamplingReplay, ReadsBackWhatTheBenchWrites) {
  const std::vector<RowResult> rows = RowsOfRun(RecordedRun(Steady));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].row.case_key, "toy/d=512,N=256");
  EXPECT_EQ(rows[1].row.case_key, "toy/d=512,N=256");
  EXPECT_TRUE(rows[1].row.control);
  EXPECT_TRUE(IsBaselineRow(rows[0].row));
  EXPECT_EQ(rows[2].row.engine, "recompute");
  EXPECT_EQ(rows[2].row.variant.Label(), "nothing_saveable");
  EXPECT_EQ(rows[2].timings.row_ms.size(), 80u);
  EXPECT_EQ(rows[2].timings.window_starts, std::vector<size_t>{40});
  EXPECT_EQ(rows[2].window_values.size(), 2u);
  EXPECT_EQ(rows[2].flops_backward, 2'000'000'000);
  EXPECT_DOUBLE_EQ(rows[2].sampling_seconds, 4);
}

TEST(SamplingReplay, AtTheRecordedSettingsARowThatNeverSettledKeepsEverySample) {
  SamplingRule rule = DefaultSamplingRule();
  rule.target_spread = -1;  // nothing settles (eager's steady minimum has spread 0)
  rule.max_samples = 1000;
  rule.max_seconds = 1e9;
  const Replay r = ReplayRun(RecordedRun(Steady), rule, /*budget_seconds=*/0);
  EXPECT_DOUBLE_EQ(r.recorded_seconds, 10);
  EXPECT_NEAR(r.sampled_seconds, 10, 1e-9);
  EXPECT_EQ(r.windows, 2);
  EXPECT_EQ(r.longer, 6);  // three rows, two windows each
  EXPECT_EQ(r.rows[2].timings.row_ms.size(), 80u);
  EXPECT_TRUE(r.controls.valid()) << FormatControls(r.controls);
}

TEST(SamplingReplay, ALooserTargetStopsARowOnceItsRatioIsKnownThatWell) {
  const SamplingRule rule = DefaultSamplingRule();
  // The recompute row's ratios 1.20, 1.21, 1.22 repeating: within 1% of the
  // median once a few are in.
  const Replay r = ReplayRun(RecordedRun(Steady), rule, 0);
  const RowResult& recompute = r.rows[2];
  EXPECT_LT(recompute.timings.row_ms.size(), 80u);
  EXPECT_GE(recompute.samples, 2 * rule.min_samples);  // each window its fewest
  EXPECT_LT(r.sampled_seconds, r.recorded_seconds);
  ASSERT_TRUE(recompute.vs_eager_paired);
  EXPECT_NEAR(*recompute.vs_eager_paired, 1.21, 0.011);
}

TEST(SamplingReplay, ASmallBudgetCutsRowsAndTheBenchsJudgementFollows) {
  // The control's pairs alternate 0.94 and 1.06 for its first 30 pairs a
  // window, then settle at 1.00: all its samples place it at 1.00; the
  // first few are known only within 6%, and the run is not valid.
  auto noisy_then_steady = [](int k) {
    const int i = k % 40;
    return i < 30 ? (i % 2 ? 1.06 : 0.94) : 1.0;
  };
  SamplingRule rule = DefaultSamplingRule();
  rule.target_spread = -1;
  rule.max_samples = 1000;
  rule.max_seconds = 1e9;  // the budget's share is the cap
  rule.quiet_samples_at_cap = 0;  // and a cap
  const Replay all = ReplayRun(RecordedRun(noisy_then_steady), rule, 0);
  EXPECT_EQ(all.rows[1].timings.row_ms.size(), 80u);
  const Replay cut = ReplayRun(RecordedRun(noisy_then_steady), rule, /*budget_seconds=*/1);
  EXPECT_LT(cut.rows[1].timings.row_ms.size(), 20u);
  EXPECT_GE(cut.rows[1].timings.row_ms.size(), static_cast<size_t>(2 * kFewestSamples));
  EXPECT_LT(cut.sampled_seconds, all.sampled_seconds);
  EXPECT_FALSE(cut.controls.valid()) << FormatControls(cut.controls);
  EXPECT_TRUE(cut.rows[2].untrusted.size() > 0);
}

TEST(SamplingReplay, ARunThisBenchDidNotWriteIsAnErrorNamingWhatIsWrong) {
  EXPECT_THROW(RowsOfRun(nlohmann::json::object()), Error);
  nlohmann::json run = RecordedRun(Steady);
  run["rows"][2]["policy"] = "no_such_policy";
  try {
    RowsOfRun(run);
    FAIL() << "a policy that does not parse was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("toy/d=512,N=256/recompute"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("no_such_policy"), std::string::npos) << e.what();
  }
  run = RecordedRun(Steady);
  run["rows"][0].erase("name");
  EXPECT_THROW(RowsOfRun(run), Error);
  run = RecordedRun(Steady);
  run["rows"][1]["samples_ms"]["row"] = "ten";
  try {
    RowsOfRun(run);
    FAIL() << "a string for samples was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/control"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ReadRun("/nonexistent/run.json"), Error);
}

}  // namespace
}  // namespace remat::bench
