// The bench's sweep commands (harness/sweep_cases.h): --write-cases,
// --cases with --task (a task of a job array), --submit=slurm and --merge,
// as bench_main.cc calls them. Each returns the process's exit status or
// the rows to run; bad input throws remat::Error naming it.
//
//   if (!flags.write_cases.empty()) return WriteCasesCommand(flags, EngineNames(), std::cerr);
//   plan = PlanCaseListRows(flags, EngineNames(), SourceInfo(), MachineInfo(), std::cerr, &cases);
#ifndef REMAT_HARNESS_BENCH_SWEEP_H_
#define REMAT_HARNESS_BENCH_SWEEP_H_

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/bench_flags.h"
#include "harness/bench_lib.h"
#include "harness/sweep_cases.h"

namespace remat::bench {

// --write-cases=FILE: PlanRows(flags) as a case list into FILE, with the
// command that planned them (`args` but --write-cases); 0.
int WriteCasesCommand(const BenchFlags& flags, const std::vector<std::string>& args,
                      const std::vector<std::string>& registered_engines, std::ostream& log);

// --cases=FILE: the rows to run, in list order. Every engine must be
// registered (or be the bound rows'); with --task=K, task K's share of the
// cases, less those whose results file in the sweep's directory (the first
// --out) is current for `source`
// and `machine` (said on `log`, with why a file there is not). `cases`
// gets the cases whose rows are returned.
std::vector<PlannedRow> PlanCaseListRows(const BenchFlags& flags,
                                         const std::vector<std::string>& registered_engines,
                                         const nlohmann::json& source, const nlohmann::json& machine,
                                         std::ostream& log, std::vector<SweepCase>* cases);

// A task's end: each case's results file into --out (CaseResultJson).
void WriteTaskResults(const BenchFlags& flags, const std::vector<SweepCase>& cases,
                      const std::vector<RowResult>& results, const std::string& command,
                      const nlohmann::json& machine, const nlohmann::json& source,
                      const std::string& date, std::ostream& log);

// --merge=DIR: MergeSweep into --out (WriteResults: bench-<UTC>.json and
// latest.json); 1 if a case is missing (named on `log`), else 0.
int MergeCommand(const BenchFlags& flags, std::ostream& log);

// --submit=slurm: the array of the tasks with cases not yet current, through
// sbatch (remat::Error if sbatch is not on PATH); `args` are the bench's
// own (args[0] the program), passed on to every task but the sweep's flags.
// 0 when submitted (and, with wait, every task succeeded).
int SubmitCommand(const BenchFlags& flags, const std::vector<std::string>& args, std::ostream& log);

// The bench flags a task passes on: `args` (args[0] excluded) without
// --submit, --slurm-*, --cases, --task, --tasks, --out (either form).
std::vector<std::string> TaskArgs(const std::vector<std::string>& args);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_SWEEP_H_
