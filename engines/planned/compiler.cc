#include "engines/planned/compiler.h"

#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "engines/api/buffer_hooks.h"
#include "engines/api/error.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/planned/arena_packing.h"

namespace remat {
namespace {

// Records the dry run: buffers by creation order, instructions as they come.
class Recorder : public BufferRecorder, public KernelObserver {
 public:
  Recorder(const std::vector<Tensor>& dry_args, DType dtype) : dtype_(dtype) {
    for (size_t i = 0; i < dry_args.size(); ++i) {
      arg_of_.emplace(dry_args[i].buffer(), static_cast<int>(i));  // the first sharer
      arg_shapes_.push_back(dry_args[i].shape());
    }
  }

  void set_tracker(const MemoryTracker* tracker) { tracker_ = tracker; }
  const MemoryTracker* tracker() const override { return tracker_; }

  void OnCreate(const Buffer* buffer, int64_t bytes, Category category, bool zero) override {
    const int id = static_cast<int>(buffers_.size());
    live_[buffer] = id;
    BufferInfo info;
    info.bytes = bytes;
    info.category = category;
    info.zero = zero;
    info.internal = depth_ > 0;
    info.site = Site(tracker_->site());
    info.created = static_cast<int64_t>(events_.size());
    info.base_shape = Shape({bytes / DTypeSize(dtype_)});
    buffers_.push_back(info);
    events_.push_back({Event::kCreate, id, {}});
  }

  void OnDestroy(const Buffer* buffer) override {
    auto it = live_.find(buffer);
    if (it == live_.end()) return;
    buffers_[it->second].destroyed = static_cast<int64_t>(events_.size());
    events_.push_back({Event::kDestroy, it->second, {}});
    live_.erase(it);
  }

  void OnKernelBegin(const KernelCall& call) override {
    if (depth_++ > 0) return;  // a kernel inside a kernel is its own
    Instruction in;
    in.kind = Instruction::Kind::kKernel;
    in.op = call.op;
    for (const Tensor* t : call.operands) in.operands.push_back(Ref(*t));
    in.out = Claim(*call.out);
    in.out_shape = call.out->shape();
    in.attrs = call.attrs;
    Push(std::move(in));
  }
  void OnKernelEnd() override { --depth_; }

  void OnCopy(const Tensor& src, const Tensor& out) override {
    if (depth_ > 0) return;
    Instruction in;
    in.kind = Instruction::Kind::kCopy;
    in.operands.push_back(Ref(src));
    in.out = Claim(out);
    in.out_shape = out.shape();
    Push(std::move(in));
  }

  void OnCast(const Tensor& src, const Tensor& out) override {
    auto arg = arg_of_.find(src.buffer());
    if (depth_ > 0 || arg == arg_of_.end() || src.offset_bytes() != 0) {
      throw Error(
          "planned: a cast of something other than an argument (the compiler knows "
          "only RunMemory::Arguments' casts)");
    }
    const int id = Claim(out);
    buffers_[id].cast_of = arg->second;
  }

  void OnCopyInto(const Tensor& src, const Tensor& dst) override {
    if (depth_ > 0 || live_.count(dst.buffer()) == 0) return;
    Instruction in;
    in.kind = Instruction::Kind::kCopyInto;
    in.operands = {Ref(src), Ref(dst)};
    Push(std::move(in));
  }

  void OnZeroFill(const Tensor& dst) override {
    if (depth_ > 0 || live_.count(dst.buffer()) == 0) return;
    Instruction in;
    in.kind = Instruction::Kind::kZeroFill;
    in.operands = {Ref(dst)};
    Push(std::move(in));
  }

  void OnSetOne(const Tensor& dst) override {
    Instruction in;
    in.kind = Instruction::Kind::kSetOne;
    in.operands = {Ref(dst)};
    seed_ = in.operands[0].slot;
    Push(std::move(in));
  }

