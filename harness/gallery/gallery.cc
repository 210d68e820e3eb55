// The faulty engines and their registration (see gallery.h).
#include "harness/gallery/gallery.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "engines/api/engine.h"
#include "engines/api/registry.h"
#include "engines/autodiff/planners.h"
#include "engines/autodiff/reverse_mode_engine.h"
#include "engines/dtr/dtr_engine.h"
#include "engines/onednn/onednn_kernels.h"
#include "harness/gallery/decorator.h"
#include "harness/gallery/faulty_executor_rules.h"
#include "harness/gallery/faulty_kernels.h"

namespace remat {
namespace {

// A fault in one of the executor's rules (faulty_executor_rules.h), on
// eager's kernels.
template <typename Rules>
EngineFactory InRules(const std::string& name) {
  return [name] {
    return Recompute(name, std::make_unique<OneDnnKernels>(), std::make_unique<Rules>());
  };
}

// A fault in the kernels; `kernels` is the name they go by.
EngineFactory InKernels(const std::string& name, KernelFault fault, const std::string& kernels) {
  return [name, fault, kernels] {
    return Recompute(name, std::make_unique<FaultyKernels>(fault, kernels));
  };
}

// A fault in the planner: recompute's planner, but every checkpoint region
// is run inline while the engine says it honours them (schedules still
// are).
class InlineRegionsPlanner : public Planner {
 public:
  bool honours_checkpoints() const override { return true; }
  RegionPlan PlanRegion(const Op&) const override { return {}; }
  std::vector<SaveDecision> PlanSaves(const Op& region,
                                      const std::vector<bool>& param_needs) const override {
    return inner_->PlanSaves(region, param_needs);
  }
  LoopPlan PlanLoop(const Op& loop, const LoopModel& model) const override {
    return inner_->PlanLoop(loop, model);
  }

 private:
  std::unique_ptr<Planner> inner_ = MakeRecomputePlanner();
};

EngineFactory InPlanner(const std::string& name) {
  return [name] {
    return std::make_unique<ReverseModeEngine>(name, std::make_unique<OneDnnKernels>(),
                                               std::make_unique<InlineRegionsPlanner>());
  };
}

// Keeps the last run's loss in a static, for a progress line, and so keeps
// its buffer (and tracker) alive after the caller drops the Result.
class LeakingEngine : public Decorator {
 public:
  using Decorator::Decorator;
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    static auto* last_loss = new Tensor();
    Result r = inner().ValueAndGrad(program, args, wrt, options);
    if (!options.plan_only) *last_loss = r.value;
    return r;
  }
};

// Stages the arguments in copies of its own before running: Copy(a), not
// Copy(a, tracker), so that memory is in no tracker and in no peak. The
// accounting of the run itself is recompute's, to the byte.
class UntrackedStagingEngine : public Decorator {
 public:
  using Decorator::Decorator;
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    if (options.plan_only) return inner().ValueAndGrad(program, args, wrt, options);
    std::vector<Tensor> staged;
    for (const Tensor& a : args) staged.push_back(Copy(a));
    return inner().ValueAndGrad(program, staged, wrt, options);
  }
};

// Leaves the arguments out of its peak ("they are the caller's memory"),
// measured and predicted alike, so that the two still agree.
class UnderReportingEngine : public Decorator {
 public:
  using Decorator::Decorator;
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    Result r = inner().ValueAndGrad(program, args, wrt, options);
    const int inputs = static_cast<int>(Category::kInputs);
    const int64_t left_out = r.stats.peak_bytes_by_category[inputs];
    r.stats.peak_bytes -= left_out;
    if (r.stats.predicted_peak_bytes >= 0) r.stats.predicted_peak_bytes -= left_out;
    r.stats.peak_bytes_by_category[inputs] = 0;
    r.stats.high_water_bytes_by_category[inputs] = 0;
    return r;
  }
};

// Runs without a plan and then reports the measured peak as its predicted
// one: measured = predicted always holds, and nothing was predicted.
class InventedPredictionEngine : public Decorator {
 public:
  using Decorator::Decorator;
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    if (options.plan_only) return inner().ValueAndGrad(program, args, wrt, options);
    RunOptions unplanned = options;
    unplanned.predict_memory = false;
    Result r = inner().ValueAndGrad(program, args, wrt, unplanned);
    if (options.predict_memory) {
      r.stats.predicted_peak_bytes = r.stats.peak_bytes;
      r.stats.predicted_peak_site = r.stats.peak_site;
    }
    return r;
  }
};

