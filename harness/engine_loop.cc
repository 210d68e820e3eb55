// engine_loop: one problem on one engine, run back to back: an engine's time
// outside its kernels, per run and per kernel call, without the bench's
// sampling, and a process to profile (perf record -g
// bazel-bin/harness/engine_loop ...).
//
//   tools/bazel run //harness:engine_loop -- --problem=sin_plain
//       --engine=planned --param=D=1024 --runs=2000
//
// Prints the least wall time of --runs runs made without kernel timing
// (RunOptions::time_kernels off), the mean kernel time and calls of as many
// probed runs after them, and the time outside kernels of the probed run
// with the least kernel time (its wall less its kernels: what the bench's
// "per call" is, from one run). Then each kernel's
// mean time and calls a run over the probed runs, the largest first: where
// the kernels' time goes.
//
// Then, for engines on oneDNN's kernels, where the bytes go: one run more
// under a KernelTrafficRecorder gives each kernel's bytes a run (its
// operands and outputs, engines/onednn/kernel_traffic.h) and the rate its
// calls moved them at; and the kernels besides matmul at this machine's
// stream rate (harness/stream_rate.h, for a pass of each kernel's mean
// call over a working set of the run's peak bytes), the least time any
// engine that runs them as passes of their own could take, which bounds
// the share of the run its matmuls can reach. Each of that run's calls is
// then replayed alone, its operands in cache (harness/kernel_replay.h): a
// kernel's "alone, in cache" time against its time in the run splits what
// its code costs from what its data's temperature does.
//
// Runs under the bench's process settings (engines/onednn/omp_wait.h), so
// that its times are the bench's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "engines/api/engine.h"
#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/onednn/kernel_traffic.h"
#include "engines/onednn/omp_wait.h"
#include "engines/onednn/onednn_kernels.h"
#include "harness/kernel_replay.h"
#include "harness/stream_rate.h"
#include "problems/problem.h"

namespace remat {
namespace {

namespace po = boost::program_options;

// The kernels besides matmul at this machine's stream rate, against their
// time in the probed runs (`by_kernel`, summed over `runs`): what an engine
// that runs them as passes of their own could save at most, and the share
// of a run its matmuls (their time in `quietest`, one run's) can reach.
void PrintStreamFloor(const KernelTimes& by_kernel, const KernelTimes& quietest,
                      const KernelTrafficByName& traffic, int64_t runs, int64_t peak_bytes) {
  if (traffic.empty()) return;  // not on oneDNN's kernels: nothing recorded
  const double n = static_cast<double>(runs);
  const int64_t working_set = StreamPoolBytes(peak_bytes);
  const StreamFloor floor = NonContractionStreamFloor(traffic, peak_bytes);
  double other_seconds = 0;
  for (const auto& [name, t] : by_kernel) {
    if (name != "matmul" && traffic.count(name) > 0) other_seconds += t.seconds / n;
  }
  const double other_bytes = static_cast<double>(floor.bytes);
  const double floor_seconds = floor.seconds;
  if (other_bytes == 0) return;
  std::printf("the kernels besides matmul: %.2f us a run moving %.3f MB (%.1f GB/s); at this "
              "machine's stream rate (a pass of each kernel's mean call over a pool of %.1f "
              "MB, the run's peak within 4 to 256 MiB) %.2f us a run\n",
              1e6 * other_seconds, other_bytes / 1e6, other_bytes / other_seconds / 1e9,
              static_cast<double>(working_set) / 1e6, 1e6 * floor_seconds);
  const auto matmul = quietest.find("matmul");
  if (matmul != quietest.end() && matmul->second.seconds > 0) {
    const double m = matmul->second.seconds;
    std::printf("so an engine running them as passes of their own, with these matmuls (%.2f us, "
                "the probed run with the least kernel time), takes at least %.2f us a run: its "
                "matmuls at most %.0f%% of it\n",
                1e6 * m, 1e6 * (m + floor_seconds), 100 * m / (m + floor_seconds));
  }
}

// Each call of the recorded run replayed this many times alone (the least
// counts): enough for a quiet one on a shared machine, few enough that
// gpt's 267 calls replay in well under a second.
constexpr int kReplayRepeats = 20;

// The kernels besides matmul in the run (the probed runs' mean) against
// the same calls replayed alone in cache.
void PrintAlone(const KernelTimes& by_kernel, const ReplayTimes& alone, int64_t runs) {
  double in_run = 0, in_cache = 0;
  for (const auto& [name, t] : alone) {
    if (name == "matmul") continue;
    in_cache += t.seconds;
    const auto it = by_kernel.find(name);
    if (it != by_kernel.end()) in_run += it->second.seconds / static_cast<double>(runs);
  }
  if (in_cache <= 0) return;
  std::printf("the same kernels, each call of one run replayed alone with its operands in cache "
              "(the least of %d): %.2f us a run, against %.2f us in the run (%.2fx)\n",
              kReplayRepeats, 1e6 * in_cache, 1e6 * in_run, in_run / in_cache);
}

int Main(int argc, char** argv) {
  std::string problem_name;
  std::string engine_name = "eager";
  std::vector<std::string> param_flags;
  int64_t runs = 1000;
  po::options_description desc(
      "engine_loop: an engine's time outside kernels on one problem, runs back to back");
  desc.add_options()("problem", po::value(&problem_name)->required(), "problem name")(
      "engine", po::value(&engine_name)->default_value(engine_name), "engine name")(
      "param", po::value(&param_flags), "NAME=VALUE, repeatable: a problem parameter")(
      "runs", po::value(&runs)->default_value(runs), "timed runs, and as many probed ones")(
      "help", "this help");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }
  po::notify(vm);
  if (runs < 1) throw Error(StrCat("--runs=", runs, ": at least one run"));

