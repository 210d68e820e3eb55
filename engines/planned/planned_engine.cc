#include "engines/planned/planned_engine.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <span>
#include <type_traits>
#include <utility>

#include "engines/api/buffer_hooks.h"
#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/autodiff/planners.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/exec/program_cache.h"
#include "engines/exec/run_memory.h"
#include "engines/planned/compiler.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Hands the run's buffers their planned storage, in creation order: a place
// in the arena, or in another buffer (Placement::alias_of: in-place
// stacking), found by `data_of` (the buffer's storage; it exists by then).
class ArenaStorage : public BufferStorage {
 public:
  ArenaStorage(const MemoryTracker* tracker, const CompiledPlan& plan, char* arena,
               std::function<char*(int)> data_of)
      : tracker_(tracker), plan_(plan), arena_(arena), data_of_(std::move(data_of)) {}
  const MemoryTracker* tracker() const override { return tracker_; }
  void* Take(int64_t bytes, Category) override {
    const size_t k = next_++;
    if (k >= plan_.placements.size() || plan_.placements[k].bytes != bytes) {
      // Not the plan's allocation: allocate it apart (the run stays
      // correct) and report the divergence when the run ends.
      diverged_ = true;
      return nullptr;
    }
    const Placement& place = plan_.placements[k];
    if (place.alias_of >= 0) {
      char* base = data_of_(place.alias_of);
      if (base == nullptr) {
        diverged_ = true;
        return nullptr;
      }
      return base + place.alias_offset_bytes;
    }
    return place.offset < 0 ? nullptr : arena_ + place.offset;
  }
  // The next buffer is one the engine placed itself (a bound buffer, see
  // Binding): its place in the creation order is passed over.
  void Skip() { ++next_; }
  bool diverged() const { return diverged_ || next_ != plan_.placements.size(); }

 private:
  const MemoryTracker* tracker_;
  const CompiledPlan& plan_;
  char* arena_;
  std::function<char*(int)> data_of_;
  size_t next_ = 0;
  bool diverged_ = false;
};

// The slots of a running plan, over the binding's storage (kept from run to
// run: a fresh vector of thousands of tensors, allocated, constructed and
// freed by every run, was a tenth of sin_plain D=1024's time outside
// kernels). Bound slots keep their tensors; whatever a run leaves in the
// others, finished or thrown out of, is released when the run's Slots go.
class Slots {
 public:
  explicit Slots(PlannedEngine::Binding* binding) : b_(*binding) {}
  ~Slots() { Clear(); }
  Tensor& operator[](int slot) { return b_.slots[slot]; }
  // The tensor a reference names: the slot's own, or a view made in `view`.
  const Tensor& Get(const SlotRef& r, Tensor* view) {
    const Tensor& t = b_.slots[r.slot];
    if (r.whole) return t;
    *view = t.View(r.offset_bytes, r.shape);
    return *view;
  }
  void Clear() {
    if (cleared_) return;
    for (const int i : b_.dynamic_slots) {
      if (b_.slots[i].defined()) b_.slots[i] = Tensor();
    }
    cleared_ = true;
  }

 private:
  PlannedEngine::Binding& b_;
  bool cleared_ = false;
};

// A kernel instruction's call into `out`: its operands' shapes are the ones
// the compiler's call passed the kernels' checks with (Lookup matched the
// arguments' signature; every other operand is a buffer of the plan), so
// the call goes straight to the arithmetic (Kernels::RunInto).
void RunKernel(Kernels& k, const PlannedEngine::Binding::Step& step, Slots& slots, Tensor& out) {
  const Instruction& in = *step.in;
  const auto n = static_cast<size_t>(step.num_operands);
  if (step.resolved) {
    return k.RunInto(in.op, std::span<const Tensor* const>(step.operands, n), in.attrs, out);
  }
  // Views only where an operand needs one: three empty tensors made and
  // destroyed by every call were a twentieth of sin_plain D=8's run.
  const Tensor* operands[3];
  Tensor views[3];
  for (size_t i = 0; i < n; ++i) operands[i] = &slots.Get(in.operands[i], &views[i]);
  k.RunInto(in.op, std::span<const Tensor* const>(operands, n), in.attrs, out);
}

}  // namespace

