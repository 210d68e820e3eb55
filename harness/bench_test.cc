// Tests of what a row measured and the plausibility flags
// (harness/bench_lib.h): vs_eager divides by the right row, and the flags
// do what they say, on synthetic rows (no test here times anything; the
// sampling statistic's tests are bench_sampling_test.cc, the plan's
// bench_plan_test.cc, the flags' bench_flags_test.cc).

#include "harness/bench_fake_row.h"
#include "harness/bench_lib.h"
#include "harness/bench_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "engines/api/engine.h"
#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/program_text.h"
#include "engines/api/registry.h"
#include "engines/onednn/platform.h"
#include "engines/schedule/schedule.h"
#include "harness/conformance.h"
#include "harness/stats_json.h"
#include "problems/problem.h"

namespace remat::bench {
namespace {

// The first line of `text` that contains `needle`; "" if none.
std::string LineWith(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

// --- The plausibility flags, on synthetic rows. ---

// The matmul bound row of `problem` at d=512, N=256 (Fake's case): 1 GFLOP
// of matmuls in `ms`.
RowResult FakeBound(const std::string& problem, double ms, double spread = 0) {
  RowResult bound = Fake(problem, kBoundEngine, "as-written", ms);
  bound.row.kind = RowKind::kMatMulBound;
  bound.row.name = "BM_OneDnnMatMulBound/" + bound.row.case_key;
  bound.spread = spread;
  return bound;
}

TEST(BenchPlausibility, BelowTheFlopFloorIsNoise) {
  // eager: 1 GFLOP in 10 ms. Recomputation adds a third: the floor is 1.33.
  std::vector<RowResult> rows = {Fake("scan_stack", "eager", "as-written", 10.0),
                                 Fake("scan_stack", "recompute", "as-written", 12.1),
                                 Fake("scan_stack", "recompute", "nothing_saveable", 13.0),
                                 Fake("scan_stack", "recompute", "everything_saveable", 9.8)};
  for (size_t i : {1, 2}) rows[i].flops_recomputed = 1'000'000'000 / 3;
  rows[1].vs_eager_paired = 1.21;  // the run: cheaper than its FLOPs
  rows[1].spread = 0.005;
  rows[2].vs_eager_paired = 1.30;  // within the tolerance of the floor
  rows[2].spread = 0.002;
  rows[3].vs_eager_paired = 0.98;  // no recomputation: floor 1
  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[1].flop_floor);
  EXPECT_NEAR(*rows[1].flop_floor, 4.0 / 3, 1e-9);
  EXPECT_EQ(rows[1].NoiseText(), "x eager 1.21 below the FLOP floor 1.33");
  EXPECT_TRUE(rows[2].NoiseText().empty()) << rows[2].NoiseText();
  EXPECT_TRUE(rows[3].NoiseText().empty()) << rows[3].NoiseText();
  EXPECT_DOUBLE_EQ(*rows[3].flop_floor, 1.0);
  EXPECT_TRUE(rows[0].NoiseText().empty());

  // A wider spread widens the allowance: 1.21 against 1.33 is 9.25% below,
  // within 8% + 2%.
  rows[1].spread = 0.02;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[1].NoiseText().empty()) << rows[1].NoiseText();

  // Unpaired, the ratio of the rows' own times is checked, with eager's
  // spread added to the row's.
  rows[1].vs_eager_paired.reset();
  rows[1].spread = 0.0;
  rows[0].spread = 0.0;
  ComputeVsEager(&rows);  // 12.1 / 10 = 1.21
  EXPECT_FALSE(rows[1].NoiseText().empty());
  rows[0].spread = 0.08;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[1].NoiseText().empty()) << rows[1].NoiseText();

  // The floor holds for kernel time on the matmul problems too: eager 5%
  // outside kernels, the row (planned's arena) 0.3%. Floor 4/3 x 0.95 /
  // 0.997 = 1.270, less 8% and the row's 0.5%: 1.162.
  rows[0].spread = 0.0;
  rows[0].overhead_fraction = 0.05;
  rows[1].overhead_fraction = 0.003;
  rows[1].vs_eager_paired = 1.17;
  rows[1].spread = 0.005;
  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[1].flop_floor);
  EXPECT_NEAR(*rows[1].flop_floor, 4.0 / 3 * 0.95 / 0.997, 1e-9);
  EXPECT_TRUE(rows[1].NoiseText().empty()) << rows[1].NoiseText();
  rows[1].vs_eager_paired = 1.15;
  ComputeVsEager(&rows);
  EXPECT_EQ(rows[1].NoiseText(), "x eager 1.15 below the FLOP floor 1.27");
  // More overhead than eager's never raises it.
  rows[1].overhead_fraction = 0.2;
  rows[1].vs_eager_paired = 1.30;
  ComputeVsEager(&rows);
  EXPECT_NEAR(*rows[1].flop_floor, 4.0 / 3, 1e-9);
}

