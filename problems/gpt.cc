// gpt: a nanoGPT-shaped language model (Karpathy's nanoGPT model.py, GPT-2's
// layout), the model people checkpoint most: token and position embeddings,
// L pre-LN blocks of causal multi-head self-attention and an MLP, dropout
// 0.1 after the embeddings, on the attention probabilities and on both
// residual branches, a final LayerNorm, the LM head tied to the token
// embedding, and cross-entropy on integer targets. Each block is a
// checkpoint region (torch.utils.checkpoint around each Block, jax.checkpoint
// around each layer): policies apply per block, and a schedule (--schedule)
// sees the blocks as a chain.
//
// N = B*T rows, Dh = D/H, F = 4D. Block l, on x (N, D):
//   h = layer_norm(x, ln_1)
//   q, k, v = split_heads(h @ attn.wq), ... wk, ... wv                    (B*H, T, Dh)
//   scores = masked_fill(scale(q @ transpose(k), 1/sqrt(Dh)), causal, -1e9)
//   attn_probs = dropout(softmax(scores))                                 (B*H, T, T)
//   x = x + dropout(merge_heads(attn_probs @ v) @ attn.c_proj)
//   mlp_hidden = gelu(layer_norm(x, ln_2) @ mlp.c_fc)                     (N, F)
//   x = x + dropout(mlp_hidden @ mlp.c_proj)
// and around the blocks:
//   x = dropout(embedding(wte, idx) + embedding(wpe, pos))
//   loss = cross_entropy(layer_norm(x, ln_f) @ transpose(wte), targets)
//
// Differences from nanoGPT, none of which changes what is saved or
// recomputed in kind: q, k and v are three (D, D) maps, not one (D, 3D) map
// split; linear layers have no biases (nanoGPT's bias=False); gelu is the
// tanh form; the causal mask is an i32 input (nanoGPT's registered `bias`
// buffer) filled with -1e9, which softmax maps to exactly 0 as it does -inf.
//
// Randomness (CONTRACT.md): one seed input (i32[]); each dropout op has its
// own key (0 for the embeddings, 10 l + 1..3 in block l), so every mask is a
// pure function of (seed, key, element) and a recomputed block redraws the
// forward's masks.
//
// Inputs: idx and targets (i32 (N), in [0, V)), pos (i32 (N), row mod T: the
// positions), causal (i32 (B*H, T, T): 1 above the diagonal), seed; wte
// (V, D), wpe (T, D), ln_f.weight and ln_f.bias (D), and per block
// h.<l>.ln_1.weight, .ln_1.bias, .attn.wq, .attn.wk, .attn.wv,
// .attn.c_proj, .ln_2.weight, .ln_2.bias, .mlp.c_fc (D, F), .mlp.c_proj
// (F, D). Gradients: every float input. Weights are uniform with GPT-2's
// standard deviation 0.02 (the residual projections 0.02 / sqrt(2L));
// LayerNorm weights 1 +- 0.1 and biases +- 0.1, so that each gets a
// gradient that is not a symmetry's zero.
//
// GPT-2 small (124M parameters) for dry runs and sweeps:
//   --param V=50257 --param T=1024 --param D=768 --param H=12 --param L=12 --param B=1
//
// gpt_scan: the same model with its blocks as one lax.scan over layers (the
// form JAX users write with nn.scan or jax.lax.scan: a --schedule reverses
// the scan). Each block's weights are stacked on a leading L axis, named
// h.<weight> (h.attn.wq: (L, D, D)); the causal mask is a const of the scan
// (every step sees it whole, as a scan body closes over it); and a block's
// dropout masks differ per step through data, a stacked per-step seed
// (seeds: i32[L], CONTRACT.md R2.6), with keys 1..3 in every step. The
// embeddings' dropout draws from `seed` with key 0.

#include <cmath>
#include <string>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

constexpr double kDropout = 0.1;
constexpr double kMaskFill = -1e9;

enum BlockWeight {
  kLn1Weight,
  kLn1Bias,
  kWq,
  kWk,
  kWv,
  kAttnProj,
  kLn2Weight,
  kLn2Bias,
  kFc,
  kMlpProj,
  kBlockWeights
};
const char* const kBlockWeightNames[kBlockWeights] = {
    "ln_1.weight", "ln_1.bias",   "attn.wq",     "attn.wk",  "attn.wv",
    "attn.c_proj", "ln_2.weight", "ln_2.bias", "mlp.c_fc", "mlp.c_proj"};

