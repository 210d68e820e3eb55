// The sin chains of the JAX tutorial "Gradient checkpointing with
// jax.checkpoint" (seed 002_13e8acd3a02aef80.txt).
//
// sin_chain: f2 of the tutorial, each g checkpointed, each result labelled
// with checkpoint_name 'a', 'b', 'c' (the tutorial's f4).
//   g(W, x) = sin(W @ x)
//   x (4,1) ─checkpoint(g)(W1,·)─> (5,1) ─checkpoint(g)(W2,·)─> (6,1) ─checkpoint(g)(W3,·)─> (7,1) ─sum─> loss
//   Inputs W1 (5,4), W2 (6,5), W3 (7,6), x (4,1); gradients of all four.
//   Forward FLOPs: 2(20 + 30 + 42) matmul + 18 sin + 7 sum = 209.
//   Store-everything residuals: each matmul output (for sin) and each sin
//   output (for the next matmul): 5+5+6+6+7 floats = 116 bytes. With the
//   checkpoints, JAX saves the two sin outputs that feed the next g (and the
//   arguments), 44 bytes.
//
// sin_plain: chain_compose([sin] * D) applied to a scalar: D residuals.
// sin_recursive: recursive_checkpoint([sin] * D): O(log2 D) residuals (JAX
//   saves 4, 5, 6, 7 values for D = 8, 16, 32, 64, the argument included).
//   Forward FLOPs of both: D.

#include <functional>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

Var G(Var w, Var x) { return sin(matmul(w, x)); }

class SinChain : public Problem {
 public:
  std::string name() const override { return "sin_chain"; }
  std::string description() const override {
    return "sum(g(W3, g(W2, g(W1, x)))), g(W, x) = sin(W@x), each g checkpointed (seed 002, f2)";
  }
  std::vector<ParamSpec> params() const override { return {}; }
  Program Build(const ParamValues&) const override {
    return Trace("sin_chain",
                 {{"W1", Shape({5, 4})}, {"W2", Shape({6, 5})}, {"W3", Shape({7, 6})},
                  {"x", Shape({4, 1})}},
                 [](const std::vector<Var>& in) {
                   // Each g's result is labelled as in the tutorial's f4, so
                   // that names-policies have something to name.
                   auto g = checkpoint(G, Policy(), "g");
                   Var x = remat::name(g(in[0], in[3]), "a");
                   x = remat::name(g(in[1], x), "b");
                   x = remat::name(g(in[2], x), "c");
                   return sum(x);
                 });
  }
  std::vector<std::string> wrt() const override { return {"W1", "W2", "W3", "x"}; }
};

using Fn = std::function<Var(Var)>;

// The tutorial's recursive_checkpoint over n copies of sin.
Fn RecursiveCheckpoint(int64_t n) {
  if (n == 1) return [](Var x) { return sin(x); };
  if (n == 2) return [](Var x) { return sin(sin(x)); };
  Fn f1 = RecursiveCheckpoint(n / 2);
  Fn f2 = RecursiveCheckpoint(n - n / 2);
  return [f1, f2](Var x) { return f1(checkpoint(f2)(x)); };
}

class SinScalarChain : public Problem {
 public:
  explicit SinScalarChain(bool recursive) : recursive_(recursive) {}
  std::string name() const override { return recursive_ ? "sin_recursive" : "sin_plain"; }
  std::string description() const override {
    return recursive_ ? "recursive_checkpoint([sin] * D) at a scalar: O(log D) residuals (seed 002)"
                      : "chain_compose([sin] * D) at a scalar: D residuals (seed 002)";
  }
  std::vector<ParamSpec> params() const override {
    return {{"D", 8, 8, 1, 1 << 16, "chain length"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t depth = p.at("D");
    const bool recursive = recursive_;
    return Trace(name(), {{"x", Shape()}}, [depth, recursive](const std::vector<Var>& in) {
      if (recursive) return RecursiveCheckpoint(depth)(in[0]);
      Var x = in[0];
      for (int64_t i = 0; i < depth; ++i) x = sin(x);
      return x;
    });
  }
  std::vector<std::string> wrt() const override { return {"x"}; }
  double InputScale(const std::string&, const ParamValues&) const override { return 3.0; }

 private:
  bool recursive_;
};

}  // namespace

std::unique_ptr<Problem> MakeSinChain() { return std::make_unique<SinChain>(); }
std::unique_ptr<Problem> MakeSinPlain() { return std::make_unique<SinScalarChain>(false); }
std::unique_ptr<Problem> MakeSinRecursive() { return std::make_unique<SinScalarChain>(true); }

}  // namespace remat
