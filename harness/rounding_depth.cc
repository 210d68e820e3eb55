#include "harness/rounding_depth.h"

#include <algorithm>

#include "engines/api/error.h"
#include "engines/api/op_def.h"

namespace remat {
namespace {

// The forward depths of every value of `p`, from its parameters'; with
// `state`, each state op's under its parameter's name.
std::vector<double> ForwardDepths(const Program& p, const std::vector<double>& params,
                                  std::map<std::string, double>* state = nullptr);

// Runs a scan's steps forward: the carry's depth after the last step.
double ScanForward(const Program& p, const Op& op, const std::vector<double>& kf) {
  const int64_t length = p.shapes[op.inputs[1]].dim(0);
  std::vector<double> step(op.inputs.size());
  for (size_t j = 0; j < op.inputs.size(); ++j) step[j] = kf[op.inputs[j]];
  for (int64_t i = 0; i < length; ++i) {
    step[0] = ForwardDepths(*op.body, step)[op.body->output];
  }
  return step[0];
}

std::vector<double> ForwardDepths(const Program& p, const std::vector<double>& params,
                                  std::map<std::string, double>* state) {
  std::vector<double> kf(p.num_values(), 0.0);
  for (int i = 0; i < p.num_params(); ++i) kf[i] = params[i];
  for (const Op& op : p.ops) {
    double& out = kf[op.output];
    switch (op.kind) {
      case OpKind::kCheckpoint:
      case OpKind::kChain: {
        std::vector<double> body_params;
        for (int v : op.inputs) body_params.push_back(kf[v]);
        out = ForwardDepths(*op.body, body_params, state)[op.body->output];
        break;
      }
      case OpKind::kScan: out = ScanForward(p, op, kf); break;
      default: {  // a primitive: its OpDef's rule (Def throws for anything else)
        std::vector<Shape> shapes;
        std::vector<double> kf_in;
        for (int v : op.inputs) {
          shapes.push_back(p.shapes[v]);
          kf_in.push_back(kf[v]);
        }
        out = Def(op.kind).forward_depth(DepthArgs{shapes, p.shapes[op.output], kf_in, 0.0});
        if (op.kind == OpKind::kState && state != nullptr) (*state)[op.name] = out;
      }
    }
  }
  return kf;
}

// Adds one contribution of depth `k` to a cotangent: the first sets it, each
// further one is one more rounding (acc + contribution).
void Contribute(std::vector<double>* kb, std::vector<bool>* reached, int v, double k) {
  if (!(*reached)[v]) {
    (*kb)[v] = k;
    (*reached)[v] = true;
  } else {
    (*kb)[v] = std::max((*kb)[v], k) + 1;
  }
}

// The cotangent depths of `p`'s parameters, from the forward depths `kf`
// and the output's cotangent depth; reached[i] false where none arrives.
std::vector<double> BackwardDepths(const Program& p, const std::vector<double>& kf, double dout,
                                   std::vector<bool>* params_reached) {
  std::vector<double> kb(p.num_values(), 0.0);
  std::vector<bool> reached(p.num_values(), false);
  kb[p.output] = dout;
  reached[p.output] = true;
  for (int k = static_cast<int>(p.ops.size()) - 1; k >= 0; --k) {
    const Op& op = p.ops[k];
    if (!reached[op.output]) continue;
    const double dy = kb[op.output];
    const auto& in = op.inputs;
    switch (op.kind) {
      case OpKind::kCheckpoint:
      case OpKind::kChain: {
        std::vector<double> body_params;
        for (int v : in) body_params.push_back(kf[v]);
        const std::vector<double> body_kf = ForwardDepths(*op.body, body_params);
        std::vector<bool> body_reached;
        const std::vector<double> d = BackwardDepths(*op.body, body_kf, dy, &body_reached);
        for (size_t j = 0; j < in.size(); ++j) {
          if (body_reached[j]) Contribute(&kb, &reached, in[j], d[j]);
        }
        break;
      }
      case OpKind::kScan: {
        // The steps' forward depths, then their cotangents from the last
        // step: the carry's flows on; each xs slice keeps its own (the
        // stacked gradient's depth is the deepest slice's).
        const int64_t length = p.shapes[in[1]].dim(0);
        std::vector<std::vector<double>> step_params(length);
        std::vector<double> params(in.size());
        for (size_t j = 0; j < in.size(); ++j) params[j] = kf[in[j]];
        for (int64_t i = 0; i < length; ++i) {
          step_params[i] = params;
          params[0] = ForwardDepths(*op.body, params)[op.body->output];
        }
        double carry = dy;
        bool carry_reached = true;
        std::vector<double> xs(in.size(), 0.0);
        std::vector<bool> xs_reached(in.size(), false);
        for (int64_t i = length - 1; i >= 0 && carry_reached; --i) {
          const std::vector<double> step_kf = ForwardDepths(*op.body, step_params[i]);
          std::vector<bool> body_reached;
          const std::vector<double> d = BackwardDepths(*op.body, step_kf, carry, &body_reached);
          for (size_t j = 1; j < in.size(); ++j) {
            if (!body_reached[j]) continue;
            xs[j] = xs_reached[j] ? std::max(xs[j], d[j]) : d[j];
            xs_reached[j] = true;
          }
          carry_reached = body_reached[0];
          carry = d[0];
        }
        if (carry_reached) Contribute(&kb, &reached, in[0], carry);
        for (size_t j = 1; j < in.size(); ++j) {
          if (xs_reached[j]) Contribute(&kb, &reached, in[j], xs[j]);
        }
        break;
      }
      default: {  // a primitive: its OpDef's rule, one contribution per input
        std::vector<Shape> shapes;
        std::vector<double> kf_in;
        for (int v : in) {
          shapes.push_back(p.shapes[v]);
          kf_in.push_back(kf[v]);
        }
        std::vector<double> k(in.size(), 0.0);
        Def(op.kind).backward_depth(DepthArgs{shapes, p.shapes[op.output], kf_in, kf[op.output]},
                                    dy, k);
        for (size_t j = 0; j < in.size(); ++j) Contribute(&kb, &reached, in[j], k[j]);
      }
    }
  }
  params_reached->assign(reached.begin(), reached.begin() + p.num_params());
  return std::vector<double>(kb.begin(), kb.begin() + p.num_params());
}

}  // namespace

std::vector<double> RoundingDepths(const Program& program, const std::vector<int>& wrt) {
  const std::vector<double> kf =
      ForwardDepths(program, std::vector<double>(program.num_params(), 0.0));
  std::vector<bool> reached;
  const std::vector<double> kb = BackwardDepths(program, kf, 0.0, &reached);
  std::vector<double> out = {kf[program.output]};
  for (int w : wrt) {
    if (w < 0 || w >= program.num_params()) {
      throw Error(StrCat("RoundingDepths: program ", program.name, " has no parameter ", w));
    }
    out.push_back(reached[w] ? kb[w] : 0.0);
  }
  return out;
}

std::map<std::string, double> StateRoundingDepths(const Program& program) {
  std::map<std::string, double> state;
  ForwardDepths(program, std::vector<double>(program.num_params(), 0.0), &state);
  return state;
}

}  // namespace remat
