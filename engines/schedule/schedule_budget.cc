// Budget: the schedule with the fewest recomputed FLOPs within a memory
// budget (budget:BYTES). This file holds what its solvers share and the
// choice among them; the solvers are StackDp (schedule_budget_stack.cc),
// RotorDp (schedule_budget_rotor.cc) and UniformDp
// (schedule_budget_uniform.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {
namespace schedule_internal {

bool IsUniform(const ChainCosts& c) {
  const int64_t l = c.length();
  for (int64_t i = 1; i < l; ++i) {
    if (c.step_flops[i] != c.step_flops[0] || c.residual_bytes[i] != c.residual_bytes[0]) {
      return false;
    }
  }
  for (int64_t i = 2; i <= l; ++i) {
    if (c.carry_bytes[i] != c.carry_bytes[1]) return false;
  }
  return true;  // carry_bytes[0], the input's, is never counted
}

std::string BudgetName(int64_t budget) { return StrCat("budget:", budget); }

ErrorFacts BudgetTooSmall(int64_t smallest) {
  ErrorFacts facts;
  facts.kind = ErrorKind::kBudgetTooSmall;
  facts.smallest_feasible_bytes = smallest;
  return facts;
}

void CheckBudget(const ChainCosts& c, int64_t budget) {
  c.Validate();
  const int64_t need = MinimumFeasibleBytes(c);
  if (budget < need) {
    throw Error(StrCat("budget ", budget, " bytes is too small for this chain: the smallest feasible is ",
                       need, " bytes"),
                BudgetTooSmall(need));
  }
}

bool TapeAllFits(const ChainCosts& c, int64_t budget) {
  int64_t tapes = 0;
  for (int64_t i = 0; i < c.length(); ++i) {
    tapes += c.residual_bytes[i];
    if (tapes + (i + 1 < c.length() ? c.carry_bytes[i + 1] : c.EndBytes()) > budget) return false;
  }
  return true;
}

Schedule TapeAll(const ChainCosts& c, int64_t budget) {
  Builder b(BudgetName(budget), c.length());
  b.ForwardAdvanceTaped(c.length());
  b.ReverseTaped(c.length());
  return b.Finish();
}

MemoryUnits ChooseUnits(const ChainCosts& c, int64_t budget, double work, double entries, double max_work) {
  const int64_t l = c.length();
  int64_t gcd = 0;
  for (int64_t i = 1; i < l; ++i) gcd = std::gcd(gcd, c.carry_bytes[i]);
  for (int64_t i = 0; i < l; ++i) gcd = std::gcd(gcd, c.residual_bytes[i]);  // tapes
  if (gcd == 0) gcd = budget + 1;  // snapshots and tapes are free: one level
  auto levels_for = [&](int64_t unit) {
    int64_t all = 0;
    for (int64_t i = 1; i < l; ++i) all += CeilDiv(c.carry_bytes[i], unit);
    for (int64_t i = 0; i < l; ++i) all += CeilDiv(c.residual_bytes[i], unit);
    return std::min(budget / unit, all);
  };
  const double capacity = std::max(1.0, std::min(max_work / work, kMaxEntries / entries));
  int64_t unit = gcd;
  bool exact = true;
  if (static_cast<double>(levels_for(unit)) + 1 > capacity) {
    unit = std::max<int64_t>(gcd, static_cast<int64_t>(std::ceil(budget / std::max(1.0, capacity - 1))));
    exact = false;
  }
  return {unit, static_cast<int>(levels_for(unit)), exact, capacity};
}

namespace {

// The schedule that keeps nothing but the input: the chain cut into the
// kReverse segments of MinimumFeasibleBytes, each reached from position 0.
Schedule MinimumMemory(const ChainCosts& c, int64_t budget) {
  const int64_t l = c.length();
  std::vector<int64_t> best(l + 1, std::numeric_limits<int64_t>::max());
  std::vector<int64_t> from(l + 1, 0);
  best[0] = 0;
  for (int64_t b = 1; b <= l; ++b) {
    int64_t residuals = 0;
    for (int64_t a = b - 1; a >= 0; --a) {
      residuals += c.residual_bytes[a];
      const int64_t need = residuals + c.carry_bytes[b];
      if (need >= best[b]) break;
      const int64_t v = std::max(best[a], need);
      if (v < best[b]) {
        best[b] = v;
        from[b] = a;
      }
    }
  }
  Builder b(BudgetName(budget), l);
  b.ForwardAdvance(l);
  for (int64_t end = l; end > 0; end = from[end]) {
    b.RestoreTo(0);
    b.Advance(from[end]);
    b.Reverse(end - from[end]);
  }
  return b.Finish();
}

// Budget's schedule for the uniform chain of c's largest carry and residual
// (and mean flops), which fits c too; keeping nothing but the input when even
// that does not fit or the chain is too long for the uniform DP.
Schedule Envelope(const ChainCosts& c, int64_t budget) {
  const int64_t l = c.length();
  int64_t carry = 0;
  int64_t residual = 0;
  double flops = 0;
  for (int64_t i = 0; i < l; ++i) {
    carry = std::max(carry, c.carry_bytes[i + 1]);
    residual = std::max(residual, c.residual_bytes[i]);
    flops += c.step_flops[i];
  }
  ChainCosts envelope = ChainCosts::Uniform(l, flops / l, carry, residual);
  envelope.after_bytes = c.after_bytes;
  if (budget < MinimumFeasibleBytes(envelope) || l > kMaxUniformLength) return MinimumMemory(c, budget);
  return schedule_internal::BudgetUniform(envelope, budget, kMaxUniformWork);
}

}  // namespace
}  // namespace schedule_internal

