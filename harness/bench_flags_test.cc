// Tests of the bench's own flags (harness/bench_flags.h): what each reads,
// what it refuses, and that Google Benchmark's pass through untouched.

#include "harness/bench_flags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

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

}  // namespace
}  // namespace remat::bench

namespace remat::bench {
namespace {

std::string FlagsError(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  try {
    ParseBenchFlags(args, &rest);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(BenchFlags, SweepFlags) {
  std::vector<std::string> rest;
  const BenchFlags task = ParseBenchFlags(
      {"bench", "--cases=c.txt", "--task=3", "--tasks", "8", "--out=/s", "--windows=1"}, &rest);
  EXPECT_EQ(task.cases, "c.txt");
  EXPECT_EQ(task.task, 3);
  EXPECT_EQ(task.tasks, 8);
  EXPECT_EQ(task.sweep_dir, "/s");
  // A window's process: its own --out after the task's.
  const BenchFlags child = ParseBenchFlags(
      {"bench", "--cases=c.txt", "--task=3", "--tasks=8", "--out=/s", "--windows=2",
       "--only-window=2", "--out=/tmp/w"},
      &rest);
  EXPECT_EQ(child.out_dir, "/tmp/w");
  EXPECT_EQ(child.sweep_dir, "/s");
  const BenchFlags submit = ParseBenchFlags(
      {"bench", "--submit=slurm", "--cases=c.txt", "--tasks=8", "--out=/s", "--slurm-config=x.conf",
       "--slurm-partition=debug", "--slurm-wait"},
      &rest);
  EXPECT_EQ(submit.submit, "slurm");
  EXPECT_EQ(submit.slurm_config, "x.conf");
  ASSERT_EQ(submit.slurm.size(), 2u);
  EXPECT_EQ(submit.slurm[0], std::make_pair(std::string("partition"), std::string("debug")));
  EXPECT_EQ(submit.slurm[1], std::make_pair(std::string("wait"), std::string("true")));
  EXPECT_EQ(rest, std::vector<std::string>{"bench"});
}

TEST(BenchFlags, SweepFlagsRefuseWhatDoesNotCombine) {
  EXPECT_NE(FlagsError({"bench", "--cases=c.txt", "--engines=eager"}).find("do not combine"),
            std::string::npos);
  EXPECT_NE(FlagsError({"bench", "--task=1", "--tasks=2", "--out=d"}).find("--task needs the sweep's case list"),
            std::string::npos);
  EXPECT_NE(FlagsError({"bench", "--cases=c", "--task=1", "--tasks=2"}).find("--task needs the sweep's directory"),
            std::string::npos);
  EXPECT_NE(FlagsError({"bench", "--cases=c", "--task=2", "--tasks=2", "--out=d"}).find("not a task of 0 to 1"),
            std::string::npos);
  EXPECT_NE(FlagsError({"bench", "--cases=c", "--task=x", "--out=d"}).find("--task=x"), std::string::npos);
  EXPECT_NE(FlagsError({"bench", "--submit=pbs", "--cases=c", "--out=d"}).find("unknown scheduler"),
            std::string::npos);
  EXPECT_NE(FlagsError({"bench", "--slurm-time=10"}).find("flags of --submit=slurm"), std::string::npos);
  EXPECT_NE(FlagsError({"bench", "--merge=d"}).find("--merge needs the sweep's case list"), std::string::npos);
  EXPECT_NE(FlagsError({"bench", "--write-cases=a", "--cases=b"}).find("do not combine"), std::string::npos);
}

}  // namespace
}  // namespace remat::bench
