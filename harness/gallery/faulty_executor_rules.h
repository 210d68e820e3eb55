// Faulty bookkeeping rules for the reverse-mode executor
// (engines/autodiff/executor_rules.h), for the gallery of faulty engines
// (gallery.h): each class replaces one rule of the contract with a bug an
// engine could have, and keeps the others. Test-only.
#ifndef REMAT_HARNESS_GALLERY_FAULTY_EXECUTOR_RULES_H_
#define REMAT_HARNESS_GALLERY_FAULTY_EXECUTOR_RULES_H_

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "engines/autodiff/executor_rules.h"

namespace remat {

// A value's contributions are summed in program order (its first reader's
// first) instead of the reverse (CONTRACT.md section 3, rules 1-3): they
// wait, and are summed first reader first when the sum is taken.
class SumInProgramOrderRules : public ExecutorRules {
 public:
  std::unique_ptr<CotangentSums> NewSums(Kernels* kernels, int num_values) const override;
};

// A running sum is replaced by each new contribution instead of adding it:
// every contribution but the last is dropped.
class OverwriteRunningSumRules : public ExecutorRules {
 public:
  std::unique_ptr<CotangentSums> NewSums(Kernels* kernels, int num_values) const override;
};

// The cotangent of a scan's initial carry is dropped (none is returned).
class DropInitialCarryCotangentRules : public ExecutorRules {
 public:
  void FinishInputCotangents(const Op& op, const std::vector<bool>& needs,
                             const std::vector<bool>& reached, Kernels& kernels,
                             std::vector<Tensor>* din) const override;
};

// A checkpoint region's needed input that no cotangent reached contributes
// zeros to the enclosing sums instead of nothing (CONTRACT.md 3.4): a -0.0
// sum becomes +0.0.
class ZerosForUnreachedRegionInputRules : public ExecutorRules {
 public:
  void BeginRun(const std::shared_ptr<MemoryTracker>& tracker) override { tracker_ = tracker; }
  void FinishInputCotangents(const Op& op, const std::vector<bool>& needs,
                             const std::vector<bool>& reached, Kernels& kernels,
                             std::vector<Tensor>* din) const override;

 private:
  std::shared_ptr<MemoryTracker> tracker_;
};

// A needed stacked input's gradient that no step reached (all zeros) is not
// contributed (CONTRACT.md 3.5): a -0.0 sum stays -0.0.
class SkipAllZeroStackedGradientRules : public ExecutorRules {
 public:
  void FinishInputCotangents(const Op& op, const std::vector<bool>& needs,
                             const std::vector<bool>& reached, Kernels& kernels,
                             std::vector<Tensor>* din) const override;
};

// The carry entering scan step i > 0 needs a cotangent only if step i-1's
// output depends on a needed value, not whenever a stacked input is needed
// (CONTRACT.md 3.5): fewer backward FLOPs and residuals than eager.
class CarryNeedsByDependenceRules : public ExecutorRules {
 public:
  std::vector<bool> CarryNeeds(const Op& scan, const std::vector<bool>& needs,
                               int64_t length) const override;
};

// The residuals a recomputation records have their shape flattened (rank 2
// and 3 become rank 1).
class FlattenedRecomputedResidualRules : public ExecutorRules {
 public:
  void OnResidual(bool recomputing, Tensor* residual) override;
};

// A value the backward pass reads is freed at its last forward use (the
// tracker's live bytes drop there), and its storage is given to the next
// value the forward pass computes (which overwrites it) while the tape
// still reads it: a use after free, without undefined behaviour (the storage
// stays mapped, and is never given back: a leak the tracker does not see, as
// it was told of the release).
class ResidualFreedEarlyRules : public ExecutorRules {
 public:
  void BeginRun(const std::shared_ptr<MemoryTracker>& tracker) override;
  void OnResidual(bool recomputing, Tensor* residual) override;
  void OnLastForwardUse(const Tensor& value) override;
  void OnComputed(const Tensor& out) override;

 private:
  std::shared_ptr<MemoryTracker> tracker_;
  std::set<const Buffer*> residuals_;   // recorded by the forward pass
  std::set<const Buffer*> freed_;       // released early already
  std::vector<Tensor> awaiting_reuse_;  // storage the next values overwrite
};

// A honoured region's recomputation substitutes the values saved by the
// region's last forward instance (a cache keyed by region, not instance): in
// a scan, every step reads the last step's saved values.
class StaleSavedValueRules : public ExecutorRules {
 public:
  void BeginRun(const std::shared_ptr<MemoryTracker>&) override { last_saved_.clear(); }
  void OnSaved(const Program& body, const std::map<int, Tensor>& saved) override;
  const std::map<int, Tensor>* SavedForRecompute(const Program& body,
                                                 const std::map<int, Tensor>* saved) override;

 private:
  std::map<const Program*, std::map<int, Tensor>> last_saved_;
};

// State kept in place, as nn.BatchNorm2d keeps its running statistics: a
// state op writes its value into its parameter's tensor (the caller's
// argument), and a region's recomputation runs its state ops again and
// commits them, so a recomputed running statistic is updated twice (the
// update applied to the already-updated buffer: pytorch#96136).
class StateUpdatedOnRecomputeRules : public ExecutorRules {
 public:
  bool RunsStateOpsOnRecompute() const override { return true; }
  bool CommitState(bool recomputing, const Tensor& value, Tensor* param) override;
};

}  // namespace remat

#endif  // REMAT_HARNESS_GALLERY_FAULTY_EXECUTOR_RULES_H_
