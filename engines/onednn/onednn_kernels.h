// OneDnnKernels: remat::Kernels for f32 on oneDNN 2.6's CPU engine.
//
// Contract (on top of Kernels'):
// - dtype f32, name "onednn".
// - matmul, relu and its backward, square and its backward, add, mul and sum
//   run as oneDNN primitives; sin, cos, their backward rules and broadcast are
//   plain loops (oneDNN 2.6 has no sin or cos eltwise algorithm).
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

#include <memory>
#include <string>

#include "engines/api/kernels.h"
#include "engines/api/tensor.h"

namespace remat {

// The oneDNN library this binary runs with, e.g.
// "oneDNN 2.6.3 (cpu runtime: OpenMP)".
std::string OneDnnVersion();

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
  void DoMatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                Tensor& out) override;
  void DoRelu(const Tensor& x, Tensor& out) override;
  void DoReluBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoSin(const Tensor& x, Tensor& out) override;
  void DoCos(const Tensor& x, Tensor& out) override;
  void DoSinBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoCosBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoSquare(const Tensor& x, Tensor& out) override;
  void DoSquareBackward(const Tensor& x, const Tensor& dy, Tensor& out) override;
  void DoAdd(const Tensor& a, const Tensor& b, Tensor& out) override;
  void DoMul(const Tensor& a, const Tensor& b, Tensor& out) override;
  void DoSum(const Tensor& x, Tensor& out) override;
  void DoBroadcast(const Tensor& s, Tensor& out) override;

 private:
  // The engine, the stream and the primitive cache; defined in the .cc so
  // that users of this header do not compile dnnl.hpp.
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_ONEDNN_KERNELS_H_
