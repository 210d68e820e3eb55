#include "engines/schedule/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/api/error.h"

namespace remat {
namespace {

using Kind = ActionKind;

Action A(Kind kind, int64_t n = 0) { return Action{kind, n}; }

// Steps of differing integer cost (sums stay exact in double) and sizes.
ChainCosts RandomChain(int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  ChainCosts c;
  for (int64_t i = 0; i < length; ++i) {
    c.step_flops.push_back(pick(1, 9));
    c.residual_bytes.push_back(8 * pick(0, 10));
  }
  for (int64_t i = 0; i <= length; ++i) c.carry_bytes.push_back(8 * pick(1, 6));
  return c;
}

template <typename T>
std::string ToString(const std::vector<T>& v) {
  std::string out;
  for (const T& x : v) out += (out.empty() ? "" : " ") + std::to_string(x);
  return out;
}

int64_t MaxReverse(const Schedule& s) {
  int64_t most = 0;
  for (const Action& a : s.backward) {
    if (a.kind == Kind::kReverse) most = std::max(most, a.n);
  }
  return most;
}

// The peak of keeping every residual: one kReverse of the whole chain.
int64_t StoreAllBytes(const ChainCosts& c) {
  return Simulate(ParseSchedule("every:" + std::to_string(c.length()), c), c).peak_bytes;
}

// Eager's schedule: every step taped in the forward pass, none recomputed.
Schedule TapeAll(int64_t length) {
  return Schedule{"", {A(Kind::kAdvanceTaped, length)}, {A(Kind::kReverseTaped, length)}};
}
int64_t EagerBytes(const ChainCosts& c) { return Simulate(TapeAll(c.length()), c).peak_bytes; }

// ---------------------------------------------------------------------------
// Exhaustive search over the action language: Dijkstra on the machine's
// states (phase, position, frontier, snapshot set, taped steps, current
// carry), one step per kAdvance or kAdvanceTaped (an action of n steps
// passes through the same states), every kReverse n the rules allow, one
// step per kReverseTaped, and every snapshot, restore and drop. Snapshots at
// or past the frontier are dropped at once: they can never be restored, so
// keeping them only costs memory. Written apart from Simulate, from the rules
// in schedule.h. L <= 15.
struct Exhaustive {
  const ChainCosts& c;
  int64_t budget = std::numeric_limits<int64_t>::max();  // every state's bytes <= budget
  int slots = std::numeric_limits<int>::max();           // at most this many snapshots
  bool single_step = false;                              // only kReverse 1
  bool tapes = false;                                    // kAdvanceTaped and kReverseTaped too

  struct State {
    bool backward = false;
    int p = 0;
    int frontier = 0;
    bool live = true;
    bool aliased = true;
    uint32_t kept = 0;   // bit i: a snapshot at position i
    uint32_t taped = 0;  // bit i: step i's tape is kept
  };

  static uint64_t Key(const State& s) {
    return uint64_t{s.kept} | uint64_t(s.p) << 16 | uint64_t(s.frontier) << 24 |
           uint64_t(s.live) << 32 | uint64_t(s.aliased) << 33 | uint64_t(s.backward) << 34 |
           uint64_t{s.taped} << 35;
  }
  static State FromKey(uint64_t k) {
    State s;
    s.kept = static_cast<uint32_t>(k & 0xffff);
    s.p = static_cast<int>((k >> 16) & 0xff);
    s.frontier = static_cast<int>((k >> 24) & 0xff);
    s.live = (k >> 32) & 1;
    s.aliased = (k >> 33) & 1;
    s.backward = (k >> 34) & 1;
    s.taped = static_cast<uint32_t>((k >> 35) & 0xffff);
    return s;
  }
  int64_t TapedBytes(const State& s) const {
    int64_t bytes = 0;
    for (int i = 0; i < c.length(); ++i) {
      if (s.taped >> i & 1) bytes += c.residual_bytes[i];
    }
    return bytes;
  }

  int64_t KeptBytes(const State& s) const {
    int64_t bytes = 0;
    for (int i = 1; i <= c.length(); ++i) {
      if (s.kept >> i & 1) bytes += c.carry_bytes[i];
    }
    return bytes;
  }
  int64_t Bytes(const State& s) const {
    return KeptBytes(s) + TapedBytes(s) + (s.live && !s.aliased ? c.carry_bytes[s.p] : 0);
  }

