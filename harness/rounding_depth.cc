#include "harness/rounding_depth.h"

#include <algorithm>

#include "engines/api/error.h"

namespace remat {
namespace {

int64_t LastDim(const Shape& s) { return s.rank() == 0 ? 1 : s.dim(s.rank() - 1); }
int64_t Rows(const Shape& s) {
  const int64_t c = LastDim(s);
  return c == 0 ? 0 : s.num_elements() / c;
}

// The forward depths of every value of `p`, from its parameters'.
std::vector<double> ForwardDepths(const Program& p, const std::vector<double>& params);

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

std::vector<double> ForwardDepths(const Program& p, const std::vector<double>& params) {
  std::vector<double> kf(p.num_values(), 0.0);
  for (int i = 0; i < p.num_params(); ++i) kf[i] = params[i];
  for (const Op& op : p.ops) {
    double in = 0;
    for (int v : op.inputs) in = std::max(in, kf[v]);
    const Shape& x = p.shapes[op.inputs.empty() ? op.output : op.inputs[0]];
    double& out = kf[op.output];
    switch (op.kind) {
      case OpKind::kMatMul: {
        const Shape& a = p.shapes[op.inputs[0]];
        out = in + static_cast<double>(LastDim(a));
        break;
      }
      case OpKind::kSum: out = in + static_cast<double>(x.num_elements()); break;
      case OpKind::kRelu:
      case OpKind::kName:
      case OpKind::kTranspose:
      case OpKind::kSplitHeads:
      case OpKind::kMergeHeads: out = in; break;
      case OpKind::kSin:
      case OpKind::kCos:
      case OpKind::kSquare:
      case OpKind::kGelu:
      case OpKind::kScale:
      case OpKind::kAdd:
      case OpKind::kBiasAdd:
      case OpKind::kMul: out = in + 1; break;
      case OpKind::kSoftmax: out = in + static_cast<double>(LastDim(x)) + 3; break;
      case OpKind::kLayerNorm: out = in + 2.0 * static_cast<double>(LastDim(x)) + 4; break;
      case OpKind::kCheckpoint:
      case OpKind::kChain: {
        std::vector<double> body_params;
        for (int v : op.inputs) body_params.push_back(kf[v]);
        out = ForwardDepths(*op.body, body_params)[op.body->output];
        break;
      }
      case OpKind::kScan: out = ScanForward(p, op, kf); break;
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
    const Shape& x = p.shapes[in.empty() ? op.output : in[0]];
    switch (op.kind) {
      case OpKind::kMatMul: {
        const Shape& c = p.shapes[op.output];
        const int r = c.rank() - 2;
        const double m = static_cast<double>(c.dim(r)), n = static_cast<double>(c.dim(r + 1));
        Contribute(&kb, &reached, in[0], std::max(dy, kf[in[1]]) + n);
        Contribute(&kb, &reached, in[1], std::max(dy, kf[in[0]]) + m);
        break;
      }
      case OpKind::kSum:
      case OpKind::kRelu:
      case OpKind::kName:
      case OpKind::kTranspose:
      case OpKind::kSplitHeads:
      case OpKind::kMergeHeads: Contribute(&kb, &reached, in[0], dy); break;
      case OpKind::kSin:
      case OpKind::kCos:
      case OpKind::kSquare:
      case OpKind::kGelu:
      case OpKind::kScale: Contribute(&kb, &reached, in[0], std::max(dy, kf[in[0]]) + 2); break;
      case OpKind::kAdd:
        Contribute(&kb, &reached, in[0], dy);
        Contribute(&kb, &reached, in[1], dy);
        break;
      case OpKind::kBiasAdd:
        // db sums dy over the rows: one rounding per row.
        Contribute(&kb, &reached, in[0], dy);
        Contribute(&kb, &reached, in[1], dy + static_cast<double>(Rows(x)));
        break;
      case OpKind::kMul:
        Contribute(&kb, &reached, in[0], std::max(dy, kf[in[1]]) + 1);
        Contribute(&kb, &reached, in[1], std::max(dy, kf[in[0]]) + 1);
        break;
      case OpKind::kSoftmax:
        Contribute(&kb, &reached, in[0],
                   std::max(dy, kf[op.output]) + static_cast<double>(LastDim(x)) + 3);
        break;
      case OpKind::kLayerNorm: {
        const double c = static_cast<double>(LastDim(x)), rows = static_cast<double>(Rows(x));
        Contribute(&kb, &reached, in[0], std::max({dy, kf[in[0]], kf[in[1]]}) + 3 * c + 6);
        Contribute(&kb, &reached, in[1], std::max(dy, kf[in[0]]) + 2 * c + rows + 4);
        Contribute(&kb, &reached, in[2], dy + rows);
        break;
      }
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

}  // namespace remat
