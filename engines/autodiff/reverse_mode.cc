#include "engines/autodiff/reverse_mode.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "engines/api/buffer_hooks.h"
#include "engines/api/error.h"
#include "engines/api/rules.h"
#include "engines/autodiff/plan.h"
#include "engines/exec/accumulate.h"
#include "engines/plan/save_plan.h"
#include "engines/exec/residual_listing.h"
#include "engines/exec/run_memory.h"
#include "engines/schedule/schedule.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Scans and chains: ops that record their steps.
bool IsLoop(OpKind kind) { return kind == OpKind::kScan || kind == OpKind::kChain; }

// Scan step i's needs: its carry's by `carry_needs`, its slices' the scan's.
std::vector<bool> StepNeeds(const std::vector<bool>& needs, const std::vector<bool>& carry_needs,
                            int64_t i) {
  std::vector<bool> out = {carry_needs[i]};
  out.insert(out.end(), needs.begin() + 1, needs.end());
  return out;
}


// The index of the last op that reads each value (-1: none).
std::vector<int> LastUses(const Program& p) {
  std::vector<int> last(p.num_values(), -1);
  for (int k = 0; k < static_cast<int>(p.ops.size()); ++k) {
    for (int in : p.ops[k].inputs) last[in] = k;
  }
  return last;
}

