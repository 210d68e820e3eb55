#include "harness/run_delay.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace remat {
namespace {

TEST(RunDelayTest, GrowsWhenThreadsOutnumberTheCpus) {
  const int64_t before = ProcessRunDelayNs();
  if (before < 0) GTEST_SKIP() << "no /proc/self/task/*/schedstat here";
  // More busy threads than CPUs: some wait on a runqueue.
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const auto start = std::chrono::steady_clock::now();
  // They stay alive until read: a thread that has exited has left
  // /proc/self/task, and its wait with it.
  std::atomic<int> done{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4 * cpus; ++t) {
    threads.emplace_back([&] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      volatile double x = 0;
      while (std::chrono::steady_clock::now() < until) x = x + 1;
      ++done;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  while (done < static_cast<int>(threads.size())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t after = ProcessRunDelayNs();
  release = true;
  for (std::thread& t : threads) t.join();
  ASSERT_GE(after, before);
  const std::optional<double> share = RunDelayShare(before, after, seconds);
  ASSERT_TRUE(share);
  EXPECT_GT(*share, kQuietRunDelay);
}

TEST(RunDelayTest, ShareIsEmptyWithoutReadingsOrTime) {
  EXPECT_FALSE(RunDelayShare(-1, 5, 1.0));
  EXPECT_FALSE(RunDelayShare(0, 5, 0.0));
  EXPECT_DOUBLE_EQ(*RunDelayShare(0, 500'000'000, 2.0), 0.25);
}

}  // namespace
}  // namespace remat