TEST(BenchPlausibility, PairedRowsCarryEagersFlopsAndScalarProblemsAreNotChecked) {
  // Paired, eager's FLOPs come with the row: no eager row needed (a rerun
  // with --benchmark_filter of one row).
  RowResult row = Fake("scan_stack", "recompute", "as-written", 12.0);
  row.flops_recomputed = 500'000'000;
  row.eager_flops = 1'000'000'000;
  row.vs_eager_paired = 1.2;
  std::vector<RowResult> rows = {row};
  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[0].flop_floor);
  EXPECT_DOUBLE_EQ(*rows[0].flop_floor, 1.5);
  EXPECT_FALSE(rows[0].NoiseText().empty());

  // A scalar chain's time is not its FLOP count's: twice eager's FLOPs at
  // 1.1 x eager is no contradiction. Its floor is only eager's time.
  rows = {Fake("sin_recursive", "eager", "as-written", 0.1, {{"D", 64}}),
          Fake("sin_recursive", "recompute", "as-written", 0.11, {{"D", 64}})};
  rows[1].flops_recomputed = 1'000'000'000;
  rows[1].vs_eager_paired = 1.1;
  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[1].flop_floor);
  EXPECT_DOUBLE_EQ(*rows[1].flop_floor, 1.0);
  EXPECT_TRUE(rows[1].NoiseText().empty()) << rows[1].NoiseText();
  // But more work on the same kernels in half eager's time is noise.
  rows[1].vs_eager_paired = 0.45;
  ComputeVsEager(&rows);
  EXPECT_EQ(rows[1].NoiseText(), "x eager 0.45 below the FLOP floor 1.00");

  // Unless the row's engine spends less of its time outside kernels: the
  // floor holds for kernel time. Eager 40% overhead, planned 10%: kernels are
  // 60% of eager's time and 90% of the row's, so the floor is 1.00 x 0.6/0.9.
  rows[0].overhead_fraction = 0.4;
  rows[1].row.engine = "planned";
  rows[1].overhead_fraction = 0.1;
  rows[1].vs_eager_paired = 0.7;
  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[1].flop_floor);
  EXPECT_NEAR(*rows[1].flop_floor, 2.0 / 3, 1e-12);
  EXPECT_TRUE(rows[1].NoiseText().empty()) << rows[1].NoiseText();
  rows[1].vs_eager_paired = 0.5;  // less than its kernels' share allows
  ComputeVsEager(&rows);
  EXPECT_EQ(rows[1].NoiseText(), "x eager 0.50 below the FLOP floor 0.67");

  // Where kernels are under half of either's time (the chains: eager 99%
  // overhead), no floor: a kernel of tens of ns is no FLOP rate.
  rows[0].overhead_fraction = 0.99;
  rows[1].overhead_fraction = 0.9;
  rows[1].vs_eager_paired = 0.1;
  ComputeVsEager(&rows);
  EXPECT_FALSE(rows[1].flop_floor);
  EXPECT_TRUE(rows[1].NoiseText().empty()) << rows[1].NoiseText();
  rows[0].overhead_fraction = 0.4;
  rows[1].overhead_fraction = 0.6;
  ComputeVsEager(&rows);
  EXPECT_FALSE(rows[1].flop_floor);
}

