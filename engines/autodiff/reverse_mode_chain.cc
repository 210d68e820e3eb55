// ReverseMode's chains of blocks (OpKind::kChain, reverse_mode.h): inline, or
// under a schedule (the action interpreter is in reverse_mode_scheduled.cc),
// continuing the enclosing program's cotangent sums as the blocks would
// inline.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/rules.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/autodiff/reverse_mode_internal.h"
#include "engines/plan/save_plan.h"
#include "engines/schedule/schedule.h"

namespace remat {
namespace {

using reverse_mode_internal::StepResidualBytes;

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

}  // namespace remat
