// PlannedEngine ("planned"): recompute's plan, compiled. A program and its
// plan (the checkpoint regions' policies, the scans' and chains' schedules,
// as engines/recompute executes them) are compiled ahead of the run into a
// flat list of instructions (forward op, recomputation, backward rule,
// accumulation, free) with every buffer's place in one arena assigned by its
// live range (compiler.h, arena_packing.h); the run executes that list on
// eager's oneDNN kernels.
//
// - Bits: the instructions are the executor's own kernel calls in its order
//   (CONTRACT.md section 3), so gradients are eager's, bit for bit.
// - Memory: the run allocates one arena (CompiledPlan::arena_bytes) and
//   every kernel output, scratchpad, running sum and stacked gradient gets
//   its planned offset there (engines/api/buffer_hooks.h): no allocation is
//   made while the instructions run, except for the returned value and
//   gradients (the contract gives them to the caller, who may keep them
//   after the run: they are owned buffers of their own) and the host tier
//   (offloaded residuals, not device memory). The tracker counts every
//   buffer as it is given its place, so the measured peak is the plan's;
//   the prediction is the compiled dry run's peak, equal to the byte and
//   the site. Stats::arena_bytes reports the arena.
// - The arena's storage is the engine's, kept between runs and grown to the
//   largest arena a run has needed (as jax.jit's allocator keeps device
//   memory): a run neither allocates it nor page-faults it in. Between runs
//   the engine holds arena_reserved_bytes() that no run's tracker counts
//   (nothing is live in it); ReleaseArena() gives it back.
// - Compilation is cached (jax.jit's semantics): plans are keyed by the
//   program's structure (ops, shapes, sites, policies, schedules), the
//   arguments' dtypes and storage sharing, and wrt; a run of shapes seen
//   before skips compilation. Stats::seconds_compile is the compile time of
//   the run that compiled (0 for a cached plan); it is not in
//   seconds_forward or seconds_backward.
// - plan_only and check_recompute_bits run the executor itself under the
//   same planner (a dry run is what a plan is; the determinism check hashes
//   values as the executor computes them): the same plan, the same bits.
// - One instance serves one thread (its kernels and its cache).
#ifndef REMAT_ENGINES_PLANNED_PLANNED_ENGINE_H_
#define REMAT_ENGINES_PLANNED_PLANNED_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/tensor.h"
#include "engines/autodiff/planner.h"
#include "engines/budget/peak_budget.h"
#include "engines/exec/program_cache.h"
#include "engines/planned/compiled_plan.h"
#include "engines/planned/recording_kernels.h"

namespace remat {

class PlannedEngine : public Engine {
 public:
  PlannedEngine();

  std::string name() const override { return "planned"; }
  DType dtype() const override { return DType::kF32; }
  std::string kernels() const override { return kernels_->name(); }
  bool honours_checkpoints() const override { return planner_->honours_checkpoints(); }
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override;

  // The compiled plan a run with these arguments uses (compiling it if no
  // run has yet): for tests and tools. Throws as ValueAndGrad would.
  std::shared_ptr<const CompiledPlan> PlanFor(const Program& program,
                                              const std::vector<Tensor>& args,
                                              const std::vector<int>& wrt);
  size_t cached_plans() const { return cache_.size(); }
  // The arena storage held between runs (0 before the first run or after
  // ReleaseArena), and giving it back.
  int64_t arena_reserved_bytes() const { return arena_ ? arena_->bytes() : 0; }
  void ReleaseArena() {
    bindings_.clear();
    arena_.reset();
  }
  // Tests: fills the kept arena with 0xff bytes (NaNs), so that a run that
  // read arena memory before writing it would not give eager's bits.
  void PoisonArenaForTesting();

  // Plans kept at most; the cache is emptied when a new one would pass it.
  static constexpr size_t kMaxCachedPlans = 256;

  // A plan's slots, bound to the arena block (planned_engine.cc, Bind).
  static constexpr Category kNotLive = Category::kCount;
  struct Binding {
    std::vector<Tensor> slots;   // by slot: a bound buffer's tensor, kept
    std::vector<char> bound;     // by slot (a byte each: read by every instruction)
    std::vector<int64_t> bytes;  // by slot: a bound buffer's
    // By slot: the category a bound buffer was counted in this run, or
    // kNotLive.
    std::vector<Category> live;
    std::shared_ptr<MemoryTracker> binder;  // counts the bound tensors' storage
    std::vector<int> bound_slots, dynamic_slots;
    std::vector<std::pair<int, int>> casts;  // (buffer, argument) a cast binds
    std::vector<bool> arg_cast;              // by argument: bound by a cast
    // By result (the value, then the gradients): moved out of its slot.
    std::vector<char> move_out;
    // The plan's instructions as a run walks them: each with what it needs
    // at hand (Bind), and the frees that follow it folded in.
    struct Step {
      const Instruction* in = nullptr;  // null: frees only
      bool bound = false;               // its output is a bound buffer
      bool resolved = false;            // every operand found at Bind
      int num_operands = 0;
      const Tensor* operands[3] = {};  // where resolved
      int frees_begin = 0, frees_end = 0;  // into `frees`
    };
    std::vector<Step> steps;
    // Views of bound buffers the steps read (made once; a deque: they do
    // not move as it grows).
    std::deque<Tensor> views;
    std::vector<int> frees;   // slots
    size_t backward_step = 0;  // the step of CompiledPlan::backward_start
  };

 private:
  // The cached plan, or a new one (its compile time in *seconds).
  std::shared_ptr<const CompiledPlan> Lookup(
      const Program& program, const std::vector<Tensor>& args, const std::vector<int>& wrt,
      const std::function<void(const std::shared_ptr<MemoryTracker>&)>& on_tracker,
      double* seconds);
  Result Execute(const CompiledPlan& plan, const Program& program, const std::vector<Tensor>& args,
                 const RunOptions& options);

  // A cached plan and what it was compiled for: the program (a copy; its
  // bodies shared, they are immutable), the arguments' signature and wrt.
  struct Entry {
    Program program;
    std::vector<ArgumentSignature> args;
    std::vector<int> wrt;
    std::shared_ptr<const CompiledPlan> plan;
  };

  // `program`, or its memory_budget:peak regions resolved (peak_budget.h,
  // by dry runs of the executor this engine records), kept in *hold.
  const Program& Resolved(const Program& program, const std::vector<Tensor>& args,
                          const std::vector<int>& wrt,
                          const std::function<void(const std::shared_ptr<MemoryTracker>&)>& on_tracker,
                          std::shared_ptr<const PeakBudgetResolution>* hold);

  std::unique_ptr<RecordingKernels> kernels_;
  std::unique_ptr<Planner> planner_;
  PeakBudgetCache peak_budgets_;
  // By a hash of the key; a hit is confirmed by comparing the key itself.
  std::unordered_multimap<uint64_t, Entry> cache_;
  // The entry the last run used (null after the cache is emptied).
  const Entry* last_ = nullptr;
  // The arena's storage, reused by every run (see above).
  std::unique_ptr<Buffer> arena_;
  // By plan (cleared with the cache, or when the arena block changes).
  Binding& Bind(const CompiledPlan& plan);
  std::unordered_map<const CompiledPlan*, Binding> bindings_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_PLANNED_PLANNED_ENGINE_H_
