// What the bench needs of a planned row before it runs: whether Google
// Benchmark's --benchmark_filter selects it (to count a sweep's rows and
// their share of the sampling budget) and its SamplingWeight.
#ifndef REMAT_HARNESS_BENCH_REGISTER_H_
#define REMAT_HARNESS_BENCH_REGISTER_H_

#include <string>

#include "harness/bench_plan.h"
#include "harness/bench_session.h"

namespace remat::bench {

// Whether Google Benchmark's --benchmark_filter selects `name` (its regex is
// POSIX extended; a leading '-' negates; empty or "all" selects all), to
// count a sweep's rows.
bool FilterSelects(std::string filter, const std::string& name);

// SamplingWeight of a row: from one eager run's FLOPs on its case, planned on
// shapes alone (a dry run: milliseconds), once per case. A bound row weighs
// its second of samples; big rows (one run) and program files (no problem to
// build) weigh the floor.
double RowWeight(BenchSession& session, const PlannedRow& row);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_REGISTER_H_