// Returns the gradients in parameter order, not in the order of wrt (as an
// engine that collects them by walking the parameters would).
class ParameterOrderGradientsEngine : public Decorator {
 public:
  using Decorator::Decorator;
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    Result r = inner().ValueAndGrad(program, args, wrt, options);
    if (r.grads.size() != wrt.size()) return r;
    std::vector<size_t> order(wrt.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&wrt](size_t a, size_t b) { return wrt[a] < wrt[b]; });
    std::vector<Tensor> grads;
    for (size_t i : order) grads.push_back(r.grads[i]);
    r.grads = std::move(grads);
    return r;
  }
};

// Caches the program it plans by the program's name and its parameters'
// shapes (as a jit cache keyed on the function and not on its static
// arguments): a later call with another policy or schedule, same name and
// shapes, runs the first call's program. Bits stay eager's (a policy
// changes none); what is saved and recomputed is the wrong program's.
class NameKeyedPlanCacheEngine : public Decorator {
 public:
  using Decorator::Decorator;
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    std::string key = program.name;
    for (int i = 0; i < program.num_params(); ++i) key += " " + program.shapes[i].ToString();
    const Program& cached = cache_.emplace(key, program).first->second;
    return inner().ValueAndGrad(cached, args, wrt, options);
  }

 private:
  std::map<std::string, Program> cache_;
};

// dtr with a pool of its own: a run its memory cap stops keeps a block of
// the run's memory (here 4 KiB, counted by the run's last tracker) until the
// engine's next call frees it, as an allocator that returns blocks to its
// pool only when the next run starts. Runs that succeed are dtr's.
class CapPoolKeepingEngine : public Decorator {
 public:
  explicit CapPoolKeepingEngine(const std::string& name)
      : Decorator(name, std::make_unique<DtrEngine>()) {}
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    pool_ = Tensor();  // the previous stopped run's block, freed only now
    std::shared_ptr<MemoryTracker> last;
    RunOptions seen = options;
    seen.on_tracker = [&last, user = options.on_tracker](const std::shared_ptr<MemoryTracker>& t) {
      last = t;
      if (user) user(t);
    };
    try {
      return inner().ValueAndGrad(program, args, wrt, seen);
    } catch (const Error&) {
      if (options.memory_cap_bytes > 0 && last) {
        last->set_soft_cap_bytes(0);
        last->set_limit_bytes(0);
        pool_ = Tensor::Zeros(DType::kF32, Shape({1024}), last);
      }
      throw;
    }
  }

 private:
  Tensor pool_;
};

template <typename T>
EngineFactory Around(const std::string& name) {
  return [name] { return std::make_unique<T>(name); };
}

struct Entry {
  FaultyEngine info;
  EngineFactory factory;
};