// FNV-1a over a tensor's bytes: the determinism check's fingerprint.
uint64_t Fingerprint(const Tensor& t) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* bytes = static_cast<const unsigned char*>(t.raw());
  for (int64_t i = 0; i < t.bytes(); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
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

Tensor ReverseMode::Forward(const Program& p, std::vector<Tensor> inputs,
                            const std::vector<bool>& param_needs, Tape* tape,
                            const std::string& where, const Capture* capture,
                            const Recompute* recompute) {
  const std::vector<bool> needs = ValueNeeds(p, param_needs);
  const std::vector<int> last_use = LastUses(p);
  const int num_ops = static_cast<int>(p.ops.size());
  std::vector<Tensor> values(p.num_values());
  for (int i = 0; i < p.num_params(); ++i) values[i] = std::move(inputs[i]);
  if (tape) tape->ops.resize(num_ops);

  // Which ops run. A recomputation runs only the ops whose results the
  // backward pass reads (directly, or through another op that runs), and
  // none whose result was saved.
  std::vector<bool> run(num_ops, true);
  if (recompute) {
    // The region's output is wanted only if a backward rule reads it.
    std::vector<bool> wanted = ResidualValues(p, needs);
    for (int k = num_ops - 1; k >= 0; --k) {
      const Op& op = p.ops[k];
      // A scan or chain is never substituted: it must run to record its steps.
      const bool saved = recompute->saved->count(op.output) > 0 && !IsLoop(op.kind);
      // Honoured checkpoints with a saving policy and scans must run to
      // record their residuals; a checkpoint that saves nothing only needs
      // its inputs kept.
      const bool records = needs[op.output] && (IsLoop(op.kind) || [&] {
                             if (op.kind != OpKind::kCheckpoint) return false;
                             const RegionPlan plan = active_planner_->PlanRegion(op);
                             return !plan.honour || plan.may_save;
                           }());
      const bool state = op.kind == OpKind::kState && rules_->RunsStateOpsOnRecompute();
      run[k] = !saved && (wanted[op.output] || records || state);
      if (run[k]) {
        for (int in : op.inputs) wanted[in] = true;
      }
    }
  }

  for (int k = 0; k < num_ops; ++k) {
    const Op& op = p.ops[k];
    std::vector<Tensor> in;
    std::vector<bool> in_needs;
    for (int v : op.inputs) {
      in.push_back(values[v]);
      in_needs.push_back(needs[v]);
    }
    const bool record = tape != nullptr && needs[op.output];
    OpTape* op_tape = record ? &tape->ops[k] : nullptr;
    if (op_tape) op_tape->needs = in_needs;
    const std::string site = where + Program::Describe(op);
    tracker_->set_site(site);

    Tensor out;
    const Tensor* saved = nullptr;
    if (recompute && !IsLoop(op.kind)) {
      auto it = recompute->saved->find(op.output);
      if (it != recompute->saved->end()) saved = &it->second;
    }
    if (saved != nullptr || !run[k]) {
      // Saved by the policy (offloaded values come back to the device), or
      // not read by the backward pass of this recomputation. A checkpoint
      // that is not run still keeps its inputs for its own backward pass.
      if (saved != nullptr) {
        out = saved->buffer()->category() == Category::kHost ? Copy(*saved, tracker_) : *saved;
      }
      if (op.kind == OpKind::kCheckpoint && op_tape) {
        Tensor unused;
        ForwardCheckpoint(op, in, in_needs, op_tape, /*run=*/false, where, &unused);
      }
    } else if (IsPrimitive(op.kind)) {
      Log(recomputing_ ? "recompute" : "forward", where, op, p);
      ++op_runs_[Program::Describe(op)];
      out = remat::Forward(*kernels_, op, in);
      if (op.kind != OpKind::kName && op.kind != OpKind::kState) rules_->OnComputed(out);
      if (op.kind == OpKind::kState) CommitState(op, out);
    } else if (op.kind == OpKind::kCheckpoint) {
      ForwardCheckpoint(op, in, in_needs, op_tape, /*run=*/true, where, &out);
    } else if (op.kind == OpKind::kChain) {
      out = ForwardChain(p, op, in, in_needs, op_tape, where);
    } else {
      out = ForwardScan(p, op, in, in_needs, op_tape, where);
    }

    if (out.defined()) {
      if (recompute && recompute->hashes && run[k] && !out.dry()) {
        auto h = recompute->hashes->find(op.output);
        if (h != recompute->hashes->end() && h->second != Fingerprint(out)) {
          throw Error(StrCat("determinism check: recomputing ", site,
                             " gave different bits than the forward pass; the checkpoint region "
                             "cannot be reproduced, so its gradient would be wrong"));
        }
      }
      if (out.shape() != p.shapes[op.output] || out.dtype() != kernels_->dtype()) {
        throw Error(StrCat("determinism check: ", site, " produced ", out.TypeString(),
                           " where the program has ", DTypeName(kernels_->dtype()),
                           p.shapes[op.output].ToString()));
      }
      if (op_tape && IsPrimitive(op.kind)) {
        const Saves saves = SavesFor(op.kind, in_needs);
        op_tape->inputs.resize(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
          if (saves.inputs[i]) op_tape->inputs[i] = in[i];
        }
        if (saves.output) op_tape->output = out;
        RecordResiduals(op_tape);
      }
      Tensor offloaded;  // the host copy of `out`, if the plan offloads it
      if (capture) {
        if (run_options_.check_recompute_bits && !out.dry()) {
          capture->into->hashes[op.output] = Fingerprint(out);
        }
        const SaveDecision d = capture->decisions[op.output];
        auto alias = op.kind == OpKind::kName ? capture->into->saved.find(op.inputs[0])
                                              : capture->into->saved.end();
        if (d != SaveDecision::kRecompute && alias != capture->into->saved.end()) {
          // A name and the value it labels are one tensor: kept once.
          capture->into->saved[op.output] = alias->second;
        } else if (d == SaveDecision::kSave) {
          capture->into->saved[op.output] = out;
        } else if (d == SaveDecision::kOffload) {
          ScopedSite host(tracker_.get(), Category::kHost, site);
          offloaded = Copy(out, tracker_);
          capture->into->saved[op.output] = offloaded;
        }
      }
      // A checkpoint's or scan's output keeps its producer's name inside the
      // body ("output of sin at ... (g)"), as JAX lists it.
      if (op.kind == OpKind::kName) {
        origin_[out.buffer()] += StrCat(" named '", op.name, "'");
      } else if (saved == nullptr && IsPrimitive(op.kind)) {
        origin_[out.buffer()] = StrCat("output of ", site);
        producer_[out.buffer()] = &op;
      }
      // An offloaded copy is its value on the host: the listing names the
      // op it comes from, as for the value itself.
      if (offloaded.defined()) {
        auto from = origin_.find(out.buffer());
        if (from != origin_.end()) origin_[offloaded.buffer()] = from->second;
        auto producer = producer_.find(out.buffer());
        if (producer != producer_.end()) producer_[offloaded.buffer()] = producer->second;
      }
    } else if (op_tape && IsPrimitive(op.kind)) {
      op_tape->inputs.resize(in.size());
      const Saves saves = SavesFor(op.kind, in_needs);
      for (size_t i = 0; i < in.size(); ++i) {
        if (saves.inputs[i]) op_tape->inputs[i] = in[i];
      }
      RecordResiduals(op_tape);
    }
    values[op.output] = std::move(out);
    // Free what the rest of the forward pass no longer reads.
    for (int v : op.inputs) {
      if (last_use[v] != k || v == p.output) continue;
      if (tape != nullptr && !recomputing_ && v >= p.num_params() && values[v].defined() &&
          arguments_.count(values[v].buffer()) == 0) {
        rules_->OnLastForwardUse(values[v]);
      }
      values[v] = Tensor();
    }
  }
  return values[p.output];
}

void ReverseMode::CommitState(const Op& op, const Tensor& value) {
  // The forward pass commits; a recomputation computes the same value
  // again and must not (CONTRACT.md, state): the rules decide, so that a
  // faulty rule can.
  auto param = state_params_.find(op.name);
  if (param == state_params_.end()) {
    throw Error(StrCat(Program::Describe(op), ": state names '", op.name,
                       "', which is not a parameter of the program"));
  }
  if (!rules_->CommitState(recomputing_, value, &param->second)) return;
  if (recomputing_) {
    state_[op.name] = value;
    return;
  }
  if (!state_.emplace(op.name, value).second) {
    throw Error(StrCat(Program::Describe(op), ": the forward pass ran the state op for '", op.name,
                       "' twice"));
  }
}

Tensor ReverseMode::ForwardInline(const Program& body, const std::vector<Tensor>& in,
                                  const std::vector<bool>& needs, OpTape* op_tape,
                                  const std::string& where) {
  std::unique_ptr<Tape> body_tape;
  if (op_tape) body_tape = std::make_unique<Tape>();
  Tensor out = Forward(body, in, needs, body_tape.get(), where, nullptr, nullptr);
  if (op_tape) op_tape->body = std::move(body_tape);
  return out;
}

void ReverseMode::ForwardCheckpoint(const Op& op, const std::vector<Tensor>& in,
                                    const std::vector<bool>& needs, OpTape* op_tape, bool run,
                                    const std::string& where, Tensor* out) {
  const Program& body = *op.body;
  if (Inline(op)) {
    // The store-everything baseline runs a checkpoint region inline (and
    // never recomputes, so `run` is always true here); so do the steps a
    // checkpoint_every scan does not checkpoint.
    if (run) *out = ForwardInline(body, in, needs, op_tape, where);
    return;
  }
  if (op_tape == nullptr) {
    // Not differentiated here: just the values.
    if (run) *out = Forward(body, in, needs, nullptr, where, nullptr, nullptr);
    return;
  }
  // Honoured: keep the region's inputs and what its policy saves.
  op_tape->honoured = true;
  op_tape->inputs = in;
  if (!run) return;
  Capture capture;
  capture.decisions = active_planner_->PlanSaves(op, needs);
  capture.into = op_tape;
  *out = Forward(body, in, needs, nullptr, where, &capture, nullptr);
  // An input the recomputation will not read is not kept (a region that
  // saves what eager saves keeps no more than eager).
  const std::vector<bool> read = ParamsRead(body, needs, capture.decisions);
  for (size_t i = 0; i < read.size(); ++i) {
    if (!read[i]) op_tape->inputs[i] = Tensor();
  }
  rules_->OnSaved(body, op_tape->saved);
}

std::vector<Tensor> ReverseMode::BackwardCheckpoint(const Op& op, OpTape* op_tape,
                                                    const Tensor& dout, const std::string& where,
                                                    std::span<const Tensor> into) {
  const std::vector<bool> needs = op_tape->needs;
  std::vector<Tensor> din = RegionCotangents(op, op_tape, dout, where, into);
  std::vector<bool> reached(din.size());
  for (size_t i = 0; i < din.size(); ++i) reached[i] = din[i].defined();
  rules_->FinishInputCotangents(op, needs, reached, *kernels_, &din);
  return din;
}

std::vector<Tensor> ReverseMode::RegionCotangents(const Op& op, OpTape* op_tape,
                                                  const Tensor& dout, const std::string& where,
                                                  std::span<const Tensor> into) {
  const Program& body = *op.body;
  if (!op_tape->honoured) {
    return Backward(body, op_tape->body.get(), dout, op_tape->needs, where, nullptr, into);
  }
  // Recompute the region's forward pass from its saved inputs, recording a
  // tape, then differentiate it.
  Tape tape;
  Recompute recompute;
  recompute.saved = rules_->SavedForRecompute(body, &op_tape->saved);
  recompute.hashes = run_options_.check_recompute_bits ? &op_tape->hashes : nullptr;
  const bool was_recomputing = recomputing_;
  recomputing_ = true;
  const int64_t flops_before = kernels_->flops();
  {
    ScopedSite site(tracker_.get(), Category::kActivations, tracker_->site());
    Forward(body, op_tape->inputs, op_tape->needs, &tape, where, nullptr, &recompute);
  }
  recomputed_flops_ += kernels_->flops() - flops_before;
  recomputing_ = was_recomputing;
  op_tape->inputs.clear();
  op_tape->saved.clear();
  return Backward(body, &tape, dout, op_tape->needs, where, nullptr, into);
}

Tensor ReverseMode::ForwardScan(const Program& p, const Op& op, const std::vector<Tensor>& in,
                                const std::vector<bool>& needs, OpTape* op_tape,
                                const std::string& where) {
  // Only a differentiated scan has a plan: one that is not keeps nothing.
  const LoopPlan plan = op_tape ? PlanScan(p, op) : LoopPlan();
  if (plan.schedule) return ForwardScheduledScan(op, plan.schedule, in, needs, op_tape, where);
  const int64_t every = plan.checkpoint_every;
  const Program& body = *op.body;
  const int64_t length = p.shapes[op.inputs[1]].dim(0);
  const std::vector<bool> carry_needs = rules_->CarryNeeds(op, needs, length);
  if (op_tape) op_tape->steps.resize(length);
  Tensor carry = in[0];
  for (int64_t i = 0; i < length; ++i) {
    std::vector<Tensor> step_in = {carry};
    std::vector<bool> step_needs = {carry_needs[i]};
    for (size_t j = 1; j < in.size(); ++j) {
      step_in.push_back(IsScanConst(op, j) ? in[j] : in[j].Slice(i));
      step_needs.push_back(needs[j]);
    }
    // checkpoint_every:K: the steps between checkpointed ones store all.
    const bool saved_inline = inline_checkpoints_;
    if (every > 0 && (i + 1) % every != 0) inline_checkpoints_ = true;
    carry = Forward(body, std::move(step_in), step_needs, op_tape ? &op_tape->steps[i] : nullptr,
                    StrCat(where, "scan step ", i, ": "), nullptr, nullptr);
    inline_checkpoints_ = saved_inline;
  }
  return carry;
}

std::vector<Tensor> ReverseMode::Backward(const Program& p, Tape* tape, Tensor dout,
                                          const std::vector<bool>& param_needs,
                                          const std::string& where, std::vector<Tensor>* sums,
                                          std::span<const Tensor> into) {
  const std::vector<bool> needs = ValueNeeds(p, param_needs);
  const std::unique_ptr<CotangentSums> cot = rules_->NewSums(kernels_, p.num_values());
  if (sums) {
    for (int i = 0; i < p.num_params(); ++i) cot->Start(i, std::move((*sums)[i]));
  }
  // The params whose cotangent is what one op's backward pass returns for
  // it: read by one primitive op or checkpoint (whose body places it in
  // turn), once, and not the program's output (whose sum starts from dout).
  std::vector<int> reads;
  if (!into.empty() && sums == nullptr) {
    reads.assign(static_cast<size_t>(p.num_params()), 0);
    for (const Op& op : p.ops) {
      const bool places = IsPrimitive(op.kind) || op.kind == OpKind::kCheckpoint;
      for (int v : op.inputs) {
        if (v < p.num_params()) reads[static_cast<size_t>(v)] += places ? 1 : 2;
      }
    }
    if (p.output < p.num_params()) reads[static_cast<size_t>(p.output)] += 2;
  }
  // Where op's rule may write each input's cotangent (empty: nowhere).
  auto places_for = [&](const Op& op) {
    std::vector<Tensor> places;
    if (reads.empty()) return places;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const int v = op.inputs[i];
      if (v < p.num_params() && reads[static_cast<size_t>(v)] == 1 &&
          static_cast<size_t>(v) < into.size() && into[static_cast<size_t>(v)].defined()) {
        places.resize(op.inputs.size());
        places[i] = into[static_cast<size_t>(v)];
      }
    }
    return places;
  };
  cot->Start(p.output, std::move(dout));

  for (int k = static_cast<int>(p.ops.size()) - 1; k >= 0; --k) {
    const Op& op = p.ops[k];
    OpTape& op_tape = tape->ops[k];
    Tensor d = cot->Take(op.output);
    if (!d.defined() || !needs[op.output]) {
      op_tape = OpTape();
      continue;
    }
    tracker_->set_site(where + Program::Describe(op));
    std::vector<Tensor> din;
    if (IsPrimitive(op.kind)) {
      Log("backward", where, op, p);
      std::vector<Shape> in_shapes;
      for (int v : op.inputs) in_shapes.push_back(p.shapes[v]);
      op_tape.inputs.resize(op.inputs.size());
      const std::vector<Tensor> places = places_for(op);
      din = remat::Backward(*kernels_, op, op_tape.inputs, op_tape.output, d, in_shapes,
                            op_tape.needs, places);
    } else if (op.kind == OpKind::kCheckpoint) {
      const std::vector<Tensor> places = places_for(op);
      din = BackwardCheckpoint(op, &op_tape, d, where, places);
    } else if (op.kind == OpKind::kChain) {
      // The chain continues its inputs' sums (the ungrouped blocks would
      // have added to them one by one): same order of additions, same bits.
      std::vector<Tensor> sums;
      for (int v : op.inputs) sums.push_back(cot->Take(v));
      sums = BackwardChain(op, &op_tape, d, std::move(sums), where);
      for (size_t i = 0; i < op.inputs.size(); ++i) cot->Start(op.inputs[i], std::move(sums[i]));
      op_tape = OpTape();
      continue;
    } else {
      din = BackwardScan(p, op, &op_tape, d, op_tape.needs, where);
    }
    op_tape = OpTape();  // this op's residuals are no longer needed
    d = Tensor();
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (din[i].defined()) cot->Add(op.inputs[i], std::move(din[i]));
    }
  }
  std::vector<Tensor> out(p.num_params());
  for (int i = 0; i < p.num_params(); ++i) {
    Tensor sum = cot->Take(i);
    if (param_needs[i] || sums) out[i] = std::move(sum);
  }
  return out;
}

