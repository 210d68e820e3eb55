#include "engines/budget/peak_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "engines/api/error.h"
#include "engines/api/program_text.h"
#include "engines/plan/save_plan.h"
#include "engines/budget/budget_solver.h"

namespace remat {
namespace {

bool HasPeak(const Program& p) {
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCheckpoint && op.policy.is_peak_budget()) return true;
    if (op.body && HasPeak(*op.body)) return true;
  }
  return false;
}

std::shared_ptr<const Program> Rewrite(const std::shared_ptr<const Program>& body,
                                       const Policy& policy) {
  if (!HasPeak(*body)) return body;
  auto out = std::make_shared<Program>(*body);
  for (Op& op : out->ops) {
    if (op.kind == OpKind::kCheckpoint && op.policy.is_peak_budget()) op.policy = policy;
    if (op.body) op.body = Rewrite(op.body, policy);
  }
  return out;
}

// The shortest fixed-point text of f in [0, 1] that strtod reads back as f.
std::string FractionText(double f) {
  char text[80];
  for (int digits = 1; digits <= 60; ++digits) {
    std::snprintf(text, sizeof text, "%.*f", digits, f);
    if (std::strtod(text, nullptr) == f) break;
  }
  // Trailing zeros of "0.50" add nothing.
  std::string s = text;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

struct PeakRegion {
  const Op* op;
  std::vector<bool> needs;  // of its inputs
};

void Collect(const Program& p, const std::vector<bool>& param_needs, std::vector<PeakRegion>* out) {
  const std::vector<bool> needs = ValueNeeds(p, param_needs);
  for (const Op& op : p.ops) {
    std::vector<bool> in_needs;
    for (int v : op.inputs) in_needs.push_back(needs[v]);
    if (op.kind == OpKind::kCheckpoint && needs[op.output] && op.policy.is_peak_budget()) {
      out->push_back({&op, in_needs});
    }
    if (op.kind == OpKind::kScan) {
      // The first step's needs, and a later step's (the carry depends on
      // earlier xs: CONTRACT.md 3.5).
      Collect(*op.body, in_needs, out);
      bool xs = false;
      for (size_t j = 1; j < in_needs.size(); ++j) xs = xs || in_needs[j];
      std::vector<bool> step = in_needs;
      step[0] = step[0] || xs;
      if (step != in_needs) Collect(*op.body, step, out);
    } else if (op.body) {
      Collect(*op.body, in_needs, out);
    }
  }
}

// Every distinct peak-mode policy text of `p`, with one region naming it.
void Texts(const Program& p, std::map<std::string, const Op*>* out) {
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCheckpoint && op.policy.is_peak_budget()) {
      out->emplace(op.policy.ToString(), &op);
    }
    if (op.body) Texts(*op.body, out);
  }
}

int CountPeakRegions(const Program& p) {
  int n = 0;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCheckpoint && op.policy.is_peak_budget()) ++n;
    if (op.body) n += CountPeakRegions(*op.body);
  }
  return n;
}

// Whether a peak-mode region holds another (in its body, at any depth).
bool HasNestedPeak(const Program& p) {
  for (const Op& op : p.ops) {
    if (!op.body) continue;
    if (op.kind == OpKind::kCheckpoint && op.policy.is_peak_budget() && HasPeak(*op.body)) {
      return true;
    }
    if (HasNestedPeak(*op.body)) return true;
  }
  return false;
}

}  // namespace

bool PeakBudgetNested(const Program& program) { return HasNestedPeak(program); }

bool HasPeakBudget(const Program& program) { return HasPeak(program); }

Program WithPeakFraction(const Program& program, double fraction) {
  const Policy policy = Policy::Parse(StrCat("memory_budget:", FractionText(fraction)));
  if (policy.memory_budget().fraction != fraction) {
    throw Error(StrCat("WithPeakFraction: ", FractionText(fraction), " does not read back as ",
                       fraction));
  }
  Program out = program;
  for (Op& op : out.ops) {
    if (op.kind == OpKind::kCheckpoint && op.policy.is_peak_budget()) op.policy = policy;
    if (op.body) op.body = Rewrite(op.body, policy);
  }
  return out;
}

