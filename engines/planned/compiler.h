// The compiler of engines/planned: a program and its plan into a
// CompiledPlan (compiled_plan.h), ahead of the run.
//
// How: it records one dry run of the reverse-mode executor
// (engines/autodiff/reverse_mode.h) under the planner recompute uses
// (SchedulePlanner over PolicyPlanner: policies, checkpoint regions, scan and
// chain schedules). Every kernel call (RecordingKernels), every buffer created
// and destroyed and every write outside a kernel (engines/api/buffer_hooks.h)
// becomes an instruction over numbered buffers; each buffer's live range is
// the span between its creation and its release in that stream, and the
// buffers are packed into one arena by those ranges (arena_packing.h).
//
// Why record the executor rather than walk the plan again: what a plan means
// (what a region keeps and recomputes, what a schedule's actions do, the
// order of accumulation of CONTRACT.md section 3, when each value is freed)
// is the executor's code. A recording of it is that plan exactly, with no
// second implementation to drift from it; its dry run is also the one
// recompute predicts its peak from, so the compiled run's memory is
// predicted by the same walk, to the byte and the site. The price is that a
// compiled run is as good as the executor's plan; the gain of compiling is
// that none of the executor's bookkeeping (tapes, maps, site strings, plan
// decisions) is paid again at run time.
//
// oneDNN's scratchpad differs by ISA (AVX-512's brgemm matmul has one,
// AVX2's gemm none): the recording asks the kernels themselves (a dry run
// still creates each primitive and allocates its scratchpad), so the arena
// holds what this machine's kernels need.
#ifndef REMAT_ENGINES_PLANNED_COMPILER_H_
#define REMAT_ENGINES_PLANNED_COMPILER_H_

#include <functional>
#include <memory>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/program.h"
#include "engines/api/tensor.h"
#include "engines/autodiff/planner.h"
#include "engines/planned/compiled_plan.h"
#include "engines/planned/recording_kernels.h"

namespace remat {

// Arena offsets are multiples of this: the alignment of a malloc'd buffer
// (engines/api/tensor.cc), so the kernels see what they see in eager.
inline constexpr int64_t kArenaAlignment = kBufferAlignmentBytes;

// Compiles value_and_grad of `program` for arguments like `dry_args`
// (tensors of a dry-run tracker: shapes, dtypes and storage sharing, no
// data) and `wrt`. `on_tracker` (may be null) is given the dry run's
// tracker. Throws remat::Error for a program the executor refuses.
std::shared_ptr<const CompiledPlan> Compile(
    RecordingKernels* kernels, const Planner* planner, const Program& program,
    const std::vector<Tensor>& dry_args, const std::vector<int>& wrt,
    const std::function<void(const std::shared_ptr<MemoryTracker>&)>& on_tracker);

}  // namespace remat

#endif  // REMAT_ENGINES_PLANNED_COMPILER_H_