PlannedEngine::PlannedEngine()
    : kernels_(std::make_unique<RecordingKernels>()), planner_(MakeRecomputePlanner()) {}

std::shared_ptr<const CompiledPlan> PlannedEngine::Lookup(
    const Program& program, const std::vector<Tensor>& args, const std::vector<int>& wrt,
    const std::function<void(const std::shared_ptr<MemoryTracker>&)>& on_tracker, double* seconds) {
  *seconds = 0;
  auto matches = [&](const Entry& e) {
    return SameNumbers(e.wrt, wrt) && HasSignature(args, e.args) && SameStructure(e.program, program);
  };
  // Repeated runs of one case, the common use, confirm the last plan used
  // in one pass over the program, without hashing it first (or building
  // anything).
  if (last_ != nullptr && matches(*last_)) return last_->plan;
  std::vector<ArgumentSignature> signature = Signature(args);
  const uint64_t key = CaseHash(program, signature, wrt);
  auto [begin, end] = cache_.equal_range(key);
  for (auto it = begin; it != end; ++it) {
    if (matches(it->second)) {
      last_ = &it->second;
      return last_->plan;
    }
  }
  const Clock::time_point start = Clock::now();
  auto shapes_only = std::make_shared<MemoryTracker>();
  shapes_only->set_dry_run(true);
  const std::vector<Tensor> dry_args = DryArguments(args, shapes_only);
  std::shared_ptr<const CompiledPlan> plan =
      Compile(kernels_.get(), planner_.get(), program, dry_args, wrt, on_tracker);
  if (cache_.size() >= kMaxCachedPlans) {
    cache_.clear();
    bindings_.clear();
    last_ = nullptr;
  }
  last_ = &cache_.emplace(key, Entry{program, std::move(signature), wrt, plan})->second;
  *seconds = SecondsSince(start);
  return plan;
}

const Program& PlannedEngine::Resolved(
    const Program& program, const std::vector<Tensor>& args, const std::vector<int>& wrt,
    const std::function<void(const std::shared_ptr<MemoryTracker>&)>& on_tracker,
    std::shared_ptr<const PeakBudgetResolution>* hold) {
  if (!HasPeakBudget(program)) return program;
  *hold = peak_budgets_.Resolve(program, wrt, DTypeSize(dtype()), [&](const Program& p) {
    ReverseMode executor(kernels_.get(), planner_.get());
    RunOptions dry;
    dry.plan_only = true;
    dry.on_tracker = on_tracker;
    return executor.Run(p, args, wrt, dry).stats;
  });
  return (*hold)->program;
}

std::shared_ptr<const CompiledPlan> PlannedEngine::PlanFor(const Program& given,
                                                           const std::vector<Tensor>& args,
                                                           const std::vector<int>& wrt) {
  ValidateArguments(given, args, wrt);
  std::shared_ptr<const PeakBudgetResolution> hold;
  const Program& program = Resolved(given, args, wrt, nullptr, &hold);
  double seconds = 0;
  return Lookup(program, args, wrt, nullptr, &seconds);
}

Result PlannedEngine::ValueAndGrad(const Program& given, const std::vector<Tensor>& args,
                                   const std::vector<int>& wrt, const RunOptions& options) {
  ValidateArguments(given, args, wrt);
  std::shared_ptr<const PeakBudgetResolution> hold;
  const Program& program = Resolved(given, args, wrt, options.on_tracker, &hold);
  if (options.plan_only || options.check_recompute_bits) {
    ReverseMode executor(kernels_.get(), planner_.get());
    return executor.Run(program, args, wrt, options);
  }
  double compile_seconds = 0;
  std::shared_ptr<const CompiledPlan> plan =
      Lookup(program, args, wrt, options.on_tracker, &compile_seconds);
  RequireArgumentData(program, args);
  Result result = Execute(*plan, program, args, options);
  result.stats.seconds_compile = compile_seconds;
  return result;
}

