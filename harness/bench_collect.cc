#include "harness/bench_collect.h"

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "harness/cpu_link.h"

namespace remat::bench {

std::string WithoutDebugBanner(const std::string& text) {
  std::istringstream lines(text);
  std::string line, kept;
  while (std::getline(lines, line)) {
    if (line.find("Library was built as DEBUG") != std::string::npos) continue;
    kept += line + "\n";
  }
  return kept;
}

bool CollectingReporter::ReportContext(const Context& context) {
  // The library prints its context (and the warning) on the display
  // reporter's error stream: caught here, and passed on without the warning.
  std::ostream& err = display_->GetErrorStream();
  std::ostringstream caught;
  display_->SetErrorStream(&caught);
  bool ok = false;
  try {
    ok = display_->ReportContext(context);
  } catch (...) {
    display_->SetErrorStream(&err);
    throw;
  }
  display_->SetErrorStream(&err);
  // Two CPUs on one core halve every absolute time without a ratio
  // looking wrong: measured once, said with the context.
  err << WithoutDebugBanner(caught.str()) << kTimingLine << "\n"
      << DescribeCpuPairing(MeasureCpuPairing()) << std::endl;
  return ok;
}

RowResult MakeResult(const RowState& s, const CollectingReporter::Collected& c) {
  RowResult r;
  r.row = s.row;
  r.error = c.error;
  // The timed runs (a sample may average several), not Google Benchmark's
  // iterations (one per row and repetition).
  r.iterations = s.runs;
  if (!s.timings.row_ms.empty()) {
    SetSampledFields(s.timings, &r);
    if (s.timings.paired()) r.eager_flops = s.eager_flops;
  } else if (!c.times_ms.empty()) {
    r.timings = s.timings;
    r.real_time_ms = r.median_time_ms = r.mean_time_ms = c.times_ms.front();
  }
  r.matmul_impls = s.matmul_impls;
  if (s.stream_floor) {
    r.stream_floor_ms = 1e3 * s.stream_floor->seconds;
    r.stream_floor_bytes = s.stream_floor->bytes;
  }
  r.memory_cap_bytes = s.memory_cap_bytes;
  r.budget_bytes = s.budget_bytes;
  r.sampling_seconds = s.sampling_seconds;
  r.max_bytes_used = c.max_bytes_used;
  r.peak_bytes = s.stats.peak_bytes;
  r.peak_bytes_by_category = s.stats.peak_bytes_by_category;
  r.predicted_peak_bytes = s.stats.predicted_peak_bytes;
  r.residual_bytes = s.stats.residual_bytes;
  r.flops_forward = s.stats.flops_forward;
  r.flops_recomputed = s.stats.flops_recomputed;
  r.flops_backward = s.stats.flops_backward;
  if (r.real_time_ms > 0) r.gflops = static_cast<double>(r.total_flops()) / (r.real_time_ms * 1e6);
  r.overhead_fraction = s.timed.OverheadFraction();
  // From the row's time (the least quiet sample), as x eager is.
  r.overhead_ns_per_call = s.timed.OverheadNsPerCall(
      r.real_time_ms > 0 ? std::optional<double>(r.real_time_ms / 1e3) : std::nullopt);
  return r;
}

}  // namespace remat::bench
