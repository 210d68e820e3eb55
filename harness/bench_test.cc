// Tests of the benchmark's planning and reporting (harness/bench_lib.h): the
// default plan covers every problem and engine and fits its time budget, the
// JSON carries the machine and the platform, vs_eager divides by the right
// row, and the plausibility flags do what they say, on synthetic rows (no
// test here times anything; the sampling statistic's tests are
// bench_sampling_test.cc).

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
    if (row.kind == RowKind::kValueAndGrad && !row.control) {
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
                                      "schedule:budget:4MiB", "memory_budget:0.5"}));
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

// --peer alone is every peer; --peer=LIST names them (once each); an unknown
// name or an empty list is an error naming the peers there are.
TEST(BenchPlan, PeerFlags) {
  std::vector<std::string> rest;
  EXPECT_TRUE(ParseBenchFlags({"bench"}, &rest).peers.empty());
  EXPECT_EQ(ParseBenchFlags({"bench", "--peer"}, &rest).peers,
            (std::vector<std::string>{"jax", "torch", "torch-compile"}));
  EXPECT_EQ(ParseBenchFlags({"bench", "--peer=torch-compile,jax,jax"}, &rest).peers,
            (std::vector<std::string>{"torch-compile", "jax"}));
  try {
    ParseBenchFlags({"bench", "--peer=pytorch"}, &rest);
    ADD_FAILURE() << "--peer=pytorch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown engine 'pytorch'; peers: jax, torch, torch-compile"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ParseBenchFlags({"bench", "--peer="}, &rest), Error);
}

// --program=FILE: rows for the file's program on the selected engines and
// policies (schedules only where it has a scan or a chain), its case named
// after the program and the file.
TEST(BenchPlanTest, ProgramFilesGetRows) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / "bench_program").string();
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& file, const Program& program) {
    const std::string path = dir + "/" + file;
    std::ofstream(path) << PrintProgram(program);
    return path;
  };
  const Problem& chain = FindProblem("mlp_chain");
  const std::string chain_file = write("chain.remat", chain.Build(ResolveParams(chain, {}, true)));
  const Problem& layer = FindProblem("layer_loss");
  const std::string layer_file = write("layer.remat", layer.Build(ResolveParams(layer, {}, true)));
  std::vector<std::string> rest;
  const BenchFlags flags = ParseBenchFlags(
      {"bench", "--program=" + chain_file, "--program", layer_file, "--engines=eager,recompute",
       "--policies=as-written,dots_saveable,schedule:sqrt"},
      &rest);
  const std::vector<PlannedRow> rows = PlanRows(flags, {"eager", "recompute"});
  std::vector<std::string> names;
  for (const PlannedRow& row : rows) {
    names.push_back(row.name);
    EXPECT_EQ(row.kind, RowKind::kValueAndGrad) << row.name;
    EXPECT_FALSE(row.program_file.empty()) << row.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "BM_ValueAndGrad/mlp_chain@chain.remat/eager/as-written",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/eager/as-written/control",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/recompute/as-written",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/recompute/dots_saveable",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/recompute/schedule:sqrt",
                       "BM_ValueAndGrad/layer_loss@layer.remat/eager/as-written",
                       "BM_ValueAndGrad/layer_loss@layer.remat/eager/as-written/control",
                       "BM_ValueAndGrad/layer_loss@layer.remat/recompute/as-written",
                       "BM_ValueAndGrad/layer_loss@layer.remat/recompute/dots_saveable",
                   }));
  EXPECT_EQ(rows[0].program_file, chain_file);
  EXPECT_EQ(rows[0].problem, "mlp_chain");
  EXPECT_EQ(rows[0].case_key, "mlp_chain@chain.remat");
  // With --problems, both run; with --sweep, neither combines.
  const std::vector<PlannedRow> both = PlanRows(
      ParseBenchFlags({"bench", "--program=" + layer_file, "--problems=sin_chain",
                       "--engines=eager"}, &rest),
      {"eager"});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].problem, "sin_chain");
  EXPECT_EQ(both[1].case_key, "layer_loss@layer.remat");
  EXPECT_THROW(PlanRows(ParseBenchFlags({"bench", "--program=" + layer_file, "--sweep=depth"},
                                        &rest),
                        {"eager"}),
               Error);
  // A bad file is an error naming it, before any row runs.
  std::ofstream(dir + "/bad.remat") << "program p(x: f32[2]) {\n  %y = tanh(%x)\n}\n";
  try {
    PlanRows(ParseBenchFlags({"bench", "--program=" + dir + "/bad.remat"}, &rest), {"eager"});
    FAIL() << "a bad program file must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.remat:2:8: unknown op 'tanh'"), std::string::npos)
        << e.what();
  }
}

