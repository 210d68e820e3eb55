// Tests of the benchmark's planning and reporting (harness/bench_lib.h): the
// default plan covers every problem and engine, the JSON carries the machine,
// and vs_eager divides by the right row.

#include "harness/bench_lib.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "problems/problem.h"

namespace remat::bench {
namespace {

std::vector<PlannedRow> DefaultPlan(const std::vector<std::string>& engines) {
  std::vector<std::string> rest;
  return PlanRows(ParseBenchFlags({"bench"}, &rest), engines);
}

TEST(BenchPlan, DefaultCoversEveryProblemAndEveryEngineButTheOracle) {
  const std::vector<std::string> registered = EngineNames();
  ASSERT_NE(std::find(registered.begin(), registered.end(), "eager"), registered.end());
  const std::vector<PlannedRow> plan = DefaultPlan(registered);
  std::set<std::string> problems, engines;
  for (const PlannedRow& row : plan) {
    if (row.kind == RowKind::kValueAndGrad) {
      problems.insert(row.problem);
      engines.insert(row.engine);
    }
  }
  for (const auto& p : AllProblems()) EXPECT_TRUE(problems.count(p->name())) << p->name();
  for (const std::string& e : registered) {
    EXPECT_EQ(engines.count(e), e == kOracleEngine ? 0u : 1u) << e;
  }
}

TEST(BenchPlan, AnEngineRegisteredLaterShowsUpWithEveryPolicy) {
  const std::vector<PlannedRow> plan = DefaultPlan({"eager", "future", "reference"});
  std::map<std::string, std::vector<std::string>> policies;  // case/engine -> policies
  for (const PlannedRow& row : plan) {
    if (row.kind == RowKind::kValueAndGrad) {
      policies[row.case_key + " " + row.engine].push_back(row.policy);
    }
  }
  const std::string key = "scan_stack/L=8,d=512,N=256";
  EXPECT_EQ(policies[key + " eager"], std::vector<std::string>{kAsWritten});
  EXPECT_EQ(policies[key + " future"],
            (std::vector<std::string>{"as-written", "nothing_saveable",
                                      "dots_with_no_batch_dims_saveable", "everything_saveable",
                                      "schedule:every:4", "schedule:sqrt", "schedule:bisect",
                                      "schedule:revolve:4"}));
  EXPECT_EQ(policies.count(key + " reference"), 0u);
  // Schedules reverse scans: a problem without one gets no schedule rows.
  for (const std::string& p : policies["layer_loss/d=512,N=256 future"]) {
    EXPECT_FALSE(IsSchedule(p)) << p;
  }
}

TEST(BenchPlan, BaselineRunsFirstInEachCaseAndNamesReadLikeTheFlags) {
  const std::vector<PlannedRow> plan = DefaultPlan({"zeta", "eager", "alpha"});
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan[0].name, "BM_OneDnnMatMulBound/N=256,d=512");
  EXPECT_EQ(plan[0].kind, RowKind::kMatMulBound);
  std::string last_case;
  for (const PlannedRow& row : plan) {
    if (row.kind != RowKind::kValueAndGrad) continue;
    if (row.case_key != last_case) {
      EXPECT_EQ(row.engine, "eager") << row.name;
    }
    last_case = row.case_key;
  }
  const auto it = std::find_if(plan.begin(), plan.end(), [](const PlannedRow& r) {
    return r.name == "BM_ValueAndGrad/scan_stack/L=32,d=512,N=256/eager/as-written";
  });
  EXPECT_NE(it, plan.end());
}

TEST(BenchPlan, SweepsAndErrors) {
  std::vector<std::string> rest;
  BenchFlags depth = ParseBenchFlags({"bench", "--sweep=depth", "--engines=eager"}, &rest);
  std::vector<PlannedRow> rows = PlanRows(depth, {"eager", "recompute"});
  ASSERT_EQ(rows.size(), 1u + 8u);  // the bound, then L = 8 ... 1024
  EXPECT_EQ(rows.back().name, "BM_ValueAndGrad/scan_stack/L=1024,d=512,N=256/eager/as-written");

  BenchFlags width = ParseBenchFlags({"bench", "--sweep", "width", "--engines=eager"}, &rest);
  rows = PlanRows(width, {"eager"});
  EXPECT_EQ(rows.back().case_key, "layer_loss/d=2048,N=256");

  EXPECT_THROW(PlanRows(ParseBenchFlags({"bench", "--engines=nope"}, &rest), {"eager"}), Error);
  EXPECT_THROW(PlanRows(ParseBenchFlags({"bench", "--policies=nope"}, &rest), {"eager"}), Error);
  EXPECT_THROW(PlanRows(ParseBenchFlags({"bench", "--problems=nope"}, &rest), {"eager"}), Error);
  EXPECT_THROW(ParseBenchFlags({"bench", "--sweep=sideways"}, &rest), Error);
  EXPECT_THROW(ParseBenchFlags({"bench", "--engines"}, &rest), Error);
}

TEST(BenchFlags, OwnFlagsAreTakenOutAndTheRestPassesThrough) {
  std::vector<std::string> rest;
  BenchFlags f = ParseBenchFlags(
      {"bench", "--benchmark_filter=sin_chain", "--engines=eager,recompute",
       "--policies=save_only_these_names:a,b,everything_saveable", "--out", "/tmp/x",
       "--benchmark_min_time=0.1"},
      &rest);
  EXPECT_EQ(f.engines, (std::vector<std::string>{"eager", "recompute"}));
  EXPECT_EQ(f.policies,
            (std::vector<std::string>{"save_only_these_names:a,b", "everything_saveable"}));
  EXPECT_EQ(f.out_dir, "/tmp/x");
  EXPECT_EQ(rest, (std::vector<std::string>{"bench", "--benchmark_filter=sin_chain",
                                            "--benchmark_min_time=0.1"}));
  f = ParseBenchFlags({"bench", "--policies=save_only_these_names:a,b;nothing_saveable"}, &rest);
  EXPECT_EQ(f.policies,
            (std::vector<std::string>{"save_only_these_names:a,b", "nothing_saveable"}));
}

RowResult Fake(const std::string& problem, const std::string& engine, const std::string& policy,
               double ms, OrderedParams params = {{"d", 512}, {"N", 256}}) {
  RowResult r;
  r.row.problem = problem;
  r.row.params = params;
  r.row.engine = engine;
  r.row.policy = policy;
  r.row.case_key = problem + "/" + FormatOrderedParams(params);
  r.row.name = "BM_ValueAndGrad/" + r.row.case_key + "/" + engine + "/" + policy;
  r.real_time_ms = ms;
  r.iterations = 10;
  r.flops_forward = 1'000'000'000;
  r.gflops = static_cast<double>(r.total_flops()) / (ms * 1e6);
  return r;
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
  RowResult bound;
  bound.row.kind = RowKind::kMatMulBound;
  bound.row.params = {{"N", 256}, {"d", 512}};
  bound.row.engine = kBoundEngine;
  bound.gflops = 200.0;
  bound.real_time_ms = 1.0;
  rows.push_back(bound);

  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[0].vs_eager);
  EXPECT_DOUBLE_EQ(*rows[0].vs_eager, 1.5);
  EXPECT_DOUBLE_EQ(*rows[1].vs_eager, 1.0);
  EXPECT_DOUBLE_EQ(*rows[2].vs_eager, 2.5);
  EXPECT_FALSE(rows[3].vs_eager);
  EXPECT_FALSE(rows[4].vs_eager);
  EXPECT_FALSE(rows[5].vs_eager);
  // eager: 1 GFLOP in 10 ms = 100 GFLOP/s, half the bound's 200.
  ASSERT_TRUE(rows[1].of_matmul_bound);
  EXPECT_DOUBLE_EQ(*rows[1].of_matmul_bound, 0.5);
  EXPECT_FALSE(rows[3].of_matmul_bound);  // no bound at d=1024

