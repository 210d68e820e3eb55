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
#include <vector>

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

// One kernel call as it ran: enough to run it again (Kernels::Call(op,
// operands, attrs)) on the same values: copies of its operands, counted by
// no tracker.
struct KernelCall {
  KernelOp op;
  std::vector<Tensor> operands;
  KernelAttrs attrs;
};

// One kernel call as it ran, without its values: its kernel and attributes,
// its operands' and output's shapes and where their elements were
// (Tensor::raw(): the buffer's address plus the view's offset), so that a
// replay can run it again on buffers that alias as the run's did (the same
// buffer where the run read or wrote the same one).
struct KernelCallSite {
  KernelOp op;
  KernelAttrs attrs;
  std::vector<Shape> operand_shapes;
  std::vector<const void*> operand_data;
  Shape out_shape;
  const void* out_data = nullptr;
};

// The contractions: matmul and the convolutions (forward, with or without
// bias, backward data, backward weights). Their time is arithmetic, not
// bytes: the bench's bound (harness/bench_matmul_bound.h) times them alone,
// and the stream floor (harness/stream_rate.h) counts every other kernel.
bool IsContraction(KernelOp op);
bool IsContraction(const std::string& kernel_name);

// Records the kernel calls OneDnnKernels runs on the calling thread while
// the recorder lives (not dry runs' calls, which move no data). Recorders
// nest: every enclosing one records too. Not shared across threads: create,
// use and destroy on one thread, innermost first (as MatMulRecorder).
//
//   KernelTrafficRecorder recorder;
//   eager->ValueAndGrad(program, inputs, wrt, options);
//   recorder.traffic().at("add").bytes_written;
//
// With KeepCalls::kYes it also keeps every call (calls(), in the order they
// ran), copies of its operands included, for a replay of each one alone
// (engine_loop's "alone, in cache" column). The copies cost the recorded
// run time and memory: not for a timed run. With KeepCalls::kContractionSites
// it keeps each contraction's KernelCallSite instead (sites(), in order):
// shapes and addresses, no copies.
class KernelTrafficRecorder {
 public:
  enum class KeepCalls { kNo, kYes, kContractionSites };
  explicit KernelTrafficRecorder(KeepCalls keep = KeepCalls::kNo);
  ~KernelTrafficRecorder();
  KernelTrafficRecorder(const KernelTrafficRecorder&) = delete;
  KernelTrafficRecorder& operator=(const KernelTrafficRecorder&) = delete;

  const KernelTrafficByName& traffic() const { return traffic_; }
  // Empty unless constructed with KeepCalls::kYes.
  const std::vector<KernelCall>& calls() const { return calls_; }
  // Empty unless constructed with KeepCalls::kContractionSites.
  const std::vector<KernelCallSite>& sites() const { return sites_; }

 private:
  friend struct KernelTrafficRecorderAccess;
  KernelTrafficRecorder* outer_;
  KeepCalls keep_;
  KernelTrafficByName traffic_;
  std::vector<KernelCall> calls_;
  std::vector<KernelCallSite> sites_;
};

namespace kernel_traffic_internal {
// Whether a recorder is live on this thread (one thread-local load).
bool Recording();
// Called by OneDnnKernels for every kernel call it runs, when Recording().
void NoteKernelCall(KernelOp op, std::span<const Tensor* const> operands,
                    const KernelAttrs& attrs, const Tensor& out);
}  // namespace kernel_traffic_internal

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_KERNEL_TRAFFIC_H_
