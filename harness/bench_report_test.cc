// Tests of harness/bench_report.h: the results JSON (the command that
// reproduces the run, the date, the files, the machine), and the ratios the
// summary shows.

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
#include "harness/bench_fake_row.h"
#include "harness/conformance.h"
#include "harness/stats_json.h"
#include "problems/problem.h"

namespace remat::bench {
namespace {

TEST(BenchResults, PairedRatioIsWrittenAndShownWhenPresent) {
  std::vector<RowResult> rows = {Fake("layer_loss", "eager", "as-written", 10.0),
                                 Fake("layer_loss", "recompute", "nothing_saveable", 14.0),
                                 Fake("layer_loss", "recompute", "everything_saveable", 11.0)};
  rows[1].vs_eager_paired = 1.25;
  ComputeVsEager(&rows);
  EXPECT_DOUBLE_EQ(*rows[1].vs_eager, 1.4);  // the rows' own ratio stays
  const nlohmann::json run = ResultsJson("bench", nlohmann::json::object(),
                                         "2026-11-23T00:00:00Z", rows);
  EXPECT_EQ(run["rows"][1]["vs_eager_paired"], 1.25);
  EXPECT_FALSE(run["rows"][2].contains("vs_eager_paired"));
  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find(" 1.25 "), std::string::npos) << summary;
  EXPECT_EQ(summary.find(" 1.40 "), std::string::npos) << summary;
  EXPECT_NE(summary.find("1.10 u"), std::string::npos) << summary;  // unpaired: marked
}

TEST(BenchResults, TheSummarySaysHowManySamplesTheCpusWereApartFor) {
  std::vector<RowResult> rows = {Fake("layer_loss", "eager", "as-written", 10.0),
                                 Fake("layer_loss", "recompute", "nothing_saveable", 14.0)};
  // Without readings (one CPU): nothing said.
  EXPECT_EQ(FormatSummary(rows, "test platform").find("CPUs apart"), std::string::npos);
  rows[0].timings.link_ns = {52, 0, 330};  // 0: a sample without a reading
  rows[1].timings.link_ns = {60, 320, 55, 58};
  for (RowResult& r : rows) r.timings.reference_link_ns = 52;
  const StabilityCount count = CountStability(rows, 0.01);
  EXPECT_EQ(count.link_read, 6);
  EXPECT_EQ(count.link_apart, 2);
  EXPECT_EQ(count.reference_link_ns, 52);
  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find("CPUs apart: a cache line's round trip between the CPUs was 52 ns or "
                         "less in 10% of the run's readings; 2 of 6 samples were taken with it "
                         "above 104 ns"),
            std::string::npos)
      << summary;
  // The readings and the reference are in the JSON, for a later window's merge.
  const nlohmann::json run =
      ResultsJson("bench", nlohmann::json::object(), "2026-11-23T00:00:00Z", rows);
  EXPECT_EQ(run["rows"][1]["samples_ms"]["link_ns"].size(), 4u);
  EXPECT_EQ(run["rows"][1]["samples_ms"]["reference_link_ns"], 52);
}

TEST(BenchResults, MedianIgnoresABurstOnAFewIterations) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({5}), 5);
  EXPECT_EQ(Median({80, 81, 79, 140, 82}), 81);  // the mean would say 92.4
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