// The overhead per kernel call, and planned's against eager's on the case.
TEST(BenchPlausibility, OverheadPerCallIsComparedWithEagers) {
  // Eager: 10 timed runs of 2 ms (unprobed); 2 probed runs with 0.5 ms in
  // kernels and 1000 calls each: 1.5 ms outside kernels a run, 1500 ns a call.
  EngineTime eager_time;
  eager_time.wall_seconds = 20e-3;
  eager_time.runs = 10;
  eager_time.AddProbe(4e-3, 1e-3, 2000, 2);
  EXPECT_NEAR(*eager_time.OverheadFraction(), 0.75, 1e-12);
  EXPECT_NEAR(*eager_time.OverheadNsPerCall(), 1500, 1e-9);
  EngineTime planned_time;
  planned_time.wall_seconds = 6e-3;  // 0.6 ms a run
  planned_time.runs = 10;
  planned_time.AddProbe(1.4e-3, 1e-3, 2000, 2);  // the probes' cost is in these
  EXPECT_NEAR(*planned_time.OverheadNsPerCall(), 100, 1e-9);
  EXPECT_NEAR(*planned_time.OverheadFraction(), 1 - 1.0 / 1.4, 1e-12);
  // The row's time, where given, is the run's wall time (0.55 ms: 50 ns a
  // call).
  EXPECT_NEAR(*planned_time.OverheadNsPerCall(0.55e-3), 50, 1e-9);
  // A probe preempted inside a kernel (its kernel time doubled) is not the
  // one used, whichever order they come in.
  EngineTime preempted = planned_time;
  preempted.probes.insert(preempted.probes.begin(), {2.4e-3, 2e-3, 2000, 2});
  EXPECT_NEAR(*preempted.OverheadNsPerCall(), 100, 1e-9);
  EXPECT_NEAR(*preempted.OverheadFraction(), 1 - 1.0 / 1.4, 1e-12);
  EXPECT_FALSE(EngineTime{}.OverheadFraction());
  EngineTime no_probe = eager_time;
  no_probe.probes.clear();
  EXPECT_FALSE(no_probe.OverheadFraction());
  EngineTime no_calls;
  no_calls.wall_seconds = 20e-3;
  no_calls.runs = 10;
  no_calls.AddProbe(4e-3, 1e-3, 0, 2);  // an engine that reports none
  EXPECT_FALSE(no_calls.OverheadNsPerCall());
  // A big row: its one run is probed, and its wall time is that run's.
  EngineTime big;
  big.AddProbe(0.1, 0.08, 10, 1);
  EXPECT_NEAR(*big.OverheadFraction(), 0.2, 1e-12);
  EXPECT_NEAR(*big.OverheadNsPerCall(), 2e6, 1e-3);
  // Under a tenth of the time outside kernels: no per-call figure.
  big.probes[0].kernel_seconds = 0.095;
  EXPECT_TRUE(big.OverheadFraction());
  EXPECT_FALSE(big.OverheadNsPerCall());

  std::vector<RowResult> rows = {Fake("sin_plain", "eager", "as-written", 2.0, {{"D", 8}}),
                                 Fake("sin_plain", "planned", "as-written", 0.6, {{"D", 8}})};
  rows[0].overhead_ns_per_call = eager_time.OverheadNsPerCall();
  rows[1].overhead_ns_per_call = planned_time.OverheadNsPerCall();
  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[1].overhead_per_call_vs_eager);
  EXPECT_NEAR(*rows[1].overhead_per_call_vs_eager, 100.0 / 1500, 1e-12);
  const std::string table = FormatSummary(rows, "test platform");
  EXPECT_NE(table.find("1.50 us"), std::string::npos) << table;
  EXPECT_NE(table.find("100 ns (0.067)"), std::string::npos) << table;
}

TEST(BenchPlausibility, AboveTheMatmulBoundIsNoise) {
  // eager: 1 GFLOP in 10 ms = 100 GFLOP/s; in 8 ms, 125.
  std::vector<RowResult> rows = {Fake("layer_loss", "eager", "as-written", 8.0),
                                 Fake("layer_loss", "recompute", "as-written", 10.0),
                                 FakeBound("layer_loss", 10.0, 0.01)};
  rows[0].spread = 0.01;
  ComputeVsEager(&rows);
  EXPECT_DOUBLE_EQ(*rows[0].of_matmul_bound, 1.25);
  EXPECT_EQ(rows[0].NoiseText(), "125.0 GFLOP/s above the matmul bound's 100.0");
  EXPECT_TRUE(rows[1].NoiseText().empty()) << rows[1].NoiseText();  // at the bound: fine
  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find("its matmuls alone take 125% of that (noise)"), std::string::npos) << summary;

  // A bound taken while a neighbour ran is no ceiling.
  rows[2].quiet = false;
  rows[2].samples = 100;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[0].NoiseText().empty()) << rows[0].NoiseText();
  EXPECT_DOUBLE_EQ(*rows[0].of_matmul_bound, 1.25);
  EXPECT_NE(FormatSummary(rows, "p").find("(noise: 0 of 100 samples quiet; no row is checked"),
            std::string::npos);
  rows[2].quiet = true;

  // Nor is one whose share is known only within +-33% (three pairs): it is
  // noise itself.
  rows[2].vs_eager_paired = 1.25;
  rows[2].spread = 0.33;
  rows[2].quiet_samples = 3;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[0].NoiseText().empty()) << rows[0].NoiseText();
  EXPECT_TRUE(rows[2].NoisyFor(NoiseKind::kImprecise));
  EXPECT_NE(FormatSummary(rows, "p").find(
                "(noise: x eager 1.25 known only within +-33.0% (3 quiet pairs), wider than +-3%; "
                "no row is checked against it)"),
            std::string::npos)
      << FormatSummary(rows, "p");
  rows[2].vs_eager_paired.reset();
  rows[2].spread = 0.01;

  // Within 3% plus both spreads of the bound: not flagged.
  rows[0] = Fake("layer_loss", "eager", "as-written", 1.0 / 0.104);  // 104 GFLOP/s
  rows[0].spread = 0.005;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[0].NoiseText().empty()) << rows[0].NoiseText();
}

