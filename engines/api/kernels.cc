#include "engines/api/kernels.h"

#include <utility>
#include <vector>

#include "engines/api/error.h"

namespace remat {

Shape Kernels::MatMulShape(const Shape& a, bool transpose_a, const Shape& b,
                           bool transpose_b) {
  const int rank = a.rank();
  if ((rank != 2 && rank != 3) || b.rank() != rank ||
      (rank == 3 && a.dim(0) != b.dim(0))) {
    throw Error(StrCat("matmul needs two rank-2 operands or two rank-3 operands with one batch; "
                       "got ", a.ToString(), " and ", b.ToString()));
  }
  const int r = rank - 2;  // the first of the two matrix axes
  const int64_t m = transpose_a ? a.dim(r + 1) : a.dim(r);
  const int64_t ka = transpose_a ? a.dim(r) : a.dim(r + 1);
  const int64_t kb = transpose_b ? b.dim(r + 1) : b.dim(r);
  const int64_t n = transpose_b ? b.dim(r) : b.dim(r + 1);
  if (ka != kb) {
    throw Error(StrCat("matmul contracting dimensions differ: ", a.ToString(),
                       transpose_a ? "^T" : "", " x ", b.ToString(), transpose_b ? "^T" : "",
                       " (", ka, " != ", kb, ")"));
  }
  return rank == 2 ? Shape({m, n}) : Shape({a.dim(0), m, n});
}

namespace {

std::vector<KernelDef>& Table() {
  static std::vector<KernelDef> table;
  return table;
}

size_t TableIndex(KernelOp op) {
  return static_cast<size_t>(op) - static_cast<size_t>(KernelOp::kFirstTableKernel);
}

}  // namespace

KernelOp DefineKernel(const KernelDef& def) {
  for (const KernelDef& d : Table()) {
    if (std::string(d.name) == def.name) {
      throw Error(StrCat("kernel '", def.name, "' is defined twice"));
    }
  }
  Table().push_back(def);
  return static_cast<KernelOp>(static_cast<int>(KernelOp::kFirstTableKernel) +
                               static_cast<int>(Table().size()) - 1);
}

bool IsTableKernel(KernelOp op) {
  return op >= KernelOp::kFirstTableKernel && TableIndex(op) < Table().size();
}

const KernelDef& TableKernel(KernelOp op) {
  if (!IsTableKernel(op)) {
    throw Error(StrCat("kernel ", static_cast<int>(op), " is not a kernel of the table"));
  }
  return Table()[TableIndex(op)];
}

std::vector<KernelOp> TableKernels() {
  std::vector<KernelOp> out;
  for (size_t i = 0; i < Table().size(); ++i) {
    out.push_back(static_cast<KernelOp>(static_cast<int>(KernelOp::kFirstTableKernel) +
                                        static_cast<int>(i)));
  }
  return out;
}

Shape SameShapeOperands(std::span<const Tensor* const> operands, const KernelAttrs&) {
  for (const Tensor* t : operands) {
    if (t->shape() != operands[0]->shape()) {
      throw Error(StrCat("shapes differ: ", operands[0]->TypeString(), " and ", t->TypeString()));
    }
  }
  return operands[0]->shape();
}

int64_t OneFlopPerElement(std::span<const Tensor* const>, const Shape& out) {
  return out.num_elements();
}

Tensor Kernels::Call(KernelOp op, std::span<const Tensor* const> in, const KernelAttrs& attrs) {
  const KernelDef& def = TableKernel(op);
  if (static_cast<int>(in.size()) != def.arity) {
    throw Error(StrCat(name(), " kernel ", def.name, ": ", in.size(), " operands, it takes ",
                       def.arity));
  }
  for (size_t j = 0; j < in.size(); ++j) {
    if ((def.int_operands >> j) & 1) {
      if (!in[j]->defined() || in[j]->dtype() != DType::kI32) {
        throw Error(StrCat(name(), " kernel ", def.name, ": operand ", j, " is ",
                           in[j]->defined() ? in[j]->TypeString() : "undefined", ", not i32"));
      }
    } else {
      CheckOperand(def.name, *in[j]);
    }
  }
  Shape shape;
  try {
    shape = def.shape(in, attrs);
  } catch (const Error& e) {
    throw Error(StrCat(name(), " kernel ", def.name, ": ", e.what()), e);
  }
  Tensor out = NewTensor(shape);
  flops_ += def.flops(in, shape);
  // In a dry run RunTableKernel is still called where Runs() (an observer,
  // planned's compiler, records the call then), and RunImpl skips the
  // arithmetic: a table kernel allocates nothing of its own.
  if (Runs()) Timed([&] { RunTableKernel(op, in, attrs, out); });
  return out;
}

Tensor Kernels::NewTensor(const Shape& shape) const {
  // Every kernel writes every element of its output.
  return Tensor::Uninitialized(dtype(), shape, tracker_);
}

void Kernels::CheckOperand(const char* op, const Tensor& t) const {
  if (!t.defined()) throw Error(StrCat(name(), " kernel ", op, ": undefined operand"));
  if (t.dtype() != dtype()) {
    throw Error(StrCat(name(), " kernel ", op, ": operand is ", t.TypeString(), ", kernels are ",
                       DTypeName(dtype())));
  }
}

void Kernels::CheckSameShape(const char* op, const Tensor& a, const Tensor& b) const {
  CheckOperand(op, a);
  CheckOperand(op, b);
  if (a.shape() != b.shape()) {
    throw Error(StrCat(name(), " kernel ", op, ": shapes differ: ", a.TypeString(), " and ",
                       b.TypeString()));
  }
}

Tensor Kernels::MatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b) {
  CheckOperand("matmul", a);
  CheckOperand("matmul", b);
  Tensor out = NewTensor(MatMulShape(a.shape(), transpose_a, b.shape(), transpose_b));
  const int r = a.shape().rank() - 2;
  const int64_t k = transpose_a ? a.shape().dim(r) : a.shape().dim(r + 1);
  flops_ += 2 * out.num_elements() * k;
  if (Runs()) Timed([&] { DoMatMul(a, transpose_a, b, transpose_b, out); });
  return out;
}

