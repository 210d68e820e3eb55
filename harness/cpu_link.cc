#include "harness/cpu_link.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

namespace remat {
namespace {

bool PinThisThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// One pair's mean round trip; empty if a thread could not be pinned.
std::optional<double> RoundTripNs(int a, int b) {
  // Its own cache line, so that nothing else on the line adds traffic.
  struct alignas(64) Line {
    std::atomic<int> value{0};
  };
  Line line;
  std::atomic<int> ready{0};
  std::atomic<bool> failed{false};
  double ns = 0;
  // Both pinned before either starts: a round trip is timed only between
  // the two CPUs, never while one thread still waits to be moved.
  auto start_together = [&](int cpu) {
    if (!PinThisThread(cpu)) failed = true;
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    return !failed;
  };
  std::thread ponger([&] {
    if (!start_together(b)) return;
    for (int i = 0; i < kCpuLinkRoundTrips; ++i) {
      while (line.value.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.value.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::thread pinger([&] {
    if (!start_together(a)) return;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCpuLinkRoundTrips; ++i) {
      line.value.store(2 * i + 1, std::memory_order_release);
      while (line.value.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
             .count() /
         kCpuLinkRoundTrips;
  });
  pinger.join();
  ponger.join();
  if (failed) return std::nullopt;
  return ns;
}

}  // namespace

std::optional<double> CpuLinkRoundTripNs() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return std::nullopt;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.size() < 2) return std::nullopt;
  // The first CPU against the second, the middle and the last.
  std::vector<int> others = {cpus[1], cpus[cpus.size() / 2], cpus.back()};
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  double slowest = 0;
  for (int other : others) {
    const std::optional<double> ns = RoundTripNs(cpus[0], other);
    if (!ns) return std::nullopt;
    slowest = std::max(slowest, *ns);
  }
  return slowest;
}

double CpuLinkMonitor::Reading() {
  const auto now = std::chrono::steady_clock::now();
  if (!read_ || now - last_ >= kCpuLinkPeriod) {
    last_ns_ = CpuLinkRoundTripNs().value_or(0);
    // From after the reading: it may itself have taken milliseconds.
    last_ = std::chrono::steady_clock::now();
    read_ = true;
    Saw(last_ns_);
    // The reading waited for OpenMP's threads to fall asleep: wake them, so
    // that the run after it does not pay for that (CpuLinkMonitor).
#pragma omp parallel
    {
    }
  }
  return last_ns_;
}

void CpuLinkMonitor::Saw(double ns) {
  if (!(ns > 0)) return;
  seen_.push_back(ns);
  // Once per reading (every kCpuLinkPeriod at most): tens of thousands of
  // readings in a long run, a linear selection each.
  const auto rank = seen_.begin() + static_cast<std::ptrdiff_t>(
                                         kReferenceQuantile * static_cast<double>(seen_.size() - 1));
  std::nth_element(seen_.begin(), rank, seen_.end());
  reference_ns_ = *rank;
}

}  // namespace remat