TEST(BenchPlausibility, APairedBoundIsHeldAgainstEagerBesideIt) {
  // The least times were taken seconds apart: eager's 8 ms when the machine
  // ran fast, the bound's 10 ms when it ran slow (125% unpaired). Paired,
  // the bound took 0.8 of the eager run beside it: 80%, no noise.
  std::vector<RowResult> rows = {Fake("layer_loss", "eager", "as-written", 8.0),
                                 Fake("layer_loss", "recompute", "as-written", 12.0),
                                 FakeBound("layer_loss", 10.0, 0.01)};
  rows[1].flops_recomputed = 500'000'000;  // 1.5 GFLOP, at 1.25 x eager paired
  rows[1].vs_eager_paired = 1.25;
  rows[2].vs_eager_paired = 0.8;
  rows[2].pair_time_ms = 8.4;
  rows[2].paired_eager_ms = 10.5;
  ComputeVsEager(&rows);
  EXPECT_DOUBLE_EQ(*rows[0].of_matmul_bound, 0.8);
  EXPECT_TRUE(rows[0].NoiseText().empty()) << rows[0].NoiseText();
  // 1.5 GFLOP at 1.25 x eager: 1.5 / 1.25 = 1.2 eager runs' FLOPs in one
  // eager run's time, against the bound's 1 / 0.8 = 1.25: 96%.
  EXPECT_DOUBLE_EQ(*rows[1].of_matmul_bound, 1.5 * 0.8 / 1.25);
  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find("eager 10.5 ms: its matmuls alone take 80% of that (8.40 ms beside it"),
            std::string::npos)
      << summary;
}

TEST(BenchPlausibility, ARowWithoutAQuietSampleIsNoise) {
  std::vector<RowResult> rows = {Fake("sin_plain", "eager", "as-written", 0.2, {{"D", 64}}),
                                 Fake("sin_plain", "recompute", "as-written", 0.2, {{"D", 64}})};
  rows[1].vs_eager_paired = 1.0;
  rows[1].quiet = false;
  rows[1].samples = 2;
  rows[1].quiet_samples = 0;
  rows[1].timings.row_ms = {0.2, 0.3};
  rows[1].timings.row_delay = {0.5, 1.0};
  rows[1].timings.eager_ms = {0.2, 0.2};
  rows[1].timings.eager_delay = {0.5, 0.0};
  ComputeVsEager(&rows);
  EXPECT_EQ(rows[1].NoiseText(), "too few quiet samples (0 of 2): a neighbour kept a CPU busy");
  const StabilityCount count = CountStability(rows, 0.01);
  EXPECT_EQ(count.noise, 1);
  EXPECT_EQ(count.not_quiet, 1);
  // Delay-weighted: (0.2*0.5 + 0.3*1.0 + 0.2*0.5) / 0.9.
  EXPECT_NEAR(count.run_delay, 0.5 / 0.9, 1e-12);
  const std::string summary = FormatSummary(rows, "p");
  EXPECT_NE(summary.find("1 flagged as noise (1 with too few quiet samples)"), std::string::npos)
      << summary;
}

