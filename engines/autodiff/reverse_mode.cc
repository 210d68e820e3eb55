// ReverseMode's run: the planning run and the run under its plan, the
// forward and backward passes' frame (Stats, the gradients), the schedule log
// and the residual listing. The passes themselves are in
// reverse_mode_forward.cc and reverse_mode_backward.cc, loops in
// reverse_mode_scan.cc, reverse_mode_chain.cc and reverse_mode_scheduled.cc.
#include "engines/autodiff/reverse_mode.h"

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "engines/api/buffer_hooks.h"
#include "engines/api/error.h"
#include "engines/api/rules.h"
#include "engines/autodiff/plan.h"
#include "engines/exec/residual_listing.h"
#include "engines/exec/run_memory.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Result ReverseMode::PlanRun(const Program& program, const std::vector<Tensor>& args,
                            const std::vector<int>& wrt, const RunOptions& options, Plan* plan) {
  ValidateArguments(program, args, wrt);
  const PlanRecorder recorder(planner_, plan);
  active_planner_ = &recorder;
  Result planning;
  try {
    if (options.plan_only) {
      // Only the plan is wanted: the arguments as given (shapes only, maybe:
      // engines/planned compiles a run from the buffers it passes).
      planning = Execute(program, args, wrt, options, /*dry_run=*/true);
    } else {
      // The planning run sees the arguments' shapes and dtypes, not their
      // bytes.
      auto shapes_only = std::make_shared<MemoryTracker>();
      shapes_only->set_dry_run(true);
      RunOptions dry_options = options;
      dry_options.max_memory_bytes = 0;
      dry_options.record_schedule = false;
      planning = Execute(program, DryArguments(args, shapes_only), wrt, dry_options,
                         /*dry_run=*/true);
    }
  } catch (...) {
    active_planner_ = nullptr;
    throw;
  }
  active_planner_ = nullptr;
  plan->predicted_peak_bytes = planning.stats.peak_bytes;
  plan->predicted_peak_site = planning.stats.peak_site;
  planning.stats.predicted_peak_bytes = planning.stats.peak_bytes;
  planning.stats.predicted_peak_site = planning.stats.peak_site;
  if (options.record_plan) planning.plan = plan->Lines();
  return planning;
}

Result ReverseMode::Run(const Program& program, const std::vector<Tensor>& args,
                        const std::vector<int>& wrt, const RunOptions& options,
                        const Plan* plan) {
  Plan own;
  if (plan == nullptr || options.plan_only) {
    Result planning = PlanRun(program, args, wrt, options, &own);
    if (options.plan_only) return planning;
    plan = &own;
  }
  ValidateArguments(program, args, wrt);
  if (options.predict_memory && options.max_memory_bytes > 0 &&
      plan->predicted_peak_bytes > options.max_memory_bytes) {
    throw Error(StrCat("program ", program.name, ": the predicted peak of ",
                       plan->predicted_peak_bytes, " bytes (at ", plan->predicted_peak_site,
                       ") exceeds the limit of ", options.max_memory_bytes,
                       " bytes (--max-memory); nothing was allocated"));
  }
  RequireArgumentData(program, args);
  const PlanReader reader(plan, planner_->honours_checkpoints());
  active_planner_ = &reader;
  Result result;
  try {
    result = Execute(program, args, wrt, options, /*dry_run=*/false);
  } catch (...) {
    active_planner_ = nullptr;
    throw;
  }
  active_planner_ = nullptr;
  reader.CheckAllRead();
  if (options.predict_memory) {
    result.stats.predicted_peak_bytes = plan->predicted_peak_bytes;
    result.stats.predicted_peak_site = plan->predicted_peak_site;
  }
  if (options.record_plan) result.plan = plan->Lines();
  return result;
}

