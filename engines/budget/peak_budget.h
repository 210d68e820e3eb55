// The second mode of the memory_budget planner (engines/api/policy.h):
// memory_budget:peak:B, the least recomputation whose whole run's peak is at
// most B bytes, and memory_budget:peak:min, the smallest peak reachable and
// the least recomputation at it.
//
// A region alone cannot answer it: the run's peak is the sum of what every
// region instance still waiting for its backward pass keeps, plus the
// gradients, the inputs and the kernels' scratchpads at whatever moment they
// peak together. So the mode is resolved over the whole program, before the
// run, by the engine that runs it (recompute and planned: ResolvePeakBudget
// with their own executor's dry runs as the oracle of the peak, exact to the
// byte since a run measures the peak its dry run predicts):
//
// - The family: every peak-mode region gets the same fraction f of the bytes
//   everything_saveable keeps in it, memory_budget:f, planned by
//   budget_solver.h (least recomputed FLOPs within floor(f * E) bytes; E is
//   the region's everything_saveable bytes for its needs). Regions under other
//   policies keep theirs.
// - The candidates: a region's plan changes only where floor(f * E) reaches
//   the saved bytes of a point of its Pareto front (BudgetFront), so the
//   candidate fractions are 0, 1 and, for every peak-mode region (every
//   differentiated needs it is planned under: a scan's first step and the
//   later ones), s / E for each front point s (the smallest double f with
//   floor(f * E) >= s), and the upper end of each interval between two of
//   these (the largest double below the next). Between two consecutive
//   breakpoints every region's least recomputation is constant; under the
//   knapsack its plan is too, but the MILP may return another save set of
//   the same FLOPs (and another peak) inside an interval: its two ends are
//   tried.
// - Peak-mode regions nested in peak-mode regions: an outer region's
//   recomputation re-runs an inner one that may save (f > 0), and the
//   inner's plan is not in the outer's objective, so the total FLOPs are
//   neither constant between breakpoints nor monotone in f.
// - A region of more than kPeakFrontClasses saveable values (a whole model
//   in one region: its front has a point for nearly every byte size its
//   values add up to, thousands, one MILP each) adds no breakpoints: its
//   candidates are the grid's below, and no interval's upper end is tried.
//   The resolution says how many regions were searched so; the answer is
//   then exact at the grid's resolution only.
// - A grid of 1/64 steps joins the candidates, nested or not: besides the
//   nesting above, two save sets of one interval can recompute the same
//   measured FLOPs at different peaks (peak_budget_test's seed 53: 44 FLOPs
//   at 2232 and at 2104 bytes), so the interval ends alone can miss a plan
//   that fits B. The answer is exact over the candidates only.
// - Every candidate is dry-run (the peak is NOT monotone in f: a plan that
//   keeps more of one value may free a larger one sooner, and the kernels'
//   scratchpads move the moment of the peak, so bisection could miss the
//   best f). peak:B: the least recomputed FLOPs among the candidates whose
//   predicted peak is at most B (on ties the larger f). Without nesting,
//   FLOPs never rise with f (each region's least recomputation falls as its
//   budget grows), so that is the largest f that fits. peak:min: the
//   smallest peak (on ties the larger f). One dry run per candidate, once
//   per (program, wrt): PeakBudgetCache.
// - No candidate fits B: remat::Error naming the policy text, the regions, B
//   and the smallest peak reachable (with its fraction).
// - Peak-mode regions must all name the same limit (one run has one peak):
//   two different texts are an error naming both.
//
// What is exact and what is not:
// - Exact: the chosen plan's peak is the run's peak (a dry run is the run
//   without data), and within the family (one fraction shared by every
//   peak-mode region, each region planned optimally for its bytes) no other
//   f has fewer recomputed FLOPs with a peak at most B, for peak-mode
//   regions that do not nest, up to the solver's choice among save sets of
//   equal FLOPs inside an interval (between two candidates of the grid, a
//   plan of another peak may still exist; the 1/64 grid joined the
//   candidates after it found one with fewer FLOPs that fit where no
//   interval end did).
// - Not exact: the family is not every save set. A global optimum would let
//   each region (each instance) keep a different budget, and let the plan
//   depend on the peak rather than on saved bytes (a value that is large but
//   freed before the peak costs nothing there); searching that is a
//   Checkmate MILP over the whole program's schedule with a peak
//   constraint at every moment, which this executor's cost model does not
//   express. engines/budget/peak_budget_test.cc counts how often the family
//   is globally optimal on tiny programs (exhaustive search over all save
//   sets).
// - The MILP's node and time limits: a region the MILP cannot prove optimal
//   within them gives a feasible plan, as in the first mode; BudgetFront then
//   lists that plan's bytes, and a front of unproven plans may miss a
//   breakpoint: the answer is then exact over the candidates only.
// - The cache's key is the program's text, wrt and the element size, not how
//   the arguments share storage (which can change the bytes counted): two
//   runs that differ only there share a resolution.
#ifndef REMAT_ENGINES_BUDGET_PEAK_BUDGET_H_
#define REMAT_ENGINES_BUDGET_PEAK_BUDGET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/program.h"
#include "engines/exec/program_cache.h"

