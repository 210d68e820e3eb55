#include "engines/exec/run_memory.h"

#include <algorithm>
#include <map>
#include <utility>

#include "engines/api/error.h"

namespace remat {

RunMemory::RunMemory(Kernels& kernels, const RunOptions& options, bool dry_run)
    : kernels_(kernels), tracker_(std::make_shared<MemoryTracker>()) {
  tracker_->set_dry_run(dry_run);
  tracker_->set_limit_bytes(options.max_memory_bytes);
  // Before the first allocation: a run that throws at any point leaves a
  // tracker the caller can check.
  if (options.on_tracker) options.on_tracker(tracker_);
  kernels_.Bind(tracker_);
  kernels_.set_timing(options.time_kernels);
}

RunMemory::~RunMemory() {
  ReleaseArguments();
  // The hook may refer to the engine's state, which may be gone once the
  // Result outlives this run.
  tracker_->set_pressure_hook(nullptr);
  tracker_->set_soft_cap_bytes(0);
  kernels_.Bind(nullptr);
}

void RunMemory::SetMemoryCap(int64_t cap_bytes, MemoryTracker::PressureHook hook) {
  tracker_->set_soft_cap_bytes(cap_bytes);
  tracker_->set_pressure_hook(cap_bytes > 0 ? std::move(hook) : nullptr);
}

std::vector<Tensor> RunMemory::Arguments(const Program& program, const std::vector<Tensor>& args) {
  if (args.size() != static_cast<size_t>(program.num_params())) {
    throw Error(StrCat("program ", program.name, " takes ", program.num_params(),
                       " arguments, got ", args.size()));
  }
  const DType dtype = kernels_.dtype();
  std::vector<Tensor> inputs;
  inputs.reserve(args.size());
  arguments_.reserve(args.size());
  for (int i = 0; i < program.num_params(); ++i) {
    const ScopedSite site(tracker_.get(), Category::kInputs,
                          StrCat("argument ", program.param_names[i]));
    // Integer arguments (ids, seeds) stay integers whatever the kernels'
    // float dtype: kernels read them as such.
    if (args[i].dtype() != dtype && args[i].dtype() != DType::kI32) {
      inputs.push_back(Cast(args[i], dtype, tracker_));
    } else {
      inputs.push_back(args[i]);
      // The caller's storage: counted, not owned; a shared buffer once.
      if (std::find(in_place_.begin(), in_place_.end(), args[i].buffer()) == in_place_.end()) {
        tracker_->Allocate(args[i].bytes(), Category::kInputs);
        counted_bytes_ += args[i].bytes();
        in_place_.push_back(args[i].buffer());
      }
    }
    if (!IsArgument(inputs.back().buffer())) arguments_.push_back(inputs.back().buffer());
  }
  return inputs;
}

void RunMemory::ReleaseArguments() {
  if (counted_bytes_ == 0) return;
  tracker_->Release(counted_bytes_, Category::kInputs);
  counted_bytes_ = 0;
}

void RunMemory::FillStats(Stats* stats) const {
  stats->peak_bytes = tracker_->peak_bytes();
  for (int c = 0; c < kNumCategories; ++c) {
    stats->peak_bytes_by_category[c] = tracker_->peak_bytes(static_cast<Category>(c));
    stats->high_water_bytes_by_category[c] = tracker_->high_water_bytes(static_cast<Category>(c));
  }
  stats->peak_site = tracker_->peak_site();
  stats->host_peak_bytes = tracker_->peak_host_bytes();
}

void RunMemory::Finish(Result* result) {
  FillStats(&result->stats);
  ReleaseArguments();
  result->tracker = tracker_;
  // The books: what is still live is the Result, each buffer once; an
  // argument returned as the value (an identity program) is the caller's.
  // A handful of tensors: each is compared with those before it (no set,
  // no vector allocated per run).
  int64_t held_bytes = 0;
  // Only the caller's buffers are skipped: a cast's copy may be gone by
  // now, and its address reused by a tensor the Result holds (a float64
  // argument's f32 copy freed, then a gradient allocated at the same place).
  auto hold = [&](const Tensor& t, size_t index) {
    if (!t.defined() ||
        std::find(in_place_.begin(), in_place_.end(), t.buffer()) != in_place_.end()) {
      return;
    }
    if (index > 0 && result->value.buffer() == t.buffer()) return;
    for (size_t j = 0; j + 1 < index; ++j) {
      if (result->grads[j].buffer() == t.buffer()) return;
    }
    held_bytes += t.buffer()->bytes();
  };
  hold(result->value, 0);
  for (size_t i = 0; i < result->grads.size(); ++i) hold(result->grads[i], i + 1);
  // The new state (rarely more than a few tensors): each buffer once, and
  // not if the value or a gradient holds it.
  std::vector<const Buffer*> state_buffers;
  for (const auto& [name, t] : result->state) {
    if (!t.defined() || t.buffer() == result->value.buffer() ||
        std::find(state_buffers.begin(), state_buffers.end(), t.buffer()) != state_buffers.end()) {
      continue;
    }
    bool in_grads = false;
    for (const Tensor& g : result->grads) in_grads = in_grads || g.buffer() == t.buffer();
    if (in_grads) continue;
    state_buffers.push_back(t.buffer());
    hold(t, 0);
  }
  const int64_t live = tracker_->live_bytes();
  if (live != held_bytes) {
    throw Error(StrCat("the run ended with ", live, " bytes live in its tracker where its Result "
                       "holds ", held_bytes, " (", live > held_bytes ? "a leak" : "a release counted twice",
                       ": CONTRACT.md section 4)"));
  }
}

std::vector<Tensor> DryArguments(const std::vector<Tensor>& args,
                                 const std::shared_ptr<MemoryTracker>& tracker) {
  std::map<std::pair<const Buffer*, std::string>, Tensor> made;
  std::vector<Tensor> out;
  for (const Tensor& a : args) {
    if (!a.defined()) {
      out.push_back(a);
      continue;
    }
    auto [it, added] = made.emplace(std::make_pair(a.buffer(), a.TypeString()), Tensor());
    if (added) it->second = Tensor::Zeros(a.dtype(), a.shape(), tracker);
    out.push_back(it->second);
  }
  return out;
}

void RequireArgumentData(const Program& program, const std::vector<Tensor>& args) {
  for (int i = 0; i < program.num_params() && i < static_cast<int>(args.size()); ++i) {
    if (args[i].dry()) {
      throw Error(StrCat("program ", program.name, ": argument ", program.param_names[i],
                         " has shape but no data (a dry-run tensor); only a plan "
                         "(RunOptions::plan_only) can take it"));
    }
  }
}

}  // namespace remat
