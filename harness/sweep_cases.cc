#include "harness/sweep_cases.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engines/api/error.h"
#include "harness/case_text.h"
#include "problems/problem.h"

namespace remat::bench {
namespace {

// The words a row adds to its case's (harness/case_text.h).
const std::vector<std::string> kRowKeys = {"row", "control", "big"};

bool Flag(const std::map<std::string, std::string>& words, const std::string& key) {
  const auto it = words.find(key);
  if (it == words.end()) return false;
  if (it->second != "1") throw Error(StrCat("word '", key, "=", it->second, "': only ", key, "=1 is known"));
  return true;
}

}  // namespace

std::string FormatRowLine(const PlannedRow& row) {
  if (row.case_key != CaseKeyOf(row.problem, row.program_file, row.params)) {
    // --sweep=models names a case by its model's label: a name this line
    // cannot carry.
    throw Error(StrCat("row ", row.name, ": its case key '", row.case_key,
                       "' is not its problem's; a sweep's rows cannot be written as a case list"));
  }
  std::string line = FormatCase(row);
  if (row.kind == RowKind::kMatMulBound) line += " row=bound";
  if (row.control) line += " control=1";
  if (row.big) line += " big=1";
  return line;
}

PlannedRow ParseRowLine(const std::string& line) {
  PlannedRow row;
  static_cast<CaseSpec&>(row) = ParseCase(line, kRowKeys);
  const std::map<std::string, std::string> words = SplitCaseWords(line);
  const auto kind = words.find("row");
  if (kind != words.end()) {
    if (kind->second != "bound") {
      throw Error(StrCat("word 'row=", kind->second, "': only row=bound is known"));
    }
    row.kind = RowKind::kMatMulBound;
  }
  row.control = Flag(words, "control");
  row.big = Flag(words, "big");
  if (row.kind == RowKind::kMatMulBound && (row.control || row.engine != kBoundEngine)) {
    throw Error(StrCat("a row=bound row is engine=", kBoundEngine, " without control=1"));
  }
  if (row.control && row.engine != kBaselineEngine) {
    throw Error(StrCat("control=1 is a row of engine=", kBaselineEngine, " only"));
  }
  row.case_key = CaseKeyOf(row.problem, row.program_file, row.params);
  row.name = RowName(row);
  return row;
}

namespace {
constexpr char kPlannedBy[] = "# planned by: ";
}  // namespace

std::string FormatCaseList(const std::vector<PlannedRow>& rows, const std::string& planned_by) {
  std::string text = StrCat(kCaseListHeader, ": ", rows.size(), " rows in ",
                            GroupCases(rows).size(),
                            " cases (harness/sweep_cases.h; bench --cases=FILE runs them)\n");
  if (!planned_by.empty()) text += StrCat(kPlannedBy, planned_by, "\n");
  for (const PlannedRow& row : rows) text += FormatRowLine(row) + "\n";
  return text;
}

std::string CaseListPlannedBy(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kPlannedBy, 0) == 0) return line.substr(std::string(kPlannedBy).size());
  }
  return "";
}

std::vector<PlannedRow> ParseCaseList(const std::string& text, const std::string& source) {
  std::vector<PlannedRow> rows;
  std::set<std::string> names;
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::string where = StrCat(source, ":", number, ": ");
    PlannedRow row;
    try {
      row = ParseRowLine(line);
      if (row.program_file.empty()) {
        // FindProblem's error lists the registered problems.
        const Problem& problem = FindProblem(row.problem);
        std::map<std::string, int64_t> size(row.params.begin(), row.params.end());
        ResolveParams(problem, size);  // names and ranges
      }
    } catch (const Error& e) {
      throw Error(where + e.what(), e);
    }
    if (!names.insert(row.name).second) {
      throw Error(StrCat(where, "row ", row.name, " is listed twice"));
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) throw Error(StrCat(source, ": a case list with no cases"));
  return rows;
}

std::vector<PlannedRow> ReadCaseList(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(StrCat("--cases=", path, ": cannot read the file"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseCaseList(text.str(), path);
}

std::string SweepCase::Text() const {
  std::string text;
  for (const PlannedRow& row : rows) {
    if (!text.empty()) text += '\n';
    text += FormatRowLine(row);
  }
  return text;
}

std::string SweepCase::FileName() const {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (const char c : Text()) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return StrCat("case-", hex, ".json");
}

std::vector<SweepCase> GroupCases(const std::vector<PlannedRow>& rows) {
  std::vector<SweepCase> cases;
  std::map<std::string, size_t> index;
  for (const PlannedRow& row : rows) {
    const auto [it, added] = index.emplace(row.case_key, cases.size());
    if (added) cases.push_back({row.case_key, {}});
    cases[it->second].rows.push_back(row);
  }
  return cases;
}

std::vector<int> TaskShare(int count, int k, int tasks) {
  if (tasks < 1) throw Error(StrCat("--tasks=", tasks, ": not a positive number of tasks"));
  if (k < 0 || k >= tasks) {
    throw Error(StrCat("--task=", k, ": not a task of 0 to ", tasks - 1, " (--tasks=", tasks, ")"));
  }
  std::vector<int> share;
  for (int i = k; i < count; i += tasks) share.push_back(i);
  return share;
}

}  // namespace remat::bench
