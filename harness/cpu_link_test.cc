#include "harness/cpu_link.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace remat {
namespace {

TEST(CpuLinkTest, MeasuresARoundTripBetweenTwoCpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const std::optional<double> ns = CpuLinkRoundTripNs();
  if (CPU_COUNT(&set) < 2) {
    EXPECT_FALSE(ns) << "one CPU: no pair to measure";
    return;
  }
  ASSERT_TRUE(ns);
  // A cache line crosses between two cores in tens to hundreds of ns, and
  // in milliseconds when a busy machine makes the threads wait for their
  // CPUs; a reading of 0 or of seconds would be a broken clock or a thread
  // not running at all.
  EXPECT_GT(*ns, 1.0);
  EXPECT_LT(*ns, 1e9);
  // The caller's own mask is untouched.
  cpu_set_t after;
  CPU_ZERO(&after);
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&set, &after));
}

TEST(CpuLinkTest, OnOneCpuThereIsNothingToMeasure) {
  cpu_set_t saved;
  CPU_ZERO(&saved);
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  // In a thread of its own restricted to one CPU (sched_getaffinity(0)
  // reads the calling thread's mask).
  std::optional<double> ns = 1.0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    ns = CpuLinkRoundTripNs();
  }).join();
  EXPECT_FALSE(ns);
}

TEST(CpuLinkTest, ApartIsJudgedAgainstTheLeastRoundTrip) {
  EXPECT_FALSE(CpusApart(320, 0)) << "nothing seen yet: no judgement";
  EXPECT_FALSE(CpusApart(60, 52));
  EXPECT_FALSE(CpusApart(2 * 52, 52));
  EXPECT_TRUE(CpusApart(320, 52));
}

TEST(CpuLinkTest, TheMonitorReadsEverySoOftenAndKeepsTheLeast) {
  CpuLinkMonitor monitor;
  EXPECT_EQ(monitor.least_ns(), 0);
  monitor.Saw(0);  // another process that read nothing
  EXPECT_EQ(monitor.least_ns(), 0);
  const double first = monitor.Reading();
  if (first == 0) GTEST_SKIP() << "one CPU here: nothing to read";
  EXPECT_EQ(monitor.least_ns(), first);
  // Within the period: the same reading, not a new one.
  EXPECT_EQ(monitor.Reading(), first);
  monitor.Saw(first / 10);
  EXPECT_EQ(monitor.least_ns(), first / 10);
  monitor.Saw(first);
  EXPECT_EQ(monitor.least_ns(), first / 10);
  // After the period a new reading, which may be lower still (the first
  // may have waited for a busy CPU).
  std::this_thread::sleep_for(CpuLinkMonitor::kCpuLinkPeriod);
  const double second = monitor.Reading();
  EXPECT_GT(second, 0);
  EXPECT_EQ(monitor.least_ns(), std::min(first / 10, second));
}

}  // namespace
}  // namespace remat
