// transformer_stack (seed 004_87e0632b463c855c.txt, TransformerBlock and
// CheckpointedTransformer with checkpoint_every=1): L transformer blocks
// applied by lax.scan, each block wrapped in jax.checkpoint, so per-block
// checkpointing is the policy as written.
//
// A block is post-LN, as the seed's TransformerBlock (norm after each
// residual add), with no biases in its linear maps (the seed's
// nn.MultiheadAttention and nn.Linear have them; they add nothing to what is
// saved or recomputed). N = B*S rows, Dh = D/H (H must divide D: tracing
// fails otherwise, naming split_heads and the shapes):
//
//   q, k, v = split_heads(x @ wq), split_heads(x @ wk), split_heads(x @ wv)   (B*H, S, Dh)
//   attn_probs = softmax(scale(q @ transpose(k), 1/sqrt(Dh)))                (B*H, S, S)
//   attn_out = merge_heads(attn_probs @ v)                                    (N, D)
//   h = layer_norm(x + attn_out @ wo, ln1_gamma, ln1_beta)
//   ffn_hidden = gelu(h @ w1)        (tanh form; the seed's nn.GELU is erf)   (N, F)
//   y = layer_norm(h + ffn_hidden @ w2, ln2_gamma, ln2_beta)
//
// attn_probs, attn_out and ffn_hidden are checkpoint_name labels, so
// policies can keep attention and recompute the FFN (Megatron's selective
// recomputation: save_only_these_names:attn_probs,attn_out) or the reverse
// (save_only_these_names:ffn_hidden). As in JAX, a name marks the value the
// name op returns: a consumer that reads it (attn_probs @ v, attn_out @ wo,
// ffn_hidden @ w2) finds it saved, but softmax's own backward reads softmax's
// output (the value before the name), so under the first policy the scores
// and softmax are still recomputed; gelu's backward reads its input, so
// under the second the h @ w1 matmul is.
//
//   loss = sum((y_L + target)^2)
//
// (The seed's out.sum() has a vanishing gradient through a final LayerNorm
// whose gamma is 1 and beta 0; a squared error against -target gives every
// weight a gradient.)
//
// Inputs: wq, wk, wv, wo (L,D,D), ln1_gamma, ln1_beta (L,D), w1 (L,D,F),
// w2 (L,F,D), ln2_gamma, ln2_beta (L,D), x and target (N,D). Gradients: the
// ten weight stacks. Weights are uniform with variance 1/fan_in (w1, before
// the gelu, 2/fan_in: He); gammas 1 +- 0.1, betas +- 0.1.
// Forward FLOPs (engines/api/kernels.h's count):
//   L (8ND^2 + 4NDF + 4NSD + 6NSH + 16ND + NF) + 3ND
// (projections, FFN, the two attention matmuls, scale and softmax over
// B*H*S*S = NSH scores, two residual adds and two layer norms, gelu; then
// the loss's add, square and sum.) At the defaults (L=12, D=512, H=8,
// F=2048, S=256, B=4) that is 84 GFLOP.
//
// All tensors are rank <= 3: projections and the FFN run on (N, D); heads
// live as (B*H, S, Dh).

#include <cmath>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

// The weights of one block, in the order of the program's parameters.
enum Weight { kWq, kWk, kWv, kWo, kLn1Gamma, kLn1Beta, kW1, kW2, kLn2Gamma, kLn2Beta, kWeights };

const char* const kWeightNames[kWeights] = {"wq",  "wk", "wv", "wo",        "ln1_gamma",
                                            "ln1_beta", "w1", "w2", "ln2_gamma", "ln2_beta"};

