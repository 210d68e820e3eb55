// Tests of harness/bench_sampling.h on synthetic timings (nothing here
// times anything).

#include "harness/bench_sampling.h"

#include <gtest/gtest.h>

#include <vector>

namespace remat::bench {
namespace {

// --- The sampling statistic, on synthetic timings. ---

TEST(BenchSampling, XEagerIsTheMedianOfTheQuietPairsRatios) {
  // Undisturbed, the row takes 1.3 x eager's time. The machine slows by 20%
  // for the last three pairs (both sides: invisible to the run delay, and
  // cancelled within each pair); a neighbour takes a CPU during pairs 1 and
  // 4 (run delay 60%), which slows the row more than eager.
  Timings t;
  t.eager_ms = {10.0, 10.5, 10.1, 12.0, 12.1, 14.0, 12.0};
  t.row_ms = {13.0, 16.0, 13.2, 15.6, 15.7, 21.0, 15.62};
  t.eager_delay = {0.0, 0.6, 0.01, 0.0, 0.0, 0.6, 0.0};
  t.row_delay = {0.0, 0.6, 0.0, 0.0, 0.01, 0.6, 0.0};
  const RowEstimate e = Estimate(t);
  EXPECT_EQ(e.samples, 7);
  EXPECT_EQ(e.quiet_samples, 5);
  EXPECT_TRUE(e.quiet);
  EXPECT_DOUBLE_EQ(e.row_ms, 13.0);  // the least quiet times
  EXPECT_DOUBLE_EQ(e.eager_ms, 10.0);
  // Quiet ratios 1.3, 1.3069, 1.3, 1.2975, 1.3017: the median, one pair's
  // (pair 0's or pair 3's, both 1.3), whose two times are printed beside it.
  EXPECT_DOUBLE_EQ(e.value, 1.3);
  EXPECT_EQ(e.value, e.pair_row_ms / e.pair_eager_ms);
  EXPECT_TRUE((e.pair_row_ms == 13.0 && e.pair_eager_ms == 10.0) ||
              (e.pair_row_ms == 15.6 && e.pair_eager_ms == 12.0))
      << e.pair_row_ms << " / " << e.pair_eager_ms;
  ASSERT_TRUE(e.spread);
  // Five ratios: half their range, relative to the median.
  EXPECT_NEAR(*e.spread, (13.2 / 10.1 - 15.7 / 12.1) / 2 / 1.3, 1e-12);
}

TEST(BenchSampling, PairsTakenWithTheCpusApartAreNotQuiet) {
  // gpt's planned row against eager: 1.21 x with the CPUs together (a round
  // trip of 52-60 ns), 1.39 x apart (320 ns), every pair quiet by its run
  // delay. Apart is judged against the run's reference round trip.
  Timings t;
  t.eager_ms = {16.5, 22.8, 16.6, 22.7, 16.4, 22.9, 16.5};
  t.row_ms = {19.965, 31.692, 20.086, 31.553, 19.844, 31.831, 19.965};
  t.link_ns = {52, 320, 60, 330, 55, 318, 58};
  t.reference_link_ns = 52;
  const RowEstimate e = Estimate(t);
  EXPECT_EQ(e.samples, 7);
  EXPECT_EQ(e.quiet_samples, 4);
  EXPECT_EQ(e.apart_samples, 3);
  EXPECT_NEAR(e.value, 1.21, 1e-9);
  EXPECT_DOUBLE_EQ(e.eager_ms, 16.4);
  // The same samples against a reference of 318 ns (a run that was
  // together too rarely to count it): all of them in its usual state.
  t.reference_link_ns = 318;
  EXPECT_EQ(Estimate(t).apart_samples, 0);
  EXPECT_EQ(Estimate(t).quiet_samples, 7);
  // Nothing read (another machine, one CPU): nothing judged.
  t.link_ns.clear();
  t.reference_link_ns = 0;
  EXPECT_EQ(Estimate(t).quiet_samples, 7);
  // Samples past the last reading are not judged either; a window keeps its
  // readings and the run's least.
  t.link_ns = {52, 320};
  t.reference_link_ns = 52;
  EXPECT_EQ(Estimate(t).apart_samples, 1);
  t.link_ns = {52, 320, 60, 330, 55, 318, 58};
  t.window_starts = {4};
  const std::vector<RowEstimate> w = WindowEstimates(t);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].apart_samples, 2);
  EXPECT_EQ(w[1].apart_samples, 1);
  EXPECT_NEAR(w[1].value, 1.21, 1e-9);
  // With every pair apart the row has no quiet pair: noise, said so.
  Timings apart = SamplesFrom(t, 0);
  apart.link_ns = {320, 330, 318, 320, 330, 318, 320};
  EXPECT_FALSE(Estimate(apart).quiet);
}