void PlannedEngine::PoisonArenaForTesting() {
  if (arena_ != nullptr) std::memset(arena_->data(), 0xff, static_cast<size_t>(arena_->bytes()));
}

// Bound buffers: those whose storage is the same place in the arena on
// every run, made by an instruction (kernel, zeros, uninit) and never
// returned. Their tensors are made once, over the arena (storage a binder
// tracker of its own counts, not the run's), so a run creates no Buffer for
// them: it counts their bytes in its tracker where the Buffer would have,
// and the kernel writes into the tensor (Kernels::RunInto). On the
// scalar chains, making and destroying a Buffer per op was a third of
// planned's time outside kernels. A binding lives as long as its plan is
// cached and the arena block is the same.
PlannedEngine::Binding& PlannedEngine::Bind(const CompiledPlan& plan) {
  auto found = bindings_.find(&plan);
  if (found != bindings_.end()) return found->second;
  if (bindings_.size() >= kMaxCachedPlans) bindings_.clear();
  Binding& b = bindings_[&plan];
  const size_t n = static_cast<size_t>(plan.num_buffers + plan.num_params);
  b.slots.resize(n);
  b.bound.assign(n, false);
  b.bytes.assign(n, 0);
  b.live.assign(n, kNotLive);
  std::vector<bool> returned(n, false);
  returned[plan.value.slot] = true;
  for (const SlotRef& g : plan.grads) returned[g.slot] = true;
  for (const auto& [name, r] : plan.state) returned[r.slot] = true;
  b.binder = std::make_shared<MemoryTracker>();
  char* arena = static_cast<char*>(arena_->data());
  class At : public BufferStorage {
   public:
    explicit At(const MemoryTracker* t) : t_(t) {}
    const MemoryTracker* tracker() const override { return t_; }
    void* Take(int64_t, Category) override { return at; }
    char* at = nullptr;

   private:
    const MemoryTracker* t_;
  } at(b.binder.get());
  const ScopedBufferStorage placed(&at);
  for (const Instruction& in : plan.instructions) {
    const bool makes = in.kind == Instruction::Kind::kKernel ||
                       in.kind == Instruction::Kind::kZeros ||
                       in.kind == Instruction::Kind::kUninit;
    if (!makes || in.out < 0 || in.out >= plan.num_buffers || returned[in.out] ||
        b.bound[in.out]) {
      continue;
    }
    const Placement& place = plan.placements[in.out];
    const int64_t bytes = in.out_shape.num_elements() * DTypeSize(kernels_->dtype());
    if (place.offset < 0 || place.alias_of >= 0 || place.bytes != bytes) continue;
    at.at = arena + place.offset;
    b.slots[in.out] = Tensor::Uninitialized(kernels_->dtype(), in.out_shape, b.binder);
    b.bound[in.out] = true;
    b.bytes[in.out] = bytes;
  }
  // The steps. A kernel's operands are found here once where they can be:
  // a whole slot's tensor (the slots do not move: sized above), or a view
  // of a bound buffer (made here). A free joins the step before it, unless
  // it opens the backward pass (its clock starts there).
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const Instruction& in = plan.instructions[i];
    if (i == plan.backward_start) b.backward_step = b.steps.size();
    if (in.kind == Instruction::Kind::kFree) {
      if (b.steps.empty() || i == plan.backward_start) {
        Binding::Step only_frees;
        only_frees.frees_begin = only_frees.frees_end = static_cast<int>(b.frees.size());
        b.steps.push_back(only_frees);
      }
      b.frees.push_back(in.out);
      b.steps.back().frees_end = static_cast<int>(b.frees.size());
      continue;
    }
    Binding::Step step;
    step.in = &in;
    step.bound = in.out >= 0 && b.bound[in.out];
    step.num_operands = static_cast<int>(in.operands.size());
    step.resolved = step.num_operands <= 3;
    for (int j = 0; step.resolved && j < step.num_operands; ++j) {
      const SlotRef& r = in.operands[j];
      if (r.whole) {
        step.operands[j] = &b.slots[r.slot];
      } else if (b.bound[r.slot]) {
        b.views.push_back(b.slots[r.slot].View(r.offset_bytes, r.shape));
        step.operands[j] = &b.views.back();
      } else {
        step.resolved = false;
      }
    }
    if (in.kind == Instruction::Kind::kKernel && step.num_operands > 3) {
      throw Error(StrCat("planned: a kernel call with ", step.num_operands,
                         " operands in a compiled plan (at most 3)"));
    }
    step.frees_begin = step.frees_end = static_cast<int>(b.frees.size());
    b.steps.push_back(step);
  }
  if (plan.backward_start >= plan.instructions.size()) b.backward_step = b.steps.size();
  // A result whose slot no other result refers to, whole, is moved out.
  std::vector<SlotRef> results = {plan.value};
  results.insert(results.end(), plan.grads.begin(), plan.grads.end());
  for (const auto& [name, r] : plan.state) results.push_back(r);
  for (const SlotRef& r : results) {
    int refs = 0;
    for (const SlotRef& o : results) refs += o.slot == r.slot;
    b.move_out.push_back(r.whole && refs == 1);
  }
  // What a run walks instead of every slot.
  for (size_t i = 0; i < n; ++i) (b.bound[i] ? b.bound_slots : b.dynamic_slots).push_back(i);
  b.arg_cast.assign(plan.num_params, false);
  for (int i = 0; i < plan.num_buffers; ++i) {
    if (plan.cast_of[i] < 0) continue;
    b.casts.emplace_back(i, plan.cast_of[i]);
    b.arg_cast[plan.cast_of[i]] = true;
  }
  return b;
}

