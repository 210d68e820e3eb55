// ExecutorRules: the bookkeeping rules of CONTRACT.md sections 2 and 3 that
// the reverse-mode executor (reverse_mode.h) applies, as one object it is
// built with, so that an engine built on the executor can replace one rule
// and keep the rest: how a value's cotangent contributions are summed, which
// scan carries need cotangents, what a scan or checkpoint region
// contributes to its inputs, and what the tape keeps for the backward pass.
//
// The defaults are the contract. The executor never asks whether a rule is
// replaced: it calls the rule at its one place, so a replacement changes
// exactly that decision. harness/gallery builds its executor faults this
// way (faulty_executor_rules.h), as it builds kernel faults by wrapping the
// kernel table and planner faults by wrapping the planner.
//
// Protocol: the executor calls BeginRun at the start of every run (the
// dry run that predicts the peak is a run), then the rules as it goes. The
// rules may keep state between BeginRun calls; they are used by one run at
// a time.
#ifndef REMAT_ENGINES_AUTODIFF_EXECUTOR_RULES_H_
#define REMAT_ENGINES_AUTODIFF_EXECUTOR_RULES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engines/api/kernels.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/program.h"
#include "engines/api/tensor.h"

namespace remat {

// The running cotangent sums of one program's values during one backward
// pass (CONTRACT.md 3.1-3.3). The executor adds contributions in the order
// the contract fixes (reverse program order; within an op, input order) and
// takes a value's sum when its producer's backward rule reads it.
class CotangentSums {
 public:
  CotangentSums(Kernels* kernels, int num_values)
      : kernels_(kernels), sums_(static_cast<size_t>(num_values)) {}
  virtual ~CotangentSums() = default;

  // Sets value's sum to `sum` (the seed of the output; a chain continuing
  // its enclosing program's sums). Replaces what was there.
  void Start(int value, Tensor sum) { sums_[value] = std::move(sum); }
  // Adds a defined contribution to value's sum: remat::Accumulate
  // (engines/exec/accumulate.h: the first contribution itself, then Add out
  // of place).
  virtual void Add(int value, Tensor contribution);
  // Value's sum (undefined: nothing reached it); the sum is then undefined.
  virtual Tensor Take(int value);

 protected:
  Kernels* kernels_;
  std::vector<Tensor> sums_;
};

class ExecutorRules {
 public:
  virtual ~ExecutorRules() = default;

  // The start of a run on `tracker` (a dry run's tracker allocates nothing).
  virtual void BeginRun(const std::shared_ptr<MemoryTracker>& tracker) { (void)tracker; }

  // The sums of one backward pass over a program of `num_values` values.
  virtual std::unique_ptr<CotangentSums> NewSums(Kernels* kernels, int num_values) const {
    return std::make_unique<CotangentSums>(kernels, num_values);
  }

  // CONTRACT.md 3.5: whether the carry entering each of a scan's `length`
  // steps needs a cotangent, given the scan's input needs (carry first):
  // step 0's carry if the scan's carry does; step i > 0's if the scan's
  // carry does or any stacked input does.
  virtual std::vector<bool> CarryNeeds(const Op& scan, const std::vector<bool>& needs,
                                       int64_t length) const;

  // What a scan or a checkpoint region contributes to its inputs, after the
  // executor has computed `din` (by input; undefined: no contribution).
  // `reached[i]`: whether any cotangent reached input i inside the op. The
  // contract's rule (3.4, 3.5) is what the executor computed: a region
  // contributes nothing for an input no cotangent reached, a scan
  // contributes a needed stacked input's gradient even when it is all
  // zeros. The default changes nothing.
  virtual void FinishInputCotangents(const Op& op, const std::vector<bool>& needs,
                                     const std::vector<bool>& reached, Kernels& kernels,
                                     std::vector<Tensor>* din) const {
    (void)op, (void)needs, (void)reached, (void)kernels, (void)din;
  }

  // The tape. The forward pass, or a region's recomputation when
  // `recomputing`, records `residual` for a backward rule; the rule reads
  // *residual as it is left.
  virtual void OnResidual(bool recomputing, Tensor* residual) { (void)recomputing, (void)residual; }
  // The forward pass (not a recomputation) reads `value` no more: the
  // executor drops its reference (its storage is released when the last
  // reference goes, the tape's included). `value` was computed by the run
  // (never an argument).
  virtual void OnLastForwardUse(const Tensor& value) { (void)value; }
  // A primitive op computed `out` (forward pass or recomputation).
  virtual void OnComputed(const Tensor& out) { (void)out; }
  // A honoured region's forward pass kept `saved` (by body value id); its
  // recomputation substitutes the values SavedForRecompute returns.
  virtual void OnSaved(const Program& body, const std::map<int, Tensor>& saved) {
    (void)body, (void)saved;
  }
  virtual const std::map<int, Tensor>* SavedForRecompute(const Program& body,
                                                         const std::map<int, Tensor>* saved) {
    (void)body;
    return saved;
  }
  // State (CONTRACT.md, state). Whether a region's recomputation runs its
  // state ops too (the contract: no, nothing reads them).
  virtual bool RunsStateOpsOnRecompute() const { return false; }
  // A state op ran, in the forward pass or a recomputation, giving `value`
  // as the new value of the parameter whose run tensor is *param; returns
  // whether the run commits it as that parameter's Result::state (the
  // contract: the forward pass's, once; *param untouched).
  virtual bool CommitState(bool recomputing, const Tensor& value, Tensor* param) {
    (void)value, (void)param;
    return !recomputing;
  }
};

// The contract's rules, stateless: what an executor built without rules of
// its own applies.
ExecutorRules& ContractRules();

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_EXECUTOR_RULES_H_