  // The fewest recomputed flops, or infinity. path: one optimal action
  // sequence, one step per kAdvance, "|" between the passes.
  double Solve(std::string* path = nullptr) const {
    const int length = static_cast<int>(c.length());
    std::unordered_map<uint64_t, double> dist;
    std::unordered_map<uint64_t, std::pair<uint64_t, std::string>> parent;
    uint64_t from = 0;
    std::string what;
    using Item = std::pair<double, uint64_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
    auto push = [&](const State& s, double d) {
      if (Bytes(s) > budget || __builtin_popcount(s.kept) > slots) return;
      const uint64_t k = Key(s);
      auto it = dist.find(k);
      if (it != dist.end() && it->second <= d) return;
      dist[k] = d;
      parent[k] = {from, what};
      queue.push({d, k});
    };
    State start;
    start.frontier = length;
    push(start, 0);
    while (!queue.empty()) {
      auto [d, k] = queue.top();
      queue.pop();
      if (dist[k] < d) continue;
      const State s = FromKey(k);
      if (s.backward && s.frontier == 0) {
        if (path != nullptr) {
          std::vector<std::string> steps;
          for (uint64_t at = k; at != Key(State{false, 0, length, true, true, 0}); at = parent[at].first) {
            steps.push_back(parent[at].second);
          }
          std::reverse(steps.begin(), steps.end());
          *path = Join(steps, " ");
        }
        return d;
      }
      from = k;
      if (!s.backward) {
        if (s.p < length) {
          State t = s;
          ++t.p;
          t.aliased = false;
          what = "A";
          push(t, d);
          if (tapes) {
            t.taped |= 1u << s.p;
            what = "T";
            push(t, d);
          }
        }
        if (s.p > 0 && s.p < length && !(s.kept >> s.p & 1)) {
          State t = s;
          t.kept |= 1u << s.p;
          t.aliased = true;
          what = "S" + std::to_string(s.p);
          push(t, d);
        }
        if (s.p == length) {
          State t = s;
          t.backward = true;
          t.live = false;
          t.aliased = false;
          what = "|";
          push(t, d);
        }
        continue;
      }
      for (int pos = 0; pos < s.frontier; ++pos) {
        if (pos > 0 && !(s.kept >> pos & 1)) continue;
        State t = s;
        t.p = pos;
        t.live = true;
        t.aliased = true;
        what = "R" + std::to_string(pos);
        push(t, d);
      }
      for (int pos = 1; pos < s.frontier; ++pos) {
        if (!(s.kept >> pos & 1)) continue;
        State t = s;
        t.kept &= ~(1u << pos);
        if (t.live && t.aliased && t.p == pos) t.aliased = false;
        what = "D" + std::to_string(pos);
        push(t, d);
      }
      if (tapes && (s.taped >> (s.frontier - 1) & 1) && !(s.live && s.p >= s.frontier - 1)) {
        State t = s;
        t.frontier = s.frontier - 1;
        t.taped &= ~(1u << t.frontier);
        t.kept &= (1u << t.frontier) - 1;
        what = "B";
        push(t, d);
      }
      if (!s.live) continue;
      if (s.p + 1 < s.frontier && !(s.taped >> s.p & 1)) {
        State t = s;
        ++t.p;
        t.aliased = false;
        what = "A";
        push(t, d + c.step_flops[s.p]);
        if (tapes) {
          t.taped |= 1u << s.p;
          what = "T";
          push(t, d + c.step_flops[s.p]);
        }
      }
      if (s.p > 0 && !(s.kept >> s.p & 1)) {
        State t = s;
        t.kept |= 1u << s.p;
        t.aliased = true;
        what = "S" + std::to_string(s.p);
        push(t, d);
      }
      const uint32_t range = ((1u << s.frontier) - 1) & ~((1u << s.p) - 1);
      if ((!single_step || s.frontier - s.p == 1) && !(s.taped & range)) {
        int64_t bytes = KeptBytes(s) + TapedBytes(s) + c.carry_bytes[s.frontier];
        double flops = 0;
        for (int i = s.p; i < s.frontier; ++i) {
          bytes += c.residual_bytes[i];
          flops += c.step_flops[i];
        }
        if (bytes <= budget) {
          State t = s;
          t.frontier = s.p;
          t.live = false;
          t.aliased = false;
          t.kept &= (1u << t.frontier) - 1;
          what = "V" + std::to_string(s.frontier - s.p);
          push(t, d + flops);
        }
      }
    }
    return std::numeric_limits<double>::infinity();
  }
};

// The optimum over single-step reversal with c slots, as a memoized DP over
// the recursive form (snapshot a split point, reverse the tail with a slot
// fewer, then the head). Fused: every advance counts; Swept: the forward pass
// runs the first sweep for free.
class RevolveDp {
 public:
  int64_t Fused(int64_t l, int c) {
    if (l == 1) return 1;
    if (c == 0) return l * (l + 1) / 2;
    int64_t& memo = fused_[{l, c}];
    if (memo) return memo;
    int64_t best = std::numeric_limits<int64_t>::max();
    for (int64_t y = 1; y < l; ++y) best = std::min(best, y + Fused(l - y, c - 1) + Fused(y, c));
    return memo = best;
  }
  int64_t Swept(int64_t l, int c) {
    if (l == 1) return 1;
    if (c == 0) return Fused(l, 0);
    int64_t& memo = swept_[{l, c}];
    if (memo) return memo;
    int64_t best = Fused(l, c);  // the forward pass keeps nothing
    for (int64_t y = 1; y < l; ++y) best = std::min(best, Swept(l - y, c - 1) + Fused(y, c));
    return memo = best;
  }

