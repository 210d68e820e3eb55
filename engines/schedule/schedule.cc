// The action language's names, ChainCosts, and ParseSchedule, which maps a
// spec to its generator: every:K, segments:K and sqrt (schedule_every.cc),
// bisect (schedule_bisect.cc), revolve:C (schedule_revolve.cc), budget:BYTES
// (schedule_budget.cc). Simulate, the cost model, is in schedule_simulate.cc.
#include "engines/schedule/schedule.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {
namespace {

using Kind = ActionKind;
using schedule_internal::BudgetName;
using schedule_internal::BudgetTooSmall;

const char* KindName(ActionKind kind) {
  switch (kind) {
    case Kind::kAdvance:
      return "kAdvance";
    case Kind::kSnapshot:
      return "kSnapshot";
    case Kind::kRestore:
      return "kRestore";
    case Kind::kDrop:
      return "kDrop";
    case Kind::kReverse:
      return "kReverse";
    case Kind::kAdvanceTaped:
      return "kAdvanceTaped";
    case Kind::kReverseTaped:
      return "kReverseTaped";
  }
  return "kUnknown";
}

}  // namespace

std::string ToString(const Action& action) {
  if (action.kind == Kind::kSnapshot && action.n == 0) return "kSnapshot";
  return StrCat(KindName(action.kind), " ", action.n);
}

std::string ToString(const std::vector<Action>& actions) {
  std::vector<std::string> parts;
  parts.reserve(actions.size());
  for (const Action& a : actions) parts.push_back(ToString(a));
  return Join(parts, ", ");
}

ChainCosts ChainCosts::Uniform(int64_t length, double step_flops, int64_t carry_bytes,
                               int64_t residual_bytes) {
  if (length < 1) throw Error(StrCat("ChainCosts::Uniform: length must be >= 1, not ", length));
  ChainCosts c;
  c.step_flops.assign(length, step_flops);
  c.carry_bytes.assign(length + 1, carry_bytes);
  c.residual_bytes.assign(length, residual_bytes);
  c.Validate();
  return c;
}

void ChainCosts::Validate() const {
  const int64_t l = length();
  if (l < 1) throw Error("ChainCosts: the chain needs at least one step (step_flops is empty)");
  if (static_cast<int64_t>(carry_bytes.size()) != l + 1) {
    throw Error(StrCat("ChainCosts: carry_bytes has ", carry_bytes.size(), " entries, expected L+1 = ",
                       l + 1));
  }
  if (static_cast<int64_t>(residual_bytes.size()) != l) {
    throw Error(StrCat("ChainCosts: residual_bytes has ", residual_bytes.size(),
                       " entries, expected L = ", l));
  }
  for (int64_t i = 0; i < l; ++i) {
    if (!std::isfinite(step_flops[i]) || step_flops[i] < 0) {
      throw Error(StrCat("ChainCosts: step_flops[", i, "] = ", step_flops[i], " is not finite and >= 0"));
    }
    if (residual_bytes[i] < 0) {
      throw Error(StrCat("ChainCosts: residual_bytes[", i, "] = ", residual_bytes[i], " is negative"));
    }
  }
  if (after_bytes < 0) throw Error(StrCat("ChainCosts: after_bytes = ", after_bytes, " is negative"));
  for (int64_t i = 0; i <= l; ++i) {
    if (carry_bytes[i] < 0) {
      throw Error(StrCat("ChainCosts: carry_bytes[", i, "] = ", carry_bytes[i], " is negative"));
    }
  }
}

Schedule ParseSchedule(const std::string& spec, const ChainCosts& costs, int64_t held_bytes) {
  costs.Validate();
  const int64_t l = costs.length();
  ScheduleSpec s;
  try {
    s = ParseScheduleSpec(spec);
  } catch (const Error& e) {
    throw Error(StrCat("schedule \"", spec, "\": ", e.what()), e);
  }
  if (s.form == "every") return EveryK(l, s.n);
  if (s.form == "segments") return Segments(l, s.n);
  if (s.form == "sqrt") return Sqrt(l);
  if (s.form == "bisect") return Bisect(l);
  if (s.form == "revolve") return Revolve(l, static_cast<int>(s.n));
  // budget:B
  const int64_t budget = s.n;
  if (held_bytes <= 0) return Budget(costs, budget);
  // The chain gets what the run does not hold elsewhere.
  const int64_t need = MinimumFeasibleBytes(costs);
  if (budget - held_bytes < need) {
    throw Error(StrCat("budget ", budget, " bytes is too small for this chain: the smallest feasible is ",
                       need + held_bytes, " bytes (", need, " for the chain, ", held_bytes,
                       " held outside it while it runs)"),
                BudgetTooSmall(need + held_bytes));
  }
  Schedule schedule = Budget(costs, budget - held_bytes);
  schedule.name = BudgetName(budget);
  return schedule;
}

}  // namespace remat
