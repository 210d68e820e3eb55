#include "engines/onednn/kernel_traffic.h"

namespace remat {

namespace {
// Per thread, as MatMulRecorder's: no lock on a path every kernel call takes.
thread_local KernelTrafficRecorder* t_recorder = nullptr;
}  // namespace

bool IsContraction(const std::string& kernel_name) {
  return kernel_name == "matmul" || kernel_name == "conv2d" || kernel_name == "conv2d_bias" ||
         kernel_name == "conv2d_backward_data" || kernel_name == "conv2d_backward_weights";
}

bool IsContraction(KernelOp op) { return IsContraction(TableKernel(op).name); }

struct KernelTrafficRecorderAccess {
  static void Note(KernelOp op, std::span<const Tensor* const> operands, const KernelAttrs& attrs,
                   const Tensor& out) {
    int64_t read = 0;
    for (const Tensor* t : operands) read += t->bytes();
    const std::string name = TableKernel(op).name;
    for (KernelTrafficRecorder* r = t_recorder; r != nullptr; r = r->outer_) {
      KernelTraffic& k = r->traffic_[name];
      ++k.calls;
      k.bytes_read += read;
      k.bytes_written += out.bytes();
      if (r->keep_ == KernelTrafficRecorder::KeepCalls::kYes) {
        KernelCall& call = r->calls_.emplace_back(KernelCall{op, {}, attrs});
        // Copies, untracked: the run's tensors must die with the run (an
        // engine checks that its tracker ends with only its Result live),
        // and a later in-place kernel may overwrite them.
        for (const Tensor* t : operands) call.operands.push_back(Copy(*t));
      } else if (r->keep_ == KernelTrafficRecorder::KeepCalls::kContractionSites &&
                 IsContraction(name)) {
        KernelCallSite& site = r->sites_.emplace_back();
        site.op = op;
        site.attrs = attrs;
        for (const Tensor* t : operands) {
          site.operand_shapes.push_back(t->shape());
          site.operand_data.push_back(t->raw());
        }
        site.out_shape = out.shape();
        site.out_data = out.raw();
      }
    }
  }
};

KernelTrafficRecorder::KernelTrafficRecorder(KeepCalls keep) : outer_(t_recorder), keep_(keep) {
  t_recorder = this;
}

KernelTrafficRecorder::~KernelTrafficRecorder() { t_recorder = outer_; }

namespace kernel_traffic_internal {
bool Recording() { return t_recorder != nullptr; }
void NoteKernelCall(KernelOp op, std::span<const Tensor* const> operands,
                    const KernelAttrs& attrs, const Tensor& out) {
  if (t_recorder == nullptr) return;
  KernelTrafficRecorderAccess::Note(op, operands, attrs, out);
}
}  // namespace kernel_traffic_internal

}  // namespace remat
