// Memory caps as users give them, and the static answer at the same memory:
// shared by `remat run --memory-cap`, the bench's cap rows and dtr_sweep.
#ifndef REMAT_HARNESS_MEMORY_CAPS_H_
#define REMAT_HARNESS_MEMORY_CAPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/engine.h"

namespace remat {

// A cap and how it was given, for listings: `how` is "" for bytes, or
// "0.5 x eager's peak of N bytes".
struct ResolvedCap {
  int64_t bytes = 0;
  std::string how;
};

// A cap's text read without a program: BYTES (ParseBytes' forms: 64MiB,
// 1000000) or FRACx (a positive finite fraction of eager's peak). At most
// one of the two is set: "0" is 0 bytes, which --memory-cap reads as no
// cap. Throws remat::Error naming `flag` and the text for anything else, ""
// included.
struct CapSpec {
  int64_t bytes = 0;
  double fraction_of_eager = 0;
};
CapSpec ParseCapSpec(const std::string& text, const std::string& flag = "--memory-cap");

// "BYTES" (ParseBytes' forms: 64MiB, 1000000) or "FRACx" (a positive
// fraction of eager's peak on `program`, planned on a dry run: no data,
// nothing allocated). "" gives 0 (no cap). Throws remat::Error naming `flag`
// and the text for anything else, and for an engine that does not honour
// caps (Engine::honours_memory_cap), listing the registered engines that do.
ResolvedCap ResolveMemoryCap(const std::string& text, const Program& program,
                             const std::vector<int>& wrt, const Engine& engine,
                             const std::string& flag = "--memory-cap");

// Registered engines whose honours_memory_cap() is true.
std::vector<std::string> CapEngines();

// recompute's plan of `program` under budget:B (a dry run), or nothing if B
// is below the smallest feasible budget (then *smallest is that budget).
std::optional<Stats> PlanBudget(const Program& program, const std::vector<int>& wrt, int64_t budget,
                                int64_t* smallest);

// The largest B for which budget:B's planned peak (total, every category)
// is at most `cap_bytes`, found by bisection (a peak grows with B) to within
// 0.1% of B, and that plan; nothing if no budget fits. `most`: the largest B
// worth trying (eager's activations: beyond them nothing changes).
std::optional<std::pair<int64_t, Stats>> LargestBudgetUnder(const Program& program,
                                                            const std::vector<int>& wrt,
                                                            int64_t cap_bytes, int64_t most);

}  // namespace remat

#endif  // REMAT_HARNESS_MEMORY_CAPS_H_
