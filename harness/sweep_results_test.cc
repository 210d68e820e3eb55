#include "harness/sweep_results.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engines/api/error.h"
#include "harness/bench_fake_row.h"
#include "harness/sweep_merge.h"

namespace remat::bench {
namespace {

const nlohmann::json kSource = {{"commit", "0123456789abcdef0123456789abcdef01234567"}, {"modified", false}};
const nlohmann::json kMachine = {{"hostname", "node1"}, {"cpu", "Xeon"}, {"cores", 2},
                                 {"onednn", "oneDNN 2.6.3"}, {"onednn_isa", "avx512_core"},
                                 {"isa_cap", ""}, {"matmul_impl", "brg:avx512_core"},
                                 {"omp_threads", 2}};

// Two cases (layer_loss at two widths), eager and recompute on each.
std::vector<RowResult> Results() {
  std::vector<RowResult> out;
  for (const int64_t d : {256, 512}) {
    out.push_back(Fake("layer_loss", "eager", "as-written", 10, {{"d", d}, {"N", 256}}));
    out.push_back(Fake("layer_loss", "recompute", "nothing_saveable", 12, {{"d", d}, {"N", 256}}));
  }
  return out;
}

std::vector<SweepCase> Cases(const std::vector<RowResult>& results) {
  std::vector<PlannedRow> rows;
  for (const RowResult& r : results) rows.push_back(r.row);
  return GroupCases(rows);
}

std::string TempDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(SweepResults, AFileIsCurrentForItsCaseSourceAndMachine) {
  const std::vector<RowResult> results = Results();
  const std::vector<SweepCase> cases = Cases(results);
  const nlohmann::json file = CaseResultJson(cases[0], results, "bench --cases=x", kMachine, kSource,
                                             "2026-12-08T00:00:00Z");
  EXPECT_EQ(file["rows"].size(), 2u);
  EXPECT_EQ(file["sweep_case"]["key"], "layer_loss/d=256,N=256");
  std::string why;
  EXPECT_TRUE(CaseResultCurrent(file, cases[0], kSource, kMachine, &why)) << why;
  // Another hostname, same hardware: current.
  nlohmann::json other_host = kMachine;
  other_host["hostname"] = "node2";
  EXPECT_TRUE(CaseResultCurrent(file, cases[0], kSource, other_host));
  EXPECT_FALSE(CaseResultCurrent(file, cases[1], kSource, kMachine, &why));
  EXPECT_EQ(why, "its rows are not the case's");
  nlohmann::json newer = kSource;
  newer["commit"] = "fedcba9876543210fedcba9876543210fedcba98";
  EXPECT_FALSE(CaseResultCurrent(file, cases[0], newer, kMachine, &why));
  EXPECT_NE(why.find("it is of source 0123"), std::string::npos);
  nlohmann::json modified = kSource;
  modified["modified"] = true;
  EXPECT_FALSE(CaseResultCurrent(file, cases[0], modified, kMachine));
  nlohmann::json avx2 = kMachine;
  avx2["onednn_isa"] = "avx2";
  EXPECT_FALSE(CaseResultCurrent(file, cases[0], kSource, avx2, &why));
  EXPECT_NE(why.find("it is of machine"), std::string::npos);
}

TEST(SweepResults, WritesAndReadsBack) {
  const std::vector<RowResult> results = Results();
  const std::vector<SweepCase> cases = Cases(results);
  const std::string dir = TempDir("write");
  EXPECT_FALSE(ReadCaseResult(dir, cases[0]).has_value());
  const nlohmann::json file = CaseResultJson(cases[0], results, "c", kMachine, kSource, "d");
  const std::string path = WriteCaseResult(dir, cases[0], file);
  EXPECT_EQ(path, dir + "/" + cases[0].FileName());
  EXPECT_EQ(*ReadCaseResult(dir, cases[0]), file);
  std::ofstream(path) << "{not json";
  EXPECT_THROW(ReadCaseResult(dir, cases[0]), Error);
}

TEST(SweepMerge, MergesInListOrderAndNamesWhatIsMissing) {
  const std::vector<RowResult> results = Results();
  const std::vector<SweepCase> cases = Cases(results);
  const std::string dir = TempDir("merge");
  const std::string command = "tools/bazel run //harness:bench -- --cases=/s/c.txt --task=1 --tasks=8 --out=/s --windows=1";
  WriteCaseResult(dir, cases[1], CaseResultJson(cases[1], results, command, kMachine, kSource, "d"));
  MergedSweep m = MergeSweep(cases, dir);
  ASSERT_EQ(m.missing.size(), 1u);
  EXPECT_NE(m.missing[0].find("layer_loss/d=256,N=256"), std::string::npos);
  EXPECT_EQ(m.run["rows"].size(), 2u);
  EXPECT_EQ(m.run["command"], "tools/bazel run //harness:bench -- --cases=/s/c.txt --windows=1");
  EXPECT_EQ(m.run["sweep"]["missing"].size(), 1u);

  WriteCaseResult(dir, cases[0], CaseResultJson(cases[0], results, command, kMachine, kSource, "d"));
  m = MergeSweep(cases, dir);
  EXPECT_TRUE(m.missing.empty());
  EXPECT_TRUE(m.warnings.empty());
  ASSERT_EQ(m.run["rows"].size(), 4u);
  EXPECT_EQ(m.run["rows"][0]["name"], cases[0].rows[0].name);
  EXPECT_EQ(m.run["rows"][3]["name"], cases[1].rows[1].name);
  for (const char* key : {"command", "date", "machine", "rows", "controls", "source"}) {
    EXPECT_TRUE(m.run.contains(key)) << key;
  }
}

TEST(SweepMerge, SaysWhenItsCasesRanOnDifferentMachines) {
  const std::vector<RowResult> results = Results();
  const std::vector<SweepCase> cases = Cases(results);
  const std::string dir = TempDir("mixed");
  nlohmann::json avx2 = kMachine;
  avx2["onednn_isa"] = "avx2";
  avx2["matmul_impl"] = "brg:avx2";
  WriteCaseResult(dir, cases[0], CaseResultJson(cases[0], results, "c", kMachine, kSource, "d"));
  WriteCaseResult(dir, cases[1], CaseResultJson(cases[1], results, "c", avx2, kSource, "d"));
  const MergedSweep m = MergeSweep(cases, dir);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("2 kinds of machine"), std::string::npos);
  EXPECT_NE(m.warnings[0].find("avx2"), std::string::npos);
  EXPECT_NE(m.warnings[0].find("layer_loss/d=512,N=256"), std::string::npos);
  EXPECT_EQ(m.run["sweep"]["machines"].size(), 2u);
}

TEST(SweepMerge, LocalCommand) {
  const std::string task = "b -- --cases=c --task 3 --tasks=8 --out /x --windows=1";
  EXPECT_EQ(LocalCommand(task), "b -- --cases=c --windows=1");
  EXPECT_EQ(LocalCommand(task, "b -- --sweep=depth"), "b -- --sweep=depth --windows=1");
  EXPECT_EQ(LocalCommand(task, "b"), "b -- --windows=1");
  EXPECT_EQ(LocalCommand("b -- --cases c --task=1 --tasks=2 --out=d", "b"), "b");
}

TEST(SweepMerge, AFileWithoutEveryRowOfItsCaseIsMissing) {
  std::vector<RowResult> results = Results();
  const std::vector<SweepCase> cases = Cases(results);
  const std::string dir = TempDir("filtered");
  results.erase(results.begin() + 1);  // the first case's recompute row did not run
  WriteCaseResult(dir, cases[0], CaseResultJson(cases[0], results, "c", kMachine, kSource, "d"));
  WriteCaseResult(dir, cases[1], CaseResultJson(cases[1], results, "c", kMachine, kSource, "d"));
  const MergedSweep m = MergeSweep(cases, dir);
  ASSERT_EQ(m.missing.size(), 1u);
  EXPECT_NE(m.missing[0].find("holds 1 of its 2 rows"), std::string::npos) << m.missing[0];
}

}  // namespace
}  // namespace remat::bench
