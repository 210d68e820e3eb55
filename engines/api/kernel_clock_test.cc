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

TEST(KernelClockTest, LargestFirstOrdersBySecondsThenName) {
  const KernelTimes times = {{"add", {0.5, 3}},
                             {"gelu", {2.0, 1}},
                             {"matmul", {0.5, 7}},
                             {"transpose", {0.0, 2}}};
  const auto sorted = LargestFirst(times);
  ASSERT_EQ(sorted.size(), 4u);
  EXPECT_EQ(sorted[0].first, "gelu");
  EXPECT_EQ(sorted[1].first, "add");  // a tie keeps the names' order
  EXPECT_EQ(sorted[1].second, (KernelTime{0.5, 3}));
  EXPECT_EQ(sorted[2].first, "matmul");
  EXPECT_EQ(sorted[3].first, "transpose");
  EXPECT_TRUE(LargestFirst({}).empty());
}

}  // namespace
}  // namespace remat
