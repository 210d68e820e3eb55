// What a run keeps of Google Benchmark's reports (CollectingReporter) and
// a row's result from its samples and that report (MakeResult).
#ifndef REMAT_HARNESS_BENCH_COLLECT_H_
#define REMAT_HARNESS_BENCH_COLLECT_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/bench_lib.h"
#include "harness/bench_row.h"

namespace remat::bench {

// Hands every run on to the reporter --benchmark_format chose, and keeps
// what the JSON and the summary need.
class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  struct Collected {
    std::vector<double> times_ms;  // per repetition
    int64_t iterations = 0;
    std::optional<double> mean_ms;  // the "mean" aggregate, with repetitions
    int64_t max_bytes_used = -1;
    std::string error;
  };

  explicit CollectingReporter(benchmark::BenchmarkReporter* display) : display_(display) {}

  // The display reporter's context lines, less Google Benchmark's
  // "***WARNING*** Library was built as DEBUG. Timings may be affected."
  // (Debian's libbenchmark is built without NDEBUG), and a line that says
  // what times a run: the bench's own clock around its samples, whose
  // times it hands to the library (manual time), so the library's build
  // touches no reported time.
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) Collect(run);
    display_->ReportRuns(runs);
  }
  void Finalize() override { display_->Finalize(); }

  const std::map<std::string, Collected>& collected() const { return collected_; }

 private:
  static double ToMs(double value, benchmark::TimeUnit unit) {
    switch (unit) {
      case benchmark::kNanosecond:
        return value * 1e-6;
      case benchmark::kMicrosecond:
        return value * 1e-3;
      case benchmark::kMillisecond:
        return value;
      case benchmark::kSecond:
        return value * 1e3;
    }
    return value;
  }

  void Collect(const Run& run) {
    // The name as registered, without "/manual_time" or repetition suffixes.
    Collected& c = collected_[run.run_name.function_name];
    if (run.error_occurred) {
      c.error = run.error_message;
      return;
    }
    if (run.run_type == Run::RT_Aggregate) {
      if (run.aggregate_name == "mean") c.mean_ms = ToMs(run.GetAdjustedRealTime(), run.time_unit);
      return;
    }
    c.times_ms.push_back(ToMs(run.GetAdjustedRealTime(), run.time_unit));
    c.iterations += run.iterations;
    if (run.memory_result) c.max_bytes_used = run.memory_result->max_bytes_used;
  }

  benchmark::BenchmarkReporter* display_;
  std::map<std::string, Collected> collected_;
};

// `text` without its lines that hold Google Benchmark's DEBUG build warning.
std::string WithoutDebugBanner(const std::string& text);

// The line a run's context ends with: what times the rows.
inline constexpr char kTimingLine[] =
    "bench: rows are timed by the bench's own clock (std::chrono::steady_clock around each sample), "
    "handed to Google Benchmark as manual time; how the library was built does not change them";

// A row's RowResult: its samples' numbers (RowEstimate), its stats and what
// Google Benchmark collected of it.
RowResult MakeResult(const RowState& s, const CollectingReporter::Collected& c);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_COLLECT_H_
