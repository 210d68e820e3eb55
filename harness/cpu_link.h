// How far apart the CPUs this process runs on are: the round trip of one
// cache line between two threads pinned to two of them.
//
// On a virtual machine the hypervisor places the virtual CPUs on host cores
// and moves them every few seconds. On the 2-CPU AMD EPYC machine this
// suite is developed on, the round trip was 50-60 ns for stretches of
// seconds (the two CPUs share a cache) and 310-340 ns for others (they do
// not); gpt's eager run took 16.5 ms in the first state and 22.8 ms in the
// second, and not every engine slows alike: an engine with more parallel
// regions, or whose threads pass more data to each other, slows more, so a
// ratio of two engines' times depends on the state it was taken in. Nothing
// else the process can read (run delay, steal time, a one-CPU cache probe)
// tells the states apart.
//
//   std::optional<double> ns = CpuLinkRoundTripNs();
//   ... timed work ...
//   if (ns && CpusApart(*ns, monitor.reference_ns())) ... not the machine's usual state ...
#ifndef REMAT_HARNESS_CPU_LINK_H_
#define REMAT_HARNESS_CPU_LINK_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace remat {

// The mean round trip of one cache line, in ns, between a thread pinned to
// the first CPU this process may run on and one pinned to another (of more
// than two: to each of up to three spread over the set, the slowest pair,
// since an OpenMP barrier waits for its slowest thread), kCpuLinkRoundTrips
// round trips each. Two threads of its own a pair, not OpenMP's: those the
// system may have put on one CPU for a moment (waking one wakes it next to
// its waker), which is not where a kernel runs them; the caller's affinity
// is left as it was. Takes 0.2 to 6 ms on the machine above (starting the
// threads, and waiting for OpenMP's threads to stop spinning after a
// kernel), so callers take one every so often, not one per run. Empty where
// the process may run on one CPU only or a thread cannot be pinned.
std::optional<double> CpuLinkRoundTripNs();
inline constexpr int kCpuLinkRoundTrips = 200;

// A round trip of more than this many times the reference round trip (the
// machine's usual state with its CPUs together, below) means the CPUs were
// apart: in the two states above, 5 to 6 times; within one, less than 1.3
// times but for the odd reading taken as the hypervisor moved a CPU.
inline constexpr double kCpusApartFactor = 2.0;

// The reference round trip is this quantile of the readings seen: the
// fastest state the machine spends at least that share of its time in. Not
// the least reading: on a 2-CPU Xeon (AVX-512 with AMX) 4 of 26,979
// readings of a default run were 35 ns and 99.9% were 100-210 ns; judged
// against the least, all but those 4 samples were "apart" and the run had
// no quiet row. On the EPYC above the CPUs are together two thirds of the
// time, so this quantile is a together reading, as the least was.
inline constexpr double kReferenceQuantile = 0.1;

// Whether a round trip of `ns` means the CPUs were apart, given the
// reference round trip `reference_ns` (<= 0: none seen, so not apart).
inline bool CpusApart(double ns, double reference_ns) {
  return reference_ns > 0 && ns > kCpusApartFactor * reference_ns;
}

// Readings of CpuLinkRoundTripNs for samples taken back to back: a fresh one
// when kCpuLinkPeriod has passed since the last (the states last seconds; a
// reading costs up to a few ms), else the last again; and the reference
// round trip of all the readings the run has seen (Saw adds another
// process's). Not thread-safe: one per sampler.
//
// A fresh reading leaves OpenMP's threads asleep (it waits for them to stop
// spinning), and the run right after one took 1-1.5% longer than the runs
// after it (mlp_chain's rows, `bench --problems=mlp_chain --windows=1`);
// Reading wakes them after a fresh reading (an empty parallel region),
// which left 0.1-0.3%.
class CpuLinkMonitor {
 public:
  static constexpr std::chrono::milliseconds kCpuLinkPeriod{50};
  // The round trip to record with the next sample, in ns; 0: none read.
  double Reading();
  // The kReferenceQuantile of the readings seen (the lower of the two
  // nearest ranks), in ns; 0: none.
  double reference_ns() const { return reference_ns_; }
  // Adds a reading taken elsewhere (another window's process); <= 0: none.
  void Saw(double ns);

 private:
  std::chrono::steady_clock::time_point last_{};
  double last_ns_ = 0;
  bool read_ = false;
  std::vector<double> seen_;  // every reading, in no particular order
  double reference_ns_ = 0;
};

// Whether two CPUs of this process share one core's execution units: two
// hyperthreads of one host core, which a virtual machine's topology need
// not show (the 2-vCPU Xeon above reports 2 cores of 1 thread each). Timed,
// not read: a throughput-bound loop (16 independent multiply-add chains)
// on each CPU alone, then on both at once; siblings split
// one core's units and the pair runs slower, separate cores do not. Two
// siblings halve a row's absolute time against two cores (a kernel's two
// threads share one core) without any ratio looking wrong, which the link
// round trip above does not catch: theirs is short, as when together.
inline constexpr double kSharedCoreSlowdown = 1.4;
struct CpuPairing {
  int first_cpu = 0, second_cpu = 0;
  double alone_ns = 0;     // the loop on each CPU alone, the slower (least of the tries)
  double together_ns = 0;  // both started at once, to the last one's end (least of the tries)
  double slowdown() const { return alone_ns > 0 ? together_ns / alone_ns : 0; }
  bool shared_core() const { return slowdown() >= kSharedCoreSlowdown; }
};
// A pair that is slow in every one of these tries shares a core or was
// never quiet; once quiet, its least try is two cores' time.
inline constexpr int kCpuPairTries = 10;

// The pairing of CPUs a and b (a == b: two threads on one CPU, which must
// read as shared), the least of `tries` of each time; alone_ns is the
// slower CPU's alone. Empty where a thread cannot be pinned. A try takes
// about 10 ms on the machine above; the caller's affinity is left as it
// was.
std::optional<CpuPairing> MeasureCpuPairing(int a, int b, int tries = kCpuPairTries);
// The first CPU this process may run on and the next; empty with one CPU.
std::optional<CpuPairing> MeasureCpuPairing();
// One line for a run's context: shared, separate, or not measured.
std::string DescribeCpuPairing(const std::optional<CpuPairing>& pairing);

}  // namespace remat

#endif  // REMAT_HARNESS_CPU_LINK_H_
