// Program text's printer (program_text.h's PrintProgram): one statement a
// line, bodies indented inside their op's braces.
#include "engines/api/program_text.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/op_def.h"
#include "engines/api/program_text_syntax.h"

namespace remat {
namespace program_text {
namespace {

// Value IDs of one program: parameters by name where it is an ID and unique,
// other values by number.
std::vector<std::string> ValueIds(const Program& p) {
  std::vector<std::string> ids(p.num_values());
  std::set<std::string> taken;
  for (int i = 0; i < p.num_params(); ++i) {
    const std::string& n = p.param_names[i];
    if (IsId(n) && taken.insert(n).second) ids[i] = n;
  }
  auto fresh = [&](int v) {
    std::string id = std::to_string(v);
    while (!taken.insert(id).second) id = "v" + id;
    return id;
  };
  for (int i = 0; i < p.num_params(); ++i) {
    if (ids[i].empty()) ids[i] = fresh(i);
  }
  for (int v = p.num_params(); v < p.num_values(); ++v) ids[v] = fresh(v);
  return ids;
}

std::string Params(const Program& p, const std::vector<std::string>& ids) {
  std::string out = "(";
  for (int i = 0; i < p.num_params(); ++i) {
    if (i) out += ", ";
    out += StrCat(ids[i], ": ", TypeText(p.shapes[i], p.dtype(i)));
    if (ids[i] != p.param_names[i]) out += " name=" + Quote(p.param_names[i]);
    if (p.is_data(i)) out += " data";
  }
  return out + ")";
}

void PrintBody(const Program& p, const std::string& indent, std::string* out) {
  const std::vector<std::string> ids = ValueIds(p);
  auto ref = [&](int v) {
    return v >= 0 && v < p.num_values() ? "%" + ids[v] : StrCat("%<bad value ", v, ">");
  };
  for (const Op& op : p.ops) {
    std::string line = indent + ref(op.output);
    if (op.output >= 0 && op.output < p.num_values()) line += ": " + TypeText(p.shapes[op.output]);
    line += StrCat(" = ", OpKindName(op.kind), "(");
    for (size_t i = 0; i < op.inputs.size(); ++i) line += (i ? ", " : "") + ref(op.inputs[i]);
    line += ")";
    if (!op.name.empty() || op.kind == OpKind::kName || op.kind == OpKind::kState) line += " name=" + Quote(op.name);
    if (op.kind == OpKind::kCheckpoint) line += " policy=" + Quote(op.policy.ToString());
    if (!op.schedule.empty()) line += " schedule=" + Quote(op.schedule);
    if (op.num_consts != 0) line += StrCat(" consts=", op.num_consts);
    // A reduction's Op::scalar is its keepdim (op_def.h, reduces_axes).
    const bool reduction = !IsStructural(op.kind) && Def(op.kind).reduces_axes;
    if (!reduction && ((!IsStructural(op.kind) && Def(op.kind).has_scalar) || op.scalar != 0.0 ||
                       std::signbit(op.scalar))) {
      line += " scalar=" + NumberText(op.scalar);
    }
    if (!op.ints.empty()) {
      line += " ints=[";
      for (size_t i = 0; i < op.ints.size(); ++i) line += StrCat(i ? "," : "", op.ints[i]);
      line += "]";
    }
    if (reduction && op.scalar != 0.0) line += " keepdim=" + NumberText(op.scalar);
    if (!op.site.empty()) line += " @ " + Quote(op.site);
    if (!op.scope.empty()) line += " scope=" + Quote(op.scope);
    if (op.body) {
      const Program& body = *op.body;
      const std::vector<std::string> body_ids = ValueIds(body);
      line += " {\n" + indent + "  body";
      if (body.name != OpKindName(op.kind)) line += " " + NameText(body.name);
      line += Params(body, body_ids) + "\n";
      *out += line;
      PrintBody(body, indent + "  ", out);
      line = indent + "}";
    }
    *out += line + "\n";
  }
  *out += StrCat(indent, "return ", ref(p.output), "\n");
}

}  // namespace
}  // namespace program_text

std::string PrintProgram(const Program& program) {
  using program_text::NameText;
  using program_text::Params;
  using program_text::PrintBody;
  using program_text::ValueIds;
  std::string out =
      StrCat("program ", NameText(program.name), Params(program, ValueIds(program)), " {\n");
  PrintBody(program, "  ", &out);
  return out + "}\n";
}

}  // namespace remat
