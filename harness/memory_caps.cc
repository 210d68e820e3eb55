#include "harness/memory_caps.h"

#include <cmath>
#include <exception>

#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "engines/api/units.h"
#include "engines/schedule/schedule.h"
#include "harness/conformance.h"

namespace remat {

std::vector<std::string> CapEngines() {
  std::vector<std::string> names;
  for (const auto& e : RegisteredEngines()) {
    if (e.factory()->honours_memory_cap()) names.push_back(e.name);
  }
  return names;
}

CapSpec ParseCapSpec(const std::string& text, const std::string& flag) {
  CapSpec spec;
  if (!text.empty() && text.back() != 'x') {
    try {
      spec.bytes = ParseBytes(text);
    } catch (const Error& e) {
      throw Error(StrCat(flag, " '", text, "': ", e.what()), e);
    }
    return spec;
  }
  const std::string number = text.empty() ? "" : text.substr(0, text.size() - 1);
  size_t used = 0;
  try {
    spec.fraction_of_eager = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != number.size() || !std::isfinite(spec.fraction_of_eager) ||
      spec.fraction_of_eager <= 0) {
    throw Error(StrCat(flag, " '", text,
                       "': expected BYTES (e.g. 64MiB) or a positive fraction of eager's peak "
                       "followed by x (e.g. 0.5x)"));
  }
  return spec;
}

ResolvedCap ResolveMemoryCap(const std::string& text, const Program& program,
                             const std::vector<int>& wrt, const Engine& engine,
                             const std::string& flag) {
  ResolvedCap cap;
  if (text.empty()) return cap;
  if (!engine.honours_memory_cap()) {
    throw Error(StrCat(flag, ": engine ", engine.name(),
                       " does not honour a memory cap (it does not evict); engines that do: ",
                       Join(CapEngines(), ", ")));
  }
  const CapSpec spec = ParseCapSpec(text, flag);
  if (spec.fraction_of_eager == 0) {
    cap.bytes = spec.bytes;
    return cap;
  }
  const double fraction = spec.fraction_of_eager;
  const std::string number = text.substr(0, text.size() - 1);
  RunOptions plan;
  plan.plan_only = true;
  const int64_t eager_peak = MakeEngine("eager")
                                 ->ValueAndGrad(program, ShapeOnlyArguments(program), wrt, plan)
                                 .stats.peak_bytes;
  const double bytes = fraction * static_cast<double>(eager_peak);
  if (bytes < 1 || bytes > 9.0e18) {
    throw Error(StrCat(flag, " '", text, "': ", fraction, " x eager's peak of ", eager_peak,
                       " bytes on ", program.name, " is not a byte count"));
  }
  cap.bytes = static_cast<int64_t>(bytes);
  cap.how = StrCat(number, " x eager's peak of ", eager_peak, " bytes");
  return cap;
}

std::optional<Stats> PlanBudget(const Program& program, const std::vector<int>& wrt, int64_t budget,
                                int64_t* smallest) {
  RunOptions plan;
  plan.plan_only = true;
  try {
    return MakeEngine("recompute")
        ->ValueAndGrad(ApplySchedule(program, StrCat("budget:", budget)),
                       ShapeOnlyArguments(program), wrt, plan)
        .stats;
  } catch (const Error& e) {
    // The schedule's refusal carries the smallest feasible budget; anything
    // else is not ours to absorb.
    if (e.kind() != ErrorKind::kBudgetTooSmall || e.facts().smallest_feasible_bytes < 0) throw;
    *smallest = e.facts().smallest_feasible_bytes;
    return std::nullopt;
  }
}

std::optional<std::pair<int64_t, Stats>> LargestBudgetUnder(const Program& program,
                                                            const std::vector<int>& wrt,
                                                            int64_t cap_bytes, int64_t most) {
  int64_t smallest = 1;
  std::optional<Stats> low = PlanBudget(program, wrt, 1, &smallest);
  if (!low) low = PlanBudget(program, wrt, smallest, &smallest);
  if (!low || low->peak_bytes > cap_bytes) return std::nullopt;
  int64_t fits = smallest, over = most + 1;
  Stats best = *low;
  std::optional<Stats> top = PlanBudget(program, wrt, most, &smallest);
  if (top && top->peak_bytes <= cap_bytes) return std::make_pair(most, *top);
  while (over - fits > std::max<int64_t>(1, fits / 1000)) {
    const int64_t mid = fits + (over - fits) / 2;
    std::optional<Stats> s = PlanBudget(program, wrt, mid, &smallest);
    if (s && s->peak_bytes <= cap_bytes) {
      fits = mid;
      best = *s;
    } else {
      over = mid;
    }
  }
  return std::make_pair(fits, best);
}

}  // namespace remat
