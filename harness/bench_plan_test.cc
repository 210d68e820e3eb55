// Tests of case expansion (harness/bench_plan.h): the default plan covers
// every problem and engine and fits its time budget, each sweep has the rows
// it says, each variant goes to the engines and problems it applies to, and
// the rows come grouped by case, led by eager's, with their controls. Plans
// only: nothing here times anything.

#include "harness/bench_plan.h"
#include "harness/bench_sampling.h"

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
      policies[row.case_key + " " + row.engine].push_back(row.variant.Label());
    }
  }
  const std::string key = "scan_stack/L=8,d=512,N=256";
  EXPECT_EQ(policies[key + " eager"], std::vector<std::string>{CaseVariant::kAsWrittenLabel});
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
    EXPECT_FALSE(CaseVariant::Parse(p).is_schedule()) << p;
  }
}

TEST(BenchPlan, BaselineRunsFirstInEachCaseAndNamesReadLikeTheFlags) {
  const std::vector<PlannedRow> plan = DefaultPlan({"zeta", "eager", "alpha"});
  ASSERT_FALSE(plan.empty());
  // Each case with a matmul: its bound first, then eager.
  EXPECT_EQ(plan[0].name, "BM_OneDnnMatMulBound/layer_loss/d=512,N=256");
  EXPECT_EQ(plan[0].kind, RowKind::kMatMulBound);
  EXPECT_EQ(plan[0].case_key, plan[1].case_key);
  EXPECT_EQ(plan[1].name, "BM_ValueAndGrad/layer_loss/d=512,N=256/eager/as-written");
  int bounds = 0;
  for (const PlannedRow& row : plan) {
    if (row.kind != RowKind::kMatMulBound) continue;
    ++bounds;
    // No bound on a case without a matmul.
    EXPECT_NE(row.problem, "sin_plain") << row.name;
    EXPECT_NE(row.problem, "sin_recursive") << row.name;
  }
  EXPECT_GE(bounds, 5);
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
  ASSERT_EQ(rows.size(), 2u * 8u);  // L = 8 ... 1024: its bound, then eager
  EXPECT_EQ(rows[0].name, "BM_OneDnnMatMulBound/scan_stack/L=8,d=512,N=256");
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

// The default expansion has an A/A control for every case; --problems and
// --engines keep only the rows they name; a problem name that does not
// exist is an error that names it.
TEST(BenchPlan, DefaultHasControlsFiltersKeepWhatTheyNameAndBadNamesAreNamed) {
  const std::vector<PlannedRow> plan = DefaultPlan(EngineNames());
  std::set<std::string> cases, controlled;
  for (const PlannedRow& row : plan) {
    if (row.kind != RowKind::kValueAndGrad) continue;
    cases.insert(row.case_key);
    if (row.control) {
      EXPECT_EQ(row.engine, kBaselineEngine) << row.name;
      controlled.insert(row.case_key);
    }
  }
  EXPECT_FALSE(cases.empty());
  EXPECT_EQ(controlled, cases);

  std::vector<std::string> rest;
  const std::vector<PlannedRow> filtered = PlanRows(
      ParseBenchFlags({"bench", "--problems=layer_loss", "--engines=eager,recompute"}, &rest),
      EngineNames());
  ASSERT_FALSE(filtered.empty());
  std::set<std::string> engines;
  for (const PlannedRow& row : filtered) {
    EXPECT_EQ(row.problem, "layer_loss") << row.name;
    if (row.kind == RowKind::kValueAndGrad) engines.insert(row.engine);
  }
  EXPECT_EQ(engines, (std::set<std::string>{"eager", "recompute"}));

  try {
    PlanRows(ParseBenchFlags({"bench", "--problems=no_such_problem"}, &rest), EngineNames());
    ADD_FAILURE() << "--problems=no_such_problem was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_problem"), std::string::npos) << e.what();
  }
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
    EXPECT_FALSE(row.program_file.empty()) << row.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "BM_OneDnnMatMulBound/mlp_chain@chain.remat",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/eager/as-written",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/eager/as-written/control",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/recompute/as-written",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/recompute/dots_saveable",
                       "BM_ValueAndGrad/mlp_chain@chain.remat/recompute/schedule:sqrt",
                       "BM_OneDnnMatMulBound/layer_loss@layer.remat",
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
  ASSERT_EQ(both.size(), 4u);  // each case: its bound (both have matmuls), eager
  EXPECT_EQ(both[0].kind, RowKind::kMatMulBound);
  EXPECT_EQ(both[1].problem, "sin_chain");
  EXPECT_EQ(both[2].kind, RowKind::kMatMulBound);
  EXPECT_EQ(both[3].case_key, "layer_loss@layer.remat");
  EXPECT_THROW(PlanRows(ParseBenchFlags({"bench", "--program=" + layer_file, "--sweep=depth"},
                                        &rest),
                        {"eager"}),
               Error);
  // A bad file is an error naming it, before any row runs.
  std::ofstream(dir + "/bad.remat") << "program p(x: f32[2]) {\n  %y = erfinv(%x)\n}\n";
  try {
    PlanRows(ParseBenchFlags({"bench", "--program=" + dir + "/bad.remat"}, &rest), {"eager"});
    FAIL() << "a bad program file must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.remat:2:8: unknown op 'erfinv'"), std::string::npos)
        << e.what();
  }
}