TEST(BenchSampling, EachWindowIsEstimatedOnItsOwnAndTheRowPoolsThem) {
  // Window 1 (pairs 0-3): the row at 1.30 x eager; window 2 (pairs 4-7),
  // minutes later, at 1.36: the machine's state moved the ratio itself.
  Timings t;
  t.eager_ms = {10, 10, 10, 10, 10, 10, 10, 10};
  t.row_ms = {13.0, 13.0, 13.1, 12.9, 13.6, 13.6, 13.5, 13.7};
  t.window_starts = {4};
  const std::vector<RowEstimate> w = WindowEstimates(t);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].samples, 4);
  EXPECT_DOUBLE_EQ(w[0].value, 1.30);
  EXPECT_EQ(w[1].samples, 4);
  EXPECT_DOUBLE_EQ(w[1].value, 1.36);
  // Pooled: the median of all eight ratios, the low one (1.31 of 1.31 and
  // 1.35), so that it is a pair's.
  EXPECT_DOUBLE_EQ(Estimate(t).value, 13.1 / 10);
  EXPECT_EQ(Estimate(t).pair_row_ms, 13.1);
  EXPECT_EQ(Estimate(t).pair_eager_ms, 10);
  // A window's own samples: what SamplingDone judges while it samples.
  const Timings second = SamplesFrom(t, 4);
  EXPECT_EQ(second.row_ms, (std::vector<double>{13.6, 13.6, 13.5, 13.7}));
  EXPECT_TRUE(second.window_starts.empty());
  // One window: one estimate, the pooled one.
  t.window_starts.clear();
  ASSERT_EQ(WindowEstimates(t).size(), 1u);
  EXPECT_DOUBLE_EQ(WindowEstimates(t)[0].value, Estimate(t).value);
}