 private:
  std::map<std::pair<int64_t, int>, int64_t> fused_, swept_;
};

// ---------------------------------------------------------------------------
// Simulate

ScheduleCost RunActions(const std::vector<Action>& forward, const std::vector<Action>& backward,
                 const ChainCosts& c) {
  return Simulate(Schedule{"", forward, backward}, c);
}

void ExpectRejected(const std::vector<Action>& forward, const std::vector<Action>& backward,
                    const std::string& message) {
  const ChainCosts c = ChainCosts::Uniform(8, 1, 10, 100);
  try {
    RunActions(forward, backward, c);
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(SimulateTest, CountsTheStoreAllSchedule) {
  const ChainCosts c = ChainCosts::Uniform(8, 2.5, 10, 100);
  const ScheduleCost cost = RunActions({A(Kind::kAdvance, 8)}, {A(Kind::kRestore, 0), A(Kind::kReverse, 8)}, c);
  EXPECT_EQ(cost.recomputed_steps, 8);
  EXPECT_DOUBLE_EQ(cost.recomputed_flops, 20);
  EXPECT_EQ(cost.peak_bytes, 8 * 100 + 10);  // every residual and the arriving cotangent
  EXPECT_EQ(cost.max_snapshots, 0);
}

TEST(SimulateTest, CountsSnapshotsCarriesAndDrops) {
  // Steps of different sizes so that each term shows.
  ChainCosts c;
  c.step_flops = {1, 2, 4};
  c.carry_bytes = {1000, 10, 20, 40};  // position 0 never counts
  c.residual_bytes = {100, 200, 400};
  // Forward: keep 1 and 2. Backward: step 2 from 2, step 1 from 1, step 0 from 0.
  const ScheduleCost cost = RunActions(
      {A(Kind::kAdvance, 1), A(Kind::kSnapshot), A(Kind::kAdvance, 1), A(Kind::kSnapshot),
       A(Kind::kAdvance, 1)},
      {A(Kind::kRestore, 2), A(Kind::kDrop, 2), A(Kind::kReverse, 1), A(Kind::kRestore, 1),
       A(Kind::kReverse, 1), A(Kind::kDrop, 1), A(Kind::kRestore, 0), A(Kind::kReverse, 1)},
      c);
  EXPECT_EQ(cost.recomputed_steps, 3);
  EXPECT_DOUBLE_EQ(cost.recomputed_flops, 7);
  EXPECT_EQ(cost.max_snapshots, 2);
  // Forward at L: 10 + 20 kept + 40 current = 70. Step 2: 10 kept + 400 + 40
  // (2 dropped first) = 450. Step 1 (1 still kept): 10 + 200 + 20 = 230.
  EXPECT_EQ(cost.peak_bytes, 450);
  // Without the early drop of 2, its 20 bytes count during step 2's kReverse.
  const ScheduleCost late = RunActions(
      {A(Kind::kAdvance, 1), A(Kind::kSnapshot), A(Kind::kAdvance, 1), A(Kind::kSnapshot),
       A(Kind::kAdvance, 1)},
      {A(Kind::kRestore, 2), A(Kind::kReverse, 1), A(Kind::kDrop, 2), A(Kind::kRestore, 1),
       A(Kind::kDrop, 1), A(Kind::kReverse, 1), A(Kind::kRestore, 0), A(Kind::kReverse, 1)},
      c);
  EXPECT_EQ(late.peak_bytes, 470);
}

TEST(SimulateTest, RestoredCarryIsNotCountedTwice) {
  ChainCosts c;
  c.step_flops = {1, 1, 1};
  c.carry_bytes = {0, 10, 20, 40};
  c.residual_bytes = {0, 0, 0};
  // Backward: keep 2 while reversing step 2 (kept 20 + cotangent 40 = 60);
  // restoring 1 and advancing from it counts 10 kept + 20 current = 30.
  const ScheduleCost cost =
      RunActions({A(Kind::kAdvance, 1), A(Kind::kSnapshot), A(Kind::kAdvance, 2)},
          {A(Kind::kRestore, 1), A(Kind::kAdvance, 1), A(Kind::kSnapshot), A(Kind::kReverse, 1),
           A(Kind::kDrop, 2), A(Kind::kRestore, 1), A(Kind::kDrop, 1), A(Kind::kReverse, 1),
           A(Kind::kRestore, 0), A(Kind::kReverse, 1)},
          c);
  EXPECT_EQ(cost.peak_bytes, 10 + 20 + 40);  // the snapshot at 1, at 2, and the cotangent at 3
  EXPECT_EQ(cost.max_snapshots, 2);
  EXPECT_EQ(cost.recomputed_steps, 4);
}

TEST(SimulateTest, CountsTapesUntilTheirStepIsDifferentiated) {
  ChainCosts c;
  c.step_flops = {1, 2, 4, 8};
  c.carry_bytes = {1000, 10, 20, 40, 80};
  c.residual_bytes = {100, 200, 400, 800};
  c.after_bytes = 5;
  // Forward: tape steps 0 and 1, keep 2, run 2 and 3. Backward: tape step 2
  // from the snapshot, reverse step 3 from the live carry, then steps 2, 1
  // and 0 from their tapes.
  const std::vector<Action> forward = {A(Kind::kAdvanceTaped, 2), A(Kind::kSnapshot), A(Kind::kAdvance, 2)};
  const std::vector<Action> backward = {A(Kind::kRestore, 2), A(Kind::kDrop, 2), A(Kind::kAdvanceTaped, 1),
                                        A(Kind::kReverse, 1), A(Kind::kReverseTaped, 3)};
  const ScheduleCost cost = RunActions(forward, backward, c);
  EXPECT_DOUBLE_EQ(cost.recomputed_flops, 4 + 8);
  EXPECT_EQ(cost.recomputed_steps, 2);
  EXPECT_EQ(cost.taped_steps, 3);
  EXPECT_EQ(cost.max_snapshots, 1);
  // The forward pass ends with tapes 100 + 200, the snapshot 20, the output
  // 80 and after_bytes 5: 405. Step 2 taped: tapes 700 + its output 40. The
  // kReverse of step 3: tapes 700 + 800 + 80 = 1580.
  EXPECT_EQ(cost.peak_bytes, 1580);
  c.residual_bytes = {100, 200, 400, 10};
  EXPECT_EQ(RunActions(forward, backward, c).peak_bytes, 790);
  c.after_bytes = 500;
  EXPECT_EQ(Simulate(TapeAll(4), c).peak_bytes, 100 + 200 + 400 + 10 + 80 + 500);
  EXPECT_EQ(RunActions(forward, backward, c).peak_bytes, 900);  // 300 + 20 + 80 + 500 at the end
  // Budget leaves room for after_bytes at the forward pass's end.
  for (int64_t budget : {MinimumFeasibleBytes(c), int64_t{900}, int64_t{1200}, EagerBytes(c)}) {
    EXPECT_LE(Simulate(Budget(c, budget), c).peak_bytes, budget);
  }
  EXPECT_EQ(MinimumFeasibleBytes(c), 580);
  EXPECT_EQ(Simulate(Budget(c, EagerBytes(c)), c).recomputed_flops, 0);
}

TEST(SimulateTest, RejectsEveryBrokenRule) {
  const std::vector<Action> all = {A(Kind::kAdvance, 8)};
  const std::vector<Action> done = {A(Kind::kRestore, 0), A(Kind::kReverse, 8)};
  // The forward pass.
  ExpectRejected({A(Kind::kRestore, 0)}, done,
                 "forward action 0 (kRestore 0): the forward pass holds only kAdvance, kAdvanceTaped and "
                 "kSnapshot");
  ExpectRejected({A(Kind::kAdvance, 8), A(Kind::kReverse, 8)}, {},
                 "holds only kAdvance, kAdvanceTaped and kSnapshot");
  ExpectRejected({A(Kind::kAdvance, 8), A(Kind::kReverseTaped, 8)}, {},
                 "forward action 1 (kReverseTaped 8): the forward pass holds only");
  ExpectRejected({A(Kind::kAdvanceTaped, 0), A(Kind::kAdvance, 8)}, done, "n must be >= 1");
  ExpectRejected({A(Kind::kAdvance, 5), A(Kind::kAdvanceTaped, 4)}, done,
                 "forward action 1 (kAdvanceTaped 4): p + n = 9 is past L = 8");
  ExpectRejected({A(Kind::kAdvance, 0), A(Kind::kAdvance, 8)}, done, "n must be >= 1");
  ExpectRejected({A(Kind::kAdvance, 5), A(Kind::kAdvance, 4)}, done,
                 "forward action 1 (kAdvance 4): p + n = 9 is past L = 8");
  ExpectRejected({A(Kind::kSnapshot), A(Kind::kAdvance, 8)}, done, "position 0, the chain's input");
  ExpectRejected({A(Kind::kAdvance, 8), A(Kind::kSnapshot)}, done, "p = 8 must be below L 8");
  ExpectRejected({A(Kind::kAdvance, 2), A(Kind::kSnapshot), A(Kind::kSnapshot)}, done,
                 "position 2 is already a snapshot");
  ExpectRejected({A(Kind::kAdvance, 2), A(Kind::kSnapshot, 3), A(Kind::kAdvance, 6)}, done,
                 "kSnapshot takes no argument");
  ExpectRejected({A(Kind::kAdvance, 5)}, done, "the forward pass ends at p = 5, not at L = 8");
  // The backward pass.
  ExpectRejected(all, {A(Kind::kAdvance, 1)},
                 "backward action 0 (kAdvance 1): no current carry at the start of the backward pass");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kAdvance, 7), A(Kind::kReverse, 1), A(Kind::kAdvance, 1)},
                 "the kReverse at backward action 2 consumed it; kRestore first");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kAdvance, 7), A(Kind::kReverse, 1), A(Kind::kReverse, 7)},
                 "backward action 3 (kReverse 7): no current carry");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kAdvance, 8)}, "p + n = 8 must stay below the frontier 8");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kAdvance, 0)}, "n must be >= 1");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kAdvance, 2), A(Kind::kReverse, 3)},
                 "backward action 2 (kReverse 3): p + n = 5 but the frontier is 8");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kAdvance, 7), A(Kind::kReverse, 0)}, "n must be >= 1");
  ExpectRejected(all, {A(Kind::kRestore, 4)}, "backward action 0 (kRestore 4): position 4 is not a snapshot");
  ExpectRejected(all, {A(Kind::kRestore, 9)}, "position 9 is outside 0..8");
  ExpectRejected(all, {A(Kind::kRestore, -1)}, "position -1 is outside 0..8");
  ExpectRejected({A(Kind::kAdvance, 4), A(Kind::kSnapshot), A(Kind::kAdvance, 4)},
                 {A(Kind::kRestore, 4), A(Kind::kReverse, 4), A(Kind::kRestore, 4)},
                 "position 4 is not below the frontier 4");
  ExpectRejected(all, {A(Kind::kDrop, 3)}, "(kDrop 3): position 3 is not a snapshot");
  ExpectRejected(all, {A(Kind::kDrop, 0)}, "position 0 is not a snapshot");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kSnapshot)}, "position 0, the chain's input");
  ExpectRejected(all, {A(Kind::kSnapshot)}, "(kSnapshot): no current carry");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kAdvance, 3), A(Kind::kSnapshot), A(Kind::kRestore, 3),
                       A(Kind::kSnapshot)},
                 "position 3 is already a snapshot");
  ExpectRejected(all, {A(Kind::kRestore, 0), A(Kind::kAdvance, 7), A(Kind::kReverse, 1)},
                 "the backward pass ends with the frontier at 7: steps 0..6 are not differentiated");
  ExpectRejected({A(Kind::kAdvance, 4), A(Kind::kSnapshot), A(Kind::kAdvance, 4)},
                 {A(Kind::kRestore, 4), A(Kind::kReverse, 4), A(Kind::kRestore, 0), A(Kind::kReverse, 4)},
                 "the backward pass ends with snapshots still kept at 4");
  // Tapes.
  const std::vector<Action> taped = {A(Kind::kAdvance, 4), A(Kind::kAdvanceTaped, 4)};
  ExpectRejected(taped, {A(Kind::kReverseTaped, 5)},
                 "backward action 0 (kReverseTaped 5): step 3 is not taped");
  ExpectRejected(taped, {A(Kind::kReverseTaped, 9)}, "n = 9 is more than the 8 steps below the frontier");
  ExpectRejected(taped, {A(Kind::kReverseTaped, 0)}, "n must be >= 1");
  ExpectRejected(taped, {A(Kind::kRestore, 0), A(Kind::kReverse, 8)},
                 "backward action 1 (kReverse 8): step 4 is taped: kReverseTaped differentiates it");
  ExpectRejected(taped, {A(Kind::kRestore, 0), A(Kind::kAdvance, 5)},
                 "backward action 1 (kAdvance 5): step 4 is taped: it is not run again");
  ExpectRejected({A(Kind::kAdvance, 4), A(Kind::kSnapshot), A(Kind::kAdvanceTaped, 4)},
                 {A(Kind::kRestore, 4), A(Kind::kReverseTaped, 4)},
                 "backward action 1 (kReverseTaped 4): the current carry at p = 4 is at or past the new "
                 "frontier 4");
  ExpectRejected(taped, {A(Kind::kReverseTaped, 4), A(Kind::kRestore, 0), A(Kind::kAdvanceTaped, 4)},
                 "backward action 2 (kAdvanceTaped 4): p + n = 4 must stay below the frontier 4");
  ExpectRejected(taped, {A(Kind::kReverseTaped, 4), A(Kind::kAdvanceTaped, 1)},
                 "backward action 1 (kAdvanceTaped 1): no current carry");
  ExpectRejected({A(Kind::kAdvanceTaped, 8)}, {A(Kind::kReverseTaped, 4)},
                 "the backward pass ends with the frontier at 4");
  // The schedule's name leads the message.
  try {
    Simulate(Schedule{"every:3", all, {A(Kind::kReverse, 8)}}, ChainCosts::Uniform(8, 1, 1, 1));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "schedule every:3: backward action 0 (kReverse 8): no current carry at "
                                     "the start of the backward pass; kRestore first");
  }
}

