// The memory set-up of one run, by CONTRACT.md section 4: the run's
// MemoryTracker (real, or a dry run for plan_only and predictions), the
// limit and the memory cap wired to it, the arguments counted or copied,
// and at the end the Stats filled from the tracker and the books checked.
// A building block: an engine's ValueAndGrad is
//
//   RunMemory memory(kernels, options, /*dry_run=*/options.plan_only);
//   std::vector<Tensor> inputs = memory.Arguments(program, args);
//   ... its traversal, allocating through memory.tracker() ...
//   memory.Finish(&result);  // stats from the tracker; nothing leaked
//
// engines/autodiff's ReverseMode and engines/dtr are written this way.
//
// Why a library of its own (//engines/exec) and not in engines/api: the
// api is the contract (what an engine must do, what the suite checks);
// these are one way to do it, which an engine may use or not. An outside
// engine depends on //engines/exec; nothing in engines/api depends on it.
#ifndef REMAT_ENGINES_EXEC_RUN_MEMORY_H_
#define REMAT_ENGINES_EXEC_RUN_MEMORY_H_

#include <cstdint>
#include <memory>
#include <algorithm>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/program.h"
#include "engines/api/stats.h"
#include "engines/api/tensor.h"

namespace remat {

class RunMemory {
 public:
  // Creates the run's tracker (a dry-run tracker if `dry_run`: allocations
  // counted, none made, kernels skip their arithmetic), sets
  // options.max_memory_bytes as its hard limit (0: none), hands it to
  // options.on_tracker as soon as it exists, binds `kernels` to it and sets
  // their timing (options.time_kernels).
  RunMemory(Kernels& kernels, const RunOptions& options, bool dry_run);
  // Releases the arguments' counts if Finish did not (a run that threw),
  // removes the cap and the pressure hook, and unbinds the kernels. The
  // tracker lives on in the Result (Result::tracker) if Finish gave it one.
  ~RunMemory();
  RunMemory(const RunMemory&) = delete;
  RunMemory& operator=(const RunMemory&) = delete;

  const std::shared_ptr<MemoryTracker>& tracker() const { return tracker_; }

  // RunOptions::memory_cap_bytes for an engine that evicts: the tracker's
  // soft cap, and the hook it calls with the bytes to free before an
  // allocation that would pass it (the online engine's decision point; see
  // memory_tracker.h). 0: none.
  void SetMemoryCap(int64_t cap_bytes, MemoryTracker::PressureHook hook);

  // The arguments in the kernels' dtype, by parameter: an argument already
  // in it is used in place and counted in Category::kInputs for the length
  // of the run (a buffer several arguments share once); any other becomes a
  // tracked copy (Cast), released when the caller drops it. Site
  // "argument NAME". Call once, before anything else is allocated.
  std::vector<Tensor> Arguments(const Program& program, const std::vector<Tensor>& args);
  // Whether `buffer` is an argument's (in place or its copy): for the
  // residual listing, which lists arguments apart.
  bool IsArgument(const Buffer* buffer) const {
    return std::find(arguments_.begin(), arguments_.end(), buffer) != arguments_.end();
  }

  // Stats' memory fields from the tracker: peak_bytes, peak_bytes_by_
  // category, peak_site, high_water_bytes_by_category, host_peak_bytes.
  void FillStats(Stats* stats) const;
  // The end of a run, once the engine has dropped everything but the
  // Result's tensors: releases the arguments' counts, fills result->stats'
  // memory fields, sets result->tracker, and checks the books: the
  // tracker's live bytes must be exactly the Result's value and gradients
  // (their storage once, arguments' storage not), or it throws remat::Error
  // naming the bytes left live (a leak, or a release the tracker was told of
  // twice).
  void Finish(Result* result);

 private:
  void ReleaseArguments();

  Kernels& kernels_;
  std::shared_ptr<MemoryTracker> tracker_;
  int64_t counted_bytes_ = 0;  // arguments used in place
  // A handful (a program's parameters): searched, not a tree allocated per
  // run.
  std::vector<const Buffer*> arguments_;
  // The caller's buffers among them (in place, counted, not owned): they
  // outlive the run, unlike a cast's copy, whose address may be reused once
  // it is freed.
  std::vector<const Buffer*> in_place_;
};

// Shapes-only stand-ins for `args` (tensors of `tracker`, a dry-run
// tracker): what a prediction's dry run runs on, so that it allocates
// nothing and sees what the run will. Arguments that share storage share it
// here too, so the dry run counts them as the run will (once).
std::vector<Tensor> DryArguments(const std::vector<Tensor>& args,
                                 const std::shared_ptr<MemoryTracker>& tracker);

// Throws remat::Error, naming the program and the parameter, for an
// argument without data (a dry-run tensor) in a run that computes: only a
// plan (RunOptions::plan_only) can take shapes alone.
void RequireArgumentData(const Program& program, const std::vector<Tensor>& args);

}  // namespace remat

#endif  // REMAT_ENGINES_EXEC_RUN_MEMORY_H_
