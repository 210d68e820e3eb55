#include "engines/api/kernel_clock.h"

#include <algorithm>
#include <fstream>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace remat {

bool KernelClock::DetectTsc() {
#if defined(__x86_64__) || defined(__i386__)
  // Invariant TSC (CPUID 0x80000007, EDX bit 8): it ticks at one rate
  // whatever the core's frequency or sleep state.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) || (edx & (1u << 8)) == 0) return false;
  // And the kernel trusts it as its clock: it found the cores' counters in
  // step (a counter it marked unstable could go back when a thread moves).
  std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  return source >> name && name == "tsc";
#else
  return false;
#endif
}

double KernelClock::SecondsPerTick() {
  static const double seconds_per_tick = [] {
    if (!UsesTsc()) return 1e-9;
    // Both clocks read over the same ~2 ms: long enough that a read's
    // ~10-30 ns of jitter is 1e-5 of it.
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = Clock::now();
    const int64_t c0 = Ticks();
    Clock::time_point t1 = t0;
    while (t1 - t0 < std::chrono::milliseconds(2)) t1 = Clock::now();
    const int64_t c1 = Ticks();
    const double seconds = std::chrono::duration<double>(t1 - t0).count();
    return c1 > c0 ? seconds / static_cast<double>(c1 - c0) : 1e-9;
  }();
  return seconds_per_tick;
}

std::vector<std::pair<std::string, KernelTime>> LargestFirst(const KernelTimes& times) {
  std::vector<std::pair<std::string, KernelTime>> sorted(times.begin(), times.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.seconds > b.second.seconds;
  });
  return sorted;
}

}  // namespace remat
