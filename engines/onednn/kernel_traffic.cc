#include "engines/onednn/kernel_traffic.h"

namespace remat {

namespace {
// Per thread, as MatMulRecorder's: no lock on a path every kernel call takes.
thread_local KernelTrafficRecorder* t_recorder = nullptr;
}  // namespace

struct KernelTrafficRecorderAccess {
  static void Note(KernelOp op, std::span<const Tensor* const> operands, const Tensor& out) {
    int64_t read = 0;
    for (const Tensor* t : operands) read += t->bytes();
    const std::string name = TableKernel(op).name;
    for (KernelTrafficRecorder* r = t_recorder; r != nullptr; r = r->outer_) {
      KernelTraffic& k = r->traffic_[name];
      ++k.calls;
      k.bytes_read += read;
      k.bytes_written += out.bytes();
    }
  }
};

KernelTrafficRecorder::KernelTrafficRecorder() : outer_(t_recorder) { t_recorder = this; }

KernelTrafficRecorder::~KernelTrafficRecorder() { t_recorder = outer_; }

namespace kernel_traffic_internal {
bool Recording() { return t_recorder != nullptr; }
void NoteKernelCall(KernelOp op, std::span<const Tensor* const> operands, const Tensor& out) {
  if (t_recorder == nullptr) return;
  KernelTrafficRecorderAccess::Note(op, operands, out);
}
}  // namespace kernel_traffic_internal

}  // namespace remat