Result PlannedEngine::Execute(const CompiledPlan& plan, const Program& program,
                              const std::vector<Tensor>& args, const RunOptions& options) {
  Kernels& k = *kernels_;
  const DType dtype = k.dtype();
  Result result;
  RunMemory memory(k, options, /*dry_run=*/false);
  MemoryTracker* tracker = memory.tracker().get();
  // Refused before anything is allocated, once the run's tracker exists
  // (the caller sees it, with nothing in it).
  const Stats& predicted = plan.stats;
  if (options.max_memory_bytes > 0 && predicted.peak_bytes > options.max_memory_bytes) {
    throw Error(StrCat("program ", program.name, ": the predicted peak of ", predicted.peak_bytes,
                       " bytes (at ", predicted.peak_site, ") exceeds the limit of ",
                       options.max_memory_bytes, " bytes (--max-memory); nothing was allocated"));
  }
  // The arena: one block, counted in the storage ledger once; the tracker
  // counts each buffer as it takes its place in it. The block itself is the
  // engine's, kept from run to run (grown when a plan needs more): a fresh
  // block of tens of MiB would be page-faulted in by every run, and those
  // faults, not the instructions, were most of the time outside kernels on
  // the matrix problems (scan_stack L=32: 32 stacked-gradient copies into
  // untouched pages took 5 of 110 ms). Nothing reads the arena before
  // writing it (kZeros and kZeroFill zero what must start at zero), so
  // reusing it changes no bit.
  if (arena_ == nullptr || arena_->bytes() < plan.arena_bytes) {
    bindings_.clear();  // their tensors are views of the old block
    arena_.reset();
    arena_ = std::make_unique<Buffer>(plan.arena_bytes, nullptr, Category::kActivations,
                                      /*zero=*/false);
  }
  tracker->AddStorage(plan.arena_bytes);
  Binding& binding = Bind(plan);
  // A run that throws may leave a bound buffer counted live: its binding is
  // dropped (made again by the next run), after the Slots over it go. The
  // tracker refers to the plan's sites (set_site_ref) until then.
  struct DropOnThrow {
    PlannedEngine* engine;
    const CompiledPlan* plan;
    MemoryTracker* tracker;
    bool finished = false;
    ~DropOnThrow() {
      if (finished) return;
      tracker->DetachSiteRefs();
      engine->bindings_.erase(plan);
    }
  } drop_on_throw{this, &plan, tracker};
  Slots slots(&binding);
  ArenaStorage storage(tracker, plan, static_cast<char*>(arena_->data()), [&slots](int buffer) {
    const Tensor& t = slots[buffer];
    return t.defined() ? static_cast<char*>(t.raw()) : nullptr;
  });
  const ScopedBufferStorage placed(&storage);

  {
    std::vector<Tensor> inputs = memory.Arguments(program, args);
    for (const auto& [buffer, arg] : binding.casts) slots[buffer] = inputs[arg];
    for (size_t i = 0; i < inputs.size(); ++i) {
      // Moved: no reference count touched (atomic: oneDNN's threads exist).
      if (!binding.arg_cast[i]) slots[plan.num_buffers + static_cast<int>(i)] = std::move(inputs[i]);
    }
  }

  k.reset_flops();
  k.reset_kernel_seconds();
  int site = -1;
  // The kernels' clock (a TSC read where there is one), not steady_clock's
  // vDSO call: three reads a run were a twentieth of sin_plain D=8's.
  const int64_t start = KernelClock::Ticks();
  int64_t backward = start;
  auto free = [&](int slot) {
    if (binding.bound[slot]) {
      tracker->Release(binding.bytes[slot], binding.live[slot]);
      binding.live[slot] = kNotLive;
    } else {
      slots[slot] = Tensor();
    }
  };
  // Operand j of a step: found at Bind, or its slot's tensor or a view of
  // it made in `view`.
  auto operand = [&slots](const Binding::Step& step, int j, Tensor* view) -> const Tensor& {
    return step.resolved ? *step.operands[j] : slots.Get(step.in->operands[j], view);
  };
  const size_t n = binding.steps.size();
  for (size_t i = 0; i < n; ++i) {
    const Binding::Step& step = binding.steps[i];
    if (i == binding.backward_step) backward = KernelClock::Ticks();
    if (step.in == nullptr) {
      for (int f = step.frees_begin; f < step.frees_end; ++f) free(binding.frees[f]);
      continue;
    }
    const Instruction& in = *step.in;
    if (in.site >= 0) {
      if (in.site != site) {
        site = in.site;
        tracker->set_site_ref(plan.sites[site]);
      }
      tracker->set_category(in.category);
    }
    // A bound buffer is counted here, where its Buffer would have counted
    // itself (before the kernel's scratchpad), and keeps its tensor.
    const bool bound = step.bound;
    if (bound) {
      tracker->Allocate(binding.bytes[in.out], in.category);
      binding.live[in.out] = in.category;
      storage.Skip();
    }
    switch (in.kind) {
      case Instruction::Kind::kKernel:
        // A bound buffer's tensor is there; any other output is allocated
        // here, where the kernel's entry point would have (before its
        // scratchpad), through the tracker and the arena's storage hook.
        if (!bound) slots[in.out] = Tensor::Uninitialized(dtype, in.out_shape, memory.tracker());
        RunKernel(k, step, slots, slots[in.out]);
        break;
      case Instruction::Kind::kZeros:
        if (bound) {
          std::memset(binding.slots[in.out].raw(), 0, static_cast<size_t>(binding.bytes[in.out]));
        } else {
          slots[in.out] = Tensor::Zeros(dtype, in.out_shape, memory.tracker(), in.category);
        }
        break;
      case Instruction::Kind::kUninit:
        if (!bound) slots[in.out] = Tensor::Uninitialized(dtype, in.out_shape, memory.tracker());
        break;
      case Instruction::Kind::kCopy: {
        Tensor view0;
        slots[in.out] = Copy(operand(step, 0, &view0), memory.tracker());
        break;
      }
      case Instruction::Kind::kCopyInto: {
        Tensor view0, view1;
        const Tensor& src = operand(step, 0, &view0);
        const Tensor& dst = operand(step, 1, &view1);
        std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(dst.bytes()));
        break;
      }
      case Instruction::Kind::kZeroFill: {
        Tensor view0;
        const Tensor& dst = operand(step, 0, &view0);
        std::memset(dst.raw(), 0, static_cast<size_t>(dst.bytes()));
        break;
      }
      case Instruction::Kind::kSetOne: {
        Tensor view0;
        operand(step, 0, &view0).f32()[0] = 1.0f;
        break;
      }
      case Instruction::Kind::kFree:
        free(in.out);  // not reached: frees are folded into steps (Bind)
        break;
    }
    for (int f = step.frees_begin; f < step.frees_end; ++f) free(binding.frees[f]);
  }
  // Bound buffers the plan never frees are released with the run's own.
  for (const int i : binding.bound_slots) {
    if (binding.live[i] == kNotLive) continue;
    tracker->Release(binding.bytes[i], binding.live[i]);
    binding.live[i] = kNotLive;
  }
  tracker->DetachSiteRefs();
  drop_on_throw.finished = true;
  const double seconds_in_kernels = k.kernel_seconds();
  const int64_t kernel_calls = k.kernel_calls();
  // The value and gradients: moved out of their slots where nothing else
  // refers to them (Binding::move_out), copied otherwise.
  auto take = [&](const SlotRef& r, bool move) {
    if (move) return std::move(slots[r.slot]);
    Tensor view;
    return Tensor(slots.Get(r, &view));
  };
  result.value = take(plan.value, binding.move_out[0]);
  result.grads.reserve(plan.grads.size());
  for (size_t i = 0; i < plan.grads.size(); ++i) {
    result.grads.push_back(take(plan.grads[i], binding.move_out[i + 1]));
  }
  for (size_t i = 0; i < plan.state.size(); ++i) {
    const auto& [name, r] = plan.state[i];
    result.state[name] = take(r, binding.move_out[1 + plan.grads.size() + i]);
  }
  slots.Clear();
  const int64_t end = KernelClock::Ticks();
  if (storage.diverged()) {
    throw Error(StrCat("planned: program ", program.name,
                       ": the run's allocations differ from its compiled plan"));
  }

  Stats& s = result.stats;
  s.predicted_peak_bytes = plan.stats.peak_bytes;
  s.predicted_peak_site = plan.stats.peak_site;
  s.residual_bytes = plan.stats.residual_bytes;
  s.residuals = plan.stats.residuals;
  s.flops_forward = plan.stats.flops_forward;
  s.flops_recomputed = plan.stats.flops_recomputed;
  s.flops_backward = plan.stats.flops_backward;
  s.op_runs = plan.stats.op_runs;
  s.seconds_forward = static_cast<double>(backward - start) * KernelClock::SecondsPerTick();
  s.seconds_backward = static_cast<double>(end - backward) * KernelClock::SecondsPerTick();
  s.seconds_in_kernels = seconds_in_kernels;
  s.kernel_calls = kernel_calls;
  // After the clock stopped: a map of names is no part of the run.
  s.kernel_times = k.kernel_times();
  s.arena_bytes = plan.arena_bytes;
  if (options.record_schedule) result.schedule = plan.schedule;
  memory.Finish(&result);
  return result;
}

REMAT_REGISTER_ENGINE(planned, "planned",
                      "recompute's plan compiled ahead of the run: a flat instruction list over "
                      "one statically assigned arena, plans cached by shape (oneDNN, f32)",
                      [] { return std::make_unique<PlannedEngine>(); });

}  // namespace remat
