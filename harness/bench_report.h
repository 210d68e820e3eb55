// What a bench run reports: the summary table it prints at the end
// (FormatSummary, with its stability line), the results JSON it writes
// (ResultsJson, WriteResults: the rows, the machine, the command that
// reproduces the run) and where.
//
//   nlohmann::json run = ResultsJson(CommandLine(args), MachineInfo(), UtcDate(now), results);
//   std::cout << FormatSummary(results, FormatPlatform(DescribePlatform()));
#ifndef REMAT_HARNESS_BENCH_REPORT_H_
#define REMAT_HARNESS_BENCH_REPORT_H_

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/bench_lib.h"

namespace remat::bench {

// The rows counted by the summary's stability line: value_and_grad rows that
// ran (no error), and of them those with a spread within `target`, those
// flagged as noise and those with too few quiet samples; and the run delay of
// all their samples, as a share of the time sampled (how much neighbours
// disturbed the run).
struct StabilityCount {
  int64_t rows = 0;
  int64_t within_target = 0;
  int64_t noise = 0;
  int64_t not_quiet = 0;
  int64_t windows_disagree = 0;  // flagged because their windows disagree
  int64_t imprecise = 0;         // flagged because their interval is too wide
  double run_delay = 0;
  // The CPUs' round trip (harness/cpu_link.h): samples (pairs) with a
  // reading, those of them taken with the CPUs apart, and the run's
  // reference round trip they were judged against.
  int64_t link_read = 0;
  int64_t link_apart = 0;
  double reference_link_ns = 0;
};
StabilityCount CountStability(const std::vector<RowResult>& rows, double target);

// The machine the run is on: hostname, cores (CPUs this process may run on,
// as `nproc` counts them), memory_bytes (MemTotal), omp_num_threads,
// omp_wait_policy and gomp_spincount (the environment's, or "unset"), and the
// fields of PlatformToJson(DescribePlatform()): cpu, cpus, onednn,
// onednn_isa, isa_cap, matmul_impl, omp_threads.
nlohmann::json MachineInfo();
// The source the run was built from (source_revision.h), read in
// WorkspaceDir(): {"commit": "<40 hex>", "modified": false} or {"error": "..."};
// the bench writes it as the results file's "source", and tools/report.py
// names it beside each run.
nlohmann::json SourceInfo();
// The command that reproduces the run: "tools/bazel run //harness:bench",
// then " -- " and the arguments (args[0] excluded), shell-quoted where needed.
std::string CommandLine(const std::vector<std::string>& args);
// "2024-05-01T12:34:56Z", and the compact form for file names "20240501T123456Z".
std::string UtcDate(std::time_t when);
std::string UtcStamp(std::time_t when);

// The results file: {"command", "machine", "date", "rows": [...]}; each row
// has name, problem, params, engine, policy, iterations (timed runs),
// samples, real_time_ms (the minimum), median_time_ms, mean_time_ms, spread
// (null when unknown), sampling_seconds, samples_ms ({"row": [...], "eager":
// [...], "row_delay": [...], "eager_delay": [...]}, eager's empty when
// unpaired), quiet, quiet_samples, peak_bytes, peak_bytes_by_category ({"inputs": ...,
// "activations": ...}), max_bytes_used, predicted_peak_bytes,
// residual_bytes, flops_forward, flops_recomputed, flops_backward, gflops,
// vs_eager (null when unknown), matmul_impls, and when known or set:
// vs_eager_paired, flop_floor, of_matmul_bound, overhead_fraction,
// overhead_ns_per_call, overhead_per_call_vs_eager, noise, big
// (when true) and error (when failed).
nlohmann::json ResultsJson(const std::string& command, const nlohmann::json& machine,
                           const std::string& date, const std::vector<RowResult>& rows);

// The table printed at the end of a run: the platform (`platform`, one line:
// FormatPlatform's), then one line per row (problem and size,
// engine/policy, time ms, x eager or "noise", spread, peak, activations at
// the peak, residual, recomputed FLOP, overhead), why each noise row is
// noise, the oneDNN bound and how close the baseline gets to it, and how
// stable the run was ("stability: 23 of 25 rows within 1%, 2 flagged as
// noise; rerun them: ...").
std::string FormatSummary(const std::vector<RowResult>& rows, const std::string& platform);

// The workspace the bench was started from: $BUILD_WORKSPACE_DIRECTORY (set
// by `bazel run`) when set and not empty, else "." (bazel-bin/harness/bench
// run from the checkout). The results directory, the source revision and
// the peers' script and .venv are all found from it.
std::string WorkspaceDir();
// Where results go: --out if given; else WorkspaceDir()/results/runs (ignored
// by git) under `bazel run`; else the current directory.
std::string ResultsDir(const std::string& out_flag);
// Writes `run` to DIR/bench-<stamp>.json and DIR/latest.json (each through a
// .tmp file renamed into place), creating DIR; returns the two paths. Throws
// remat::Error if a file cannot be written.
std::vector<std::string> WriteResults(const std::string& dir, const std::string& stamp,
                                      const nlohmann::json& run);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_REPORT_H_
