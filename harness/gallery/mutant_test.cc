// The generated mutants (mutants.h) through the conformance suite
// (harness/conformance_test.cc, built with the mutants linked in as
// faulty_conformance). One test a mutant. A mutant is caught when the suite
// fails on it with a GoogleTest failure (not a crash); a mutant the contract
// allows (Mutant::allowed_by) must pass instead, so that an allowance stays
// true. The last test prints the mutation score over the generated set.
//
// Two sizes. With REMAT_FULL=1 in the environment (tools/ci_full.sh) every
// mutant runs the whole suite. Otherwise (`bazel test //...`, .ci/run) a
// mutant that CONTRACT.md's rule table names runs only the checks of its
// rows (which is what the table claims: one of them catches it; until the
// first failure when one row names it), and any
// other mutant the whole suite until its first failing test
// (--gtest_fail_fast); an allowed mutant always runs the whole suite, which
// it must pass. Either size fails on the same mutants; the full one also
// lists every test that catches each.
//
//   bazel-bin/harness/gallery/mutant_test                       # every mutant
//   bazel-bin/harness/gallery/mutant_test --mutant=NAME         # one, with the suite's output
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include "harness/gallery/mutants.h"
#include "harness/gallery/rule_table.h"
#include "harness/gallery/suite_runner.h"

namespace remat {
namespace {

std::string& OnlyMutant() {
  static std::string name;
  return name;
}

// The suite's arguments for `m` beyond its engine (see the top of the file):
// none in the full size or for an allowed mutant; the checks of the rule
// table's rows that name `m` as a --gtest_filter; else --gtest_fail_fast.
// A mutant one row names stops at its first failure too: one failing check
// of that row is all the test asks (every check of a row runs every
// problem and variant, and a caught mutant fails most of them).
std::string SuiteFilter(const Mutant& m, const std::vector<RuleRow>& rows) {
  if (FullSize() || !m.allowed_by.empty()) return "";
  const std::string arguments = RowChecksArguments(rows, m.engine);
  int naming = 0;
  for (const RuleRow& row : rows) {
    naming += !row.allowed && !row.planted_in &&
              std::find(row.faults.begin(), row.faults.end(), m.engine) != row.faults.end();
  }
  if (naming == 1 && arguments.find("--gtest_fail_fast") == std::string::npos) {
    return arguments + " --gtest_fail_fast";
  }
  return arguments;
}

class MutantTest : public ::testing::TestWithParam<size_t> {};

TEST_P(MutantTest, TheSuiteCatchesIt) {
  const Mutant& m = Mutants()[GetParam()];
  if (!OnlyMutant().empty() && m.engine != OnlyMutant()) GTEST_SKIP() << "--mutant=" << OnlyMutant();
  const std::vector<RuleRow> rows = ReadRuleTable(ReadText(Runfile("engines/api/CONTRACT.md")));
  const Outcome o = Execute(Runfile("harness/gallery/faulty_conformance") + " --engine=" + m.engine +
                            SuiteFilter(m, rows));
  const std::map<std::string, int> caught_by = TestsThatFailedSaying(o.output, {});
  std::string by;
  for (const auto& [test, instances] : caught_by) {
    by += (by.empty() ? "" : ", ") + test + " (" + std::to_string(instances) + ")";
  }
  const bool caught = o.exit_code == 1 && !caught_by.empty();
  std::printf("mutant: %-44s %s\n        %s\n", m.engine.c_str(),
              caught ? by.c_str()
              : o.exit_code == 0 ? (m.allowed_by.empty() ? "NOT CAUGHT" : "passed, as allowed")
                                 : ("the suite exited " + std::to_string(o.exit_code)).c_str(),
              m.mutation.c_str());
  if (!OnlyMutant().empty()) std::printf("%s\n", o.output.c_str());
  // Exit 1 is GoogleTest's "a test failed"; anything else (a signal, a
  // crash in the suite, a runner error) is the suite breaking, not catching.
  EXPECT_TRUE(o.exit_code == 0 || o.exit_code == 1)
      << m.engine << ": the suite did not finish (exit " << o.exit_code << ")\n"
      << o.output.substr(o.output.size() > 4000 ? o.output.size() - 4000 : 0);
  // CONTRACT.md section 9: a row that names this mutant as breaking its
  // rule names a check that caught it.
  if (caught) {
    for (const RuleRow* row : RowsItsChecksMissed(rows, m.engine, caught_by)) {
      ADD_FAILURE() << "CONTRACT.md:" << row->line << ": " << row->entry << " says " << m.engine
                    << " is caught by its checks, but none of them failed on it (the tests that "
                    << "did: " << by << ")";
    }
  }
  if (m.allowed_by.empty()) {
    EXPECT_TRUE(caught) << m.engine << " (" << m.mutation
                        << ") passed the conformance suite: a hole in the suite, or a change the "
                           "contract allows (then say so in mutants.cc, quoting CONTRACT.md)";
  } else {
    EXPECT_EQ(o.exit_code, 0) << m.engine << " (" << m.mutation << ") is allowed by \""
                              << m.allowed_by << "\" but the suite fails it: " << by;
  }
}

std::vector<size_t> Indices() {
  std::vector<size_t> out;
  for (size_t i = 0; i < Mutants().size(); ++i) out.push_back(i);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Generated, MutantTest, ::testing::ValuesIn(Indices()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string name = Mutants()[info.param].engine;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The generator makes every rule's mutants: at least one per integer field
// of Stats (three rules each) and per output and option rule.
TEST(Mutants, TheGeneratedSetIsWhole) {
  int allowed = 0;
  for (const Mutant& m : Mutants()) allowed += !m.allowed_by.empty();
  std::printf("mutants: %zu generated, %d allowed by the contract, %zu the suite must catch\n",
              Mutants().size(), allowed, Mutants().size() - allowed);
  EXPECT_GE(Mutants().size(), 90u);
}

// Every field an engine reports or obeys has mutants: its name is in a
// mutant's ("mutant_peak_bytes_low" for Stats::peak_bytes). A field added
// to Stats, RunOptions or Result without a rule here fails this test.
TEST(Mutants, EveryFieldOfTheInterfaceHasMutants) {
  const std::pair<const char*, const char*> structs[] = {
      {"engines/api/stats.h", "Stats"},
      {"engines/api/engine.h", "RunOptions"},
      {"engines/api/engine.h", "Result"},
  };
  int fields = 0;
  for (const auto& [header, name] : structs) {
    const std::vector<std::string> members = StructMembers(ReadText(Runfile(header)), name);
    EXPECT_GE(members.size(), 3u) << header << ": struct " << name << " read wrong";
    for (const std::string& field : members) {
      // Result::stats is the struct of the fields above.
      if (std::string(name) == "Result" && field == "stats") continue;
      ++fields;
      std::printf("  %s::%s\n", name, field.c_str());
      bool has = false;
      for (const Mutant& m : Mutants()) has = has || m.engine.find(field) != std::string::npos;
      EXPECT_TRUE(has) << name << "::" << field << " (" << header
                       << ") has no generated mutant: add its rules to mutants.cc";
    }
  }
  std::printf("mutants: %d fields of Stats, RunOptions and Result, each with mutants\n", fields);
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  remat::SetArgv0(argv[0]);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mutant=", 9) == 0) {
      remat::OnlyMutant() = argv[i] + 9;
    } else {
      std::fprintf(stderr, "mutant_test: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  return RUN_ALL_TESTS();
}
