// This machine's rate for a plain elementwise pass, the yardstick for a
// kernel that moves bytes and does little arithmetic on them: a kernel at
// this rate has no room left, and an engine that runs it as a pass of its
// own cannot be faster than its bytes at this rate.
#ifndef REMAT_HARNESS_STREAM_RATE_H_
#define REMAT_HARNESS_STREAM_RATE_H_

#include <cstdint>

#include "engines/onednn/kernel_traffic.h"

namespace remat {

// The pass: out[i] = a[i] + b[i] over floats, its three arrays together
// `pass_bytes` (a third each, at least one float), split between OpenMP's
// threads in contiguous ranges (as the loop kernels split theirs), in the
// widest vectors the lanes use (lane_blocks::BestLaneIsa: ONEDNN_MAX_CPU_ISA
// caps it as it caps the kernels). Each pass takes its arrays from a pool
// of buffers of `working_set_bytes` in all (at least three arrays), in
// turn, so that its operands are where a run with that footprint would find
// its buffers: in L2, in L3 or in memory.
//
// Returns bytes a second, pass_bytes over the least time of one pass
// averaged over a batch, the batches run for at least `min_seconds` in all
// (the least: the batch no neighbour or frequency change slowed). Throws
// remat::Error for pass_bytes or working_set_bytes below 12 or above 2^36.
double StreamBytesPerSecond(int64_t pass_bytes, int64_t working_set_bytes,
                            double min_seconds = 0.05);

// The kernels besides the contractions (IsContraction: matmul and the
// convolutions) of a run (`traffic`, a KernelTrafficRecorder's)
// at this machine's stream rate: each kernel's bytes at
// StreamBytesPerSecond(its mean call's bytes, working_set_bytes), summed.
// The least time an engine that runs them as passes of their own could
// take: it counts none of their arithmetic and no thread's start or stop.
// Zero seconds and bytes where there is no such kernel. The pool is
// StreamPoolBytes(working_set_bytes).
struct StreamFloor {
  double seconds = 0;
  int64_t bytes = 0;  // the kernels' bytes (KernelTraffic::bytes) in all
};
StreamFloor NonContractionStreamFloor(const KernelTrafficByName& traffic, int64_t working_set_bytes);

// The pool the floor's passes take their arrays from for a run whose peak
// is `working_set_bytes`: at least kMinStreamPoolBytes (a run's buffers are
// not one array used over and over, even where its peak is small) and at
// most kMaxStreamPoolBytes (past the last-level cache of any machine this
// runs on, every pool is read from memory at the same rate: a larger one
// would only cost its allocation and fill).
inline constexpr int64_t kMinStreamPoolBytes = int64_t{4} << 20;
inline constexpr int64_t kMaxStreamPoolBytes = int64_t{256} << 20;
inline int64_t StreamPoolBytes(int64_t working_set_bytes) {
  return working_set_bytes < kMinStreamPoolBytes   ? kMinStreamPoolBytes
         : working_set_bytes > kMaxStreamPoolBytes ? kMaxStreamPoolBytes
                                                   : working_set_bytes;
}

}  // namespace remat

#endif  // REMAT_HARNESS_STREAM_RATE_H_