TEST(BenchPlausibility, ARowWhoseWindowsDisagreeIsNoise) {
  std::vector<RowResult> rows = {Fake("scan_stack", "eager", "as-written", 10.0),
                                 Fake("scan_stack", "recompute", "as-written", 13.3),
                                 Fake("scan_stack", "recompute", "schedule:sqrt", 13.3)};
  rows[1].flops_recomputed = 1'000'000'000 / 3;
  rows[2].flops_recomputed = 1'000'000'000 / 3;
  // 1.36 / 1.30: 4.6% apart, past kWindowAllowance; 1.33 / 1.31: 1.5%.
  rows[1].vs_eager_paired = 1.33;
  rows[1].window_values = {1.30, 1.36};
  rows[2].vs_eager_paired = 1.32;
  rows[2].window_values = {1.31, 1.33};
  ComputeVsEager(&rows);
  EXPECT_EQ(rows[1].NoiseText(), "its windows disagree: x eager 1.300, 1.360 (4.6% apart)");
  EXPECT_TRUE(rows[1].NoisyFor(NoiseKind::kWindowsDisagree));
  EXPECT_FALSE(rows[1].NoisyFor(NoiseKind::kBelowFlopFloor));
  EXPECT_EQ(rows[2].NoiseText(), "");
  const StabilityCount count = CountStability(rows, 0.01);
  EXPECT_EQ(count.noise, 1);
  EXPECT_EQ(count.windows_disagree, 1);
  const std::string summary = FormatSummary(rows, "p");
  EXPECT_NE(summary.find(
                "1 flagged as noise (1 whose windows disagree by more than 3% and their intervals)"),
            std::string::npos)
      << summary;
  const nlohmann::json run = ResultsJson("cmd", nlohmann::json::object(), "date", rows);
  EXPECT_EQ(run["rows"][1]["window_values"], (nlohmann::json{1.30, 1.36}));
  EXPECT_FALSE(run["rows"][0].contains("window_values"));
}

// Two windows 3.5% apart are two numbers only where their intervals say so:
// 1.300 within 1% and 1.345 within 2.5% overlap (1.313 against 1.311);
// within 0.5% each they do not.
TEST(BenchPlausibility, WindowsApartOnlyBeyondTheirIntervalsDisagree) {
  std::vector<RowResult> rows = {Fake("scan_stack", "eager", "as-written", 10.0),
                                 Fake("scan_stack", "recompute", "as-written", 13.2),
                                 Fake("scan_stack", "recompute", "schedule:sqrt", 13.2)};
  for (int i : {1, 2}) {
    rows[i].flops_recomputed = 1'000'000'000 / 3;
    rows[i].vs_eager_paired = 1.32;
    rows[i].window_values = {1.30, 1.345};
  }
  rows[1].window_spreads = {0.01, 0.025};
  rows[2].window_spreads = {0.005, 0.005};
  ComputeVsEager(&rows);
  EXPECT_FALSE(rows[1].NoisyFor(NoiseKind::kWindowsDisagree)) << rows[1].NoiseText();
  EXPECT_TRUE(rows[2].NoisyFor(NoiseKind::kWindowsDisagree));
  EXPECT_EQ(rows[2].NoiseText(),
            "its windows disagree: x eager 1.300 +-0.5%, 1.345 +-0.5% (3.5% apart)");
  const nlohmann::json run = ResultsJson("cmd", nlohmann::json::object(), "date", rows);
  EXPECT_EQ(run["rows"][1]["window_spreads"], (nlohmann::json{0.01, 0.025}));
}

// A paired ratio is a result only where its interval is within the
// allowance a rerun is held to: 1.29 +-34% (five pairs, a deep row at its
// time cap) is not; 1.29 +-3% is; eager's own row, unpaired, has a spread
// that is not an interval of a ratio and is never held to it.
TEST(BenchPlausibility, APairedRatioWithAWideIntervalIsNoise) {
  std::vector<RowResult> rows = {Fake("scan_stack", "eager", "as-written", 10.0),
                                 Fake("scan_stack", "planned", "schedule:sqrt", 12.9),
                                 Fake("scan_stack", "recompute", "schedule:sqrt", 12.9)};
  rows[0].spread = 0.12;
  for (int i : {1, 2}) {
    rows[i].flops_recomputed = 1'000'000'000 / 4;
    rows[i].vs_eager_paired = 1.29;
    rows[i].samples = 5;
    rows[i].quiet_samples = 5;
  }
  rows[1].spread = 0.343;
  rows[2].spread = kWindowAllowance;
  ComputeVsEager(&rows);
  EXPECT_FALSE(rows[0].noisy()) << rows[0].NoiseText();
  EXPECT_TRUE(rows[1].NoisyFor(NoiseKind::kImprecise));
  EXPECT_EQ(rows[1].NoiseText(),
            "x eager 1.29 known only within +-34.3% (5 quiet pairs), wider than +-3%");
  EXPECT_FALSE(rows[2].noisy()) << rows[2].NoiseText();
  const StabilityCount count = CountStability(rows, 0.01);
  EXPECT_EQ(count.noise, 1);
  EXPECT_EQ(count.imprecise, 1);
  const std::string summary = FormatSummary(rows, "p");
  EXPECT_NE(summary.find("1 flagged as noise (1 known only within more than +-3%)"),
            std::string::npos)
      << summary;
  const nlohmann::json run = ResultsJson("cmd", nlohmann::json::object(), "date", rows);
  EXPECT_EQ(run["rows"][1]["noise_kinds"], (nlohmann::json{"imprecise"}));
}