std::vector<double> PeakBudgetCandidates(const Program& program, const std::vector<int>& wrt,
                                         int64_t dtype_bytes, int* large_regions) {
  int large = 0;
  std::vector<bool> needs(program.num_params(), false);
  for (int w : wrt) needs[w] = true;
  std::vector<PeakRegion> regions;
  Collect(program, needs, &regions);
  std::set<double> out = {0.0, 1.0};
  // Distinct (body, needs): a scan's body, or a block repeated, once.
  std::set<std::pair<const Program*, std::vector<bool>>> seen;
  for (const PeakRegion& r : regions) {
    if (!seen.insert({r.op->body.get(), r.needs}).second) continue;
    const BudgetProblem problem =
        MakeBudgetProblem(*r.op->body, r.needs, dtype_bytes,
                          [](const Op& o) { return PolicyMaySave(o.policy); });
    const int64_t all = EverythingSaveableBytes(*r.op->body, r.needs, problem);
    if (all <= 0) continue;
    // A model-sized region's front has a point for nearly every byte size
    // its values add up to (a torchvision ViT's whole-program region: 123
    // points, 39 s of MILPs; a ResNet-18's: thousands, the first 32 taking
    // 160 s); the grid stands in for it.
    int choices = 0;
    for (const BudgetProblem::Class& k : problem.classes) choices += k.saveable && k.bytes > 0;
    if (choices > kPeakFrontClasses) {
      ++large;
      continue;
    }
    for (int64_t s : BudgetFront(problem, all)) {
      if (s <= 0) continue;
      // The smallest f with floor(f * all) >= s, the formula BudgetBytes
      // applies to a fraction.
      double f = static_cast<double>(s) / static_cast<double>(all);
      while (std::floor(f * static_cast<double>(all)) < static_cast<double>(s)) {
        f = std::nextafter(f, 2.0);
      }
      while (f > 0) {
        const double lower = std::nextafter(f, -1.0);
        if (std::floor(lower * static_cast<double>(all)) < static_cast<double>(s)) break;
        f = lower;
      }
      out.insert(std::min(f, 1.0));
    }
  }
  // Each interval's upper end too (the largest double below the next
  // candidate): the least recomputation is the same across an interval, but
  // a solver may return another save set of those FLOPs at a larger budget
  // (the MILP among ties; a plan with more bytes than it needs), with
  // another peak.
  // Nested peak-mode regions: an outer region's recomputation re-runs an
  // inner one that may save (f > 0), whose own plan is not in the outer's
  // objective, so the total FLOPs are neither constant between the
  // breakpoints nor monotone in f. A grid of 1/64 steps is added there.
  //
  // Not nested, the same grid: the FLOPs front above is the budget model's
  // (saved classes' FLOPs), and two plans of one interval can recompute the
  // same measured FLOPs with different peaks (peak_budget_test's seed 53: 44
  // FLOPs at peaks 2232 and 2104 bytes inside one interval, the model's
  // value of the two save sets differing where the executor's count does
  // not), so the interval ends alone miss plans that fit. The grid finds
  // those at 1/64 resolution; finer changes inside a step stay unseen.
  for (int k = 0; k <= 64; ++k) out.insert(k / 64.0);
  // With a large region the upper ends are left out too (they would double
  // the dry runs of a search already at the grid's resolution).
  if (large == 0) {
    std::vector<double> lower(out.begin(), out.end());
    for (size_t i = 1; i < lower.size(); ++i) {
      const double below = std::nextafter(lower[i], -1.0);
      if (below > lower[i - 1]) out.insert(below);
    }
  }
  if (large_regions != nullptr) *large_regions = large;
  return {out.begin(), out.end()};
}

