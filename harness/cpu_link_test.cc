#include "harness/cpu_link.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
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

TEST(CpuLinkTest, ApartIsJudgedAgainstTheReferenceRoundTrip) {
  EXPECT_FALSE(CpusApart(320, 0)) << "nothing seen yet: no judgement";
  EXPECT_FALSE(CpusApart(60, 52));
  EXPECT_FALSE(CpusApart(2 * 52, 52));
  EXPECT_TRUE(CpusApart(320, 52));
}

TEST(CpuLinkTest, TheMonitorReadsEverySoOften) {
  CpuLinkMonitor monitor;
  EXPECT_EQ(monitor.reference_ns(), 0);
  monitor.Saw(0);  // another process that read nothing
  EXPECT_EQ(monitor.reference_ns(), 0);
  const double first = monitor.Reading();
  if (first == 0) GTEST_SKIP() << "one CPU here: nothing to read";
  EXPECT_EQ(monitor.reference_ns(), first) << "one reading: it is the reference";
  // Within the period: the same reading, not a new one.
  EXPECT_EQ(monitor.Reading(), first);
  std::this_thread::sleep_for(CpuLinkMonitor::kCpuLinkPeriod);
  const double second = monitor.Reading();
  EXPECT_GT(second, 0);
  EXPECT_EQ(monitor.reference_ns(), std::min(first, second));
}

// The reference is the machine's usual together state, not its least
// reading: a handful of low readings among many do not move it, a state
// held for a tenth of the readings or more does.
TEST(CpuLinkTest, TheReferenceIsTheTenthPercentileOfTheReadings) {
  CpuLinkMonitor xeon;  // as on the Xeon of cpu_link.h
  for (int i = 0; i < 4; ++i) xeon.Saw(35);
  for (int i = 0; i < 996; ++i) xeon.Saw(100 + (i % 110));
  EXPECT_GE(xeon.reference_ns(), 100);
  EXPECT_LT(xeon.reference_ns(), 120);
  EXPECT_FALSE(CpusApart(205, xeon.reference_ns())) << "the usual spread is one state";
  EXPECT_TRUE(CpusApart(460, xeon.reference_ns()));

  CpuLinkMonitor epyc;  // together two thirds of the time, apart a third
  for (int i = 0; i < 300; ++i) {
    epyc.Saw(i % 3 == 2 ? 320 + i % 20 : 50 + i % 10);
  }
  EXPECT_GE(epyc.reference_ns(), 50);
  EXPECT_LT(epyc.reference_ns(), 60);
  EXPECT_TRUE(CpusApart(320, epyc.reference_ns()));
  EXPECT_FALSE(CpusApart(60, epyc.reference_ns()));

  CpuLinkMonitor rare;  // together in 5% of the readings: not its usual state
  for (int i = 0; i < 100; ++i) rare.Saw(i < 5 ? 50 : 320);
  EXPECT_EQ(rare.reference_ns(), 320);
}

// Two threads pinned to one CPU share it whole: the detector must read
// that as a shared core (a busy pair about twice one alone); the process's
// own two CPUs read as whatever they are.
TEST(CpuLinkTest, TwoThreadsOnOneCpuReadAsSharingACore) {
  const std::optional<CpuPairing> same = MeasureCpuPairing(0, 0);
  ASSERT_TRUE(same.has_value()) << "a thread could not be pinned to CPU 0";
  EXPECT_GT(same->alone_ns, 0);
  EXPECT_TRUE(same->shared_core()) << "slowdown " << same->slowdown();
  EXPECT_NE(DescribeCpuPairing(same).find("WARNING: CPUs 0 and 0 share one core (hyperthread siblings)"), std::string::npos)
      << DescribeCpuPairing(same);
  const std::optional<CpuPairing> mine = MeasureCpuPairing();
  if (mine) {
    // Whatever they are (a busy machine may read as shared): not faster
    // as a pair than alone, beyond the clock's noise.
    EXPECT_GT(mine->slowdown(), 0.8) << DescribeCpuPairing(mine);
    std::cout << DescribeCpuPairing(mine) << std::endl;
  }
}

TEST(CpuLinkTest, ThePairingsVerdict) {
  CpuPairing p{2, 3, 100, 185};  // CPUs 2 and 3, 100 ns alone, 185 as a pair
  EXPECT_TRUE(p.shared_core());
  p.together_ns = 104;
  EXPECT_FALSE(p.shared_core());
  EXPECT_EQ(DescribeCpuPairing(p), "cpus: CPUs 2 and 3 run as separate cores (a busy pair runs 1.04x one alone's time)");
  EXPECT_NE(DescribeCpuPairing(std::nullopt).find("not measured"), std::string::npos);
}

}  // namespace
}  // namespace remat
