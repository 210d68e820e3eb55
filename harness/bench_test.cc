// Tests of the benchmark's planning and reporting (harness/bench_lib.h): the
// default plan covers every problem and engine, the JSON carries the machine,
// and vs_eager divides by the right row.

#include "harness/bench_lib.h"

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
#include "engines/api/registry.h"
#include "engines/schedule/schedule.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat::bench {
namespace {

std::vector<PlannedRow> DefaultPlan(const std::vector<std::string>& engines) {
  std::vector<std::string> rest;
  return PlanRows(ParseBenchFlags({"bench"}, &rest), engines);
}

TEST(BenchPlan, DefaultCoversEveryProblemAndEveryEngineButTheFloat64Checks) {
  const std::vector<std::string> registered = EngineNames();
  ASSERT_NE(std::find(registered.begin(), registered.end(), "eager"), registered.end());
  ASSERT_NE(std::find(registered.begin(), registered.end(), "oracle"), registered.end());
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
    EXPECT_EQ(engines.count(e), IsFloat64Check(e) ? 0u : 1u) << e;
  }
}

TEST(BenchPlan, AnEngineRegisteredLaterShowsUpWithEveryPolicy) {
  const std::vector<PlannedRow> plan = DefaultPlan({"eager", "future", "oracle", "reference"});
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
                                      "schedule:every:4", "schedule:segments:4", "schedule:sqrt",
                                      "schedule:bisect", "schedule:revolve:4",
                                      "schedule:budget:4MiB"}));
  EXPECT_EQ(policies.count(key + " oracle"), 0u);
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

std::vector<PlannedRow> SweepPlan(const std::string& sweep) {
  std::vector<std::string> rest;
  return PlanRows(ParseBenchFlags({"bench", "--sweep=" + sweep}, &rest), {"eager", "recompute"});
}

// The policies of `engine`'s rows at scan_stack `params`, in plan order.
std::vector<std::string> PoliciesAt(const std::vector<PlannedRow>& plan, const std::string& engine,
                                    const std::string& params) {
  std::vector<std::string> out;
  for (const PlannedRow& row : plan) {
    if (row.engine == engine && row.case_key == "scan_stack/" + params) out.push_back(row.policy);
  }
  return out;
}

// Rows come grouped by case (the bench holds one case's inputs at a time),
// each group led by the baseline, and no name twice.
void ExpectGroupedAndUnique(const std::vector<PlannedRow>& plan) {
  std::set<std::string> names, finished_cases;
  std::string last_case;
  for (const PlannedRow& row : plan) {
    EXPECT_TRUE(names.insert(row.name).second) << "twice: " << row.name;
    if (row.kind != RowKind::kValueAndGrad || row.case_key == last_case) continue;
    EXPECT_EQ(row.engine, kBaselineEngine) << row.name;
    if (!last_case.empty()) finished_cases.insert(last_case);
    EXPECT_FALSE(finished_cases.count(row.case_key)) << "case split: " << row.name;
    last_case = row.case_key;
  }
}

TEST(BenchPlan, SchedulesSweepHasTheFrontierCaseAndEveryScheduleAtEveryDepth) {
  const std::vector<PlannedRow> plan = SweepPlan("schedules");
  ExpectGroupedAndUnique(plan);
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan[0].name, "BM_OneDnnMatMulBound/N=256,d=512");
  // The frontier: eager, JAX's checkpointed body (as written and saving the
  // matmuls), every schedule form, budgets from near the least feasible to
  // near store-all.
  EXPECT_EQ(PoliciesAt(plan, "eager", "L=256,d=512,N=256"), std::vector<std::string>{kAsWritten});
  const std::vector<std::string> frontier = {
      "as-written",          "dots_with_no_batch_dims_saveable",
      "schedule:every:16",   "schedule:segments:16",
      "schedule:sqrt",       "schedule:bisect",
      "schedule:revolve:4",  "schedule:revolve:8",
      "schedule:revolve:16", "schedule:budget:4MiB",
      "schedule:budget:8MiB", "schedule:budget:16MiB",
      "schedule:budget:64MiB", "schedule:checkpoint_every:4"};
  EXPECT_EQ(PoliciesAt(plan, "recompute", "L=256,d=512,N=256"), frontier);
  std::set<std::string> forms;
  for (const std::string& p : frontier) {
    if (!IsSchedule(p)) continue;
    const std::string spec = p.substr(std::strlen(kSchedulePrefix));  // "revolve:4"
    forms.insert(spec.substr(0, spec.find(':')));
  }
  for (const std::string& form : ScheduleForms()) {
    EXPECT_TRUE(forms.count(form.substr(0, form.find(':')))) << form;
  }
  EXPECT_TRUE(forms.count("checkpoint_every"));
  // Peak vs depth: the same rows at every L.
  const std::vector<std::string> depth = {"as-written", "schedule:sqrt", "schedule:bisect",
                                          "schedule:revolve:8", "schedule:budget:16MiB"};
  for (const char* params : {"L=16,d=512,N=256", "L=64,d=512,N=256", "L=1024,d=512,N=256"}) {
    EXPECT_EQ(PoliciesAt(plan, "eager", params), std::vector<std::string>{kAsWritten}) << params;
    EXPECT_EQ(PoliciesAt(plan, "recompute", params), depth) << params;
  }
  EXPECT_EQ(plan.size(), 1u + 4u + 3u * depth.size() + frontier.size());
  for (const PlannedRow& row : plan) EXPECT_FALSE(row.big) << row.name;
  EXPECT_EQ(plan.back().name,
            "BM_ValueAndGrad/scan_stack/L=1024,d=512,N=256/recompute/schedule:budget:16MiB");
}