  // The plan, once the dry run has returned `result` (still holding its
  // value and gradients).
  std::shared_ptr<CompiledPlan> Finish(const Result& result, int num_params) {
    auto plan = std::make_shared<CompiledPlan>();
    const int n = static_cast<int>(buffers_.size());
    plan->num_params = num_params;
    plan->num_buffers = n;
    plan->sites = sites_;
    plan->value = Ref(result.value);
    for (const Tensor& g : result.grads) plan->grads.push_back(Ref(g));
    for (const auto& [name, t] : result.state) plan->state.emplace_back(name, Ref(t));
    std::vector<bool> escapes(n, false);
    auto mark = [&](const SlotRef& r) {
      if (r.slot >= 0) escapes[r.slot] = true;
    };
    mark(plan->value);
    for (const SlotRef& g : plan->grads) mark(g);
    for (const auto& [name, r] : plan->state) mark(r);

    // Instructions in event order: a buffer nothing claimed is a fill of its
    // own (zeros, or storage written later); a release is a free.
    for (const Event& e : events_) {
      const BufferInfo* b = e.id >= 0 ? &buffers_[e.id] : nullptr;
      switch (e.type) {
        case Event::kCreate: {
          if (b->internal || b->claimed) break;
          Instruction in;
          in.kind = b->zero ? Instruction::Kind::kZeros : Instruction::Kind::kUninit;
          in.out = e.id;
          in.out_shape = b->base_shape;
          if (e.id == seed_) plan->backward_start = plan->instructions.size();
          Attribute(&in, *b);
          plan->instructions.push_back(std::move(in));
          break;
        }
        case Event::kDestroy:
          if (b->internal) break;
          {
            Instruction in;
            in.kind = Instruction::Kind::kFree;
            in.out = e.id;
            plan->instructions.push_back(std::move(in));
          }
          break;
        case Event::kInstruction: {
          Instruction in = e.instruction;
          if (in.out >= 0) Attribute(&in, buffers_[in.out]);
          plan->instructions.push_back(std::move(in));
          break;
        }
      }
    }

    // Slots: argument references, and which references are a whole slot.
    plan->cast_of.assign(n, -1);
    for (int i = 0; i < n; ++i) plan->cast_of[i] = buffers_[i].cast_of;
    auto fix = [&](SlotRef* r) {
      if (r->slot < 0) r->slot = n + (-r->slot - 1);
      const Shape& base = r->slot < n ? buffers_[r->slot].base_shape : arg_shapes_[r->slot - n];
      r->whole = r->offset_bytes == 0 && r->shape == base;
    };
    for (Instruction& in : plan->instructions) {
      for (SlotRef& r : in.operands) fix(&r);
    }
    fix(&plan->value);
    for (SlotRef& g : plan->grads) fix(&g);
    for (auto& [name, r] : plan->state) fix(&r);

    // Placement: every device buffer that dies in the run goes in the arena;
    // the returned results and the host tier are allocated apart.
    std::vector<LiveRange> ranges;
    std::vector<int> ranged;
    plan->placements.resize(n);
    for (int i = 0; i < n; ++i) {
      const BufferInfo& b = buffers_[i];
      plan->placements[i].bytes = b.bytes;
      if (escapes[i] || b.category == Category::kHost) continue;
      if (b.destroyed < 0) {
        throw Error(StrCat("planned: buffer ", i, " (", b.bytes,
                           " bytes) outlives the dry run without being a result"));
      }
      ranges.push_back({b.created, b.destroyed, b.bytes});
      ranged.push_back(i);
    }
    const Packing packing = PackArena(ranges, kArenaAlignment);
    for (size_t k = 0; k < ranged.size(); ++k) {
      plan->placements[ranged[k]].offset = packing.offsets[k];
    }
    plan->arena_bytes = packing.arena_bytes;
    plan->arena_live_bytes = MaxLiveBytes(ranges, kArenaAlignment);
    ElideStackCopies(plan.get(), escapes);
    return plan;
  }

 private:
  struct BufferInfo {
    int64_t bytes = 0;
    Category category = Category::kActivations;
    bool zero = false;
    bool internal = false;  // created inside a kernel (its scratchpad)
    bool claimed = false;   // created by an instruction (kernel output, copy, cast)
    int cast_of = -1;
    int site = -1;
    int64_t created = -1, destroyed = -1;  // event positions
    Shape base_shape;
  };
  struct Event {
    enum Type { kCreate, kDestroy, kInstruction } type;
    int id = -1;
    Instruction instruction;
  };