TEST(BenchSampling, EachRowGetsItsWeightsShareOfWhatIsLeft) {
  // scan_stack L=32: 12.8 GFLOP an eager run, a pair about 0.26 s; a scalar
  // chain's row weighs the floor.
  EXPECT_NEAR(SamplingWeight(12'800'000'000), 0.256 + kPairFloorSeconds, 1e-12);
  EXPECT_DOUBLE_EQ(SamplingWeight(0), kPairFloorSeconds);
  // 60 s left, the row 0.28 of the 7 still to sample: 2.4 s.
  EXPECT_NEAR(SampleShareSeconds(60, 0.28, 7), 2.4, 1e-12);
  // The last row takes what is left; nothing left, nothing.
  EXPECT_DOUBLE_EQ(SampleShareSeconds(60, 0.28, 0.28), 60);
  EXPECT_DOUBLE_EQ(SampleShareSeconds(60, 0.28, 0.1), 60);
  EXPECT_DOUBLE_EQ(SampleShareSeconds(-1, 0.28, 7), 0);
}

TEST(BenchSampling, MedianHalfWidthIsHalfTheConfidenceInterval) {
  EXPECT_FALSE(MedianHalfWidth({}));
  EXPECT_FALSE(MedianHalfWidth({1.0}));
  // Up to 7 values (j = 1): half the range, relative to the median.
  EXPECT_NEAR(*MedianHalfWidth({1.0, 1.2}), 0.1 / 1.1, 1e-12);
  EXPECT_NEAR(*MedianHalfWidth({1.30, 1.28, 1.33, 1.31, 1.29, 1.32}), 0.025 / 1.305, 1e-12);
  // 10 values: ranks 2 and 9; the extremes do not count.
  EXPECT_NEAR(*MedianHalfWidth({0.5, 1.0, 1.0, 1.0, 1.0, 1.02, 1.02, 1.02, 1.02, 9.0}),
              0.01 / 1.01, 1e-12);
  // 20 values 1..20: ranks 6 and 15 around the median 10.5.
  std::vector<double> twenty;
  for (int i = 20; i >= 1; --i) twenty.push_back(i);
  EXPECT_NEAR(*MedianHalfWidth(twenty), (15.0 - 6.0) / 2 / 10.5, 1e-12);
}

TEST(BenchSampling, UnpairedTheLeastTimeAndWhetherItIsStillFalling) {
  Timings t;
  // The estimate is the least time; the first half's least is 11, the
  // whole's 10: a spread of 10%.
  t.row_ms = {12, 11, 11.5, 10, 10.5};
  RowEstimate e = Estimate(t);
  EXPECT_FALSE(t.paired());
  EXPECT_DOUBLE_EQ(e.value, 10);
  EXPECT_DOUBLE_EQ(e.eager_ms, 0);
  EXPECT_DOUBLE_EQ(e.pair_row_ms, 0);  // no pair
  ASSERT_TRUE(e.spread);
  EXPECT_NEAR(*e.spread, 0.1, 1e-12);  // first (n+1)/2 = 3 samples: 11 vs 10
  // Disturbed samples do not count, however fast.
  t.row_delay = {0.0, 0.0, 0.0, 0.5, 0.0};
  e = Estimate(t);
  EXPECT_DOUBLE_EQ(e.value, 10.5);
  EXPECT_EQ(e.quiet_samples, 4);
  // One sample: no spread; none: nothing.
  EXPECT_FALSE(Estimate({{5.0}, {}, {}, {}}).spread);
  EXPECT_EQ(Estimate({}).samples, 0);
}

TEST(BenchSampling, TooFewQuietPairsAndTheRowIsNotQuiet) {
  Timings t;
  t.row_ms = {13.0, 13.1, 13.2, 20.0};
  t.eager_ms = {10.0, 10.0, 10.0, 10.0};
  t.row_delay = {0.0, 0.0, 0.5, 0.9};
  t.eager_delay = {0.0, 0.9, 0.0, 0.0};
  // One quiet pair (the first): its ratio, but not quiet.
  RowEstimate e = Estimate(t);
  EXPECT_EQ(e.quiet_samples, 1);
  EXPECT_FALSE(e.quiet);
  EXPECT_DOUBLE_EQ(e.value, 1.3);
  // None: every pair counts.
  t.row_delay[0] = 0.3;
  e = Estimate(t);
  EXPECT_EQ(e.quiet_samples, 0);
  EXPECT_FALSE(e.quiet);
  EXPECT_DOUBLE_EQ(e.value, 13.1 / 10.0);  // of 1.3, 1.31, 1.32, 2.0: the low median
  EXPECT_DOUBLE_EQ(e.row_ms, 13.0);
  // Delays not measured: every sample is quiet.
  t.row_delay.clear();
  t.eager_delay.clear();
  e = Estimate(t);
  EXPECT_TRUE(e.quiet);
  EXPECT_EQ(e.quiet_samples, 4);
  // Fewer samples than kMinQuietSamples, all quiet (a big row's one run).
  EXPECT_TRUE(Estimate({{60000.0}, {}, {0.0}, {}}).quiet);
}

TEST(BenchSampling, SamplingStopsWhenSettledOrAtTheCap) {
  SamplingRule rule;
  rule.min_samples = 4;
  rule.max_samples = 10;
  rule.target_spread = 0.01;
  rule.min_seconds = 0.5;
  rule.max_seconds = 30;
  Timings settled;
  settled.row_ms = {13, 13.05, 13, 13};
  settled.eager_ms = {10, 10, 10.02, 10};
  EXPECT_TRUE(SamplingDone(settled, rule, 1.0));
  EXPECT_FALSE(SamplingDone(settled, rule, 0.2));  // not sampled long enough
  Timings few = settled;
  few.row_ms.resize(3);
  few.eager_ms.resize(3);
  EXPECT_FALSE(SamplingDone(few, rule, 1.0));  // too few samples
  Timings scattered;
  scattered.row_ms = {13, 14, 13.5, 12.5};
  scattered.eager_ms = {10, 10, 10, 10};
  EXPECT_FALSE(SamplingDone(scattered, rule, 1.0));  // ratios 1.25 to 1.4
  EXPECT_TRUE(SamplingDone(scattered, rule, 30.0));  // the cap
  scattered.row_ms.resize(10, 13);
  scattered.eager_ms.resize(10, 10);
  scattered.row_ms[9] = 14;  // still wide, but max_samples reached
  EXPECT_TRUE(SamplingDone(scattered, rule, 1.0));
  // Settled, but only two quiet pairs of the four: not done until the cap.
  rule.busy_seconds = 2;
  Timings busy = settled;
  busy.row_delay = {0.9, 0.0, 0.9, 0.0};
  busy.eager_delay = {0.0, 0.0, 0.9, 0.0};
  EXPECT_FALSE(SamplingDone(busy, rule, 1.0));
  EXPECT_FALSE(SamplingDone(busy, rule, 3.0));  // half quiet: worth waiting for
  EXPECT_TRUE(SamplingDone(busy, rule, 30.0));
  // None of four quiet: a busy machine, past busy_seconds it stops.
  busy.row_delay = {0.9, 0.9, 0.9, 0.9};
  EXPECT_FALSE(SamplingDone(busy, rule, 1.0));
  EXPECT_TRUE(SamplingDone(busy, rule, 3.0));
}

TEST(BenchSampling, ARowShortOfQuietPairsAtItsCapGoesOnToTheStretchedCap) {
  SamplingRule rule = DefaultSamplingRule();
  EXPECT_EQ(rule.quiet_samples_at_cap, kQuietSamplesAtCap);
  rule.max_seconds = 3;
  rule.max_samples = 60;
  // Ratios 1.25 to 1.4: never settled within 1%.
  Timings scattered;
  for (int i = 0; i < 12; ++i) {
    scattered.row_ms.push_back(12.5 + 0.5 * (i % 4));
    scattered.eager_ms.push_back(10);
  }
  // No stretched cap (--sampling-budget=0): max_seconds is the cap.
  EXPECT_TRUE(SamplingDone(scattered, rule, 3.0));
  // Stretched to 9 s: 12 quiet pairs at 3 s is short of 20, so it goes on...
  rule.stretched_max_seconds = 9.0;
  EXPECT_FALSE(SamplingDone(scattered, rule, 3.0));
  EXPECT_FALSE(SamplingDone(scattered, rule, 8.9));
  // ...to the stretched cap,
  EXPECT_TRUE(SamplingDone(scattered, rule, 9.0));
  // or until it has the quiet pairs.
  Timings enough = scattered;
  for (int i = 12; i < kQuietSamplesAtCap; ++i) {
    enough.row_ms.push_back(12.5 + 0.5 * (i % 4));
    enough.eager_ms.push_back(10);
  }
  EXPECT_FALSE(SamplingDone(enough, rule, 2.9));
  EXPECT_TRUE(SamplingDone(enough, rule, 3.0));
  // Pairs a neighbour disturbed do not count toward them.
  Timings disturbed = enough;
  disturbed.row_delay.assign(enough.row_ms.size(), 0.0);
  disturbed.eager_delay.assign(enough.row_ms.size(), 0.0);
  disturbed.row_delay[0] = 0.5;
  EXPECT_FALSE(SamplingDone(disturbed, rule, 3.0));
  // Past max_samples nothing stretches.
  Timings many = scattered;
  many.row_ms.resize(60, 13);
  many.eager_ms.resize(60, 10);
  many.row_delay.assign(60, 0.5);  // none quiet
  many.eager_delay.assign(60, 0.0);
  EXPECT_TRUE(SamplingDone(many, rule, 1.0));
  // --max-row-seconds: the user's cap is a cap.
  rule.quiet_samples_at_cap = 0;
  EXPECT_TRUE(SamplingDone(scattered, rule, 3.0));
}

TEST(BenchSampling, FastRunsAreTimedInBlocks) {
  EXPECT_EQ(RunsPerSample(1.0), 1);
  EXPECT_EQ(RunsPerSample(kMinSampleSeconds), 1);
  EXPECT_EQ(RunsPerSample(kMinSampleSeconds / 4), 4);
  EXPECT_EQ(RunsPerSample(kMinSampleSeconds / 4.5), 5);
  EXPECT_EQ(RunsPerSample(0), 1);
  EXPECT_EQ(RunsPerSample(1e-12), 10000);  // capped
}

// Walks `pairs` pairs as the bench takes them, starting after a run of
// neither side, and checks what PairRuns promises.
TEST(BenchSampling, EachTimedRunFollowsARunOfItsOwnSide) {
  for (const bool paired : {true, false}) {
    std::optional<PairSide> before;
    int64_t untimed = 0;
    for (int64_t index = 0; index < 40; ++index) {
      const std::vector<PairRun> runs = PairRuns(index, before, paired);
      int64_t timed_eager = 0, timed_row = 0;
      for (const PairRun& run : runs) {
        if (run.timed) {
          ASSERT_TRUE(before.has_value()) << "pair " << index;
          EXPECT_EQ(*before, run.side) << "pair " << index << ": a timed run after the other side's";
          (run.side == PairSide::kEager ? timed_eager : timed_row) += 1;
        } else {
          ++untimed;
        }
        before = run.side;
      }
      EXPECT_EQ(timed_row, 1) << "pair " << index;
      EXPECT_EQ(timed_eager, paired ? 1 : 0) << "pair " << index;
      if (paired) {
        // The first timed run alternates sides, so neither is always second.
        const PairRun& first_timed = runs[runs[0].timed ? 0 : 1];
        EXPECT_EQ(first_timed.side, index % 2 == 0 ? PairSide::kEager : PairSide::kRow)
            << "pair " << index;
      }
    }
    // One untimed run a pair (after the first, which warms both sides)
    // paired; unpaired, only the first run's.
    EXPECT_EQ(untimed, paired ? 41 : 1) << (paired ? "paired" : "unpaired");
  }
}

}  // namespace
}  // namespace remat::bench
