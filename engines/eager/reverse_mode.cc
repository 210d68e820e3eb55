#include "engines/eager/reverse_mode.h"

#include <chrono>
#include <cstring>
#include <map>

#include "engines/api/error.h"
#include "engines/api/rules.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// needs[v]: the value's cotangent leads to a wanted gradient, i.e. it depends
// on a parameter whose needs[i] is true.
std::vector<bool> ValueNeeds(const Program& p, const std::vector<bool>& param_needs) {
  std::vector<bool> needs(p.num_values(), false);
  for (int i = 0; i < p.num_params(); ++i) needs[i] = param_needs[i];
  for (const Op& op : p.ops) {
    for (int in : op.inputs) needs[op.output] = needs[op.output] || needs[in];
  }
  return needs;
}

// The index of the last op that reads each value (-1: none).
std::vector<int> LastUses(const Program& p) {
  std::vector<int> last(p.num_values(), -1);
  for (int k = 0; k < static_cast<int>(p.ops.size()); ++k) {
    for (int in : p.ops[k].inputs) last[in] = k;
  }
  return last;
}

// Counts the caller's arguments in the tracker for the length of a run.
class ExternalBytes {
 public:
  ExternalBytes(MemoryTracker* tracker, int64_t bytes) : tracker_(tracker), bytes_(bytes) {
    tracker_->Allocate(bytes_, Category::kInputs);
  }
  ~ExternalBytes() { tracker_->Release(bytes_, Category::kInputs); }

 private:
  MemoryTracker* tracker_;
  int64_t bytes_;
};

}  // namespace

