// unreached: gradients that no cotangent reaches (CONTRACT.md 3.4 and 3.5).
// A user asks jax.grad for every parameter of a model that uses some of them
// only on a path the loss does not take (a head left in the graph, an
// auxiliary branch switched off); the gradient must come back as zeros of
// the parameter's shape, never missing, undefined or of another shape, and
// the dead branch must cost the checkpointing engines nothing they would
// not pay anyway.
//
//   x ─@w_in─> h ─checkpoint(block: sin(h @ w_live), with sin(h @ w_dead)
//                                        computed and dropped)─> y
//     ─scan over L steps of sin(c @ stack_live[i]): the body also computes
//      sin(c @ stack_dead[i]) and drops it ─> z
//     ─square─sum─> loss
// The dead branches use only op kinds the live path uses too, so that a
// wrong rule of any of them still shows in a reached gradient (gradcheck's
// planted rules); sin rather than relu, so that no reached entry is
// zeroed.
//   w_unused: read by no op at all.
//
// Inputs: w_in, w_live, w_dead, w_unused (d,d); stack_live, stack_dead
// (L,d,d); x (N,d). Gradients: every input but x. w_dead, stack_dead and
// w_unused get zeros; a -0.0 in a reached sum stays as eager leaves it.

#include <cmath>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

class Unreached : public Problem {
 public:
  std::string name() const override { return "unreached"; }
  std::string description() const override {
    return "gradients no cotangent reaches: a dead branch inside a checkpoint region and inside "
           "a scan's body, and a parameter no op reads; each must come back as zeros";
  }
  std::vector<ParamSpec> params() const override {
    return {{"L", 4, 3, 1, 1 << 16, "scan steps: stack_* are (L,d,d)"},
            {"d", 256, 8, 1, 1 << 16, "width: w_* are (d,d)"},
            {"N", 128, 4, 1, 1 << 20, "batch: x is (N,d)"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t l = p.at("L"), d = p.at("d"), n = p.at("N");
    const Shape w({d, d}), stack({l, d, d});
    return Trace("unreached",
                 {{"w_in", w},
                  {"w_live", w},
                  {"w_dead", w},
                  {"w_unused", w},
                  {"stack_live", stack},
                  {"stack_dead", stack},
                  {"x", Shape({n, d})}},
                 [](const std::vector<Var>& in) {
                   Var h = matmul(in[6], in[0]);
                   Var y = checkpoint_n(
                       [](const std::vector<Var>& a) {
                         Var dead = sin(matmul(a[0], a[2]));
                         (void)dead;  // computed, never read
                         return sin(matmul(a[0], a[1]));
                       },
                       {h, in[1], in[2]}, Policy(), "block");
                   Var z = scan_n(
                       [](Var c, const std::vector<Var>& s) {
                         Var dead = sin(matmul(c, s[1]));
                         (void)dead;
                         return sin(matmul(c, s[0]));
                       },
                       y, {in[4], in[5]}, "step");
                   return sum(square(z));
                 });
  }
  std::vector<std::string> wrt() const override {
    return {"w_in", "w_live", "w_dead", "w_unused", "stack_live", "stack_dead"};
  }
  std::vector<std::string> unreached_inputs() const override {
    return {"w_dead", "w_unused", "stack_dead"};
  }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    return input == "x" ? 1.0 : std::sqrt(6.0 / static_cast<double>(p.at("d")));
  }
};

}  // namespace

std::unique_ptr<Problem> MakeUnreached() { return std::make_unique<Unreached>(); }

}  // namespace remat
