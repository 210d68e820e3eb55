// Mutation testing of the conformance suite: every faulty engine of the
// gallery (gallery.h) through the suite's own binaries, the conformance
// suite (harness/conformance_test.cc) and the random-program fuzzer
// (harness/fuzz_test.cc), built with the gallery linked in. Each run must
// fail, and a failing test's message must name the property the fault
// breaks (FaultyEngine::caught_as). One test a fault (Faults/GalleryTest.
// TheSuiteCatchesTheFaultByName/<engine>), each printing the suite's tests
// that caught it; the mutation score is 100% when every one passes.
//
//   bazel-bin/harness/gallery/gallery_test                  # every fault
//   bazel-bin/harness/gallery/gallery_test --fault=NAME     # one, with its output
//   bazel-bin/harness/gallery/gallery_test --fuzz_cases=N   # fuzz cases per fault
//
// Two sizes. With REMAT_FULL=1 in the environment (tools/ci_full.sh), and
// with --fault, every fault runs the whole conformance suite and the fuzzer.
// Otherwise (`bazel test //...`, .ci/run) a fault first runs the conformance
// suite alone: the checks of CONTRACT.md's rule-table rows that name it, or,
// when no row does, the whole suite until its first failing test. When that
// run catches the fault by name and each row naming it has a failing check,
// the test passes there: the whole suite fails on a superset of those tests
// (its tests are independent of one another), so the full size would pass
// too. Otherwise the full size decides. Either size fails on the same
// faults; the full one also lists every test that catches each.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "harness/gallery/gallery.h"
#include "harness/gallery/rule_table.h"
#include "harness/gallery/suite_runner.h"