  const Problem& problem = FindProblem(problem_name);
  const ParamValues params = ResolveParams(problem, ParseParamFlags(param_flags));
  const Program program = problem.Build(params);
  const std::vector<Tensor> inputs = MakeInputs(problem, program, params, /*seed=*/1);
  const std::vector<int> wrt = WrtIndices(problem, program);
  const std::unique_ptr<Engine> engine = MakeEngine(engine_name);

  RunOptions options;
  options.predict_memory = false;
  options.time_kernels = false;
  engine->ValueAndGrad(program, inputs, wrt, options);  // compiles, warms up
  using Clock = std::chrono::steady_clock;
  double best = 1e30;
  for (int64_t i = 0; i < runs; ++i) {
    const Clock::time_point start = Clock::now();
    { Result r = engine->ValueAndGrad(program, inputs, wrt, options); }
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  options.time_kernels = true;
  double kernel_seconds = 0;
  int64_t calls = 0;
  KernelTimes by_kernel;  // summed over the probed runs
  // The probed run with the least kernel time: its matmuls' time is the
  // one the stream floor below is set beside (a mean takes in the runs a
  // neighbour slowed, and moved the floor's share by 3 points run to run).
  KernelTimes quietest;
  double quietest_seconds = 1e30;
  double quietest_wall = 0;
  for (int64_t i = 0; i < runs; ++i) {
    const Clock::time_point start = Clock::now();
    const Result r = engine->ValueAndGrad(program, inputs, wrt, options);
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    kernel_seconds += r.stats.seconds_in_kernels;
    calls += r.stats.kernel_calls;
    for (const auto& [name, t] : r.stats.kernel_times) {
      by_kernel[name].seconds += t.seconds;
      by_kernel[name].calls += t.calls;
    }
    if (r.stats.seconds_in_kernels < quietest_seconds) {
      quietest_seconds = r.stats.seconds_in_kernels;
      quietest_wall = wall;
      quietest = r.stats.kernel_times;
    }
  }
  const double kernels = kernel_seconds / static_cast<double>(runs);
  const double calls_per_run = static_cast<double>(calls) / static_cast<double>(runs);
  // Time outside kernels comes from one run, the probed one with the
  // least kernel time: the least unprobed run less the probed runs' mean
  // kernel time came out 0 on every matrix problem (the mean ran 4-8%
  // above the least run), so it is not printed.
  const double outside = quietest_wall - quietest_seconds;
  std::printf("%s on %s %s: least of %lld unprobed runs %.2f us; kernels %.2f us in %.0f calls "
              "(probed runs' mean)\n",
              engine_name.c_str(), problem_name.c_str(), FormatParams(params).c_str(),
              static_cast<long long>(runs), 1e6 * best, 1e6 * kernels, calls_per_run);
  std::printf("the probed run with the least kernel time: %.2f us, %.2f us of it in kernels, "
              "%.2f us outside (%.1f%%",
              1e6 * quietest_wall, 1e6 * quietest_seconds, 1e6 * outside,
              100 * outside / quietest_wall);
  if (calls_per_run > 0) std::printf(", %.1f ns a call", 1e9 * outside / calls_per_run);
  std::printf(")\n");
  // Where the bytes went: one run, recorded (it runs no faster or slower
  // for it: the recorder is not timed).
  KernelTrafficByName traffic;
  std::vector<KernelCall> recorded;
  int64_t peak_bytes = 0;
  {
    KernelTrafficRecorder recorder(KernelTrafficRecorder::KeepCalls::kYes);
    options.time_kernels = false;
    const Result r = engine->ValueAndGrad(program, inputs, wrt, options);
    traffic = recorder.traffic();
    recorded = recorder.calls();
    peak_bytes = r.stats.peak_bytes;
  }
  // And each of that run's calls again, alone, its operands in cache: what
  // the kernel's code takes on the run's shapes (the rest of its time in
  // the run is the data's temperature).
  ReplayTimes alone;
  if (!recorded.empty()) {
    OneDnnKernels kernels;
    alone = ReplayEachAlone(kernels, std::move(recorded), kReplayRepeats);
  }
  // Where the kernels' time went, the largest first (Stats::kernel_times;
  // engines that do not break it down print nothing here), with the bytes
  // each moved a run and at what rate.
  const auto sorted = LargestFirst(by_kernel);
  const double n = static_cast<double>(runs);
  for (const auto& [name, t] : sorted) {
    std::printf("  %-28s %10.2f us a run  %5.1f%% of the kernels'  %6.0f calls a run  %9.2f us a "
                "call",
                name.c_str(), 1e6 * t.seconds / n,
                kernel_seconds > 0 ? 100 * t.seconds / kernel_seconds : 0.0,
                static_cast<double>(t.calls) / n,
                1e6 * t.seconds / static_cast<double>(std::max<int64_t>(1, t.calls)));
    const auto it = traffic.find(name);
    if (it != traffic.end() && t.seconds > 0) {
      const double bytes = static_cast<double>(it->second.bytes());
      std::printf("  %8.3f MB a run  %7.1f GB/s", bytes / 1e6, bytes * n / t.seconds / 1e9);
    }
    const auto a = alone.find(name);
    if (a != alone.end()) std::printf("  alone, in cache %9.2f us a run", 1e6 * a->second.seconds);
    std::printf("\n");
  }
  PrintStreamFloor(by_kernel, quietest, traffic, runs, peak_bytes);
  PrintAlone(by_kernel, alone, runs);
  return 0;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  remat::UseMeasurementSettings(argv);  // first thing: may re-run this binary
  try {
    return remat::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_loop: %s\n", e.what());
    return 2;
  }
}