TEST(BenchResults, VsEagerDividesByTheBaselineOfTheSameCase) {
  std::vector<RowResult> rows = {
      Fake("layer_loss", "recompute", "as-written", 15.0),  // before its baseline
      Fake("layer_loss", "eager", "as-written", 10.0),
      Fake("layer_loss", "recompute", "nothing_saveable", 25.0),
      Fake("layer_loss", "recompute", "as-written", 40.0, {{"d", 1024}, {"N", 256}}),  // no eager
      Fake("layer_loss", "recompute", "everything_saveable", 12.0),
  };
  rows.back().error = "out of memory";
  // The case's matmuls alone: 5 ms.
  RowResult bound = Fake("layer_loss", kBoundEngine, "as-written", 5.0);
  bound.row.kind = RowKind::kMatMulBound;
  rows.push_back(bound);

  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[0].vs_eager);
  EXPECT_DOUBLE_EQ(*rows[0].vs_eager, 1.5);
  EXPECT_DOUBLE_EQ(*rows[1].vs_eager, 1.0);
  EXPECT_DOUBLE_EQ(*rows[2].vs_eager, 2.5);
  EXPECT_FALSE(rows[3].vs_eager);
  EXPECT_FALSE(rows[4].vs_eager);
  EXPECT_FALSE(rows[5].vs_eager);
  // eager: 10 ms, the bound 5: its rate is half the bound's.
  ASSERT_TRUE(rows[1].of_matmul_bound);
  EXPECT_DOUBLE_EQ(*rows[1].of_matmul_bound, 0.5);
  EXPECT_FALSE(rows[3].of_matmul_bound);  // no bound at d=1024

  rows[2].peak_bytes = 48 << 20;
  rows[2].peak_bytes_by_category[static_cast<int>(Category::kActivations)] = 3 << 20;
  rows[2].row.big = true;
  const nlohmann::json run = ResultsJson("cmd", MachineInfo(), "2024-01-01T00:00:00Z", rows);
  EXPECT_EQ(run["rows"][2]["peak_bytes_by_category"]["activations"], 3 << 20);
  EXPECT_EQ(run["rows"][2]["peak_bytes_by_category"]["inputs"], 0);
  EXPECT_EQ(run["rows"][2]["big"], true);
  EXPECT_FALSE(run["rows"][0].contains("big"));
  EXPECT_DOUBLE_EQ(run["rows"][0]["vs_eager"].get<double>(), 1.5);
  EXPECT_TRUE(run["rows"][3]["vs_eager"].is_null());
  EXPECT_EQ(run["rows"][4]["error"], "out of memory");
  EXPECT_EQ(run["rows"][1]["params"]["d"], 512);
  for (const char* field : {"name", "problem", "params", "engine", "policy", "iterations",
                            "real_time_ms", "peak_bytes", "peak_bytes_by_category",
                            "residual_bytes", "flops_forward",
                            "flops_recomputed", "flops_backward", "gflops", "vs_eager"}) {
    EXPECT_TRUE(run["rows"][0].contains(field)) << field;
  }

  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find("x eager"), std::string::npos) << summary;
  EXPECT_NE(summary.find("recompute/nothing_saveable"), std::string::npos) << summary;
  EXPECT_NE(summary.find("2.50"), std::string::npos) << summary;
  EXPECT_NE(summary.find("activations"), std::string::npos) << summary;
  EXPECT_NE(summary.find("48.0 MiB"), std::string::npos) << summary;
  EXPECT_NE(summary.find(" 3.0 MiB"), std::string::npos) << summary;
  EXPECT_NE(summary.find("failed: out of memory"), std::string::npos) << summary;
  EXPECT_NE(summary.find("its matmuls alone take 50% of that"), std::string::npos) << summary;
  // No stream floor measured: no line for it, nothing in the JSON.
  EXPECT_EQ(summary.find("stream rate"), std::string::npos) << summary;
  EXPECT_FALSE(run["rows"][5].contains("stream_floor_ms"));
}

// A bound with eager's other kernels at the stream rate: the most of a run
// the matmuls can be for an engine that runs those as passes, from the
// bound's time (5 ms) and the floor's (1.25 ms): 80%; and both in the JSON.
TEST(BenchResults, StreamFloorBoundsTheMatMulsShare) {
  std::vector<RowResult> rows = {Fake("layer_loss", "eager", "as-written", 10.0)};
  RowResult bound = Fake("layer_loss", kBoundEngine, "as-written", 5.0);
  bound.row.kind = RowKind::kMatMulBound;
  bound.stream_floor_ms = 1.25;
  bound.stream_floor_bytes = 69 << 20;
  rows.push_back(bound);
  ComputeVsEager(&rows);
  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find("its other kernels move 69.0 MiB a run, at least 1.25 ms at this "
                         "machine's stream rate: run as passes of their own, the matmuls alone "
                         "take at most 80% of a run"),
            std::string::npos)
      << summary;
  const nlohmann::json run = ResultsJson("cmd", MachineInfo(), "2024-01-01T00:00:00Z", rows);
  EXPECT_DOUBLE_EQ(run["rows"][1]["stream_floor_ms"].get<double>(), 1.25);
  EXPECT_EQ(run["rows"][1]["stream_floor_bytes"], 69 << 20);
}

