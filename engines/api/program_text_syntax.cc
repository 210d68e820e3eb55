// The shared pieces of program text (program_text_syntax.h).
#include "engines/api/program_text_syntax.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engines/api/error.h"

namespace remat {
namespace program_text {

bool IsStructural(OpKind kind) {
  return kind == OpKind::kCheckpoint || kind == OpKind::kScan || kind == OpKind::kChain;
}

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

bool IsId(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsIdChar(c)) return false;
  }
  return true;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string NameText(const std::string& s) { return IsId(s) ? s : Quote(s); }

std::string TypeText(const Shape& s, DType d) { return DTypeName(d) + s.ToString(); }

// The shortest decimal that reads back as the same double: %.17g always
// does; shorter forms are tried first for readability (0.125, not
// 0.125000000000000000).
std::string NumberText(double x) {
  char buf[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::isnan(x) || std::strtod(buf, nullptr) == x) break;
  }
  if (std::isnan(x)) return std::signbit(x) ? "-nan" : "nan";
  // -0.0 == 0.0: the loop above stops at "-0" for it, which strtod reads as -0.0.
  return buf;
}

std::string Types(const Program& p, const std::vector<int>& values) {
  std::vector<std::string> out;
  for (int v : values) out.push_back(TypeText(p.shapes[v], p.dtype(v)));
  return Join(out, ", ");
}

}  // namespace program_text
}  // namespace remat
