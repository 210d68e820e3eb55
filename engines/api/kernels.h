// Kernels: the numeric primitives an engine calls, for one dtype. Every
// output is a new tensor allocated through the bound MemoryTracker, in the
// tracker's current category, so engines never allocate behind its back.
//
// Contract for implementations (engines/onednn for f32, engines/reference for
// f64):
// - The same call with the same shapes gives the same bits, every time: the
//   configuration (threads, primitive descriptors, loop order) is fixed.
// - Operands are contiguous, row-major, of this kernel set's dtype; shapes are
//   checked by the tracer before any kernel runs, and again here (a mismatch
//   throws remat::Error, never reads out of bounds).
// - Numerics follow JAX and PyTorch: relu'(0) = 0, no fast-math, no FMA
//   contraction the other engine would not do.
//
// FLOPs are counted here, once, for every engine: a matmul of (m,k)x(k,n) is
// 2mkn (times the batch); every elementwise op and every reduction is one per
// element, except the fused backward rules of sin, cos, square and gelu,
// which are two per element (a multiply by the derivative and by the
// cotangent). The transformer's kernels are counted as the elementwise ops
// and reductions they are made of, per element of their (largest) operand:
//   Softmax            5  (max, subtract, exp, sum, divide)
//   SoftmaxBackward    4  (dy*y, sum, subtract, multiply by y)
//   LayerNorm          7  (mean, subtract, square, sum, times rstd, times
//                          gamma, plus beta)
//   LayerNormBackward 13  (5 to recompute x-hat from x, dy*gamma, its sum,
//                          its product with x-hat and that sum, and 4 to
//                          combine: rstd*(g - mean(g) - xhat*mean(g*xhat)))
//   LayerNormGammaGrad 7  (5 to recompute x-hat, dy*xhat, the column sum)
//   SumLeading         1  (dbeta: the column sum of dy)
//   BiasAdd            1  (one add per element of x)
//   Gelu               1, GeluBackward 2, Scale 1
//   Transpose, SplitHeads, MergeHeads, Broadcast: 0 (copies, no arithmetic).
// The per-row scalars (1/C, rsqrt(var + eps)) are not counted, as Sum's
// final rounding is not.
#ifndef REMAT_ENGINES_API_KERNELS_H_
#define REMAT_ENGINES_API_KERNELS_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/kernel_clock.h"
#include "engines/api/error.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/tensor.h"