const std::vector<Entry>& Entries() {
  static const auto* entries = new std::vector<Entry>{
      // The arithmetic.
      {{"faulty_sum_order",
        "a value's cotangent contributions summed first reader first (program order), not "
        "last reader first",
        {"differs from eager"}},
       InRules<SumInProgramOrderRules>("faulty_sum_order")},
      {{"faulty_overwritten_sum",
        "a running sum replaced by each new contribution: all but one contribution dropped",
        {"the float64 oracle"}},
       InRules<OverwriteRunningSumRules>("faulty_overwritten_sum")},
      {{"faulty_dropped_carry_cotangent",
        "the cotangent of a scan's initial carry dropped",
        {"the float64 oracle"}},
       InRules<DropInitialCarryCotangentRules>("faulty_dropped_carry_cotangent")},
      {{"faulty_zeros_for_unreached_region_input",
        "a checkpoint region's needed input that no cotangent reached gets a zeros "
        "contribution, not none",
        {"a checkpoint contributes nothing for a region input no cotangent reached"}},
       InRules<ZerosForUnreachedRegionInputRules>("faulty_zeros_for_unreached_region_input")},
      {{"faulty_all_zero_stacked_gradient_skipped",
        "a scan's all-zero stacked gradient (no step reached it) is not contributed",
        {"an all-zero stacked gradient is contributed"}},
       InRules<SkipAllZeroStackedGradientRules>("faulty_all_zero_stacked_gradient_skipped")},
      {{"faulty_scan_carry_needs",
        "the carry of scan step i > 0 needs a cotangent only if the previous step's output "
        "depends on a needed value",
        {"the scan carry's needs are eager's"}},
       InRules<CarryNeedsByDependenceRules>("faulty_scan_carry_needs")},
      {{"faulty_wrong_input_gradient",
        "gradients returned in parameter order, not in the order of wrt", {"gradients follow wrt"}},
       Around<ParameterOrderGradientsEngine>("faulty_wrong_input_gradient")},
      // Recomputation and the tape.
      {{"faulty_recompute_one_ulp",
        "recomputation on kernels that are not reproducible: a forward kernel call that repeats "
        "an earlier one of the run (the same kernel on the same bits) comes out one ulp up in "
        "its first element",
        {"differs from eager"}},
       InKernels("faulty_recompute_one_ulp", KernelFault::kRepeatedCallOneUlpOff, "onednn")},
      {{"faulty_freed_residual",
        "a residual freed at its last forward use while the tape reads it; its storage then "
        "holds the next value",
        {"freed before the backward pass read it", "differs from eager"}},
       InRules<ResidualFreedEarlyRules>("faulty_freed_residual")},
      {{"faulty_stale_saved_value",
        "a region's recomputation reads the values saved by its last instance (in a scan: the "
        "last step's)",
        {"differs from eager"}},
       InRules<StaleSavedValueRules>("faulty_stale_saved_value")},
      {{"faulty_ignored_checkpoints",
        "checkpoint regions run inline while honours_checkpoints() says true",
        {"claims to honour checkpoint regions"}},
       InPlanner("faulty_ignored_checkpoints")},
      {{"faulty_recompute_shape",
        "the residuals a recomputation records come back flattened (a shape unlike the forward "
        "pass's)",
        {"threw on a valid program"}},
       InRules<FlattenedRecomputedResidualRules>("faulty_recompute_shape")},
      // The kernels.
      {{"faulty_relu_grad_at_zero", "relu'(0) = 1 (on kernels of its own)",
        {"relu'(0) must be 0"}},
       InKernels("faulty_relu_grad_at_zero", KernelFault::kReluGradAtZeroIsOne,
                 "onednn-relu-grad-at-zero-1")},
      {{"faulty_nan_to_zero", "NaN cotangents turned into zeros (on kernels of its own)",
        {"spread as in eager"}},
       InKernels("faulty_nan_to_zero", KernelFault::kNanCotangentsToZero, "onednn-nan-to-zero")},
      {{"faulty_layernorm_epsilon", "LayerNorm with epsilon 1e-6, not 1e-5 (on kernels of its own)",
        {"epsilon is 1e-5"}},
       InKernels("faulty_layernorm_epsilon", KernelFault::kLayerNormEpsilon1e6,
                 "onednn-layernorm-eps-1e-6")},
      {{"faulty_float64_sum",
        "sum accumulated in float64 inside a kernel, while claiming eager's kernels",
        {"differs from eager"}},
       InKernels("faulty_float64_sum", KernelFault::kSumInFloat64, "onednn")},
      {{"faulty_broadcast_sum_in_float32",
        "a broadcast operand's cotangent (sum_to) one float32 running sum in flat order, while "
        "claiming eager's kernels (CONTRACT.md R2.2: a float64 running sum, rounded once)",
        {"differs from eager"}},
       InKernels("faulty_broadcast_sum_in_float32", KernelFault::kBroadcastSumInFloat32, "onednn")},
      {{"faulty_fresh_dropout_mask",
        "dropout draws fresh bits on every forward or recomputed run of it (a stateful "
        "generator), the backward pass reusing the latest mask",
        {"differs from eager"}},
       InKernels("faulty_fresh_dropout_mask", KernelFault::kFreshDropoutMaskOnRecompute,
                 "onednn")},
      {{"faulty_embedding_scatter_order",
        "embedding's backward adds a repeated id's rows last position first, not in "
        "increasing position (CONTRACT.md's scatter order)",
        {"differs from eager"}},
       InKernels("faulty_embedding_scatter_order", KernelFault::kEmbeddingRowsInReverseOrder,
                 "onednn")},
      {{"faulty_tie_last_index_on_recompute",
        "top_k_softmax breaks a tie by the higher index when a call repeats (a recomputation), "
        "by the lower in the forward pass (CONTRACT.md's tie rule)",
        {"differs from eager"}},
       InKernels("faulty_tie_last_index_on_recompute",
                 KernelFault::kTopKTiesToHigherIndexOnRecompute, "onednn")},
      {{"faulty_max_pool_tie_last_tap",
        "max_pool2d's backward gives a window's cotangent to the last of its equal largest taps, "
        "not the first (CONTRACT.md's tie rule)",
        {"differs from eager"}},
       InKernels("faulty_max_pool_tie_last_tap", KernelFault::kMaxPoolTiesToLastTap, "onednn")},
      {{"faulty_max_pool_last_nan",
        "max_pool2d's backward lets a later NaN replace an earlier one (PyTorch's CPU kernel): a "
        "window's cotangent goes to its last NaN, not its first (CONTRACT.md's tie rule)",
        {"want"}},
       InKernels("faulty_max_pool_last_nan", KernelFault::kMaxPoolLastNaN, "onednn")},
      {{"faulty_dropout_strict_threshold",
        "dropout keeps an element only when its bits are above the threshold, not at or above "
        "it (CONTRACT.md's randomness rule)",
        {"differs from eager"}},
       InKernels("faulty_dropout_strict_threshold", KernelFault::kDropoutStrictThreshold,
                 "onednn")},
      {{"faulty_batch_stats_as_running",
        "batch norm's running statistics replaced by the batch's (the mean and unbiased "
        "variance given as the new running ones, the momentum ignored)",
        {"differs from eager"}},
       InKernels("faulty_batch_stats_as_running", KernelFault::kRunningStatIsBatchStat,
                 "onednn")},
      {{"faulty_running_stats_updated_on_recompute",
        "state kept in place, as nn.BatchNorm2d keeps its running statistics, and a region's "
        "recomputation runs its state ops again: a recomputed block's running statistics are "
        "updated twice",
        {"differs from eager", "wrote to its argument"}},
       InRules<StateUpdatedOnRecomputeRules>("faulty_running_stats_updated_on_recompute")},
      {{"faulty_plan_cache_keyed_on_name",
        "the program cached by its name and parameter shapes: a later call with another policy "
        "runs the first call's program",
        {"a sequence on one instance"}},
       Around<NameKeyedPlanCacheEngine>("faulty_plan_cache_keyed_on_name")},
      // The accounting.
      {{"faulty_leaked_buffer", "the last loss kept in a static: its buffer outlives the Result",
        {"bytes still live"}},
       Around<LeakingEngine>("faulty_leaked_buffer")},
      {{"faulty_untracked_buffer",
        "the arguments staged in copies allocated outside any tracker",
        {"outside the trackers it reported"}},
       Around<UntrackedStagingEngine>("faulty_untracked_buffer")},
      {{"faulty_underreported_peak",
        "the arguments left out of the peak, measured and predicted alike",
        {"not the tracker's high-water mark"}},
       Around<UnderReportingEngine>("faulty_underreported_peak")},
      {{"faulty_capped_run_keeps_pool",
        "dtr, whose run stopped by its memory cap keeps 4 KiB of that run's memory live in a "
        "pool of its own until its next call",
        {"still live after the run threw"}},
       Around<CapPoolKeepingEngine>("faulty_capped_run_keeps_pool")},
      {{"faulty_invented_prediction",
        "no plan: the measured peak reported as the predicted one",
        {"the prediction is not a plan"}},
       Around<InventedPredictionEngine>("faulty_invented_prediction")},
  };
  return *entries;
}

[[maybe_unused]] const bool registered = [] {
  for (const Entry& e : Entries()) RegisterEngine(e.info.engine, e.info.fault, e.factory);
  return true;
}();

}  // namespace

const std::vector<FaultyEngine>& Gallery() {
  static const auto* gallery = [] {
    auto* out = new std::vector<FaultyEngine>;
    for (const Entry& e : Entries()) out->push_back(e.info);
    return out;
  }();
  return *gallery;
}

}  // namespace remat
