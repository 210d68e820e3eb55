// scan_stack (seed 001_d1a0ed5f6fdead2a.txt, grad_checkpointed_stack): L
// identical dense layers applied by lax.scan, the per-step body wrapped in
// jax.checkpoint.
//
//   y_0 = x;  y_{i+1} = checkpoint(layer)(y_i, weights[i]),  layer(y, w) = relu(y @ w)
//   loss = sum(y_L^2)
//
// Inputs: weights (L,d,d), x (N,d). Gradient: weights (argnums=0).
// Forward FLOPs: L (2Nd^2 + Nd) + 2Nd.
// Residuals of the store-everything baseline (f32): every step's output y_1..y_L,
// 4LNd bytes, plus the arguments. With the checkpointed body, JAX saves each
// step's carry (y_0..y_{L-1}): also O(L) carries, but no relu output inside a
// step; the per-step matmul runs twice.

#include <cmath>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

Var Layer(Var y, Var w) { return relu(matmul(y, w)); }

class ScanStack : public Problem {
 public:
  std::string name() const override { return "scan_stack"; }
  std::string description() const override {
    return "scan of checkpoint(relu(y@w)) over L layers, loss sum(y_L^2) (seed 001)";
  }
  std::vector<ParamSpec> params() const override {
    return {{"L", 8, 8, 1, 1 << 20, "depth: weights is (L,d,d)"},
            {"d", 512, 16, 1, 1 << 16, "width"},
            {"N", 256, 8, 1, 1 << 20, "batch: x is (N,d)"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t l = p.at("L"), d = p.at("d"), n = p.at("N");
    return Trace("scan_stack", {{"weights", Shape({l, d, d})}, {"x", Shape({n, d})}},
                 [](const std::vector<Var>& in) {
                   Var y = scan(checkpoint(Layer, Policy(), "layer"), in[1], in[0]);
                   return sum(square(y));
                 });
  }
  std::vector<std::string> wrt() const override { return {"weights"}; }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    return input == "x" ? 1.0 : std::sqrt(6.0 / static_cast<double>(p.at("d")));
  }
};

}  // namespace

std::unique_ptr<Problem> MakeScanStack() { return std::make_unique<ScanStack>(); }

}  // namespace remat
