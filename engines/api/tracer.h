// The tracer: builds a Program by running ordinary C++ over symbolic values,
// so that problems read like the JAX they mirror:
//
//   Var middle(Var y, Var w) { return matmul(y, w); }
//   ...
//   Var y1 = relu(matmul(x, w1));
//   Var y2 = relu(checkpoint(middle, Policy(), "middle")(y1, w2));
//
// Every op records where it was called (std::source_location) and the label
// of the enclosing checkpoint or scan body. Shapes are checked as ops are
// traced: a mismatch throws remat::Error naming the op, where it was traced
// and the shapes.
//
// Bodies of checkpoint and scan take their inputs as arguments: a value from
// an enclosing function used inside a body (a closure capture) is an error
// that says so, rather than a silently wrong graph.
#ifndef REMAT_ENGINES_API_TRACER_H_
#define REMAT_ENGINES_API_TRACER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engines/api/policy.h"
#include "engines/api/program.h"
#include "engines/api/shape.h"

namespace remat {

namespace internal {
class Builder;
}

// A symbolic value in the program being traced.
class Var {
 public:
  Var() = default;
  const Shape& shape() const;
  DType dtype() const;

 private:
  friend class internal::Builder;
  Var(internal::Builder* builder, int id) : builder_(builder), id_(id) {}
  internal::Builder* builder_ = nullptr;
  int id_ = -1;
};

// Where an op was traced: the caller's file and line, taken as default
// arguments (std::source_location does the same, but clang 14 with
// libstdc++ 12, which the fuzzers build with, lacks it).
struct Loc {
  const char* file = "";
  int line = 0;
  static Loc current(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return Loc{file, line};
  }
  const char* file_name() const { return file; }
  int line_number() const { return line; }
};

Var matmul(Var a, Var b, Loc loc = Loc::current());
Var relu(Var x, Loc loc = Loc::current());
Var sin(Var x, Loc loc = Loc::current());
Var cos(Var x, Loc loc = Loc::current());
Var square(Var x, Loc loc = Loc::current());
Var add(Var a, Var b, Loc loc = Loc::current());
Var mul(Var a, Var b, Loc loc = Loc::current());
Var sum(Var x, Loc loc = Loc::current());
// jax.ad_checkpoint.checkpoint_name: identity, labelled for policies.
Var name(Var x, const std::string& label, Loc loc = Loc::current());

// The transformer's ops. Those "over the last axis" take rank >= 1.
// jax.nn.softmax(x, axis=-1).
Var softmax(Var x, Loc loc = Loc::current());
// Layer normalization over the last axis (eps 1e-5, biased variance), with
// scale gamma and shift beta of shape (C) for x of shape (..., C).
Var layer_norm(Var x, Var gamma, Var beta, Loc loc = Loc::current());
// jax.nn.gelu(x, approximate=True): the tanh form.
Var gelu(Var x, Loc loc = Loc::current());
// c * x for a constant c.
Var scale(Var x, double c, Loc loc = Loc::current());
// x + b on every row, for x of shape (..., C) and a bias b of shape (C): a
// dense layer's bias (torch.nn.Linear's, matmul(x, w) + b in JAX).
Var bias_add(Var x, Var b, Loc loc = Loc::current());
// Swaps the last two axes of a rank-2 or rank-3 value.
Var transpose(Var x, Loc loc = Loc::current());
// (batch*seq, D) -> (batch*heads, seq, D/heads): row b*seq + s, columns
// h*Dh .. h*Dh + Dh - 1 go to [b*heads + h, s, :]. Both must divide.
Var split_heads(Var x, int64_t batch, int64_t heads, Loc loc = Loc::current());
// The inverse: (batch*heads, seq, Dh) -> (batch*seq, heads*Dh).
Var merge_heads(Var x, int64_t batch, Loc loc = Loc::current());

// Any primitive of the OpDef registry (engines/api/op_def.h) by its name,
// with its attributes: apply("exp", {x}), apply("scale", {x}, {.scalar = 2}).
// An op needs no function of its own here; the named ones above are
// shorthands. An unknown name, a wrong number of inputs or attributes, or
// shapes the op does not take is remat::Error naming the op and where it was
// traced.
struct OpAttrs {
  double scalar = 0;
  std::vector<int64_t> ints;
  std::string name;  // the label of `name`
};
Var apply(const std::string& op, const std::vector<Var>& inputs, const OpAttrs& attrs = {},
          Loc loc = Loc::current());

namespace internal {
using BodyFn = std::function<Var(const std::vector<Var>&)>;
Var TraceCheckpoint(const std::vector<Var>& args, const BodyFn& body, const Policy& policy,
                    const std::string& label, Loc loc);
Var TraceScan(Var carry, const std::vector<Var>& xs, const std::vector<Var>& consts,
              const BodyFn& body, const std::string& label, Loc loc);

template <size_t N, typename F>
Var Apply(const F& f, const std::vector<Var>& args) {
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return f(args[I]...);
  }(std::make_index_sequence<N>());
}
}  // namespace internal