// The default run gives planned one row per case (as written, next to
// eager's); naming it in --engines gives it every policy, as recompute has.
TEST(BenchPlan, PlannedRunsAsWrittenInTheDefaultRun) {
  std::vector<std::string> rest;
  const std::vector<std::string> registered = {"eager", "planned", "recompute"};
  auto count = [](const std::vector<PlannedRow>& rows, const std::string& engine,
                  bool as_written_only) {
    size_t n = 0;
    for (const PlannedRow& r : rows) {
      if (r.engine == engine && !r.control && (!as_written_only || r.policy == kAsWritten)) ++n;
    }
    return n;
  };
  const std::vector<PlannedRow> all = PlanRows(ParseBenchFlags({"bench"}, &rest), registered);
  EXPECT_GT(count(all, "planned", false), 0u);
  EXPECT_EQ(count(all, "planned", false), count(all, "planned", true));
  EXPECT_EQ(count(all, "planned", false), count(all, "eager", false));
  const std::vector<PlannedRow> named =
      PlanRows(ParseBenchFlags({"bench", "--engines=eager,planned,recompute"}, &rest), registered);
  EXPECT_EQ(count(named, "planned", false), count(named, "recompute", false));
  EXPECT_GT(count(named, "planned", false), count(named, "planned", true));
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
    if (row.engine == engine && !row.control && row.case_key == "scan_stack/" + params) {
      out.push_back(row.policy);
    }
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
  // 1 bound; per case eager and its A/A control (harness/bench_controls.h).
  EXPECT_EQ(plan.size(), 1u + 4u * 2 + 3u * depth.size() + frontier.size());
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

// The default run is paired, budgeted, and small enough that its minimum
// sampling (every row's min_samples, each paired with as many eager runs)
// is about 7.4 TFLOP: some 40 seconds at 180 GFLOP/s, eager's rate on
// scan_stack on this 2-core machine, which leaves most of the three minutes
// to sampling until stable, set-up and a neighbour's load. Counted from the
// plans' FLOPs, not timed.
TEST(BenchPlan, TheDefaultRunIsPairedAndItsMinimumSamplingFitsTheBudget) {
  std::vector<std::string> rest;
  const BenchFlags flags = ParseBenchFlags({"bench"}, &rest);
  EXPECT_TRUE(flags.paired);
  EXPECT_EQ(flags.sampling_budget_seconds, kDefaultSamplingBudgetSeconds);
  const SamplingRule rule = DefaultSamplingRule();
  EXPECT_EQ(rule.target_spread, 0.01);
  EXPECT_GE(rule.min_samples, 4);
  std::map<std::string, int64_t> eager_flops;  // by case
  double total_flops = 0;
  for (const PlannedRow& row : PlanRows(flags, {"eager", "recompute"})) {
    if (row.kind != RowKind::kValueAndGrad) continue;
    const Stats s = PlanRow(row.problem, row.params, row.engine, row.policy, row.name);
    const int64_t flops = s.flops_forward + s.flops_recomputed + s.flops_backward;
    if (row.engine == kBaselineEngine) eager_flops[row.case_key] = flops;
    // Eager first in each case: its FLOPs are known for the rows after it.
    ASSERT_TRUE(eager_flops.count(row.case_key)) << row.name;
    const int64_t paired = row.engine == kBaselineEngine ? 0 : eager_flops[row.case_key];
    // Each window takes its fewest pairs afresh.
    total_flops += static_cast<double>(flags.Windows() * rule.min_samples * (flops + paired));
  }
  // At the ~150 GFLOP/s the matrix rows run at here: about 80 s of the 150 s
  // sampling budget, the rest for the rows that need more pairs to settle.
  EXPECT_LT(total_flops, 12e12) << total_flops;
  EXPECT_GT(total_flops, 3e12) << total_flops;  // the rows still mean something
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

// --sweep=dtr: dtr under each cap next to recompute's budget:B at the same
// peak, eager as the pairing's baseline; no uncapped dtr row. --memory-cap
// turns an evicting engine's row into a cap row; other engines keep theirs.
TEST(BenchFlags, CapRowsGoToEnginesThatEvictAndBudgetRowsToThoseThatHonourRegions) {
  std::vector<std::string> rest;
  const BenchFlags sweep = ParseBenchFlags({"bench", "--sweep=dtr"}, &rest);
  EXPECT_EQ(sweep.sweep, Sweep::kDtr);
  EXPECT_THROW(ParseBenchFlags({"bench", "--sweep=dtr", "--policies=sqrt"}, &rest), Error);
  std::map<std::string, int> by_variant;
  std::set<std::string> problems;
  for (const PlannedRow& row : PlanRows(sweep, EngineNames())) {
    if (row.kind != RowKind::kValueAndGrad || row.control) continue;
    problems.insert(row.problem);
    ++by_variant[row.engine + "/" + row.policy.substr(0, row.policy.find(':'))];
    if (row.engine == "dtr") {
      EXPECT_TRUE(IsCap(row.policy)) << row.name;
    }
    if (row.engine == "recompute") {
      EXPECT_TRUE(IsBudgetUnderCap(row.policy)) << row.name;
    }
  }
  EXPECT_EQ(problems, (std::set<std::string>{"scan_stack", "mlp_chain"}));
  // 2 problems x 3 depths, x 3 caps.
  EXPECT_EQ(by_variant["eager/as-written"], 6);
  EXPECT_EQ(by_variant["dtr/cap"], 18);
  EXPECT_EQ(by_variant["recompute/budget-under-cap"], 18);
  EXPECT_EQ(by_variant.size(), 3u);

  const BenchFlags capped = ParseBenchFlags(
      {"bench", "--memory-cap=0.5x", "--problems=mlp_chain", "--engines=eager,dtr,recompute",
       "--policies=as-written"},
      &rest);
  EXPECT_EQ(capped.memory_cap, "0.5x");
  std::set<std::string> variants;
  for (const PlannedRow& row : PlanRows(capped, EngineNames())) {
    if (row.kind == RowKind::kValueAndGrad) variants.insert(row.engine + "/" + row.policy);
  }
  EXPECT_EQ(variants, (std::set<std::string>{"eager/as-written", "dtr/cap:0.5x",
                                             "recompute/as-written"}));
  EXPECT_THROW(ParseBenchFlags({"bench", "--memory-cap="}, &rest), Error);
}

// --wrt as remat run's: the inputs every case differentiates, checked
// against each case's inputs before anything runs.
TEST(BenchFlags, WrtNamesEachCasesInputsOrIsRefusedBeforeAnythingRuns) {
  std::vector<std::string> rest;
  BenchFlags flags = ParseBenchFlags(
      {"bench", "--problems=layer_loss", "--wrt=w*", "--engines=eager"}, &rest);
  EXPECT_EQ(flags.wrt, std::vector<std::string>{"w*"});
  EXPECT_FALSE(PlanRows(flags, {"eager"}).empty());
  const Problem& layer = FindProblem("layer_loss");
  const Program program = layer.Build(ResolveParams(layer, {}));
  const std::vector<int> w = WrtFromFlags(flags.wrt, program, {});
  ASSERT_FALSE(w.empty());
  for (int i : w) EXPECT_EQ(program.param_names[i][0], 'w') << program.param_names[i];
  flags = ParseBenchFlags({"bench", "--problems=layer_loss", "--wrt=nope", "--engines=eager"},
                          &rest);
  try {
    PlanRows(flags, {"eager"});
    ADD_FAILURE() << "--wrt=nope planned";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer_loss"), std::string::npos) << what;
    EXPECT_NE(what.find("--wrt"), std::string::npos) << what;
    EXPECT_NE(what.find("nope"), std::string::npos) << what;
  }
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
  EXPECT_TRUE(f.paired);  // the default
  EXPECT_EQ(f.max_row_seconds, 0);
  f = ParseBenchFlags({"bench", "--unpaired", "--benchmark_repetitions=3"}, &rest);
  EXPECT_FALSE(f.paired);
  EXPECT_EQ(rest, (std::vector<std::string>{"bench", "--benchmark_repetitions=3"}));
  f = ParseBenchFlags({"bench", "--paired", "--max-row-seconds=2.5"}, &rest);
  EXPECT_TRUE(f.paired);
  EXPECT_EQ(f.max_row_seconds, 2.5);
  EXPECT_EQ(rest, std::vector<std::string>{"bench"});
  EXPECT_THROW(ParseBenchFlags({"bench", "--max-row-seconds=soon"}, &rest), Error);
  EXPECT_THROW(ParseBenchFlags({"bench", "--max-row-seconds=0"}, &rest), Error);
  EXPECT_THROW(ParseBenchFlags({"bench", "--max-row-seconds="}, &rest), Error);
}


// The first line of `text` that contains `needle`; "" if none.
std::string LineWith(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

TEST(BenchFlags, TheDefaultRunSamplesInTwoWindowsAndSweepsInOne) {
  std::vector<std::string> rest;
  EXPECT_EQ(ParseBenchFlags({"bench"}, &rest).Windows(), kDefaultWindows);
  EXPECT_EQ(kDefaultWindows, 2);
  EXPECT_EQ(ParseBenchFlags({"bench", "--sweep=depth"}, &rest).Windows(), 1);
  EXPECT_EQ(ParseBenchFlags({"bench", "--windows=3"}, &rest).Windows(), 3);
  EXPECT_EQ(ParseBenchFlags({"bench", "--sweep=dtr", "--windows", "2"}, &rest).Windows(), 2);
  for (const char* bad : {"--windows=0", "--windows=two", "--windows=", "--windows=9"}) {
    try {
      ParseBenchFlags({"bench", bad}, &rest);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a number of windows from 1 to 8"),
                std::string::npos)
          << e.what();
    }
  }
}

// --- The plausibility flags, on synthetic rows. ---

// A bound row at N=256, d=512 of `gflops`.
RowResult FakeBound(double gflops, double spread = 0) {
  RowResult bound;
  bound.row.kind = RowKind::kMatMulBound;
  bound.row.params = {{"N", 256}, {"d", 512}};
  bound.row.engine = kBoundEngine;
  bound.gflops = gflops;
  bound.real_time_ms = 1.0;
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
  EXPECT_EQ(rows[1].noise, "x eager 1.21 below the FLOP floor 1.33");
  EXPECT_TRUE(rows[2].noise.empty()) << rows[2].noise;
  EXPECT_TRUE(rows[3].noise.empty()) << rows[3].noise;
  EXPECT_DOUBLE_EQ(*rows[3].flop_floor, 1.0);
  EXPECT_TRUE(rows[0].noise.empty());

  // A wider spread widens the allowance: 1.21 against 1.33 is 9.25% below,
  // within 8% + 2%.
  rows[1].spread = 0.02;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[1].noise.empty()) << rows[1].noise;

  // Unpaired, the ratio of the rows' own times is checked, with eager's
  // spread added to the row's.
  rows[1].vs_eager_paired.reset();
  rows[1].spread = 0.0;
  rows[0].spread = 0.0;
  ComputeVsEager(&rows);  // 12.1 / 10 = 1.21
  EXPECT_FALSE(rows[1].noise.empty());
  rows[0].spread = 0.08;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[1].noise.empty()) << rows[1].noise;

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
  EXPECT_TRUE(rows[1].noise.empty()) << rows[1].noise;
  rows[1].vs_eager_paired = 1.15;
  ComputeVsEager(&rows);
  EXPECT_EQ(rows[1].noise, "x eager 1.15 below the FLOP floor 1.27");
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
  EXPECT_FALSE(rows[0].noise.empty());

  // A scalar chain's time is not its FLOP count's: twice eager's FLOPs at
  // 1.1 x eager is no contradiction. Its floor is only eager's time.
  rows = {Fake("sin_recursive", "eager", "as-written", 0.1, {{"D", 64}}),
          Fake("sin_recursive", "recompute", "as-written", 0.11, {{"D", 64}})};
  rows[1].flops_recomputed = 1'000'000'000;
  rows[1].vs_eager_paired = 1.1;
  ComputeVsEager(&rows);
  ASSERT_TRUE(rows[1].flop_floor);
  EXPECT_DOUBLE_EQ(*rows[1].flop_floor, 1.0);
  EXPECT_TRUE(rows[1].noise.empty()) << rows[1].noise;
  // But more work on the same kernels in half eager's time is noise.
  rows[1].vs_eager_paired = 0.45;
  ComputeVsEager(&rows);
  EXPECT_EQ(rows[1].noise, "x eager 0.45 below the FLOP floor 1.00");

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
  EXPECT_TRUE(rows[1].noise.empty()) << rows[1].noise;
  rows[1].vs_eager_paired = 0.5;  // less than its kernels' share allows
  ComputeVsEager(&rows);
  EXPECT_EQ(rows[1].noise, "x eager 0.50 below the FLOP floor 0.67");

  // Where kernels are under half of either's time (the chains: eager 99%
  // overhead), no floor: a kernel of tens of ns is no FLOP rate.
  rows[0].overhead_fraction = 0.99;
  rows[1].overhead_fraction = 0.9;
  rows[1].vs_eager_paired = 0.1;
  ComputeVsEager(&rows);
  EXPECT_FALSE(rows[1].flop_floor);
  EXPECT_TRUE(rows[1].noise.empty()) << rows[1].noise;
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
                                 FakeBound(100.0, 0.01)};
  rows[0].spread = 0.01;
  ComputeVsEager(&rows);
  EXPECT_DOUBLE_EQ(*rows[0].of_matmul_bound, 1.25);
  EXPECT_EQ(rows[0].noise, "125.0 GFLOP/s above the matmul bound's 100.0");
  EXPECT_TRUE(rows[1].noise.empty()) << rows[1].noise;  // at the bound: fine
  const std::string summary = FormatSummary(rows, "test platform");
  EXPECT_NE(summary.find("125% of the bound (noise)"), std::string::npos) << summary;

  // A bound taken while a neighbour ran is no ceiling.
  rows[2].quiet = false;
  rows[2].samples = 100;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[0].noise.empty()) << rows[0].noise;
  EXPECT_DOUBLE_EQ(*rows[0].of_matmul_bound, 1.25);
  EXPECT_NE(FormatSummary(rows, "p").find("(noise: 0 of 100 samples quiet; no row is checked"),
            std::string::npos);
  rows[2].quiet = true;

  // Within 3% plus both spreads of the bound: not flagged.
  rows[0] = Fake("layer_loss", "eager", "as-written", 1.0 / 0.104);  // 104 GFLOP/s
  rows[0].spread = 0.005;
  ComputeVsEager(&rows);
  EXPECT_TRUE(rows[0].noise.empty()) << rows[0].noise;
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
  EXPECT_EQ(rows[1].noise, "too few quiet samples (0 of 2): a neighbour kept a CPU busy");
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
  EXPECT_EQ(rows[1].noise, "its windows disagree: x eager 1.300, 1.360 (4.6% apart)");
  EXPECT_EQ(rows[2].noise, "");
  const StabilityCount count = CountStability(rows, 0.01);
  EXPECT_EQ(count.noise, 1);
  EXPECT_EQ(count.windows_disagree, 1);
  const std::string summary = FormatSummary(rows, "p");
  EXPECT_NE(summary.find("1 flagged as noise (1 whose windows disagree by more than 3%)"),
            std::string::npos)
      << summary;
  const nlohmann::json run = ResultsJson("cmd", nlohmann::json::object(), "date", rows);
  EXPECT_EQ(run["rows"][1]["window_values"], (nlohmann::json{1.30, 1.36}));
  EXPECT_FALSE(run["rows"][0].contains("window_values"));
}