TEST(BenchPlan, ScaleSweepRunsTheSchedulesAndEagerOnceEach) {
  const std::vector<PlannedRow> plan = SweepPlan("scale");
  ExpectGroupedAndUnique(plan);
  std::vector<std::string> names;
  for (const PlannedRow& row : plan) {
    names.push_back(row.name);
    EXPECT_EQ(row.big, row.kind == RowKind::kValueAndGrad) << row.name;
  }
  const std::string c = "BM_ValueAndGrad/scan_stack/L=2048,d=1024,N=1024/";
  EXPECT_EQ(names, (std::vector<std::string>{
                       "BM_OneDnnMatMulBound/N=1024,d=1024", c + "eager/as-written",
                       c + "recompute/schedule:sqrt", c + "recompute/schedule:revolve:8",
                       c + "recompute/schedule:budget:128MiB"}));
}

// What `engine` predicts for `policy` on the problem at `params`,
// planned on shapes alone (no data: the scale case's weights are 8 GiB).
Stats PlanRow(const std::string& problem_name, const OrderedParams& params,
              const std::string& engine, const std::string& policy,
              const std::string& variant_for_errors) {
  const Problem& problem = FindProblem(problem_name);
  const ParamValues values(params.begin(), params.end());
  Program program = problem.Build(values);
  if (IsSchedule(policy)) {
    program = ApplySchedule(program, policy.substr(std::strlen(kSchedulePrefix)));
  }
  const std::vector<Tensor> args = ShapeOnlyArguments(program);
  RunOptions options;
  options.plan_only = true;
  SCOPED_TRACE(variant_for_errors);
  return MakeEngine(engine)->ValueAndGrad(program, args, WrtIndices(problem, program), options).stats;
}

int64_t Activations(const Stats& s) {
  return s.peak_bytes_by_category[static_cast<int>(Category::kActivations)];
}

// Every budget row of the default run and of --sweep=schedules is feasible
// at its size, and those meant to trade memory for time (on scan_stack and
// mlp_chain, but not the depth series, which shows a budget's peak levelling
// off) keep less than the schedule that stores every step at once does.
TEST(BenchPlan, BudgetRowsAreFeasibleAndBelowStoreAll) {
  int chain_rows = 0;
  for (const std::string& sweep : {std::string("none"), std::string("schedules")}) {
    for (const PlannedRow& row : SweepPlan(sweep)) {
      if (row.policy.rfind("schedule:budget:", 0) != 0) continue;
      chain_rows += row.problem == "mlp_chain";
      Stats budget;
      ASSERT_NO_THROW(budget = PlanRow(row.problem, row.params, row.engine, row.policy, row.name));
      const bool depth_series = sweep == "schedules" && row.policy == "schedule:budget:16MiB";
      if (depth_series || (row.problem != "scan_stack" && row.problem != "mlp_chain")) continue;
      const Stats store_all = PlanRow(row.problem, row.params, row.engine, "schedule:budget:1TiB", row.name);
      EXPECT_LT(Activations(budget), Activations(store_all)) << row.name;
      EXPECT_GT(budget.flops_recomputed, 0) << row.name;
    }
  }
  EXPECT_GT(chain_rows, 0);  // schedules reach chains of blocks, not only scans
}