namespace remat {

// Whether any checkpoint region of `program` (nested, in scan bodies,
// chains) is under memory_budget:peak:... .
bool HasPeakBudget(const Program& program);

// Whether a peak-mode region of `program` holds another in its body (at any
// depth, scans included).
bool PeakBudgetNested(const Program& program);

// `program` with every memory_budget:peak:... region's policy replaced by
// memory_budget:F, F written so that it reads back as `fraction` exactly.
Program WithPeakFraction(const Program& program, double fraction);

// The most saveable values (classes) a region may have for the search to
// enumerate its front (one MILP per point); a larger region is searched on
// the grid only.
inline constexpr int kPeakFrontClasses = 64;

// The candidate fractions of the family, ascending, 0 and 1 included (see
// above), for `program` differentiated for `wrt` in elements of
// `dtype_bytes` bytes. `large_regions`, when given, receives how many
// distinct regions had more than kPeakFrontClasses saveable values.
std::vector<double> PeakBudgetCandidates(const Program& program, const std::vector<int>& wrt,
                                         int64_t dtype_bytes, int* large_regions = nullptr);

// A dry run of a program with no peak-mode region left: the engine's Stats
// of a plan-only run (peak_bytes: the run's peak, every category).
using PeakDryRun = std::function<Stats(const Program&)>;

struct PeakBudgetResolution {
  std::string policy_text;    // "memory_budget:peak:30MiB"
  bool min = false;           // peak:min
  int64_t limit_bytes = 0;    // peak:B's B
  double fraction = 0;        // the f chosen
  Program program;            // WithPeakFraction(program, fraction)
  int64_t peak_bytes = 0;     // its predicted peak
  int64_t recomputed_flops = 0;
  int candidates = 0;         // fractions in the family
  int dry_runs = 0;           // of them dry-run
  int large_regions = 0;      // searched on the grid only (kPeakFrontClasses)
};

// Resolves the peak-mode regions of `program` (HasPeakBudget must hold).
// Throws remat::Error when no candidate fits B, or when regions name
// different limits.
PeakBudgetResolution ResolvePeakBudget(const Program& program, const std::vector<int>& wrt,
                                       int64_t dtype_bytes, const PeakDryRun& dry_run);

// What `remat run` prints for a resolution: the policy, the fraction chosen,
// its peak against the limit, its recomputation, and the search's size.
std::string DescribePeakResolution(const PeakBudgetResolution& r);

// Resolutions remembered by (program structure, wrt, dtype size), as the
// engines keep their plans (engines/exec/program_cache.h): repeated runs of
// the same program and shapes resolve once. Thread-safe; resolution runs
// outside the lock.
class PeakBudgetCache {
 public:
  std::shared_ptr<const PeakBudgetResolution> Resolve(const Program& program,
                                                      const std::vector<int>& wrt,
                                                      int64_t dtype_bytes,
                                                      const PeakDryRun& dry_run);
  size_t size() const;

 private:
  ProgramCache<PeakBudgetResolution>& For(int64_t dtype_bytes);
  mutable std::mutex mutex_;
  std::map<int64_t, ProgramCache<PeakBudgetResolution>> by_dtype_bytes_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_BUDGET_PEAK_BUDGET_H_
