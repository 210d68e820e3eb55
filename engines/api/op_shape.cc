#include "engines/api/op_shape.h"

#include "engines/api/error.h"
#include "engines/api/kernels.h"

namespace remat {

int Arity(OpKind kind) {
  switch (kind) {
    case OpKind::kMatMul:
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kBiasAdd:
      return 2;
    case OpKind::kLayerNorm:
      return 3;
    case OpKind::kRelu:
    case OpKind::kSin:
    case OpKind::kCos:
    case OpKind::kSquare:
    case OpKind::kSum:
    case OpKind::kName:
    case OpKind::kSoftmax:
    case OpKind::kGelu:
    case OpKind::kScale:
    case OpKind::kTranspose:
    case OpKind::kSplitHeads:
    case OpKind::kMergeHeads:
      return 1;
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      return -1;
  }
  return -1;
}

namespace {

size_t IntsOf(OpKind kind) {
  if (kind == OpKind::kSplitHeads) return 2;
  if (kind == OpKind::kMergeHeads) return 1;
  return 0;
}

}  // namespace

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
  if (op.ints.size() != IntsOf(kind)) {
    throw Error(StrCat(OpKindName(kind), " takes ", IntsOf(kind), " integer attributes, got ",
                       op.ints.size()));
  }
  switch (kind) {
    case OpKind::kMatMul:
      return Kernels::MatMulShape(in[0], false, in[1], false);
    case OpKind::kAdd:
    case OpKind::kMul:
      if (in[0] != in[1]) {
        throw Error(StrCat("operand shapes differ: ", in[0].ToString(), " and ", in[1].ToString(),
                           " (", OpKindName(kind), " takes operands of one shape)"));
      }
      return in[0];
    case OpKind::kSum:
      return Shape();
    case OpKind::kSoftmax:
      if (in[0].rank() == 0) {
        throw Error(StrCat("works over the last axis; got the scalar ", in[0].ToString()));
      }
      return in[0];
    case OpKind::kLayerNorm:
      Kernels::CheckLayerNormShapes(in[0], in[1], in[2]);
      return in[0];
    case OpKind::kBiasAdd:
      Kernels::CheckBiasAddShapes(in[0], in[1]);
      return in[0];
    case OpKind::kTranspose:
      return Kernels::TransposeShape(in[0]);
    case OpKind::kSplitHeads:
      return Kernels::SplitHeadsShape(in[0], op.ints[0], op.ints[1]);
    case OpKind::kMergeHeads:
      return Kernels::MergeHeadsShape(in[0], op.ints[0]);
    case OpKind::kRelu:
    case OpKind::kSin:
    case OpKind::kCos:
    case OpKind::kSquare:
    case OpKind::kName:
    case OpKind::kGelu:
    case OpKind::kScale:
      return in[0];
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      break;
  }
  throw Error(StrCat(OpKindName(kind), " has no shape rule"));
}

}  // namespace remat
