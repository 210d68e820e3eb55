#include "engines/api/kernels.h"

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engines/api/buffer_hooks.h"
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

// The kernels several ops share, at their fixed ids (KernelOp): the FLOP
// model is kernels.h's, the shape rules the entry points' contracts.

const Tensor& Only(std::span<const Tensor* const> in) { return *in[0]; }

Shape SameShape(std::span<const Tensor* const> in, const KernelAttrs& attrs) {
  return SameShapeOperands(in, attrs);
}

void CheckLastAxis(const Tensor& x) {
  if (x.shape().rank() == 0) {
    throw Error(StrCat("works over the last axis; operand is the scalar ", x.TypeString()));
  }
}

Shape SameShapeWithLastAxis(std::span<const Tensor* const> in, const KernelAttrs& attrs) {
  const Shape s = SameShapeOperands(in, attrs);
  CheckLastAxis(*in[0]);
  return s;
}

Shape LastAxisOnly(std::span<const Tensor* const> in, const KernelAttrs& attrs) {
  SameShapeWithLastAxis(in, attrs);
  return Shape({in[0]->shape().dim(in[0]->shape().rank() - 1)});
}

template <int kFlopsPerElement>
int64_t PerElementOfFirst(std::span<const Tensor* const> in, const Shape&) {
  return kFlopsPerElement * in[0]->num_elements();
}

int64_t NoFlops(std::span<const Tensor* const>, const Shape&) { return 0; }

