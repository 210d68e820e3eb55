#include "engines/planned/arena_packing.h"

#include <vector>

#include "gtest/gtest.h"

namespace remat {
namespace {

bool Overlap(const LiveRange& a, int64_t oa, const LiveRange& b, int64_t ob, int64_t align) {
  auto size = [&](const LiveRange& r) { return r.bytes; };
  const bool in_time = a.start < b.end && b.start < a.end;
  const bool in_space = oa < ob + size(b) && ob < oa + size(a);
  return in_time && in_space;
}

void ExpectValid(const std::vector<LiveRange>& ranges, const Packing& p, int64_t align) {
  ASSERT_EQ(p.offsets.size(), ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % (ranges[i].bytes >= align ? align : 4), 0);
    EXPECT_LE(p.offsets[i] + ranges[i].bytes, p.arena_bytes);
    for (size_t j = i + 1; j < ranges.size(); ++j) {
      EXPECT_FALSE(Overlap(ranges[i], p.offsets[i], ranges[j], p.offsets[j], align))
          << "ranges " << i << " and " << j;
    }
  }
}

TEST(ArenaPackingTest, DisjointLifetimesShareStorage) {
  const std::vector<LiveRange> ranges = {{0, 2, 64}, {2, 4, 64}, {4, 6, 64}};
  const Packing p = PackArena(ranges, 64);
  ExpectValid(ranges, p, 64);
  EXPECT_EQ(p.arena_bytes, 64);
  EXPECT_EQ(MaxLiveBytes(ranges, 64), 64);
}

TEST(ArenaPackingTest, StackLikeLifetimesAreTight) {
  // A forward pass keeping residuals and a backward pass freeing them.
  std::vector<LiveRange> ranges;
  for (int i = 0; i < 8; ++i) ranges.push_back({i, 20 - i, 128 * (i % 3 + 1)});
  for (int i = 0; i < 8; ++i) ranges.push_back({12 + i, 13 + i, 256});
  const Packing p = PackArena(ranges, 64);
  ExpectValid(ranges, p, 64);
  EXPECT_EQ(p.arena_bytes, MaxLiveBytes(ranges, 64));
}

TEST(ArenaPackingTest, SizesRoundUpToTheirAlignment) {
  const std::vector<LiveRange> ranges = {{0, 3, 4}, {1, 3, 4}, {2, 3, 100}};
  const Packing p = PackArena(ranges, 64);
  ExpectValid(ranges, p, 64);
  // The 100-byte buffer takes 128 bytes at offset 0, the scalars 4 each
  // after it (their own alignment, not a cache line each).
  EXPECT_EQ(p.arena_bytes, 128 + 4 + 4);
  EXPECT_EQ(MaxLiveBytes(ranges, 64), 4 + 4 + 128);
}

TEST(ArenaPackingTest, FillsTheBestGap) {
  // Two holes (64 and 128 bytes) open when the 192-byte buffer comes: a
  // 64-byte buffer goes into the 64-byte hole, not the first one that fits.
  const std::vector<LiveRange> ranges = {{0, 10, 128}, {0, 2, 128}, {0, 10, 64},
                                         {0, 2, 64},   {0, 10, 64}, {3, 10, 64}};
  const Packing p = PackArena(ranges, 64);
  ExpectValid(ranges, p, 64);
  EXPECT_EQ(p.arena_bytes, MaxLiveBytes(ranges, 64));
}

}  // namespace
}  // namespace remat