// The unary and binary wrappers differ only in their checks and FLOP weight.
#define REMAT_UNARY_KERNEL(Method, op_name, flops_per_element) \
  Tensor Kernels::Method(const Tensor& x) {                     \
    CheckOperand(op_name, x);                                   \
    Tensor out = NewTensor(x.shape());                          \
    flops_ += (flops_per_element) * x.num_elements();           \
    if (Runs()) Timed([&] { Do##Method(x, out); });             \
    return out;                                                 \
  }
#define REMAT_BINARY_KERNEL(Method, op_name, flops_per_element) \
  Tensor Kernels::Method(const Tensor& a, const Tensor& b) {    \
    CheckSameShape(op_name, a, b);                              \
    Tensor out = NewTensor(a.shape());                          \
    flops_ += (flops_per_element) * a.num_elements();           \
    if (Runs()) Timed([&] { Do##Method(a, b, out); });          \
    return out;                                                 \
  }

REMAT_UNARY_KERNEL(Relu, "relu", 1)
REMAT_UNARY_KERNEL(Sin, "sin", 1)
REMAT_UNARY_KERNEL(Cos, "cos", 1)
REMAT_UNARY_KERNEL(Square, "square", 1)
REMAT_BINARY_KERNEL(ReluBackward, "relu_backward", 1)
REMAT_BINARY_KERNEL(SinBackward, "sin_backward", 2)
REMAT_BINARY_KERNEL(CosBackward, "cos_backward", 2)
REMAT_BINARY_KERNEL(SquareBackward, "square_backward", 2)
REMAT_BINARY_KERNEL(Add, "add", 1)
REMAT_BINARY_KERNEL(Mul, "mul", 1)
REMAT_BINARY_KERNEL(GeluBackward, "gelu_backward", 2)
REMAT_UNARY_KERNEL(Gelu, "gelu", 1)

#undef REMAT_UNARY_KERNEL
#undef REMAT_BINARY_KERNEL

Tensor Kernels::Softmax(const Tensor& x) {
  CheckHasLastAxis("softmax", x);
  Tensor out = NewTensor(x.shape());
  flops_ += 5 * x.num_elements();
  if (Runs()) Timed([&] { DoSoftmax(x, out); });
  return out;
}

Tensor Kernels::SoftmaxBackward(const Tensor& y, const Tensor& dy) {
  CheckSameShape("softmax_backward", y, dy);
  CheckHasLastAxis("softmax_backward", y);
  Tensor out = NewTensor(y.shape());
  flops_ += 4 * y.num_elements();
  if (Runs()) Timed([&] { DoSoftmaxBackward(y, dy, out); });
  return out;
}

Tensor Kernels::LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  CheckOperand("layer_norm", x);
  CheckOperand("layer_norm", gamma);
  CheckOperand("layer_norm", beta);
  try {
    CheckLayerNormShapes(x.shape(), gamma.shape(), beta.shape());
  } catch (const Error& e) {
    throw Error(StrCat(name(), " kernel ", e.what()), e);
  }
  Tensor out = NewTensor(x.shape());
  flops_ += 7 * x.num_elements();
  if (Runs()) Timed([&] { DoLayerNorm(x, gamma, beta, out); });
  return out;
}

Tensor Kernels::LayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy) {
  CheckSameShape("layer_norm_backward", x, dy);
  CheckOperand("layer_norm_backward", gamma);
  try {
    CheckLayerNormShapes(x.shape(), gamma.shape(), gamma.shape());
  } catch (const Error& e) {
    throw Error(StrCat(name(), " kernel ", e.what()), e);
  }
  Tensor out = NewTensor(x.shape());
  flops_ += 13 * x.num_elements();
  if (Runs()) Timed([&] { DoLayerNormBackward(x, gamma, dy, out); });
  return out;
}

Tensor Kernels::LayerNormGammaGrad(const Tensor& x, const Tensor& dy) {
  CheckSameShape("layer_norm_gamma_grad", x, dy);
  CheckHasLastAxis("layer_norm_gamma_grad", x);
  Tensor out = NewTensor(Shape({x.shape().dim(x.shape().rank() - 1)}));
  flops_ += 7 * x.num_elements();
  if (Runs()) Timed([&] { DoLayerNormGammaGrad(x, dy, out); });
  return out;
}

Tensor Kernels::SumLeading(const Tensor& x) {
  CheckHasLastAxis("sum_leading", x);
  Tensor out = NewTensor(Shape({x.shape().dim(x.shape().rank() - 1)}));
  flops_ += x.num_elements();
  if (Runs()) Timed([&] { DoSumLeading(x, out); });
  return out;
}

Tensor Kernels::BiasAdd(const Tensor& x, const Tensor& b) {
  CheckOperand("bias_add", x);
  CheckOperand("bias_add", b);
  try {
    CheckBiasAddShapes(x.shape(), b.shape());
  } catch (const Error& e) {
    throw Error(StrCat(name(), " kernel ", e.what()), e);
  }
  Tensor out = NewTensor(x.shape());
  flops_ += x.num_elements();
  if (Runs()) Timed([&] { DoBiasAdd(x, b, out); });
  return out;
}

Tensor Kernels::Scale(const Tensor& x, double c) {
  CheckOperand("scale", x);
  Tensor out = NewTensor(x.shape());
  flops_ += x.num_elements();
  if (Runs()) Timed([&] { DoScale(x, c, out); });
  return out;
}

Tensor Kernels::Transpose(const Tensor& x) {
  CheckOperand("transpose", x);
  Shape shape;
  try {
    shape = TransposeShape(x.shape());
  } catch (const Error& e) {
    throw Error(StrCat(name(), " kernel ", e.what()), e);
  }
  Tensor out = NewTensor(shape);
  if (Runs()) Timed([&] { DoTranspose(x, out); });
  return out;
}

Tensor Kernels::SplitHeads(const Tensor& x, int64_t batch, int64_t heads) {
  CheckOperand("split_heads", x);
  Shape shape;
  try {
    shape = SplitHeadsShape(x.shape(), batch, heads);
  } catch (const Error& e) {
    throw Error(StrCat(name(), " kernel ", e.what()), e);
  }
  Tensor out = NewTensor(shape);
  if (Runs()) Timed([&] { DoSplitHeads(x, batch, heads, out); });
  return out;
}

Tensor Kernels::MergeHeads(const Tensor& x, int64_t batch) {
  CheckOperand("merge_heads", x);
  Shape shape;
  try {
    shape = MergeHeadsShape(x.shape(), batch);
  } catch (const Error& e) {
    throw Error(StrCat(name(), " kernel ", e.what()), e);
  }
  Tensor out = NewTensor(shape);
  if (Runs()) Timed([&] { DoMergeHeads(x, batch, out); });
  return out;
}

Shape Kernels::TransposeShape(const Shape& x) {
  const int r = x.rank();
  if (r != 2 && r != 3) {
    throw Error(StrCat("transpose swaps the last two axes of a rank-2 or rank-3 operand; got ",
                       x.ToString()));
  }
  std::vector<int64_t> dims(x.dims().begin(), x.dims().end());
  std::swap(dims[r - 2], dims[r - 1]);
  return Shape(dims);
}

Shape Kernels::SplitHeadsShape(const Shape& x, int64_t batch, int64_t heads) {
  if (x.rank() != 2) {
    throw Error(StrCat("split_heads takes a rank-2 (batch*seq, width) operand; got ",
                       x.ToString()));
  }
  if (batch <= 0 || heads <= 0) {
    throw Error(StrCat("split_heads of ", x.ToString(), ": batch=", batch, " and heads=", heads,
                       " must be positive"));
  }
  if (x.dim(0) % batch != 0) {
    throw Error(StrCat("split_heads of ", x.ToString(), ": batch=", batch,
                       " does not divide the ", x.dim(0), " rows (batch*seq)"));
  }
  if (x.dim(1) % heads != 0) {
    throw Error(StrCat("split_heads of ", x.ToString(), ": heads=", heads,
                       " does not divide the width ", x.dim(1)));
  }
  return Shape({batch * heads, x.dim(0) / batch, x.dim(1) / heads});
}

Shape Kernels::MergeHeadsShape(const Shape& x, int64_t batch) {
  if (x.rank() != 3) {
    throw Error(StrCat("merge_heads takes a rank-3 (batch*heads, seq, head width) operand; got ",
                       x.ToString()));
  }
  if (batch <= 0 || x.dim(0) % batch != 0) {
    throw Error(StrCat("merge_heads of ", x.ToString(), ": batch=", batch,
                       " does not divide the leading axis (batch*heads) ", x.dim(0)));
  }
  const int64_t heads = x.dim(0) / batch;
  return Shape({batch * x.dim(1), heads * x.dim(2)});
}

void Kernels::CheckLayerNormShapes(const Shape& x, const Shape& gamma, const Shape& beta) {
  if (x.rank() == 0) {
    throw Error(StrCat("layer_norm normalizes over the last axis; got a scalar ", x.ToString()));
  }
  const Shape c({x.dim(x.rank() - 1)});
  if (gamma != c || beta != c) {
    throw Error(StrCat("layer_norm of ", x.ToString(), " needs gamma and beta of shape ",
                       c.ToString(), " (the last axis); got ", gamma.ToString(), " and ",
                       beta.ToString()));
  }
}

void Kernels::CheckBiasAddShapes(const Shape& x, const Shape& b) {
  if (x.rank() == 0) {
    throw Error(StrCat("bias_add adds a bias to every row of x (..., C); got a scalar x ",
                       x.ToString()));
  }
  const Shape c({x.dim(x.rank() - 1)});
  if (b != c) {
    throw Error(StrCat("bias_add of ", x.ToString(), " needs a bias of shape ", c.ToString(),
                       " (the last axis); got ", b.ToString()));
  }
}

void Kernels::CheckHasLastAxis(const char* op, const Tensor& x) const {
  CheckOperand(op, x);
  if (x.shape().rank() == 0) {
    throw Error(StrCat(name(), " kernel ", op, ": works over the last axis; operand is the scalar ",
                       x.TypeString()));
  }
}

Tensor Kernels::Sum(const Tensor& x) {
  CheckOperand("sum", x);
  Tensor out = NewTensor(Shape());
  flops_ += x.num_elements();
  if (Runs()) Timed([&] { DoSum(x, out); });
  return out;
}

Tensor Kernels::Broadcast(const Tensor& s, const Shape& shape) {
  CheckOperand("broadcast", s);
  if (s.shape().rank() != 0) {
    throw Error(StrCat(name(), " kernel broadcast: operand is ", s.TypeString(), ", not a scalar"));
  }
  Tensor out = NewTensor(shape);
  if (Runs()) Timed([&] { DoBroadcast(s, out); });
  return out;
}

int KernelArity(KernelOp op) {
  if (op >= KernelOp::kFirstTableKernel) return TableKernel(op).arity;
  switch (op) {
    case KernelOp::kRelu:
    case KernelOp::kSin:
    case KernelOp::kCos:
    case KernelOp::kSquare:
    case KernelOp::kSum:
    case KernelOp::kBroadcast:
    case KernelOp::kSoftmax:
    case KernelOp::kSumLeading:
    case KernelOp::kGelu:
    case KernelOp::kScale:
    case KernelOp::kTranspose:
    case KernelOp::kSplitHeads:
    case KernelOp::kMergeHeads:
      return 1;
    case KernelOp::kLayerNorm:
    case KernelOp::kLayerNormBackward:
      return 3;
    case KernelOp::kMatMul:
    case KernelOp::kReluBackward:
    case KernelOp::kSinBackward:
    case KernelOp::kCosBackward:
    case KernelOp::kSquareBackward:
    case KernelOp::kAdd:
    case KernelOp::kMul:
    case KernelOp::kSoftmaxBackward:
    case KernelOp::kLayerNormGammaGrad:
    case KernelOp::kGeluBackward:
    case KernelOp::kBiasAdd:
      return 2;
    case KernelOp::kFirstTableKernel:
      break;
  }
  throw Error(StrCat("KernelArity: unknown kernel ", static_cast<int>(op)));
}

// One switch and one virtual call: what a compiled engine saves against the
// entry points is their checks and the output's allocation (on the scalar
// chains, most of a call's cost outside the arithmetic).
void Kernels::RunInto(KernelOp op, std::span<const Tensor* const> operands,
                      const KernelAttrs& attrs, Tensor& out) {
#ifndef NDEBUG
  if (static_cast<int>(operands.size()) != KernelArity(op)) {
    throw Error(StrCat(name(), " kernel ", static_cast<int>(op), ": ", operands.size(),
                       " operands, it takes ", KernelArity(op)));
  }
  for (const Tensor* t : operands) {
    if (t->dtype() != DType::kI32) CheckOperand("(compiled call)", *t);
  }
  CheckOperand("(compiled call's output)", out);
#endif
  if (!Runs()) return;
  if (op >= KernelOp::kFirstTableKernel) {
    return Timed([&] { RunTableKernel(op, operands, attrs, out); });
  }
  const Tensor& a = *operands[0];
  switch (op) {
    case KernelOp::kMatMul:
      return Timed([&] { DoMatMul(a, attrs.transpose_a, *operands[1], attrs.transpose_b, out); });
    case KernelOp::kRelu:
      return Timed([&] { DoRelu(a, out); });
    case KernelOp::kReluBackward:
      return Timed([&] { DoReluBackward(a, *operands[1], out); });
    case KernelOp::kSin:
      return Timed([&] { DoSin(a, out); });
    case KernelOp::kCos:
      return Timed([&] { DoCos(a, out); });
    case KernelOp::kSinBackward:
      return Timed([&] { DoSinBackward(a, *operands[1], out); });
    case KernelOp::kCosBackward:
      return Timed([&] { DoCosBackward(a, *operands[1], out); });
    case KernelOp::kSquare:
      return Timed([&] { DoSquare(a, out); });
    case KernelOp::kSquareBackward:
      return Timed([&] { DoSquareBackward(a, *operands[1], out); });
    case KernelOp::kAdd:
      return Timed([&] { DoAdd(a, *operands[1], out); });
    case KernelOp::kMul:
      return Timed([&] { DoMul(a, *operands[1], out); });
    case KernelOp::kSum:
      return Timed([&] { DoSum(a, out); });
    case KernelOp::kBroadcast:
      return Timed([&] { DoBroadcast(a, out); });
    case KernelOp::kSoftmax:
      return Timed([&] { DoSoftmax(a, out); });
    case KernelOp::kSoftmaxBackward:
      return Timed([&] { DoSoftmaxBackward(a, *operands[1], out); });
    case KernelOp::kLayerNorm:
      return Timed([&] { DoLayerNorm(a, *operands[1], *operands[2], out); });
    case KernelOp::kLayerNormBackward:
      return Timed([&] { DoLayerNormBackward(a, *operands[1], *operands[2], out); });
    case KernelOp::kLayerNormGammaGrad:
      return Timed([&] { DoLayerNormGammaGrad(a, *operands[1], out); });
    case KernelOp::kSumLeading:
      return Timed([&] { DoSumLeading(a, out); });
    case KernelOp::kGelu:
      return Timed([&] { DoGelu(a, out); });
    case KernelOp::kGeluBackward:
      return Timed([&] { DoGeluBackward(a, *operands[1], out); });
    case KernelOp::kScale:
      return Timed([&] { DoScale(a, attrs.scalar, out); });
    case KernelOp::kTranspose:
      return Timed([&] { DoTranspose(a, out); });
    case KernelOp::kSplitHeads:
      return Timed([&] { DoSplitHeads(a, attrs.int_a, attrs.int_b, out); });
    case KernelOp::kMergeHeads:
      return Timed([&] { DoMergeHeads(a, attrs.int_a, out); });
    case KernelOp::kBiasAdd:
      return Timed([&] { DoBiasAdd(a, *operands[1], out); });
    case KernelOp::kFirstTableKernel:
      break;
  }
  throw Error(StrCat(name(), " kernel: unknown kernel ", static_cast<int>(op)));
}

}  // namespace remat
