#include "harness/bench_report.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/registry.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/platform.h"
#include "engines/schedule/schedule.h"
#include "harness/cpu_link.h"
#include "harness/source_revision.h"
#include "harness/stats_json.h"
#include "problems/program_file.h"

namespace remat::bench {
namespace {

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") + 1 - begin);
}

// The first line of /proc/<file> that starts with `key`, after its ':'.
std::string ProcField(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return Trim(line.substr(colon + 1));
    }
  }
  return "";
}

// "91 ns", "1.03 us", "12.4 ms": three significant digits (integers of ns).
std::string FormatNs(double ns) {
  char buf[32];
  if (ns < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof buf, "%#.3g us", ns / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%#.3g ms", ns / 1e6);
  }
  return buf;
}

// "0.00423", "1.23", "12.3", "123": three significant digits, no exponent.
std::string FormatMs(double ms) {
  char buf[32];
  if (ms >= 100) {
    std::snprintf(buf, sizeof buf, "%.0f", ms);
  } else if (ms >= 10) {
    std::snprintf(buf, sizeof buf, "%.1f", ms);
  } else if (ms >= 1) {
    std::snprintf(buf, sizeof buf, "%.2f", ms);
  } else {
    std::snprintf(buf, sizeof buf, "%#.3g", ms);  // keeps trailing zeros: "0.0740"
  }
  return buf;
}

// FLOP counts in SI units: "0", "209", "1.2 k", "6.71 G".
std::string FormatFlops(int64_t flops) {
  const char* units[] = {"", " k", " M", " G", " T"};
  double v = static_cast<double>(flops);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.3g%s", v, units[u]);
  return buf;
}

std::string ShellQuote(const std::string& arg) {
  const bool safe = !arg.empty() && arg.find_first_not_of(
                                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_@%+=:,./-") == std::string::npos;
  if (safe) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Variant(const PlannedRow& row) {
  if (row.kind == RowKind::kMatMulBound) return row.engine;
  if (row.control) return row.engine + " A/A control";
  if (IgnoresPolicies(row.engine) && row.variant.is_as_written()) return row.engine;
  return row.engine + "/" + row.variant.Label();
}

}  // namespace

StabilityCount CountStability(const std::vector<RowResult>& rows, double target) {
  StabilityCount count;
  double sampled_ms = 0, delayed_ms = 0;
  auto add = [&](const std::vector<double>& ms, const std::vector<double>& delay) {
    for (size_t i = 0; i < ms.size() && i < delay.size(); ++i) {
      sampled_ms += ms[i];
      delayed_ms += ms[i] * delay[i];
    }
  };
  for (const RowResult& r : rows) {
    if (r.row.kind != RowKind::kValueAndGrad || !r.error.empty()) continue;
    ++count.rows;
    if (r.spread && *r.spread <= target) ++count.within_target;
    if (r.noisy()) ++count.noise;
    if (!r.quiet) ++count.not_quiet;
    if (r.NoisyFor(NoiseKind::kWindowsDisagree)) ++count.windows_disagree;
    if (r.NoisyFor(NoiseKind::kImprecise)) ++count.imprecise;
    add(r.timings.row_ms, r.timings.row_delay);
    add(r.timings.eager_ms, r.timings.eager_delay);
    count.reference_link_ns = r.timings.reference_link_ns;
    for (double ns : r.timings.link_ns) {
      if (ns <= 0) continue;
      ++count.link_read;
      if (CpusApart(ns, r.timings.reference_link_ns)) ++count.link_apart;
    }
  }
  if (sampled_ms > 0) count.run_delay = delayed_ms / sampled_ms;
  return count;
}

nlohmann::json MachineInfo() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  cpu_set_t set;
  CPU_ZERO(&set);
  int64_t cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  const std::string mem_kib = ProcField("/proc/meminfo", "MemTotal");  // "23456789 kB"
  int64_t memory_bytes = 0;
  if (!mem_kib.empty()) memory_bytes = std::strtoll(mem_kib.c_str(), nullptr, 10) * 1024;
  const char* omp = std::getenv("OMP_NUM_THREADS");
  // Spinning OpenMP threads on a shared 2-core machine make timings erratic.
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  nlohmann::json machine = {
      {"hostname", host},
      {"cores", cores},
      {"memory_bytes", memory_bytes},
      {"omp_num_threads", omp ? omp : "unset"},
      {"omp_wait_policy", wait_policy ? wait_policy : "unset"},
      {"gomp_spincount", std::getenv("GOMP_SPINCOUNT") ? std::getenv("GOMP_SPINCOUNT") : "unset"},
      {"glibc_tunables", std::getenv("GLIBC_TUNABLES") ? std::getenv("GLIBC_TUNABLES") : "unset"}};
  // cpu (the model name) and onednn (the version) are the platform's, in the
  // form stats.json and `remat compare` read.
  machine.update(PlatformToJson(DescribePlatform()));
  return machine;
}