// One block: args[0] is the carry x (N, D), args[1 + w] weight w of this
// block.
Var Block(const std::vector<Var>& args, int64_t batch, int64_t heads) {
  const Var x = args[0];
  auto w = [&](Weight i) { return args[1 + i]; };
  const Var q = split_heads(matmul(x, w(kWq)), batch, heads);
  const Var k = split_heads(matmul(x, w(kWk)), batch, heads);
  const Var v = split_heads(matmul(x, w(kWv)), batch, heads);
  const double head_width = static_cast<double>(q.shape().dim(2));
  const Var scores = scale(matmul(q, transpose(k)), 1.0 / std::sqrt(head_width));
  const Var probs = name(softmax(scores), "attn_probs");
  const Var context = name(merge_heads(matmul(probs, v), batch), "attn_out");
  const Var h = layer_norm(add(x, matmul(context, w(kWo))), w(kLn1Gamma), w(kLn1Beta));
  const Var hidden = name(gelu(matmul(h, w(kW1))), "ffn_hidden");
  return layer_norm(add(h, matmul(hidden, w(kW2))), w(kLn2Gamma), w(kLn2Beta));
}

class TransformerStack : public Problem {
 public:
  std::string name() const override { return "transformer_stack"; }
  std::string description() const override {
    return "scan of checkpoint(post-LN transformer block: attention, FFN, gelu) over L blocks, "
           "loss sum((y+target)^2) (seed 004)";
  }
  std::vector<ParamSpec> params() const override {
    return {{"L", 12, 2, 1, 1 << 16, "depth: blocks, applied by scan"},
            {"D", 512, 8, 1, 1 << 16, "d_model: the width; x is (B*S,D)"},
            {"H", 8, 2, 1, 1 << 12, "heads; must divide D"},
            {"F", 2048, 16, 1, 1 << 18, "d_ff: the FFN's hidden width"},
            {"S", 256, 4, 1, 1 << 16, "sequence length"},
            {"B", 4, 2, 1, 1 << 16, "batch"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t l = p.at("L"), d = p.at("D"), heads = p.at("H"), f = p.at("F");
    const int64_t batch = p.at("B"), n = batch * p.at("S");
    std::vector<ParamDecl> params;
    for (int i = 0; i < kWeights; ++i) {
      Shape shape;
      switch (static_cast<Weight>(i)) {
        case kW1: shape = Shape({l, d, f}); break;
        case kW2: shape = Shape({l, f, d}); break;
        case kLn1Gamma:
        case kLn1Beta:
        case kLn2Gamma:
        case kLn2Beta: shape = Shape({l, d}); break;
        default: shape = Shape({l, d, d}); break;
      }
      params.push_back({kWeightNames[i], shape});
    }
    params.push_back({"x", Shape({n, d})});
    params.push_back({"target", Shape({n, d})});
    return Trace("transformer_stack", params, [batch, heads](const std::vector<Var>& in) {
      const std::vector<Var> weights(in.begin(), in.begin() + kWeights);
      const Var y = scan_n(
          [batch, heads](Var carry, const std::vector<Var>& w) {
            std::vector<Var> args = {carry};
            args.insert(args.end(), w.begin(), w.end());
            return checkpoint_n(
                [batch, heads](const std::vector<Var>& a) { return Block(a, batch, heads); },
                args, Policy(), "block");
          },
          in[kWeights], weights, "blocks");
      return sum(square(add(y, in[kWeights + 1])));
    });
  }
  std::vector<std::string> wrt() const override {
    return std::vector<std::string>(kWeightNames, kWeightNames + kWeights);
  }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    const double d = static_cast<double>(p.at("D")), f = static_cast<double>(p.at("F"));
    if (input == "w1") return std::sqrt(6.0 / d);
    if (input == "w2") return std::sqrt(3.0 / f);
    if (input == "wq" || input == "wk" || input == "wv" || input == "wo") {
      return std::sqrt(3.0 / d);
    }
    if (input.find("_gamma") != std::string::npos || input.find("_beta") != std::string::npos) {
      return 0.1;
    }
    return 1.0;  // x, target
  }
  double InputOffset(const std::string& input, const ParamValues&) const override {
    return input.find("_gamma") != std::string::npos ? 1.0 : 0.0;
  }
};

}  // namespace

std::unique_ptr<Problem> MakeTransformerStack() { return std::make_unique<TransformerStack>(); }

}  // namespace remat
