#include "harness/gallery/rule_table.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace remat {
namespace {

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

// The backquoted words of a cell.
std::vector<std::string> Quoted(const std::string& cell) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = cell.find('`', pos)) != std::string::npos) {
    const size_t end = cell.find('`', pos + 1);
    if (end == std::string::npos) break;
    out.push_back(cell.substr(pos + 1, end - pos - 1));
    pos = end + 1;
  }
  return out;
}

const char kSection[] = "\n## 9.";

}  // namespace

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<RuleRow> ReadRuleTable(const std::string& contract) {
  const size_t start = contract.find(kSection);
  if (start == std::string::npos) throw std::runtime_error("CONTRACT.md: no section \"## 9.\"");
  int line_number = 1;
  for (size_t i = 0; i < start + 1; ++i) line_number += contract[i] == '\n';
  std::vector<RuleRow> rows;
  std::istringstream lines(contract.substr(start + 1));
  std::string line;
  bool header_seen = false;
  for (int n = line_number; std::getline(lines, line); ++n) {
    if (line.rfind("## ", 0) == 0 && n != line_number) break;  // the next section
    if (line.rfind("|", 0) != 0) continue;
    if (!header_seen) {  // the header and the |---| line
      header_seen = line.find("---") != std::string::npos;
      continue;
    }
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream parts(line.substr(1));
    while (std::getline(parts, cell, '|')) cells.push_back(Trim(cell));
    if (!cells.empty() && cells.back().empty()) cells.pop_back();
    if (cells.size() != 5) {
      throw std::runtime_error("CONTRACT.md:" + std::to_string(n) + ": a row of section 9 has " +
                               std::to_string(cells.size()) +
                               " cells, not 5 (entry | what | checked by | broken by | remat "
                               "conform)");
    }
    RuleRow row;
    const std::vector<std::string> entry = Quoted(cells[0]);
    row.entry = entry.size() == 1 ? entry[0] : cells[0];
    row.what = cells[1];
    row.checks = Quoted(cells[2]);
    row.allowed = cells[3].rfind("allowed:", 0) == 0;
    row.planted_in = cells[3].rfind("planted in", 0) == 0;
    row.faults = Quoted(cells[3]);
    row.in_another_process = cells[4];
    row.line = n;
    rows.push_back(row);
  }
  return rows;
}

std::vector<const RuleRow*> RowsItsChecksMissed(const std::vector<RuleRow>& rows,
                                                const std::string& fault,
                                                const std::map<std::string, int>& caught_by) {
  std::vector<const RuleRow*> missed;
  for (const RuleRow& row : rows) {
    if (row.allowed || row.planted_in ||
        std::find(row.faults.begin(), row.faults.end(), fault) == row.faults.end()) {
      continue;
    }
    bool by_its_check = false;
    for (const std::string& check : row.checks) by_its_check |= caught_by.count(check) > 0;
    if (!by_its_check) missed.push_back(&row);
  }
  return missed;
}

std::string RowChecksFilter(const std::vector<RuleRow>& rows, const std::string& fault) {
  std::string filter;
  for (const RuleRow& row : rows) {
    if (row.allowed || row.planted_in ||
        std::find(row.faults.begin(), row.faults.end(), fault) == row.faults.end()) {
      continue;
    }
    for (const std::string& check : row.checks) {
      filter += (filter.empty() ? "" : ":") + check + ":*/" + check + ":" + check + "/*:*/" +
                check + "/*";
    }
  }
  return filter;
}

std::string RowChecksArguments(const std::vector<RuleRow>& rows, const std::string& fault) {
  const std::string filter = RowChecksFilter(rows, fault);
  if (filter.empty()) return " --gtest_fail_fast";
  return " '--gtest_filter=" + filter + "'";
}

std::vector<std::string> RuleTags(const std::string& contract) {
  const std::string body = contract.substr(0, contract.find(kSection));
  static const std::regex tag(R"(\*\*(R[0-9]+\.[0-9]+)\*\*)");
  std::vector<std::string> tags;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), tag); it != std::sregex_iterator();
       ++it) {
    tags.push_back((*it)[1]);
  }
  return tags;
}

std::vector<std::string> StructMembers(const std::string& header, const std::string& name) {
  const size_t start = header.find("struct " + name + " {");
  if (start == std::string::npos) return {};
  const size_t end = header.find("\n};", start);
  std::vector<std::string> members;
  std::istringstream lines(header.substr(start, end - start));
  std::string line;
  std::getline(lines, line);  // "struct NAME {"
  int depth = 0;
  while (std::getline(lines, line)) {
    const std::string code = line.substr(0, line.find("//"));
    const bool at_top = depth == 0;
    for (char c : code) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (!at_top || code.find(';') == std::string::npos) continue;
    std::string decl = code.substr(0, code.find(';'));
    decl = decl.substr(0, decl.find('='));
    decl = decl.substr(0, decl.find('{'));
    while (!decl.empty() && decl.back() == ' ') decl.pop_back();
    // A member function ("double seconds_total() const"), not a field (a
    // std::function<void(...)> field has its parentheses inside <>).
    if (decl.empty() || decl.back() == ')' || decl.find(") const") != std::string::npos) continue;
    const size_t space = decl.rfind(' ');
    if (space != std::string::npos) members.push_back(decl.substr(space + 1));
  }
  return members;
}

}  // namespace remat