TEST(SimulateTest, RejectsMalformedChains) {
  ChainCosts c = ChainCosts::Uniform(4, 1, 8, 8);
  c.carry_bytes.pop_back();
  EXPECT_THROW(Simulate(EveryK(4, 2), c), Error);
  c = ChainCosts::Uniform(4, 1, 8, 8);
  c.residual_bytes[2] = -1;
  EXPECT_THROW(Simulate(EveryK(4, 2), c), Error);
  c = ChainCosts::Uniform(4, 1, 8, 8);
  c.step_flops[1] = std::nan("");
  EXPECT_THROW(Simulate(EveryK(4, 2), c), Error);
  EXPECT_THROW(Simulate(EveryK(4, 2), ChainCosts{}), Error);
  EXPECT_THROW(ChainCosts::Uniform(0, 1, 1, 1), Error);
  EXPECT_THROW(ChainCosts::Uniform(3, 1, -1, 1), Error);
  // A schedule for another length fails on the rules.
  EXPECT_THROW(Simulate(EveryK(5, 2), ChainCosts::Uniform(4, 1, 8, 8)), Error);
}

// ---------------------------------------------------------------------------
// Generators

std::vector<Schedule> AllGenerators(int64_t length) {
  std::vector<Schedule> out;
  for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, length}) out.push_back(EveryK(length, k));
  for (int64_t s : {int64_t{1}, int64_t{2}, int64_t{3}, length}) {
    if (s <= length) out.push_back(Segments(length, s));
  }
  out.push_back(Sqrt(length));
  out.push_back(Bisect(length));
  for (int c : {0, 1, 2, 3, 5}) out.push_back(Revolve(length, c));
  out.push_back(Revolve(length, static_cast<int>(length)));
  return out;
}

void ExpectReversesEveryStep(const Schedule& s, const ChainCosts& c) {
  SCOPED_TRACE(s.name + " L=" + std::to_string(c.length()));
  ScheduleCost cost;
  ASSERT_NO_THROW(cost = Simulate(s, c));
  int64_t reversed = 0;
  int64_t from_tapes = 0;
  for (const Action& a : s.backward) {
    if (a.kind == Kind::kReverse) reversed += a.n;
    if (a.kind == Kind::kReverseTaped) from_tapes += a.n;
  }
  EXPECT_EQ(from_tapes, cost.taped_steps);
  EXPECT_EQ(reversed + from_tapes, c.length());
  // Only budget:B tapes; every other generator recomputes each step.
  if (s.name.rfind("budget:", 0) != 0) {
    EXPECT_EQ(from_tapes, 0);
    EXPECT_GE(cost.recomputed_steps, c.length());
  }
}

