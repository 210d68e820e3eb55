// ReferenceKernels: remat::Kernels for f64 as plain, obviously correct loops.
// They are the oracle the other kernel sets are checked against, so they
// favour clarity over speed: no blocking, no threads, no library calls beyond
// <cmath>.
//
// Contract (on top of Kernels'):
// - dtype f64, name "reference".
// - Every reduction (a matmul's dot products, Sum) accumulates in index
//   order, starting from +0.0, so results are reproducible bit for bit.
// - Relu(x) = x for x > 0, NaN for NaN (propagated, payload kept), +0.0
//   otherwise (including -0.0): max(x, 0) with NaN propagation, as in JAX and
//   PyTorch, and bit for bit what OneDnnKernels produces.
// - ReluBackward(x, dy) = x > 0 ? dy : dy * 0.0: relu'(0) = 0; a NaN or
//   infinite dy where y <= 0 gives NaN, as oneDNN's eltwise backward does.
// - Softmax is max-subtracted, sums in index order; LayerNorm computes the
//   mean, then the biased variance from the centred values (two passes), in
//   index order, per row; its backward kernels recompute them the same way;
//   the row sums of dgamma and dbeta run over rows in order. Gelu is the tanh
//   form with std::tanh. Transpose, SplitHeads and MergeHeads are copies.
// - Stateless apart from the base class's tracker and FLOP count.
#ifndef REMAT_ENGINES_REFERENCE_REFERENCE_KERNELS_H_
#define REMAT_ENGINES_REFERENCE_REFERENCE_KERNELS_H_

#include <cstdint>
#include <string>

#include "engines/api/kernels.h"
#include "engines/api/tensor.h"

namespace remat {

class ReferenceKernels : public Kernels {
 public:
  DType dtype() const override { return DType::kF64; }
  std::string name() const override { return "reference"; }

 protected:
  // The table's kernels: REMAT_KERNEL_IMPL(ReferenceKernels, name, fn) in engines/reference/reference_kernels.cc.
  void RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                      const KernelAttrs& attrs, Tensor& out) override {
    RunImpl(*this, op, operands, attrs, out);
  }

 public:
  // The arithmetic of the kernels several ops share (kernels.h's KernelOp
  // ids), into `out`; registered in the table at the end of engines/reference/reference_kernels.cc.
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
  void DoGelu(const Tensor& x, Tensor& out);
  void DoGeluBackward(const Tensor& x, const Tensor& dy, Tensor& out);
  void DoScale(const Tensor& x, double c, Tensor& out);
  void DoTranspose(const Tensor& x, Tensor& out);
  void DoSplitHeads(const Tensor& x, int64_t batch, int64_t heads, Tensor& out);
  void DoMergeHeads(const Tensor& x, int64_t batch, Tensor& out);
};

}  // namespace remat

#endif  // REMAT_ENGINES_REFERENCE_REFERENCE_KERNELS_H_
