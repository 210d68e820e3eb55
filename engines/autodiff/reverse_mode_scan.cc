// ReverseMode's scans (reverse_mode.h): step by step keeping every step's
// tape, or under a schedule (the action interpreter is in
// reverse_mode_scheduled.cc); the stacked inputs' gradients filled slice by
// slice (CONTRACT.md 3.5).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/buffer_hooks.h"
#include "engines/api/rules.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/autodiff/reverse_mode_internal.h"
#include "engines/exec/accumulate.h"
#include "engines/schedule/schedule.h"

namespace remat {
namespace {

using reverse_mode_internal::StepResidualBytes;

// Scan step i's needs: its carry's by `carry_needs`, its slices' the scan's.
std::vector<bool> StepNeeds(const std::vector<bool>& needs, const std::vector<bool>& carry_needs,
                            int64_t i) {
  std::vector<bool> out = {carry_needs[i]};
  out.insert(out.end(), needs.begin() + 1, needs.end());
  return out;
}

}  // namespace

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

}  // namespace remat
