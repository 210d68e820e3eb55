// Program text's comparison (program_text.h's ProgramDifference): the
// first difference between two programs, attribute by attribute, the way a
// round trip through the text is checked.
#include "engines/api/program_text.h"

#include <cstring>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/program_text_syntax.h"

namespace remat {
namespace {

std::string OpDifference(const Op& a, const Op& b) {
  if (a.kind != b.kind) return StrCat("kind ", OpKindName(a.kind), " vs ", OpKindName(b.kind));
  auto ints = [](const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += StrCat(s.empty() ? "" : ",", x);
    return "[" + s + "]";
  };
  if (a.inputs != b.inputs) return StrCat("inputs ", ints(a.inputs), " vs ", ints(b.inputs));
  if (a.output != b.output) return StrCat("output ", a.output, " vs ", b.output);
  if (a.site != b.site) return StrCat("site '", a.site, "' vs '", b.site, "'");
  if (a.scope != b.scope) return StrCat("scope '", a.scope, "' vs '", b.scope, "'");
  if (a.name != b.name) return StrCat("name '", a.name, "' vs '", b.name, "'");
  if (a.policy.ToString() != b.policy.ToString()) {
    return StrCat("policy ", a.policy.ToString(), " vs ", b.policy.ToString());
  }
  if (std::memcmp(&a.scalar, &b.scalar, sizeof(double)) != 0) {
    return StrCat("scalar ", program_text::NumberText(a.scalar), " vs ", program_text::NumberText(b.scalar));
  }
  if (a.ints != b.ints) return "ints differ";
  if (a.schedule != b.schedule) return StrCat("schedule '", a.schedule, "' vs '", b.schedule, "'");
  if ((a.body == nullptr) != (b.body == nullptr)) return "one has a body, the other none";
  if (a.body) {
    const std::string d = ProgramDifference(*a.body, *b.body);
    if (!d.empty()) return "body: " + d;
  }
  return "";
}

}  // namespace

std::string ProgramDifference(const Program& a, const Program& b) {
  if (a.name != b.name) return StrCat("name '", a.name, "' vs '", b.name, "'");
  if (a.param_names != b.param_names) {
    return StrCat("parameters (", Join(a.param_names, ", "), ") vs (", Join(b.param_names, ", "),
                  ")");
  }
  for (int i = 0; i < a.num_params(); ++i) {
    if (a.is_data(i) != b.is_data(i)) {
      return StrCat("parameter ", a.param_names[i], ": ", a.is_data(i) ? "data" : "trained", " vs ",
                    b.is_data(i) ? "data" : "trained");
    }
  }
  if (a.num_values() != b.num_values()) {
    return StrCat(a.num_values(), " values vs ", b.num_values());
  }
  for (int v = 0; v < a.num_values(); ++v) {
    if (a.shapes[v] != b.shapes[v]) {
      return StrCat("value ", v, ": ", a.shapes[v].ToString(), " vs ", b.shapes[v].ToString());
    }
  }
  if (a.output != b.output) return StrCat("output ", a.output, " vs ", b.output);
  if (a.ops.size() != b.ops.size()) return StrCat(a.ops.size(), " ops vs ", b.ops.size());
  for (size_t k = 0; k < a.ops.size(); ++k) {
    const std::string d = OpDifference(a.ops[k], b.ops[k]);
    if (!d.empty()) return StrCat("op ", k, " (", OpKindName(a.ops[k].kind), "): ", d);
  }
  return "";
}

}  // namespace remat