TEST(GeneratorsTest, EveryGeneratorIsValidAndReversesEveryStep) {
  for (int64_t length = 1; length <= 64; ++length) {
    const ChainCosts uniform = ChainCosts::Uniform(length, 1, 16, 48);
    const ChainCosts mixed = RandomChain(length, static_cast<uint32_t>(length));
    for (const Schedule& s : AllGenerators(length)) {
      ExpectReversesEveryStep(s, uniform);
      ExpectReversesEveryStep(s, mixed);
    }
    // The exact DP is O(L^4) per memory level: every length up to 24, then a few.
    const int64_t lo = MinimumFeasibleBytes(mixed);
    const int64_t hi = StoreAllBytes(mixed);
    if (length <= 24 || length % 16 == 0) {
      for (int64_t budget : {lo, (2 * lo + hi) / 3, (lo + 2 * hi) / 3, hi}) {
        ExpectReversesEveryStep(Budget(mixed, budget), mixed);
      }
    }
    for (int64_t budget : {int64_t{64}, int64_t{16 * 6}, int64_t{16 * 12}, int64_t{16 * 40}}) {
      ExpectReversesEveryStep(Budget(uniform, budget), uniform);
    }
  }
  for (int64_t length : {int64_t{1000}, int64_t{1024}}) {
    const ChainCosts uniform = ChainCosts::Uniform(length, 1, 16, 48);
    for (const Schedule& s : AllGenerators(length)) ExpectReversesEveryStep(s, uniform);
    for (int64_t budget : {int64_t{64}, int64_t{16 * 40}, int64_t{16 * 200}}) {
      ExpectReversesEveryStep(Budget(uniform, budget), uniform);
    }
  }
}

TEST(GeneratorsTest, RejectsInvalidParameters) {
  EXPECT_THROW(EveryK(0, 1), Error);
  EXPECT_THROW(EveryK(8, 0), Error);
  EXPECT_THROW(Segments(8, 0), Error);
  // More segments than steps: a segment per step, as every:1.
  EXPECT_EQ(Segments(8, 9).backward, EveryK(8, 1).backward);
  EXPECT_EQ(Segments(8, 9).forward, EveryK(8, 1).forward);
  EXPECT_THROW(Sqrt(0), Error);
  EXPECT_THROW(Bisect(-3), Error);
  EXPECT_THROW(Revolve(8, -1), Error);
  EXPECT_THROW(RevolveRecomputedSteps(0, 1), Error);
  EXPECT_THROW(RevolveRecomputedSteps(8, -1), Error);
}

TEST(GeneratorsTest, EveryKMatchesPyTorch) {
  const Schedule s = EveryK(10, 4);
  EXPECT_EQ(s.name, "every:4");
  EXPECT_EQ(ToString(s.forward), "kAdvance 4, kSnapshot, kAdvance 4, kSnapshot, kAdvance 2");
  EXPECT_EQ(ToString(s.backward),
            "kRestore 8, kDrop 8, kReverse 2, kRestore 4, kDrop 4, kReverse 4, kRestore 0, kReverse 4");
  // checkpoint_sequential(10 layers, 4 segments): segments of ceil(10/4) = 3.
  EXPECT_EQ(ToString(Segments(10, 4).forward),
            "kAdvance 3, kSnapshot, kAdvance 3, kSnapshot, kAdvance 3, kSnapshot, kAdvance 1");
}

// Sqrt keeps about 2 sqrt(L) tensors at once: k - 1 snapshots plus one
// segment's k steps of residuals, k = sqrt(L): L = 16: 3 + 4 = 7; 64: 7 + 8 =
// 15; 256: 15 + 16 = 31; 1024: 31 + 32 = 63. Bisect keeps log2(L) snapshots
// (16: 4, 64: 6, 256: 8, 1024: 10) and reverses one step at a time.
TEST(GeneratorsTest, SqrtAndBisectKeepWhatTheyPromise) {
  const std::map<int64_t, std::pair<int, int64_t>> sqrt_expected = {
      {16, {3, 4}}, {64, {7, 8}}, {256, {15, 16}}, {1024, {31, 32}}};
  const std::map<int64_t, int> bisect_expected = {{16, 4}, {64, 6}, {256, 8}, {1024, 10}};
  for (const auto& [length, expected] : sqrt_expected) {
    const ChainCosts c = ChainCosts::Uniform(length, 1, 1, 1);
    const Schedule s = Sqrt(length);
    const ScheduleCost cost = Simulate(s, c);
    EXPECT_EQ(cost.max_snapshots, expected.first) << length;
    EXPECT_EQ(MaxReverse(s), expected.second) << length;
    EXPECT_EQ(cost.recomputed_steps, length) << length;  // each step once, in its segment's kReverse
    // Unit carries and residuals: the peak is the kept tensors plus the cotangent.
    EXPECT_EQ(cost.peak_bytes, expected.first + expected.second) << length;
  }
  for (const auto& [length, snapshots] : bisect_expected) {
    const ChainCosts c = ChainCosts::Uniform(length, 1, 1, 1);
    const Schedule s = Bisect(length);
    const ScheduleCost cost = Simulate(s, c);
    EXPECT_EQ(cost.max_snapshots, snapshots) << length;
    EXPECT_EQ(MaxReverse(s), 1) << length;
    // Each head of n steps left by the forward sweep costs (n/2) log2(n) + n:
    // L log2(L) / 2 + 1 in all.
    EXPECT_EQ(cost.recomputed_steps, length * snapshots / 2 + 1) << length;
  }
}

// ---------------------------------------------------------------------------
// Revolve

TEST(RevolveTest, DpMatchesExhaustiveSearch) {
  // The recursive form (RevolveDp) is the optimum of the whole action
  // language with single-step kReverse and c slots.
  RevolveDp dp;
  for (int64_t length = 1; length <= 9; ++length) {
    const ChainCosts c = ChainCosts::Uniform(length, 1, 1, 1);
    for (int slots = 0; slots <= 4; ++slots) {
      Exhaustive search{c};
      search.slots = slots;
      search.single_step = true;
      EXPECT_EQ(search.Solve(), static_cast<double>(dp.Swept(length, slots)))
          << "L=" << length << " c=" << slots;
    }
  }
}

TEST(RevolveTest, ClosedFormIsTheOptimum) {
  RevolveDp dp;
  for (int slots = 0; slots <= 6; ++slots) {
    for (int64_t length = 1; length <= 40; ++length) {
      SCOPED_TRACE("L=" + std::to_string(length) + " c=" + std::to_string(slots));
      const int64_t optimum = dp.Swept(length, slots);
      EXPECT_EQ(RevolveRecomputedSteps(length, slots), optimum);
      const Schedule s = Revolve(length, slots);
      const ScheduleCost cost = Simulate(s, ChainCosts::Uniform(length, 1, 1, 1));
      EXPECT_EQ(cost.recomputed_steps, optimum);
      EXPECT_LE(cost.max_snapshots, slots);
      EXPECT_EQ(MaxReverse(s), 1);
    }
  }
}

