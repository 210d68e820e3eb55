#include "engines/autodiff/executor_rules.h"

#include "engines/exec/accumulate.h"

namespace remat {

void CotangentSums::Add(int value, Tensor contribution) {
  Accumulate(*kernels_, &sums_[value], std::move(contribution));
}

Tensor CotangentSums::Take(int value) { return std::move(sums_[value]); }

std::vector<bool> ExecutorRules::CarryNeeds(const Op& scan, const std::vector<bool>& needs,
                                            int64_t length) const {
  (void)scan;
  bool any_xs = false;
  for (size_t j = 1; j < needs.size(); ++j) any_xs = any_xs || needs[j];
  std::vector<bool> out(static_cast<size_t>(length));
  // The carry of step i > 0 depends on earlier steps' stacked inputs.
  for (int64_t i = 0; i < length; ++i) out[i] = needs[0] || (i > 0 && any_xs);
  return out;
}

ExecutorRules& ContractRules() {
  static auto* rules = new ExecutorRules();
  return *rules;
}

}  // namespace remat
