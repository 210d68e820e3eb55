// The table of engines/api/CONTRACT.md section 9: every numbered rule of the
// contract (the tags **R<section>.<n>** in its text), every field of Stats,
// RunOptions and Result, each with the conformance checks that enforce it
// and the faults (gallery engines or generated mutants) that break it.
// Test-only: rule_table_test checks the table against the contract, the
// headers and the suite; mutant_test and gallery_test check, for every fault
// a row names, that one of the row's checks is among those that caught it.
#ifndef REMAT_HARNESS_GALLERY_RULE_TABLE_H_
#define REMAT_HARNESS_GALLERY_RULE_TABLE_H_

#include <map>
#include <string>
#include <vector>

namespace remat {

struct RuleRow {
  std::string entry;  // "R2.6", or a field: "Stats::peak_bytes"
  std::string what;   // the rule or the field's definition, one line
  // Checks, as GoogleTest names the test without instantiation prefix or
  // parameter ("ConformanceTest.AgreesWithTheFloat64Oracle"): the backquoted
  // names of the "checked by" cell.
  std::vector<std::string> checks;
  // Faults: registered engine names ("faulty_sum_order", "mutant_value_sign")
  // or, with `planted_in`, the tests that plant their own faulty engine.
  std::vector<std::string> faults;
  // The "broken by" cell says "allowed:": the contract allows these mutants
  // (Mutant::allowed_by) and no check can see them; `checks` may be empty.
  bool allowed = false;
  // The "broken by" cell says "planted in": `faults` are tests (of
  // tools/remat_cli_test.cc) that run a faulty engine of their own.
  bool planted_in = false;
  std::string in_another_process;  // the `remat conform` cell: "yes: ...", "no: ..."
  int line = 0;                    // in CONTRACT.md
};

// The rows of the table under "## 9." in `contract` (CONTRACT.md's text).
// Throws std::runtime_error naming the line of a row that does not parse.
std::vector<RuleRow> ReadRuleTable(const std::string& contract);

// The rows of `rows` that name `fault` as breaking their rule (allowed and
// planted rows aside) and name none of the tests in `caught_by` (the tests
// that failed on it) among their checks: each is a row whose mapping is wrong.
std::vector<const RuleRow*> RowsItsChecksMissed(const std::vector<RuleRow>& rows,
                                                const std::string& fault,
                                                const std::map<std::string, int>& caught_by);

// A --gtest_filter value that selects the checks of the rows of `rows` that
// name `fault` as breaking their rule (allowed and planted rows aside), each
// check with any instantiation prefix and parameter; "" when no row names it.
std::string RowChecksFilter(const std::vector<RuleRow>& rows, const std::string& fault);

// The conformance binary's arguments for the default sizes of mutant_test
// and gallery_test: " '--gtest_filter=<RowChecksFilter>'", or
// " --gtest_fail_fast" (the whole suite to its first failure) when no row
// names `fault`.
std::string RowChecksArguments(const std::vector<RuleRow>& rows, const std::string& fault);

// The rule tags ("R3.4") written as **R3.4** in `contract` before section 9,
// in order, repeats included.
std::vector<std::string> RuleTags(const std::string& contract);

// The data members of `struct NAME { ... };` in a header's text: the lines
// at the struct's top level that declare a member (no function).
std::vector<std::string> StructMembers(const std::string& header, const std::string& name);

// The whole text of a file ("" when it cannot be read).
std::string ReadText(const std::string& path);

}  // namespace remat

#endif  // REMAT_HARNESS_GALLERY_RULE_TABLE_H_
