#include "engines/dtr/cell_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/memory_tracker.h"

namespace remat {
namespace dtr {
namespace {

// Ten floats (40 bytes) counted by `tracker`, all equal to `v`.
Tensor Filled(const std::shared_ptr<MemoryTracker>& tracker, float v) {
  Tensor t = Tensor::Zeros(DType::kF32, Shape({10}), tracker);
  for (int i = 0; i < 10; ++i) t.f32()[i] = v;
  return t;
}

// A cell computed as its first parent plus one, which logs its recomputations.
struct Graph {
  std::shared_ptr<MemoryTracker> tracker = std::make_shared<MemoryTracker>();
  CellPool pool;
  std::vector<std::string> log;
  std::vector<float> values;  // by cell, as first computed

  explicit Graph(Heuristic h) : pool(h) {}

  CellId Argument(const std::string& name, float v) {
    values.push_back(v);
    return pool.AddPermanent(Filled(tracker, v), "argument " + name);
  }
  float value(CellId id) const { return values.at(id); }
  // A cell that is never recomputed (no function).
  CellId Leaf(const std::string& name, CellId parent, int64_t cost, int64_t uses) {
    pool.Tick();
    values.push_back(9);
    return pool.AddComputed(Filled(tracker, 9), {parent}, cost, nullptr, name, uses);
  }

