// CONTRACT.md section 9, the table of the contract's rules and fields,
// against what it names (rule_table.h): every rule tag **Rn.m** of the text
// has one row and every row's rule is tagged in the text; every field of
// Stats, RunOptions and Result has a row; every row names at least one
// check and one fault (or says the contract allows the fault, quoting the
// mutant that shows it); every check is a test of the conformance suite (or,
// for engines in another process, of tools/remat_cli_test.cc), every fault
// a gallery engine or a generated mutant; and every row says whether
// `remat conform` holds an engine in another process to it. That each fault
// is caught by one of its row's checks is checked where the fault is run
// (mutant_test, gallery_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/gallery/gallery.h"
#include "harness/gallery/mutants.h"
#include "harness/gallery/rule_table.h"
#include "harness/gallery/suite_runner.h"

namespace remat {
namespace {

const std::string& Contract() {
  static const std::string text = ReadText(Runfile("engines/api/CONTRACT.md"));
  return text;
}

// The conformance suite's tests, as --gtest_list_tests names them, without
// instantiation prefix or parameter ("ConformanceTest.AgreesWithTheFloat64Oracle").
std::set<std::string> ConformanceTests() {
  const Outcome o =
      Execute(Runfile("harness/gallery/faulty_conformance") + " --engine=eager --gtest_list_tests");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  std::set<std::string> tests;
  std::string suite;
  size_t pos = 0;
  while (pos < o.output.size()) {
    size_t end = o.output.find('\n', pos);
    if (end == std::string::npos) end = o.output.size();
    std::string line = o.output.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    line = line.substr(0, line.find("  #"));
    if (line[0] != ' ') {  // "Problems/ConformanceTest." or "ReluAtZeroTest."
      suite = line.substr(0, line.size() - 1);
      suite = suite.substr(suite.find('/') == std::string::npos ? 0 : suite.find('/') + 1);
    } else {  // "  AgreesWithTheFloat64Oracle/layer_loss"
      std::string test = line.substr(line.find_first_not_of(' '));
      tests.insert(suite + "." + test.substr(0, test.find('/')));
    }
  }
  return tests;
}

// The tests of tools/remat_cli_test.cc: "RematCliTest.ConformPassesARightEngine...".
std::set<std::string> CliTests() {
  const std::string source = ReadText(Runfile("tools/remat_cli_test.cc"));
  std::set<std::string> tests;
  size_t pos = 0;
  while ((pos = source.find("\nTEST(", pos)) != std::string::npos) {
    const size_t open = pos + 6, close = source.find(')', open);
    std::string args = source.substr(open, close - open);
    args.erase(std::remove(args.begin(), args.end(), ' '), args.end());
    args[args.find(',')] = '.';
    tests.insert(args);
    pos = close;
  }
  return tests;
}

TEST(RuleTable, EveryTaggedRuleHasOneRowAndEveryRowsRuleIsTagged) {
  const std::vector<RuleRow> rows = ReadRuleTable(Contract());
  const std::vector<std::string> tags = RuleTags(Contract());
  ASSERT_GE(tags.size(), 20u) << "CONTRACT.md: its rules are not tagged **Rn.m**";
  std::map<std::string, int> tagged, listed;
  for (const std::string& t : tags) ++tagged[t];
  for (const RuleRow& r : rows) ++listed[r.entry];
  for (const auto& [tag, n] : tagged) {
    EXPECT_EQ(n, 1) << "CONTRACT.md: **" << tag << "** tags " << n << " rules";
    EXPECT_EQ(listed[tag], 1) << "CONTRACT.md section 9: " << tag << " has " << listed[tag]
                              << " rows, not 1";
  }
  for (const RuleRow& r : rows) {
    if (r.entry.find("::") != std::string::npos) continue;
    EXPECT_TRUE(tagged.count(r.entry)) << "CONTRACT.md:" << r.line << ": " << r.entry
                                       << " is tagged nowhere in the text";
  }
  std::printf("rules: %zu tagged in CONTRACT.md, each with its row\n", tagged.size());
}

TEST(RuleTable, EveryFieldOfTheInterfaceHasARow) {
  const std::vector<RuleRow> rows = ReadRuleTable(Contract());
  std::set<std::string> entries;
  for (const RuleRow& r : rows) entries.insert(r.entry);
  const std::pair<const char*, const char*> structs[] = {
      {"engines/api/stats.h", "Stats"},
      {"engines/api/engine.h", "RunOptions"},
      {"engines/api/engine.h", "Result"},
  };
  std::set<std::string> fields;
  for (const auto& [header, name] : structs) {
    const std::vector<std::string> members = StructMembers(ReadText(Runfile(header)), name);
    EXPECT_GE(members.size(), 3u) << header << ": struct " << name << " read wrong";
    for (const std::string& m : members) {
      if (std::string(name) == "Result" && m == "stats") continue;  // the fields of Stats
      const std::string field = std::string(name) + "::" + m;
      fields.insert(field);
      EXPECT_TRUE(entries.count(field)) << field << " (" << header
                                        << ") has no row in CONTRACT.md section 9";
    }
  }
  for (const RuleRow& r : rows) {
    if (r.entry.find("::") == std::string::npos) continue;
    EXPECT_TRUE(fields.count(r.entry)) << "CONTRACT.md:" << r.line << ": " << r.entry
                                       << " is no field of Stats, RunOptions or Result";
  }
  std::printf("fields: %zu of Stats, RunOptions and Result, each with its row\n", fields.size());
}

TEST(RuleTable, EveryRowNamesChecksAndFaultsThatExist) {
  const std::vector<RuleRow> rows = ReadRuleTable(Contract());
  const std::set<std::string> suite = ConformanceTests();
  ASSERT_GE(suite.size(), 10u) << "the conformance binary's test list read wrong";
  const std::set<std::string> cli = CliTests();
  ASSERT_GE(cli.size(), 5u) << "tools/remat_cli_test.cc read wrong";
  std::map<std::string, const Mutant*> mutants;
  for (const Mutant& m : Mutants()) mutants[m.engine] = &m;
  std::set<std::string> gallery;
  for (const FaultyEngine& f : Gallery()) gallery.insert(f.engine);
  int checked = 0, allowed = 0, outside = 0;
  for (const RuleRow& r : rows) {
    const std::string where = "CONTRACT.md:" + std::to_string(r.line) + ": " + r.entry;
    EXPECT_FALSE(r.what.empty()) << where << ": no definition";
    EXPECT_FALSE(r.faults.empty()) << where << ": no fault breaks it (name a gallery engine or "
                                   << "a mutant, or add one: a rule no fault breaks is unchecked)";
    EXPECT_TRUE(r.allowed || !r.checks.empty()) << where << ": no check enforces it";
    for (const std::string& check : r.checks) {
      EXPECT_TRUE(suite.count(check) || cli.count(check))
          << where << ": " << check << " is no test of the conformance suite or of "
          << "tools/remat_cli_test.cc";
    }
    for (const std::string& fault : r.faults) {
      if (r.planted_in) {
        EXPECT_TRUE(cli.count(fault)) << where << ": " << fault
                                      << " is no test of tools/remat_cli_test.cc";
        EXPECT_TRUE(std::find(r.checks.begin(), r.checks.end(), fault) != r.checks.end())
            << where << ": " << fault << " plants the fault but is not among the checks";
      } else if (r.allowed) {
        EXPECT_TRUE(mutants.count(fault) && !mutants[fault]->allowed_by.empty())
            << where << ": " << fault << " is no mutant the contract allows";
      } else {
        EXPECT_TRUE(gallery.count(fault) || (mutants.count(fault) && mutants[fault]->allowed_by.empty()))
            << where << ": " << fault << " is neither a gallery engine nor a mutant the suite must "
            << "catch";
      }
    }
    const std::string& rc = r.in_another_process;
    EXPECT_TRUE(rc.rfind("yes", 0) == 0 || rc.rfind("no", 0) == 0 || rc.rfind("partly", 0) == 0)
        << where << ": the `remat conform` cell says \"" << rc
        << "\", not yes, partly or no (with the reason)";
    checked += !r.allowed;
    allowed += r.allowed;
    outside += rc.rfind("no", 0) != 0;
  }
  std::printf("rule table: %zu rows: %d checked and broken by a named fault, %d allowed by the "
              "contract; %d held to engines in another process (yes or partly)\n",
              rows.size(), checked, allowed, outside);
}

// Section 2's rules (what each op computes, on which kernels) are each
// enforced by two checks or more, independent ones (issue 64): a fault that
// one check alone catches is one edit of that check from passing.
TEST(RuleTable, EverySectionTwoRuleHasTwoChecksOrMore) {
  int rules = 0;
  for (const RuleRow& r : ReadRuleTable(Contract())) {
    if (r.entry.rfind("R2.", 0) != 0) continue;
    ++rules;
    EXPECT_GE(r.checks.size(), 2u) << "CONTRACT.md:" << r.line << ": " << r.entry << " has "
                                   << r.checks.size() << " check(s); section 2's rules need two";
  }
  EXPECT_GE(rules, 10) << "CONTRACT.md section 9: the R2 rows read wrong";
}

// The default sizes of mutant_test and gallery_test run a fault through the
// checks of the rows that name it: the filter selects those checks under
// any instantiation prefix and parameter, and no other row's.
TEST(RuleTable, RowChecksFilterSelectsTheChecksOfTheRowsThatNameTheFault) {
  RuleRow named, other, allowed;
  named.checks = {"VariantTest.AgreesWithTheOracleAndWithEagersBits"};
  named.faults = {"faulty_sum_order", "mutant_x"};
  other.checks = {"ConformanceTest.AgreesWithTheFloat64Oracle"};
  other.faults = {"mutant_y"};
  allowed.checks = {"ConformanceTest.HonoursCheckpointsAsItClaims"};
  allowed.faults = {"faulty_sum_order"};
  allowed.allowed = true;
  const std::vector<RuleRow> rows = {named, other, allowed};
  const std::string v = "VariantTest.AgreesWithTheOracleAndWithEagersBits";
  EXPECT_EQ(RowChecksFilter(rows, "faulty_sum_order"),
            v + ":*/" + v + ":" + v + "/*:*/" + v + "/*");
  EXPECT_EQ(RowChecksFilter(rows, "mutant_z"), "");
  // A fault two rows name: both rows' checks.
  const std::string f = RowChecksFilter({named, other, named}, "mutant_x");
  EXPECT_EQ(f.find("Float64Oracle"), std::string::npos);
  EXPECT_EQ(std::count(f.begin(), f.end(), ':'), 7);
  EXPECT_NE(RowChecksFilter({named, other}, "mutant_y").find("AgreesWithTheFloat64Oracle/*"),
            std::string::npos);
  EXPECT_EQ(RowChecksArguments(rows, "mutant_z"), " --gtest_fail_fast");
  EXPECT_EQ(RowChecksArguments(rows, "mutant_y"),
            " '--gtest_filter=" + RowChecksFilter(rows, "mutant_y") + "'");
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  remat::SetArgv0(argv[0]);
  return RUN_ALL_TESTS();
}