  const nlohmann::json run = ResultsJson("cmd", MachineInfo(), "2024-01-01T00:00:00Z", rows);
  EXPECT_DOUBLE_EQ(run["rows"][0]["vs_eager"].get<double>(), 1.5);
  EXPECT_TRUE(run["rows"][3]["vs_eager"].is_null());
  EXPECT_EQ(run["rows"][4]["error"], "out of memory");
  EXPECT_EQ(run["rows"][1]["params"]["d"], 512);
  for (const char* field : {"name", "problem", "params", "engine", "policy", "iterations",
                            "real_time_ms", "peak_bytes", "residual_bytes", "flops_forward",
                            "flops_recomputed", "flops_backward", "gflops", "vs_eager"}) {
    EXPECT_TRUE(run["rows"][0].contains(field)) << field;
  }

  const std::string summary = FormatSummary(rows);
  EXPECT_NE(summary.find("x eager"), std::string::npos) << summary;
  EXPECT_NE(summary.find("recompute/nothing_saveable"), std::string::npos) << summary;
  EXPECT_NE(summary.find("2.50"), std::string::npos) << summary;
  EXPECT_NE(summary.find("failed: out of memory"), std::string::npos) << summary;
  EXPECT_NE(summary.find("50% of the bound"), std::string::npos) << summary;
}

TEST(BenchResults, MachineInfoHasEveryField) {
  const nlohmann::json m = MachineInfo();
  for (const char* field : {"hostname", "cores", "cpu", "memory_bytes", "omp_num_threads",
                            "omp_wait_policy", "onednn"}) {
    EXPECT_TRUE(m.contains(field)) << field;
  }
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