std::string WorkspaceDir() {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  return workspace && *workspace ? workspace : ".";
}

nlohmann::json SourceInfo() {
  const SourceRevision revision = ReadSourceRevision(WorkspaceDir());
  if (revision.commit.empty()) return {{"error", revision.error}};
  return {{"commit", revision.commit}, {"modified", revision.modified}};
}

std::string CommandLine(const std::vector<std::string>& args) {
  std::string out = "tools/bazel run //harness:bench";
  if (args.size() > 1) {
    out += " --";
    for (size_t i = 1; i < args.size(); ++i) out += " " + ShellQuote(args[i]);
  }
  return out;
}

namespace {

std::string FormatUtc(std::time_t when, const char* format) {
  std::tm tm{};
  gmtime_r(&when, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

}  // namespace

std::string UtcDate(std::time_t when) { return FormatUtc(when, "%Y-%m-%dT%H:%M:%SZ"); }

std::string UtcStamp(std::time_t when) { return FormatUtc(when, "%Y%m%dT%H%M%SZ"); }

nlohmann::json ResultsJson(const std::string& command, const nlohmann::json& machine,
                           const std::string& date, const std::vector<RowResult>& rows) {
  nlohmann::json out_rows = nlohmann::json::array();
  for (const RowResult& r : rows) {
    nlohmann::json params = nlohmann::json::object();
    for (const auto& [name, value] : r.row.params) params[name] = value;
    nlohmann::json by_category = nlohmann::json::object();
    for (int c = 0; c < kNumCategories; ++c) {
      by_category[CategoryName(static_cast<Category>(c))] = r.peak_bytes_by_category[c];
    }
    nlohmann::json row = {{"name", r.row.name},
                          {"problem", r.row.problem},
                          {"program_file", r.row.program_file.empty()
                                               ? nlohmann::json(nullptr)
                                               : nlohmann::json(r.row.program_file)},
                          {"params", params},
                          {"engine", r.row.engine},
                          {"policy", r.row.variant.Label()},
                          {"iterations", r.iterations},
                          {"samples", r.samples},
                          {"real_time_ms", r.real_time_ms},
                          {"median_time_ms", r.median_time_ms},
                          {"mean_time_ms", r.mean_time_ms},
                          {"spread", nullptr},
                          {"sampling_seconds", r.sampling_seconds},
                          {"samples_ms",
                           {{"row", r.timings.row_ms},
                            {"eager", r.timings.eager_ms},
                            {"row_delay", r.timings.row_delay},
                            {"eager_delay", r.timings.eager_delay},
                            {"link_ns", r.timings.link_ns},
                            {"reference_link_ns", r.timings.reference_link_ns}}},
                          {"quiet", r.quiet},
                          {"quiet_samples", r.quiet_samples},
                          {"peak_bytes", r.peak_bytes},
                          {"peak_bytes_by_category", by_category},
                          {"max_bytes_used", r.max_bytes_used},
                          {"predicted_peak_bytes", r.predicted_peak_bytes},
                          {"residual_bytes", r.residual_bytes},
                          {"flops_forward", r.flops_forward},
                          {"flops_recomputed", r.flops_recomputed},
                          {"flops_backward", r.flops_backward},
                          {"gflops", r.gflops},
                          {"vs_eager", nullptr},
                          {"matmul_impls", r.matmul_impls}};
    if (r.spread) row["spread"] = *r.spread;
    if (r.vs_eager) row["vs_eager"] = *r.vs_eager;
    if (r.vs_eager_paired) row["vs_eager_paired"] = *r.vs_eager_paired;
    if (r.pair_time_ms > 0) row["pair_time_ms"] = r.pair_time_ms;
    if (r.paired_eager_ms > 0) row["paired_eager_ms"] = r.paired_eager_ms;
    if (r.eager_flops > 0) row["eager_flops"] = r.eager_flops;
    if (r.flop_floor) row["flop_floor"] = *r.flop_floor;
    if (r.noisy()) {
      row["noise"] = r.NoiseText();
      for (const Noise& n : r.noise) row["noise_kinds"].push_back(NoiseKindName(n.kind));
    }
    if (!r.untrusted.empty()) row["untrusted"] = r.untrusted;
    if (r.row.control) row["control"] = true;
    if (r.row.kind == RowKind::kMatMulBound) row["matmul_bound"] = true;
    if (r.of_matmul_bound) row["of_matmul_bound"] = *r.of_matmul_bound;
    if (r.stream_floor_ms) {
      row["stream_floor_ms"] = *r.stream_floor_ms;
      row["stream_floor_bytes"] = r.stream_floor_bytes;
    }
    if (r.overhead_fraction) row["overhead_fraction"] = *r.overhead_fraction;
    if (r.overhead_ns_per_call) row["overhead_ns_per_call"] = *r.overhead_ns_per_call;
    if (r.overhead_per_call_vs_eager) {
      row["overhead_per_call_vs_eager"] = *r.overhead_per_call_vs_eager;
    }
    if (r.row.big) row["big"] = true;
    if (r.memory_cap_bytes > 0) row["memory_cap_bytes"] = r.memory_cap_bytes;
    if (r.budget_bytes > 0) row["budget_bytes"] = r.budget_bytes;
    if (!r.window_values.empty()) row["window_values"] = r.window_values;
    if (!r.window_spreads.empty()) row["window_spreads"] = r.window_spreads;
    if (!r.timings.window_starts.empty()) row["samples_ms"]["window_starts"] = r.timings.window_starts;
    if (!r.error.empty()) row["error"] = r.error;
    out_rows.push_back(row);
  }
  return {{"command", command}, {"machine", machine}, {"date", date}, {"rows", out_rows}};
}

std::string FormatSummary(const std::vector<RowResult>& rows, const std::string& platform) {
  using Line = std::vector<std::string>;
  std::vector<Line> lines = {
      {"problem / size", "engine / policy", "time ms", "eager ms", "x eager", "spread", "peak", "activations",
       "residual", "recomputed FLOP", "overhead", "per call"}};
  std::string last_case;
  std::vector<std::string> noise_lines;
  for (const RowResult& r : rows) {
    if (r.row.kind != RowKind::kValueAndGrad) continue;
    std::string label = r.row.case_key == last_case ? "" : r.row.case_key;
    last_case = r.row.case_key;
    std::replace(label.begin(), label.end(), '/', ' ');
    if (!r.error.empty()) {
      lines.push_back({label, Variant(r.row), "failed: " + r.error});
      continue;
    }
    char ratio[32] = "-";
    if (r.noisy()) {
      std::snprintf(ratio, sizeof ratio, "noise");
      noise_lines.push_back(StrCat("  ", r.row.case_key, " ", Variant(r.row), ": ", r.NoiseText()));
    } else if (!r.untrusted.empty()) {
      std::snprintf(ratio, sizeof ratio, "untrusted");
    } else if (r.vs_eager_paired) {
      std::snprintf(ratio, sizeof ratio, "%.2f", *r.vs_eager_paired);
    } else if (r.vs_eager) {
      // Eager's own row is 1 by definition; another unpaired ratio is marked.
      std::snprintf(ratio, sizeof ratio, IsBaselineRow(r.row) ? "%.2f" : "%.2f u",
                    *r.vs_eager);
    }
    char spread[32] = "-";
    if (r.spread) std::snprintf(spread, sizeof spread, "%.1f%%", 100 * *r.spread);
    char overhead[32] = "-";
    if (r.overhead_fraction) std::snprintf(overhead, sizeof overhead, "%.1f%%", 100 * *r.overhead_fraction);
    std::string per_call = "-";
    if (r.overhead_ns_per_call) {
      per_call = FormatNs(*r.overhead_ns_per_call);
      if (r.overhead_per_call_vs_eager && !IsBaselineRow(r.row)) {
        char vs[32];
        std::snprintf(vs, sizeof vs, " (%.3f)", *r.overhead_per_call_vs_eager);
        per_call += vs;
      }
    }
    // Paired: the median pair's two times, whose ratio is x eager; eager's
    // own row and unpaired rows: the least time, eager's own beside it.
    const bool pair = r.pair_time_ms > 0 && r.paired_eager_ms > 0;
    const std::string time_ms = FormatMs(pair ? r.pair_time_ms : r.real_time_ms);
    const std::string eager_ms = pair                  ? FormatMs(r.paired_eager_ms)
                                 : IsBaselineRow(r.row) ? FormatMs(r.real_time_ms)
                                                        : "-";
    lines.push_back({label, Variant(r.row), time_ms, eager_ms, ratio, spread,
                     FormatBytes(r.peak_bytes),
                     FormatBytes(r.peak_bytes_by_category[static_cast<int>(Category::kActivations)]),
                     FormatBytes(r.residual_bytes),
                     FormatFlops(r.flops_recomputed), overhead, per_call});
  }
  // Column widths from the content; text columns left-aligned, numbers right.
  std::vector<size_t> width(lines[0].size(), 0);
  for (const Line& line : lines) {
    // A failed row's message spans the number columns: it sets no width there.
    const size_t columns = line.size() == width.size() ? line.size() : 2;
    for (size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], line[c].size());
  }
  const SamplingRule rule = DefaultSamplingRule();
  char target[16];
  std::snprintf(target, sizeof target, "%g%%", 100 * rule.target_spread);
  std::ostringstream out;
  out << "\nPlatform: " << platform << "\n";
  std::set<std::string> impls;
  for (const RowResult& r : rows) impls.insert(r.matmul_impls.begin(), r.matmul_impls.end());
  if (!impls.empty()) {
    out << "oneDNN matmuls ran on: "
        << Join(std::vector<std::string>(impls.begin(), impls.end()), ", ") << "\n";
  }
  out << "\nSummary: x eager = the median over the row's quiet pairs (quiet: no neighbour took "
         "a CPU from\neither run) of the row's time / the eager run's next to it ('u': unpaired, "
         "/ eager's row); time and\neager ms = that median pair's two times, so time / eager ms "
         "= x eager (the machine's speed drifts:\neager's own row was timed at other moments); "
         "eager's own row and unpaired rows: the least quiet\ntime (interference only adds "
         "time); spread = half x eager's 95% interval (eager: how much its least\ntime moved "
         "over the second half of its samples); noise = physically implausible (too few quiet\n"
         "samples, below the FLOP model's floor, above the matmul bound): not a result;\n"
         "peak = the MemoryTracker's high-water mark, activations = the "
         "activations live at that moment\n(the rest: arguments, gradients, scratchpad); "
         "residual = saved for the backward pass (arguments excluded);\n"
         "overhead = the share of the engine's wall time outside kernels' arithmetic (in runs "
         "that time\nkernels); per call = the samples' time outside kernels per kernel call "
         "(in parentheses:\n/ eager's on the same case).\n\n";
  for (const Line& line : lines) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      std::string cell = line[c];
      if (c < 2) {
        if (c + 1 < line.size()) cell.resize(std::max(width[c], cell.size()), ' ');
      } else if (line.size() == width.size()) {
        cell = std::string(width[c] - cell.size(), ' ') + cell;
      }
      text += (c == 0 ? "" : "  ") + cell;
    }
    out << text << "\n";
  }
  if (!noise_lines.empty()) {
    out << "\nNoise (rows whose numbers cannot be the row's cost):\n";
    for (const std::string& line : noise_lines) out << line << "\n";
  }
  // The ceiling: how close the baseline gets to oneDNN's bare matmuls.
  for (const RowResult& bound : rows) {
    if (bound.row.kind != RowKind::kMatMulBound) continue;
    if (!bound.error.empty()) {
      out << "\noneDNN matmul bound (" << bound.row.case_key << "): failed: " << bound.error
          << "\n";
      continue;
    }
    char gflops[256];
    if (bound.quiet && bound.NoisyFor(NoiseKind::kImprecise)) {
      std::snprintf(gflops, sizeof gflops, "%.1f GFLOP/s (noise: %s; no row is checked against it)",
                    bound.gflops, bound.NoiseText().c_str());
    } else if (bound.quiet) {
      std::snprintf(gflops, sizeof gflops, "%.1f GFLOP/s (spread %.1f%%)", bound.gflops,
                    100 * bound.spread.value_or(0));
    } else {
      std::snprintf(gflops, sizeof gflops,
                    "%.1f GFLOP/s (noise: %lld of %lld samples quiet; no row is checked "
                    "against it)",
                    bound.gflops, static_cast<long long>(bound.quiet_samples),
                    static_cast<long long>(bound.samples));
    }
    out << "\noneDNN matmuls alone, " << bound.row.case_key
        << " (eager's matmuls and convolutions on the case, bare): " << FormatMs(bound.real_time_ms) << " ms, "
        << gflops << "\n";
    for (const RowResult& r : rows) {
      if (!IsBaselineRow(r.row) || !r.of_matmul_bound) continue;
      if (r.row.case_key != bound.row.case_key) continue;
      char pct[96];
      // Its matmuls alone, bare, take this share of eager's time: on the
      // matrix problems, how close eager gets to them; where matmuls are a
      // sliver of the work (resnet's classifier), how small that sliver is.
      // Paired, the times are the median pair's (bound.pair_time_ms beside
      // eager's), whose ratio the share is; unpaired, eager's least time.
      const bool paired = bound.vs_eager_paired && bound.paired_eager_ms > 0;
      std::snprintf(pct, sizeof pct, "%s ms: its matmuls alone take %.0f%% of that",
                    FormatMs(paired ? bound.paired_eager_ms : r.real_time_ms).c_str(),
                    100 * *r.of_matmul_bound);
      out << "  " << kBaselineEngine << " " << pct;
      if (paired) {
        out << " (" << FormatMs(bound.pair_time_ms)
            << " ms beside it: the median of the pairs of the bound's runs and eager's)";
      }
      out << (!r.noisy() ? "" : " (noise)") << "\n";
    }
    if (bound.stream_floor_ms && *bound.stream_floor_ms > 0) {
      // The bound and eager's other kernels at the stream rate: no engine
      // that runs those kernels as passes of their own is faster, so its
      // matmuls are at most this share of its time (bound_ms as above).
      const double bound_ms = bound.vs_eager_paired && bound.pair_time_ms > 0
                                  ? bound.pair_time_ms
                                  : bound.real_time_ms;
      char line[224];
      std::snprintf(line, sizeof line,
                    "  its other kernels move %s a run, at least %s ms at this machine's "
                    "stream rate: run as passes of their own, the matmuls alone take at most "
                    "%.0f%% of a run\n",
                    FormatBytes(bound.stream_floor_bytes).c_str(),
                    FormatMs(*bound.stream_floor_ms).c_str(),
                    100 * bound_ms / (bound_ms + *bound.stream_floor_ms));
      out << line;
    }
  }
  // How far the run can be trusted.
  const StabilityCount count = CountStability(rows, rule.target_spread);
  const RowResult* worst = nullptr;
  std::vector<std::string> rerun;
  for (const RowResult& r : rows) {
    if (r.row.kind != RowKind::kValueAndGrad || !r.error.empty()) continue;
    if (r.spread && (!worst || *r.spread > *worst->spread)) worst = &r;
    if (r.noisy()) rerun.push_back(r.row.name);
  }
  out << "\nstability: " << count.within_target << " of " << count.rows << " rows within "
      << target;
  if (worst) {
    char largest[32];
    std::snprintf(largest, sizeof largest, "%.1f%%", 100 * *worst->spread);
    out << " (largest spread " << largest << ", " << worst->row.case_key << " "
        << Variant(worst->row) << ")";
  }
  out << ", " << count.noise << " flagged as noise";
  if (count.not_quiet > 0 || count.windows_disagree > 0 || count.imprecise > 0) {
    std::vector<std::string> why;
    if (count.not_quiet > 0) why.push_back(StrCat(count.not_quiet, " with too few quiet samples"));
    if (count.windows_disagree > 0) {
      why.push_back(StrCat(count.windows_disagree, " whose windows disagree by more than ",
                           static_cast<int>(std::lround(100 * kWindowAllowance)),
                           "% and their intervals"));
    }
    if (count.imprecise > 0) {
      why.push_back(StrCat(count.imprecise, " known only within more than +-",
                           static_cast<int>(std::lround(100 * kWindowAllowance)), "%"));
    }
    out << " (" << Join(why, ", ") << ")";
  }
  if (!rerun.empty()) {
    out << "; rerun them with --benchmark_filter='" << Join(rerun, "|") << "|MatMulBound'";
  }
  char delay[200];
  std::snprintf(delay, sizeof delay,
                "\ninterference: the process's threads waited for a CPU %.1f%% of the time "
                "sampled (a sample is quiet below %g%%)\n",
                100 * count.run_delay, 100 * kQuietRunDelay);
  out << delay;
  if (count.link_read > 0) {
    char link[400];
    std::snprintf(link, sizeof link,
                  "CPUs apart: a cache line's round trip between the CPUs was %.0f ns or less "
                  "in %.0f%% of the run's readings; %lld of %lld samples were taken with it "
                  "above %.0f ns (the CPUs apart, as a hypervisor places them: not quiet)\n",
                  count.reference_link_ns, 100 * kReferenceQuantile,
                  static_cast<long long>(count.link_apart),
                  static_cast<long long>(count.link_read),
                  kCpusApartFactor * count.reference_link_ns);
    out << link;
  }
  return out.str();
}

