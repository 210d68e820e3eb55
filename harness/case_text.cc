#include "harness/case_text.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "engines/api/error.h"

namespace remat {
namespace {

// The words FormatCase writes, in its order.
const char* const kCaseKeys[] = {"problem", "program", "size", "engine", "variant", "wrt", "inputs"};

void Append(std::string* line, const std::string& key, const std::string& value) {
  if (value.find_first_of(" \t\n\r") != std::string::npos) {
    throw Error(StrCat("case field ", key, "='", value,
                       "' holds whitespace, which the case's text form cannot hold"));
  }
  if (!line->empty()) *line += ' ';
  *line += key + "=" + value;
}

}  // namespace

std::string FormatCase(const CaseSpec& spec) {
  if (spec.problem.empty()) throw Error("a case without a problem cannot be written");
  std::string line;
  Append(&line, "problem", spec.problem);
  if (!spec.program_file.empty()) Append(&line, "program", spec.program_file);
  if (!spec.params.empty()) Append(&line, "size", FormatOrderedParams(spec.params));
  Append(&line, "engine", spec.engine);
  Append(&line, "variant", spec.variant.Label());
  if (!spec.wrt.empty()) {
    for (const std::string& w : spec.wrt) {
      if (w.find(';') != std::string::npos) {
        throw Error(StrCat("case field wrt entry '", w, "' holds ';', the text form's separator"));
      }
    }
    Append(&line, "wrt", Join(spec.wrt, ";"));
  }
  if (!spec.inputs_dir.empty()) Append(&line, "inputs", spec.inputs_dir);
  return line;
}

std::map<std::string, std::string> SplitCaseWords(const std::string& line) {
  std::map<std::string, std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(StrCat("case word '", word, "' is not KEY=VALUE"));
    }
    const std::string key = word.substr(0, eq);
    if (!words.emplace(key, word.substr(eq + 1)).second) {
      throw Error(StrCat("case word '", key, "=' is given twice"));
    }
  }
  return words;
}

CaseSpec ParseCase(const std::string& line, const std::vector<std::string>& extra_keys) {
  const std::map<std::string, std::string> words = SplitCaseWords(line);
  const auto problem = words.find("problem");
  const std::string who =
      problem == words.end() ? std::string("a case") : StrCat("case of problem ", problem->second);
  for (const auto& [key, value] : words) {
    if (std::find(std::begin(kCaseKeys), std::end(kCaseKeys), key) == std::end(kCaseKeys) &&
        std::find(extra_keys.begin(), extra_keys.end(), key) == extra_keys.end()) {
      std::vector<std::string> known(std::begin(kCaseKeys), std::end(kCaseKeys));
      known.insert(known.end(), extra_keys.begin(), extra_keys.end());
      throw Error(StrCat(who, ": unknown word '", key, "='; a case's words: ", Join(known, ", ")));
    }
  }
  for (const char* required : {"problem", "engine", "variant"}) {
    if (words.count(required) == 0) throw Error(StrCat(who, ": no ", required, "= word"));
  }
  CaseSpec spec;
  spec.problem = problem->second;
  if (spec.problem.empty()) throw Error("a case with an empty problem=");
  auto get = [&](const char* key) {
    const auto it = words.find(key);
    return it == words.end() ? std::string() : it->second;
  };
  spec.program_file = get("program");
  spec.engine = get("engine");
  spec.inputs_dir = get("inputs");
  const std::string size = get("size");
  std::istringstream pieces(size);
  for (std::string piece; std::getline(pieces, piece, ',');) {
    const size_t eq = piece.find('=');
    char* end = nullptr;
    const std::string number = eq == std::string::npos ? "" : piece.substr(eq + 1);
    const long long value = std::strtoll(number.c_str(), &end, 10);
    if (eq == std::string::npos || eq == 0 || number.empty() || *end != '\0') {
      throw Error(StrCat(who, ": size='", size, "': '", piece, "' is not NAME=INTEGER"));
    }
    spec.params.emplace_back(piece.substr(0, eq), static_cast<int64_t>(value));
  }
  try {
    spec.variant = CaseVariant::Parse(get("variant"));
  } catch (const Error& e) {
    throw Error(StrCat(who, ": variant=", get("variant"), ": ", e.what()), e);
  }
  const std::string wrt = get("wrt");
  std::istringstream entries(wrt);
  for (std::string entry; std::getline(entries, entry, ';');) {
    if (!entry.empty()) spec.wrt.push_back(entry);
  }
  return spec;
}

}  // namespace remat
