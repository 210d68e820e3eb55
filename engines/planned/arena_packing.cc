#include "engines/planned/arena_packing.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <utility>

namespace remat {
namespace {

int64_t RoundUp(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// Places the ranges in `order`; each at the best-fitting gap among the
// placed ranges it overlaps in time.
Packing PackInOrder(const std::vector<LiveRange>& ranges, const std::vector<size_t>& order,
                    int64_t alignment) {
  Packing packing;
  packing.offsets.assign(ranges.size(), 0);
  std::vector<size_t> placed;
  for (size_t i : order) {
    const LiveRange& r = ranges[i];
    const int64_t size = RoundUp(std::max<int64_t>(r.bytes, 1), alignment);
    // The occupied intervals of the arena while r is live, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      const LiveRange& o = ranges[j];
      if (o.start < r.end && r.start < o.end) {
        busy.emplace_back(packing.offsets[j],
                          packing.offsets[j] + RoundUp(std::max<int64_t>(o.bytes, 1), alignment));
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1;
    int64_t best_gap = 0;
    int64_t cursor = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo - cursor >= size && (best < 0 || lo - cursor < best_gap)) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best < 0) best = cursor;  // above everything live
    packing.offsets[i] = best;
    packing.arena_bytes = std::max(packing.arena_bytes, best + size);
    placed.push_back(i);
  }
  return packing;
}

}  // namespace

Packing PackArena(const std::vector<LiveRange>& ranges, int64_t alignment) {
  // Orders to place the ranges in; the smallest arena wins. Greedy by size
  // is XLA's heuristic; the others win on lifetimes that nest like a
  // reverse-mode run's (a forward pass's residuals freed in reverse).
  using Key = std::function<bool(const LiveRange&, const LiveRange&)>;
  const std::vector<Key> orders = {
      [](const LiveRange& a, const LiveRange& b) { return a.bytes > b.bytes; },
      [](const LiveRange& a, const LiveRange& b) { return a.start < b.start; },
      [](const LiveRange& a, const LiveRange& b) {
        return a.end - a.start > b.end - b.start;
      },
      [](const LiveRange& a, const LiveRange& b) {
        return a.bytes * (a.end - a.start) > b.bytes * (b.end - b.start);
      },
      [](const LiveRange& a, const LiveRange& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.end - a.start > b.end - b.start;
      },
  };
  Packing best;
  bool first = true;
  for (const Key& key : orders) {
    std::vector<size_t> order(ranges.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return key(ranges[a], ranges[b]); });
    Packing p = PackInOrder(ranges, order, alignment);
    if (first || p.arena_bytes < best.arena_bytes) best = std::move(p);
    first = false;
  }
  return best;
}

int64_t MaxLiveBytes(const std::vector<LiveRange>& ranges, int64_t alignment) {
  // Ends before starts at the same position: [start, end) ranges.
  std::map<int64_t, int64_t> delta;
  for (const LiveRange& r : ranges) {
    const int64_t size = RoundUp(std::max<int64_t>(r.bytes, 1), alignment);
    delta[r.start] += size;
    delta[r.end] -= size;
  }
  int64_t live = 0;
  int64_t most = 0;
  for (const auto& [pos, d] : delta) {
    live += d;
    most = std::max(most, live);
  }
  return most;
}

}  // namespace remat