// --sweep=models: each exported model is a case named by its label, its
// inputs read from the export's directory; eager (and its control), recompute
// as written and at the least peak, and the matmul bound; the peers are all
// four unless named, --peer's names are the models' peers; the rows are
// sampled for kModelRowSeconds with no budget; the sweep's flags go with it.
TEST(BenchPlan, ModelsSweepRunsEachExportBesideItsPeers) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / "bench_models").string();
  std::filesystem::create_directories(dir + "/gpt");
  const Problem& gpt = FindProblem("gpt");
  const std::string file = dir + "/gpt/program.txt";
  std::ofstream(file) << PrintProgram(gpt.Build(ResolveParams(gpt, {}, true)));
  std::vector<std::string> rest;
  const BenchFlags flags = ParseBenchFlags({"bench", "--sweep=models", "--models=gpt2"}, &rest);
  EXPECT_EQ(flags.peers, (std::vector<std::string>{"jax", "torch", "torch-checkpoint", "torch-compile"}));
  EXPECT_EQ(flags.models, (std::vector<SweepModel>{{"gpt2", false}}));
  EXPECT_EQ(ParseBenchFlags({"bench", "--sweep=models", "--models=gpt2@fit,nanogpt"}, &rest).models,
            (std::vector<SweepModel>{{"gpt2", true}, {"nanogpt", false}}));
  EXPECT_EQ(flags.max_row_seconds, kModelRowSeconds);
  EXPECT_EQ(flags.sampling_budget_seconds, 0);
  EXPECT_EQ(flags.Windows(), 1);
  const std::vector<PlannedRow> rows =
      PlanRows(flags, {"eager", "planned", "recompute"}, {{"gpt2@1x1024", file}});
  std::vector<std::string> names;
  for (const PlannedRow& row : rows) {
    names.push_back(row.name);
    EXPECT_EQ(row.inputs_dir, dir + "/gpt") << row.name;
    EXPECT_EQ(row.program_file, file) << row.name;
    EXPECT_EQ(row.case_key, "gpt2@1x1024") << row.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "BM_OneDnnMatMulBound/gpt2@1x1024",
                       "BM_ValueAndGrad/gpt2@1x1024/eager/as-written",
                       "BM_ValueAndGrad/gpt2@1x1024/eager/as-written/control",
                       "BM_ValueAndGrad/gpt2@1x1024/recompute/as-written",
                       "BM_ValueAndGrad/gpt2@1x1024/recompute/memory_budget:peak:min",
                   }));
  // --peer=LIST, --max-row-seconds and --sampling-budget are the user's.
  const BenchFlags named = ParseBenchFlags({"bench", "--peer=torch-checkpoint", "--sweep=models",
                                            "--max-row-seconds=5", "--sampling-budget=60"},
                                           &rest);
  EXPECT_EQ(named.peers, (std::vector<std::string>{"torch-checkpoint"}));
  EXPECT_EQ(named.max_row_seconds, 5);
  EXPECT_EQ(named.sampling_budget_seconds, 60);
  EXPECT_TRUE(named.models.empty());  // kDefaultSweepModels
  for (const char* m : kDefaultSweepModels) EXPECT_EQ(SweepModel::Parse(m).Text(), m);
  EXPECT_EQ(ParseBenchFlags({"bench", "--peer", "--sweep=models"}, &rest).peers.size(), 4u);
  // Errors name the flag and what there is.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"bench", "--peer=torch-checkpoint"}, "unknown engine 'torch-checkpoint'; peers: jax, torch"},
      {{"bench", "--sweep=models", "--peer=pytorch"},
       "peers of --sweep=models: jax, torch, torch-checkpoint, torch-compile"},
      {{"bench", "--sweep=models", "--models=vgg"},
       "--models: unknown model 'vgg'; models: nanogpt, gpt2, llama-100m, resnet50"},
      {{"bench", "--sweep=models", "--models=vgg@fit"}, "--models: unknown model 'vgg'"},
      {{"bench", "--sweep=models", "--models=gpt2@8"},
       "--models: 'gpt2@8': NAME or NAME@fit (the largest batch that fits --max-memory)"},
      {{"bench", "--models=gpt2"}, "--models is a flag of --sweep=models"},
      {{"bench", "--models-dir=/tmp"}, "--models-dir is a flag of --sweep=models"},
      {{"bench", "--sweep=models", "--policies=dots_saveable"}, "--sweep=models do not combine"},
  };
  for (const auto& [args, message] : bad) {
    try {
      ParseBenchFlags(args, &rest);
      ADD_FAILURE() << args.back() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
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
      if (r.engine == engine && !r.control && (!as_written_only || r.variant.Label() == CaseVariant::kAsWrittenLabel)) ++n;
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
      out.push_back(row.variant.Label());
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
  EXPECT_EQ(plan[0].name, "BM_OneDnnMatMulBound/scan_stack/L=16,d=512,N=256");
  // The frontier: eager, JAX's checkpointed body (as written and saving the
  // matmuls), every schedule form, budgets from near the least feasible to
  // near store-all.
  EXPECT_EQ(PoliciesAt(plan, "eager", "L=256,d=512,N=256"), std::vector<std::string>{CaseVariant::kAsWrittenLabel});
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
    if (!CaseVariant::Parse(p).is_schedule()) continue;
    const std::string spec = CaseVariant::Parse(p).spec();  // "revolve:4"
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
    EXPECT_EQ(PoliciesAt(plan, "eager", params), std::vector<std::string>{CaseVariant::kAsWrittenLabel}) << params;
    EXPECT_EQ(PoliciesAt(plan, "recompute", params), depth) << params;
  }
  // Per case its bound, eager and its A/A control (harness/bench_controls.h).
  EXPECT_EQ(plan.size(), 4u * 3 + 3u * depth.size() + frontier.size());
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
                       c + "eager/as-written",
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
  const CaseVariant variant = CaseVariant::Parse(policy);
  if (variant.is_schedule()) program = variant.Apply(program);
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
      if (row.variant.Label().rfind("schedule:budget:", 0) != 0) continue;
      chain_rows += row.problem == "mlp_chain";
      Stats budget;
      ASSERT_NO_THROW(budget = PlanRow(row.problem, row.params, row.engine, row.variant.Label(), row.name));
      const bool depth_series = sweep == "schedules" && row.variant.Label() == "schedule:budget:16MiB";
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
  EXPECT_EQ(rule.target_spread, 0.015);
  EXPECT_GE(rule.min_samples, 4);
  std::map<std::string, int64_t> eager_flops;  // by case
  double total_flops = 0;
  for (const PlannedRow& row : PlanRows(flags, {"eager", "recompute"})) {
    if (row.kind != RowKind::kValueAndGrad) continue;
    const Stats s = PlanRow(row.problem, row.params, row.engine, row.variant.Label(), row.name);
    const int64_t flops = s.flops_forward + s.flops_recomputed + s.flops_backward;
    if (row.engine == kBaselineEngine) eager_flops[row.case_key] = flops;
    // Eager first in each case: its FLOPs are known for the rows after it.
    ASSERT_TRUE(eager_flops.count(row.case_key)) << row.name;
    const int64_t paired = row.engine == kBaselineEngine ? 0 : eager_flops[row.case_key];
    // Each window takes its fewest pairs afresh.
    total_flops += static_cast<double>(flags.Windows() * rule.min_samples * (flops + paired));
  }
  // At the ~150 GFLOP/s the matrix rows run at here: about 80 s of the 360 s
  // sampling budget, the rest for the pairs that place each row within 2%.
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
    const Stats s = PlanRow(row.problem, row.params, row.engine, row.variant.Label(), row.name);
    if (row.engine == kBaselineEngine) {
      EXPECT_GT(s.predicted_peak_bytes, 32 * kGiB) << row.name;
    } else {
      EXPECT_LT(s.predicted_peak_bytes, 17 * kGiB) << row.name;
      EXPECT_GT(s.predicted_peak_bytes, 16 * kGiB) << row.name;
      EXPECT_LT(Activations(s), kGiB) << row.name;
    }
  }
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
    ++by_variant[row.engine + "/" + row.variant.Label().substr(0, row.variant.Label().find(':'))];
    if (row.engine == "dtr") {
      EXPECT_TRUE(row.variant.is_cap()) << row.name;
    }
    if (row.engine == "recompute") {
      EXPECT_TRUE(row.variant.is_budget_under_cap()) << row.name;
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
    if (row.kind == RowKind::kValueAndGrad) variants.insert(row.engine + "/" + row.variant.Label());
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

TEST(BenchPlan, BudgetSweepRunsTheCurveOnEveryProblemWithJaxsPoliciesAsPoints) {
  std::vector<std::string> rest;
  BenchFlags flags = ParseBenchFlags({"bench", "--sweep=budget"}, &rest);
  EXPECT_EQ(flags.sweep, Sweep::kBudget);
  const std::vector<PlannedRow> plan = PlanRows(flags, {"eager", "recompute"});
  std::map<std::string, std::set<std::string>> policies;  // problem -> recompute's policies
  std::set<std::string> transformer_cases;
  for (const PlannedRow& row : plan) {
    if (row.kind != RowKind::kValueAndGrad || row.engine != "recompute") continue;
    policies[row.problem].insert(row.variant.Label());
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
