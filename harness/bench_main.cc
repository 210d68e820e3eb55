// //harness:bench: every problem on every engine (and policy), timed with
// Google Benchmark; a summary table at the end; JSON into results/runs/
// (ResultsDir).
//
//   tools/bazel run //harness:bench
//   tools/bazel run //harness:bench -- --sweep=depth
//   tools/bazel run //harness:bench -- --sweep=schedules
//   tools/bazel run //harness:bench -- --sweep=scale
//   tools/bazel run //harness:bench -- --sweep=models
//   tools/bazel run //harness:bench -- --engines=eager,recompute --benchmark_filter=scan_stack
//
// Flags: harness/bench_flags.h (BenchHelp); Google Benchmark's own flags pass
// through. The rows are planned in harness/bench_plan.h, sampled by the rules
// of harness/bench_sampling.h (harness/bench_row.h, bench_matmul_bound.h;
// later windows in processes of their own, bench_windows.h), judged in
// harness/bench_lib.h and harness/bench_controls.h, written and printed by
// harness/bench_report.h; this file runs them.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/onednn/omp_wait.h"
#include "engines/onednn/platform.h"
#include "harness/bench_collect.h"
#include "harness/bench_controls.h"
#include "harness/bench_flags.h"
#include "harness/bench_lib.h"
#include "harness/bench_matmul_bound.h"
#include "harness/bench_models.h"
#include "harness/bench_peers.h"
#include "harness/bench_plan.h"
#include "harness/bench_register.h"
#include "harness/bench_report.h"
#include "harness/bench_row.h"
#include "harness/bench_session.h"
#include "harness/bench_sweep.h"
#include "harness/bench_windows.h"
#include "harness/stats_json.h"

namespace remat::bench {
namespace {

int Main(int argc, char** argv) {
  // A short OpenMP spin on a shared machine (engines/onednn/omp_wait.h):
  // single rows ran 10-20 times slower at random under libgomp's default;
  // and the heap in huge pages, so that a case's ratios do not depend on
  // the cases run before it.
  UseMeasurementSettings(argv);
  // The run's wall time, from here (after any re-run for the settings) to
  // its results: what "a default run takes N minutes" is measured by.
  const auto process_start = std::chrono::steady_clock::now();
  const std::vector<std::string> args(argv, argv + argc);
  std::vector<std::string> rest;
  BenchFlags flags;
  std::vector<PlannedRow> plan;
  std::vector<ModelExport> models;
  BenchSession session;
  // --cases: the cases this process runs (a task writes one file each).
  std::vector<SweepCase> sweep_cases;
  nlohmann::json source;
  try {
    flags = ParseBenchFlags(args, &rest);
    if (flags.help) std::cout << BenchHelp() << "\nGoogle Benchmark's flags:\n";
    // The sweep's commands that run no row (harness/bench_sweep.h).
    if (!flags.help && !flags.write_cases.empty()) return WriteCasesCommand(flags, args, EngineNames(), std::cerr);
    if (!flags.help && !flags.merge_dir.empty()) return MergeCommand(flags, std::cerr);
    if (!flags.help && !flags.submit.empty()) return SubmitCommand(flags, args, std::cerr);
    // Read before the first row: the binary was built from the tree as it
    // is now, and an edit made while the run goes on is not its source.
    source = SourceInfo();
    // --sweep=models: the programs are exported (or found up to date) first;
    // a window's process finds them as the first left them.
    std::vector<std::pair<std::string, std::string>> programs;
    if (flags.sweep == Sweep::kModels && !flags.help) {
      models = ExportModels(flags, std::cerr);
      for (const ModelExport& m : models) programs.push_back({m.Label(), m.program()});
    }
    plan = flags.cases.empty() || flags.help
               ? PlanRows(flags, EngineNames(), programs)
               : PlanCaseListRows(flags, EngineNames(), source, MachineInfo(), std::cerr, &sweep_cases);
    if (flags.task >= 0 && plan.empty()) return 0;  // every case of its share current
    session.max_memory_bytes = flags.max_memory_bytes;
    session.paired = flags.paired;
    session.rule = DefaultSamplingRule();
    if (flags.max_row_seconds > 0) {
      session.rule.max_seconds = flags.max_row_seconds;
      session.rule.quiet_samples_at_cap = 0;  // the user's cap is a cap
    }
    session.sampling_budget = flags.sampling_budget_seconds;
    session.windows = flags.Windows();
    session.child = flags.only_window > 0;
    session.apart_wait_left = ApartWaitSeconds(session.sampling_budget) / session.windows;
  } catch (const std::exception& e) {
    std::cerr << "bench: " << e.what() << "\n";
    return 2;
  }

  // Google Benchmark takes the rest (and prints its help and exits on --help).
  std::vector<char*> bench_argv;
  for (std::string& a : rest) bench_argv.push_back(a.data());
  int bench_argc = static_cast<int>(bench_argv.size());
  bench_argv.push_back(nullptr);
  benchmark::Initialize(&bench_argc, bench_argv.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, bench_argv.data())) return 2;
  bool console = true;
  for (const std::string& a : rest) {
    if (a.rfind("--benchmark_format=", 0) == 0 && a != "--benchmark_format=console") {
      console = false;
    }
  }