using schedule_internal::BudgetName;
using schedule_internal::BudgetTooSmall;
using schedule_internal::CheckBudget;
using schedule_internal::ChooseUnits;
using schedule_internal::Envelope;
using schedule_internal::IsUniform;
using schedule_internal::kMaxUniformWork;
using schedule_internal::kMaxWork;
using schedule_internal::MemoryUnits;
using schedule_internal::RotorEntries;
using schedule_internal::RotorWork;
using schedule_internal::StackEntries;
using schedule_internal::StackWork;
using schedule_internal::TapeAll;
using schedule_internal::TapeAllFits;

int64_t MinimumFeasibleBytes(const ChainCosts& c) {
  c.Validate();
  const int64_t l = c.length();
  int64_t walk = c.EndBytes();
  for (int64_t i = 1; i < l; ++i) walk = std::max(walk, c.carry_bytes[i]);
  // best[b]: the smallest peak of reversing steps 0..b-1 in kReverse segments.
  std::vector<int64_t> best(l + 1, std::numeric_limits<int64_t>::max());
  best[0] = 0;
  for (int64_t b = 1; b <= l; ++b) {
    int64_t residuals = 0;
    for (int64_t a = b - 1; a >= 0; --a) {
      residuals += c.residual_bytes[a];
      const int64_t need = residuals + c.carry_bytes[b];
      if (need >= best[b]) break;  // longer segments only need more
      best[b] = std::min(best[b], std::max(best[a], need));
    }
  }
  return std::max(walk, best[l]);
}

Schedule Budget(const ChainCosts& c, int64_t budget) {
  CheckBudget(c, budget);
  if (TapeAllFits(c, budget)) return TapeAll(c, budget);
  if (IsUniform(c)) return schedule_internal::BudgetUniform(c, budget, kMaxUniformWork);
  // The exact DP when memory needs no rounding. Otherwise the better of what
  // each solver finds within its limits: the exact DP and Rotor's form with
  // rounded units (Rotor's limits leave finer ones), and the uniform chain of
  // the largest carry and residual (every size only grows, so its schedule
  // fits this chain).
  const double l = static_cast<double>(c.length());
  const MemoryUnits stack = ChooseUnits(c, budget, StackWork(l), StackEntries(l), kMaxWork);
  if (stack.exact) return schedule_internal::BudgetExact(c, budget, kMaxWork);
  const MemoryUnits rotor = ChooseUnits(c, budget, RotorWork(l), RotorEntries(l), kMaxWork);
  constexpr double kFewestLevels = 8;  // below this, rounding costs more than the search gains
  std::vector<Schedule> candidates;
  if (stack.capacity >= kFewestLevels) candidates.push_back(schedule_internal::BudgetExact(c, budget, kMaxWork));
  if (rotor.exact || rotor.capacity >= kFewestLevels) {
    candidates.push_back(schedule_internal::BudgetRotor(c, budget, kMaxWork));
  }
  candidates.push_back(Envelope(c, budget));
  size_t best = 0;
  double best_flops = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double flops = Simulate(candidates[i], c).recomputed_flops;
    if (flops < best_flops) {
      best = i;
      best_flops = flops;
    }
  }
  return std::move(candidates[best]);
}

}  // namespace remat
