#include "harness/random_program.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/op_def.h"
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

// The registry's ops that one generic rule draws: each operand of the op's
// example has the first operand's shape or is rank 1 of its last dimension,
// the output has the first operand's shape, and the op takes no integer
// attributes or label. An op added to the registry that fits is drawn with
// no edit here; the completeness test (op_completeness_test.cc) fails for
// one that no random program draws.
struct GenericDraw {
  const OpDef* def;
  std::vector<bool> last_dim;  // by operand: a rank-1 value of x's last dimension
  std::vector<bool> seed;      // by operand: the program's random seed (i32[])
  std::vector<bool> mask;      // by operand: an i32 mask of x's shape (0 or 1)
};

const std::vector<GenericDraw>& GenericDraws() {
  static const std::vector<GenericDraw> draws = [] {
    std::vector<GenericDraw> out;
    for (const OpDef& def : OpDefs()) {
      // Integer attributes only as a random op's key (beside a seed input).
      const bool random = def.num_ints == 1 && def.int_inputs != 0;
      if ((def.num_ints != 0 && !random && !def.optional_ints) || def.kind == OpKind::kName ||
          def.kind == OpKind::kState) {
        continue;
      }
      Op op;
      op.kind = def.kind;
      const std::vector<Shape> in = def.example(op);
      if (in.empty() || def.shape(op, in) != in[0]) continue;
      GenericDraw d{&def, {}, {}, {}};
      bool fits = true;
      for (size_t j = 0; j < in.size(); ++j) {
        const bool integer = (def.int_inputs >> j) & 1;
        const bool seed = integer && in[j].rank() == 0 && random;
        const bool mask = integer && in[j] == in[0] && !random;
        const bool same = in[j] == in[0] && !integer;
        const bool last = in[0].rank() > 0 && in[j] == Shape({in[0].dim(in[0].rank() - 1)});
        fits = fits && (same || (j > 0 && (seed || mask || (last && !integer))));
        d.last_dim.push_back(!same && !integer);
        d.seed.push_back(seed);
        d.mask.push_back(mask);
      }
      if (fits) out.push_back(d);
    }
    return out;
  }();
  return draws;
}

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
      if (pick < 44) {
        pool.push_back(DrawFromRegistry(pool, x));
      } else if (pick < 46) {
        pool.push_back(DrawBroadcast(pool, x));
      } else if (pick < 48) {
        pool.push_back(DrawRunning(pool, x));
      } else if (pick < 49) {
        pool.push_back(Chance(50) ? DrawChoice(pool, x) : DrawConv(pool, x));
      } else if (pick < 51) {
        pool.push_back(DrawLayout(x));
      } else if (pick < 54) {
        pool.push_back(DrawIndexing(pool, x));
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
          // The integer inputs reach the region as its last arguments (a
          // body sees only what it is passed).
          const IntVars outer_ints = ints_;
          const size_t floats = args.size();
          for (const std::optional<Var>* v : {&ints_.seed, &ints_.ids, &ints_.mask}) {
            if (*v) args.push_back(**v);
          }
          const int inner_ops = Int(1, 4);
          const Policy policy = DrawPolicy();
          carry = checkpoint_n(
              [this, inner_ops, depth, floats, outer_ints](const std::vector<Var>& p) {
                std::vector<Var> pool(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(floats));
                size_t k = floats;
                ints_ = IntVars();
                if (outer_ints.seed) ints_.seed = p[k++];
                if (outer_ints.ids) ints_.ids = p[k++];
                if (outer_ints.mask) ints_.mask = p[k++];
                return Grow(pool, inner_ops, depth + 1);
              },
              args, policy);
          ints_ = outer_ints;
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

  // One op of the registry that the generic rule draws (GenericDraws): its
  // operands x and values of x's shape or of x's last dimension from the
  // pool, each moved into the op's domain first (positive: exp(sin v);
  // bounded: sin v). A normalizing op's output is read out through a
  // product with a value of the pool (OpDef::normalizes).
  Var DrawFromRegistry(const std::vector<Var>& pool, Var x) {
    const std::vector<GenericDraw>& draws = GenericDraws();
    const GenericDraw& d = draws[Int(0, static_cast<int>(draws.size()) - 1)];
    std::vector<Var> operands;
    for (size_t j = 0; j < d.last_dim.size(); ++j) {
      if (d.seed[j]) {
        if (!ints_.seed) return sin(x);  // no seed in this program or region
        operands.push_back(*ints_.seed);
        continue;
      }
      if (d.mask[j]) {
        if (!ints_.mask || ints_.mask->shape() != x.shape()) return sin(x);
        operands.push_back(*ints_.mask);
        continue;
      }
      Var v = x;
      if (j > 0 && !d.last_dim[j]) v = SameShape(pool, x);
      if (j > 0 && d.last_dim[j]) {
        std::optional<Var> b = BiasPartner(pool, x);
        if (!b) return sin(x);  // smooth: a relu here zeroes more gradients
        v = *b;
      }
      if (d.def->positive_inputs) v = apply("exp", {sin(v)});
      if (d.def->bounded_inputs) v = sin(v);
      operands.push_back(v);
    }
    OpAttrs attrs;
    if (d.def->has_scalar) attrs.scalar = Chance(50) ? 0.5 : -2.0;  // exact in f32
    if (std::find(d.seed.begin(), d.seed.end(), true) != d.seed.end()) {
      // A random op: p in [0, 1) (scale's -2 is no probability), and keys
      // drawn from a few so that two ops sometimes share a mask.
      attrs.scalar = Chance(50) ? 0.5 : 0.25;
      attrs.ints = {Int(0, 3)};
    }
    try {
      Var y = apply(d.def->name, operands, attrs);
      return d.def->normalizes ? mul(y, SameShape(pool, x)) : y;
    } catch (const Error&) {
      return sin(x);  // shapes the op does not take (softmax of a scalar)
    }
  }

  // The broadcasting ops and the reductions over chosen axes, each giving
  // x's shape again: x OP r (OP one of add, sub, mul, div) with r a
  // reduction of a value of the pool (sum, mean or amax over one axis,
  // keepdim or, over the leading axis, not: numpy broadcasts it back; the
  // divisor made positive first, exp(sin v)); where(mask, x, r); or
  // hardtanh(x) clamped to [-1, 1] (its bounds' ties are the tie rule's,
  // in both precisions alike: x's multiples of 1/8).
  Var DrawBroadcast(const std::vector<Var>& pool, Var x) {
    const Shape s = x.shape();
    if (s.rank() == 0) return sin(x);
    const int kind = Int(0, 3);
    if (kind == 0) return apply("hardtanh", {x}, {.ints = {-1, 1}});
    const int64_t axis = Int(0, s.rank() - 1);
    const bool keepdim = axis > 0 || Chance(50);
    static const char* const kReductions[] = {"sum", "mean", "amax"};
    Var v = SameShape(pool, x);
    const std::string op = kind == 1 ? "where" : kBinary[Int(0, 3)];
    if (op == "div") v = apply("exp", {sin(v)});
    const Var r = apply(kReductions[Int(0, 2)], {v}, {.scalar = keepdim ? 1.0 : 0.0, .ints = {axis}});
    if (op == "where") {
      if (!ints_.mask || ints_.mask->shape() != s) return sin(x);
      return apply("where", {*ints_.mask, x, r});
    }
    return apply(op, {x, r});
  }
  static constexpr const char* kBinary[] = {"add", "sub", "mul", "div"};

  // An op that chooses: top_k_softmax of x, k 1 or 2 (at most the last
  // axis), read out through a product with a value of x's shape (its rows
  // sum to 1). The inputs' multiples of 1/8 tie often: the tie rule is
  // exercised, in both precisions alike.
  Var DrawChoice(const std::vector<Var>& pool, Var x) {
    const Shape s = x.shape();
    if (s.rank() == 0) return sin(x);
    const int64_t k = std::min<int64_t>(Int(1, 2), s.dim(s.rank() - 1));
    if (k < 1) return sin(x);
    return mul(apply("top_k_softmax", {x}, {.ints = {k}}), SameShape(pool, x));
  }

  // The image ops on an (n, d) x: one time in three global_avg_pool of x
  // seen as (n, d, 1, 1) or (half of those times) x seen as (1, 1, n, d)
  // adaptive-pooled to ((n + 1) / 2, (d + 1) / 2); else x seen as a one-channel image (1, 1, n, d),
  // max-pooled by 3 x 3 windows, stride 1, padding 1 (x's shape again), or,
  // for d odd, convolved with a (d, d) value of the pool as its one kernel,
  // stride 1, padding (d - 1) / 2 (x's shape again), then again with x's
  // first element as a bias (conv2d_bias); read back as (n, d).
  Var DrawConv(const std::vector<Var>& pool, Var x) {
    const Shape s = x.shape();
    if (s.rank() != 2) return sin(x);
    const int64_t n = s.dim(0), d = s.dim(1);
    const int kind = Int(0, 2);
    if (kind == 0 && (n >= 2 || d >= 2) && Chance(50)) {
      // Halved by PyTorch's adaptive windows (overlapping for odd sizes).
      const int64_t oh = (n + 1) / 2, ow = (d + 1) / 2;
      const Var image = apply("reshape", {x}, {.ints = {1, 1, n, d}});
      return apply("reshape", {apply("adaptive_avg_pool2d", {image}, {.ints = {oh, ow}})}, {.ints = {oh, ow}});
    }
    if (kind == 0) {
      return apply("global_avg_pool", {apply("reshape", {x}, {.ints = {n, d, 1, 1}})});
    }
    if (kind == 1) {
      const Var image = apply("reshape", {x}, {.ints = {1, 1, n, d}});
      return apply("reshape", {apply("max_pool2d", {image}, {.ints = {3, 1, 1}})}, {.ints = {n, d}});
    }
    if (d % 2 == 0) return sin(x);
    std::optional<Var> kernel;
    for (const Var& v : pool) {
      if (v.shape() == Shape({d, d})) kernel = v;
    }
    if (!kernel) return sin(x);
    const Var image = apply("reshape", {x}, {.ints = {1, 1, n, d}});
    const Var w = apply("reshape", {*kernel}, {.ints = {1, 1, d, d}});
    const int64_t pad = (d - 1) / 2;
    const Var once = apply("conv2d", {image, w}, {.ints = {1, pad}});
    // Again, with a bias, x's first element, in the geometry's seven-int form.
    const Var b = apply("reshape", {apply("slice", {apply("slice", {x}, {.ints = {0, 0, 1}})}, {.ints = {1, 0, 1}})},
                        {.ints = {1}});
    const Var y = apply("conv2d_bias", {once, w, b}, {.ints = {1, 1, pad, pad, 1, 1, 1}});
    return apply("reshape", {y}, {.ints = {n, d}});
  }

  // batch_norm's running statistics of an (n, d) x, its columns the
  // channels (n >= 2 rows), from a (d) value of the pool as the running
  // one, read back into x's shape through bias_add. The program's first
  // becomes the new state of its `bias` parameter (CONTRACT.md, state; never
  // in a scan's body: scans' bodies are drawn apart).
  Var DrawRunning(const std::vector<Var>& pool, Var x) {
    const Shape s = x.shape();
    if (s.rank() != 2 || s.dim(0) < 2) return sin(x);
    std::optional<Var> r = BiasPartner(pool, x);
    if (!r) return sin(x);
    Var stat = apply(Chance(50) ? "batch_norm_running_mean" : "batch_norm_running_var", {x, *r},
                     {.scalar = 0.25});
    if (state_slot_free_) {
      stat = apply("state", {stat}, {.name = "bias"});
      state_slot_free_ = false;
    }
    return bias_add(x, stat);
  }

  // The layout ops: an (n, d) x's halves (slice), or its first row
  // broadcast (select, expand) times its columns reordered (slice by a
  // step, cat); transpose where it keeps x's shape (square in its last
  // two axes); a rank-3 x permuted (the two leading axes swapped), reshaped
  // to rank 2 and back; else split_heads into a random divisor of each axis
  // and merge_heads back (x's shape again); a rank-1 x reshaped to a row
  // and back.
  Var DrawLayout(Var x) {
    const Shape s = x.shape();  // a copy: tracing more values moves the program's shapes
    if (s.rank() == 2 && s.dim(1) >= 2 && s.dim(1) % 2 == 0 && Chance(25)) {
      // x's halves on the last axis (torch's split), multiplied, and read
      // out through a matmul with the second half's sine laid out as
      // (d/2, n): an (n, n) value (without a concat the halves cannot
      // make x's shape again).
      const int64_t h = s.dim(1) / 2;
      Var a = apply("slice", {x}, {.ints = {1, 0, h}});
      Var b = apply("slice", {x}, {.ints = {1, h, h}});
      return apply("reshape", {matmul(apply("reshape", {mul(a, b)}, {.ints = {s.dim(0), h}}),
                                      apply("reshape", {sin(b)}, {.ints = {h, s.dim(0)}}))},
                   {.ints = {s.dim(0), s.dim(0)}});
    }
    if (s.rank() == 2 && s.dim(0) >= 2 && s.dim(1) >= 2 && Chance(25)) {
      // x's first row (select) broadcast to x's shape (expand), times x's
      // columns reordered: the even ones, then the odd (slices by a step
      // of 2, joined by cat).
      const int64_t n = s.dim(0), d = s.dim(1);
      const Var rows = apply("expand", {sin(apply("select", {x}, {.ints = {0, 0}}))}, {.ints = {n, d}});
      const Var evens = apply("slice", {x}, {.ints = {1, 0, (d + 1) / 2, 2}});
      const Var odds = apply("slice", {x}, {.ints = {1, 1, d / 2, 2}});
      return mul(rows, apply("cat", {evens, odds}, {.ints = {1}}));
    }
    if ((s.rank() == 2 || s.rank() == 3) && s.dim(s.rank() - 1) == s.dim(s.rank() - 2)) {
      return transpose(x);
    }
    if (s.rank() == 3) {
      const int64_t b = s.dim(0), n = s.dim(1), d = s.dim(2);
      Var y = apply("permute", {x}, {.ints = {1, 0, 2}});            // (n, b, d)
      y = apply("reshape", {y}, {.ints = {n, b * d}});              // (n, b d)
      y = apply("reshape", {sin(y)}, {.ints = {n, b, d}});
      return apply("permute", {y}, {.ints = {1, 0, 2}});
    }
    if (s.rank() == 1) {
      const Var row = apply("reshape", {x}, {.ints = {1, s.dim(0)}});
      return apply("reshape", {sin(row)}, {.ints = {s.dim(0)}});
    }
    if (s.rank() != 2) return relu(x);
    const int64_t batch = Divisor(s.dim(0)), heads = Divisor(s.dim(1));
    return merge_heads(split_heads(x, batch, heads), batch);
  }

  // The ops that index with the ids (i32 (n), each in [0, d)): embedding of
  // a square (d, d) value of the pool (its rows are ids' range) into (n, d),
  // sometimes with a padding_idx, or cross_entropy of an (n, d) x against
  // them as targets (a scalar), sometimes ignoring one target value.
  Var DrawIndexing(const std::vector<Var>& pool, Var x) {
    if (!ints_.ids) return sin(x);
    const int64_t n = ints_.ids->shape().dim(0);
    std::optional<Var> table;
    for (const Var& v : pool) {
      const Shape& s = v.shape();
      if (s.rank() == 2 && s.dim(0) == s.dim(1) && (!table || Chance(50))) table = v;
    }
    const Shape& s = x.shape();
    const bool logits = s.rank() == 2 && s.dim(0) == n;
    if (table && table->shape().dim(0) >= 1 && (!logits || Chance(50))) {
      // ids < d, the table's rows: the pool's square values are (d, d).
      // One time in three a random row is the padding_idx.
      if (table->shape().dim(0) == d_) {
        OpAttrs attrs;
        if (Chance(33)) attrs.ints = {Int(0, static_cast<int>(d_) - 1)};
        return apply("embedding", {*table, *ints_.ids}, attrs);
      }
    }
    if (logits && s.dim(1) == d_) {
      // One time in two (d >= 2) the targets equal to d - 1 are ignored;
      // the first is drawn below d - 1 (MakeRandomCase), so that K >= 1.
      OpAttrs attrs;
      if (d_ >= 2 && Chance(50)) {
        attrs.ints = {d_ - 1};
        first_id_kept_ = true;
      }
      return apply("cross_entropy", {x, *ints_.ids}, attrs);
    }
    return sin(x);
  }

  int64_t Divisor(int64_t n) {
    std::vector<int64_t> ds;
    for (int64_t k = 1; k <= n; ++k) {
      if (n % k == 0) ds.push_back(k);
    }
    return ds[Int(0, static_cast<int>(ds.size()) - 1)];
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
    if (stacked_seeds_.count(w.shape().dim(0)) && Chance(60)) {
      // Dropout in every step, each step's mask from its own seed (the
      // contract's key scheme: seeds enter a scan as stacked data).
      const double p = Chance(50) ? 0.5 : 0.25;
      const int64_t key = Int(0, 3);
      auto dropped = [step, p, key](const std::vector<Var>& a) {
        return apply("dropout", {step(a[0], a[1]), a[2]}, {.scalar = p, .ints = {key}});
      };
      const Var seeds = stacked_seeds_[w.shape().dim(0)];
      if (checkpointed) {
        return scan_n(
            [&](Var c, const std::vector<Var>& x) {
              return checkpoint_n(dropped, {c, x[0], x[1]}, policy);
            },
            carry, {w, seeds});
      }
      return scan_n([&](Var c, const std::vector<Var>& x) { return dropped({c, x[0], x[1]}); },
                    carry, {w, seeds});
    }
    if (checkpointed) {
      return scan(checkpoint(step, policy), carry, w);
    }
    return scan(step, carry, w);
  }

  int64_t d_ = 0;  // the program's last dimension (ids are in [0, d))
  bool first_id_kept_ = false;  // a cross_entropy ignores d - 1: ids[0] < d - 1
  bool state_slot_free_ = false;  // a `bias` parameter no state op updates yet
  std::map<int64_t, Var> stacked_;
  std::map<int64_t, Var> stacked_seeds_;  // by length: i32[L], one seed per scan step
  // The integer values visible where ops are drawn: a seed (i32[]), ids
  // (i32 (n), each in [0, d): embedding's ids, cross_entropy's targets) and
  // a mask (i32 (n, d), 0 or 1).
  struct IntVars {
    std::optional<Var> seed, ids, mask;
  };
  IntVars ints_;
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
  g.d_ = d;
  const int64_t b = g.Int(1, 3), length = g.Int(1, options.max_length);
  std::vector<ParamDecl> params = {{"x", Shape({n, d})}, {"w", Shape({d, d})}};
  if (g.Chance(50)) params.push_back({"v", Shape({n, d})});
  if (g.Chance(60)) params.push_back({"ws", Shape({length, d, d})});
  // Random seeds (i32): one for the program's dropout ops, one per scan step.
  if (g.Chance(50)) params.push_back({"seed", Shape(), DType::kI32});
  if (g.Chance(40)) params.push_back({"seeds", Shape({length}), DType::kI32});
  if (g.Chance(40)) params.push_back({"ids", Shape({n}), DType::kI32});
  if (g.Chance(30)) params.push_back({"mask", Shape({n, d}), DType::kI32});
  if (g.Chance(40)) {
    params.push_back({"bx", Shape({b, n, d})});
    params.push_back({"bw", Shape({b, d, d})});
  }
  // A bias (d): bias_add's operand, every value's last dimension being d.
  if (g.Chance(50)) params.push_back({"bias", Shape({d})});
  g.state_slot_free_ = params.back().name == "bias";
  const int ops = g.Int(1, options.max_ops);
  c.program = Trace(StrCat("random_", seed), params, [&](const std::vector<Var>& in) {
    std::vector<Var> pool;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name == "ws") {
        g.stacked_[d] = in[i];
      } else if (params[i].name == "seed") {
        g.ints_.seed = in[i];
      } else if (params[i].name == "ids") {
        g.ints_.ids = in[i];
      } else if (params[i].name == "mask") {
        g.ints_.mask = in[i];
      } else if (params[i].name == "seeds") {
        g.stacked_seeds_[length] = in[i];
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
    if (c.program.dtype(i) == DType::kI32) {  // never differentiated
      // Seeds any i32; ids in [0, d); a mask 0 or 1.
      const std::string& what = c.program.param_names[i];
      Tensor t = Tensor::Zeros(DType::kI32, c.program.shapes[i]);
      for (int64_t j = 0; j < t.num_elements(); ++j) {
        const int top = static_cast<int>(d) - (j == 0 && g.first_id_kept_ ? 2 : 1);
        t.i32()[j] = what == "ids"    ? g.Int(0, top)
                     : what == "mask" ? g.Int(0, 1)
                                      : static_cast<int32_t>(g.rng_());
      }
      c.inputs.push_back(t);
      continue;
    }
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
