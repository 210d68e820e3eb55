#include "harness/case_spec.h"

#include <string>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/schedule_spec.h"
#include "harness/memory_caps.h"

namespace remat {
namespace {

bool StartsWith(const std::string& text, const char* prefix) {
  return text.rfind(prefix, 0) == 0;
}

std::string After(const std::string& text, const char* prefix) {
  return text.substr(std::string(prefix).size());
}

}  // namespace

CaseVariant CaseVariant::Parse(const std::string& label) {
  if (label.empty() || label == kAsWrittenLabel) return CaseVariant();
  if (StartsWith(label, kSchedulePrefix)) {
    const std::string spec = After(label, kSchedulePrefix);
    // ApplySchedule's own check, made before there is a program: the
    // checkpoint_every:K form is read by CheckpointEvery, the rest by
    // ParseScheduleSpec.
    try {
      if (CheckpointEvery(spec) == 0) ParseScheduleSpec(spec);
    } catch (const Error& e) {
      throw Error(StrCat("'", label, "': ", e.what(), "; schedules: ",
                         Join(ScheduleForms(), ", "), ", checkpoint_every:K"),
                  e);
    }
    return CaseVariant(Kind::kSchedule, spec);
  }
  // "budget-under-cap:" does not start with "cap:"; either order would do.
  for (const auto& [prefix, kind] : {std::pair{kBudgetUnderCapPrefix, Kind::kBudgetUnderCap},
                                     std::pair{kCapPrefix, Kind::kMemoryCap}}) {
    if (!StartsWith(label, prefix)) continue;
    const std::string cap = After(label, prefix);
    // --memory-cap reads 0 as no cap; a cap row without one would measure
    // the engine uncapped under a cap's name.
    const CapSpec spec = ParseCapSpec(cap, StrCat("'", label, "'"));
    if (spec.bytes == 0 && spec.fraction_of_eager == 0) {
      throw Error(StrCat("'", label, "': a cap of 0 bytes is no cap"));
    }
    return CaseVariant(kind, cap);
  }
  const std::string spec = StartsWith(label, kPolicyPrefix) ? After(label, kPolicyPrefix) : label;
  if (spec.empty()) throw Error(StrCat("'", label, "': a policy label without its policy"));
  // Policy::Parse's error names the text and lists the policies; the
  // label's other forms are named after it, since a typo of one ("shedule:")
  // lands here.
  try {
    Policy::Parse(spec);
  } catch (const Error& e) {
    throw Error(StrCat(e.what(), " (or as-written, schedule:SPEC, cap:CAP, budget-under-cap:CAP)"),
                e);
  }
  return CaseVariant(Kind::kPolicy, spec);
}

std::string CaseVariant::Label() const {
  switch (kind_) {
    case Kind::kAsWritten:
      return kAsWrittenLabel;
    case Kind::kPolicy:
      return spec_;
    case Kind::kSchedule:
      return kSchedulePrefix + spec_;
    case Kind::kMemoryCap:
      return kCapPrefix + spec_;
    case Kind::kBudgetUnderCap:
      return kBudgetUnderCapPrefix + spec_;
  }
  return kAsWrittenLabel;
}

std::string CaseVariant::QualifiedLabel() const {
  return kind_ == Kind::kPolicy ? kPolicyPrefix + spec_ : Label();
}

Program CaseVariant::Apply(const Program& program) const {
  switch (kind_) {
    case Kind::kAsWritten:
    case Kind::kMemoryCap:
      return program;
    case Kind::kPolicy:
      return ApplyPolicy(program, Policy::Parse(spec_));
    case Kind::kSchedule:
      return ApplySchedule(program, spec_);
    case Kind::kBudgetUnderCap:
      break;
  }
  throw Error(StrCat(Label(), ": the budget is found by a search under the cap "
                              "(LargestBudgetUnder), not by applying the label"));
}

bool Schedulable(const Program& program) {
  if (program.CountOps(OpKind::kScan) > 0) return true;
  try {
    return ApplySchedule(program, "every:1").CountOps(OpKind::kChain) > 0;
  } catch (const Error&) {
    return false;  // "program P has no scan and no chain of checkpointed blocks"
  }
}

OrderedParams OrderParams(const Problem& problem, const ParamValues& params) {
  OrderedParams out;
  for (const ParamSpec& spec : problem.params()) {
    auto it = params.find(spec.name);
    if (it != params.end()) out.emplace_back(spec.name, it->second);
  }
  return out;
}

std::string FormatOrderedParams(const OrderedParams& params) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : params) parts.push_back(StrCat(name, "=", value));
  return Join(parts, ",");
}

}  // namespace remat
