// sampling_replay: a recorded run's sampling replayed under another budget or
// target spread (harness/sampling_replay.h), to choose the default run's
// budget from runs already taken:
//
//   bazel-bin/harness/sampling_replay --sampling-budget=360
//       --target-spread=0.015 results/bench-A.json results/bench-B.json
//
// For each run: its sampling seconds as recorded and as replayed, and the
// replayed run's controls and trustworthy rows, as the bench prints them.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "harness/bench_controls.h"
#include "harness/bench_flags.h"
#include "harness/bench_sampling.h"
#include "harness/sampling_replay.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  using namespace remat::bench;
  SamplingRule rule = DefaultSamplingRule();
  double budget = kDefaultSamplingBudgetSeconds;
  std::vector<std::string> runs;
  po::options_description options(
      "sampling_replay RUN.json...: each run's sampling replayed on its own samples under\n"
      "another budget or target spread (harness/sampling_replay.h)");
  options.add_options()
      ("sampling-budget", po::value<double>(&budget)->default_value(budget),
       "seconds of sampling for the whole run, split over its windows as bench splits them")
      ("target-spread", po::value<double>(&rule.target_spread)->default_value(rule.target_spread),
       "a row settles once its x eager is known within this (half its 95% interval)")
      ("help", "this help");
  po::options_description hidden;
  hidden.add_options()("run", po::value<std::vector<std::string>>(&runs));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("run", -1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    if (runs.empty()) throw std::runtime_error("no run given (results/bench-*.json)");
    if (!(budget >= 0)) throw std::runtime_error("--sampling-budget must be 0 or more seconds");
    if (!(rule.target_spread > 0 && rule.target_spread < 1)) {
      throw std::runtime_error("--target-spread must be in (0, 1), e.g. 0.015");
    }
  } catch (const std::exception& e) {
    std::cerr << "sampling_replay: " << e.what() << "\n";
    return 2;
  }
  int status = 0;
  for (const std::string& path : runs) {
    try {
      const Replay r = ReplayRun(ReadRun(path), rule, budget);
      std::printf("%s: %d windows; sampled %.0f s as recorded, %.0f s replayed under a %.0f s "
                  "budget and a %.2g%% target spread (%lld row windows would have sampled past "
                  "their samples)\n",
                  path.c_str(), r.windows, r.recorded_seconds, r.sampled_seconds, budget,
                  100 * rule.target_spread, static_cast<long long>(r.longer));
      std::cout << FormatControls(r.controls) << "\n";
    } catch (const std::exception& e) {
      std::cerr << "sampling_replay: " << path << ": " << e.what() << "\n";
      status = 1;
    }
  }
  return status;
}