namespace remat {

// Every kernel is a kernel of the table (KernelDef below). These have fixed
// ids, as the engines and the compiled plans name them; their definitions
// are in kernels.cc, as several ops share them. The kernels one op calls
// take the ids from kFirstTableKernel on, in the order DefineKernel hands
// them out (engines/api/op_defs_<family>.cc, at their static
// initialization): no entry here for those.
enum class KernelOp {
  kMatMul,
  kRelu,
  kReluBackward,
  kSin,
  kCos,
  kSinBackward,
  kCosBackward,
  kSquare,
  kSquareBackward,
  kAdd,
  kMul,
  kSum,
  kBroadcast,
  kSoftmax,
  kSoftmaxBackward,
  kLayerNorm,
  kLayerNormBackward,
  kLayerNormGammaGrad,
  kSumLeading,
  kGelu,
  kGeluBackward,
  kScale,
  kTranspose,
  kSplitHeads,
  kMergeHeads,
  kBiasAdd,
  kFirstTableKernel,
};
// How many tensors a call of `op` reads.
int KernelArity(KernelOp op);

// What a kernel call takes besides its operands (Kernels::RunInto).
struct KernelAttrs {
  bool transpose_a = false, transpose_b = false;  // MatMul
  double scalar = 0;                              // Scale: c; dropout: p
  int64_t key = 0;                                // dropout: the op's stable key
  int64_t int_a = 0, int_b = 0;                   // SplitHeads: batch, heads; MergeHeads: batch;
                                                  // conv2d: stride, padding; top_k_softmax: k;
                                                  // max_pool2d: kernel, stride
  int64_t int_c = 0;                              // max_pool2d: padding; slice: step (0 is 1)
  Shape shape;                                    // Broadcast, reshape: the output's shape
  std::vector<int64_t> perm;                      // permute: output axis i is input axis perm[i]
  std::vector<int64_t> conv;                      // conv2d: Conv2dGeometry's 7 fields, in order
  std::vector<int64_t> skip;                      // none or one index: scatter_add_rows: the
                                                  // padding_idx; cross_entropy: the ignore_index
};

// conv2d's geometry as its kernels read it: KernelAttrs::conv = {stride h,
// stride w, padding h, padding w, dilation h, dilation w, groups}, or,
// where conv is empty, the square stride int_a and padding int_b.
struct Conv2dGeometry {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1,
          groups = 1;
};
inline Conv2dGeometry Conv2dGeometryOf(const KernelAttrs& a) {
  if (a.conv.empty()) return {a.int_a, a.int_a, a.int_b, a.int_b, 1, 1, 1};
  if (a.conv.size() != 7) return {0, 0, 0, 0, 0, 0, 0};  // no geometry: the shape rules refuse it
  return {a.conv[0], a.conv[1], a.conv[2], a.conv[3], a.conv[4], a.conv[5], a.conv[6]};
}

// The kernel table. A kernel is defined once, by its KernelDef: its name,
// its arity, its output shape and its FLOPs, all backend-independent (next
// to the op that calls it in engines/api/op_defs_<family>.cc, or in
// kernels.cc for the kernels several ops share). Each backend implements it
// under the same name, in its own source file (REMAT_KERNEL_IMPL, below),
// and Kernels::Call checks, allocates, counts and times every call of every
// table kernel in one place. A backend that
// lacks a kernel fails the call with an error naming both (and
// harness/op_completeness_test fails first).
//
// A table kernel allocates nothing but its output (no scratchpad): under a
// dry-run tracker its implementation is not run (RunTableKernel still is,
// where the backend AllocatesInDryRun, so that an observer sees the call).
//
// A backend whose kernel allocates a scratchpad through the tracker
// registers it with REMAT_KERNEL_IMPL_ALLOCATING: it is run under a dry-run
// tracker too, and must make the same allocations there and skip its
// arithmetic (the dry run measures the peak with the scratchpads).
struct KernelDef {
  const char* name;  // "exp": what backends implement and errors name
  int arity;
  // The output's shape, or remat::Error saying what is wrong with the
  // operands (their dtype is checked already).
  Shape (*shape)(std::span<const Tensor* const> operands, const KernelAttrs& attrs);
  // FLOPs of one call (kernels.h's model above).
  int64_t (*flops)(std::span<const Tensor* const> operands, const Shape& out);
  // Bit j set: operand j is i32 (dropout's seed); the others are the
  // backend's float dtype.
  uint32_t int_operands = 0;
};
// Adds `def` to the table and returns its id; a name defined twice throws.
// Call at static initialization: `const KernelOp kExp = DefineKernel({...})`.
KernelOp DefineKernel(const KernelDef& def);
// Whether `op` is a table kernel, and its definition (throws if it is not).
bool IsTableKernel(KernelOp op);
const KernelDef& TableKernel(KernelOp op);
// Every table kernel's id, in order.
std::vector<KernelOp> TableKernels();

// Shape and FLOP rules most table kernels share.
Shape SameShapeOperands(std::span<const Tensor* const> operands, const KernelAttrs& attrs);
int64_t OneFlopPerElement(std::span<const Tensor* const> operands, const Shape& out);

class Kernels;
// A backend's implementation of one table kernel: the arithmetic of the
// call into `out`, already allocated with the KernelDef's shape; operands
// checked. `Backend` is the concrete Kernels class.
template <typename Backend>
using KernelImplFn = void (*)(Backend& backend, std::span<const Tensor* const> operands,
                              const KernelAttrs& attrs, Tensor& out);

// The implementations one backend registered, by kernel name.
template <typename Backend>
class KernelImpls {
 public:
  struct Entry {
    const char* name;
    KernelImplFn<Backend> fn;
    bool allocates;  // REMAT_KERNEL_IMPL_ALLOCATING: run in dry runs too
  };
  static KernelImpls& Get() {
    static KernelImpls impls;
    return impls;
  }
  bool Add(const char* name, KernelImplFn<Backend> fn, bool allocates) {
    if (Find(name) != nullptr) return false;
    entries_.push_back({name, fn, allocates});
    return true;
  }
  const Entry* Find(const char* name) const {
    for (const Entry& e : entries_) {
      if (std::strcmp(e.name, name) == 0) return &e;
    }
    return nullptr;
  }
  // The implementation of table kernel `op`, or null: by id, from an index
  // built on first use (every kernel is defined and every implementation
  // registered at static initialization, before any kernel runs), so that
  // a call costs no search by name.
  const Entry* ForOp(KernelOp op) const {
    std::call_once(by_op_once_, [this] {
      for (KernelOp k : TableKernels()) by_op_.push_back(Find(TableKernel(k).name));
    });
    const size_t i = static_cast<size_t>(op);
    return i < by_op_.size() ? by_op_[i] : nullptr;
  }

