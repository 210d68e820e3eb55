// mlp_chain: a chain of blocks, as PyTorch users write one (seed 004:
// checkpoint per layer of an nn.Sequential, checkpoint_sequential): L dense
// blocks of differing widths, each wrapped in its own checkpoint by a plain
// loop (no scan), so the blocks differ in cost and size.
//
//   y_0 = x;  y_{i+1} = checkpoint(block)(y_i, w_i),  block(y, w) = relu(y @ w)
//   loss = sum(y_L^2)
//
// Widths cycle d, 2d, d/2 (an expand-contract MLP): w_i is (W(i), W(i+1)) with
// W(i) = d, 2d, d/2 for i mod 3 = 0, 1, 2. Inputs: w0..w{L-1}, x (N,d).
// Gradient: every w_i. Forward FLOPs: sum_i N W(i+1) (2 W(i) + 1) + 2 N W(L).
// A step of the chain is a block: carries are N W(i) floats, a block's
// residuals its matmul output's relu (N W(i+1)) and its input.
// ApplySchedule groups the L checkpoints into one chain, so every schedule
// (`--schedule revolve:4`, `budget:...`) applies without editing this file.

#include <algorithm>
#include <cmath>
#include <string>

#include "engines/api/error.h"
#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

int64_t Width(int64_t i, int64_t d) {
  switch (i % 3) {
    case 0: return d;
    case 1: return 2 * d;
    default: return std::max<int64_t>(1, d / 2);
  }
}

Var Block(Var y, Var w) { return relu(matmul(y, w)); }

class MlpChain : public Problem {
 public:
  std::string name() const override { return "mlp_chain"; }
  std::string description() const override {
    return "L checkpointed relu(y@w_i) blocks of widths d, 2d, d/2, ... in a loop: a chain of "
           "blocks that differ (seed 004's checkpoint_sequential)";
  }
  std::vector<ParamSpec> params() const override {
    // By default the activations (N W(i) floats a block) outweigh the
    // weights (W(i) W(i+1)) eight to one, as in training with large batches:
    // what a schedule saves shows in the peak.
    return {{"L", 16, 7, 1, 1 << 14, "blocks: weights w0..w{L-1}"},
            {"d", 256, 16, 2, 1 << 15, "base width: blocks map d -> 2d -> d/2 -> d ..."},
            {"N", 2048, 8, 1, 1 << 20, "batch: x is (N,d)"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t l = p.at("L"), d = p.at("d"), n = p.at("N");
    std::vector<ParamDecl> decls;
    for (int64_t i = 0; i < l; ++i) {
      decls.push_back({StrCat("w", i), Shape({Width(i, d), Width(i + 1, d)})});
    }
    decls.push_back({"x", Shape({n, d})});
    return Trace("mlp_chain", decls, [l](const std::vector<Var>& in) {
      Var y = in[l];
      for (int64_t i = 0; i < l; ++i) y = checkpoint(Block, Policy(), "block")(y, in[i]);
      return sum(square(y));
    });
  }
  std::vector<std::string> wrt() const override { return {"w*"}; }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    if (input == "x") return 1.0;
    // He-uniform for the block's fan-in.
    const int64_t i = std::stoll(input.substr(1));
    return std::sqrt(6.0 / static_cast<double>(Width(i, p.at("d"))));
  }
};

}  // namespace

std::unique_ptr<Problem> MakeMlpChain() { return std::make_unique<MlpChain>(); }

}  // namespace remat
