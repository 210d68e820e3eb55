// A scan or chain reversed under a schedule (engines/schedule): the action
// interpreter they share, and what their cost model (ChainCosts) is made of:
// the step's residuals, what the run holds apart from the loop, what it
// computes after it.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/autodiff/reverse_mode_internal.h"
#include "engines/plan/save_plan.h"
#include "engines/schedule/schedule.h"

namespace remat {
namespace reverse_mode_internal {

int64_t StepResidualBytes(const Program& body, int carry, int64_t item) {
  std::vector<bool> param_needs(body.num_params(), true);
  const std::vector<bool> wanted = ResidualValues(body, ValueNeeds(body, param_needs));
  int64_t bytes = carry >= 0 && wanted[carry] ? body.shapes[carry].num_elements() * item : 0;
  for (int v = body.num_params(); v < body.num_values(); ++v) {
    if (wanted[v]) bytes += body.shapes[v].num_elements() * item;
  }
  return bytes;
}

}  // namespace reverse_mode_internal

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

}  // namespace remat
