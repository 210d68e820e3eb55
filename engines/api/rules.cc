#include "engines/api/rules.h"

#include "engines/api/error.h"

namespace remat {

bool IsPrimitive(OpKind kind) {
  return kind != OpKind::kCheckpoint && kind != OpKind::kScan;
}

// Rules are listed op by op: forward, what it saves, backward.
//
// matmul  y = a @ b          saves b for da, a for db
//         da = dy @ b^T, db = a^T @ dy
// relu    y = relu(x)        saves x (as JAX saves x > 0; PyTorch saves y,
//                            which would make every pre-activation free)
//         dx = dy where x > 0 (relu'(0) = 0)
// sin     y = sin(x)         saves x
//         dx = dy * cos(x)
// cos     y = cos(x)         saves x
//         dx = -(dy * sin(x))
// square  y = x^2            saves x
//         dx = dy * 2x
// add     y = a + b          saves nothing
//         da = dy, db = dy
// mul     y = a * b          saves b for da, a for db
//         da = dy * b, db = dy * a
// sum     y = sum(x)         saves nothing (x's shape is static)
//         dx = broadcast(dy)
// name    y = x              saves nothing
//         dx = dy

Saves SavesFor(OpKind kind, const std::vector<bool>& needs) {
  Saves s;
  s.inputs.assign(needs.size(), false);
  switch (kind) {
    case OpKind::kMatMul:
    case OpKind::kMul:
      s.inputs[1] = needs[0];
      s.inputs[0] = needs[1];
      break;
    case OpKind::kRelu:
    case OpKind::kSin:
    case OpKind::kCos:
    case OpKind::kSquare:
      s.inputs[0] = needs[0];
      break;
    case OpKind::kAdd:
    case OpKind::kSum:
    case OpKind::kName:
      break;
    case OpKind::kCheckpoint:
    case OpKind::kScan:
      throw Error(StrCat("SavesFor: ", OpKindName(kind), " is not a primitive op"));
  }
  return s;
}

Tensor Forward(Kernels& k, OpKind kind, const std::vector<Tensor>& in) {
  switch (kind) {
    case OpKind::kMatMul: return k.MatMul(in[0], false, in[1], false);
    case OpKind::kRelu: return k.Relu(in[0]);
    case OpKind::kSin: return k.Sin(in[0]);
    case OpKind::kCos: return k.Cos(in[0]);
    case OpKind::kSquare: return k.Square(in[0]);
    case OpKind::kAdd: return k.Add(in[0], in[1]);
    case OpKind::kMul: return k.Mul(in[0], in[1]);
    case OpKind::kSum: return k.Sum(in[0]);
    case OpKind::kName: return in[0];
    case OpKind::kCheckpoint:
    case OpKind::kScan: break;
  }
  throw Error(StrCat("Forward: ", OpKindName(kind), " is not a primitive op"));
}

std::vector<Tensor> Backward(Kernels& k, OpKind kind, const std::vector<Tensor>& in,
                             const Tensor& out, const Tensor& dout,
                             const std::vector<Shape>& in_shapes,
                             const std::vector<bool>& needs) {
  std::vector<Tensor> d(needs.size());
  switch (kind) {
    case OpKind::kMatMul:
      if (needs[0]) d[0] = k.MatMul(dout, false, in[1], true);
      if (needs[1]) d[1] = k.MatMul(in[0], true, dout, false);
      break;
    case OpKind::kRelu:
      if (needs[0]) d[0] = k.ReluBackward(in[0], dout);
      break;
    case OpKind::kSin:
      if (needs[0]) d[0] = k.SinBackward(in[0], dout);
      break;
    case OpKind::kCos:
      if (needs[0]) d[0] = k.CosBackward(in[0], dout);
      break;
    case OpKind::kSquare:
      if (needs[0]) d[0] = k.SquareBackward(in[0], dout);
      break;
    case OpKind::kAdd:
      if (needs[0]) d[0] = dout;
      if (needs[1]) d[1] = dout;
      break;
    case OpKind::kMul:
      if (needs[0]) d[0] = k.Mul(dout, in[1]);
      if (needs[1]) d[1] = k.Mul(dout, in[0]);
      break;
    case OpKind::kSum:
      if (needs[0]) d[0] = k.Broadcast(dout, in_shapes[0]);
      break;
    case OpKind::kName:
      if (needs[0]) d[0] = dout;
      break;
    case OpKind::kCheckpoint:
    case OpKind::kScan:
      throw Error(StrCat("Backward: ", OpKindName(kind), " is not a primitive op"));
  }
  return d;
}

}  // namespace remat
