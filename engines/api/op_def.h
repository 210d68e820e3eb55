// OpDef: one definition per primitive op, MLX-style. Each op declares, side
// by side in its family's engines/api/op_defs_<family>.cc (op_defs.cc
// gathers the families into the registry), everything the rest of
// remat-bench derives from it: its name in programs, its arity and
// attributes, its shape rule, what its backward rule reads, its forward and
// backward rules (on the Kernels of the engine running it) and its FLOP
// count. The registry
// below is the only table of ops: OpKindName, Arity, OutputShape, SavesFor,
// Forward, Backward and ForwardFlops (op_shape.h, rules.h) are lookups in
// it, and the program text reader finds ops by name here.
//
// Structural ops (checkpoint, scan, chain) have bodies and no OpDef: their
// forward and backward are the engines' business.
//
// The float64 oracle (engines/oracle) keeps its own rules on purpose: it is
// the independent judge of these.
#ifndef REMAT_ENGINES_API_OP_DEF_H_
#define REMAT_ENGINES_API_OP_DEF_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engines/api/kernels.h"
#include "engines/api/program.h"
#include "engines/api/shape.h"
#include "engines/api/tensor.h"

namespace remat {

// What a backward rule reads from the forward pass.
struct Saves {
  std::vector<bool> inputs;  // by input index
  bool output = false;
};

// What a backward rule is given: the inputs and output it saved (per
// Saves; the others undefined), the output's cotangent, the inputs' shapes
// and which input cotangents are wanted.
struct BackwardArgs {
  const std::vector<Tensor>& saved_inputs;
  const Tensor& saved_output;
  const Tensor& dout;
  const std::vector<Shape>& input_shapes;
  const std::vector<bool>& needs;
  // Where the rule may write input i's cotangent instead of allocating it:
  // with into[i] defined (a tensor of input i's shape and the kernels'
  // dtype that shares no element with the rule's operands), a rule that
  // uses it writes the whole cotangent there with one kernel call
  // (Kernels::CallInto) and returns that tensor as d[i]. Empty, shorter
  // than the inputs, or an undefined entry: allocate as usual. A rule that
  // ignores it is right; the engine copies what it returns.
  std::span<const Tensor> into;
  // into[i] where given, else null.
  const Tensor* Into(size_t i) const {
    return i < into.size() && into[i].defined() ? &into[i] : nullptr;
  }
};

// What a rounding-depth rule is given (harness/rounding_depth.h: K, the
// most roundings any path from the inputs to an element passes through):
// the shapes, and the forward depths of the inputs and of the output.
struct DepthArgs {
  const std::vector<Shape>& inputs;
  const Shape& output;
  const std::vector<double>& kf_inputs;
  double kf_output;
  // The deepest input: max of kf_inputs.
  double deepest() const;
};

// OpDef::num_ints of an op whose integer attribute is a list of any length.
inline constexpr int kAnyNumberOfInts = -1;

struct OpDef {
  OpKind kind;
  const char* name;  // in program text and listings: "matmul"
  int arity;         // number of inputs
  bool has_scalar;   // reads Op::scalar (scale's c); program text requires scalar=
  int num_ints;      // reads Op::ints[0..num_ints); kAnyNumberOfInts: a list of any length
                     // (reshape's dims), which the shape rule checks
  // The output shape on inputs of these shapes (arity and attribute count
  // already checked); throws remat::Error naming the shapes.
  Shape (*shape)(const Op& op, const std::vector<Shape>& inputs);
  // What the backward rule reads when the inputs with needs[i] true want
  // cotangents.
  void (*saves)(const std::vector<bool>& needs, Saves& saves);
  // The forward rule: a new tensor, except an op that returns its input
  // itself (name): an engine that frees values one buffer at a time must
  // treat the two as one.
  Tensor (*forward)(Kernels& k, const Op& op, const std::vector<Tensor>& inputs);
  // The backward rule: d[i] for each i with needs[i] true (others left
  // undefined). A cotangent may alias dout (add and name pass it through).
  void (*backward)(Kernels& k, const Op& op, const BackwardArgs& args, std::vector<Tensor>& d);
  // FLOPs of one forward call, as Kernels counts them (kernels.h's model).
  int64_t (*flops)(const std::vector<Shape>& inputs, const Shape& output);
  // Rounding depths (harness/rounding_depth.h): the output's K from the
  // inputs', and, given the output cotangent's K `dy`, the K of the
  // contribution to each input's cotangent (k[i], for every input).
  double (*forward_depth)(const DepthArgs& a);
  void (*backward_depth)(const DepthArgs& a, double dy, std::vector<double>& k);
  // A small valid use of the op, for tests that walk every op (the
  // completeness test, gradchecks): its attributes set on `op` and its
  // inputs' shapes returned. Inputs that make its gradient well defined
  // (no ties, no zero for relu) are the test's business.
  std::vector<Shape> (*example)(Op& op);
  // The op's domain: true when its inputs must be positive (log), so that
  // tests that draw inputs for every op draw them there.
  bool positive_inputs = false;
  // True when the op grows fast enough (exp) that a chain of them overflows
  // float32: tests that draw inputs for every op draw them in [-1, 1].
  bool bounded_inputs = false;
  // True when the sum of the op's output along the axis it normalizes is a
  // constant (softmax: 1; layer_norm: C x beta), so that a loss summing it
  // has a zero gradient made of rounding: tests that draw the op read its
  // output out through a product with another value.
  bool normalizes = false;
  // Nonzero (has_scalar false): the op reads Op::scalar too, but scalar= is
  // optional in program text, and a scalar of 0 (left out) means this
  // default (layer_norm's eps 1e-5). The text reader stores an explicit
  // value equal to it as 0 and refuses an explicit 0, and the printer writes
  // scalar= only where it is not 0, so that a file that leaves it out reads
  // and prints as before it could be given.
  double default_scalar = 0;
  // Bit j set: input j is i32 (dropout's seed), never differentiated; every
  // other input and the output are f32.
  uint32_t int_inputs = 0;
  // For an integer input j that indexes (ids, targets): the exclusive upper
  // bound of its values given the inputs' shapes (embedding's ids < V); null
  // when any i32 is valid. Values outside are a remat::Error at run time;
  // tests that draw inputs for every op draw them below it.
  int64_t (*int_bound)(const std::vector<Shape>& inputs, int j) = nullptr;
  // True for the reductions over chosen axes (sum, mean, amax): Op::ints
  // are the axes and may be left out (every axis), and Op::scalar is
  // keepdim, 0 or 1 (program text: `ints=[AXES] keepdim=1`).
  bool reduces_axes = false;
  // True when ints= may be left out (num_ints kAnyNumberOfInts, the shape
  // rule checks the count): embedding's padding_idx, cross_entropy's
  // ignore_index. Left out, the op means what it meant before it took one.
  bool optional_ints = false;
};

// The primitive ops, in OpKind order.
std::span<const OpDef> OpDefs();
// The definition of primitive `kind`; throws remat::Error for a structural op.
const OpDef& Def(OpKind kind);
// The op named `name` ("matmul"), or null.
const OpDef* FindOpDef(std::string_view name);

}  // namespace remat

#endif  // REMAT_ENGINES_API_OP_DEF_H_
