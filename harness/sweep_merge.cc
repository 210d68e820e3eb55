#include "harness/sweep_merge.h"

#include <sstream>

#include "engines/api/error.h"
#include "harness/sweep_results.h"

namespace remat::bench {

std::string LocalCommand(const std::string& task_command, const std::string& planned_by) {
  std::istringstream in(task_command);
  std::vector<std::string> kept;
  bool flags = planned_by.empty();  // past "--": the bench's own words
  for (std::string word; in >> word;) {
    if (!flags) {
      flags = word == "--";
      continue;
    }
    bool drop = false;
    for (const char* flag : {"--task", "--tasks", "--out", planned_by.empty() ? "--task" : "--cases"}) {
      const std::string f = flag;
      if (word == f) {
        in >> word;  // its value
        drop = true;
      } else if (word.rfind(f + "=", 0) == 0) {
        drop = true;
      }
    }
    if (!drop) kept.push_back(word);
  }
  if (!planned_by.empty()) {
    // CommandLine writes no "--" before an empty list of flags.
    if (!kept.empty() && planned_by.find(" -- ") == std::string::npos) kept.insert(kept.begin(), "--");
    kept.insert(kept.begin(), planned_by);
  }
  return Join(kept, " ");
}

MergedSweep MergeSweep(const std::vector<SweepCase>& cases, const std::string& dir,
                       const std::string& planned_by) {
  MergedSweep merged;
  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json checks = nlohmann::json::array();
  nlohmann::json sweep_cases = nlohmann::json::array();
  nlohmann::json machines = nlohmann::json::array();
  std::vector<std::vector<std::string>> machine_cases;
  int64_t counts[4] = {0, 0, 0, 0};  // rows, trusted, noise, untrusted
  nlohmann::json first;
  for (const SweepCase& c : cases) {
    const std::optional<nlohmann::json> file = ReadCaseResult(dir, c);
    if (!file) {
      merged.missing.push_back(StrCat(c.key, " (no ", c.FileName(), ")"));
      continue;
    }
    const nlohmann::json& sc = file->value("sweep_case", nlohmann::json::object());
    if (!sc.is_object() || sc.value("text", "") != c.Text()) {
      merged.missing.push_back(StrCat(c.key, " (", c.FileName(), " holds other rows)"));
      continue;
    }
    const size_t count = file->value("rows", nlohmann::json::array()).size();
    if (count != c.rows.size()) {
      merged.missing.push_back(StrCat(c.key, " (", c.FileName(), " holds ", count, " of its ",
                                      c.rows.size(), " rows)"));
      continue;
    }
    if (first.is_null()) {
      first = *file;
    } else if (file->value("source", nlohmann::json()) != first["source"]) {
      merged.warnings.push_back(StrCat("case ", c.key, " ran at source ",
                                       file->value("source", nlohmann::json()).dump(), ", not ",
                                       first["source"].dump(), " as the first case"));
    }
    const nlohmann::json machine = file->value("machine", nlohmann::json::object());
    const nlohmann::json key = MachineKey(machine);
    size_t m = 0;
    while (m < machines.size() && machines[m] != key) ++m;
    if (m == machines.size()) {
      machines.push_back(key);
      machine_cases.emplace_back();
    }
    machine_cases[m].push_back(c.key);
    sweep_cases.push_back(
        {{"key", c.key}, {"hostname", machine.value("hostname", "")}, {"machine", key}});
    for (const nlohmann::json& row : file->value("rows", nlohmann::json::array())) rows.push_back(row);
    const nlohmann::json controls = file->value("controls", nlohmann::json::object());
    for (const nlohmann::json& check : controls.value("checks", nlohmann::json::array())) {
      checks.push_back(check);
    }
    int i = 0;
    for (const char* field : {"rows", "trusted", "noise", "untrusted"}) {
      counts[i++] += controls.value(field, int64_t{0});
    }
  }
  if (machines.size() > 1) {
    std::string text = StrCat("the sweep's cases ran on ", machines.size(),
                              " kinds of machine; each row's x eager is its own node's, but one "
                              "table of the merged run mixes them:");
    for (size_t m = 0; m < machines.size(); ++m) {
      text += StrCat("\n  ", machines[m].dump(), ": ", Join(machine_cases[m], ", "));
    }
    merged.warnings.push_back(text);
  }
  bool valid = !checks.empty();
  for (const nlohmann::json& check : checks) valid = valid && check.value("ok", false);
  nlohmann::json& run = merged.run;
  run["command"] = first.is_null() ? "" : LocalCommand(first.value("command", ""), planned_by);
  run["date"] = first.is_null() ? nlohmann::json() : first["date"];
  run["machine"] = first.is_null() ? nlohmann::json::object() : first["machine"];
  run["source"] = first.is_null() ? nlohmann::json::object() : first["source"];
  run["rows"] = rows;
  run["controls"] = {{"valid", valid}, {"allowance", first.is_null() ? nlohmann::json() : first["controls"]["allowance"]},
                     {"rows", counts[0]}, {"trusted", counts[1]}, {"noise", counts[2]},
                     {"untrusted", counts[3]}, {"checks", checks}};
  nlohmann::json missing = nlohmann::json::array();
  for (const std::string& m : merged.missing) missing.push_back(m);
  run["sweep"] = {{"cases", sweep_cases}, {"missing", missing}, {"machines", machines}};
  return merged;
}

}  // namespace remat::bench
