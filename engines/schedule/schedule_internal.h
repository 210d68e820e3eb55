// What schedule.cc and the generators beside it (schedule_every.cc,
// schedule_bisect.cc, schedule_revolve.cc and Budget's files,
// schedule_budget*.cc) share: the Builder that collects a schedule's actions,
// and what Budget's solvers have in common. Internal to engines/schedule:
// schedule.h is the API.
#ifndef REMAT_ENGINES_SCHEDULE_SCHEDULE_INTERNAL_H_
#define REMAT_ENGINES_SCHEDULE_SCHEDULE_INTERNAL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"

namespace remat {
namespace schedule_internal {

using Kind = ActionKind;

// ---------------------------------------------------------------------------
// Building schedules

// Collects a schedule's actions. The backward helpers track the position so
// that a kRestore of the carry already current is left out. Finish() puts each
// snapshot's kDrop right after its last kRestore: the restored carry then owns
// the bytes, and they are freed as soon as it moves on (or is consumed).
class Builder {
 public:
  Builder(std::string name, int64_t length) : length_(length) { schedule_.name = std::move(name); }

  void ForwardAdvance(int64_t n) { Append(schedule_.forward, Kind::kAdvance, n); }
  void ForwardSnapshot() { schedule_.forward.push_back({Kind::kSnapshot, 0}); }
  // Consecutive runs of one kind merge into one action.
  void ForwardAdvanceTaped(int64_t n) { Append(schedule_.forward, Kind::kAdvanceTaped, n); }

  void RestoreTo(int64_t position) {
    if (live_ && p_ == position) return;
    schedule_.backward.push_back({Kind::kRestore, position});
    p_ = position;
    live_ = true;
  }
  void Advance(int64_t n) {
    Append(schedule_.backward, Kind::kAdvance, n);
    p_ += n;
  }
  void Snapshot() { schedule_.backward.push_back({Kind::kSnapshot, 0}); }
  void AdvanceTaped(int64_t n) {
    Append(schedule_.backward, Kind::kAdvanceTaped, n);
    p_ += n;
  }
  void ReverseTaped(int64_t n) { Append(schedule_.backward, Kind::kReverseTaped, n); }
  void Reverse(int64_t n) {
    schedule_.backward.push_back({Kind::kReverse, n});
    live_ = false;
  }

  Schedule Finish() {
    PlaceDrops();
    return std::move(schedule_);
  }

 private:
  static void Append(std::vector<Action>& actions, Kind kind, int64_t n) {
    if (n <= 0) return;
    if (!actions.empty() && actions.back().kind == kind) {
      actions.back().n += n;
    } else {
      actions.push_back({kind, n});
    }
  }

  void PlaceDrops();

  Schedule schedule_;
  int64_t length_;
  int64_t p_ = 0;
  bool live_ = false;
};

// Throws remat::Error unless length >= 1: "<generator>: the chain length must
// be >= 1, not 0".
void CheckLength(int64_t length, const char* generator);

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------------------
// Budget: what its solvers share (schedule_budget.cc, schedule_budget_stack.cc,
// schedule_budget_rotor.cc, schedule_budget_uniform.cc)

// What a Budget DP may run (inner-loop iterations) and hold (table entries),
// about a quarter of a second each way: the general DPs' scalar loops, and
// the uniform DP's vectorised one.
inline constexpr double kMaxWork = 4e8;
inline constexpr double kMaxEntries = 3e6;
inline constexpr double kMaxUniformWork = 3e9;
inline constexpr double kMaxUniformEntries = 8e6;
inline constexpr int64_t kMaxUniformLength = 20000;

// Whether every step has the same flops and residual_bytes and every carry at
// 1..L the same size (carry_bytes[0], the input's, is never counted).
bool IsUniform(const ChainCosts& c);

// "budget:B", the name of Budget's schedules.
std::string BudgetName(int64_t budget);

// The facts of a budget:B refusal: the smallest feasible B.
ErrorFacts BudgetTooSmall(int64_t smallest);

// Validates c; throws remat::Error (with BudgetTooSmall's facts) if budget is
// below MinimumFeasibleBytes(c).
void CheckBudget(const ChainCosts& c, int64_t budget);

// Whether eager's schedule fits: the forward pass tapes every step, the
// backward pass differentiates them all from their tapes. It recomputes
// nothing, so when it fits it is optimal.
bool TapeAllFits(const ChainCosts& c, int64_t budget);
// That schedule, named BudgetName(budget).
Schedule TapeAll(const ChainCosts& c, int64_t budget);

struct MemoryUnits {
  int64_t unit;
  int levels;
  bool exact;       // unit divides every carry size
  double capacity;  // the most levels the limits allow
};

// Memory levels M_j = budget - j * unit for a DP that costs `work` inner
// iterations and `entries` table entries per level: unit = the gcd of the
// carries (exact) unless that makes more levels than max_work and kMaxEntries
// allow; then the smallest unit that fits. Levels past what every snapshot at
// once would cost are never reached and are left out.
MemoryUnits ChooseUnits(const ChainCosts& c, int64_t budget, double work, double entries,
                        double max_work);

// The inner-loop iterations and table entries per memory level of StackDp
// (BudgetExact) and RotorDp (BudgetRotor) on a chain of l steps.
inline double StackWork(double l) { return l * l * l * l / 8 + l * l * l; }
inline double StackEntries(double l) { return l * l * l / 3; }
inline double RotorWork(double l) { return l * l * l / 6 + l * l; }
inline double RotorEntries(double l) { return (l + 1) * (l + 1); }

// Runs one of the DPs (StackDp, RotorDp) at the memory units its work and
// table size allow.
template <typename Dp>
Schedule SolveBudget(const ChainCosts& c, int64_t budget, double max_work, double work,
                     double entries) {
  CheckBudget(c, budget);
  if (TapeAllFits(c, budget)) return TapeAll(c, budget);
  const MemoryUnits units = ChooseUnits(c, budget, work, entries, max_work);
  Dp dp(c, budget, units.unit, units.levels);
  if (!(dp.cost() < Dp::kInf)) {
    throw Error(StrCat("budget: internal error: no schedule found within ", budget, " bytes"));
  }
  return dp.Emit();
}

}  // namespace schedule_internal
}  // namespace remat

#endif  // REMAT_ENGINES_SCHEDULE_SCHEDULE_INTERNAL_H_
