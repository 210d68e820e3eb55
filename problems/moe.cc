// moe: a small mixture of experts with top-2 routing (Mixtral's sparse MoE
// block, computed densely), each block a checkpoint region, on a router
// built to tie: the problem where a recomputed choice must equal the
// forward's (CONTRACT.md's tie rule).
//
// N tokens of width D, E experts of hidden width F, top-2. Block l, on x
// (N, D):
//   h = rms_norm(x, h.<l>.norm)
//   gates = top_k_softmax(h @ h.<l>.router, k=2)                     (N, E)
//   a = silu(h @ h.<l>.w1)                  (N, E F): every expert's first layer
//   o = permute(reshape(a, (N, E, F)), (1, 0, 2)) @ h.<l>.w2         (E, N, D)
//   x = x + reshape(reshape(gates, (N, 1, E)) @ permute(o, (1, 0, 2)), (N, D))
// and after the blocks:
//   loss = cross_entropy(rms_norm(x, norm_f) @ head, targets)
// Every expert runs on every token and the gates weight them: a token's
// output is Mixtral's (softmax over its two largest router logits, the
// others weighted 0), with the arithmetic of a dense dispatch.
//
// Ties: with ties=1 (the default) every router's experts 1 and 2 have the
// same column, so their logits are equal bit for bit for every token, in
// float32 and float64 alike; where the two are the second choice behind
// another expert, the lowest index (expert 1) must be chosen, in the
// forward pass and in every recomputation. A recomputation that breaks the
// tie otherwise routes the token to expert 2, whose weights differ: the
// gradient changes. Routers are fixed by the problem (FixedInput, drawn
// from a hash of the name), not by the case's seed, so that the tie is
// there for every seed. ties=0 makes the columns distinct (gradcheck's
// central differences are meaningless at a tie).
//
// Inputs: x (N, D) and targets (i32 (N), in [0, C)), not differentiated;
// norm_f (D), head (D, C); per block h.<l>.norm (D), .router (D, E), .w1
// (D, E F), .w2 (E, F, D). Gradients: every weight.

#include <cmath>
#include <cstdint>
#include <string>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

constexpr int64_t kTopK = 2;
constexpr double kRmsEps = 1e-6;

enum BlockWeight { kNorm, kRouter, kW1, kW2, kBlockWeights };
const char* const kBlockWeightNames[kBlockWeights] = {"norm", "router", "w1", "w2"};

std::string BlockInput(int64_t layer, int w) {
  return "h." + std::to_string(layer) + "." + kBlockWeightNames[w];
}

// Block args = {x, its kBlockWeights weights}.
Var Block(const std::vector<Var>& args, int64_t experts, int64_t hidden) {
  const Var x = args[0];
  const int64_t n = x.shape().dim(0), d = x.shape().dim(1);
  const Var h = apply("rms_norm", {x, args[1 + kNorm]}, {.scalar = kRmsEps});
  const Var gates = name(apply("top_k_softmax", {matmul(h, args[1 + kRouter])}, {.ints = {kTopK}}),
                         "gates");
  const Var a = name(apply("silu", {matmul(h, args[1 + kW1])}), "expert_hidden");
  const Var per_expert =
      apply("permute", {apply("reshape", {a}, {.ints = {n, experts, hidden}})}, {.ints = {1, 0, 2}});
  const Var o = matmul(per_expert, args[1 + kW2]);  // (E, N, D)
  const Var by_token = apply("permute", {o}, {.ints = {1, 0, 2}});  // (N, E, D)
  const Var mixed = matmul(apply("reshape", {gates}, {.ints = {n, 1, experts}}), by_token);
  return add(x, apply("reshape", {mixed}, {.ints = {n, d}}));
}

