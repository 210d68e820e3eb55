// The matmul bound's rows (RowKind::kMatMulBound, harness/bench_plan.h):
// eager's contractions (matmuls and convolutions) on a case replayed on
// oneDNN alone, on buffers that alias as eager's did, sampled paired with
// eager like the engines' rows.
#ifndef REMAT_HARNESS_BENCH_MATMUL_BOUND_H_
#define REMAT_HARNESS_BENCH_MATMUL_BOUND_H_

#include <benchmark/benchmark.h>

#include "harness/bench_row.h"

namespace remat::bench {

// One pass over eager's contractions (RowState::bound_calls), each output
// written into the buffer that stands for the address eager wrote it to.
void RunCaseMatMuls(RowState& s);

// Sets up a bound row (EnsureReady): eager's contractions from one run of
// the case, their buffers, one warm-up pass; throws remat::Error where
// eager makes no matmul or convolution.
void SetUpMatMulBound(RowState* s);

// Samples a bound row (registered with Google Benchmark: one iteration).
void RunMatMulBound(benchmark::State& state, RowState* s);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_MATMUL_BOUND_H_
