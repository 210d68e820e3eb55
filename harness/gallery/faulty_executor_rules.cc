#include "harness/gallery/faulty_executor_rules.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "engines/plan/save_plan.h"

namespace remat {
namespace {

class ProgramOrderSums : public CotangentSums {
 public:
  ProgramOrderSums(Kernels* kernels, int num_values)
      : CotangentSums(kernels, num_values), waiting_(static_cast<size_t>(num_values)) {}
  void Add(int value, Tensor contribution) override {
    waiting_[value].push_back(std::move(contribution));
  }
  Tensor Take(int value) override {
    // Contributions arrive last reader first: summed the other way.
    for (auto it = waiting_[value].rbegin(); it != waiting_[value].rend(); ++it) {
      CotangentSums::Add(value, *it);
    }
    waiting_[value].clear();
    return CotangentSums::Take(value);
  }

 private:
  std::vector<std::vector<Tensor>> waiting_;
};

class OverwritingSums : public CotangentSums {
 public:
  using CotangentSums::CotangentSums;
  void Add(int value, Tensor contribution) override { sums_[value] = std::move(contribution); }
};

// The storage of residuals freed early, kept mapped for the life of the
// process (as a caching allocator keeps freed blocks) so that reading it is
// wrong but defined. Their buffers are never destroyed, so the tracker,
// which was told they were released, is not told again.
std::vector<Tensor>& FreedStorage() {
  static auto* freed = new std::vector<Tensor>();
  return *freed;
}

}  // namespace

std::unique_ptr<CotangentSums> SumInProgramOrderRules::NewSums(Kernels* kernels,
                                                               int num_values) const {
  return std::make_unique<ProgramOrderSums>(kernels, num_values);
}

std::unique_ptr<CotangentSums> OverwriteRunningSumRules::NewSums(Kernels* kernels,
                                                                 int num_values) const {
  return std::make_unique<OverwritingSums>(kernels, num_values);
}

void DropInitialCarryCotangentRules::FinishInputCotangents(const Op& op, const std::vector<bool>&,
                                                           const std::vector<bool>&, Kernels&,
                                                           std::vector<Tensor>* din) const {
  if (op.kind == OpKind::kScan && !din->empty()) (*din)[0] = Tensor();
}

void ZerosForUnreachedRegionInputRules::FinishInputCotangents(const Op& op,
                                                              const std::vector<bool>& needs,
                                                              const std::vector<bool>& reached,
                                                              Kernels& kernels,
                                                              std::vector<Tensor>* din) const {
  if (op.kind != OpKind::kCheckpoint) return;
  for (size_t i = 0; i < din->size(); ++i) {
    if (needs[i] && !reached[i]) {
      (*din)[i] = Tensor::Zeros(kernels.dtype(), op.body->shapes[i], tracker_);
    }
  }
}

void SkipAllZeroStackedGradientRules::FinishInputCotangents(const Op& op, const std::vector<bool>&,
                                                            const std::vector<bool>& reached,
                                                            Kernels&,
                                                            std::vector<Tensor>* din) const {
  if (op.kind != OpKind::kScan) return;
  for (size_t j = 1; j < din->size(); ++j) {
    if (!reached[j]) (*din)[j] = Tensor();
  }
}

std::vector<bool> CarryNeedsByDependenceRules::CarryNeeds(const Op& scan,
                                                          const std::vector<bool>& needs,
                                                          int64_t length) const {
  std::vector<bool> out(static_cast<size_t>(length));
  std::vector<bool> step_needs = needs;
  for (int64_t i = 0; i < length; ++i) {
    out[i] = step_needs[0];
    step_needs[0] = ValueNeeds(*scan.body, step_needs)[scan.body->output];
  }
  return out;
}

void FlattenedRecomputedResidualRules::OnResidual(bool recomputing, Tensor* residual) {
  if (recomputing && residual->shape().rank() >= 2) {
    *residual = residual->Reshaped(Shape({residual->num_elements()}));
  }
}

void ResidualFreedEarlyRules::BeginRun(const std::shared_ptr<MemoryTracker>& tracker) {
  tracker_ = tracker;
  residuals_.clear();
  freed_.clear();
  awaiting_reuse_.clear();
}

void ResidualFreedEarlyRules::OnResidual(bool recomputing, Tensor* residual) {
  if (!recomputing) residuals_.insert(residual->buffer());
}

void ResidualFreedEarlyRules::OnLastForwardUse(const Tensor& value) {
  // The tape still reads it (a residual): freed anyway.
  if (residuals_.count(value.buffer()) == 0) return;
  if (!freed_.insert(value.buffer()).second) return;  // freed already
  tracker_->Release(value.buffer()->bytes(), value.buffer()->category());
  FreedStorage().push_back(value);
  awaiting_reuse_.push_back(value);
}

void ResidualFreedEarlyRules::OnComputed(const Tensor& out) {
  if (awaiting_reuse_.empty() || out.dry() || out.num_elements() == 0) return;
  const Tensor freed = awaiting_reuse_.front();
  if (freed.buffer() == out.buffer()) return;
  awaiting_reuse_.erase(awaiting_reuse_.begin());
  std::memcpy(freed.buffer()->data(), out.raw(),
              static_cast<size_t>(std::min(freed.buffer()->bytes(), out.bytes())));
}

void StaleSavedValueRules::OnSaved(const Program& body, const std::map<int, Tensor>& saved) {
  last_saved_[&body] = saved;
}

const std::map<int, Tensor>* StaleSavedValueRules::SavedForRecompute(
    const Program& body, const std::map<int, Tensor>* saved) {
  auto it = last_saved_.find(&body);
  return it == last_saved_.end() ? saved : &it->second;
}

bool StateUpdatedOnRecomputeRules::CommitState(bool, const Tensor& value, Tensor* param) {
  if (!value.dry() && !param->dry() && value.buffer() != param->buffer()) {
    std::memcpy(param->raw(), value.raw(), static_cast<size_t>(value.bytes()));
  }
  return true;
}

}  // namespace remat
