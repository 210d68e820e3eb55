#include "engines/api/kernel_clock.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace remat {
namespace {

TEST(KernelClockTest, TicksNeverGoBack) {
  int64_t last = KernelClock::Ticks();
  for (int i = 0; i < 100000; ++i) {
    const int64_t now = KernelClock::Ticks();
    ASSERT_GE(now, last) << "read " << i << " of " << KernelClock::Source();
    last = now;
  }
}

// A sleep measured in ticks converts to at least the time slept, and not
// far more (a sleep may overrun; a wrong rate would be off by a factor).
TEST(KernelClockTest, TicksConvertToSeconds) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  const int64_t c0 = KernelClock::Ticks();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int64_t c1 = KernelClock::Ticks();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double ticked = static_cast<double>(c1 - c0) * KernelClock::SecondsPerTick();
  EXPECT_GE(ticked, 0.050 * 0.99) << KernelClock::Source();
  EXPECT_LE(ticked, wall * 1.01) << KernelClock::Source();
}

}  // namespace
}  // namespace remat
