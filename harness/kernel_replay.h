// Each kernel call of a recorded run, run again alone with its operands in
// cache: the time a kernel's code takes on the run's shapes when nothing
// else is competing for the caches, beside the time it took in the run
// (Stats::kernel_times). The difference is what the data's temperature
// (operands written many kernels ago, evicted since) costs; what is left
// above the stream floor (harness/stream_rate.h) is the code's.
#ifndef REMAT_HARNESS_KERNEL_REPLAY_H_
#define REMAT_HARNESS_KERNEL_REPLAY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engines/api/kernels.h"
#include "engines/onednn/kernel_traffic.h"

namespace remat {

// One kernel's replayed calls: how many, and the sum of each call's least
// time over its timed repeats, in seconds.
struct ReplayTime {
  int64_t calls = 0;
  double seconds = 0;
};
// By the kernel's name (KernelDef::name), as KernelTrafficByName.
using ReplayTimes = std::map<std::string, ReplayTime>;

// Runs every call in `calls` (a KernelTrafficRecorder's, with KeepCalls::kYes)
// on `kernels`, one call at a time: once untimed (which brings its operands
// into cache and creates its primitive), then `repeats` times back to back,
// timed one by one (output allocation and release included, as in a run).
// Each call's least time is added to its kernel's entry. `calls` is taken
// by value: a recorder still live records the replayed calls too, and
// would grow the vector it came from. Throws remat::Error for repeats < 1,
// or whatever the kernel throws (naming it).
ReplayTimes ReplayEachAlone(Kernels& kernels, std::vector<KernelCall> calls, int repeats);

}  // namespace remat

#endif  // REMAT_HARNESS_KERNEL_REPLAY_H_
