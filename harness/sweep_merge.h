// The merge of a sweep (harness/sweep_cases.h): every case's results file
// in the sweep's directory (harness/sweep_results.h) into one results JSON
// in the form a local bench run writes (bench_report.h's ResultsJson, with
// "controls" and "source"), the rows in the case list's order.
//
//   MergedSweep m = MergeSweep(GroupCases(ReadCaseList(path)), dir);
//   if (!m.missing.empty()) ... name them ...
//   for (const std::string& w : m.warnings) std::cerr << w << "\n";
//
// Each row's x eager was taken in its own task, on its node, against that
// node's eager: the merge never takes a ratio across nodes. Where the cases
// ran on machines of different MachineKey (CPU, ISA, oneDNN implementation),
// one table would mix them: the merge warns, naming each machine's cases,
// and records every case's machine under "sweep".
#ifndef REMAT_HARNESS_SWEEP_MERGE_H_
#define REMAT_HARNESS_SWEEP_MERGE_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/sweep_cases.h"

namespace remat::bench {

struct MergedSweep {
  // {"command", "date", "machine", "rows", "controls", "source", "sweep"}:
  // "sweep" holds {"cases": [{"key", "hostname", "machine"}], "missing":
  // [keys], "machines": [MachineKey...]}. The command is `planned_by`
  // (the list's "# planned by" command) with the first case's task's own
  // flags (sampling, windows: not --cases, --task, --tasks, --out) after it:
  // the local run the sweep stands for, as tools/report.py reads a run's
  // kind from it; without `planned_by`, the task's command without --task,
  // --tasks and --out (the local run of the list).
  nlohmann::json run;
  // Cases whose file is absent or is not the case's (its key and why).
  std::vector<std::string> missing;
  // Mixed machines or sources, in words.
  std::vector<std::string> warnings;
};

// Throws remat::Error naming a file that is not JSON; a case whose file is
// missing is listed in `missing`, not thrown.
MergedSweep MergeSweep(const std::vector<SweepCase>& cases, const std::string& dir,
                       const std::string& planned_by = "");

// The task's command line without the words of one task (--task=, --tasks=,
// --out=, and their two-word forms); with `planned_by`, that command and
// then the task's words after "--" but --cases.
std::string LocalCommand(const std::string& task_command, const std::string& planned_by = "");

}  // namespace remat::bench

#endif  // REMAT_HARNESS_SWEEP_MERGE_H_
