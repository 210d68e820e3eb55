// The later windows of a run (--windows), each sampled in a process of its
// own: this binary again, with --only-window=K and a scratch --out.
#ifndef REMAT_HARNESS_BENCH_WINDOWS_H_
#define REMAT_HARNESS_BENCH_WINDOWS_H_

#include <memory>
#include <string>
#include <vector>

#include "harness/bench_row.h"

namespace remat::bench {

// Samples window `window` in a process of its own (this binary, with
// --only-window=K and a scratch --out) and adds each row's samples to its
// state as a window of its own (Timings::window_starts). Returns the
// seconds the child sampled; throws remat::Error if it failed.
double SampleWindowInChild(const std::vector<std::string>& args, int window,
                           const std::vector<std::unique_ptr<RowState>>& states);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_WINDOWS_H_
