// ReverseMode's backward pass (reverse_mode.h): the ops in reverse program
// order, each input's cotangent summed in input order (CONTRACT.md section
// 3), and a checkpoint region's backward, recomputing its forward first when
// it is honoured.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engines/api/rules.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/plan/save_plan.h"

namespace remat {

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

}  // namespace remat