// jax.checkpoint(f, policy=...): returns a function of the same arguments
// whose application traces `f` into a checkpoint region. `label` names the
// region in listings (JAX shows the Python function's name).
template <typename F>
auto checkpoint(F f, Policy policy = Policy(), std::string label = "",
                Loc loc = Loc::current()) {
  return [f = std::move(f), policy = std::move(policy), label = std::move(label),
          loc](auto... args) -> Var {
    static_assert((std::is_same_v<decltype(args), Var> && ...),
                  "checkpoint(f)(...) takes Var arguments");
    return internal::TraceCheckpoint(
        {args...},
        [&f](const std::vector<Var>& params) {
          return internal::Apply<sizeof...(args)>(f, params);
        },
        policy, label, loc);
  };
}

// lax.scan(body, carry, xs) with one stacked input: body(carry, x_i) returns
// the next carry, of the carry's shape. Returns the final carry.
template <typename F>
Var scan(F body, Var carry, Var xs, std::string label = "", Loc loc = Loc::current()) {
  return internal::TraceScan(
      carry, {xs}, {},
      [&body](const std::vector<Var>& p) { return internal::Apply<2>(body, p); }, label, loc);
}

// jax.checkpoint of a function of any number of arguments, applied to `args`.
Var checkpoint_n(const std::function<Var(const std::vector<Var>&)>& body,
                 const std::vector<Var>& args, const Policy& policy = Policy(),
                 const std::string& label = "", Loc loc = Loc::current());

// lax.scan with several stacked inputs: body(carry, {x1_i, x2_i, ...}).
Var scan_n(const std::function<Var(Var, const std::vector<Var>&)>& body, Var carry,
           const std::vector<Var>& xs, const std::string& label = "",
           Loc loc = Loc::current());

// lax.scan whose body also closes over loop-invariant integer values (a
// causal mask): body(carry, {x1_i, ...}, {c1, ...}), every step seeing each
// const whole. A const is never differentiated (program.h); an f32 one is an
// error that says to stack it as an xs.
Var scan_with_consts(
    const std::function<Var(Var, const std::vector<Var>&, const std::vector<Var>&)>& body,
    Var carry, const std::vector<Var>& xs, const std::vector<Var>& consts,
    const std::string& label = "", Loc loc = Loc::current());

// A parameter of a program: its name and shape.
struct ParamDecl {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;  // i32: an integer input (ids, targets, seeds)
};

// Traces `f`, applied to one Var per parameter, into a Program named `name`.
// `f` must return a scalar (the loss value_and_grad differentiates).
Program Trace(const std::string& name, const std::vector<ParamDecl>& params,
              const std::function<Var(const std::vector<Var>&)>& f);

}  // namespace remat

#endif  // REMAT_ENGINES_API_TRACER_H_
