// Static buffer assignment: every buffer of a compiled run gets an offset in
// one arena, from its live range, so that buffers live at the same time never
// overlap (a liveness-based packing, as XLA's buffer assignment does).
#ifndef REMAT_ENGINES_PLANNED_ARENA_PACKING_H_
#define REMAT_ENGINES_PLANNED_ARENA_PACKING_H_

#include <cstdint>
#include <vector>

namespace remat {

// A buffer live over the instruction positions [start, end).
struct LiveRange {
  int64_t start = 0;
  int64_t end = 0;
  int64_t bytes = 0;
};

struct Packing {
  std::vector<int64_t> offsets;  // by range
  int64_t arena_bytes = 0;       // the end of the highest buffer
};

// Every offset is a multiple of `alignment` (the kernels see storage aligned
// as a malloc'd buffer is), or for a buffer smaller than `alignment`, of the
// smallest power of two that holds it (sizes round up to that too). Several orders are tried
// (greedy by size, by start, by lifetime, by size times lifetime), each placing a buffer at the
// lowest offset that fits (best fit: the smallest gap that holds it) among the buffers already
// placed that it overlaps in time; the smaller arena wins.
Packing PackArena(const std::vector<LiveRange>& ranges, int64_t alignment);

// The lower bound of any packing: the most bytes live at once, each rounded
// up as PackArena rounds it.
int64_t MaxLiveBytes(const std::vector<LiveRange>& ranges, int64_t alignment);

}  // namespace remat

#endif  // REMAT_ENGINES_PLANNED_ARENA_PACKING_H_