TEST(RevolveTest, ClosedFormHoldsForLongChains) {
  for (int64_t length : {int64_t{100}, int64_t{1000}, int64_t{3000}}) {
    for (int slots : {1, 2, 3, 4, 8, 20}) {
      const ScheduleCost cost = Simulate(Revolve(length, slots), ChainCosts::Uniform(length, 1, 1, 1));
      EXPECT_EQ(cost.recomputed_steps, RevolveRecomputedSteps(length, slots))
          << "L=" << length << " c=" << slots;
      EXPECT_LE(cost.max_snapshots, slots);
    }
  }
  EXPECT_EQ(RevolveRecomputedSteps(1000, 0), 1000 * 1001 / 2);
  EXPECT_EQ(RevolveRecomputedSteps(1000, 999), 1000);
  EXPECT_EQ(RevolveRecomputedSteps(1000, 5000), 1000);
  EXPECT_EQ(RevolveRecomputedSteps(1000, 998), 1001);
  // One slot: u(u+1)/2 + u - 1 >= L: L = 1000 needs u = 44.
  EXPECT_EQ(RevolveRecomputedSteps(1000, 1), 44 * 1000 + 44 - 46 * 45 * 44 / 6);
  EXPECT_THROW(RevolveRecomputedSteps(int64_t{1} << 40, 0), Error);
}

// ---------------------------------------------------------------------------
// Budget

void ExpectBudgetOptimal(const ChainCosts& c, int64_t budget) {
  SCOPED_TRACE("L=" + std::to_string(c.length()) + " budget=" + std::to_string(budget));
  Exhaustive search{c};
  search.budget = budget;
  search.tapes = true;
  std::string path;
  const double optimum = search.Solve(&path);
  ASSERT_TRUE(std::isfinite(optimum));
  const Schedule s = Budget(c, budget);
  EXPECT_EQ(s.name, "budget:" + std::to_string(budget));
  const ScheduleCost cost = Simulate(s, c);
  EXPECT_LE(cost.peak_bytes, budget);
  EXPECT_EQ(cost.recomputed_flops, optimum)
      << "optimum: " << path << "\nBudget: " << ToString(s.forward) << " | " << ToString(s.backward)
      << "\nflops " << ToString(c.step_flops) << " carries " << ToString(c.carry_bytes)
      << " residuals " << ToString(c.residual_bytes);
}

std::vector<int64_t> BudgetsToTry(const ChainCosts& c, int count) {
  const int64_t lo = MinimumFeasibleBytes(c);
  const int64_t hi = std::max(StoreAllBytes(c), EagerBytes(c));
  std::vector<int64_t> out;
  for (int i = 0; i <= count; ++i) out.push_back(lo + (hi - lo) * i / count);
  return out;
}

TEST(BudgetTest, NothingWithinTheBudgetRecomputesLess) {
  // Tapes multiply the states: the search takes 5 s at L = 7, 20 s at 8.
  for (int64_t length = 1; length <= 7; ++length) {
    for (uint32_t seed : {1u, 2u}) {
      const ChainCosts c = RandomChain(length, seed * 100 + static_cast<uint32_t>(length));
      for (int64_t budget : BudgetsToTry(c, 6)) ExpectBudgetOptimal(c, budget);
    }
    const ChainCosts uniform = ChainCosts::Uniform(length, 3, 16, 24);
    for (int64_t budget : BudgetsToTry(uniform, 6)) ExpectBudgetOptimal(uniform, budget);
  }
  // Longer chains at their smallest budgets, where the search is short.
  for (int64_t length : {8, 10}) {
    const ChainCosts c = RandomChain(length, 7);
    for (int64_t budget : BudgetsToTry(c, 12)) {
      if (budget > BudgetsToTry(c, 12)[2]) break;
      ExpectBudgetOptimal(c, budget);
    }
  }
}

// Rotor's second mode: more memory never means more recomputation, over a
// sweep of budgets from the smallest feasible to eager's peak.
TEST(BudgetTest, MoreMemoryNeverRecomputesMore) {
  std::vector<ChainCosts> chains = {ChainCosts::Uniform(24, 3, 16, 48), ChainCosts::Uniform(64, 1, 16, 40),
                                    ChainCosts::Uniform(200, 2, 24, 8), RandomChain(12, 5),
                                    RandomChain(20, 6)};
  for (const ChainCosts& c : chains) {
    const int64_t lo = MinimumFeasibleBytes(c);
    const int64_t hi = EagerBytes(c);
    const int64_t step = std::max<int64_t>(4, (hi - lo) / 60);
    double previous = std::numeric_limits<double>::infinity();
    for (int64_t budget = lo; budget <= hi + step; budget += step) {
      SCOPED_TRACE("L=" + std::to_string(c.length()) + " budget=" + std::to_string(budget));
      const ScheduleCost cost = Simulate(Budget(c, budget), c);
      EXPECT_LE(cost.peak_bytes, budget);
      EXPECT_LE(cost.recomputed_flops, previous);
      previous = cost.recomputed_flops;
    }
  }
}

// A budget that holds eager's whole tape recomputes nothing.
TEST(BudgetTest, EagersPeakRecomputesNothing) {
  for (const ChainCosts& c : {ChainCosts::Uniform(256, 1, 16, 48), RandomChain(9, 3), RandomChain(300, 8)}) {
    const Schedule s = Budget(c, EagerBytes(c));
    const ScheduleCost cost = Simulate(s, c);
    EXPECT_EQ(cost.recomputed_flops, 0) << ToString(s.forward) << " | " << ToString(s.backward);
    EXPECT_EQ(cost.taped_steps, c.length());
    EXPECT_EQ(cost.peak_bytes, EagerBytes(c));
  }
}

// Between body checkpointing (every carry kept, each step recomputed once)
// and eager, recomputation falls at least in proportion to the memory
// added. On a uniform chain with R >= C the proportional line is: keep the
// input and k - 1 carries, tape the other L - k steps in the forward pass:
// peak k C + (L - k) R, k steps recomputed (1 <= k <= L). The optimum does
// better still (recomputed steps may be taped too, once the forward pass's
// tapes are freed): the exhaustive search gives it on short chains, and
// Budget matches it.
int64_t ProportionalSteps(int64_t length, int64_t carry, int64_t residual, int64_t budget) {
  if (budget >= length * residual + carry) return 0;
  for (int64_t k = 1; k <= length; ++k) {
    if (k * carry + (length - k) * residual <= budget) return k;
  }
  return length;
}