std::vector<Tensor> ReverseMode::BackwardScan(const Program& p, const Op& op, OpTape* op_tape,
                                              const Tensor& dout, const std::vector<bool>& needs,
                                              const std::string& where) {
  if (op_tape->schedule) return BackwardScheduledScan(p, op, op_tape, dout, needs, where);
  ScanGradient g = StartScanGradient(p, op, needs);
  Tensor carry_cot = dout;
  for (int64_t i = static_cast<int64_t>(g.carry_needs.size()) - 1; i >= 0 && carry_cot.defined();
       --i) {
    carry_cot = BackwardScanStep(op, i, &op_tape->steps[i], std::move(carry_cot), needs, &g, where);
    op_tape->steps[i] = Tape();
  }
  return FinishScanGradient(op, needs, &g, std::move(carry_cot));
}

ReverseMode::ScanGradient ReverseMode::StartScanGradient(const Program& p, const Op& op,
                                                         const std::vector<bool>& needs) const {
  ScanGradient g;
  g.stacked.resize(needs.size());
  for (size_t j = 1; j < needs.size(); ++j) {
    if (needs[j]) {
      g.stacked[j] = StackedGradient(kernels_->dtype(), p.shapes[op.inputs[j]], tracker_);
    }
  }
  g.carry_needs = rules_->CarryNeeds(op, needs, p.shapes[op.inputs[1]].dim(0));
  g.reached.assign(needs.size(), false);
  return g;
}

