// ReverseMode's forward pass (reverse_mode.h): the ops in program order, the
// tape of what each op's backward rule reads, a checkpoint region's forward
// (honoured, inline or recomputed) and the state ops' commits.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/rules.h"
#include "engines/autodiff/reverse_mode.h"
#include "engines/plan/save_plan.h"

namespace remat {
namespace {

// Scans and chains: ops that record their steps.
bool IsLoop(OpKind kind) { return kind == OpKind::kScan || kind == OpKind::kChain; }

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

void ReverseMode::RecordResiduals(OpTape* op_tape) {
  for (Tensor& t : op_tape->inputs) {
    if (t.defined()) rules_->OnResidual(recomputing_, &t);
  }
  if (op_tape->output.defined()) rules_->OnResidual(recomputing_, &op_tape->output);
}

bool ReverseMode::Inline(const Op& region) const {
  return inline_checkpoints_ || !active_planner_->PlanRegion(region).honour;
}

}  // namespace remat