// The scale case: eager's predicted peak is past this 24 GiB machine (the
// weights and their gradient are 16 GiB, its activations 16 GiB more), every
// schedule's within the 16 GiB and under 1 GiB of activations.
TEST(BenchPlan, AtScaleEagerIsPastTheMachineAndTheSchedulesFit) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  for (const PlannedRow& row : SweepPlan("scale")) {
    if (row.kind != RowKind::kValueAndGrad) continue;
    const Stats s = PlanRow(row.problem, row.params, row.engine, row.policy, row.name);
    if (row.engine == kBaselineEngine) {
      EXPECT_GT(s.predicted_peak_bytes, 32 * kGiB) << row.name;
    } else {
      EXPECT_LT(s.predicted_peak_bytes, 17 * kGiB) << row.name;
      EXPECT_GT(s.predicted_peak_bytes, 16 * kGiB) << row.name;
      EXPECT_LT(Activations(s), kGiB) << row.name;
    }
  }
}

TEST(BenchFlags, SweepsThatPickTheirRowsRefusePoliciesAndMaxMemoryParses) {
  std::vector<std::string> rest;
  EXPECT_THROW(ParseBenchFlags({"bench", "--sweep=schedules", "--policies=sqrt"}, &rest), Error);
  EXPECT_THROW(ParseBenchFlags({"bench", "--policies=sqrt", "--sweep=scale"}, &rest), Error);
  try {
    ParseBenchFlags({"bench", "--sweep=scale", "--policies=as-written"}, &rest);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--sweep=scale"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ParseBenchFlags({"bench", "--sweep=schedules", "--engines=recompute"}, &rest).sweep,
            Sweep::kSchedules);

  EXPECT_EQ(ParseBenchFlags({"bench"}, &rest).max_memory_bytes, DefaultMaxMemoryBytes());
  EXPECT_GT(DefaultMaxMemoryBytes(), 0);
  EXPECT_EQ(ParseBenchFlags({"bench", "--max-memory=12GiB"}, &rest).max_memory_bytes,
            int64_t{12} << 30);
  EXPECT_EQ(ParseBenchFlags({"bench", "--max-memory", "0"}, &rest).max_memory_bytes, 0);
  EXPECT_TRUE(rest == std::vector<std::string>{"bench"});
  EXPECT_THROW(ParseBenchFlags({"bench", "--max-memory=lots"}, &rest), Error);
  EXPECT_THROW(ParseBenchFlags({"bench", "--max-memory"}, &rest), Error);
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
  EXPECT_FALSE(f.paired);
  f = ParseBenchFlags({"bench", "--paired", "--benchmark_repetitions=3"}, &rest);
  EXPECT_TRUE(f.paired);
  EXPECT_EQ(rest, (std::vector<std::string>{"bench", "--benchmark_repetitions=3"}));
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

TEST(BenchResults, PairedRatioIsWrittenAndShownWhenPresent) {
  std::vector<RowResult> rows = {Fake("layer_loss", "eager", "as-written", 10.0),
                                 Fake("layer_loss", "recompute", "nothing_saveable", 14.0),
                                 Fake("layer_loss", "recompute", "everything_saveable", 11.0)};
  rows[1].vs_eager_paired = 1.25;
  ComputeVsEager(&rows);
  EXPECT_DOUBLE_EQ(*rows[1].vs_eager, 1.4);  // the medians' ratio stays
  const nlohmann::json run = ResultsJson("bench --paired", nlohmann::json::object(),
                                         "2026-11-23T00:00:00Z", rows);
  EXPECT_EQ(run["rows"][1]["vs_eager_paired"], 1.25);
  EXPECT_FALSE(run["rows"][2].contains("vs_eager_paired"));
  const std::string summary = FormatSummary(rows);
  EXPECT_NE(summary.find("1.25 p"), std::string::npos) << summary;
  EXPECT_NE(summary.find("1.10"), std::string::npos) << summary;
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

  const std::string summary = FormatSummary(rows);
  EXPECT_NE(summary.find("x eager"), std::string::npos) << summary;
  EXPECT_NE(summary.find("recompute/nothing_saveable"), std::string::npos) << summary;
  EXPECT_NE(summary.find("2.50"), std::string::npos) << summary;
  EXPECT_NE(summary.find("activations"), std::string::npos) << summary;
  EXPECT_NE(summary.find("48.0 MiB"), std::string::npos) << summary;
  EXPECT_NE(summary.find(" 3.0 MiB"), std::string::npos) << summary;
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
