#include "harness/kernel_replay.h"

#include <algorithm>
#include <chrono>

#include "engines/api/error.h"

namespace remat {

ReplayTimes ReplayEachAlone(Kernels& kernels, std::vector<KernelCall> calls, int repeats) {
  if (repeats < 1) throw Error(StrCat("kernel replay: ", repeats, " repeats; at least one"));
  using Clock = std::chrono::steady_clock;
  ReplayTimes times;
  std::vector<const Tensor*> operands;
  for (const KernelCall& call : calls) {
    operands.clear();
    for (const Tensor& t : call.operands) operands.push_back(&t);
    // The least of the repeats: interference only adds time.
    { const Tensor warm = kernels.Call(call.op, operands, call.attrs); }
    double least = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const Clock::time_point start = Clock::now();
      { const Tensor out = kernels.Call(call.op, operands, call.attrs); }
      least = std::min(least, std::chrono::duration<double>(Clock::now() - start).count());
    }
    ReplayTime& t = times[TableKernel(call.op).name];
    ++t.calls;
    t.seconds += least;
  }
  return times;
}

}  // namespace remat
