// layer_loss (seed 000_ab0869ac839392ec.txt, checkpointed_layer_loss): three
// dense layers with the middle matmul wrapped in jax.checkpoint.
//
//   x ─@w1─> a ─relu─> y1 ─┬─────────────────────┐
//                          └─ checkpoint(middle) ─> b ─relu─> y2 ─@w3─> y3 ─square─> s ─sum─> loss
//                             middle(y, w) = y @ w2
//
// Inputs: w1, w2, w3 (d,d), x (N,d). Gradients: w1, w2, w3.
// Forward FLOPs: 3 matmuls of 2Nd^2, two relus, square and sum of Nd each:
//   6Nd^2 + 4Nd.
// Residuals of the store-everything baseline (f32): y1, y2 and y3, 12Nd bytes,
// plus the arguments x, w2, w3 (w1 is not read: x needs no gradient).
// A recompute engine honouring the checkpoint keeps the region's inputs (y1,
// already kept for the middle matmul's backward, and w2). Nothing inside the
// region is recomputed: the region's output b is relu's residual, kept
// outside the region, and the matmul's backward reads only y1 and w2. JAX's
// recomputation is dead-code eliminated the same way; the seed's "activations
// of middle are dropped and recomputed" holds once relu is inside the region
// (dot_policy under nothing_saveable shows that case).

#include <cmath>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

Var Middle(Var y, Var w) { return matmul(y, w); }

class LayerLoss : public Problem {
 public:
  std::string name() const override { return "layer_loss"; }
  std::string description() const override {
    return "relu(x@w1) -> checkpoint(middle: @w2) -> relu -> @w3 -> sum of squares (seed 000)";
  }
  std::vector<ParamSpec> params() const override {
    return {{"d", 512, 16, 1, 1 << 16, "width: w* are (d,d)"},
            {"N", 256, 8, 1, 1 << 20, "batch: x is (N,d)"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t d = p.at("d"), n = p.at("N");
    return Trace("layer_loss",
                 {{"w1", Shape({d, d})}, {"w2", Shape({d, d})}, {"w3", Shape({d, d})},
                  {"x", Shape({n, d})}},
                 [](const std::vector<Var>& in) {
                   Var w1 = in[0], w2 = in[1], w3 = in[2], x = in[3];
                   Var y1 = relu(matmul(x, w1));
                   Var y2 = relu(checkpoint(Middle, Policy(), "middle")(y1, w2));
                   Var y3 = matmul(y2, w3);
                   return sum(square(y3));
                 });
  }
  std::vector<std::string> wrt() const override { return {"w1", "w2", "w3"}; }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    // He-uniform weights keep activations of order one through the layers.
    return input == "x" ? 1.0 : std::sqrt(6.0 / static_cast<double>(p.at("d")));
  }
};

}  // namespace

std::unique_ptr<Problem> MakeLayerLoss() { return std::make_unique<LayerLoss>(); }

}  // namespace remat
