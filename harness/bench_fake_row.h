// Test fixture: a measured bench row made up for a test (bench_test,
// bench_controls_test), as bench_main would fill it.
#ifndef REMAT_HARNESS_BENCH_FAKE_ROW_H_
#define REMAT_HARNESS_BENCH_FAKE_ROW_H_

#include <string>

#include "harness/bench_lib.h"

namespace remat::bench {

// A value_and_grad row of `engine` under `policy` on `problem` at `params`
// that took `ms`, with 1 GFLOP forward and its GFLOP/s from that.
inline RowResult Fake(const std::string& problem, const std::string& engine,
                      const std::string& policy, double ms,
                      OrderedParams params = {{"d", 512}, {"N", 256}}) {
  RowResult r;
  r.row.problem = problem;
  r.row.params = params;
  r.row.engine = engine;
  r.row.variant = CaseVariant::Parse(policy);
  r.row.case_key = problem + "/" + FormatOrderedParams(params);
  r.row.name = "BM_ValueAndGrad/" + r.row.case_key + "/" + engine + "/" + policy;
  r.real_time_ms = ms;
  r.iterations = 10;
  r.flops_forward = 1'000'000'000;
  r.gflops = static_cast<double>(r.total_flops()) / (ms * 1e6);
  return r;
}

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_FAKE_ROW_H_