TEST(BudgetTest, RecomputationFallsInProportionToMemory) {
  for (int64_t length : {3, 5, 6}) {
    const ChainCosts c = ChainCosts::Uniform(length, 1, 16, 40);
    const int64_t body = length * 16 + 40;  // every:1's peak: each step once
    int64_t previous = length + 1;
    for (int64_t budget = body; budget <= EagerBytes(c); budget += 8) {
      SCOPED_TRACE("L=" + std::to_string(length) + " budget=" + std::to_string(budget));
      Exhaustive search{c};
      search.budget = budget;
      search.tapes = true;
      const double optimum = search.Solve();
      const int64_t steps = Simulate(Budget(c, budget), c).recomputed_steps;
      EXPECT_EQ(steps, optimum);
      EXPECT_LE(steps, ProportionalSteps(length, 16, 40, budget));
      EXPECT_LE(steps, previous);
      previous = steps;
    }
    EXPECT_EQ(previous, 0);
    EXPECT_LE(Simulate(Budget(c, body), c).recomputed_steps, length);
  }
  // Long chains: on or below the same line from body checkpointing to eager.
  for (int64_t length : {64, 256}) {
    const ChainCosts c = ChainCosts::Uniform(length, 1, 16, 40);
    const int64_t body = length * 16 + 40;
    for (int i = 0; i <= 16; ++i) {
      const int64_t budget = body + (EagerBytes(c) - body) * i / 16;
      SCOPED_TRACE("L=" + std::to_string(length) + " budget=" + std::to_string(budget));
      const int64_t steps = Simulate(Budget(c, budget), c).recomputed_steps;
      EXPECT_LE(steps, ProportionalSteps(length, 16, 40, budget));
      if (i == 16) {
        EXPECT_EQ(steps, 0);
      }
    }
  }
}

// Never worse than the one-mode optimum (snapshots and kReverse only) at the
// same memory, and strictly better somewhere on every chain.
TEST(BudgetTest, NeverWorseThanOneModeAtTheSameMemory) {
  for (int64_t length = 2; length <= 8; ++length) {
    for (const ChainCosts& c : {RandomChain(length, 500 + static_cast<uint32_t>(length)),
                                ChainCosts::Uniform(length, 2, 16, 32)}) {
      int better = 0;
      for (int64_t budget : BudgetsToTry(c, 8)) {
        SCOPED_TRACE("L=" + std::to_string(length) + " budget=" + std::to_string(budget));
        Exhaustive one_mode{c};
        one_mode.budget = budget;
        const double old_flops = one_mode.Solve();
        const ScheduleCost cost = Simulate(Budget(c, budget), c);
        EXPECT_LE(cost.peak_bytes, budget);
        EXPECT_LE(cost.recomputed_flops, old_flops);
        better += cost.recomputed_flops < old_flops;
      }
      EXPECT_GT(better, 0) << "L=" << length;
    }
  }
}

// A snapshot the forward pass took for free serves once as a stepping stone
// and is dropped before its segment is done: Rotor's form cannot say this.
TEST(BudgetTest, UsesSteppingStones) {
  ChainCosts c;
  c.step_flops = {8, 3, 9, 6};
  c.carry_bytes = {16, 16, 40, 32, 32};
  c.residual_bytes = {56, 16, 56, 40};
  const Schedule s = Budget(c, 88);
  EXPECT_EQ(ToString(s.forward), "kAdvance 1, kSnapshot, kAdvance 2, kAdvanceTaped 1");
  // Step 3 from its tape; step 2 from the stone at 1 (dropped: keeping it
  // would need 16 more bytes), steps 1 and 0 from the input.
  EXPECT_EQ(ToString(s.backward),
            "kReverseTaped 1, kRestore 1, kDrop 1, kAdvance 1, kReverse 1, kRestore 0, kAdvance 1, "
            "kReverse 1, kRestore 0, kReverse 1");
  EXPECT_EQ(Simulate(s, c).recomputed_flops, 3 + 9 + 8 + 3 + 8);
  EXPECT_EQ(Simulate(schedule_internal::BudgetRotor(c, 88, 1e9), c).recomputed_flops, 39);
}

TEST(BudgetTest, MinimumFeasibleIsExact) {
  for (int64_t length = 1; length <= 9; ++length) {
    const ChainCosts c = RandomChain(length, 40 + static_cast<uint32_t>(length));
    const int64_t lo = MinimumFeasibleBytes(c);
    Exhaustive search{c};
    search.tapes = true;  // tapes do not lower it
    search.budget = lo - 1;
    EXPECT_TRUE(std::isinf(search.Solve())) << length;
    search.budget = lo;
    EXPECT_TRUE(std::isfinite(search.Solve())) << length;
  }
}

TEST(BudgetTest, TooSmallNamesTheSmallestFeasible) {
  for (const ChainCosts& c : {RandomChain(9, 5), ChainCosts::Uniform(9, 1, 1024, 4096)}) {
    const int64_t lo = MinimumFeasibleBytes(c);
    try {
      Budget(c, lo - 1);
      ADD_FAILURE() << "accepted a budget below the smallest feasible";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "budget " + std::to_string(lo - 1) +
                                           " bytes is too small for this chain: the smallest feasible is " +
                                           std::to_string(lo) + " bytes");
    }
    const ScheduleCost cost = Simulate(Budget(c, lo), c);
    EXPECT_EQ(cost.peak_bytes, lo);
  }
  EXPECT_EQ(MinimumFeasibleBytes(ChainCosts::Uniform(9, 1, 1024, 4096)), 1024 + 4096);
}

// On uniform chains a snapshot dropped before its segment is done never
// helps (the exhaustive tests above see none for L <= 12), so Rotor's form,
// solved by length, is the optimum: it matches the exact DP.
TEST(BudgetTest, UniformSolverMatchesTheExactOne) {
  for (int64_t length : {2, 5, 9, 14, 20}) {
    for (int64_t residual : {0, 8, 16, 48}) {
      const ChainCosts c = ChainCosts::Uniform(length, 1, 16, residual);
      const int64_t lo = MinimumFeasibleBytes(c);
      const int64_t hi = StoreAllBytes(c);
      for (int64_t budget = lo; budget <= hi; budget += std::max<int64_t>(8, (hi - lo) / 12)) {
        SCOPED_TRACE("L=" + std::to_string(length) + " R=" + std::to_string(residual) +
                     " budget=" + std::to_string(budget));
        const ScheduleCost uniform = Simulate(schedule_internal::BudgetUniform(c, budget, 1e9), c);
        const ScheduleCost exact = Simulate(schedule_internal::BudgetExact(c, budget, 1e9), c);
        EXPECT_EQ(uniform.recomputed_steps, exact.recomputed_steps);
        EXPECT_LE(uniform.peak_bytes, budget);
        EXPECT_LE(exact.peak_bytes, budget);
      }
    }
  }
}

// Rotor's form (every snapshot kept until its segment is done) fits and never
// beats the exact DP; on chains of differing sizes it is sometimes worse.
TEST(BudgetTest, RotorFormIsAnUpperBound) {
  int worse = 0;
  for (int64_t length = 2; length <= 9; ++length) {
    for (uint32_t seed = 0; seed < 6; ++seed) {
      const ChainCosts c = RandomChain(length, 300 + seed * 17 + static_cast<uint32_t>(length));
      for (int64_t budget : BudgetsToTry(c, 6)) {
        const ScheduleCost rotor = Simulate(schedule_internal::BudgetRotor(c, budget, 1e9), c);
        const ScheduleCost exact = Simulate(Budget(c, budget), c);
        EXPECT_LE(rotor.peak_bytes, budget);
        EXPECT_GE(rotor.recomputed_flops, exact.recomputed_flops);
        worse += rotor.recomputed_flops > exact.recomputed_flops;
      }
    }
  }
  EXPECT_GT(worse, 0);
}

