#include "harness/random_program.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/tracer.h"

namespace remat {
namespace {

const char* const kLabels[] = {"a", "b", "c"};
const char* const kPolicies[] = {
    "nothing_saveable",
    "everything_saveable",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "save_only_these_names:a",
    "save_any_names_but_these:b",
    "save_anything_except_these_names:c",
    "save_from_both_policies:dots_saveable+save_only_these_names:b",
    "save_and_offload_only_these_names:a/b",
    "offload_dot_with_no_batch_dims",
};
// memory_budget:B (engines/budget): fractions of what everything_saveable
// keeps (both ends included) and byte budgets, one below any residual.
const char* const kBudgets[] = {"0", "0.3", "0.5", "1", "64B", "1KiB"};

// Builds one program with the tracer. std::mt19937_64 with explicit
// arithmetic (no std::uniform_int_distribution, whose output is not
// specified across standard libraries) keeps cases the same everywhere.
class Generator {
 public:
  Generator(uint64_t seed, const RandomOptions& options) : rng_(seed), options_(options) {}

  int Int(int lo, int hi) {  // inclusive
    return lo + static_cast<int>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Chance(int percent) { return Int(1, 100) <= percent; }

  // One of JAX's policies, or (one time in five) a memory_budget.
  Policy DrawPolicy() {
    if (Chance(20)) return Policy::Parse(StrCat("memory_budget:", kBudgets[Int(0, 5)]));
    return Policy::Parse(kPolicies[Int(0, 9)]);
  }

  // A pool of values of a few shapes; ops draw their operands from it.
  Var Grow(std::vector<Var> pool, int ops, int depth) {
    for (int i = 0; i < ops; ++i) {
      const int pick = Int(0, 99);
      Var x = pool[Int(0, static_cast<int>(pool.size()) - 1)];
      if (pick < 30) {
        switch (Int(0, 3)) {
          case 0: pool.push_back(relu(x)); break;
          case 1: pool.push_back(sin(x)); break;
          case 2: pool.push_back(cos(x)); break;
          default: pool.push_back(square(x)); break;
        }
      } else if (pick < 46) {
        Var y = SameShape(pool, x);
        pool.push_back(Chance(50) ? add(x, y) : mul(x, y));
      } else if (pick < 54) {
        // bias_add(x, b): b a rank-1 value of x's last dimension (the
        // bias parameter, or a value computed from it), when the pool has one.
        if (auto b = BiasPartner(pool, x)) {
          pool.push_back(bias_add(x, *b));
        } else {
          pool.push_back(sin(x));  // smooth: a relu here zeroes more gradients
        }
      } else if (pick < 66) {
        if (auto m = MatMulPartner(pool, x)) pool.push_back(matmul(x, *m));
      } else if (pick < 73) {
        pool.push_back(name(x, kLabels[Int(0, 2)]));
      } else if (pick < 87 && depth < options_.max_depth) {
        // A checkpoint region over a few values of the pool; one time in
        // four a chain of regions, each reading the one before (what
        // ApplySchedule groups into a kChain).
        const int blocks = Chance(25) ? Int(2, 4) : 1;
        const std::vector<Var> outer = pool;
        Var carry = x;
        for (int b = 0; b < blocks; ++b) {
          std::vector<Var> args = {carry};
          if (Chance(60)) args.push_back(outer[Int(0, static_cast<int>(outer.size()) - 1)]);
          const int inner_ops = Int(1, 4);
          const Policy policy = DrawPolicy();
          carry = checkpoint_n(
              [this, inner_ops, depth](const std::vector<Var>& p) {
                return Grow(p, inner_ops, depth + 1);
              },
              args, policy);
        }
        pool.push_back(carry);
      } else if (depth == 0 && x.shape().rank() == 2) {
        // Scans only at the top level: their stacked input is a parameter there.

        pool.push_back(Scan(x, depth));
      } else {
        pool.push_back(relu(x));
      }
    }
    // The result: the last value, or a region's output of its carry shape.
    return pool.back();
  }

  Var SameShape(const std::vector<Var>& pool, Var x) {
    std::vector<Var> same;
    for (const Var& v : pool) {
      if (v.shape() == x.shape()) same.push_back(v);
    }
    return same[Int(0, static_cast<int>(same.size()) - 1)];
  }

  std::optional<Var> BiasPartner(const std::vector<Var>& pool, Var x) {
    const Shape& a = x.shape();
    if (a.rank() == 0) return std::nullopt;
    std::vector<Var> ok;
    for (const Var& v : pool) {
      if (v.shape() == Shape({a.dim(a.rank() - 1)})) ok.push_back(v);
    }
    if (ok.empty()) return std::nullopt;
    return ok[Int(0, static_cast<int>(ok.size()) - 1)];
  }

  std::optional<Var> MatMulPartner(const std::vector<Var>& pool, Var x) {
    std::vector<Var> ok;
    for (const Var& v : pool) {
      const Shape& a = x.shape();
      const Shape& b = v.shape();
      if (a.rank() >= 2 && a.rank() == b.rank() && a.dim(a.rank() - 1) == b.dim(b.rank() - 2) &&
          (a.rank() == 2 || a.dim(0) == b.dim(0)) &&
          Kernels::MatMulShape(a, false, b, false) == a) {
        ok.push_back(v);  // keeps x's shape, so the pool stays small
      }
    }
    if (ok.empty()) return std::nullopt;
    return ok[Int(0, static_cast<int>(ok.size()) - 1)];
  }

  // scan over a stacked (L, d, d) weight input made from the pool's square
  // matrices: body(c, w) = f(c @ w), a random elementwise tail.
  Var Scan(Var carry, int depth) {
    const int64_t d = carry.shape().dim(1);
    Var w = stacked_.count(d) ? stacked_[d] : Var();
    if (!stacked_.count(d)) return relu(carry);
    const int tail = Int(0, 2);
    const bool checkpointed = Chance(50);
    const Policy policy = DrawPolicy();
    auto step = [tail, this](Var c, Var wi) {
      Var y = matmul(c, wi);
      for (int t = 0; t < tail; ++t) y = (t % 2 == 0) ? sin(y) : relu(y);
      return y;
    };
    (void)depth;
    if (checkpointed) {
      return scan(checkpoint(step, policy), carry, w);
    }
    return scan(step, carry, w);
  }

  std::map<int64_t, Var> stacked_;
  std::mt19937_64 rng_;
  RandomOptions options_;
};

}  // namespace

RandomCase MakeRandomCase(uint64_t seed, const RandomOptions& options) {
  RandomCase c;
  c.seed = seed;
  c.options = options;
  Generator g(seed, options);
  const int64_t n = g.Int(1, options.max_dim), d = g.Int(1, options.max_dim);
  const int64_t b = g.Int(1, 3), length = g.Int(1, options.max_length);
  std::vector<ParamDecl> params = {{"x", Shape({n, d})}, {"w", Shape({d, d})}};
  if (g.Chance(50)) params.push_back({"v", Shape({n, d})});
  if (g.Chance(60)) params.push_back({"ws", Shape({length, d, d})});
  if (g.Chance(40)) {
    params.push_back({"bx", Shape({b, n, d})});
    params.push_back({"bw", Shape({b, d, d})});
  }
  // A bias (d): bias_add's operand, every value's last dimension being d.
  if (g.Chance(50)) params.push_back({"bias", Shape({d})});
  const int ops = g.Int(1, options.max_ops);
  c.program = Trace(StrCat("random_", seed), params, [&](const std::vector<Var>& in) {
    std::vector<Var> pool;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name == "ws") {
        g.stacked_[d] = in[i];
      } else {
        pool.push_back(in[i]);
      }
    }
    Var out = g.Grow(pool, ops, 0);
    // The loss: the sum of the result, plus the sum of a second value so that
    // more of the program is differentiated.
    Var loss = sum(out);
    Var other = pool[g.Int(0, static_cast<int>(pool.size()) - 1)];
    if (g.stacked_.count(d)) loss = add(loss, sum(g.Scan(in[0], 0)));
    // The bias, if any, reaches the loss (else its gradient is all zeros).
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name == "bias") loss = add(loss, sum(bias_add(in[0], in[i])));
    }
    return add(loss, sum(other));
  });
  // Inputs: nonzero multiples of 1/8 in [-1, 1], so f32 holds them exactly
  // and small products and sums are exact in both f32 and f64. No exact
  // zeros: a zero on relu's path zeroes a gradient and sits on its kink.
  for (int i = 0; i < c.program.num_params(); ++i) {
    Tensor t = Tensor::Zeros(DType::kF32, c.program.shapes[i]);
    for (int64_t j = 0; j < t.num_elements(); ++j) {
      t.f32()[j] = (g.Chance(50) ? 1.0f : -1.0f) * static_cast<float>(g.Int(1, 8)) / 8.0f;
    }
    c.inputs.push_back(t);
    c.wrt.push_back(i);
  }
  return c;
}

std::string ReplayCommand(const RandomCase& c) {
  return StrCat("tools/bazel run //harness:fuzz_test -- --seed=", c.seed,
                " --max_ops=", c.options.max_ops, " --max_depth=", c.options.max_depth,
                " --max_dim=", c.options.max_dim, " --max_length=", c.options.max_length);
}

}  // namespace remat
