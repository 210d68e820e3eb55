// dot_policy (seed 003_9e140995a11d6ea6.txt, checkpoint_dot_policy): the whole
// pipeline inside jax.checkpoint with dots_with_no_batch_dims_saveable.
//
//   checkpoint[dots_with_no_batch_dims_saveable](
//     x ─@w1─> h1 ─relu─> r ─@w2─> h2 ─square─> s ─sum─> loss)
//
// Inputs: w1, w2 (d,d), x (N,d). Gradients: w1, w2.
// Forward FLOPs: 2 matmuls of 2Nd^2, relu, square and sum of Nd each:
//   4Nd^2 + 3Nd.
// Residuals of the store-everything baseline (f32): r and h2, 8Nd bytes,
// plus x and w2. The policy saves the two matmul outputs h1 and h2 and
// recomputes relu from h1.

#include <cmath>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

Var Pipeline(Var w1, Var w2, Var x) {
  Var y = matmul(x, w1);
  y = relu(y);
  y = matmul(y, w2);
  return sum(square(y));
}

class DotPolicy : public Problem {
 public:
  std::string name() const override { return "dot_policy"; }
  std::string description() const override {
    return "checkpoint[dots_with_no_batch_dims_saveable](x@w1 -> relu -> @w2 -> square -> sum) "
           "(seed 003)";
  }
  std::vector<ParamSpec> params() const override {
    return {{"d", 512, 16, 1, 1 << 16, "width: w1, w2 are (d,d)"},
            {"N", 256, 8, 1, 1 << 20, "batch: x is (N,d)"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t d = p.at("d"), n = p.at("N");
    return Trace("dot_policy",
                 {{"w1", Shape({d, d})}, {"w2", Shape({d, d})}, {"x", Shape({n, d})}},
                 [](const std::vector<Var>& in) {
                   auto f = checkpoint(Pipeline, Policy(PolicyKind::kDotsWithNoBatchDimsSaveable),
                                       "pipeline");
                   return f(in[0], in[1], in[2]);
                 });
  }
  std::vector<std::string> wrt() const override { return {"w1", "w2"}; }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    return input == "x" ? 1.0 : std::sqrt(6.0 / static_cast<double>(p.at("d")));
  }
};

}  // namespace

std::unique_ptr<Problem> MakeDotPolicy() { return std::make_unique<DotPolicy>(); }

}  // namespace remat
