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

// A buffer's alignment: `alignment`, or for a buffer smaller than that the
// smallest power of two that holds it (a scalar needs no cache line).
int64_t AlignmentOf(int64_t bytes, int64_t alignment) {
  int64_t a = 1;
  while (a < bytes && a < alignment) a *= 2;
  return a;
}

int64_t Size(const LiveRange& r, int64_t alignment) {
  const int64_t bytes = std::max<int64_t>(r.bytes, 1);
  return RoundUp(bytes, AlignmentOf(bytes, alignment));
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
    const int64_t size = Size(r, alignment);
    const int64_t align = AlignmentOf(size, alignment);
    // The occupied intervals of the arena while r is live, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      const LiveRange& o = ranges[j];
      if (o.start < r.end && r.start < o.end) {
        busy.emplace_back(packing.offsets[j], packing.offsets[j] + Size(o, alignment));
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1;
    int64_t best_gap = 0;
    int64_t cursor = 0;
    for (const auto& [lo, hi] : busy) {
      const int64_t at = RoundUp(cursor, align);
      if (lo - at >= size && (best < 0 || lo - at < best_gap)) {
        best = at;
        best_gap = lo - at;
      }
      cursor = std::max(cursor, hi);
    }
    if (best < 0) best = RoundUp(cursor, align);  // above everything live
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
      [](const LiveRange& a, const LiveRange& b) { return a.end - a.start > b.end - b.start; },
      [](const LiveRange& a, const LiveRange& b) {
        return a.bytes * (a.end - a.start) > b.bytes * (b.end - b.start);
      },
      [](const LiveRange& a, const LiveRange& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.end - a.start > b.end - b.start;
      },
  };
  // Each order costs O(n^2): past kManyRanges, greedy by size and by
  // start only (compile time grows with the plan; the others rarely win).
  constexpr size_t kManyRanges = 1024;
  const size_t tried = ranges.size() > kManyRanges ? 2 : orders.size();
  Packing best;
  bool first = true;
  for (size_t o = 0; o < tried; ++o) {
    const Key& key = orders[o];
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
    const int64_t size = Size(r, alignment);
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