Tensor ReverseMode::BackwardScanStep(const Op& op, int64_t i, Tape* tape, Tensor carry_cot,
                                     const std::vector<bool>& needs, ScanGradient* g,
                                     const std::string& where) {
  const std::vector<Tensor> places = StepCotangentPlaces(op, i, g->stacked);
  std::vector<Tensor> d = Backward(*op.body, tape, std::move(carry_cot),
                                   StepNeeds(needs, g->carry_needs, i),
                                   StrCat(where, "scan step ", i, ": "), nullptr, places);
  for (size_t j = 1; j < needs.size(); ++j) {
    if (!needs[j] || !d[j].defined()) continue;
    g->stacked[j].Set(i, d[j]);
    g->reached[j] = true;
  }
  return std::move(d[0]);
}

std::vector<Tensor> ReverseMode::FinishScanGradient(const Op& op, const std::vector<bool>& needs,
                                                    ScanGradient* g, Tensor carry_cot) {
  std::vector<Tensor> din(needs.size());
  for (size_t j = 1; j < needs.size(); ++j) {
    // A needed xs's gradient is contributed even when it is all zeros.
    if (g->stacked[j].defined()) din[j] = g->stacked[j].Finish();
  }
  g->reached[0] = carry_cot.defined();
  if (needs[0]) din[0] = std::move(carry_cot);
  rules_->FinishInputCotangents(op, needs, g->reached, *kernels_, &din);
  return din;
}