std::string ResultsDir(const std::string& out_flag) {
  if (!out_flag.empty()) return out_flag;
  // A run by hand from bazel-bin writes where it was started. Under `bazel
  // run` a run goes to results/runs/, which git ignores: results/ itself
  // holds only the runs REPORT.md cites, and a run enters it only when
  // promoted (tools/promote_run.py), so running the bench never dirties the
  // tree nor fails //tools:report_committed_test.
  const std::string workspace = WorkspaceDir();
  if (workspace == ".") return ".";
  return (std::filesystem::path(workspace) / "results" / "runs").string();
}

std::vector<std::string> WriteResults(const std::string& dir, const std::string& stamp,
                                      const nlohmann::json& run) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(StrCat("cannot create ", dir, ": ", ec.message()));
  const std::string text = run.dump(2) + "\n";
  std::vector<std::string> written;
  for (const std::string& file : {"bench-" + stamp + ".json", std::string("latest.json")}) {
    const std::filesystem::path path = std::filesystem::path(dir) / file;
    // Written whole, then renamed: a reader never sees half a file.
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp);
      out << text;
      if (!out.flush()) throw Error(StrCat("cannot write ", tmp.string()));
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw Error(StrCat("cannot rename ", tmp.string(), " to ", path.string(), ": ",
                               ec.message()));
    written.push_back(path.string());
  }
  return written;
}

}  // namespace remat::bench
