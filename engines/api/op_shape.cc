#include "engines/api/op_shape.h"

#include "engines/api/error.h"
#include "engines/api/op_def.h"

namespace remat {

int Arity(OpKind kind) {
  if (kind == OpKind::kCheckpoint || kind == OpKind::kScan || kind == OpKind::kChain) return -1;
  return Def(kind).arity;
}

Shape OutputShape(const Op& op, const std::vector<Shape>& in) {
  const OpKind kind = op.kind;
  const int arity = Arity(kind);
  if (arity < 0) {
    throw Error(StrCat(OpKindName(kind), " is not a primitive op: its body decides its shape"));
  }
  if (static_cast<int>(in.size()) != arity) {
    throw Error(StrCat(OpKindName(kind), " takes ", arity, arity == 1 ? " input" : " inputs",
                       ", got ", in.size()));
  }
  const OpDef& def = Def(kind);
  if (def.num_ints != kAnyNumberOfInts && op.ints.size() != static_cast<size_t>(def.num_ints)) {
    throw Error(StrCat(OpKindName(kind), " takes ", def.num_ints, " integer attributes, got ",
                       op.ints.size()));
  }
  return def.shape(op, in);
}

void CheckInputDTypes(const Op& op, const std::vector<DType>& in) {
  if (Arity(op.kind) < 0) return;
  const OpDef& def = Def(op.kind);
  for (size_t j = 0; j < in.size(); ++j) {
    const DType want = (def.int_inputs >> j) & 1 ? DType::kI32 : DType::kF32;
    if (in[j] != want) {
      throw Error(StrCat(def.name, "'s input ", j, " is ", DTypeName(in[j]), "; ", def.name,
                         " takes ", DTypeName(want), " there",
                         want == DType::kI32 ? "" : " (integer values are only read by ops that take them)"));
    }
  }
}

}  // namespace remat
