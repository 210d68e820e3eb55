// KernelClock: the clock that times kernel calls (Kernels::kernel_seconds).
//
// Every kernel call is timed, and on the scalar chains a call's arithmetic
// takes tens of nanoseconds: two steady_clock reads a call (about 24 ns
// each through the vDSO on the machines this was written on) were a quarter
// of a compiled engine's run. Where the CPU's time-stamp counter is
// invariant and the OS keeps it as its clocksource (so it is synchronised
// across cores), the clock reads it directly (about 10 ns); elsewhere it is
// steady_clock in nanoseconds.
//
// Contract:
// - Ticks() is monotonic within a thread; a difference of two reads is a
//   duration in ticks, converted by SecondsPerTick().
// - SecondsPerTick() is measured once per process against steady_clock
//   (about 2 ms of spinning, on first use), accurate to about 0.1%.
#ifndef REMAT_ENGINES_API_KERNEL_CLOCK_H_
#define REMAT_ENGINES_API_KERNEL_CLOCK_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace remat {

class KernelClock {
 public:
  static int64_t Ticks() {
#if defined(__x86_64__) || defined(__i386__)
    if (UsesTsc()) return static_cast<int64_t>(__rdtsc());
#endif
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static double SecondsPerTick();
  // Whether Ticks() reads the time-stamp counter ("tsc") or steady_clock.
  static const char* Source() { return UsesTsc() ? "tsc" : "steady_clock"; }

 private:
  static bool UsesTsc() {
    static const bool uses = DetectTsc();
    return uses;
  }
  static bool DetectTsc();
};

// What the clock measured for one kernel over a run: the wall time of its
// calls' arithmetic and the number of calls (Kernels::kernel_times,
// Stats::kernel_times).
struct KernelTime {
  double seconds = 0;
  int64_t calls = 0;
  bool operator==(const KernelTime&) const = default;
};
// By the kernel's name (KernelDef::name: "matmul", "gelu_backward").
using KernelTimes = std::map<std::string, KernelTime>;
// The same entries, the most seconds first; ties keep the names' order.
std::vector<std::pair<std::string, KernelTime>> LargestFirst(const KernelTimes& times);

}  // namespace remat

#endif  // REMAT_ENGINES_API_KERNEL_CLOCK_H_
