#include "engines/planned/recording_kernels.h"

namespace remat {

// Each call is described to the observer, then computed by OneDnnKernels.

void RecordingKernels::DoMatMul(const Tensor& a, bool transpose_a, const Tensor& b,
                                bool transpose_b, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoMatMul(a, transpose_a, b, transpose_b, out);
  KernelCall call = Describe(KernelOp::kMatMul, {&a, &b}, out);
  call.attrs.transpose_a = transpose_a;
  call.attrs.transpose_b = transpose_b;
  const Observed observed(observer_, call);
  OneDnnKernels::DoMatMul(a, transpose_a, b, transpose_b, out);
}

void RecordingKernels::DoRelu(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoRelu(x, out);
  KernelCall call = Describe(KernelOp::kRelu, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoRelu(x, out);
}

void RecordingKernels::DoReluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoReluBackward(x, dy, out);
  KernelCall call = Describe(KernelOp::kReluBackward, {&x, &dy}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoReluBackward(x, dy, out);
}

void RecordingKernels::DoSin(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSin(x, out);
  KernelCall call = Describe(KernelOp::kSin, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoSin(x, out);
}

void RecordingKernels::DoCos(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoCos(x, out);
  KernelCall call = Describe(KernelOp::kCos, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoCos(x, out);
}

void RecordingKernels::DoSinBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSinBackward(x, dy, out);
  KernelCall call = Describe(KernelOp::kSinBackward, {&x, &dy}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoSinBackward(x, dy, out);
}

void RecordingKernels::DoCosBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoCosBackward(x, dy, out);
  KernelCall call = Describe(KernelOp::kCosBackward, {&x, &dy}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoCosBackward(x, dy, out);
}

void RecordingKernels::DoSquare(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSquare(x, out);
  KernelCall call = Describe(KernelOp::kSquare, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoSquare(x, out);
}

void RecordingKernels::DoSquareBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSquareBackward(x, dy, out);
  KernelCall call = Describe(KernelOp::kSquareBackward, {&x, &dy}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoSquareBackward(x, dy, out);
}

void RecordingKernels::DoAdd(const Tensor& a, const Tensor& b, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoAdd(a, b, out);
  KernelCall call = Describe(KernelOp::kAdd, {&a, &b}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoAdd(a, b, out);
}

void RecordingKernels::DoMul(const Tensor& a, const Tensor& b, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoMul(a, b, out);
  KernelCall call = Describe(KernelOp::kMul, {&a, &b}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoMul(a, b, out);
}

void RecordingKernels::DoSum(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSum(x, out);
  KernelCall call = Describe(KernelOp::kSum, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoSum(x, out);
}

void RecordingKernels::DoBroadcast(const Tensor& s, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoBroadcast(s, out);
  KernelCall call = Describe(KernelOp::kBroadcast, {&s}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoBroadcast(s, out);
}

void RecordingKernels::DoSoftmax(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSoftmax(x, out);
  KernelCall call = Describe(KernelOp::kSoftmax, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoSoftmax(x, out);
}

void RecordingKernels::DoSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSoftmaxBackward(y, dy, out);
  KernelCall call = Describe(KernelOp::kSoftmaxBackward, {&y, &dy}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoSoftmaxBackward(y, dy, out);
}

void RecordingKernels::DoLayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoLayerNorm(x, gamma, beta, out);
  KernelCall call = Describe(KernelOp::kLayerNorm, {&x, &gamma, &beta}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoLayerNorm(x, gamma, beta, out);
}

void RecordingKernels::DoLayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                           Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoLayerNormBackward(x, gamma, dy, out);
  KernelCall call = Describe(KernelOp::kLayerNormBackward, {&x, &gamma, &dy}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoLayerNormBackward(x, gamma, dy, out);
}

void RecordingKernels::DoLayerNormGammaGrad(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoLayerNormGammaGrad(x, dy, out);
  KernelCall call = Describe(KernelOp::kLayerNormGammaGrad, {&x, &dy}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoLayerNormGammaGrad(x, dy, out);
}

void RecordingKernels::DoSumLeading(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSumLeading(x, out);
  KernelCall call = Describe(KernelOp::kSumLeading, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoSumLeading(x, out);
}

void RecordingKernels::DoGelu(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoGelu(x, out);
  KernelCall call = Describe(KernelOp::kGelu, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoGelu(x, out);
}

void RecordingKernels::DoGeluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoGeluBackward(x, dy, out);
  KernelCall call = Describe(KernelOp::kGeluBackward, {&x, &dy}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoGeluBackward(x, dy, out);
}

void RecordingKernels::DoScale(const Tensor& x, double c, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoScale(x, c, out);
  KernelCall call = Describe(KernelOp::kScale, {&x}, out);
  call.attrs.scalar = c;
  const Observed observed(observer_, call);
  OneDnnKernels::DoScale(x, c, out);
}

void RecordingKernels::DoTranspose(const Tensor& x, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoTranspose(x, out);
  KernelCall call = Describe(KernelOp::kTranspose, {&x}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoTranspose(x, out);
}

void RecordingKernels::DoSplitHeads(const Tensor& x, int64_t batch, int64_t heads, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoSplitHeads(x, batch, heads, out);
  KernelCall call = Describe(KernelOp::kSplitHeads, {&x}, out);
  call.attrs.int_a = batch;
  call.attrs.int_b = heads;
  const Observed observed(observer_, call);
  OneDnnKernels::DoSplitHeads(x, batch, heads, out);
}

void RecordingKernels::DoMergeHeads(const Tensor& x, int64_t batch, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoMergeHeads(x, batch, out);
  KernelCall call = Describe(KernelOp::kMergeHeads, {&x}, out);
  call.attrs.int_a = batch;
  const Observed observed(observer_, call);
  OneDnnKernels::DoMergeHeads(x, batch, out);
}

void RecordingKernels::DoBiasAdd(const Tensor& x, const Tensor& b, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::DoBiasAdd(x, b, out);
  KernelCall call = Describe(KernelOp::kBiasAdd, {&x, &b}, out);
  const Observed observed(observer_, call);
  OneDnnKernels::DoBiasAdd(x, b, out);
}

void RecordingKernels::RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                                      const KernelAttrs& attrs, Tensor& out) {
  if (observer_ == nullptr) return OneDnnKernels::RunTableKernel(op, operands, attrs, out);
  KernelCall call;
  call.op = op;
  call.operands.assign(operands.begin(), operands.end());
  call.out = &out;
  call.attrs = attrs;
  const Observed observed(observer_, call);
  OneDnnKernels::RunTableKernel(op, operands, attrs, out);
}

}  // namespace remat
