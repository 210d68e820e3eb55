#include "engines/api/rules.h"

#include "engines/api/error.h"

namespace remat {

int64_t ForwardFlops(const Program& p) {
  int64_t flops = 0;
  for (const Op& op : p.ops) {
    const Shape& out = p.shapes[op.output];
    switch (op.kind) {
      case OpKind::kMatMul: {
        const Shape& a = p.shapes[op.inputs[0]];
        flops += 2 * out.num_elements() * a.dim(a.rank() - 1);
        break;
      }
      case OpKind::kSum:
        flops += p.shapes[op.inputs[0]].num_elements();
        break;
      case OpKind::kName:
      case OpKind::kTranspose:
      case OpKind::kSplitHeads:
      case OpKind::kMergeHeads:
        break;  // copies
      case OpKind::kSoftmax:
        flops += 5 * out.num_elements();  // as Kernels::Softmax counts it
        break;
      case OpKind::kLayerNorm:
        flops += 7 * out.num_elements();  // as Kernels::LayerNorm counts it
        break;
      case OpKind::kCheckpoint:
      case OpKind::kChain:
        flops += ForwardFlops(*op.body);
        break;
      case OpKind::kScan:
        flops += p.shapes[op.inputs[1]].dim(0) * ForwardFlops(*op.body);
        break;
      default:  // elementwise: one per element
        flops += out.num_elements();
    }
  }
  return flops;
}

bool IsPrimitive(OpKind kind) {
  return kind != OpKind::kCheckpoint && kind != OpKind::kScan && kind != OpKind::kChain;
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
// softmax y = softmax(x) over the last axis   saves y (as JAX's custom JVP)
//         dx = y * (dy - sum(dy * y, last axis))
// layer_norm  y = (x - mean) rstd gamma + beta, rstd = 1/sqrt(var + 1e-5)
//         saves x for dx and dgamma, gamma for dx; mean and rstd are
//         recomputed from x by the backward kernels rather than saved (the
//         IR has one output per op, and two (rows) vectors would be
//         residuals no policy could name)
//         dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma
//         dgamma = sum over rows of dy xhat, dbeta = sum over rows of dy
// gelu    y = gelu(x), tanh form   saves x
//         dx = dy * gelu'(x)
// scale   y = c x (attr scalar)    saves nothing
//         dx = c dy
// transpose  y = x with the last two axes swapped   saves nothing
//         dx = transpose(dy)
// split_heads  (B*S, D) -> (B*H, S, D/H) (attrs B, H)   saves nothing
//         dx = merge_heads(dy, B)
// merge_heads  (B*H, S, Dh) -> (B*S, H*Dh) (attr B)     saves nothing
//         dx = split_heads(dy, B, H), H = (B*H) / B from x's shape
// bias_add  y[r, j] = x[r, j] + b[j], x (..., C), b (C)   saves nothing
//         dx = dy; db = SumLeading(dy): db[j] = sum over rows r of dy[r, j],
//         summed in row order from zero, ((0 + dy[0, j]) + dy[1, j]) + ...,
//         one running sum per column in the kernels' dtype (part of the
//         bit-for-bit contract: every engine gets these bits for db)

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
    case OpKind::kGelu:
      s.inputs[0] = needs[0];
      break;
    case OpKind::kSoftmax:
      s.output = needs[0];
      break;
    case OpKind::kLayerNorm:
      s.inputs[0] = needs[0] || needs[1];
      s.inputs[1] = needs[0];
      break;
    case OpKind::kAdd:
    case OpKind::kBiasAdd:
    case OpKind::kSum:
    case OpKind::kName:
    case OpKind::kScale:
    case OpKind::kTranspose:
    case OpKind::kSplitHeads:
    case OpKind::kMergeHeads:
      break;
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      throw Error(StrCat("SavesFor: ", OpKindName(kind), " is not a primitive op"));
  }
  return s;
}

bool HasAttributes(OpKind kind) {
  return kind == OpKind::kScale || kind == OpKind::kSplitHeads || kind == OpKind::kMergeHeads;
}

namespace {

// The integer attribute i of `op`, or an error naming the op.
int64_t Int(const Op& op, size_t i) {
  if (op.ints.size() <= i) {
    throw Error(StrCat(Program::Describe(op), ": missing integer attribute ", i, " (has ",
                       op.ints.size(), ")"));
  }
  return op.ints[i];
}

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
  const OpKind kind = op.kind;
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
    case OpKind::kSoftmax: return k.Softmax(in[0]);
    case OpKind::kLayerNorm: return k.LayerNorm(in[0], in[1], in[2]);
    case OpKind::kGelu: return k.Gelu(in[0]);
    case OpKind::kScale: return k.Scale(in[0], op.scalar);
    case OpKind::kTranspose: return k.Transpose(in[0]);
    case OpKind::kSplitHeads: return k.SplitHeads(in[0], Int(op, 0), Int(op, 1));
    case OpKind::kMergeHeads: return k.MergeHeads(in[0], Int(op, 0));
    case OpKind::kBiasAdd: return k.BiasAdd(in[0], in[1]);
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain: break;
  }
  throw Error(StrCat("Forward: ", OpKindName(kind), " is not a primitive op"));
}

std::vector<Tensor> Backward(Kernels& k, const Op& op, const std::vector<Tensor>& in,
                             const Tensor& out, const Tensor& dout,
                             const std::vector<Shape>& in_shapes,
                             const std::vector<bool>& needs) {
  const OpKind kind = op.kind;
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
    case OpKind::kSoftmax:
      if (needs[0]) d[0] = k.SoftmaxBackward(out, dout);
      break;
    case OpKind::kLayerNorm:
      if (needs[0]) d[0] = k.LayerNormBackward(in[0], in[1], dout);
      if (needs[1]) d[1] = k.LayerNormGammaGrad(in[0], dout);
      if (needs[2]) d[2] = k.SumLeading(dout);
      break;
    case OpKind::kGelu:
      if (needs[0]) d[0] = k.GeluBackward(in[0], dout);
      break;
    case OpKind::kScale:
      if (needs[0]) d[0] = k.Scale(dout, op.scalar);
      break;
    case OpKind::kTranspose:
      if (needs[0]) d[0] = k.Transpose(dout);
      break;
    case OpKind::kSplitHeads:
      if (needs[0]) d[0] = k.MergeHeads(dout, Int(op, 0));
      break;
    case OpKind::kMergeHeads:
      if (needs[0]) {
        const int64_t batch = Int(op, 0);
        d[0] = k.SplitHeads(dout, batch, in_shapes[0].dim(0) / batch);
      }
      break;
    case OpKind::kBiasAdd:
      if (needs[0]) d[0] = dout;
      if (needs[1]) d[1] = k.SumLeading(dout);
      break;
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      throw Error(StrCat("Backward: ", OpKindName(kind), " is not a primitive op"));
  }
  return d;
}

}  // namespace remat
