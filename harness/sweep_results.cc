#include "harness/sweep_results.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engines/api/error.h"
#include "harness/bench_controls.h"
#include "harness/bench_report.h"

namespace remat::bench {

nlohmann::json MachineKey(const nlohmann::json& machine) {
  nlohmann::json key = nlohmann::json::object();
  for (const char* field :
       {"cpu", "cores", "onednn", "onednn_isa", "isa_cap", "matmul_impl", "omp_threads"}) {
    key[field] = machine.is_object() && machine.contains(field) ? machine[field] : nlohmann::json();
  }
  return key;
}

bool CaseResultCurrent(const nlohmann::json& file, const SweepCase& c, const nlohmann::json& source,
                       const nlohmann::json& machine, std::string* why) {
  std::string reason;
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& sc = file.is_object() && file.contains("sweep_case") ? file["sweep_case"] : empty;
  const nlohmann::json& fs = file.is_object() && file.contains("source") ? file["source"] : empty;
  if (!sc.is_object() || sc.value("text", "") != c.Text()) {
    reason = "its rows are not the case's";
  } else if (!source.is_object() || !source.contains("commit") || source.value("modified", true)) {
    reason = "this tree's source revision is unknown or modified";
  } else if (!fs.is_object() || fs.value("commit", "") != source.value("commit", "") ||
             fs.value("modified", true)) {
    reason = StrCat("it is of source ", fs.is_object() ? fs.value("commit", "?") : "?", ", not ",
                    source.value("commit", "?"));
  } else if (MachineKey(file.value("machine", empty)) != MachineKey(machine)) {
    reason = StrCat("it is of machine ", MachineKey(file.value("machine", empty)).dump(), ", not ",
                    MachineKey(machine).dump());
  } else if (!file.contains("rows") || !file["rows"].is_array() ||
             file["rows"].size() != c.rows.size()) {
    reason = "it has not every row of the case";
  }
  if (why != nullptr) *why = reason;
  return reason.empty();
}

std::optional<nlohmann::json> ReadCaseResult(const std::string& dir, const SweepCase& c) {
  const std::filesystem::path path = std::filesystem::path(dir) / c.FileName();
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(StrCat(path.string(), ": not a case results file (", e.what(), ")"));
  }
}

nlohmann::json CaseResultJson(const SweepCase& c, const std::vector<RowResult>& results,
                              const std::string& command, const nlohmann::json& machine,
                              const nlohmann::json& source, const std::string& date) {
  std::vector<RowResult> mine;
  for (const RowResult& r : results) {
    if (r.row.case_key == c.key) mine.push_back(r);
  }
  const ControlReport controls = CheckControls(&mine);
  nlohmann::json json = ResultsJson(command, machine, date, mine);
  json["controls"] = ControlsJson(controls);
  json["source"] = source;
  json["sweep_case"] = {{"key", c.key}, {"text", c.Text()}};
  return json;
}

std::string WriteCaseResult(const std::string& dir, const SweepCase& c, const nlohmann::json& json) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = (std::filesystem::path(dir) / c.FileName()).string();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << json.dump(1) << "\n";
    if (!out) throw Error(StrCat("cannot write ", tmp, " (case ", c.key, ")"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error(StrCat("cannot rename ", tmp, " to ", path));
  }
  return path;
}

}  // namespace remat::bench
