// A sweep case's results file (harness/sweep_cases.h): what one task
// writes per case into the sweep's directory, and what makes it current
// for a re-submitted sweep (resume) and for the merge.
//
//   {"sweep_case": {"key": "layer_loss/d=512,N=256", "text": "<its rows' lines>"},
//    "command": ..., "date": ..., "machine": MachineInfo(), "source": SourceInfo(),
//    "rows": [ResultsJson's rows of the case], "controls": ControlsJson of the case}
//
// A file is current for a case when its text is the case's, its source is
// the same unmodified commit, and its machine key (MachineKey) is the
// node's: the case, the code version and the machine.
#ifndef REMAT_HARNESS_SWEEP_RESULTS_H_
#define REMAT_HARNESS_SWEEP_RESULTS_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/bench_lib.h"
#include "harness/sweep_cases.h"

namespace remat::bench {

// The fields of a results file's "machine" that decide its rows' numbers:
// cpu, cores, onednn, onednn_isa, isa_cap, matmul_impl, omp_threads (not
// the hostname: identical nodes are interchangeable). Absent fields are
// null.
nlohmann::json MachineKey(const nlohmann::json& machine);

// Whether `file` (a case results file's JSON) holds `c`'s rows from
// `source` (SourceInfo(): a modified tree is never current) on a machine
// whose MachineKey is `machine`'s. `why` (if not null) says what differs.
bool CaseResultCurrent(const nlohmann::json& file, const SweepCase& c, const nlohmann::json& source,
                       const nlohmann::json& machine, std::string* why = nullptr);

// The case's file read from `dir`; nullopt when it is not there. Throws
// remat::Error naming the file if it is there but not JSON.
std::optional<nlohmann::json> ReadCaseResult(const std::string& dir, const SweepCase& c);

// The case's results file's JSON: `results` are the task's rows after
// ComputeVsEager; the case's are taken from them, its controls checked
// alone (CheckControls on its rows).
nlohmann::json CaseResultJson(const SweepCase& c, const std::vector<RowResult>& results,
                              const std::string& command, const nlohmann::json& machine,
                              const nlohmann::json& source, const std::string& date);

// Writes `json` to dir/c.FileName() through a .tmp file renamed into place
// (a task killed mid-write leaves no half file), creating dir; returns the
// path. Throws remat::Error if it cannot be written.
std::string WriteCaseResult(const std::string& dir, const SweepCase& c, const nlohmann::json& json);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_SWEEP_RESULTS_H_