namespace remat {
namespace {

struct Flags {
  std::string fault;     // only this one, with its output
  int fuzz_cases = 300;  // the suite's fuzz tests run 500; the faults fail early
};
Flags& GetFlags() {
  static Flags flags;
  return flags;
}

struct Verdict {
  bool conformance_failed = false;
  bool fuzz_failed = false;
  std::map<std::string, int> caught_by;  // conformance tests
  bool fuzz_caught = false;
  bool fuzz_run = true;  // false: the default size caught it without the fuzzer
  Outcome conformance, fuzz;
  bool caught() const {
    return (conformance_failed && !caught_by.empty()) || (fuzz_failed && fuzz_caught);
  }
};

// The full size: the whole conformance suite and the fuzzer.
Verdict JudgeWhole(const FaultyEngine& f) {
  const std::string engine = " --engine=" + f.engine;
  // The two binaries side by side: they are independent processes.
  auto conformance = std::async(std::launch::async, [&] {
    return Execute(Runfile("harness/gallery/faulty_conformance") + engine);
  });
  Verdict v;
  v.fuzz = Execute(Runfile("harness/gallery/faulty_fuzz") + engine +
                   " --cases=" + std::to_string(GetFlags().fuzz_cases));
  v.conformance = conformance.get();
  v.conformance_failed = v.conformance.exit_code != 0;
  v.fuzz_failed = v.fuzz.exit_code != 0;
  v.caught_by = TestsThatFailedSaying(v.conformance.output, f.caught_as);
  v.fuzz_caught = !TestsThatFailedSaying(v.fuzz.output, f.caught_as).empty();
  return v;
}

// The default size (see the top of the file), falling back to the full one.
Verdict Judge(const FaultyEngine& f, const std::vector<RuleRow>& rows) {
  if (FullSize() || !GetFlags().fault.empty()) return JudgeWhole(f);
  Verdict v;
  v.fuzz_run = false;
  v.conformance = Execute(Runfile("harness/gallery/faulty_conformance") + " --engine=" + f.engine +
                          RowChecksArguments(rows, f.engine));
  v.conformance_failed = v.conformance.exit_code != 0;
  v.caught_by = TestsThatFailedSaying(v.conformance.output, f.caught_as);
  if (v.caught() &&
      RowsItsChecksMissed(rows, f.engine, TestsThatFailedSaying(v.conformance.output, {})).empty()) {
    return v;
  }
  return JudgeWhole(f);
}

// What the fuzzer said: its first failing case's message ("seed S: ..."),
// shortened, or that it passed.
std::string FuzzSummary(const Verdict& v) {
  if (!v.fuzz_run) return "not run (the conformance checks caught it)";
  if (!v.fuzz_failed) return "passed";
  const size_t seed = v.fuzz.output.find("seed ");
  if (seed == std::string::npos) return "failed (exit " + std::to_string(v.fuzz.exit_code) + ")";
  std::string line = v.fuzz.output.substr(seed, v.fuzz.output.find('\n', seed) - seed);
  if (line.size() > 110) line = line.substr(0, 107) + "...";
  return (v.fuzz_caught ? "caught: " : "failed otherwise: ") + line;
}

// One fault a test, so that Bazel's shards split the gallery (each fault
// runs two suites: under AddressSanitizer the whole gallery in one process
// passed 15 minutes).
class GalleryTest : public ::testing::TestWithParam<size_t> {};

TEST_P(GalleryTest, TheSuiteCatchesTheFaultByName) {
  const Flags& flags = GetFlags();
  const FaultyEngine& f = Gallery()[GetParam()];
  if (!flags.fault.empty() && f.engine != flags.fault) GTEST_SKIP() << "--fault=" << flags.fault;
  const std::vector<RuleRow> rows = ReadRuleTable(ReadText(Runfile("engines/api/CONTRACT.md")));
  const Verdict v = Judge(f, rows);
  std::string by;
  for (const auto& [test, instances] : v.caught_by) {
    by += (by.empty() ? "" : ", ") + test + " (" + std::to_string(instances) + ")";
  }
  if (v.fuzz_caught && v.fuzz_failed) by += std::string(by.empty() ? "" : ", ") + "fuzz";
  const std::string indent(34, ' ');
  std::string phrases;
  for (const std::string& p : f.caught_as) {
    phrases += (phrases.empty() ? "\"" : " or \"") + p + "\"";
  }
  std::printf("gallery: %s%s%s\n%sfault: %s\n%scaught as: %s\n%sfuzz: %s\n", f.engine.c_str(),
              std::string(f.engine.size() < 32 ? 32 - f.engine.size() : 1, ' ').c_str(),
              v.caught() ? by.c_str() : "NOT CAUGHT", indent.c_str(), f.fault.c_str(),
              indent.c_str(), phrases.c_str(), indent.c_str(), FuzzSummary(v).c_str());
  EXPECT_TRUE(v.conformance_failed || v.fuzz_failed)
      << f.engine << " (" << f.fault << ") passed the conformance suite and the fuzzer";
  EXPECT_TRUE(v.caught()) << f.engine << " (" << f.fault << "): no failing test says " << phrases
                          << " (conformance exit " << v.conformance.exit_code << ", fuzz exit "
                          << v.fuzz.exit_code << "); a hole in the suite";
  // CONTRACT.md section 9: a row that names this fault as breaking its
  // rule names a conformance check that failed on it.
  for (const RuleRow* row :
       RowsItsChecksMissed(rows, f.engine, TestsThatFailedSaying(v.conformance.output, {}))) {
    ADD_FAILURE() << "CONTRACT.md:" << row->line << ": " << row->entry << " says " << f.engine
                  << " is caught by its checks, but none of them failed on it";
  }
  if (!flags.fault.empty()) {
    std::printf("%s\n%s\n", v.conformance.output.c_str(), v.fuzz.output.c_str());
  }
}

std::vector<size_t> FaultIndices() {
  std::vector<size_t> out;
  for (size_t i = 0; i < Gallery().size(); ++i) out.push_back(i);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Faults, GalleryTest, ::testing::ValuesIn(FaultIndices()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string name = Gallery()[info.param].engine;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  remat::Flags& f = remat::GetFlags();
  remat::SetArgv0(argv[0]);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--fault=", 8) == 0) {
      f.fault = argv[i] + 8;
    } else if (std::strncmp(argv[i], "--fuzz_cases=", 13) == 0) {
      f.fuzz_cases = std::atoi(argv[i] + 13);
    } else {
      std::fprintf(stderr, "gallery_test: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  return RUN_ALL_TESTS();
}
