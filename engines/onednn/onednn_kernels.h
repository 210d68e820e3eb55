// OneDnnKernels: remat::Kernels for f32 on oneDNN 2.6's CPU engine.
//
// Contract (on top of Kernels'):
// - dtype f32, name "onednn".
// - matmul, relu and its backward, square and its backward, add, mul and sum
//   run as oneDNN primitives; sin, cos, their backward rules and broadcast are
//   plain loops (oneDNN 2.6 has no sin or cos eltwise algorithm).
// - softmax and its backward are oneDNN's softmax primitives (axis: the last,
//   the operand seen as (rows, C)); gelu and its backward are
//   eltwise_gelu_tanh (the backward from gelu's input); scale is
//   eltwise_linear (alpha = c, beta = 0).
// - layer_norm, its three backward kernels (dx, dgamma, dbeta) and the
//   copies (transpose, split_heads, merge_heads) are plain f32 loops. Layer
//   normalization is not oneDNN's primitive on purpose: its backward reads the
//   mean and variance that only forward_training produces, as two more outputs
//   the one-output IR cannot carry (they would be residuals no policy names);
//   regenerating them inside the backward kernel would hide a second forward
//   pass; and its dgamma/dbeta reductions are split across threads, so their
//   order would depend on the thread count. The loops recompute mean and rstd
//   from x in a fixed order, as the reference does in f64.
// - Deterministic: every memory descriptor has an explicit plain format tag
//   (transposed operands are `ba`/`acb` views, never `any`), no runtime dims,
//   and each primitive is created once per (op, shapes, flags) and reused. The
//   same call with the same shapes gives the same bits within a process; bits
//   may differ across CPUs (oneDNN picks kernels by ISA) and OpenMP thread
//   counts.
// - oneDNN's scratchpad is in user mode: it is allocated per call as a tensor
//   counted by the bound tracker under Category::kScratchpad, and released
//   before the call returns.
// - Relu propagates NaN (oneDNN's JIT relu maps NaN to 0; this class restores
//   it) and gives +0.0 for every other x <= 0, matching ReferenceKernels.
// - Zero-element operands never reach oneDNN (some of its primitives reject
//   or crash on zero dims): outputs are left zero, a sum of nothing is 0.
// - oneDNN failures are thrown as remat::Error naming the op and the shapes.
// - Not thread-safe: one instance owns one stream and a primitive cache, and
//   serves one thread at a time.
#ifndef REMAT_ENGINES_ONEDNN_ONEDNN_KERNELS_H_
#define REMAT_ENGINES_ONEDNN_ONEDNN_KERNELS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "engines/api/kernels.h"
#include "engines/api/tensor.h"
#include "engines/onednn/platform.h"  // OneDnnVersion

namespace remat {

class OneDnnKernels : public Kernels {
 public:
  // Creates the CPU engine and its stream; throws remat::Error on failure.
  OneDnnKernels();
  ~OneDnnKernels() override;
  OneDnnKernels(const OneDnnKernels&) = delete;
  OneDnnKernels& operator=(const OneDnnKernels&) = delete;

  DType dtype() const override { return DType::kF32; }
  std::string name() const override { return "onednn"; }
  // Dry runs still create primitives, to count their scratchpads.
  bool AllocatesInDryRun() const override { return true; }

 protected:
  // The table's kernels: REMAT_KERNEL_IMPL(OneDnnKernels, name, fn) in engines/onednn/onednn_kernels.cc.
  // Each call's bytes are noted for a live KernelTrafficRecorder
  // (engines/onednn/kernel_traffic.h).
  void RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                      const KernelAttrs& attrs, Tensor& out) override;

 public:
  // The arithmetic of the kernels several ops share (kernels.h's KernelOp
  // ids), into `out`; registered in the table at the end of engines/onednn/onednn_kernels.cc.
  void DoMatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                Tensor& out);
  void DoRelu(const Tensor& x, Tensor& out);
  void DoReluBackward(const Tensor& x, const Tensor& dy, Tensor& out);
  void DoSin(const Tensor& x, Tensor& out);
  void DoCos(const Tensor& x, Tensor& out);
  void DoSinBackward(const Tensor& x, const Tensor& dy, Tensor& out);
  void DoCosBackward(const Tensor& x, const Tensor& dy, Tensor& out);
  void DoSquare(const Tensor& x, Tensor& out);
  void DoSquareBackward(const Tensor& x, const Tensor& dy, Tensor& out);
  void DoAdd(const Tensor& a, const Tensor& b, Tensor& out);
  void DoMul(const Tensor& a, const Tensor& b, Tensor& out);
  void DoSum(const Tensor& x, Tensor& out);
  void DoBroadcast(const Tensor& s, Tensor& out);
  void DoSoftmax(const Tensor& x, Tensor& out);
  void DoSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out);
  void DoLayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps_or_0,
                   Tensor& out);
  void DoLayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                           double eps_or_0, Tensor& out);
  void DoLayerNormGammaGrad(const Tensor& x, const Tensor& dy, double eps_or_0, Tensor& out);
  void DoSumLeading(const Tensor& x, Tensor& out);
  void DoBiasAdd(const Tensor& x, const Tensor& b, Tensor& out);
  // conv2d (which 0: x, w -> y, plus `bias` (O) where not null), its
  // backward data (1: dy, w -> dx) and backward weights (2: x, dy -> dw);
  // op_defs_conv.cc defines them.
  void DoConv2d(int which, const Tensor& a, const Tensor& b, const Tensor* bias,
                const Conv2dGeometry& g, Tensor& out);
  void DoGelu(const Tensor& x, Tensor& out);
  void DoGeluBackward(const Tensor& x, const Tensor& dy, Tensor& out);
  void DoScale(const Tensor& x, double c, Tensor& out);
  void DoTranspose(const Tensor& x, Tensor& out);
  void DoSplitHeads(const Tensor& x, int64_t batch, int64_t heads, Tensor& out);
  void DoMergeHeads(const Tensor& x, int64_t batch, Tensor& out);

 private:
  // One eltwise primitive forward or backward (relu, square, gelu), with
  // oneDNN's errors named: `algorithm` is a dnnl::algorithm, as an int so
  // that this header needs no dnnl.hpp.
  void Eltwise(const char* op, int algorithm, const Tensor& x, Tensor& out);
  void EltwiseBackward(const char* op, int algorithm, const Tensor& x, const Tensor& dy,
                       Tensor& out);

  // The engine, the stream and the primitive cache; defined in the .cc so
  // that users of this header do not compile dnnl.hpp.
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_ONEDNN_KERNELS_H_