 private:
  std::vector<Entry> entries_;
  mutable std::once_flag by_op_once_;
  mutable std::vector<const Entry*> by_op_;
};

// In a backend's source file: REMAT_KERNEL_IMPL(OneDnnKernels, exp, fn)
// registers fn as OneDnnKernels' implementation of the table kernel "exp";
// REMAT_KERNEL_IMPL_ALLOCATING, one whose scratchpad the tracker counts
// (KernelDef's comment).
#define REMAT_KERNEL_IMPL(Backend, kernel_name, fn)                          \
  [[maybe_unused]] static const bool remat_kernel_impl_##Backend##_##kernel_name = \
      ::remat::KernelImpls<Backend>::Get().Add(#kernel_name, fn, false)
#define REMAT_KERNEL_IMPL_ALLOCATING(Backend, kernel_name, fn)               \
  [[maybe_unused]] static const bool remat_kernel_impl_##Backend##_##kernel_name = \
      ::remat::KernelImpls<Backend>::Get().Add(#kernel_name, fn, true)

class Kernels {
 public:
  virtual ~Kernels() = default;

  virtual DType dtype() const = 0;
  virtual std::string name() const = 0;

  // The tracker outputs are counted by (null: uncounted), for one run.
  void Bind(std::shared_ptr<MemoryTracker> tracker) { tracker_ = std::move(tracker); }
  const std::shared_ptr<MemoryTracker>& tracker() const { return tracker_; }

  // For engines that compile their calls ahead of the run (engines/planned):
  // the arithmetic of one call of `op` on `operands` (as many as the entry
  // point above takes, in its order) into `out`, a tensor the engine made
  // (a place in its arena, or a Buffer through the tracker) of the dtype and
  // shape the entry point would have allocated. Nothing is checked (that is
  // what compiling saves): the caller vouches that the same call, with
  // operands of the same shapes and dtype, passed the entry point's checks
  // when it compiled it. Nothing is allocated here but the kernel's own
  // scratchpad; `out` is counted by whoever made it (CONTRACT.md section
  // 4). The call is timed and counted as any; its FLOPs are not counted (a
  // compiled plan has them). Debug builds (no NDEBUG) check the operands'
  // number and dtype and out's dtype.
  void RunInto(KernelOp op, std::span<const Tensor* const> operands, const KernelAttrs& attrs,
               Tensor& out);

  // A call of table kernel `op` (DefineKernel): operands checked (count,
  // dtype), the output allocated with the KernelDef's shape and counted,
  // FLOPs counted, the backend's implementation run and timed.
  Tensor Call(KernelOp op, std::initializer_list<const Tensor*> operands,
              const KernelAttrs& attrs = {}) {
    return Call(op, std::span<const Tensor* const>(operands.begin(), operands.size()), attrs);
  }
  Tensor Call(KernelOp op, std::span<const Tensor* const> operands, const KernelAttrs& attrs = {});
  // Call, with the output's elements in `out`'s storage: for an engine that
  // wants a result in place (a scan step's cotangent written straight into
  // its slice of the stacked gradient, CONTRACT.md 3.5, as XLA updates a
  // slice in place), so that it need not be copied there. Checked as Call,
  // and `out` must be defined, of this dtype and of the shape Call would
  // allocate, and must share no element with an operand (a kernel's output
  // never aliases its operands); else remat::Error. Counted as Call: FLOPs,
  // time, calls, and memory: the result is a tensor of its own, counted in
  // the tracker as Call's output would be (the same bytes, for its life;
  // memory is accounted by allocation, as planned's in-place stacking is),
  // whose storage is out's elements (no new storage; it frees none). With no
  // tracker bound the result is `out` itself.
  Tensor CallInto(KernelOp op, std::span<const Tensor* const> operands, const KernelAttrs& attrs,
                  const Tensor& out);

  // FLOPs of every kernel called since the last reset.
  int64_t flops() const { return flops_; }
  void reset_flops() { flops_ = 0; }
  // Wall time spent in kernels' arithmetic (RunTableKernel) since the last
  // reset, and how many calls made it: an engine's time minus this is its
  // own overhead. What a kernel call does around its arithmetic is not in
  // it: checking operands, and allocating the output, which is the engine's
  // memory management (a malloc'd block for eager, a place in an arena for
  // planned), so that the same arithmetic takes the same time in every
  // engine (the bench's FLOP floor relies on it).
  // Both are the sums of kernel_times() (kept by kernel only, so that the
  // totals cannot disagree with the breakdown).
  double kernel_seconds() const;
  int64_t kernel_calls() const;
  // The same time and calls by table kernel, those called since the last
  // reset only: the seconds add up to kernel_seconds() and the calls to
  // kernel_calls() (up to the rounding of each conversion to seconds).
  KernelTimes kernel_times() const;
  // Whether calls are timed (RunOptions::time_kernels); calls are counted
  // either way.
  void set_timing(bool on) { timing_ = on; }
  void reset_kernel_seconds() {
    ticks_by_kernel_.assign(ticks_by_kernel_.size(), 0);
    calls_by_kernel_.assign(calls_by_kernel_.size(), 0);
  }

  // The entry points: one call of a kernel of the table each (checked,
  // allocated, counted and timed by Call).
  //
  // out = op(a) @ op(b), where op transposes the last two axes when its flag
  // is set. Rank 2: (m,k) x (k,n) -> (m,n). Rank 3: (B,m,k) x (B,k,n) ->
  // (B,m,n), batch by batch.
  Tensor MatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b) {
    KernelAttrs attrs;
    attrs.transpose_a = transpose_a;
    attrs.transpose_b = transpose_b;
    return Call(KernelOp::kMatMul, {&a, &b}, attrs);
  }
  // MatMul into `out` (CallInto).
  Tensor MatMulInto(const Tensor& out, const Tensor& a, bool transpose_a, const Tensor& b,
                    bool transpose_b) {
    KernelAttrs attrs;
    attrs.transpose_a = transpose_a;
    attrs.transpose_b = transpose_b;
    const Tensor* operands[] = {&a, &b};
    return CallInto(KernelOp::kMatMul, operands, attrs, out);
  }
  Tensor Relu(const Tensor& x) { return Call(KernelOp::kRelu, {&x}); }
  // dx = dy where x > 0, else 0, from relu's input x (relu'(0) = 0).
  Tensor ReluBackward(const Tensor& x, const Tensor& dy) {
    return Call(KernelOp::kReluBackward, {&x, &dy});
  }
  Tensor Sin(const Tensor& x) { return Call(KernelOp::kSin, {&x}); }
  Tensor Cos(const Tensor& x) { return Call(KernelOp::kCos, {&x}); }
  // dx = dy * cos(x).
  Tensor SinBackward(const Tensor& x, const Tensor& dy) {
    return Call(KernelOp::kSinBackward, {&x, &dy});
  }
  // dx = -(dy * sin(x)).
  Tensor CosBackward(const Tensor& x, const Tensor& dy) {
    return Call(KernelOp::kCosBackward, {&x, &dy});
  }
  Tensor Square(const Tensor& x) { return Call(KernelOp::kSquare, {&x}); }
  // dx = dy * 2x.
  Tensor SquareBackward(const Tensor& x, const Tensor& dy) {
    return Call(KernelOp::kSquareBackward, {&x, &dy});
  }
  // Elementwise, operands of one shape.
  Tensor Add(const Tensor& a, const Tensor& b) { return Call(KernelOp::kAdd, {&a, &b}); }
  Tensor Mul(const Tensor& a, const Tensor& b) { return Call(KernelOp::kMul, {&a, &b}); }
  // The sum of all elements, as a rank-0 tensor.
  Tensor Sum(const Tensor& x) { return Call(KernelOp::kSum, {&x}); }
  // A tensor of `shape` with every element equal to the rank-0 `s`.
  Tensor Broadcast(const Tensor& s, const Shape& shape) {
    KernelAttrs attrs;
    attrs.shape = shape;
    return Call(KernelOp::kBroadcast, {&s}, attrs);
  }

  // The transformer's kernels. "Rows" are all axes but the last, C the last.
  // softmax over the last axis, max-subtracted: y = exp(x - max) / sum.
  Tensor Softmax(const Tensor& x) { return Call(KernelOp::kSoftmax, {&x}); }
  // dx = y * (dy - sum(dy * y)) per row, from softmax's output y.
  Tensor SoftmaxBackward(const Tensor& y, const Tensor& dy) {
    return Call(KernelOp::kSoftmaxBackward, {&y, &dy});
  }
  // Layer normalization over the last axis with the biased variance:
  // y = (x - mean) * rsqrt(var + eps) * gamma + beta, gamma and beta of
  // shape (C); eps = LayerNormEps(eps_or_0) (attrs.scalar: 0, the default,
  // stands for kLayerNormEps).
  Tensor LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps_or_0 = 0) {
    return Call(KernelOp::kLayerNorm, {&x, &gamma, &beta}, ScalarAttr(eps_or_0));
  }
  // dx of LayerNorm, from its input x and gamma (mean and rstd recomputed):
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
  Tensor LayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                           double eps_or_0 = 0) {
    return Call(KernelOp::kLayerNormBackward, {&x, &gamma, &dy}, ScalarAttr(eps_or_0));
  }
  // dgamma of LayerNorm: the sum over rows of dy * xhat, shape (C).
  Tensor LayerNormGammaGrad(const Tensor& x, const Tensor& dy, double eps_or_0 = 0) {
    return Call(KernelOp::kLayerNormGammaGrad, {&x, &dy}, ScalarAttr(eps_or_0));
  }
  // The sum over rows (every axis but the last), shape (C): dbeta.
  Tensor SumLeading(const Tensor& x) { return Call(KernelOp::kSumLeading, {&x}); }
  // y = x + b on every row: y[r, j] = x[r, j] + b[j], b of shape (C).
  Tensor BiasAdd(const Tensor& x, const Tensor& b) { return Call(KernelOp::kBiasAdd, {&x, &b}); }
  // gelu, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  Tensor Gelu(const Tensor& x) { return Call(KernelOp::kGelu, {&x}); }
  // dx = dy * gelu'(x), from gelu's input x.
  Tensor GeluBackward(const Tensor& x, const Tensor& dy) {
    return Call(KernelOp::kGeluBackward, {&x, &dy});
  }
  // y = c * x (c rounded to the kernels' dtype).
  Tensor Scale(const Tensor& x, double c) {
    KernelAttrs attrs;
    attrs.scalar = c;
    return Call(KernelOp::kScale, {&x}, attrs);
  }
  // Swaps the last two axes of a rank-2 or rank-3 tensor.
  Tensor Transpose(const Tensor& x) { return Call(KernelOp::kTranspose, {&x}); }
  // (B*S, D) -> (B*H, S, D/H): out[b*H + h, s, j] = x[b*S + s, h*(D/H) + j].
  Tensor SplitHeads(const Tensor& x, int64_t batch, int64_t heads) {
    KernelAttrs attrs;
    attrs.int_a = batch;
    attrs.int_b = heads;
    return Call(KernelOp::kSplitHeads, {&x}, attrs);
  }
  // The inverse: (B*H, S, Dh) -> (B*S, H*Dh).
  Tensor MergeHeads(const Tensor& x, int64_t batch) {
    KernelAttrs attrs;
    attrs.int_a = batch;
    return Call(KernelOp::kMergeHeads, {&x}, attrs);
  }