  std::vector<std::unique_ptr<RowState>> states;
  const std::string filter = benchmark::GetBenchmarkFilter();
  for (const PlannedRow& row : plan) {
    auto s = std::make_unique<RowState>();
    s->row = row;
    s->session = &session;
    RowState* raw = s.get();
    benchmark::internal::Benchmark* b =
        row.kind == RowKind::kValueAndGrad
            ? benchmark::RegisterBenchmark(row.name.c_str(), RunValueAndGrad, raw)
            : benchmark::RegisterBenchmark(row.name.c_str(), RunMatMulBound, raw);
    // Matrix problems take milliseconds; the scalar sin chains, microseconds.
    const bool matrices = std::any_of(row.params.begin(), row.params.end(),
                                      [](const auto& p) { return p.first == "d"; });
    b->UseManualTime()->Unit(matrices ? benchmark::kMillisecond : benchmark::kMicrosecond);
    // One iteration, whatever --benchmark_min_time says: the row's whole
    // sampling (RunValueAndGrad), or a big row's one run (PlannedRow::big).
    b->Iterations(1);
    // The name Google Benchmark filters: it appends the settings.
    const std::string full_name = row.name + "/iterations:1/manual_time";
    raw->weight = RowWeight(session, row);
    if (FilterSelects(filter, full_name)) {
      session.progress.total += flags.Windows();
      session.window_weight += raw->weight;
    }
    states.push_back(std::move(s));
  }
  session.progress.enabled = flags.sweep != Sweep::kNone;

  const std::time_t started = std::time(nullptr);
  // The default display reporter is the library's (it honours
  // --benchmark_format); it is never freed, as the library's own is not.
  CollectingReporter reporter(benchmark::CreateDefaultDisplayReporter());
  if (session.child) {
    // Window K of N: the windows before it had their share of the budget.
    session.weight_left = session.window_weight;
    session.window = flags.only_window;
    session.sampled_seconds =
        session.sampling_budget * (session.window - 1) / session.windows;
    benchmark::RunSpecifiedBenchmarks(&reporter);
  }
  for (session.window = 1; !session.child && session.window <= session.windows; ++session.window) {
    session.weight_left = session.window_weight;
    if (session.windows > 1) {
      std::cerr << "bench: window " << session.window << " of " << session.windows
                << (session.window == 1 ? " (every row; then every row again, in a process of its own: "
                                    "see --windows)"
                                  : " (in a process of its own; each row's numbers pool its "
                                    "windows)")
                << std::endl;
    }
    if (session.window == 1) {
      // The memory pass (one untimed run a row) once: its peak repeats exactly.
      benchmark::RegisterMemoryManager(&session.memory);
      benchmark::RunSpecifiedBenchmarks(&reporter);
      benchmark::RegisterMemoryManager(nullptr);
    } else {
      try {
        session.sampled_seconds += SampleWindowInChild(args, session.window, states);
      } catch (const std::exception& e) {
        std::cerr << "bench: window " << session.window << " left out: " << e.what() << "\n";
      }
    }
  }
  benchmark::Shutdown();

