// How the bench samples a row and turns its samples into its numbers, kept
// apart from Google Benchmark and from the rows' planning and reporting so
// that the rules can be tested on synthetic timings: when a row's sampling
// stops (SamplingRule, SamplingDone), how many runs a sample times
// (RunsPerSample), a row's share of the sampling budget (SamplingWeight,
// SampleShareSeconds), and the estimate of its time and x eager from its
// samples and the eager runs paired with them (Timings, Estimate,
// WindowEstimates).
#ifndef REMAT_HARNESS_BENCH_SAMPLING_H_
#define REMAT_HARNESS_BENCH_SAMPLING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "harness/run_delay.h"  // kQuietRunDelay

namespace remat::bench {

// The median of `values` (the mean of the middle two for an even count);
// 0 for none.
double Median(std::vector<double> values);

// When a row's sampling stops. A sample is one block of runs of the row (and,
// paired, one of eager next to it); see SamplingDone.
struct SamplingRule {
  // Stop once the row has this many quiet samples (pairs)...
  int64_t min_samples = 6;
  // ...and a spread (RowEstimate::spread) at most this: half the
  // allowance a control is held to (kControlAllowance, 2%) with room to
  // spare, and half what flags a row as imprecise (3%). At 1% most matrix
  // rows never settled and ran to their caps; replayed on the samples of
  // the three default runs of 2026-12-03 (`bazel-bin/harness/sampling_replay
  // --sampling-budget=360 --target-spread=0.015 results/bench-20261203T*.json`)
  // 1.5% kept every control within 2% in all three and 190-196 of 210 rows
  // trustworthy (194, 192, 201 as recorded under 480 s and 1%), while 1%
  // under the same budget took 27-34 s more of sampling a run.
  double target_spread = 0.015;
  // ...and has been sampled this long: rows of a few ms vary by a few %
  // from sample to sample, and their median needs a few dozen.
  double min_seconds = 0.15;
  // Or stop here, settled or not: after this many samples, or this long...
  int64_t max_samples = 60;
  double max_seconds = 4;
  // ...unless, at max_seconds, the row has fewer than this many quiet
  // samples: then it goes on until it has them or until
  // stretched_max_seconds (unset: max_seconds is the cap whatever the
  // count). A pair's ratio varies by 2-4% from pair to pair on a 2-core
  // machine, and a window's median needs about kQuietSamplesAtCap pairs to
  // place a row within 2%. A cap in seconds alone gave a slower machine
  // fewer of them: under ONEDNN_MAX_CPU_ISA=AVX2, where every run takes
  // twice as long, scan_stack L=32's rows got 9-14 pairs a window in their
  // 2.9 s share of the budget, 12-19 of them quiet in all, and its
  // everything_saveable control came out known only within +-3.3% to
  // +-7.5% in four default runs (natively 23-27 pairs a window, 41 quiet,
  // +-1.8%).
  int64_t quiet_samples_at_cap = 0;
  std::optional<double> stretched_max_seconds;
  // Or, sampled this long, when fewer than a quarter of the samples are
  // quiet (a busy machine; the row is noise anyway).
  double busy_seconds = 1;
};
// The fewest samples (pairs) a row takes, whatever its time cap: a median
// and a spread. Beyond them SamplingDone decides: rule.min_samples quiet
// ones and a narrow spread, or the cap. The cap wins over min_samples so
// that a neighbour that slows every run several times over cannot stretch
// the run: its rows stop early, flagged or with a wide spread.
inline constexpr int64_t kFewestSamples = 3;
// The rule of the default run: what bench_main uses unless --max-row-seconds
// (which makes max_seconds a hard cap: quiet_samples_at_cap 0). The bench
// sets stretched_max_seconds to kCapStretch x each row's cap, and counts
// only the time up to the cap against the sampling budget: a machine that
// runs everything slower gets as many pairs a row, in a longer run, rather
// than a run whose ratios are not valid.
inline constexpr int64_t kQuietSamplesAtCap = 20;
inline constexpr double kCapStretch = 3;
SamplingRule DefaultSamplingRule();
// How many runs one sample times together (their mean is the sample): enough
// that a sample lasts kMinSampleSeconds (microsecond rows would otherwise be
// timed at the clock's resolution and dominated by timer overhead), at least
// one. `run_seconds`: one run's time (the warm-up's).
inline constexpr double kMinSampleSeconds = 2e-3;
int64_t RunsPerSample(double run_seconds);

// A row's weight in the sampling budget: the seconds a pair of runs (the
// row's and eager's) is estimated to take, from one eager run's FLOPs at
// kEstimateFlopsPerSecond, plus kPairFloorSeconds (the scalar chains'
// microsecond rows need a few hundred ms of samples to settle, whatever
// their FLOPs). Each row's cap is its weight's share of what is left of the
// window's budget (SampleShareSeconds): a budget split by seconds per row
// left the expensive rows 3 pairs a window, and split first come, first
// served, the last problems of the run.
inline constexpr double kEstimateFlopsPerSecond = 100e9;
inline constexpr double kPairFloorSeconds = 0.02;
double SamplingWeight(int64_t eager_flops);
// `weight`'s share of `left_seconds`, `weight_left` being the weights of the
// rows still to sample in the window, this one included; 0 when nothing is
// left.
double SampleShareSeconds(double left_seconds, double weight, double weight_left);
// `rule` with its cap at the row's share (SampleShareSeconds) of
// `left_seconds`, the budget the window has left, and, where the rule
// stretches (quiet_samples_at_cap), its stretched cap at kCapStretch times
// that: the rule a row of weight `weight` is sampled under when the rows
// still to sample weigh `weight_left`, it included. The bench's (RuleNow)
// and a replay's (harness/sampling_replay.h) one definition.
SamplingRule CappedRule(SamplingRule rule, double left_seconds, double weight,
                        double weight_left);

// The bound rows (harness/bench_matmul_bound.h) are sampled for at least
// kBoundMinSeconds, up to kBoundMaxSamples samples (they take
// milliseconds), and weigh kBoundMinSeconds in the budget: every row of
// their case is checked against them, and a bound taken while a neighbour
// ran would flag them all.
inline constexpr double kBoundMinSeconds = 1.0;
inline constexpr int64_t kBoundMaxSamples = 1000;
SamplingRule BoundRule(SamplingRule rule);

// The runs that take one pair, in order. Each side's timed run follows a run
// of the same side, an untimed one where the run before was the other's:
// a row that follows eager (or eager that follows the row) finds its
// buffers out of cache and its heap in eager's shape, and not every engine
// pays that alike. With eager and the row simply alternating (eager, row,
// row, eager, ...), each pair had one side's run after a run of its own and
// the other's after the other side's, by turns: on mlp_chain (`bench
// --problems=mlp_chain --windows=1`, four runs) planned's pairs came out
// 7-9% higher with planned second than with planned first, and the bound
// row's too, so their ratios split into two clusters, the median fell
// between them (planned 1.168-1.211 x eager, the bound 0.771-0.814 in the
// four runs), and pair to pair they varied twice as much (median absolute
// deviation 5-7% against 2-3%) as ratios of two runs that each followed
// their own side. In training an engine runs after itself, so that is the
// state both runs of a pair are measured in. The side that goes first
// alternates from pair to pair (`index` even: eager), so that neither is
// always the one taken after the other's warm-up; an untimed run costs half
// a pair more (none where the first run follows its own side's). Unpaired
// (`paired` false), the row's runs only.
enum class PairSide { kEager, kRow };
struct PairRun {
  PairSide side = PairSide::kRow;
  bool timed = true;
};
// `before`: the side of the run just before the pair (empty: neither's, as
// at a row's first pair). The last run of the result is the next pair's
// `before`.
std::vector<PairRun> PairRuns(int64_t index, std::optional<PairSide> before, bool paired);

// A sample is quiet when the process's run delay grew by at most
// kQuietRunDelay (harness/run_delay.h) of its wall time while it ran, and
// the CPUs were not apart when it was taken (harness/cpu_link.h).

// A row's samples in the order they were taken: its own times and, paired,
// eager's (eager_ms[i] and row_ms[i] are pair i's, PairRuns), in ms;
// with each, the run delay its runs saw as a share of their wall time (see
// kQuietRunDelay; empty when not measured: every sample counts as quiet).
struct Timings {
  std::vector<double> row_ms;
  std::vector<double> eager_ms;  // empty when unpaired
  std::vector<double> row_delay;
  std::vector<double> eager_delay;
  // The round trip between the CPUs (CpuLinkRoundTripNs) last read before
  // each sample (pair), in ns; 0, or past the end: not read. And the run's
  // reference round trip (CpuLinkMonitor::reference_ns; 0: none): a sample
  // read at more than kCpusApartFactor times it was taken with the CPUs
  // apart (CpusApart), and is not quiet.
  std::vector<double> link_ns;
  double reference_link_ns = 0;
  // The first sample of each window after the first (--windows), ascending.
  std::vector<size_t> window_starts;
  bool paired() const { return !eager_ms.empty(); }
};
// The samples of `t` from sample `begin` on (one window's, for SamplingDone),
// without window_starts; SamplesIn: those before `end` of them (each
// vector cut at its own length: a reading may be missing past its end).
Timings SamplesFrom(const Timings& t, size_t begin);
Timings SamplesIn(const Timings& t, size_t begin, size_t end);

// The half-width of the distribution-free 95% confidence interval of the
// median of `values`, relative to the median: half the distance between the
// order statistics of rank j and n + 1 - j, j = round(n/2 - 1.96 sqrt(n)/2)
// (at least 1). With 6 values that is half their range; with 20, half the
// distance from the 6th to the 15th. Empty for fewer than two values.
std::optional<double> MedianHalfWidth(std::vector<double> values);

// How a row's samples become its numbers.
//
// Only quiet samples count (kQuietRunDelay): a neighbour that takes a CPU
// slows an OpenMP run several times over, and not both sides of a pair alike
// (the side with more parallel regions waits more often), so no statistic of
// disturbed samples reproduces. The same holds for CPUs the hypervisor put
// apart (CpusApart): gpt's eager run took 16.5 ms with them together and
// 22.8 ms apart, planned's ratio to it was 1.21 in one state and 1.39 in the
// other, and the states last seconds, so a window's median was one state's
// or the other's. Among quiet samples:
// - time: the least quiet time. What is left of interference (caches, memory
//   bandwidth) only adds time, so the least time is the undisturbed cost.
// - x eager (paired): the median over the quiet pairs (both samples quiet) of
//   row time / eager time, the low median (of an even count, the lower of
//   the two middle ratios) so that it is one pair's ratio: the median pair,
//   whose two times the summary prints beside it (time / eager ms = x
//   eager, where the least times, taken at moments the machine ran at other
//   speeds, need not agree with it). The two runs of a pair are a few ms apart, so a
//   slow drift of the machine's speed (a virtual CPU whose host sibling got
//   busy, invisible from here) cancels in each ratio, and the median ignores
//   the pairs something still disturbed. Its spread is MedianHalfWidth of
//   those ratios: the row settles when that interval is narrow, i.e. when
//   another run would find the same ratio.
// - unpaired (eager's own row, the bound, --unpaired): the least quiet time,
//   and as spread |that over the first half of the samples / over all - 1|:
//   whether the minimum is still falling.
// A row with fewer than kMinQuietSamples quiet samples (pairs) is not quiet:
// its numbers come from what quiet samples it has, or from all of them if it
// has none, and it is flagged as noise.
inline constexpr int64_t kMinQuietSamples = 3;
struct RowEstimate {
  int64_t samples = 0;        // pairs when paired
  int64_t quiet_samples = 0;  // quiet pairs (paired), quiet samples (unpaired)
  int64_t apart_samples = 0;  // of those not quiet, the ones taken with the CPUs apart
  bool quiet = true;          // quiet_samples >= kMinQuietSamples, or all samples quiet
  double row_ms = 0;          // the least quiet row time
  double eager_ms = 0;        // paired: the least quiet eager time; else 0
  // Paired: the median of the quiet pairs' ratios (x eager); unpaired: row_ms.
  double value = 0;
  // Paired: the median pair's times (value = pair_row_ms / pair_eager_ms);
  // else 0.
  double pair_row_ms = 0;
  double pair_eager_ms = 0;
  std::optional<double> spread;  // see above; empty with fewer than two samples
};
RowEstimate Estimate(const Timings& timings);
// Each window's estimate, in order (Timings::window_starts): one for a row
// sampled in one window. Estimate pools them.
std::vector<RowEstimate> WindowEstimates(const Timings& t);
// Whether sampling stops: at least rule.min_samples quiet samples (pairs)
// and rule.min_seconds spent, and a spread within rule.target_spread; or
// rule.max_samples samples; or rule.max_seconds spent with at least
// rule.quiet_samples_at_cap quiet samples, or with fewer and no
// rule.stretched_max_seconds; or rule.stretched_max_seconds spent (then the
// spread says how far from settled the row was, and quiet whether it saw
// enough quiet moments); or rule.busy_seconds spent with fewer than a
// quarter of at least kMinQuietSamples samples quiet.
bool SamplingDone(const Timings& timings, const SamplingRule& rule, double seconds_spent);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_SAMPLING_H_