  // Output shapes, or remat::Error naming the operands and what is wrong.
  static Shape SplitHeadsShape(const Shape& x, int64_t batch, int64_t heads);
  static Shape MergeHeadsShape(const Shape& x, int64_t batch);
  static Shape TransposeShape(const Shape& x);
  // Checks layer_norm's operands: x of rank >= 1, gamma and beta (C).
  static void CheckLayerNormShapes(const Shape& x, const Shape& gamma, const Shape& beta);
  // Checks layer_norm's eps (LayerNormEps(eps_or_0)): positive and finite.
  static void CheckLayerNormEps(double eps_or_0);
  // Checks bias_add's operands: x of rank >= 1, b (C).
  static void CheckBiasAddShapes(const Shape& x, const Shape& b);

  // layer_norm's default eps (nn.LayerNorm's), and the eps a layer_norm
  // kernel or op with scalar `eps_or_0` uses: that scalar, or the default
  // where it is 0 (a layer_norm op written without scalar=).
  static constexpr double kLayerNormEps = 1e-5;
  static constexpr double LayerNormEps(double eps_or_0) {
    return eps_or_0 == 0 ? kLayerNormEps : eps_or_0;
  }

  // The shape of MatMul's output, or remat::Error naming both shapes.
  static Shape MatMulShape(const Shape& a, bool transpose_a, const Shape& b, bool transpose_b);

