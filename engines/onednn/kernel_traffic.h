// The bytes each kernel call reads and writes, recorded per kernel, for a
// profile of where an engine's time outside its matmuls goes: a pass that
// moves its bytes at less than the machine's streaming rate has room; one at
// it has none, and neither has an engine that runs it.
#ifndef REMAT_ENGINES_ONEDNN_KERNEL_TRAFFIC_H_
#define REMAT_ENGINES_ONEDNN_KERNEL_TRAFFIC_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "engines/api/kernels.h"
#include "engines/api/tensor.h"

namespace remat {

// One kernel's calls: how many, and the bytes of their operands (read) and
// outputs (written), each tensor counted whole (a view by its own
// elements, not its buffer's). That is what a pass touching each element
// once moves: exact for elementwise kernels and copies, more than a gather
// (embedding) reads of its table, less than a matmul's re-reads.
struct KernelTraffic {
  int64_t calls = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t bytes() const { return bytes_read + bytes_written; }
  bool operator==(const KernelTraffic&) const = default;
};
// By the kernel's name (KernelDef::name: "matmul", "gelu_backward").
using KernelTrafficByName = std::map<std::string, KernelTraffic>;

// Records the kernel calls OneDnnKernels runs on the calling thread while
// the recorder lives (not dry runs' calls, which move no data). Recorders
// nest: every enclosing one records too. Not shared across threads: create,
// use and destroy on one thread, innermost first (as MatMulRecorder).
//
//   KernelTrafficRecorder recorder;
//   eager->ValueAndGrad(program, inputs, wrt, options);
//   recorder.traffic().at("add").bytes_written;
class KernelTrafficRecorder {
 public:
  KernelTrafficRecorder();
  ~KernelTrafficRecorder();
  KernelTrafficRecorder(const KernelTrafficRecorder&) = delete;
  KernelTrafficRecorder& operator=(const KernelTrafficRecorder&) = delete;

  const KernelTrafficByName& traffic() const { return traffic_; }

 private:
  friend struct KernelTrafficRecorderAccess;
  KernelTrafficRecorder* outer_;
  KernelTrafficByName traffic_;
};

namespace kernel_traffic_internal {
// Whether a recorder is live on this thread (one thread-local load).
bool Recording();
// Called by OneDnnKernels for every kernel call it runs, when Recording().
void NoteKernelCall(KernelOp op, std::span<const Tensor* const> operands, const Tensor& out);
}  // namespace kernel_traffic_internal

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_KERNEL_TRAFFIC_H_
