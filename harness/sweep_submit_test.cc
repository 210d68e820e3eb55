#include "harness/sweep_submit.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "engines/api/error.h"

namespace remat::bench {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(SweepSubmit, ReadsAConfigFile) {
  const SlurmOptions o = ReadSlurmConfig(WriteFile("ok.conf",
                                                   "# the sweep's options\n"
                                                   "partition = debug\n"
                                                   "account=ml\n"
                                                   "time = 00:30:00\n"
                                                   "cpus_per_task = 16\n"
                                                   "bench = /shared/bin/bench\n"
                                                   "tries = 2\n"
                                                   "exclusive = false\n"
                                                   "sbatch = --constraint=avx512 --qos=low\n"));
  EXPECT_EQ(o.partition, "debug");
  EXPECT_EQ(o.account, "ml");
  EXPECT_EQ(o.time, "00:30:00");
  EXPECT_EQ(o.cpus_per_task, "16");
  EXPECT_EQ(o.bench, "/shared/bin/bench");
  EXPECT_EQ(o.tries, 2);
  EXPECT_FALSE(o.exclusive);
  EXPECT_EQ(o.sbatch, "--constraint=avx512 --qos=low");
}

std::string ConfigError(const std::string& text) {
  try {
    ReadSlurmConfig(WriteFile("bad.conf", text));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(SweepSubmit, BadConfigsNameFileLineAndKey) {
  EXPECT_NE(ConfigError("partition = a\nqueue = b\n").find("bad.conf:2: unknown Slurm option 'queue'"),
            std::string::npos);
  EXPECT_NE(ConfigError("partition\n").find("bad.conf:1: 'partition' is not 'key = value'"),
            std::string::npos);
  EXPECT_NE(ConfigError("tries = many\n").find("bad.conf:1: tries 'many'"), std::string::npos);
  EXPECT_NE(ConfigError("exclusive = maybe\n").find("bad.conf:1: 'maybe' is not true or false"),
            std::string::npos);
  EXPECT_NE(ConfigError("cpus_per_task = 0\n").find("bad.conf:1: cpus_per_task '0'"), std::string::npos);
  try {
    ReadSlurmConfig("/nonexistent/sweep.conf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/sweep.conf: cannot read"), std::string::npos);
  }
}

TEST(SweepSubmit, ArrayRanges) {
  EXPECT_EQ(ArrayRanges({0, 1, 2, 3, 4, 5, 6, 7}), "0-7");
  EXPECT_EQ(ArrayRanges({1, 3, 5, 6}), "1,3,5-6");
  EXPECT_EQ(ArrayRanges({4}), "4");
}

TEST(SweepSubmit, TheScriptRunsTheTaskWithItsOptions) {
  SlurmOptions o;
  o.partition = "debug";
  o.time = "10:00";
  o.tries = 2;
  SweepJob job;
  job.bench = "/shared/bench";
  job.cases = "/shared/sweep/cases.txt";
  job.out = "/shared/sweep";
  job.workspace = "/src/remat bench";
  job.tasks = 8;
  job.array = {0, 1, 2, 3, 4, 5, 6, 7};
  job.bench_args = {"--max-row-seconds=0.2", "--windows=1"};
  const std::string s = SbatchScript(o, job);
  EXPECT_NE(s.find("#SBATCH --array=0-7\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --requeue\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --exclusive\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --partition=debug\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --time=10:00\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --output=/shared/sweep/logs/task-%a.out\n"), std::string::npos);
  EXPECT_NE(s.find("cd '/src/remat bench' || exit 1\n"), std::string::npos);
  EXPECT_NE(s.find("tries=2\n"), std::string::npos);
  EXPECT_NE(s.find("/shared/bench --cases=/shared/sweep/cases.txt --tasks=8 "
                   "--task=\"$SLURM_ARRAY_TASK_ID\" --out=/shared/sweep --max-row-seconds=0.2 --windows=1\n"),
            std::string::npos);
  o.exclusive = false;
  EXPECT_EQ(SbatchScript(o, job).find("--exclusive"), std::string::npos);
}

TEST(SweepSubmit, ShellQuote) {
  EXPECT_EQ(ShellQuote("--out=/a/b"), "--out=/a/b");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

TEST(SweepSubmit, FindOnPath) {
  EXPECT_NE(FindOnPath("sh"), "");
  EXPECT_EQ(FindOnPath("no-such-program-remat"), "");
}

}  // namespace
}  // namespace remat::bench