// SplitMix64 of a string's hash and an index: the routers' fixed draw.
double HashUniform(const std::string& s, uint64_t i) {
  uint64_t z = 1469598103934665603ull;
  for (char c : s) z = (z ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  z += (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0;  // [-1, 1)
}

class Moe : public Problem {
 public:
  std::string name() const override { return "moe"; }
  std::string description() const override {
    return "mixture of experts: L blocks (each a checkpoint region) of top-2 routing over E "
           "experts (Mixtral's block, dense dispatch), a router built to tie, cross-entropy";
  }
  std::vector<ParamSpec> params() const override {
    return {{"L", 8, 2, 1, 1 << 10, "blocks, each a checkpoint region"},
            {"N", 256, 6, 1, 1 << 20, "tokens"},
            {"D", 64, 8, 1, 1 << 16, "the width"},
            {"E", 8, 4, 3, 1 << 10, "experts (at least 3: experts 1 and 2 tie)"},
            {"F", 64, 8, 1, 1 << 16, "each expert's hidden width"},
            {"C", 64, 5, 2, 1 << 20, "classes of the targets"},
            {"ties", 1, 1, 0, 1, "1: every router's experts 1 and 2 tie for every token"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t layers = p.at("L"), n = p.at("N"), d = p.at("D"), experts = p.at("E");
    const int64_t hidden = p.at("F"), classes = p.at("C");
    std::vector<ParamDecl> params = {{"x", Shape({n, d})},
                                     {"targets", Shape({n}), DType::kI32},
                                     {"norm_f", Shape({d})},
                                     {"head", Shape({d, classes})}};
    constexpr int kFirstBlockInput = 4;
    for (int64_t l = 0; l < layers; ++l) {
      params.push_back({BlockInput(l, kNorm), Shape({d})});
      params.push_back({BlockInput(l, kRouter), Shape({d, experts})});
      params.push_back({BlockInput(l, kW1), Shape({d, experts * hidden})});
      params.push_back({BlockInput(l, kW2), Shape({experts, hidden, d})});
    }
    return Trace("moe", params, [&](const std::vector<Var>& in) {
      Var x = in[0];
      for (int64_t l = 0; l < layers; ++l) {
        std::vector<Var> args = {x};
        for (int w = 0; w < kBlockWeights; ++w) {
          args.push_back(in[kFirstBlockInput + l * kBlockWeights + w]);
        }
        x = checkpoint_n(
            [experts, hidden](const std::vector<Var>& a) { return Block(a, experts, hidden); },
            args, Policy(), "block");
      }
      const Var logits = matmul(apply("rms_norm", {x, in[2]}, {.scalar = kRmsEps}), in[3]);
      return apply("cross_entropy", {logits, in[1]});
    });
  }
  std::vector<std::string> wrt() const override { return {"norm_f", "head", "h.*"}; }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    const double d = static_cast<double>(p.at("D"));
    if (input == "x") return 1.0;
    if (input.find("norm") != std::string::npos) return 0.1;
    if (input.find(".w2") != std::string::npos) return 1.0 / std::sqrt(static_cast<double>(p.at("F")));
    return 1.0 / std::sqrt(d);
  }
  double InputOffset(const std::string& input, const ParamValues&) const override {
    return input.find("norm") != std::string::npos ? 1.0 : 0.0;
  }
  int64_t InputIntBound(const std::string& input, const ParamValues& p) const override {
    if (input == "targets") return p.at("C");
    return Problem::InputIntBound(input, p);
  }
  Tensor FixedInput(const std::string& input, const Shape& shape,
                    const ParamValues& p) const override {
    if (input.size() < 7 || input.compare(input.size() - 7, 7, ".router") != 0) return Tensor();
    const int64_t d = shape.dim(0), experts = shape.dim(1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    Tensor out = Tensor::Zeros(DType::kF32, shape);
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t drawn = p.at("ties") != 0 && e == 2 ? 1 : e;  // expert 2 copies expert 1
        out.f32()[i * experts + e] =
            static_cast<float>(scale * HashUniform(input, static_cast<uint64_t>(i * experts + drawn)));
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Problem> MakeMoe() { return std::make_unique<Moe>(); }

}  // namespace remat