PeakBudgetResolution ResolvePeakBudget(const Program& program, const std::vector<int>& wrt,
                                       int64_t dtype_bytes, const PeakDryRun& dry_run) {
  std::map<std::string, const Op*> texts;
  Texts(program, &texts);
  if (texts.empty()) {
    throw Error(StrCat("ResolvePeakBudget: program ", program.name,
                       " has no memory_budget:peak region"));
  }
  if (texts.size() > 1) {
    std::vector<std::string> listed;
    for (const auto& [text, op] : texts) listed.push_back(StrCat(text, " (", Program::Describe(*op), ")"));
    throw Error(StrCat("program ", program.name,
                       ": its memory_budget:peak regions name different limits (",
                       Join(listed, "; "),
                       "); a run has one peak: give every peak-mode region the same limit"));
  }
  const Op& first = *texts.begin()->second;
  const MemoryBudget& budget = first.policy.memory_budget();
  PeakBudgetResolution r;
  r.policy_text = first.policy.ToString();
  r.min = budget.peak_min;
  r.limit_bytes = budget.peak_bytes;
  const std::vector<double> candidates =
      PeakBudgetCandidates(program, wrt, dtype_bytes, &r.large_regions);
  r.candidates = static_cast<int>(candidates.size());
  bool found = false;
  int64_t least_peak = -1;
  double least_at = 0;
  // Every candidate, from the largest fraction down. peak:B takes the least
  // recomputation among those that fit (on ties the larger f, met first);
  // peak:min the smallest peak (on ties the larger f). Every candidate is
  // dry-run rather than stopping at the first that fits: recomputation
  // falls with f for regions that do not nest (so the first fit would do),
  // but not where peak-mode regions nest (see PeakBudgetCandidates).
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    Program p = WithPeakFraction(program, *it);
    const Stats s = dry_run(p);
    ++r.dry_runs;
    if (least_peak < 0 || s.peak_bytes < least_peak) {
      least_peak = s.peak_bytes;
      least_at = *it;
    }
    const bool take =
        r.min ? (!found || s.peak_bytes < r.peak_bytes)
              : (s.peak_bytes <= r.limit_bytes && (!found || s.flops_recomputed < r.recomputed_flops));
    if (take) {
      found = true;
      r.fraction = *it;
      r.program = std::move(p);
      r.peak_bytes = s.peak_bytes;
      r.recomputed_flops = s.flops_recomputed;
    }
  }
  if (!found) {
    const int regions = CountPeakRegions(program);
    throw Error(StrCat(
        "policy '", r.policy_text, "' on ", Program::Describe(first),
        regions > 1 ? StrCat(" and ", regions - 1, " more region(s)") : std::string(),
        " in program ", program.name, ": no plan of the family (one fraction of "
        "everything_saveable's bytes for every peak-mode region, ", r.candidates,
        " candidates dry-run) has a peak of at most ", r.limit_bytes,
        " bytes; the smallest peak reachable is ", least_peak, " bytes (fraction ",
        FractionText(least_at), "; memory_budget:peak:min)"));
  }
  return r;
}

std::string DescribePeakResolution(const PeakBudgetResolution& r) {
  return StrCat(r.policy_text, (r.min ? std::string(" (the smallest peak)")
                                      : StrCat(" (limit ", r.limit_bytes, " bytes)")),
                ": fraction ", FractionText(r.fraction),
                " of everything_saveable's bytes in every peak-mode region; predicted peak ",
                r.peak_bytes, " bytes, recomputes ", r.recomputed_flops, " FLOPs (", r.dry_runs,
                " of ", r.candidates, " candidate fractions dry-run",
                r.large_regions > 0
                    ? StrCat("; ", r.large_regions, " region(s) of over ", kPeakFrontClasses,
                             " saveable values searched on the 1/64 grid only")
                    : std::string(),
                ")");
}

ProgramCache<PeakBudgetResolution>& PeakBudgetCache::For(int64_t dtype_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_dtype_bytes_[dtype_bytes];
}

std::shared_ptr<const PeakBudgetResolution> PeakBudgetCache::Resolve(const Program& program,
                                                                     const std::vector<int>& wrt,
                                                                     int64_t dtype_bytes,
                                                                     const PeakDryRun& dry_run) {
  // The program's structure fixes its arguments' shapes: the case is the
  // program and wrt (no argument signature).
  ProgramCache<PeakBudgetResolution>& cache = For(dtype_bytes);
  if (std::shared_ptr<const PeakBudgetResolution> hit = cache.Find(program, {}, wrt)) return hit;
  auto r = std::make_shared<const PeakBudgetResolution>(
      ResolvePeakBudget(program, wrt, dtype_bytes, dry_run));
  cache.Put(program, {}, wrt, r);
  return r;
}

size_t PeakBudgetCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& [bytes, cache] : by_dtype_bytes_) n += cache.size();
  return n;
}

}  // namespace remat