  // In-place stacking (XLA's in-place dynamic-update-slice): a kernel
  // output S whose copy into a slice of a stack T (a scan's stacked
  // gradient, StackedGradient::Set) is what the step does with it gets the
  // slice as its storage, and the copy goes. On scan_stack L=32 (d=512) the
  // 32 copies of 1 MiB were 2.3 of the run's 87 ms, nearly all of planned's
  // time outside kernels. Safe when, besides S's kernel writing all of it:
  // T exists before S's kernel runs and outlives S; nothing touches T's
  // slice between S's kernel and the copy, nor writes it while S lives
  // after; S is not a result, a cast or on the host; T is an arena buffer
  // or a result (not an argument, not on the host); the slice is aligned
  // as the arena's buffers are.
  void ElideStackCopies(CompiledPlan* plan, const std::vector<bool>& escapes) const {
    using Kind = Instruction::Kind;
    const int n = plan->num_buffers;
    std::vector<Instruction>& ins = plan->instructions;
    std::vector<int64_t> made(n, -1), kernel_of(n, -1), freed(n, -1);
    for (size_t i = 0; i < ins.size(); ++i) {
      const Instruction& in = ins[i];
      if (in.out < 0 || in.out >= n) continue;
      if (in.kind == Kind::kFree) {
        freed[in.out] = static_cast<int64_t>(i);
      } else if (made[in.out] < 0) {
        made[in.out] = static_cast<int64_t>(i);
        if (in.kind == Kind::kKernel) kernel_of[in.out] = static_cast<int64_t>(i);
      }
    }
    const int64_t element = DTypeSize(dtype_);
    auto overlaps = [element](const SlotRef& a, const SlotRef& b) {
      if (a.slot != b.slot) return false;
      const int64_t a_end = a.offset_bytes + a.shape.num_elements() * element;
      const int64_t b_end = b.offset_bytes + b.shape.num_elements() * element;
      return a.offset_bytes < b_end && b.offset_bytes < a_end;
    };
    std::vector<bool> drop(ins.size(), false);
    for (size_t j = 0; j < ins.size(); ++j) {
      const Instruction& copy = ins[j];
      if (copy.kind != Kind::kCopyInto) continue;
      const SlotRef& src = copy.operands[0];
      const SlotRef& dst = copy.operands[1];
      const int s = src.slot, t = dst.slot;
      if (!src.whole || s >= n || t >= n || s == t) continue;
      const BufferInfo& bs = buffers_[s];
      const BufferInfo& bt = buffers_[t];
      if (escapes[s] || bs.category == Category::kHost || bs.cast_of >= 0) continue;
      if (bt.category == Category::kHost || bt.cast_of >= 0) continue;
      if (plan->placements[s].alias_of >= 0 || plan->placements[t].alias_of >= 0) continue;
      if (plan->placements[s].offset < 0 || (plan->placements[t].offset < 0 && !escapes[t])) {
        continue;
      }
      if (dst.offset_bytes % kArenaAlignment != 0 || src.shape != dst.shape) continue;
      const int64_t p = kernel_of[s];
      if (p < 0 || made[t] < 0 || made[t] >= p || freed[s] < 0) continue;
      if (!escapes[t] && (freed[t] < 0 || freed[t] < freed[s])) continue;
      bool ok = true;
      for (int64_t k = p + 1; ok && k < freed[s]; ++k) {
        if (k == static_cast<int64_t>(j) || drop[k]) continue;
        const Instruction& x = ins[k];
        if (x.out == s && x.kind != Kind::kFree) ok = false;  // S written again
        for (size_t o = 0; ok && o < x.operands.size(); ++o) {
          if (!overlaps(x.operands[o], dst)) continue;
          // Before the copy nothing may touch the slice; after it, reading
          // is fine (it holds S), writing is not.
          const bool writes = (x.kind == Kind::kCopyInto && o == 1) ||
                              x.kind == Kind::kZeroFill || x.kind == Kind::kSetOne;
          if (k < static_cast<int64_t>(j) || writes) ok = false;
        }
      }
      if (!ok) continue;
      plan->placements[s].alias_of = t;
      plan->placements[s].alias_offset_bytes = dst.offset_bytes;
      drop[j] = true;
      ++plan->elided_copies;
      plan->elided_copy_bytes += bs.bytes;
    }
    std::vector<Instruction> kept;
    kept.reserve(ins.size());
    size_t backward_start = plan->backward_start;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (drop[i]) {
        if (i < plan->backward_start) --backward_start;
        continue;
      }
      kept.push_back(std::move(ins[i]));
    }
    ins = std::move(kept);
    plan->backward_start = backward_start;
  }