TEST(BudgetTest, NeverWorseThanRevolveAtRevolvesPeak) {
  for (int64_t length = 2; length <= 30; ++length) {
    for (int slots = 1; slots <= 4; ++slots) {
      const ChainCosts c = ChainCosts::Uniform(length, 1, 16, 16);
      const ScheduleCost revolve = Simulate(Revolve(length, slots), c);
      const ScheduleCost budget = Simulate(Budget(c, revolve.peak_bytes), c);
      EXPECT_LE(budget.recomputed_steps, revolve.recomputed_steps) << "L=" << length << " c=" << slots;
      EXPECT_LE(budget.peak_bytes, revolve.peak_bytes);
    }
  }
}

TEST(BudgetTest, CoarseMemoryUnitsStillFit) {
  // A tiny work limit forces memory into coarse units: the schedule fits,
  // and costs at least the exact optimum.
  using Solver = Schedule (*)(const ChainCosts&, int64_t, double);
  const std::vector<std::pair<ChainCosts, Solver>> cases = {
      {RandomChain(30, 9), &schedule_internal::BudgetExact},
      {RandomChain(30, 9), &schedule_internal::BudgetRotor},
      {ChainCosts::Uniform(200, 1, 16, 40), &schedule_internal::BudgetUniform},
  };
  for (const auto& [c, solve] : cases) {
    for (int64_t budget : BudgetsToTry(c, 5)) {
      const ScheduleCost exact = Simulate(Budget(c, budget), c);
      for (double work : {1e3, 1e5}) {
        const ScheduleCost coarse = Simulate(solve(c, budget, work), c);
        EXPECT_LE(coarse.peak_bytes, budget);
        EXPECT_GE(coarse.recomputed_flops, exact.recomputed_flops);
      }
    }
  }
}

TEST(BudgetTest, LongChainsSolveQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const ChainCosts c = ChainCosts::Uniform(4096, 1, 1024, 2048);
  for (int64_t carries : {3, 10, 30, 100, 1000}) {
    const int64_t budget = carries * 1024;
    const auto t0 = std::chrono::steady_clock::now();
    const Schedule s = Budget(c, budget);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const ScheduleCost cost = Simulate(s, c);
    EXPECT_LE(cost.peak_bytes, budget);
    std::printf("budget %5lld carries, L = 4096: %lld recomputed steps, %d snapshots, %.3f s\n",
                static_cast<long long>(carries), static_cast<long long>(cost.recomputed_steps),
                cost.max_snapshots, seconds);
  }
  const ChainCosts mixed = RandomChain(300, 3);
  const int64_t lo = MinimumFeasibleBytes(mixed);
  const ScheduleCost cost = Simulate(Budget(mixed, 3 * lo), mixed);
  EXPECT_LE(cost.peak_bytes, 3 * lo);
  const ChainCosts long_mixed = RandomChain(3000, 4);
  const int64_t long_lo = MinimumFeasibleBytes(long_mixed);
  for (int64_t budget : {long_lo, 2 * long_lo, 20 * long_lo}) {
    EXPECT_LE(Simulate(Budget(long_mixed, budget), long_mixed).peak_bytes, budget);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("long chains: %.3f s\n", seconds);
}

// ---------------------------------------------------------------------------
// Parsing

TEST(ParseTest, Bytes) {
  EXPECT_EQ(ParseBytes("123"), 123);
  EXPECT_EQ(ParseBytes("123B"), 123);
  EXPECT_EQ(ParseBytes("256KiB"), 256 * 1024);
  EXPECT_EQ(ParseBytes("64MiB"), 64 << 20);
  EXPECT_EQ(ParseBytes("1.5GiB"), 3 * (int64_t{1} << 29));
  EXPECT_EQ(ParseBytes("1GB"), 1000000000);
  EXPECT_EQ(ParseBytes("2TiB"), int64_t{2} << 40);
  EXPECT_EQ(ParseBytes("0.001KB"), 1);
  EXPECT_EQ(ParseBytes("1.0009KB"), 1000);  // fractions of a byte round down
  for (const char* bad : {"", "KiB", "-5", "1.5.2GB", "12 MiB", "12mib", "1e9", "9999999999TiB"}) {
    EXPECT_THROW(ParseBytes(bad), Error) << bad;
  }
}

TEST(ParseTest, EveryFormRoundTripsThroughItsName) {
  const ChainCosts c = RandomChain(20, 11);
  const int64_t budget = MinimumFeasibleBytes(c) * 2;
  for (const Schedule& s : {EveryK(20, 3), Segments(20, 6), Sqrt(20), Bisect(20), Revolve(20, 3),
                            Budget(c, budget)}) {
    const Schedule parsed = ParseSchedule(s.name, c);
    EXPECT_EQ(parsed.name, s.name);
    EXPECT_EQ(parsed.forward, s.forward) << s.name;
    EXPECT_EQ(parsed.backward, s.backward) << s.name;
  }
  EXPECT_EQ(ParseSchedule("budget:1KiB", ChainCosts::Uniform(4, 1, 8, 8)).name, "budget:1024");
  EXPECT_EQ(ScheduleForms().size(), 6u);
}

TEST(ParseTest, UnknownSpecsListTheForms) {
  const ChainCosts c = ChainCosts::Uniform(8, 1, 8, 8);
  for (const char* bad : {"", "revolve", "every:", "every:x", "every:3x", "sqrt:2", "bisect:1", "lru:4",
                          "budget:lots"}) {
    EXPECT_THROW(ParseSchedule(bad, c), Error) << bad;
  }
  try {
    ParseSchedule("lru:4", c);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "schedule \"lru:4\": unknown schedule; the forms are every:K, segments:K, sqrt, bisect, "
              "revolve:C, budget:BYTES");
  }
  // The syntax alone, without a chain (what a program file's loader checks).
  EXPECT_EQ(ParseScheduleSpec("revolve:3").n, 3);
  EXPECT_EQ(ParseScheduleSpec("budget:1KiB").n, 1024);
  EXPECT_EQ(ParseScheduleSpec("bisect").form, "bisect");
  for (const char* bad : {"", "revolve", "every:", "every:x", "every:3x", "sqrt:2", "bisect:1", "lru:4",
                          "budget:lots", "every:0", "segments:-2", "revolve:-1"}) {
    EXPECT_THROW(ParseScheduleSpec(bad), Error) << bad;
  }
  EXPECT_THROW(ParseSchedule("every:0", c), Error);
  EXPECT_THROW(ParseSchedule("revolve:-1", c), Error);
  EXPECT_THROW(ParseSchedule("budget:1", c), Error);  // too small
}

}  // namespace
}  // namespace remat
