#include "engines/api/program_identity.h"

namespace remat {
namespace {

void HashProgram(const Program& p, StructureHasher* h) {
  h->String(p.name);
  h->Value(p.output);
  h->Value(p.shapes.size());
  for (const Shape& s : p.shapes) h->Dims(s);
  h->Value(p.param_names.size());
  for (const std::string& n : p.param_names) h->String(n);
  h->Value(p.ops.size());
  for (const Op& op : p.ops) {
    h->Value(op.kind);
    h->Value(op.output);
    h->Value(op.inputs.size());
    for (int i : op.inputs) h->Value(i);
    h->String(op.site);
    h->String(op.scope);
    h->String(op.name);
    h->String(op.schedule);
    h->Value(op.scalar);
    for (int64_t i : op.ints) h->Value(i);
    if (op.body) HashProgram(*op.body, h);
  }
}

}  // namespace

uint64_t StructureHash(const Program& program) {
  StructureHasher h;
  HashProgram(program, &h);
  return h.value();
}

bool SameStructure(const Program& a, const Program& b) {
  if (&a == &b) return true;
  if (a.name != b.name || a.output != b.output || a.shapes != b.shapes ||
      a.param_names != b.param_names || a.ops.size() != b.ops.size()) {
    return false;
  }
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const Op& x = a.ops[i];
    const Op& y = b.ops[i];
    if (x.kind != y.kind || x.output != y.output || !SameNumbers(x.inputs, y.inputs) ||
        x.site != y.site || x.scope != y.scope || x.name != y.name || x.schedule != y.schedule ||
        std::memcmp(&x.scalar, &y.scalar, sizeof(double)) != 0 || !SameNumbers(x.ints, y.ints)) {
      return false;
    }
    if (x.kind == OpKind::kCheckpoint && !(x.policy == y.policy)) return false;
    if ((x.body == nullptr) != (y.body == nullptr)) return false;
    if (x.body && x.body != y.body && !SameStructure(*x.body, *y.body)) return false;
  }
  return true;
}

}  // namespace remat