std::string BlockInput(int64_t layer, int w) {
  return "h." + std::to_string(layer) + "." + kBlockWeightNames[w];
}

Var Dropout(Var x, Var seed, int64_t key) {
  return apply("dropout", {x, seed}, {.scalar = kDropout, .ints = {key}});
}

// Block `layer`: args = {x, causal, seed, its kBlockWeights weights}.
Var Block(const std::vector<Var>& args, int64_t batch, int64_t heads, int64_t layer) {
  Var x = args[0];
  const Var causal = args[1], seed = args[2];
  auto w = [&](BlockWeight i) { return args[3 + i]; };
  const Var h = layer_norm(x, w(kLn1Weight), w(kLn1Bias));
  const Var q = split_heads(matmul(h, w(kWq)), batch, heads);
  const Var k = split_heads(matmul(h, w(kWk)), batch, heads);
  const Var v = split_heads(matmul(h, w(kWv)), batch, heads);
  const double head_width = static_cast<double>(q.shape().dim(2));
  const Var logits = scale(matmul(q, transpose(k)), 1.0 / std::sqrt(head_width));
  const Var scores = apply("masked_fill", {logits, causal}, {.scalar = kMaskFill});
  const Var probs = name(Dropout(softmax(scores), seed, 10 * layer + 1), "attn_probs");
  const Var context = merge_heads(matmul(probs, v), batch);
  x = add(x, Dropout(matmul(context, w(kAttnProj)), seed, 10 * layer + 2));
  const Var hidden =
      name(gelu(matmul(layer_norm(x, w(kLn2Weight), w(kLn2Bias)), w(kFc))), "mlp_hidden");
  return add(x, Dropout(matmul(hidden, w(kMlpProj)), seed, 10 * layer + 3));
}

Shape BlockWeightShape(int w, int64_t d) {
  switch (static_cast<BlockWeight>(w)) {
    case kLn1Weight:
    case kLn1Bias:
    case kLn2Weight:
    case kLn2Bias: return Shape({d});
    case kFc: return Shape({d, 4 * d});
    case kMlpProj: return Shape({4 * d, d});
    default: return Shape({d, d});
  }
}