  if (session.apart_waited > 0) {
    std::cerr << "bench: " << (session.child ? StrCat("window ", flags.only_window, " ") : "")
              << "waited " << std::lround(session.apart_waited)
              << " s for the CPUs to come together (harness/cpu_link.h; at most "
              << std::lround(ApartWaitSeconds(session.sampling_budget) / session.windows)
              << " s a window)\n";
  }
  std::vector<RowResult> results;
  for (const auto& s : states) {
    // Every sample is judged against the reference round trip of the whole
    // run, both windows', not the one when it was taken.
    s->timings.reference_link_ns = session.link.reference_ns();
    auto it = reporter.collected().find(s->row.name);
    if (it != reporter.collected().end()) results.push_back(MakeResult(*s, it->second));
  }
  if (results.empty() && flags.task >= 0 && !session.child) {
    std::cerr << "bench: task " << flags.task << ": nothing to run\n";
    return 0;
  }
  if (results.empty()) {
    std::cerr << "bench: no benchmark ran (see --benchmark_filter); no results written\n";
    return 0;
  }
  if (session.child) {
    // Only the samples, for the process that started this one.
    try {
      WriteResults(ResultsDir(flags.out_dir), UtcStamp(started),
                   ResultsJson(CommandLine(args), nlohmann::json::object(), UtcDate(started),
                               results));
    } catch (const std::exception& e) {
      std::cerr << "bench: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  ComputeVsEager(&results);
  const ControlReport controls = CheckControls(&results);
  (console ? std::cout : std::cerr)
      << FormatControls(controls) << FormatSummary(results, FormatPlatform(DescribePlatform()))
      << std::flush;

  if (flags.task >= 0) {
    // A sweep's task: one results file per case (harness/sweep_results.h).
    try {
      WriteTaskResults(flags, sweep_cases, results, CommandLine(args), MachineInfo(), source,
                       UtcDate(started), std::cerr);
    } catch (const std::exception& e) {
      std::cerr << "bench: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  try {
    nlohmann::json run = ResultsJson(CommandLine(args), MachineInfo(), UtcDate(started), results);
    run["controls"] = ControlsJson(controls);
    run["source"] = source;
    if (!flags.peers.empty() && flags.sweep == Sweep::kModels) {
      AddModelPeerRows(results, models, flags.peers, flags.max_row_seconds, &run,
                       console ? std::cout : std::cerr);
    }
    if (flags.sweep == Sweep::kModels) {
      AnnotateModelRows(models, &run);
    } else if (!flags.peers.empty()) {
      AddPeerRows(results, flags.peers, &run, console ? std::cout : std::cerr);
    }
    const double wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - process_start).count();
    double sampling_seconds = 0;  // every row's, stretches included
    for (const RowResult& r : results) sampling_seconds += r.sampling_seconds;
    run["wall_seconds"] = wall_seconds;
    run["sampling_seconds"] = sampling_seconds;
    const std::vector<std::string> written =
        WriteResults(ResultsDir(flags.out_dir), UtcStamp(started), run);
    std::cerr << "\nbench: the run took " << std::lround(wall_seconds) << " s ("
              << std::lround(sampling_seconds) << " s of it sampling rows); wrote "
              << Join(written, " and ") << "\n";
  } catch (const std::exception& e) {
    std::cerr << "bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace remat::bench

int main(int argc, char** argv) { return remat::bench::Main(argc, argv); }
