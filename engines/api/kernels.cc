#include "engines/api/kernels.h"

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
  if (!dry_run() || AllocatesInDryRun()) DoMatMul(a, transpose_a, b, transpose_b, out);
  return out;
}

// The unary and binary wrappers differ only in their checks and FLOP weight.
#define REMAT_UNARY_KERNEL(Method, op_name, flops_per_element) \
  Tensor Kernels::Method(const Tensor& x) {                     \
    CheckOperand(op_name, x);                                   \
    Tensor out = NewTensor(x.shape());                          \
    flops_ += (flops_per_element) * x.num_elements();           \
    if (!dry_run() || AllocatesInDryRun()) Do##Method(x, out);  \
    return out;                                                 \
  }
#define REMAT_BINARY_KERNEL(Method, op_name, flops_per_element) \
  Tensor Kernels::Method(const Tensor& a, const Tensor& b) {    \
    CheckSameShape(op_name, a, b);                              \
    Tensor out = NewTensor(a.shape());                          \
    flops_ += (flops_per_element) * a.num_elements();           \
    if (!dry_run() || AllocatesInDryRun()) Do##Method(a, b, out); \
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

#undef REMAT_UNARY_KERNEL
#undef REMAT_BINARY_KERNEL

Tensor Kernels::Sum(const Tensor& x) {
  CheckOperand("sum", x);
  Tensor out = NewTensor(Shape());
  flops_ += x.num_elements();
  if (!dry_run() || AllocatesInDryRun()) DoSum(x, out);
  return out;
}

Tensor Kernels::Broadcast(const Tensor& s, const Shape& shape) {
  CheckOperand("broadcast", s);
  if (s.shape().rank() != 0) {
    throw Error(StrCat(name(), " kernel broadcast: operand is ", s.TypeString(), ", not a scalar"));
  }
  Tensor out = NewTensor(shape);
  if (!dry_run() || AllocatesInDryRun()) DoBroadcast(s, out);
  return out;
}

}  // namespace remat