TEST(BenchPlausibility, NoiseRowsPrintNoiseAndTheSummarySaysHowStableTheRunWas) {
  std::vector<RowResult> rows = {FakeBound("scan_stack", 1.0),
                                 Fake("scan_stack", "eager", "as-written", 10.0),
                                 Fake("scan_stack", "recompute", "as-written", 12.1),
                                 Fake("scan_stack", "recompute", "schedule:sqrt", 14.0),
                                 Fake("scan_stack", "recompute", "everything_saveable", 10.0)};
  rows[2].flops_recomputed = 1'000'000'000 / 3;
  rows[3].flops_recomputed = 1'000'000'000 / 3;
  rows[1].spread = 0.002;
  rows[2].vs_eager_paired = 1.21;
  rows[2].spread = 0.004;
  rows[3].vs_eager_paired = 1.41;
  rows[3].spread = 0.023;
  rows[4].vs_eager_paired = 1.01;
  rows[4].spread = 0.001;
  rows[4].matmul_impls = {"brg:avx512_core", "gemm:jit"};
  ComputeVsEager(&rows);
  const StabilityCount count = CountStability(rows, 0.01);
  EXPECT_EQ(count.rows, 4);
  EXPECT_EQ(count.within_target, 3);
  EXPECT_EQ(count.noise, 1);

  const std::string summary = FormatSummary(rows, "AMD EPYC, 2 CPUs, ISA avx512_core");
  EXPECT_NE(summary.find("Platform: AMD EPYC, 2 CPUs, ISA avx512_core\n"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("matmuls ran on: brg:avx512_core, gemm:jit"), std::string::npos)
      << summary;
  // The noise row prints no ratio, and says why below the table.
  const std::string noise_row = LineWith(summary, "recompute/as-written ");
  EXPECT_NE(noise_row.find(" noise "), std::string::npos) << noise_row;
  EXPECT_EQ(noise_row.find("1.21"), std::string::npos) << noise_row;
  EXPECT_NE(LineWith(summary, "Noise (").find("cannot be the row's cost"), std::string::npos);
  EXPECT_NE(LineWith(summary, "  scan_stack/d=512,N=256 recompute/as-written: ")
                .find("x eager 1.21 below the FLOP floor 1.33"),
            std::string::npos)
      << summary;
  const std::string sqrt_row = LineWith(summary, "recompute/schedule:sqrt ");
  EXPECT_NE(sqrt_row.find(" 1.41 "), std::string::npos) << sqrt_row;
  EXPECT_NE(sqrt_row.find(" 2.3% "), std::string::npos) << sqrt_row;
  EXPECT_NE(summary.find("stability: 3 of 4 rows within 1.5% (largest spread 2.3%, "
                         "scan_stack/d=512,N=256 recompute/schedule:sqrt), 1 flagged as "
                         "noise; rerun them with --benchmark_filter='"
                         "BM_ValueAndGrad/scan_stack/d=512,N=256/recompute/as-written|"
                         "MatMulBound'"),
            std::string::npos)
      << summary;

  const nlohmann::json run = ResultsJson("cmd", nlohmann::json::object(), "date", rows);
  EXPECT_EQ(run["rows"][2]["noise"], "x eager 1.21 below the FLOP floor 1.33");
  EXPECT_EQ(run["rows"][2]["noise_kinds"], (nlohmann::json{"below_flop_floor"}));
  EXPECT_NEAR(run["rows"][2]["flop_floor"].get<double>(), 4.0 / 3, 1e-9);
  EXPECT_EQ(run["rows"][3]["spread"], 0.023);
  EXPECT_FALSE(run["rows"][3].contains("noise"));
  EXPECT_EQ(run["rows"][4]["matmul_impls"],
            (nlohmann::json{"brg:avx512_core", "gemm:jit"}));
  EXPECT_TRUE(run["rows"][0]["spread"].is_number());
}

}  // namespace
}  // namespace remat::bench