TEST(BenchPlausibility, NoiseRowsPrintNoiseAndTheSummarySaysHowStableTheRunWas) {
  std::vector<RowResult> rows = {FakeBound(1000.0),
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
  EXPECT_NE(summary.find("stability: 3 of 4 rows within 1% (largest spread 2.3%, "
                         "scan_stack/d=512,N=256 recompute/schedule:sqrt), 1 flagged as "
                         "noise; rerun them with --benchmark_filter='"
                         "BM_ValueAndGrad/scan_stack/d=512,N=256/recompute/as-written|"
                         "MatMulBound'"),
            std::string::npos)
      << summary;

  const nlohmann::json run = ResultsJson("cmd", nlohmann::json::object(), "date", rows);
  EXPECT_EQ(run["rows"][2]["noise"], "x eager 1.21 below the FLOP floor 1.33");
  EXPECT_NEAR(run["rows"][2]["flop_floor"].get<double>(), 4.0 / 3, 1e-9);
  EXPECT_EQ(run["rows"][3]["spread"], 0.023);
  EXPECT_FALSE(run["rows"][3].contains("noise"));
  EXPECT_EQ(run["rows"][4]["matmul_impls"],
            (nlohmann::json{"brg:avx512_core", "gemm:jit"}));
  EXPECT_TRUE(run["rows"][0]["spread"].is_number());
}

TEST(BenchPlan, BudgetSweepRunsTheCurveOnEveryProblemWithJaxsPoliciesAsPoints) {
  std::vector<std::string> rest;
  BenchFlags flags = ParseBenchFlags({"bench", "--sweep=budget"}, &rest);
  EXPECT_EQ(flags.sweep, Sweep::kBudget);
  const std::vector<PlannedRow> plan = PlanRows(flags, {"eager", "recompute"});
  std::map<std::string, std::set<std::string>> policies;  // problem -> recompute's policies
  std::set<std::string> transformer_cases;
  for (const PlannedRow& row : plan) {
    if (row.kind != RowKind::kValueAndGrad || row.engine != "recompute") continue;
    policies[row.problem].insert(row.policy);
    if (row.problem == "transformer_stack") transformer_cases.insert(row.case_key);
  }
  for (const auto& p : AllProblems()) {
    for (const char* b : {"memory_budget:0", "memory_budget:0.5", "memory_budget:1",
                          "nothing_saveable", "dots_saveable", "everything_saveable"}) {
      EXPECT_TRUE(policies[p->name()].count(b)) << p->name() << " " << b;
    }
  }
  EXPECT_TRUE(policies["scan_stack"].count("schedule:sqrt"));
  ASSERT_EQ(transformer_cases.size(), 1u);
  EXPECT_NE(transformer_cases.begin()->find("L=4"), std::string::npos);
  EXPECT_THROW(ParseBenchFlags({"bench", "--sweep=budget", "--policies=nothing_saveable"}, &rest),
               Error);
}

}  // namespace
}  // namespace remat::bench