// XLA writes a scan's stacked gradient slice by slice in place; here the
// kernel that makes a step's cotangent of a stacked input writes it into its
// slice (Kernels::CallInto), where it was made apart and copied: on
// transformer_stack (L=4 D=256 F=1024) 3 MiB of copies a run, one thread
// copying while the other waited. Memory is accounted as before (by
// allocation: the cotangent still counts its bytes while it lives), so the
// engines' peaks do not move; the storage and the copy go. Not under a
// recorder: planned's compiler sees the copies and elides them in its own
// plan (engines/planned/compiler.cc, ElideStackCopies).
std::vector<Tensor> ReverseMode::StepCotangentPlaces(
    const Op& op, int64_t step, const std::vector<StackedGradient>& stacked) const {
  std::vector<Tensor> places;
  if (ActiveRecorder() != nullptr) return places;
  for (size_t j = 1; j < stacked.size(); ++j) {
    if (!stacked[j].defined() || IsScanConst(op, j)) continue;
    Tensor slot = stacked[j].Slot(step);
    // Only where a buffer of its own would be as aligned (the kernels see
    // what they would see otherwise; planned's elision asks the same).
    if (slot.offset_bytes() % kBufferAlignmentBytes != 0) continue;
    places.resize(stacked.size());
    places[j] = std::move(slot);
  }
  return places;
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

namespace {

// What a kReverse keeps of one step (engines/schedule's residual_bytes): the
// values the step's backward pass reads that it computed, and the carry
// entering it when the backward reads that too (a matmul's input: inside a
// kReverse the carry of every step but the first is held as that step's
// residual; the model charges the first one as well, one carry too many at
// most, so a schedule stays within its budget). Its other inputs are
// arguments (a slice of xs is a view): no new bytes. `carry` is the carry's
// parameter index, -1 for none.
int64_t StepResidualBytes(const Program& body, int carry, int64_t item) {
  std::vector<bool> param_needs(body.num_params(), true);
  const std::vector<bool> wanted = ResidualValues(body, ValueNeeds(body, param_needs));
  int64_t bytes = carry >= 0 && wanted[carry] ? body.shapes[carry].num_elements() * item : 0;
  for (int v = body.num_params(); v < body.num_values(); ++v) {
    if (wanted[v]) bytes += body.shapes[v].num_elements() * item;
  }
  return bytes;
}

}  // namespace

// A budget bounds the run's activations (Stats::high_water_bytes_by_
// category), so the loop's schedule gets the budget less what the run holds
// apart from it: the activations live as its forward pass starts (values
// computed before it that are still needed, the loop's input when it is one:
// position 0, which the schedule model never counts) and the program's
// output, computed after the loop and live through the whole backward pass
// (the 4 bytes of a scalar loss: without them, budget:B measured B + 4 on
// every chain whose schedule used its budget to the byte). Some of the
// former may be freed before the loop reverses: then the bound is not tight,
// but it holds.
int64_t ReverseMode::HeldOutsideLoop() const {
  return tracker_->live_bytes(Category::kActivations) + output_bytes_;
}

// What the rest of the loop's program computes after the loop's forward pass
// (ChainCosts::after_bytes), while the loop keeps its snapshots and tapes: at
// most every later op's output at once (tapes taken at the end of a forward
// pass made this moment a peak: scan_stack's square(y) then measured one
// carry over the budget). The program's output is left out: HeldOutsideLoop
// counts it. What follows in an enclosing program (a loop inside a region's
// body) is not seen.
int64_t ReverseMode::AfterLoopBytes(const Program& p, const Op& op) const {
  const int64_t item = DTypeSize(kernels_->dtype());
  int64_t bytes = 0;
  bool after = false;
  for (const Op& later : p.ops) {
    if (after && later.output != p.output) bytes += p.shapes[later.output].num_elements() * item;
    after = after || &later == &op;
  }
  return bytes;
}

LoopPlan ReverseMode::PlanScan(const Program& p, const Op& op) {
  LoopModel model;
  model.held_outside = HeldOutsideLoop();
  model.costs = [&] {
    const Program& body = *op.body;
    const int64_t length = p.shapes[op.inputs[1]].dim(0);
    // The cost model of one step: its forward FLOPs, its carry, and the
    // values its backward pass keeps in a kReverse, in this engine's dtype.
    const int64_t item = DTypeSize(kernels_->dtype());
    const int64_t residual_bytes = StepResidualBytes(body, /*carry=*/0, item);
    const int64_t carry_bytes = body.shapes[0].num_elements() * item;
    ChainCosts costs = ChainCosts::Uniform(length, static_cast<double>(ForwardFlops(body)),
                                           carry_bytes, residual_bytes);
    costs.after_bytes = AfterLoopBytes(p, op);
    return costs;
  };
  return active_planner_->PlanLoop(op, model);
}

Tensor ReverseMode::ScanStep(const Op& op, int64_t i, const Tensor& carry,
                             const std::vector<Tensor>& in, const std::vector<bool>& needs,
                             const std::vector<bool>& carry_needs, Tape* tape,
                             const std::string& where) {
  std::vector<Tensor> step_in = {carry};
  for (size_t j = 1; j < in.size(); ++j) {
    step_in.push_back(IsScanConst(op, j) ? in[j] : in[j].Slice(i));
  }
  return Forward(*op.body, std::move(step_in), StepNeeds(needs, carry_needs, i), tape,
                 StrCat(where, "scan step ", i, ": "), nullptr, nullptr);
}

Tensor ReverseMode::ForwardScheduledScan(const Op& op, std::shared_ptr<const Schedule> schedule,
                                         const std::vector<Tensor>& in,
                                         const std::vector<bool>& needs, OpTape* op_tape,
                                         const std::string& where) {
  op_tape->schedule = std::move(schedule);
  op_tape->inputs = in;  // the carry at position 0, the stacked xs and the consts
  const std::vector<bool> carry_needs = rules_->CarryNeeds(op, needs, in[1].shape().dim(0));
  Steps steps;
  steps.forward = [&](int64_t i, const Tensor& carry, Tape* tape) {
    return ScanStep(op, i, carry, in, needs, carry_needs, tape, where);
  };
  return ForwardScheduled(op, steps, in[0], op_tape);
}

std::vector<Tensor> ReverseMode::BackwardScheduledScan(const Program& p, const Op& op,
                                                       OpTape* op_tape, const Tensor& dout,
                                                       const std::vector<bool>& needs,
                                                       const std::string& where) {
  const std::vector<Tensor> in = op_tape->inputs;
  ScanGradient g = StartScanGradient(p, op, needs);
  Steps steps;
  steps.forward = [&](int64_t i, const Tensor& carry, Tape* tape) {
    return ScanStep(op, i, carry, in, needs, g.carry_needs, tape, where);
  };
  steps.backward = [&](int64_t i, Tape* tape, Tensor carry_cot) {
    return BackwardScanStep(op, i, tape, std::move(carry_cot), needs, &g, where);
  };
  return FinishScanGradient(op, needs, &g, BackwardScheduled(steps, in[0], dout, op_tape));
}

Tensor ReverseMode::ForwardScheduled(const Op& op, const Steps& steps, const Tensor& input,
                                     OpTape* op_tape) {
  Tensor carry = input;
  int64_t pos = 0;
  op_tape->taped.clear();
  for (const Action& a : op_tape->schedule->forward) {
    if (a.kind == ActionKind::kAdvance) {
      for (int64_t i = pos; i < pos + a.n; ++i) carry = steps.forward(i, carry, nullptr);
      pos += a.n;
    } else if (a.kind == ActionKind::kAdvanceTaped) {
      // Rotor's second mode: the step keeps its residuals, as eager's would.
      for (int64_t i = pos; i < pos + a.n; ++i) {
        auto tape = std::make_unique<Tape>();
        carry = steps.forward(i, carry, tape.get());
        op_tape->taped[i] = std::move(tape);
      }
      pos += a.n;
    } else if (a.kind == ActionKind::kSnapshot) {
      op_tape->snapshots[pos] = carry;
    } else {
      throw Error(StrCat(Program::Describe(op), ": schedule ", op_tape->schedule->name,
                         " has a backward action in its forward pass"));
    }
  }
  op_tape->schedule_length = pos;
  return carry;
}

Tensor ReverseMode::BackwardScheduled(const Steps& steps, const Tensor& input, Tensor dout,
                                      OpTape* op_tape) {
  const bool was_recomputing = recomputing_;
  recomputing_ = true;
  Tensor carry;
  Tensor carry_cot = std::move(dout);
  int64_t pos = -1;
  int64_t frontier = op_tape->schedule_length;
  for (const Action& a : op_tape->schedule->backward) {
    switch (a.kind) {
      case ActionKind::kRestore:
        carry = a.n == 0 ? input : op_tape->snapshots.at(a.n);
        pos = a.n;
        break;
      case ActionKind::kSnapshot:
        op_tape->snapshots[pos] = carry;
        break;
      case ActionKind::kDrop:
        op_tape->snapshots.erase(a.n);
        break;
      case ActionKind::kAdvance:
      case ActionKind::kAdvanceTaped: {
        const int64_t flops_before = kernels_->flops();
        ScopedSite site(tracker_.get(), Category::kActivations, tracker_->site());
        for (int64_t i = pos; i < pos + a.n; ++i) {
          if (a.kind == ActionKind::kAdvance) {
            carry = steps.forward(i, carry, nullptr);
            continue;
          }
          auto tape = std::make_unique<Tape>();
          carry = steps.forward(i, carry, tape.get());
          op_tape->taped[i] = std::move(tape);
        }
        recomputed_flops_ += kernels_->flops() - flops_before;
        pos += a.n;
        break;
      }
      case ActionKind::kReverseTaped: {
        // Differentiate the taped steps below the frontier from their tapes,
        // the last first, freeing each tape as its step is done. (The
        // schedule was checked by Simulate: they are taped.)
        recomputing_ = was_recomputing;
        for (int64_t i = frontier - 1; i >= frontier - a.n; --i) {
          auto it = op_tape->taped.find(i);
          if (it == op_tape->taped.end()) {
            throw Error(StrCat("schedule ", op_tape->schedule->name, ": step ", i, " has no tape"));
          }
          std::unique_ptr<Tape> tape = std::move(it->second);
          op_tape->taped.erase(it);
          if (carry_cot.defined()) carry_cot = steps.backward(i, tape.get(), std::move(carry_cot));
        }
        frontier -= a.n;
        recomputing_ = true;
        break;
      }
      case ActionKind::kReverse: {
        // Run the steps keeping their residuals, then differentiate them
        // from the last to the first.
        std::vector<Tape> tapes(a.n);
        const int64_t flops_before = kernels_->flops();
        {
          ScopedSite site(tracker_.get(), Category::kActivations, tracker_->site());
          for (int64_t i = pos; i < pos + a.n; ++i) {
            carry = steps.forward(i, carry, &tapes[i - pos]);
          }
        }
        recomputed_flops_ += kernels_->flops() - flops_before;
        carry = Tensor();
        recomputing_ = was_recomputing;
        for (int64_t i = pos + a.n - 1; i >= pos && carry_cot.defined(); --i) {
          carry_cot = steps.backward(i, &tapes[i - pos], std::move(carry_cot));
          tapes[i - pos] = Tape();
        }
        frontier = pos;
        recomputing_ = true;
        break;
      }
    }
  }
  recomputing_ = was_recomputing;
  op_tape->snapshots.clear();
  op_tape->taped.clear();
  return carry_cot;
}

namespace {

// The position of the carry among block i's inputs: the value block i-1
// produced (block 0 has none: -1).
int CarryInput(const Program& chain, int64_t i) {
  if (i == 0) return -1;
  const Op& block = chain.ops[i];
  for (size_t j = 0; j < block.inputs.size(); ++j) {
    if (block.inputs[j] == chain.ops[i - 1].output) return static_cast<int>(j);
  }
  throw Error(StrCat("chain ", chain.name, ": block ", i, " (", Program::Describe(block),
                     ") does not read block ", i - 1, "'s output"));
}

// The cost model of a chain's blocks, in `item`-byte elements.
ChainCosts ChainCostsOf(const Op& op, int64_t item) {
  const Program& chain = *op.body;
  ChainCosts costs;
  for (const Op& block : chain.ops) {
    // The block as the schedule runs it: nested regions inline.
    const Program body = InlineCheckpoints(*block.body);
    const int64_t i = static_cast<int64_t>(costs.step_flops.size());
    costs.step_flops.push_back(static_cast<double>(ForwardFlops(body)));
    costs.residual_bytes.push_back(StepResidualBytes(body, CarryInput(chain, i), item));
    costs.carry_bytes.push_back(costs.carry_bytes.empty()
                                    ? chain.shapes[0].num_elements() * item
                                    : chain.shapes[block.inputs[CarryInput(
                                          chain, static_cast<int64_t>(costs.carry_bytes.size()))]]
                                              .num_elements() *
                                          item);
  }
  costs.carry_bytes.push_back(chain.shapes[chain.output].num_elements() * item);
  return costs;
}

}  // namespace

LoopPlan ReverseMode::PlanChain(const Program& p, const Op& op) {
  LoopModel model;
  model.held_outside = HeldOutsideLoop();
  model.costs = [&] {
    ChainCosts costs = ChainCostsOf(op, DTypeSize(kernels_->dtype()));
    costs.after_bytes = AfterLoopBytes(p, op);
    return costs;
  };
  return active_planner_->PlanLoop(op, model);
}

Tensor ReverseMode::ChainStep(const Op& op, int64_t i, const Tensor& carry,
                              const std::vector<Tensor>& in, const std::vector<bool>& value_needs,
                              Tape* tape, const std::string& where) {
  const Program& chain = *op.body;
  const Op& block = chain.ops[i];
  const int carry_input = CarryInput(chain, i);
  std::vector<Tensor> block_in;
  std::vector<bool> block_needs;
  for (size_t j = 0; j < block.inputs.size(); ++j) {
    const int v = block.inputs[j];
    block_in.push_back(static_cast<int>(j) == carry_input ? carry : in[v]);
    block_needs.push_back(value_needs[v]);
  }
  // The schedule decides what is kept: the block's own policy and nested
  // regions give way, as in a scheduled scan's body.
  const bool saved_inline = inline_checkpoints_;
  inline_checkpoints_ = true;
  Tensor out = Forward(*block.body, std::move(block_in), block_needs, tape,
                       StrCat(where, "chain block ", i, ": "), nullptr, nullptr);
  inline_checkpoints_ = saved_inline;
  return out;
}

Tensor ReverseMode::ForwardChain(const Program& p, const Op& op, const std::vector<Tensor>& in,
                                 const std::vector<bool>& needs, OpTape* op_tape,
                                 const std::string& where) {
  const Program& chain = *op.body;
  LoopPlan plan = op_tape ? PlanChain(p, op) : LoopPlan();
  if (!plan.schedule) {
    // Inline: exactly the blocks, as the program was before grouping.
    return ForwardInline(chain, in, needs, op_tape, where);
  }
  op_tape->schedule = std::move(plan.schedule);
  op_tape->inputs = in;
  const std::vector<bool> value_needs = ValueNeeds(chain, needs);
  Steps steps;
  steps.forward = [&](int64_t i, const Tensor& carry, Tape* tape) {
    return ChainStep(op, i, carry, in, value_needs, tape, where);
  };
  return ForwardScheduled(op, steps, in[0], op_tape);
}

std::vector<Tensor> ReverseMode::BackwardChain(const Op& op, OpTape* op_tape, const Tensor& dout,
                                               std::vector<Tensor> sums,
                                               const std::string& where) {
  const Program& chain = *op.body;
  if (!op_tape->schedule) {
    return Backward(chain, op_tape->body.get(), dout, op_tape->needs, where, &sums);
  }
  const std::vector<Tensor> in = op_tape->inputs;
  const std::vector<bool> value_needs = ValueNeeds(chain, op_tape->needs);
  // The chain's cotangents, accumulated block by block from the last, each
  // block's inputs in input order: the arithmetic of running the blocks
  // inline, so the gradients are eager's bit for bit.
  const std::unique_ptr<CotangentSums> cot = rules_->NewSums(kernels_, chain.num_values());
  for (int j = 0; j < chain.num_params(); ++j) cot->Start(j, std::move(sums[j]));
  Steps steps;
  steps.forward = [&](int64_t i, const Tensor& carry, Tape* tape) {
    return ChainStep(op, i, carry, in, value_needs, tape, where);
  };
  steps.backward = [&](int64_t i, Tape* tape, Tensor carry_cot) {
    const Op& block = chain.ops[i];
    if (!value_needs[block.output]) return Tensor();
    std::vector<bool> block_needs;
    for (int v : block.inputs) block_needs.push_back(value_needs[v]);
    tracker_->set_site(StrCat(where, "chain block ", i, ": ", Program::Describe(block)));
    std::vector<Tensor> d = Backward(*block.body, tape, std::move(carry_cot), block_needs,
                                     StrCat(where, "chain block ", i, ": "));
    for (size_t j = 0; j < block.inputs.size(); ++j) {
      if (d[j].defined()) cot->Add(block.inputs[j], std::move(d[j]));
    }
    return i == 0 ? Tensor() : cot->Take(chain.ops[i - 1].output);
  };
  BackwardScheduled(steps, in[0], dout, op_tape);
  for (int j = 0; j < chain.num_params(); ++j) sums[j] = cot->Take(j);
  return sums;
}

void ReverseMode::RecordResiduals(OpTape* op_tape) {
  for (Tensor& t : op_tape->inputs) {
    if (t.defined()) rules_->OnResidual(recomputing_, &t);
  }
  if (op_tape->output.defined()) rules_->OnResidual(recomputing_, &op_tape->output);
}

bool ReverseMode::Inline(const Op& region) const {
  return inline_checkpoints_ || !active_planner_->PlanRegion(region).honour;
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