std::vector<KernelDef> SharedKernels() {
  std::vector<KernelDef> t(static_cast<size_t>(KernelOp::kFirstTableKernel));
  auto def = [&t](KernelOp op, KernelDef d) { t[static_cast<size_t>(op)] = d; };
  def(KernelOp::kMatMul,
      {"matmul", 2,
       [](std::span<const Tensor* const> in, const KernelAttrs& a) {
         return Kernels::MatMulShape(in[0]->shape(), a.transpose_a, in[1]->shape(), a.transpose_b);
       },
       // 2mkn (times the batch) = 2 * |a| * n.
       [](std::span<const Tensor* const> in, const Shape& out) {
         return 2 * in[0]->num_elements() * out.dim(out.rank() - 1);
       }});
  def(KernelOp::kRelu, {"relu", 1, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kReluBackward, {"relu_backward", 2, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kSin, {"sin", 1, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kCos, {"cos", 1, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kSinBackward, {"sin_backward", 2, SameShape, PerElementOfFirst<2>});
  def(KernelOp::kCosBackward, {"cos_backward", 2, SameShape, PerElementOfFirst<2>});
  def(KernelOp::kSquare, {"square", 1, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kSquareBackward, {"square_backward", 2, SameShape, PerElementOfFirst<2>});
  def(KernelOp::kAdd, {"add", 2, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kMul, {"mul", 2, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kSum,
      {"sum", 1, [](std::span<const Tensor* const>, const KernelAttrs&) { return Shape(); },
       PerElementOfFirst<1>});
  def(KernelOp::kBroadcast,
      {"broadcast", 1,
       [](std::span<const Tensor* const> in, const KernelAttrs& a) {
         if (in[0]->shape().rank() != 0) {
           throw Error(StrCat("operand is ", in[0]->TypeString(), ", not a scalar"));
         }
         return a.shape;
       },
       NoFlops});
  def(KernelOp::kSoftmax, {"softmax", 1, SameShapeWithLastAxis, PerElementOfFirst<5>});
  def(KernelOp::kSoftmaxBackward,
      {"softmax_backward", 2, SameShapeWithLastAxis, PerElementOfFirst<4>});
  def(KernelOp::kLayerNorm,
      {"layer_norm", 3,
       [](std::span<const Tensor* const> in, const KernelAttrs& a) {
         Kernels::CheckLayerNormShapes(in[0]->shape(), in[1]->shape(), in[2]->shape());
         Kernels::CheckLayerNormEps(a.scalar);
         return in[0]->shape();
       },
       PerElementOfFirst<7>});
  // (x, gamma, dy)
  def(KernelOp::kLayerNormBackward,
      {"layer_norm_backward", 3,
       [](std::span<const Tensor* const> in, const KernelAttrs& a) {
         if (in[0]->shape() != in[2]->shape()) {
           throw Error(StrCat("shapes differ: ", in[0]->TypeString(), " and ",
                              in[2]->TypeString()));
         }
         Kernels::CheckLayerNormShapes(in[0]->shape(), in[1]->shape(), in[1]->shape());
         Kernels::CheckLayerNormEps(a.scalar);
         return in[0]->shape();
       },
       PerElementOfFirst<13>});
  def(KernelOp::kLayerNormGammaGrad,
      {"layer_norm_gamma_grad", 2,
       [](std::span<const Tensor* const> in, const KernelAttrs& a) {
         Kernels::CheckLayerNormEps(a.scalar);
         return LastAxisOnly(in, a);
       },
       PerElementOfFirst<7>});
  def(KernelOp::kSumLeading,
      {"sum_leading", 1, LastAxisOnly, PerElementOfFirst<1>});
  def(KernelOp::kGelu, {"gelu", 1, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kGeluBackward, {"gelu_backward", 2, SameShape, PerElementOfFirst<2>});
  def(KernelOp::kScale, {"scale", 1, SameShape, PerElementOfFirst<1>});
  def(KernelOp::kTranspose,
      {"transpose", 1,
       [](std::span<const Tensor* const> in, const KernelAttrs&) {
         return Kernels::TransposeShape(Only(in).shape());
       },
       NoFlops});
  def(KernelOp::kSplitHeads,
      {"split_heads", 1,
       [](std::span<const Tensor* const> in, const KernelAttrs& a) {
         return Kernels::SplitHeadsShape(Only(in).shape(), a.int_a, a.int_b);
       },
       NoFlops});
  def(KernelOp::kMergeHeads,
      {"merge_heads", 1,
       [](std::span<const Tensor* const> in, const KernelAttrs& a) {
         return Kernels::MergeHeadsShape(Only(in).shape(), a.int_a);
       },
       NoFlops});
  def(KernelOp::kBiasAdd,
      {"bias_add", 2,
       [](std::span<const Tensor* const> in, const KernelAttrs&) {
         Kernels::CheckBiasAddShapes(in[0]->shape(), in[1]->shape());
         return in[0]->shape();
       },
       PerElementOfFirst<1>});
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].name == nullptr) throw Error(StrCat("kernel id ", i, " has no definition"));
  }
  return t;
}

// The shared kernels first, at their ids, so that DefineKernel's ids follow
// them whatever the order of static initialization.
std::vector<KernelDef>& Table() {
  static std::vector<KernelDef> table = SharedKernels();
  return table;
}

size_t TableIndex(KernelOp op) { return static_cast<size_t>(op); }

}  // namespace

KernelOp DefineKernel(const KernelDef& def) {
  for (const KernelDef& d : Table()) {
    if (std::string(d.name) == def.name) {
      throw Error(StrCat("kernel '", def.name, "' is defined twice"));
    }
  }
  Table().push_back(def);
  return static_cast<KernelOp>(static_cast<int>(Table().size()) - 1);
}

bool IsTableKernel(KernelOp op) {
  return static_cast<int>(op) >= 0 && TableIndex(op) < Table().size();
}

const KernelDef& TableKernel(KernelOp op) {
  if (!IsTableKernel(op)) {
    throw Error(StrCat("kernel ", static_cast<int>(op), " is not a kernel of the table"));
  }
  return Table()[TableIndex(op)];
}

std::vector<KernelOp> TableKernels() {
  std::vector<KernelOp> out;
  for (size_t i = 0; i < Table().size(); ++i) out.push_back(static_cast<KernelOp>(i));
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

Shape Kernels::CheckedOutputShape(const KernelDef& def, std::span<const Tensor* const> in,
                                  const KernelAttrs& attrs) const {
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
  try {
    return def.shape(in, attrs);
  } catch (const Error& e) {
    throw Error(StrCat(name(), " kernel ", def.name, ": ", e.what()), e);
  }
}

Tensor Kernels::Call(KernelOp op, std::span<const Tensor* const> in, const KernelAttrs& attrs) {
  const KernelDef& def = TableKernel(op);
  const Shape shape = CheckedOutputShape(def, in, attrs);
  Tensor out = NewTensor(shape);
  flops_ += def.flops(in, shape);
  // In a dry run RunTableKernel is still called where Runs() (an observer,
  // planned's compiler, records the call then), and RunImpl skips the
  // arithmetic: a table kernel allocates nothing of its own.
  if (Runs()) Timed(op, [&] { RunTableKernel(op, in, attrs, out); });
  return out;
}

namespace {

// Storage for the next buffer counted by `tracker`: `data` once, then
// none (later buffers allocate as usual).
class OneShotStorage : public BufferStorage {
 public:
  OneShotStorage(const MemoryTracker* tracker, void* data) : tracker_(tracker), data_(data) {}
  const MemoryTracker* tracker() const override { return tracker_; }
  void* Take(int64_t, Category) override { return std::exchange(data_, nullptr); }

 private:
  const MemoryTracker* tracker_;
  void* data_;
};

// Whether a and b's elements share a byte. By address, not by buffer: two
// buffers may hold the same elements (CallInto's result is a buffer of its
// own over `out`'s elements, as planned's tensors are over its arena's).
// Dry tensors have no elements.
bool Overlap(const Tensor& a, const Tensor& b) {
  if (a.raw() == nullptr || b.raw() == nullptr) return false;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.raw());
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.raw());
  return a0 < b0 + static_cast<std::uintptr_t>(b.bytes()) &&
         b0 < a0 + static_cast<std::uintptr_t>(a.bytes());
}

}  // namespace

Tensor Kernels::CallInto(KernelOp op, std::span<const Tensor* const> in, const KernelAttrs& attrs,
                         const Tensor& out) {
  const KernelDef& def = TableKernel(op);
  const Shape shape = CheckedOutputShape(def, in, attrs);
  if (!out.defined() || out.dtype() != dtype() || out.shape() != shape) {
    throw Error(StrCat(name(), " kernel ", def.name, ": the output given is ",
                       out.defined() ? out.TypeString() : "undefined", ", the kernel makes ",
                       DTypeName(dtype()), shape.ToString()));
  }
  for (size_t j = 0; j < in.size(); ++j) {
    if (Overlap(*in[j], out)) {
      throw Error(StrCat(name(), " kernel ", def.name, ": the output given shares elements with "
                         "operand ", j, " (", in[j]->TypeString(), ")"));
    }
  }
  flops_ += def.flops(in, shape);
  Tensor result = out;
  if (tracker_ != nullptr) {
    // A buffer counted as NewTensor's, over out's elements (a dry run's has
    // none, as out has none).
    OneShotStorage storage(tracker_.get(), out.dry() ? nullptr : out.raw());
    ScopedBufferStorage scope(&storage);
    result = NewTensor(shape);
  }
  if (Runs()) Timed(op, [&] { RunTableKernel(op, in, attrs, result); });
  return result;
}

double Kernels::kernel_seconds() const {
  int64_t ticks = 0;
  for (int64_t t : ticks_by_kernel_) ticks += t;
  return static_cast<double>(ticks) * KernelClock::SecondsPerTick();
}

int64_t Kernels::kernel_calls() const {
  int64_t calls = 0;
  for (int64_t c : calls_by_kernel_) calls += c;
  return calls;
}

KernelTimes Kernels::kernel_times() const {
  KernelTimes out;
  const double seconds_per_tick = KernelClock::SecondsPerTick();
  for (size_t k = 0; k < calls_by_kernel_.size(); ++k) {
    if (calls_by_kernel_[k] == 0) continue;
    out[TableKernel(static_cast<KernelOp>(k)).name] = {
        static_cast<double>(ticks_by_kernel_[k]) * seconds_per_tick, calls_by_kernel_[k]};
  }
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

void Kernels::CheckLayerNormEps(double eps_or_0) {
  const double eps = LayerNormEps(eps_or_0);
  if (!(eps > 0) || !std::isfinite(eps)) {
    throw Error(StrCat("layer_norm's eps must be positive and finite; got ", eps));
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

int KernelArity(KernelOp op) { return TableKernel(op).arity; }

// One virtual call: what a compiled engine saves against Call is its checks
// and the output's allocation (on the scalar chains, most of a call's cost
// outside the arithmetic).
void Kernels::RunInto(KernelOp op, std::span<const Tensor* const> operands,
                      const KernelAttrs& attrs, Tensor& out) {
#ifndef NDEBUG
  if (static_cast<int>(operands.size()) != KernelArity(op)) {
    throw Error(StrCat(name(), " kernel ", TableKernel(op).name, ": ", operands.size(),
                       " operands, it takes ", KernelArity(op)));
  }
  for (const Tensor* t : operands) {
    if (t->dtype() != DType::kI32) CheckOperand("(compiled call)", *t);
  }
  CheckOperand("(compiled call's output)", out);
#endif
  if (!Runs()) return;
  Timed(op, [&] { RunTableKernel(op, operands, attrs, out); });
}

}  // namespace remat
