#include "harness/bench_session.h"

#include <algorithm>
#include <iostream>

namespace remat::bench {

void ReportStart(BenchSession& session, const PlannedRow& row) {
  Progress& p = session.progress;
  if (!p.enabled) return;
  std::cerr << "[" << ++p.started << "/" << p.total << "] " << row.name << std::endl;
}

double ApartWaitSeconds(double sampling_budget_seconds) {
  return sampling_budget_seconds > 0 ? std::min(kApartWaitSeconds, sampling_budget_seconds / 4)
                                     : kApartWaitSeconds;
}

SamplingRule RuleNow(BenchSession& session, double weight) {
  SamplingRule rule = session.rule;
  const double weight_left = session.weight_left;
  session.weight_left = std::max(0.0, session.weight_left - weight);
  if (session.sampling_budget <= 0) return rule;
  const double left =
      session.sampling_budget * session.window / session.windows - session.sampled_seconds;
  return CappedRule(rule, left, weight, weight_left);
}

}  // namespace remat::bench