 protected:
  static KernelAttrs ScalarAttr(double scalar) {
    KernelAttrs attrs;
    attrs.scalar = scalar;
    return attrs;
  }
  // A new output tensor of this dtype, counted by the bound tracker.
  Tensor NewTensor(const Shape& shape) const;

  // Runs table kernel `op`'s implementation into `out` (nothing checked or
  // counted here). Backends implement it with RunImpl<Backend>; a wrapper
  // that observes calls (planned's recording) overrides it.
  virtual void RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                              const KernelAttrs& attrs, Tensor& out) = 0;
  // The implementation `Backend` registered for table kernel `op`, run, or
  // remat::Error naming the kernel and the backend when it has none.
  template <typename Backend>
  void RunImpl(Backend& backend, KernelOp op, std::span<const Tensor* const> operands,
               const KernelAttrs& attrs, Tensor& out) {
    const typename KernelImpls<Backend>::Entry* impl = KernelImpls<Backend>::Get().ForOp(op);
    if (impl == nullptr) {
      throw Error(StrCat(name(), " kernels have no '", TableKernel(op).name,
                         "' kernel (REMAT_KERNEL_IMPL in the backend's source)"));
    }
    // No data in a dry run: only a kernel with a scratchpad runs, to
    // allocate it.
    if (dry_run() && !impl->allocates) return;
    impl->fn(backend, operands, attrs, out);
  }

  // Under a dry-run tracker Call and RunInto skip RunTableKernel (no
  // arithmetic), unless this returns true: then it runs, and RunImpl runs
  // the kernels registered as allocating, which skip their arithmetic
  // while making the same allocations as a real call (oneDNN's scratchpad).
  virtual bool AllocatesInDryRun() const { return false; }
  bool dry_run() const { return tracker_ && tracker_->dry_run(); }

 private:
  void CheckOperand(const char* op, const Tensor& t) const;
  // Call's checks of `in` against kernel `def`, and the output's shape.
  Shape CheckedOutputShape(const KernelDef& def, std::span<const Tensor* const> in,
                           const KernelAttrs& attrs) const;
  bool Runs() const { return !dry_run() || AllocatesInDryRun(); }

  // Runs `arithmetic`, kernel `op`'s, adding its wall time in KernelClock
  // ticks and one call to the kernel's counters.
  template <typename F>
  void Timed(KernelOp op, F&& arithmetic) {
    const size_t k = static_cast<size_t>(op);
    if (k >= calls_by_kernel_.size()) {
      // The table is complete after static initialization: this happens
      // once per kernel at most.
      ticks_by_kernel_.resize(k + 1, 0);
      calls_by_kernel_.resize(k + 1, 0);
    }
    if (!timing_) {
      arithmetic();
    } else {
      const int64_t start = KernelClock::Ticks();
      arithmetic();
      const int64_t ticks = KernelClock::Ticks() - start;
      if (ticks > 0) ticks_by_kernel_[k] += ticks;
    }
    ++calls_by_kernel_[k];
  }

  std::shared_ptr<MemoryTracker> tracker_;
  int64_t flops_ = 0;
  // Indexed by KernelOp (the table's ids are dense from 0).
  std::vector<int64_t> ticks_by_kernel_;
  std::vector<int64_t> calls_by_kernel_;
  bool timing_ = true;
};

}  // namespace remat

#endif  // REMAT_ENGINES_API_KERNELS_H_
