#include "engines/plan/save_plan.h"

#include "engines/api/rules.h"

namespace remat {
namespace {

ValueInfo InfoOf(const Op& op, const Shape& shape) {
  ValueInfo info;
  info.is_matmul = op.kind == OpKind::kMatMul;
  info.has_batch_dims = info.is_matmul && shape.rank() == 3;
  if (op.kind == OpKind::kName) info.name = op.name;
  return info;
}

}  // namespace

std::vector<bool> ValueNeeds(const Program& p, const std::vector<bool>& param_needs) {
  std::vector<bool> needs(p.num_values(), false);
  for (int i = 0; i < p.num_params(); ++i) needs[i] = param_needs[i];
  for (const Op& op : p.ops) {
    for (int in : op.inputs) needs[op.output] = needs[op.output] || needs[in];
  }
  return needs;
}

std::vector<bool> ResidualValues(const Program& p, const std::vector<bool>& value_needs) {
  std::vector<bool> wanted(p.num_values(), false);
  for (const Op& op : p.ops) {
    if (!value_needs[op.output]) continue;
    if (!IsPrimitive(op.kind)) {
      for (int in : op.inputs) wanted[in] = true;
      continue;
    }
    std::vector<bool> in_needs;
    for (int in : op.inputs) in_needs.push_back(value_needs[in]);
    const Saves saves = SavesFor(op.kind, in_needs);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (saves.inputs[i]) wanted[op.inputs[i]] = true;
    }
    if (saves.output) wanted[op.output] = true;
  }
  return wanted;
}

std::vector<SaveDecision> PlanSaves(const Program& body, const std::vector<bool>& param_needs,
                                    const Policy& policy) {
  const int n = body.num_values();
  const std::vector<bool> needs = ValueNeeds(body, param_needs);
  const std::vector<bool> residual = ResidualValues(body, needs);
  std::vector<bool> candidate = residual;
  for (int k = static_cast<int>(body.ops.size()) - 1; k >= 0; --k) {
    const Op& op = body.ops[k];
    if (!candidate[op.output]) continue;
    for (int in : op.inputs) candidate[in] = true;
  }
  std::vector<SaveDecision> allowed(n, SaveDecision::kRecompute);
  for (const Op& op : body.ops) {
    if (candidate[op.output]) allowed[op.output] = policy.Decide(InfoOf(op, body.shapes[op.output]));
  }
  for (const Op& op : body.ops) {
    const int x = op.inputs.empty() ? -1 : op.inputs[0];
    if (op.kind == OpKind::kName && x >= body.num_params() &&
        allowed[op.output] != SaveDecision::kRecompute && allowed[x] == SaveDecision::kRecompute) {
      allowed[x] = allowed[op.output];
    }
  }
  // Prune: walk back from the residuals through what must be recomputed.
  std::vector<bool> read = residual;
  for (int k = static_cast<int>(body.ops.size()) - 1; k >= 0; --k) {
    const Op& op = body.ops[k];
    if (!read[op.output] || allowed[op.output] != SaveDecision::kRecompute) continue;
    for (int in : op.inputs) read[in] = true;
  }
  std::vector<SaveDecision> out(n, SaveDecision::kRecompute);
  for (int v = body.num_params(); v < n; ++v) {
    if (read[v]) out[v] = allowed[v];
  }
  // A kept name keeps the value it labels, and the other way round.
  for (const Op& op : body.ops) {
    if (op.kind != OpKind::kName || op.inputs[0] < body.num_params()) continue;
    if (out[op.output] != SaveDecision::kRecompute) out[op.inputs[0]] = out[op.output];
    else if (out[op.inputs[0]] != SaveDecision::kRecompute && read[op.output]) {
      out[op.output] = out[op.inputs[0]];
    }
  }
  return out;
}

std::vector<bool> ParamsRead(const Program& body, const std::vector<bool>& param_needs,
                             const std::vector<SaveDecision>& decisions) {
  std::vector<bool> read = ResidualValues(body, ValueNeeds(body, param_needs));
  for (int k = static_cast<int>(body.ops.size()) - 1; k >= 0; --k) {
    const Op& op = body.ops[k];
    if (!read[op.output] || decisions[op.output] != SaveDecision::kRecompute) continue;
    for (int in : op.inputs) read[in] = true;
  }
  read.resize(body.num_params());
  return read;
}

}  // namespace remat