Result ReverseMode::Execute(const Program& program, const std::vector<Tensor>& args,
                            const std::vector<int>& wrt, const RunOptions& options,
                            bool dry_run) {
  run_options_ = options;
  RunMemory memory(*kernels_, options, dry_run);
  tracker_ = memory.tracker();
  recomputed_flops_ = 0;
  output_bytes_ = program.shapes[program.output].num_elements() * DTypeSize(kernels_->dtype());
  op_runs_.clear();
  Result result;
  schedule_ = options.record_schedule ? &result.schedule : nullptr;
  rules_->BeginRun(tracker_);

  // Arguments already in the engine's dtype are used in place and counted as
  // live inputs; others are converted into tracked copies.
  std::vector<Tensor> inputs = memory.Arguments(program, args);
  for (int i = 0; i < program.num_params(); ++i) {
    origin_[inputs[i].buffer()] = StrCat("from the argument ", program.param_names[i]);
    arguments_.emplace(inputs[i].buffer(), inputs[i]);
  }

  std::vector<bool> needs(program.num_params(), false);
  for (int w : wrt) needs[w] = true;
  for (const StateSlot& s : CheckStateOps(program)) state_params_.emplace(s.name, inputs[s.param]);

  // Forward.
  Tape tape;
  kernels_->reset_flops();
  kernels_->reset_kernel_seconds();
  Clock::time_point start = Clock::now();
  {
    ScopedSite site(tracker_.get(), Category::kActivations, "forward");
    result.value = Forward(program, inputs, needs, &tape, "", nullptr, nullptr);
  }
  result.stats.seconds_forward = SecondsSince(start);
  result.stats.flops_forward = kernels_->flops();
  ListResiduals(tape, &result.stats);

  // Backward, from d(value)/d(value) = 1.
  kernels_->reset_flops();
  start = Clock::now();
  std::vector<Tensor> cotangents;
  {
    ScopedSite site(tracker_.get(), Category::kGradients, "backward");
    Tensor one = Tensor::Zeros(kernels_->dtype(), Shape(), tracker_);
    if (one.dry()) {
      // The seed is written outside any kernel: a recorder (engines/planned,
      // buffer_hooks.h) must see the write to replay it.
      if (BufferRecorder* r = ActiveRecorder(tracker_.get())) r->OnSetOne(one);
    } else if (one.dtype() == DType::kF32) {
      one.f32()[0] = 1.0f;
    } else {
      one.f64()[0] = 1.0;
    }
    cotangents = Backward(program, &tape, one, needs, "");
    for (int w : wrt) {
      Tensor g = cotangents[w];
      if (!g.defined()) g = Tensor::Zeros(kernels_->dtype(), program.shapes[w], tracker_);
      result.grads.push_back(g);
    }
  }
  cotangents.clear();
  result.stats.seconds_backward = SecondsSince(start);
  result.stats.flops_recomputed = recomputed_flops_;
  result.stats.seconds_in_kernels = kernels_->kernel_seconds();
  result.stats.kernel_calls = kernels_->kernel_calls();
  result.stats.kernel_times = kernels_->kernel_times();
  result.stats.flops_backward = kernels_->flops() - recomputed_flops_;

  result.state = std::move(state_);
  state_.clear();
  state_params_.clear();
  inputs.clear();
  arguments_.clear();
  origin_.clear();
  producer_.clear();
  result.stats.op_runs = op_runs_;
  schedule_ = nullptr;
  memory.Finish(&result);
  return result;
}

void ReverseMode::Log(const std::string& phase, const std::string& where, const Op& op,
                      const Program& p) {
  if (schedule_ == nullptr) return;
  std::string operands;
  for (int v : op.inputs) {
    operands += StrCat(operands.empty() ? "" : " ", DTypeName(kernels_->dtype()),
                       p.shapes[v].ToString());
  }
  schedule_->push_back(StrCat(phase, std::string(10 - phase.size(), ' '), where,
                              OpKindName(op.kind), phase == "backward" ? "^T" : "", " ", operands,
                              " -> ", DTypeName(kernels_->dtype()), p.shapes[op.output].ToString(),
                              "    # ", op.site, op.scope.empty() ? "" : " (" + op.scope + ")"));
}

void ReverseMode::CollectResiduals(const Tape& tape, std::vector<Tensor>* out) const {
  for (const OpTape& t : tape.ops) {
    for (const Tensor& in : t.inputs) {
      if (in.defined()) out->push_back(in);
    }
    if (t.output.defined()) out->push_back(t.output);
    for (const auto& [id, saved] : t.saved) out->push_back(saved);
    if (t.body) CollectResiduals(*t.body, out);
    for (const Tape& step : t.steps) CollectResiduals(step, out);
    for (const auto& [pos, carry] : t.snapshots) out->push_back(carry);
  }
}

void ReverseMode::ListResiduals(const Tape& tape, Stats* stats) const {
  std::vector<Tensor> saved;
  CollectResiduals(tape, &saved);
  ResidualListing listing;
  for (const Tensor& t : saved) {
    auto arg = arguments_.find(t.buffer());
    if (arg != arguments_.end()) {
      listing.AddArgument(arg->second, origin_.at(t.buffer()));
      continue;
    }
    auto it = origin_.find(t.buffer());
    const std::string source = it == origin_.end() ? "(unknown origin)" : it->second;
    // Drop the scan-step prefix so every step's value lands on one line;
    // values outside scans get a line each.
    std::string key_source = source;
    bool in_scan = false;
    for (size_t pos; (pos = key_source.find("scan step ")) != std::string::npos;) {
      size_t colon = key_source.find(": ", pos);
      key_source.erase(pos, colon == std::string::npos ? std::string::npos : colon + 2 - pos);
      in_scan = true;
    }
    // One line per op of a scan's body: two scans traced at one site are two
    // lines, as print_saved_residuals lists them (the key names the op).
    auto producer = producer_.find(t.buffer());
    const std::string key =
        !in_scan ? ""
                 : StrCat(key_source, " @",
                          producer == producer_.end() ? std::string("?")
                                                      : StrCat(static_cast<const void*>(
                                                            producer->second)));
    listing.AddSaved(t, key_source, key);
  }
  listing.Fill(stats);
}

}  // namespace remat
