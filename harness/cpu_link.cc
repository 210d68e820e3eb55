#include "harness/cpu_link.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
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

// The CPUs this process may run on, in order.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// The throughput-bound loop: 16 chains, independent, so that the core's
// multiply and add units, not a chain's latency, bound it (a latency-bound
// loop runs as fast beside a sibling). Returns the chains' sum, which the
// caller keeps, so that the loop is not dropped.
double BusyLoop() {
  constexpr int kChains = 16;
  constexpr int kIterations = 1 << 19;
  double acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = 1.0 + 1e-3 * i;
  for (int n = 0; n < kIterations; ++n) {
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * 0.9999999 + 1e-7;
  }
  double sum = 0;
  for (double a : acc) sum += a;
  return sum;
}

// The loop on each of `cpus` at once, each thread pinned first: the ns from
// the first thread's start to the last one's end (two threads time-sliced
// on one CPU each run alone in their slices: only the span shows they
// shared it), or empty if one could not be pinned.
std::optional<double> BusyNs(const std::vector<int>& cpus) {
  using Clock = std::chrono::steady_clock;
  std::atomic<int> ready{0};
  std::atomic<bool> failed{false};
  std::vector<Clock::time_point> starts(cpus.size()), ends(cpus.size());
  std::vector<double> sums(cpus.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cpus.size(); ++i) {
    threads.emplace_back([&, i] {
      if (!PinThisThread(cpus[i])) failed = true;
      ready.fetch_add(1);
      while (ready.load() < static_cast<int>(cpus.size())) {
      }
      if (failed) return;
      starts[i] = Clock::now();
      sums[i] = BusyLoop();
      ends[i] = Clock::now();
    });
  }
  for (std::thread& t : threads) t.join();
  if (failed) return std::nullopt;
  volatile double keep = 0;
  for (double s : sums) keep = keep + s;
  return std::chrono::duration<double, std::nano>(*std::max_element(ends.begin(), ends.end()) -
                                                  *std::min_element(starts.begin(), starts.end()))
      .count();
}

}  // namespace

std::optional<CpuPairing> MeasureCpuPairing(int a, int b, int tries) {
  CpuPairing p;
  p.first_cpu = a;
  p.second_cpu = b;
  double alone_a = 0, alone_b = 0;
  for (int t = 0; t < tries; ++t) {
    // Each CPU alone as well: another process busy on one of them slows
    // the pair too, and is not a shared core (it slows that CPU alone).
    const std::optional<double> on_a = BusyNs({a});
    const std::optional<double> on_b = BusyNs({b});
    const std::optional<double> together = BusyNs({a, b});
    if (!on_a || !on_b || !together) return std::nullopt;
    alone_a = t == 0 ? *on_a : std::min(alone_a, *on_a);
    alone_b = t == 0 ? *on_b : std::min(alone_b, *on_b);
    p.together_ns = t == 0 ? *together : std::min(p.together_ns, *together);
  }
  p.alone_ns = std::max(alone_a, alone_b);
  return p;
}

std::optional<CpuPairing> MeasureCpuPairing() {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) return std::nullopt;
  return MeasureCpuPairing(cpus[0], cpus[1]);
}

std::string DescribeCpuPairing(const std::optional<CpuPairing>& p) {
  if (!p) return "cpus: one CPU, or a thread could not be pinned: whether two share a core, not measured";
  char slowdown[32];
  std::snprintf(slowdown, sizeof slowdown, "%.2fx", p->slowdown());
  const std::string pair = "CPUs " + std::to_string(p->first_cpu) + " and " + std::to_string(p->second_cpu);
  if (p->shared_core()) {
    return "cpus: WARNING: " + pair + " share one core (hyperthread siblings), or other work kept them busy: "
           "a busy pair ran " + slowdown + " slower than either alone, at best of " +
           std::to_string(kCpuPairTries) + " tries; absolute times are then those of one core, about half "
           "of two cores', and ratios between rows that use both threads differently are not two cores' ratios";
  }
  return "cpus: " + pair + " run as separate cores (a busy pair runs " + slowdown + " one alone's time)";
}

std::optional<double> CpuLinkRoundTripNs() {
  const std::vector<int> cpus = AllowedCpus();
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