class Gpt : public Problem {
 public:
  explicit Gpt(bool scan_form) : scan_form_(scan_form) {}
  std::string name() const override { return scan_form_ ? "gpt_scan" : "gpt"; }
  std::string description() const override {
    return scan_form_
               ? "nanoGPT with its blocks as one scan over layers (stacked weights, per-step "
                 "seeds, the causal mask a const of the scan)"
               : "nanoGPT: token and position embeddings, L pre-LN causal attention + MLP blocks "
                 "(each a checkpoint region), dropout 0.1, tied LM head, cross-entropy on "
                 "integer targets";
  }
  std::vector<ParamSpec> params() const override {
    return {{"L", 4, 2, 1, 1 << 10, "blocks, each a checkpoint region"},
            {"D", 128, 8, 1, 1 << 16, "n_embd: the width; F = 4D"},
            {"H", 4, 2, 1, 1 << 10, "heads; must divide D"},
            {"T", 64, 4, 1, 1 << 16, "block_size: the sequence length"},
            {"B", 4, 3, 1, 1 << 16, "batch (tests: 3, a row of wpe sums 3)"},
            {"V", 512, 16, 2, 1 << 20, "vocab_size"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t layers = p.at("L"), d = p.at("D"), heads = p.at("H"), t = p.at("T");
    const int64_t batch = p.at("B"), vocab = p.at("V"), n = batch * t;
    std::vector<ParamDecl> params = {
        {"idx", Shape({n}), DType::kI32},
        {"targets", Shape({n}), DType::kI32},
        {"pos", Shape({n}), DType::kI32},
        {"causal", Shape({batch * heads, t, t}), DType::kI32},
        {"seed", Shape(), DType::kI32},
    };
    if (scan_form_) params.push_back({"seeds", Shape({layers}), DType::kI32});
    const int wte_at = static_cast<int>(params.size());
    params.push_back({"wte", Shape({vocab, d})});
    params.push_back({"wpe", Shape({t, d})});
    params.push_back({"ln_f.weight", Shape({d})});
    params.push_back({"ln_f.bias", Shape({d})});
    const int first_block_input = static_cast<int>(params.size());
    if (scan_form_) {
      for (int w = 0; w < kBlockWeights; ++w) {
        params.push_back({std::string("h.") + kBlockWeightNames[w],
                          BlockWeightShape(w, d).PrependLeading(layers)});
      }
    } else {
      for (int64_t l = 0; l < layers; ++l) {
        for (int w = 0; w < kBlockWeights; ++w) {
          params.push_back({BlockInput(l, w), BlockWeightShape(w, d)});
        }
      }
    }
    return Trace(name(), params, [&](const std::vector<Var>& in) {
      const Var idx = in[0], targets = in[1], pos = in[2], causal = in[3], seed = in[4];
      const Var wte = in[wte_at], wpe = in[wte_at + 1];
      Var x = Dropout(add(apply("embedding", {wte, idx}), apply("embedding", {wpe, pos})), seed, 0);
      const auto block_inputs = in.begin() + first_block_input;
      if (scan_form_) {
        std::vector<Var> xs = {in[5]};  // seeds, then the stacked weights
        xs.insert(xs.end(), block_inputs, block_inputs + kBlockWeights);
        x = scan_with_consts(
            [batch, heads](Var carry, const std::vector<Var>& step, const std::vector<Var>& consts) {
              // Block's args: {x, causal, seed, weights...}; step = {seed_i, weights_i...}.
              std::vector<Var> args = {carry, consts[0]};
              args.insert(args.end(), step.begin(), step.end());
              return checkpoint_n(
                  [batch, heads](const std::vector<Var>& a) { return Block(a, batch, heads, 0); },
                  args, Policy(), "block");
            },
            x, xs, {causal}, "blocks");
      } else {
        for (int64_t l = 0; l < layers; ++l) {
          std::vector<Var> args = {x, causal, seed};
          args.insert(args.end(), block_inputs + l * kBlockWeights,
                      block_inputs + (l + 1) * kBlockWeights);
          x = checkpoint_n(
              [batch, heads, l](const std::vector<Var>& a) { return Block(a, batch, heads, l); },
              args, Policy(), "block");
        }
      }
      const Var logits = matmul(layer_norm(x, in[wte_at + 2], in[wte_at + 3]), transpose(wte));
      return apply("cross_entropy", {logits, targets});
    });
  }
  std::vector<std::string> wrt() const override {
    return {"wte", "wpe", "ln_f.weight", "ln_f.bias", "h.*"};
  }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    const double sd = 0.02 * std::sqrt(3.0);  // uniform with standard deviation 0.02
    if (input.find("ln_") != std::string::npos) return 0.1;
    if (input.find("c_proj") != std::string::npos) {
      return sd / std::sqrt(2.0 * static_cast<double>(p.at("L")));
    }
    return sd;
  }
  double InputOffset(const std::string& input, const ParamValues&) const override {
    return input.find("ln_") != std::string::npos && input.find(".weight") != std::string::npos
               ? 1.0
               : 0.0;
  }
  int64_t InputIntBound(const std::string& input, const ParamValues& p) const override {
    if (input == "idx" || input == "targets") return p.at("V");
    return Problem::InputIntBound(input, p);
  }
  Tensor FixedInput(const std::string& input, const Shape& shape,
                    const ParamValues& p) const override {
    const int64_t t = p.at("T");
    if (input == "pos") {  // row r is position r mod T
      Tensor out = Tensor::Zeros(DType::kI32, shape);
      for (int64_t r = 0; r < shape.num_elements(); ++r) out.i32()[r] = static_cast<int32_t>(r % t);
      return out;
    }
    if (input == "causal") {  // query i sees keys j <= i
      Tensor out = Tensor::Zeros(DType::kI32, shape);
      for (int64_t e = 0; e < shape.num_elements(); ++e) {
        const int64_t i = (e / t) % t, j = e % t;
        out.i32()[e] = j > i ? 1 : 0;
      }
      return out;
    }
    return Tensor();
  }

 private:
  bool scan_form_;
};

}  // namespace

std::unique_ptr<Problem> MakeGpt() { return std::make_unique<Gpt>(/*scan_form=*/false); }
std::unique_ptr<Problem> MakeGptScan() { return std::make_unique<Gpt>(/*scan_form=*/true); }

}  // namespace remat