  int Site(const std::string& site) {
    auto it = site_ids_.find(site);
    if (it != site_ids_.end()) return it->second;
    sites_.push_back(site);
    site_ids_.emplace(site, static_cast<int>(sites_.size()) - 1);
    return static_cast<int>(sites_.size()) - 1;
  }

  // A reference to `t`: a buffer of the run, or an argument (slot -1 - i
  // until Finish numbers the arguments' slots).
  SlotRef Ref(const Tensor& t) const {
    SlotRef r;
    auto it = live_.find(t.buffer());
    if (it != live_.end()) {
      r.slot = it->second;
    } else {
      auto arg = arg_of_.find(t.buffer());
      if (arg == arg_of_.end()) {
        throw Error("planned: the executor read a tensor the compiler did not see created");
      }
      r.slot = -1 - arg->second;
    }
    r.offset_bytes = t.offset_bytes();
    r.shape = t.shape();
    return r;
  }

  int Claim(const Tensor& out) {
    auto it = live_.find(out.buffer());
    if (it == live_.end()) throw Error("planned: an output the compiler did not see created");
    BufferInfo& b = buffers_[it->second];
    b.claimed = true;
    b.base_shape = out.shape();
    return it->second;
  }

  static void Attribute(Instruction* in, const BufferInfo& b) {
    in->site = b.site;
    in->category = b.category;
  }

  void Push(Instruction in) { events_.push_back({Event::kInstruction, -1, std::move(in)}); }

  DType dtype_;
  const MemoryTracker* tracker_ = nullptr;
  int depth_ = 0;
  int seed_ = -1;
  std::unordered_map<const Buffer*, int> live_;
  std::unordered_map<const Buffer*, int> arg_of_;
  std::vector<Shape> arg_shapes_;
  std::vector<BufferInfo> buffers_;
  std::vector<Event> events_;
  std::vector<std::string> sites_;
  std::map<std::string, int> site_ids_;
};

// Unhooks the kernels' observer however the dry run ends.
class ScopedObserver {
 public:
  ScopedObserver(RecordingKernels* kernels, KernelObserver* observer) : kernels_(kernels) {
    kernels_->set_observer(observer);
  }
  ~ScopedObserver() { kernels_->set_observer(nullptr); }
  ScopedObserver(const ScopedObserver&) = delete;
  ScopedObserver& operator=(const ScopedObserver&) = delete;

 private:
  RecordingKernels* kernels_;
};

}  // namespace

std::shared_ptr<const CompiledPlan> Compile(
    RecordingKernels* kernels, const Planner* planner, const Program& program,
    const std::vector<Tensor>& dry_args, const std::vector<int>& wrt,
    const std::function<void(const std::shared_ptr<MemoryTracker>&)>& on_tracker) {
  Recorder recorder(dry_args, kernels->dtype());
  RunOptions options;
  options.plan_only = true;
  options.record_schedule = true;
  options.on_tracker = [&](const std::shared_ptr<MemoryTracker>& tracker) {
    recorder.set_tracker(tracker.get());
    if (on_tracker) on_tracker(tracker);
  };
  std::shared_ptr<CompiledPlan> plan;
  {
    ScopedObserver observed(kernels, &recorder);
    ScopedBufferRecorder recording(&recorder);
    ReverseMode executor(kernels, planner);
    Result dry = executor.Run(program, dry_args, wrt, options);
    plan = recorder.Finish(dry, program.num_params());
    plan->stats = dry.stats;
    plan->schedule = std::move(dry.schedule);
    // The dry result's tensors go with the recording still on: their
    // releases concern no instruction (they come after the last).
  }
  return plan;
}

}  // namespace remat
