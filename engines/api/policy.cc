#include "engines/api/policy.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "engines/api/error.h"

namespace remat {
namespace {

struct NamedKind {
  const char* name;
  PolicyKind kind;
};

// JAX's names first, then its aliases.
constexpr NamedKind kPolicyNames[] = {
    {"everything_saveable", PolicyKind::kEverythingSaveable},
    {"nothing_saveable", PolicyKind::kNothingSaveable},
    {"dots_saveable", PolicyKind::kDotsSaveable},
    {"dots_with_no_batch_dims_saveable", PolicyKind::kDotsWithNoBatchDimsSaveable},
    {"save_only_these_names", PolicyKind::kSaveOnlyTheseNames},
    {"save_any_names_but_these", PolicyKind::kSaveAnyNamesButThese},
    {"save_anything_except_these_names", PolicyKind::kSaveAnythingExceptTheseNames},
    {"save_from_both_policies", PolicyKind::kSaveFromBothPolicies},
    {"save_and_offload_only_these_names", PolicyKind::kSaveAndOffloadOnlyTheseNames},
    {"offload_dot_with_no_batch_dims", PolicyKind::kOffloadDotWithNoBatchDims},
    {"memory_budget", PolicyKind::kMemoryBudget},
    {"checkpoint_dots", PolicyKind::kDotsSaveable},
    {"checkpoint_dots_with_no_batch_dims", PolicyKind::kDotsWithNoBatchDimsSaveable},
};

bool TakesNames(PolicyKind kind) {
  return kind == PolicyKind::kSaveOnlyTheseNames || kind == PolicyKind::kSaveAnyNamesButThese ||
         kind == PolicyKind::kSaveAnythingExceptTheseNames;
}

std::vector<std::string> SplitNames(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// B of memory_budget:B: a fraction in [0, 1], or bytes in ParseBytes's forms
// (engines/schedule, which this library cannot depend on: the grammar is
// repeated here, with the fraction added).
MemoryBudget ParsePeakBudget(const std::string& policy_text, const std::string& b);

// A decimal number and its unit as the budgets write them ("0.5", "4MiB",
// "1.5GiB", "123B", "1000000"): the number, whether it had a point, and the
// unit's multiplier (1 for none or "B"). Calls fail(why) and does not
// return for what it cannot read.
struct BudgetNumber {
  long double number = 0;
  bool point = false;
  bool has_unit = false;
  long double multiplier = 1;
};
template <typename Fail>
BudgetNumber ReadBudgetNumber(const std::string& text, const Fail& fail) {
  if (text.empty()) fail("needs B");
  BudgetNumber out;
  long double scale = 1;
  bool any = false;
  size_t i = 0;
  for (; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch >= '0' && ch <= '9') {
      if (out.point) scale /= 10;
      out.number = out.point ? out.number + (ch - '0') * scale : out.number * 10 + (ch - '0');
      any = true;
      if (out.number > 1e18L) fail(StrCat("cannot read '", text, "': too large"));
    } else if (ch == '.' && !out.point) {
      out.point = true;
    } else {
      break;
    }
  }
  if (!any) fail(StrCat("cannot read '", text, "'"));
  const std::string unit = text.substr(i);
  static const std::pair<const char*, long double> kUnits[] = {
      {"", 1},          {"B", 1},           {"KB", 1e3L},         {"MB", 1e6L},
      {"GB", 1e9L},     {"TB", 1e12L},      {"KiB", 1024.0L},     {"MiB", 1048576.0L},
      {"GiB", 1073741824.0L}, {"TiB", 1099511627776.0L}};
  for (const auto& u : kUnits) {
    if (unit != u.first) continue;
    out.has_unit = !unit.empty();
    out.multiplier = u.second;
    if (out.number * out.multiplier > 9e18L) fail(StrCat("'", text, "' overflows"));
    return out;
  }
  fail(StrCat("cannot read '", text, "': unknown unit '", unit, "'"));
  return out;
}

MemoryBudget ParseMemoryBudget(const std::string& policy_text, const std::string& b) {
  if (b.rfind("peak:", 0) == 0 || b == "peak") return ParsePeakBudget(policy_text, b);
  auto fail = [&](const std::string& why) {
    throw Error(StrCat("policy '", policy_text, "': memory_budget:B ", why,
                       "; B is a fraction in [0, 1] of what everything_saveable saves "
                       "(memory_budget:0.5) or bytes (memory_budget:4MiB, 123B, 1.5GiB, 1GB)"));
  };
  const BudgetNumber n = ReadBudgetNumber(b, fail);
  MemoryBudget out;
  out.text = b;
  if (!n.has_unit && n.number > 1 && n.point) {
    fail(StrCat("'", b, "' is neither a fraction in [0, 1] nor whole bytes"));
  }
  if (!n.has_unit && n.number <= 1) {
    out.is_fraction = true;
    // strtod rounds correctly: a fraction printed with 17 digits reads back
    // as the same double (engines/budget/peak_budget writes such fractions).
    out.fraction = std::strtod(b.c_str(), nullptr);
    return out;
  }
  out.is_fraction = false;
  out.bytes = static_cast<int64_t>(n.number * n.multiplier);  // rounds down to whole bytes
  return out;
}

// memory_budget:peak:B (bytes, ParseBytes forms, positive) or
// memory_budget:peak:min.
MemoryBudget ParsePeakBudget(const std::string& policy_text, const std::string& b) {
  const std::string limit = b.size() > 5 ? b.substr(5) : "";
  auto fail = [&](const std::string& why) {
    throw Error(StrCat("policy '", policy_text, "': memory_budget:peak:B ", why,
                       "; B is the largest peak the whole run may reach, in bytes "
                       "(memory_budget:peak:64MiB, 123B, 1.5GiB, 1GB, 1000000), or min "
                       "(memory_budget:peak:min: the smallest peak reachable)"));
  };
  MemoryBudget out;
  out.mode = BudgetMode::kPeak;
  out.is_fraction = false;
  out.text = b;
  if (limit == "min") {
    out.peak_min = true;
    return out;
  }
  const BudgetNumber n = ReadBudgetNumber(limit, fail);
  if (!n.has_unit && n.point) {
    fail(StrCat("'", limit, "' is not whole bytes (a peak limit is bytes, not a fraction)"));
  }
  out.peak_bytes = static_cast<int64_t>(n.number * n.multiplier);  // rounds down to whole bytes
  if (out.peak_bytes <= 0) fail(StrCat("'", limit, "' is not a positive number of bytes"));
  return out;
}

}  // namespace

Policy::Policy(PolicyKind kind, std::vector<std::string> names)
    : kind_(kind), names_(std::move(names)) {}

Policy Policy::Both(const Policy& a, const Policy& b) {
  Policy p(PolicyKind::kSaveFromBothPolicies);
  p.both_ = {a, b};
  return p;
}

Policy Policy::SaveAndOffload(std::vector<std::string> save_names,
                              std::vector<std::string> offload_names) {
  Policy p(PolicyKind::kSaveAndOffloadOnlyTheseNames, std::move(save_names));
  p.offload_names_ = std::move(offload_names);
  return p;
}

std::vector<std::string> Policy::Names() {
  std::vector<std::string> out;
  for (const NamedKind& n : kPolicyNames) out.push_back(n.name);
  return out;
}

Policy Policy::Parse(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string head = text.substr(0, colon);
  const std::string args = colon == std::string::npos ? "" : text.substr(colon + 1);
  const NamedKind* found = nullptr;
  for (const NamedKind& n : kPolicyNames) {
    if (head == n.name) found = &n;
  }
  if (found == nullptr) {
    throw Error(StrCat("unknown policy '", head, "'; policies: ", Join(Names(), ", ")));
  }
  const PolicyKind kind = found->kind;
  if (kind == PolicyKind::kSaveFromBothPolicies) {
    const size_t plus = args.find('+');
    if (plus == std::string::npos) {
      throw Error(StrCat("policy '", text,
                         "': save_from_both_policies takes two policies, as "
                         "save_from_both_policies:POLICY1+POLICY2"));
    }
    return Both(Parse(args.substr(0, plus)), Parse(args.substr(plus + 1)));
  }
  if (kind == PolicyKind::kSaveAndOffloadOnlyTheseNames) {
    const size_t slash = args.find('/');
    return SaveAndOffload(SplitNames(args.substr(0, slash)),
                          slash == std::string::npos ? std::vector<std::string>{}
                                                     : SplitNames(args.substr(slash + 1)));
  }
  if (TakesNames(kind)) return Policy(kind, SplitNames(args));
  if (kind == PolicyKind::kMemoryBudget) {
    Policy p(kind);
    p.budget_ = ParseMemoryBudget(text, args);
    return p;
  }
  if (!args.empty()) {
    throw Error(StrCat("policy '", head, "' takes no names, got '", args, "'"));
  }
  return Policy(kind);
}

std::vector<std::string> Policy::ReferencedNames() const {
  std::vector<std::string> out = names_;
  out.insert(out.end(), offload_names_.begin(), offload_names_.end());
  for (const Policy& p : both_) {
    for (const std::string& n : p.ReferencedNames()) out.push_back(n);
  }
  return out;
}

SaveDecision Policy::Decide(const ValueInfo& v) const {
  auto save_if = [](bool b) { return b ? SaveDecision::kSave : SaveDecision::kRecompute; };
  switch (kind_) {
    case PolicyKind::kEverythingSaveable:
      return SaveDecision::kSave;
    case PolicyKind::kNothingSaveable:
      return SaveDecision::kRecompute;
    case PolicyKind::kDotsSaveable:
      return save_if(v.is_matmul);
    case PolicyKind::kDotsWithNoBatchDimsSaveable:
      return save_if(v.is_matmul && !v.has_batch_dims);
    case PolicyKind::kSaveOnlyTheseNames:
      return save_if(!v.name.empty() && Contains(names_, v.name));
    case PolicyKind::kSaveAnyNamesButThese:
      return save_if(!v.name.empty() && !Contains(names_, v.name));
    case PolicyKind::kSaveAnythingExceptTheseNames:
      return save_if(v.name.empty() || !Contains(names_, v.name));
    case PolicyKind::kSaveFromBothPolicies: {
      // Saved if either saves; offloaded if either offloads and none saves.
      SaveDecision best = SaveDecision::kRecompute;
      for (const Policy& p : both_) {
        SaveDecision d = p.Decide(v);
        if (d == SaveDecision::kSave) return d;
        if (d == SaveDecision::kOffload) best = d;
      }
      return best;
    }
    case PolicyKind::kSaveAndOffloadOnlyTheseNames:
      if (v.name.empty()) return SaveDecision::kRecompute;
      if (Contains(names_, v.name)) return SaveDecision::kSave;
      if (Contains(offload_names_, v.name)) return SaveDecision::kOffload;
      return SaveDecision::kRecompute;
    case PolicyKind::kOffloadDotWithNoBatchDims:
      return v.is_matmul && !v.has_batch_dims ? SaveDecision::kOffload : SaveDecision::kRecompute;
    case PolicyKind::kMemoryBudget:
      return SaveDecision::kSave;
  }
  return SaveDecision::kRecompute;
}

std::string Policy::ToString() const {
  std::string head;
  for (const NamedKind& n : kPolicyNames) {
    if (n.kind == kind_) {
      head = n.name;
      break;
    }
  }
  if (kind_ == PolicyKind::kSaveFromBothPolicies) {
    return StrCat(head, ":", both_[0].ToString(), "+", both_[1].ToString());
  }
  if (kind_ == PolicyKind::kSaveAndOffloadOnlyTheseNames) {
    return StrCat(head, ":", Join(names_, ","), "/", Join(offload_names_, ","));
  }
  if (TakesNames(kind_)) return StrCat(head, ":", Join(names_, ","));
  if (kind_ == PolicyKind::kMemoryBudget) return StrCat(head, ":", budget_.text);
  return head;
}

}  // namespace remat
