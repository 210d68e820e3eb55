// A sweep: the rows of a bench run written as a case list, one case a line
// (harness/case_text.h's form, with the row's own words after it), that a
// task of a job array reads back, runs its share of, and writes one results
// file per case into a directory that a merge (harness/sweep_merge.h) reads.
//
//   # remat-bench sweep: 17 rows in 4 cases
//   problem=layer_loss size=d=512,N=256 engine=onednn variant=as-written row=bound
//   problem=layer_loss size=d=512,N=256 engine=eager variant=as-written
//   problem=layer_loss size=d=512,N=256 engine=eager variant=as-written control=1
//   problem=layer_loss size=d=512,N=256 engine=recompute variant=nothing_saveable
//
// The row words: row=bound (a kMatMulBound row; absent: value_and_grad),
// control=1 (the A/A control), big=1. A "case" of the sweep is one case key
// (problem, program, size): its bound, eager, control and every other row
// run in one task, so that each row's ratio to eager is taken on one node.
//
//   std::vector<PlannedRow> rows = ParseCaseList(text, "sweep.txt");
//   std::vector<SweepCase> cases = GroupCases(rows);
//   for (int i : TaskShare(cases.size(), k, n)) ... cases[i].rows ...
#ifndef REMAT_HARNESS_SWEEP_CASES_H_
#define REMAT_HARNESS_SWEEP_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "harness/bench_plan.h"

namespace remat::bench {

// The first line of every case list.
inline constexpr char kCaseListHeader[] = "# remat-bench sweep";

// One row as a line of the case list, and back: ParseRowLine(FormatRowLine(r))
// has r's kind, control, big, case and its name and case key as PlanRows
// names them. A model's row (--sweep=models: named by a label, not by its
// problem) cannot be written: remat::Error says so.
std::string FormatRowLine(const PlannedRow& row);
PlannedRow ParseRowLine(const std::string& line);

// The whole list: kCaseListHeader and a count, the command that planned the
// rows (`planned_by`, if not empty: "# planned by: COMMAND"), then a line a
// row.
std::string FormatCaseList(const std::vector<PlannedRow>& rows, const std::string& planned_by = "");
// The command of a list's "# planned by: " line; "" if it has none.
std::string CaseListPlannedBy(const std::string& text);
// Reads a list: blank lines and '#' lines skipped. Throws remat::Error
// naming `source` and the line number: a line ParseRowLine refuses, an
// unknown problem (the registered ones listed), a size naming a parameter
// the problem does not have, a row given twice, or a list with no rows.
// Engines are checked by the caller (PlanRows' error for an unknown one).
std::vector<PlannedRow> ParseCaseList(const std::string& text, const std::string& source);
// ParseCaseList of a file's text; remat::Error if it cannot be read.
std::vector<PlannedRow> ReadCaseList(const std::string& path);

// The rows of one case key, in list order.
struct SweepCase {
  std::string key;  // PlannedRow::case_key
  std::vector<PlannedRow> rows;
  // Its rows' lines joined by '\n': what a results file is checked against.
  std::string Text() const;
  // The name of its results file in a sweep's directory:
  // "case-<16 hex digits of a 64-bit FNV-1a of Text()>.json".
  std::string FileName() const;
};
// The cases of a list, in the order their keys first appear.
std::vector<SweepCase> GroupCases(const std::vector<PlannedRow>& rows);

// Task k's share of `count` cases among `tasks` (0 <= k < tasks): cases
// k, k + tasks, k + 2 tasks, ... Throws remat::Error for tasks < 1 or k
// out of range.
std::vector<int> TaskShare(int count, int k, int tasks);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_SWEEP_CASES_H_