  CellId Add(const std::string& name, std::vector<CellId> parents, int64_t cost, int64_t uses) {
    pool.Tick();
    // The value a recomputation gives: one more than the first parent's.
    const float v = value(parents[0]) + 1;
    values.push_back(v);
    RecomputeFn recompute = [this, name](const std::vector<Tensor>& ps) {
      log.push_back(name);
      return Filled(tracker, ps[0].f32()[0] + 1);
    };
    return pool.AddComputed(Filled(tracker, v), std::move(parents), cost, recompute, name, uses);
  }
};

// h_DTR against h without its neighbourhood, by hand. Cells of 40 bytes,
// created one tick apart:
//
//   a (argument) -> b (cost 10) -> c (cost 1000) -> d (cost 10);   e (cost 50)
//
// c's uses end (its tensor is freed; d still needs it, so it stays
// recomputable: evicted). At clock 5, staleness = 5 - created + 1:
//   b created at 1: s = 5,  d at 3: s = 3,  e at 4: s = 2.
// Without the neighbourhood:
//   h(b) = 10 / (40*5) = 0.05,  h(d) = 10 / (40*3) = 0.083,  h(e) = 50 / (40*2) = 0.625
// so b goes. With it, e*(b) = e*(d) = {c} (b's evicted child, d's evicted parent):
//   h(b) = (10 + 1000) / 200 = 5.05,  h(d) = 1010 / 120 = 8.42,  h(e) = 0.625
// so e goes: evicting b would make c's recomputation need b's as well.
TEST(CellPoolTest, TheEvictedNeighbourhoodChangesTheChoice) {
  for (Heuristic h : {Heuristic::kLocal, Heuristic::kDtr, Heuristic::kDtrEqClass}) {
    SCOPED_TRACE(HeuristicName(h));
    Graph g(h);
    const CellId a = g.Argument("a", 0);
    const CellId b = g.Add("b", {a}, 10, 1);
    const CellId c = g.Add("c", {b}, 1000, 1);
    const CellId d = g.Add("d", {c}, 10, 1);
    const CellId e = g.Leaf("e", a, 50, 1);
    g.pool.Tick();
    ASSERT_EQ(g.pool.clock(), 5);
    g.pool.ReleaseUse(c);
    EXPECT_FALSE(g.pool.resident(c));
    EXPECT_FALSE(g.pool.banished(c));
    EXPECT_EQ(g.tracker->live_bytes(), 4 * 40);  // a, b, d, e
    if (h == Heuristic::kLocal) {
      EXPECT_DOUBLE_EQ(g.pool.Score(b), 0.05);
      EXPECT_DOUBLE_EQ(g.pool.Score(d), 10.0 / 120);
      EXPECT_EQ(g.pool.ChooseVictim(), b);
    } else {
      EXPECT_EQ(g.pool.NeighbourhoodCost(b), 1000);
      EXPECT_DOUBLE_EQ(g.pool.Score(b), 5.05);
      EXPECT_DOUBLE_EQ(g.pool.Score(d), 1010.0 / 120);
      EXPECT_EQ(g.pool.ChooseVictim(), e);
    }
    EXPECT_DOUBLE_EQ(g.pool.Score(e), 0.625);
    // The argument is never a candidate, whatever its score would be.
    ASSERT_TRUE(g.pool.EvictOne());
    EXPECT_TRUE(g.pool.resident(a));
    EXPECT_EQ(g.pool.evictions(), 1);
  }
}

// Where h_DTR^eq's union-find estimate differs from the exact e*: classes
// join evicted cells regardless of direction. Cells of 40 bytes:
//
//   a -> b (cost 10) --+
//   a -> p (cost 1000) -+-> c (cost 10) -> d (cost 10);   e (cost 100)
//
// p's and c's uses end: both evicted (d needs c, c needs p). At clock 6:
// s(b) = 6, s(d) = 3, s(e) = 2.
//   Exact:   e*(b) = {c} (its evicted child; c's other parent p is not
//            something b's eviction makes anyone recompute):
//            h(b) = (10 + 10) / (40*6) = 0.083;  e*(d) = {c, p}: h(d) =
//            1020 / 120 = 8.5;  h(e) = 100 / 80 = 1.25.  b goes.
//   Classes: p and c touch: one class of cost 1010, which b's child is in:
//            h(b) = (10 + 1010) / 240 = 4.25, h(d) = 8.5, h(e) = 1.25.  e goes.
TEST(CellPoolTest, EquivalenceClassesOverestimateAcrossSiblings) {
  for (Heuristic h : {Heuristic::kDtr, Heuristic::kDtrEqClass}) {
    SCOPED_TRACE(HeuristicName(h));
    Graph g(h);
    const CellId a = g.Argument("a", 0);
    const CellId b = g.Add("b", {a}, 10, 1);
    const CellId p = g.Add("p", {a}, 1000, 1);
    const CellId c = g.Add("c", {b, p}, 10, 1);
    const CellId d = g.Add("d", {c}, 10, 1);
    const CellId e = g.Leaf("e", a, 100, 1);
    g.pool.Tick();
    ASSERT_EQ(g.pool.clock(), 6);
    g.pool.ReleaseUse(p);
    g.pool.ReleaseUse(c);
    EXPECT_DOUBLE_EQ(g.pool.Score(d), 8.5);
    EXPECT_DOUBLE_EQ(g.pool.Score(e), 1.25);
    if (h == Heuristic::kDtr) {
      EXPECT_EQ(g.pool.NeighbourhoodCost(b), 10);
      EXPECT_DOUBLE_EQ(g.pool.Score(b), 20.0 / 240);
      EXPECT_EQ(g.pool.ChooseVictim(), b);
    } else {
      EXPECT_EQ(g.pool.NeighbourhoodCost(b), 1010);
      EXPECT_DOUBLE_EQ(g.pool.Score(b), 4.25);
      EXPECT_EQ(g.pool.ChooseVictim(), e);
    }
    // Recomputing d's parents takes p's cost out of the class (it is
    // resident again) but does not split it.
    g.pool.ReleaseUse(b);  // b freed too: d's recomputation reaches a
    Tensor t = g.pool.Acquire(c);
    EXPECT_EQ(t.f32()[0], 2);  // c = b + 1 = (a + 1) + 1
    g.pool.Unpin(c);
    EXPECT_EQ(g.log, (std::vector<std::string>{"b", "p", "c"}));
    EXPECT_EQ(g.pool.NeighbourhoodCost(d), 0);
  }
}

// An evicted chain is recomputed from its nearest resident ancestor, parents
// first, without passing the cap: each parent is pinned only until its child
// is computed, so two cells of the chain are live at once, never more.
TEST(CellPoolTest, RecomputesAnEvictedChainRecursivelyUnderTheCap) {
  Graph g(Heuristic::kDtr);
  const CellId a = g.Argument("a", 0);
  std::vector<CellId> chain = {a};
  for (int i = 1; i <= 6; ++i) {
    chain.push_back(g.Add("c" + std::to_string(i), {chain.back()}, 100, 1));
    // Read by its child: only the last has a use to come, and the others
    // stay recomputable for it.
    if (i > 1) g.pool.ReleaseUse(chain[i - 1]);
  }
  for (int i = 1; i <= 5; ++i) EXPECT_FALSE(g.pool.resident(chain[i])) << i;
  ASSERT_TRUE(g.pool.EvictOne());  // c6, the only resident candidate
  EXPECT_FALSE(g.pool.resident(chain[6]));
  EXPECT_EQ(g.tracker->live_bytes(), 40);  // a alone

  // Room for a and two cells: 120 bytes.
  g.tracker->set_soft_cap_bytes(120);
  g.tracker->set_pressure_hook([&](int64_t bytes) {
    const int64_t target = g.tracker->live_bytes() - bytes;
    while (g.tracker->live_bytes() > target && g.pool.EvictOne()) {
    }
  });
  Tensor t = g.pool.Acquire(chain[6]);
  EXPECT_EQ(t.f32()[0], 6);
  EXPECT_EQ(g.log, (std::vector<std::string>{"c1", "c2", "c3", "c4", "c5", "c6"}));
  EXPECT_EQ(g.pool.recomputations(), 6);
  EXPECT_EQ(g.tracker->peak_bytes(), 120);
  EXPECT_GE(g.pool.evictions(), 4);  // c1..c4 made room for c3..c6
  g.pool.Unpin(chain[6]);
  t = Tensor();

  g.pool.ReleaseUse(chain[6]);  // c6's last use: nothing needs the chain now
  for (int i = 1; i <= 6; ++i) EXPECT_TRUE(g.pool.banished(chain[i])) << i;
  EXPECT_EQ(g.tracker->live_bytes(), 40);
}

TEST(CellPoolTest, TooSmallACapIsAMemoryCapError) {
  Graph g(Heuristic::kDtr);
  const CellId a = g.Argument("a", 0);
  const CellId b = g.Add("b", {a}, 100, 1);
  const CellId c = g.Add("c", {b}, 100, 1);
  g.pool.ReleaseUse(b);
  ASSERT_TRUE(g.pool.EvictOne());  // c
  g.tracker->ResetPeak();
  g.tracker->set_soft_cap_bytes(80);  // a and one more: c's recomputation needs b and c
  g.tracker->set_pressure_hook([&](int64_t) {
    while (g.pool.EvictOne()) {
    }
  });
  EXPECT_THROW(g.pool.Acquire(c), MemoryCapError);
  EXPECT_LE(g.tracker->peak_bytes(), 80);
}

TEST(CellPoolTest, PinnedAndPermanentCellsAreNeverEvicted) {
  Graph g(Heuristic::kDtr);
  const CellId a = g.Argument("a", 0);
  const CellId b = g.Add("b", {a}, 1, 1);
  const CellId c = g.Add("c", {b}, 1, 1);
  Tensor held = g.pool.Acquire(b);
  g.pool.MakePermanent(c);
  EXPECT_FALSE(g.pool.ChooseVictim().has_value());
  EXPECT_FALSE(g.pool.EvictOne());
  g.pool.Unpin(b);
  EXPECT_EQ(g.pool.ChooseVictim(), b);
  // A use released while pinned frees the tensor only once unpinned.
  held = g.pool.Acquire(b);
  g.pool.ReleaseUse(b);
  EXPECT_TRUE(g.pool.resident(b));
  g.pool.Unpin(b);
  EXPECT_FALSE(g.pool.resident(b));
  // b's only child is the permanent c: nothing can need b again.
  EXPECT_TRUE(g.pool.banished(b));
  EXPECT_THROW(g.pool.Unpin(b), Error);
}

}  // namespace
}  // namespace dtr
}  // namespace remat