Result ReverseMode::Run(const Program& program, const std::vector<Tensor>& args,
                        const std::vector<int>& wrt, const RunOptions& options) {
  ValidateArguments(program, args, wrt);
  tracker_ = std::make_shared<MemoryTracker>();
  tracker_->set_limit_bytes(options.max_memory_bytes);
  kernels_->Bind(tracker_);
  Result result;
  result.tracker = tracker_;

  // Arguments already in the engine's dtype are used in place and counted as
  // live inputs; others are converted into tracked copies.
  int64_t external = 0;
  std::vector<Tensor> inputs;
  {
    ScopedSite site(tracker_.get(), Category::kInputs, "arguments");
    for (int i = 0; i < program.num_params(); ++i) {
      if (args[i].dtype() == kernels_->dtype()) {
        inputs.push_back(args[i]);
        external += args[i].bytes();
      } else {
        inputs.push_back(Cast(args[i], kernels_->dtype(), tracker_));
      }
    }
  }
  ExternalBytes counted(tracker_.get(), external);
  for (int i = 0; i < program.num_params(); ++i) {
    origin_[inputs[i].buffer()] = StrCat("from the argument ", program.param_names[i]);
    arguments_[inputs[i].buffer()] = inputs[i];
  }

  std::vector<bool> needs(program.num_params(), false);
  for (int w : wrt) needs[w] = true;

  // Forward.
  Tape tape;
  kernels_->reset_flops();
  Clock::time_point start = Clock::now();
  {
    ScopedSite site(tracker_.get(), Category::kActivations, "forward");
    result.value = Forward(program, inputs, needs, &tape, "");
  }
  result.stats.seconds_forward = SecondsSince(start);
  result.stats.flops_forward = kernels_->flops();
  result.stats.residuals = ListResiduals(tape, &result.stats.residual_bytes);

  // Backward, from d(value)/d(value) = 1.
  kernels_->reset_flops();
  start = Clock::now();
  std::vector<Tensor> cotangents;
  {
    ScopedSite site(tracker_.get(), Category::kGradients, "backward");
    Tensor one = Tensor::Zeros(kernels_->dtype(), Shape(), tracker_);
    if (one.dtype() == DType::kF32) {
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
  result.stats.flops_backward = kernels_->flops();

  inputs.clear();
  arguments_.clear();
  origin_.clear();
  result.stats.peak_bytes = tracker_->peak_bytes();
  for (int c = 0; c < kNumCategories; ++c) {
    result.stats.peak_bytes_by_category[c] = tracker_->peak_bytes(static_cast<Category>(c));
  }
  result.stats.peak_site = tracker_->peak_site();
  result.stats.host_peak_bytes = tracker_->peak_host_bytes();
  kernels_->Bind(nullptr);
  return result;
}

Tensor ReverseMode::Forward(const Program& p, std::vector<Tensor> inputs,
                            const std::vector<bool>& param_needs, Tape* tape,
                            const std::string& where) {
  const std::vector<bool> needs = ValueNeeds(p, param_needs);
  const std::vector<int> last_use = LastUses(p);
  std::vector<Tensor> values(p.num_values());
  for (int i = 0; i < p.num_params(); ++i) values[i] = std::move(inputs[i]);
  if (tape) tape->ops.resize(p.ops.size());

  for (int k = 0; k < static_cast<int>(p.ops.size()); ++k) {
    const Op& op = p.ops[k];
    const std::string site = where + Program::Describe(op);
    tracker_->set_site(site);
    std::vector<Tensor> in;
    std::vector<bool> in_needs;
    for (int v : op.inputs) {
      in.push_back(values[v]);
      in_needs.push_back(needs[v]);
    }
    const bool record = tape != nullptr && needs[op.output];
    OpTape* op_tape = record ? &tape->ops[k] : nullptr;
    if (op_tape) op_tape->needs = in_needs;

    Tensor out;
    if (IsPrimitive(op.kind)) {
      out = remat::Forward(*kernels_, op.kind, in);
      if (op_tape) {
        const Saves saves = SavesFor(op.kind, in_needs);
        op_tape->inputs.resize(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
          if (saves.inputs[i]) op_tape->inputs[i] = in[i];
        }
        if (saves.output) op_tape->output = out;
      }
    } else if (op.kind == OpKind::kCheckpoint) {
      // The store-everything baseline runs a checkpoint region inline.
      std::unique_ptr<Tape> body_tape;
      if (op_tape) body_tape = std::make_unique<Tape>();
      out = Forward(*op.body, in, in_needs, body_tape.get(), where);
      if (op_tape) op_tape->body = std::move(body_tape);
    } else {
      out = ForwardScan(p, op, in, in_needs, op_tape, where);
    }

    if (op.kind == OpKind::kName) {
      origin_[out.buffer()] += StrCat(" named '", op.name, "'");
    } else {
      origin_[out.buffer()] = StrCat("output of ", site);
    }
    values[op.output] = std::move(out);
    // Free what the rest of the forward pass no longer reads.
    for (int v : op.inputs) {
      if (last_use[v] == k && v != p.output) values[v] = Tensor();
    }
  }
  return values[p.output];
}

Tensor ReverseMode::ForwardScan(const Program& p, const Op& op, const std::vector<Tensor>& in,
                                const std::vector<bool>& needs, OpTape* op_tape,
                                const std::string& where) {
  const Program& body = *op.body;
  const int64_t length = p.shapes[op.inputs[1]].dim(0);
  const bool any_xs_needs = [&] {
    for (size_t j = 1; j < needs.size(); ++j) {
      if (needs[j]) return true;
    }
    return false;
  }();
  if (op_tape) op_tape->steps.resize(length);
  Tensor carry = in[0];
  for (int64_t i = 0; i < length; ++i) {
    std::vector<Tensor> step_in = {carry};
    // The carry of step i > 0 depends on earlier xs.
    std::vector<bool> step_needs = {needs[0] || (i > 0 && any_xs_needs)};
    for (size_t j = 1; j < in.size(); ++j) {
      step_in.push_back(in[j].Slice(i));
      step_needs.push_back(needs[j]);
    }
    carry = Forward(body, std::move(step_in), step_needs, op_tape ? &op_tape->steps[i] : nullptr,
                    StrCat(where, "scan step ", i, ": "));
  }
  return carry;
}

std::vector<Tensor> ReverseMode::Backward(const Program& p, Tape* tape, Tensor dout,
                                          const std::vector<bool>& param_needs,
                                          const std::string& where) {
  const std::vector<bool> needs = ValueNeeds(p, param_needs);
  std::vector<Tensor> cot(p.num_values());
  cot[p.output] = std::move(dout);

  for (int k = static_cast<int>(p.ops.size()) - 1; k >= 0; --k) {
    const Op& op = p.ops[k];
    OpTape& op_tape = tape->ops[k];
    Tensor d = std::move(cot[op.output]);
    if (!d.defined() || !needs[op.output]) {
      op_tape = OpTape();
      continue;
    }
    tracker_->set_site(where + Program::Describe(op));
    std::vector<Tensor> din;
    if (IsPrimitive(op.kind)) {
      std::vector<Shape> in_shapes;
      for (int v : op.inputs) in_shapes.push_back(p.shapes[v]);
      op_tape.inputs.resize(op.inputs.size());
      din = remat::Backward(*kernels_, op.kind, op_tape.inputs, op_tape.output, d, in_shapes,
                            op_tape.needs);
    } else if (op.kind == OpKind::kCheckpoint) {
      din = Backward(*op.body, op_tape.body.get(), d, op_tape.needs, where);
    } else {
      din = BackwardScan(p, op, &op_tape, d, op_tape.needs, where);
    }
    op_tape = OpTape();  // this op's residuals are no longer needed
    d = Tensor();
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (din[i].defined()) Accumulate(&cot[op.inputs[i]], din[i]);
    }
  }
  std::vector<Tensor> out(p.num_params());
  for (int i = 0; i < p.num_params(); ++i) {
    if (param_needs[i]) out[i] = std::move(cot[i]);
  }
  return out;
}

std::vector<Tensor> ReverseMode::BackwardScan(const Program& p, const Op& op, OpTape* op_tape,
                                              const Tensor& dout, const std::vector<bool>& needs,
                                              const std::string& where) {
  const Program& body = *op.body;
  const int64_t length = p.shapes[op.inputs[1]].dim(0);
  bool any_xs_needs = false;
  std::vector<Tensor> din(needs.size());
  // Gradients of the stacked inputs, filled step by step (zeros where no
  // cotangent reaches a step).
  for (size_t j = 1; j < needs.size(); ++j) {
    if (!needs[j]) continue;
    any_xs_needs = true;
    din[j] = Tensor::Zeros(kernels_->dtype(), p.shapes[op.inputs[j]], tracker_);
  }
  Tensor carry_cot = dout;
  for (int64_t i = length - 1; i >= 0 && carry_cot.defined(); --i) {
    std::vector<bool> step_needs = {needs[0] || (i > 0 && any_xs_needs)};
    for (size_t j = 1; j < needs.size(); ++j) step_needs.push_back(needs[j]);
    std::vector<Tensor> d = Backward(body, &op_tape->steps[i], std::move(carry_cot), step_needs,
                                     StrCat(where, "scan step ", i, ": "));
    op_tape->steps[i] = Tape();
    for (size_t j = 1; j < needs.size(); ++j) {
      if (needs[j] && d[j].defined()) {
        Tensor slot = din[j].Slice(i);
        std::memcpy(slot.raw(), d[j].raw(), slot.bytes());
      }
    }
    carry_cot = std::move(d[0]);
  }
  if (needs[0]) din[0] = carry_cot;
  return din;
}

void ReverseMode::Accumulate(Tensor* acc, const Tensor& contribution) {
  if (!acc->defined()) {
    *acc = contribution;
  } else {
    *acc = kernels_->Add(*acc, contribution);
  }
}

void ReverseMode::CollectResiduals(const Tape& tape, std::vector<Tensor>* out) const {
  for (const OpTape& t : tape.ops) {
    for (const Tensor& in : t.inputs) {
      if (in.defined()) out->push_back(in);
    }
    if (t.output.defined()) out->push_back(t.output);
    if (t.body) CollectResiduals(*t.body, out);
    for (const Tape& step : t.steps) CollectResiduals(step, out);
  }
}

std::vector<Residual> ReverseMode::ListResiduals(const Tape& tape,
                                                 int64_t* residual_bytes) const {
  std::vector<Tensor> saved;
  CollectResiduals(tape, &saved);
  std::vector<Residual> arguments, computed;
  std::map<std::pair<std::string, std::string>, size_t> line_of;  // (type, source) -> line
  std::vector<Shape> shapes;  // of computed lines, for stacking
  std::map<const Buffer*, bool> seen;
  *residual_bytes = 0;
  for (const Tensor& t : saved) {
    if (!seen.emplace(t.buffer(), true).second) continue;
    auto arg = arguments_.find(t.buffer());
    if (arg != arguments_.end()) {
      arguments.push_back({arg->second.TypeString(), origin_.at(t.buffer()),
                           arg->second.bytes(), true, 1});
      continue;
    }
    auto it = origin_.find(t.buffer());
    const std::string source = it == origin_.end() ? "(unknown origin)" : it->second;
    // Drop the scan-step prefix so every step's value lands on one line.
    std::string key_source = source;
    for (size_t pos; (pos = key_source.find("scan step ")) != std::string::npos;) {
      size_t colon = key_source.find(": ", pos);
      key_source.erase(pos, colon == std::string::npos ? std::string::npos : colon + 2 - pos);
    }
    const int64_t bytes = t.buffer()->bytes();
    *residual_bytes += bytes;
    auto key = std::make_pair(t.TypeString(), key_source);
    auto [line, inserted] = line_of.emplace(key, computed.size());
    if (inserted) {
      computed.push_back({t.TypeString(), key_source, bytes, false, 1});
      shapes.push_back(t.shape());
    } else {
      computed[line->second].bytes += bytes;
      computed[line->second].count += 1;
    }
  }
  for (size_t i = 0; i < computed.size(); ++i) {
    if (computed[i].count > 1) {
      // Stacked over scan steps, as JAX lists a scan's residuals.
      const std::string dtype = computed[i].type.substr(0, computed[i].type.find('['));
      const std::string dims = shapes[i].ToString().substr(1);  // "4,16]"
      computed[i].type = StrCat(dtype, "[", computed[i].count, dims == "]" ? "" : ",", dims);
    }
  }
  arguments.insert(arguments.end(), computed.begin(), computed.end());
  return arguments;
}

}  // namespace remat