TEST(BenchResults, MachineInfoHasEveryFieldAndThePlatform) {
  const nlohmann::json m = MachineInfo();
  for (const char* field : {"hostname", "cores", "cpu", "memory_bytes", "omp_num_threads",
                            "omp_wait_policy", "gomp_spincount", "onednn", "cpus",
                            "onednn_isa", "isa_cap", "matmul_impl", "omp_threads"}) {
    EXPECT_TRUE(m.contains(field)) << field;
  }
  // The platform's fields as PlatformToJson writes them, so that `remat
  // compare` and stats.json read them alike.
  const nlohmann::json platform = PlatformToJson(DescribePlatform());
  for (const auto& [key, value] : platform.items()) EXPECT_EQ(m[key], value) << key;
  EXPECT_FALSE(m["onednn_isa"].get<std::string>().empty());
  EXPECT_FALSE(m["matmul_impl"].get<std::string>().empty());
  EXPECT_GE(m["cores"].get<int64_t>(), 1);
  EXPECT_GT(m["memory_bytes"].get<int64_t>(), 0);
  EXPECT_NE(m["onednn"].get<std::string>().find("oneDNN"), std::string::npos);
}

TEST(BenchResults, CommandDateAndFiles) {
  EXPECT_EQ(CommandLine({"/x/bench"}), "tools/bazel run //harness:bench");
  EXPECT_EQ(CommandLine({"/x/bench", "--sweep=depth", "--benchmark_filter=a|b"}),
            "tools/bazel run //harness:bench -- --sweep=depth '--benchmark_filter=a|b'");
  EXPECT_EQ(UtcDate(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(UtcStamp(86400 + 3661), "19700102T010101Z");
  EXPECT_EQ(ResultsDir("/some/dir"), "/some/dir");

  // One reading of the workspace for the results, the source and the peers:
  // `bazel run`'s (its runs go to the ignored results/runs/), else the
  // current directory (whose runs stay out of results/).
  const char* was = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string saved = was ? was : "";
  setenv("BUILD_WORKSPACE_DIRECTORY", "/w", 1);
  EXPECT_EQ(WorkspaceDir(), "/w");
  EXPECT_EQ(ResultsDir(""), "/w/results/runs");
  EXPECT_EQ(ResultsDir("/some/dir"), "/some/dir");
  setenv("BUILD_WORKSPACE_DIRECTORY", "", 1);
  EXPECT_EQ(WorkspaceDir(), ".");
  EXPECT_EQ(ResultsDir(""), ".");
  unsetenv("BUILD_WORKSPACE_DIRECTORY");
  EXPECT_EQ(WorkspaceDir(), ".");
  EXPECT_EQ(ResultsDir(""), ".");
  if (was) setenv("BUILD_WORKSPACE_DIRECTORY", saved.c_str(), 1);

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir =
      std::filesystem::path(tmp ? tmp : std::filesystem::temp_directory_path().string()) /
      "bench_results";
  const std::vector<std::string> written =
      WriteResults(dir.string(), "19700101T000000Z", {{"rows", nlohmann::json::array()}});
  ASSERT_EQ(written.size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir / "bench-19700101T000000Z.json"));
  std::ifstream latest(dir / "latest.json");
  EXPECT_TRUE(nlohmann::json::parse(latest).contains("rows"));
}

}  // namespace
}  // namespace remat::bench
