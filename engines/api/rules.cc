#include "engines/api/rules.h"

#include "engines/api/error.h"
#include "engines/api/op_def.h"

namespace remat {

int64_t ForwardFlops(const Program& p) {
  int64_t flops = 0;
  std::vector<Shape> in;
  for (const Op& op : p.ops) {
    switch (op.kind) {
      case OpKind::kCheckpoint:
      case OpKind::kChain:
        flops += ForwardFlops(*op.body);
        break;
      case OpKind::kScan:
        flops += p.shapes[op.inputs[1]].dim(0) * ForwardFlops(*op.body);
        break;
      default: {  // a primitive: its OpDef counts (Def throws for anything else)
        in.clear();
        for (int v : op.inputs) in.push_back(p.shapes[v]);
        flops += Def(op.kind).flops(in, p.shapes[op.output]);
      }
    }
  }
  return flops;
}

bool IsPrimitive(OpKind kind) {
  return kind != OpKind::kCheckpoint && kind != OpKind::kScan && kind != OpKind::kChain;
}

Saves SavesFor(OpKind kind, const std::vector<bool>& needs) {
  if (!IsPrimitive(kind)) {
    throw Error(StrCat("SavesFor: ", OpKindName(kind), " is not a primitive op"));
  }
  Saves s;
  s.inputs.assign(needs.size(), false);
  Def(kind).saves(needs, s);
  return s;
}

bool HasAttributes(OpKind kind) {
  if (!IsPrimitive(kind)) return false;
  const OpDef& def = Def(kind);
  return def.has_scalar || (def.num_ints != 0 && !def.optional_ints);
}

namespace {

Op Bare(OpKind kind) {
  if (HasAttributes(kind)) {
    throw Error(StrCat(OpKindName(kind),
                       " has attributes: its rules need the Op (Forward/Backward(k, op, ...)), "
                       "not only its kind"));
  }
  Op op;
  op.kind = kind;
  return op;
}

}  // namespace

Tensor Forward(Kernels& k, OpKind kind, const std::vector<Tensor>& in) {
  return Forward(k, Bare(kind), in);
}

std::vector<Tensor> Backward(Kernels& k, OpKind kind, const std::vector<Tensor>& in,
                             const Tensor& out, const Tensor& dout,
                             const std::vector<Shape>& in_shapes,
                             const std::vector<bool>& needs) {
  return Backward(k, Bare(kind), in, out, dout, in_shapes, needs);
}

Tensor Forward(Kernels& k, const Op& op, const std::vector<Tensor>& in) {
  if (!IsPrimitive(op.kind)) {
    throw Error(StrCat("Forward: ", OpKindName(op.kind), " is not a primitive op"));
  }
  return Def(op.kind).forward(k, op, in);
}

std::vector<Tensor> Backward(Kernels& k, const Op& op, const std::vector<Tensor>& in,
                             const Tensor& out, const Tensor& dout,
                             const std::vector<Shape>& in_shapes,
                             const std::vector<bool>& needs, std::span<const Tensor> into) {
  if (!IsPrimitive(op.kind)) {
    throw Error(StrCat("Backward: ", OpKindName(op.kind), " is not a primitive op"));
  }
  std::vector<Tensor> d(needs.size());
  Def(op.kind).backward(k, op, BackwardArgs{in, out, dout, in_shapes, needs, into}, d);
  return d;
}

}  // namespace remat
