// dtr: Dynamic Tensor Rematerialization (Kirisame et al., ICLR 2021) as a
// remat-bench engine, written from engines/api/CONTRACT.md and the public
// headers alone.
//
// An online runtime: it runs the program as written (checkpoint regions
// inline, scans step by step, chains block by block: it needs no plan and
// ignores policies and schedules), keeps every value until
// RunOptions::memory_cap_bytes would be passed, then evicts the resident
// value with the lowest h_DTR (engines/dtr/cell_pool.h) and recomputes
// evicted values when they are read again, from their parents, recursively.
//
// Registered as two engines:
//   "dtr"     h_DTR with the exact evicted neighbourhood e*(t);
//   "dtr_eq"  h_DTR^eq: e*(t) estimated by union-find equivalence classes.
//
// Contract (on top of Engine's and CONTRACT.md's):
// - Kernels: eager's f32 set ("onednn"), the rules of rules.h and the order
//   of accumulation of CONTRACT.md section 3; recomputation runs the same op
//   on the same inputs. So value and gradients are eager's bits at every cap.
// - Evictable: values computed by the forward pass (what the backward reads
//   included). Never: arguments (nothing to recompute them from), the
//   program's output, cotangents, nor the inputs of the op running (pinned).
// - Lifetime: a value is freed once nothing will read it again (its forward
//   readers have run and the backward ops that read it are done), as eager
//   frees it; without a cap dtr evicts nothing and recomputes nothing.
// - Cost of a value: its op's FLOPs (the model of engines/api/kernels.h),
//   at least one per element written (copies count what they move, so no
//   value is free to evict). Staleness: ticks of a clock advanced once per
//   op executed (forward, recomputation, backward), so every run of the same
//   program, inputs and cap makes the same choices; a dry run (no
//   arithmetic) makes them too.
// - Memory cap: the run's tracker gets the cap as its soft cap and a
//   pressure hook that evicts until the allocation fits; the measured peak
//   never passes the cap. If nothing more can be evicted, the run stops (the
//   tracker's MemoryCapError, nothing leaked) and dtr searches, by bisection
//   over dry runs, for the smallest cap that works: the error names it ("the
//   smallest cap that worked is N bytes"). max_memory_bytes stays a hard
//   limit (an error, never an eviction).
// - Stats: measured by the tracker; predicted_peak_bytes is -1 (no static
//   plan); flops_recomputed counts recomputations in either pass;
//   residual_bytes and residuals are the values resident, and read by the
//   backward, when the forward pass ends (so they shrink with the cap);
//   op_runs counts recomputations too. plan_only runs on a dry-run tracker.
//
// Shape: dtr keeps its own traversal (frames of cells, any of which can be
// evicted and recomputed from its parents at any allocation) rather than
// being a Planner over ReverseMode (engines/autodiff/planner.h): a planner
// makes static decisions per region and loop, ahead of the run, and a tape
// of saved residuals cannot give a value back and get it again later; dtr
// decides online, at allocation time, in the tracker's pressure hook
// (RunMemory::SetMemoryCap). What every engine needs it takes from
// engines/exec, as ReverseMode does: the run's memory set-up and Stats
// (run_memory.h), accumulation and stacked scan gradients (accumulate.h),
// the residual listing (residual_listing.h).
#ifndef REMAT_ENGINES_DTR_DTR_ENGINE_H_
#define REMAT_ENGINES_DTR_DTR_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"
#include "engines/dtr/cell_pool.h"

namespace remat {

class DtrEngine : public Engine {
 public:
  explicit DtrEngine(dtr::Heuristic heuristic = dtr::Heuristic::kDtr);
  ~DtrEngine() override;

  std::string name() const override { return dtr::HeuristicName(heuristic_); }
  DType dtype() const override { return DType::kF32; }
  std::string kernels() const override;
  bool honours_checkpoints() const override { return false; }
  bool honours_memory_cap() const override { return true; }
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options = {}) override;

  // The smallest cap under which `program` runs, found by bisection over dry
  // runs (no arithmetic, no storage) between `infeasible` (a cap known to
  // fail, 0 if none) and the uncapped peak. Throws what an uncapped run throws.
  int64_t SmallestFeasibleCap(const Program& program, const std::vector<Tensor>& args,
                              const std::vector<int>& wrt, int64_t infeasible = 0);

 private:
  // One run under `cap` (0: none), on a dry-run tracker if `dry`.
  Result RunOnce(const Program& program, const std::vector<Tensor>& args,
                 const std::vector<int>& wrt, const RunOptions& options, int64_t cap, bool dry);
  // Whether a dry run under `cap` completes.
  bool FitsUnder(const Program& program, const std::vector<Tensor>& args,
                 const std::vector<int>& wrt, int64_t cap);

  dtr::Heuristic heuristic_;
  std::unique_ptr<Kernels> kernels_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_DTR_DTR_ENGINE_H_
