#include "engines/api/tracer.h"

#include <string_view>

#include "engines/api/error.h"
#include "engines/api/op_def.h"
#include "engines/api/op_shape.h"

namespace remat {
namespace internal {

// Builds one Program. Builders nest: tracing a checkpoint or scan body pushes
// a new one; ops always go to the innermost.
class Builder {
 public:
  Builder(std::string name, std::string scope, Builder* parent)
      : scope_(std::move(scope)), parent_(parent) {
    program_.name = std::move(name);
  }

  static Builder* Current() { return current_; }

  // Makes this the innermost builder for its lifetime.
  class Activation {
   public:
    explicit Activation(Builder* b) : saved_(current_) { current_ = b; }
    ~Activation() { current_ = saved_; }

   private:
    Builder* saved_;
  };

  Var AddParam(const std::string& name, const Shape& shape, DType dtype) {
    program_.param_names.push_back(name);
    program_.shapes.push_back(shape);
    program_.dtypes.push_back(dtype);
    return Var(this, program_.num_values() - 1);
  }

  const Shape& ShapeOf(int id) const { return program_.shapes[id]; }
  DType DTypeOf(int id) const { return program_.dtype(id); }

  // The id of `v` in this builder, or an error naming the op that used it.
  int IdOf(const Var& v, const Op& op) const {
    if (v.builder_ == nullptr) {
      throw Error(StrCat(Program::Describe(op), ": an input is an uninitialized Var"));
    }
    if (v.builder_ != this) {
      throw Error(StrCat(Program::Describe(op),
                         ": an input was traced outside this checkpoint/scan body (a closure "
                         "capture); pass it to the body as an argument"));
    }
    return v.id_;
  }

  Var Emit(Op op, const std::vector<Var>& inputs, const Shape& out_shape) {
    for (const Var& v : inputs) op.inputs.push_back(IdOf(v, op));
    op.output = program_.num_values();
    program_.shapes.push_back(out_shape);
    program_.dtypes.push_back(DType::kF32);
    program_.ops.push_back(std::move(op));
    return Var(this, op_output_last());
  }

  Op NewOp(OpKind kind, const Loc& loc) const {
    Op op;
    op.kind = kind;
    op.site = SiteOf(loc);
    op.scope = scope_;
    return op;
  }

  Program Finish(const Var& output, const std::string& what) {
    Op probe;
    probe.site = what;
    program_.output = IdOf(output, probe);
    if (program_.dtype(program_.output) != DType::kF32) {
      throw Error(StrCat(what, " is ", DTypeName(program_.dtype(program_.output)),
                         "; a program or body returns an f32 value (integers are inputs)"));
    }
    return std::move(program_);
  }

  const std::string& scope() const { return scope_; }

 private:
  int op_output_last() const { return program_.ops.back().output; }

  static std::string SiteOf(const Loc& loc) {
    std::string_view file = loc.file_name();
    return StrCat(file, ":", loc.line_number());
  }

  static thread_local Builder* current_;
  Program program_;
  std::string scope_;
  Builder* parent_;
};

thread_local Builder* Builder::current_ = nullptr;

namespace {

Builder* Require(const char* op) {
  Builder* b = Builder::Current();
  if (b == nullptr) {
    throw Error(StrCat(op, ": called outside Trace(); ops build a program only while tracing"));
  }
  return b;
}

std::string Shapes(const std::vector<Var>& vs) {
  std::string out;
  for (const Var& v : vs) out += (out.empty() ? "" : " and ") + v.shape().ToString();
  return out;
}

// Emits primitive `op` on `inputs`, its shape from the shared shape rules
// (engines/api/op_shape.h), their errors prefixed with the op and where it
// was traced.
Var Primitive(Op op, const std::vector<Var>& inputs) {
  Builder* b = Builder::Current();
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const Var& v : inputs) {
    b->IdOf(v, op);
    shapes.push_back(v.shape());
    dtypes.push_back(v.dtype());
  }
  Shape out;
  try {
    out = OutputShape(op, shapes);
    CheckInputDTypes(op, dtypes);
  } catch (const Error& e) {
    throw Error(StrCat(Program::Describe(op), ": ", e.what()), e);
  }
  return b->Emit(std::move(op), inputs, out);
}

Var Unary(OpKind kind, Var x, const Loc& loc) {
  Builder* b = Require(OpKindName(kind));
  return Primitive(b->NewOp(kind, loc), {x});
}

Var Binary(OpKind kind, Var a, Var b_var, const Loc& loc) {
  Builder* b = Require(OpKindName(kind));
  return Primitive(b->NewOp(kind, loc), {a, b_var});
}

// Runs `body` on fresh parameters shaped like `args` in a nested builder.
std::shared_ptr<const Program> TraceBody(const std::string& name, const std::string& label,
                                         const std::vector<Shape>& shapes,
                                         const std::vector<DType>& dtypes, const BodyFn& body) {
  Builder* outer = Builder::Current();
  Builder inner(name, label.empty() ? outer->scope() : label, outer);
  Builder::Activation active(&inner);
  std::vector<Var> params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    params.push_back(inner.AddParam(StrCat("arg", i), shapes[i], dtypes[i]));
  }
  Var out = body(params);
  return std::make_shared<const Program>(inner.Finish(out, name + " body's result"));
}

}  // namespace

Var TraceCheckpoint(const std::vector<Var>& args, const BodyFn& body, const Policy& policy,
                    const std::string& label, Loc loc) {
  Builder* b = Require("checkpoint");
  Op op = b->NewOp(OpKind::kCheckpoint, loc);
  op.name = label;
  op.policy = policy;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  for (const Var& v : args) {
    b->IdOf(v, op);
    shapes.push_back(v.shape());
    dtypes.push_back(v.dtype());
  }
  op.body = TraceBody("checkpoint", label, shapes, dtypes, body);
  const Shape out_shape = op.body->shapes[op.body->output];
  return b->Emit(std::move(op), args, out_shape);
}

Var TraceScan(Var carry, const std::vector<Var>& xs, const std::vector<Var>& consts,
              const BodyFn& body, const std::string& label, Loc loc) {
  Builder* b = Require("scan");
  Op op = b->NewOp(OpKind::kScan, loc);
  op.name = label;
  b->IdOf(carry, op);
  if (xs.empty()) throw Error(StrCat(Program::Describe(op), ": scan needs at least one xs"));
  std::vector<Shape> shapes = {carry.shape()};
  std::vector<DType> dtypes = {carry.dtype()};
  const int64_t length = xs[0].shape().rank() > 0 ? xs[0].shape().dim(0) : -1;
  for (const Var& x : xs) {
    b->IdOf(x, op);
    if (x.shape().rank() == 0 || x.shape().dim(0) != length) {
      throw Error(StrCat(Program::Describe(op),
                         ": every xs needs the same leading (scanned) axis; got ",
                         Shapes(xs)));
    }
    shapes.push_back(x.shape().DropLeading());
    dtypes.push_back(x.dtype());
  }
  if (length == 0) {
    throw Error(StrCat(Program::Describe(op), ": scan over zero steps (xs ", Shapes(xs), ")"));
  }
  for (const Var& c : consts) {
    b->IdOf(c, op);
    if (c.dtype() == DType::kF32) {
      throw Error(StrCat(Program::Describe(op), ": const ", c.shape().ToString(),
                         " is f32; a scan's consts are integer values, which no step "
                         "differentiates (stack a float loop invariant as an xs)"));
    }
    shapes.push_back(c.shape());
    dtypes.push_back(c.dtype());
  }
  op.num_consts = static_cast<int>(consts.size());
  op.body = TraceBody("scan", label, shapes, dtypes, body);
  const Shape out_shape = op.body->shapes[op.body->output];
  if (out_shape != carry.shape()) {
    throw Error(StrCat(Program::Describe(op), ": the body returns ", out_shape.ToString(),
                       " but the carry is ", carry.shape().ToString(),
                       "; a scan body must return a carry of the carry's shape"));
  }
  std::vector<Var> inputs = {carry};
  inputs.insert(inputs.end(), xs.begin(), xs.end());
  inputs.insert(inputs.end(), consts.begin(), consts.end());
  return b->Emit(std::move(op), inputs, out_shape);
}

}  // namespace internal

const Shape& Var::shape() const {
  if (builder_ == nullptr) throw Error("shape() of an uninitialized Var");
  return builder_->ShapeOf(id_);
}

DType Var::dtype() const {
  if (builder_ == nullptr) throw Error("dtype() of an uninitialized Var");
  return builder_->DTypeOf(id_);
}

Var matmul(Var a, Var b, Loc loc) { return internal::Binary(OpKind::kMatMul, a, b, loc); }

Var relu(Var x, Loc loc) { return internal::Unary(OpKind::kRelu, x, loc); }
Var sin(Var x, Loc loc) { return internal::Unary(OpKind::kSin, x, loc); }
Var cos(Var x, Loc loc) { return internal::Unary(OpKind::kCos, x, loc); }
Var square(Var x, Loc loc) { return internal::Unary(OpKind::kSquare, x, loc); }
Var add(Var a, Var b, Loc loc) { return internal::Binary(OpKind::kAdd, a, b, loc); }
Var mul(Var a, Var b, Loc loc) { return internal::Binary(OpKind::kMul, a, b, loc); }

Var sum(Var x, Loc loc) { return internal::Unary(OpKind::kSum, x, loc); }

Var name(Var x, const std::string& label, Loc loc) {
  internal::Builder* b = internal::Require("name");
  Op op = b->NewOp(OpKind::kName, loc);
  if (label.empty()) throw Error(StrCat(Program::Describe(op), ": empty checkpoint_name label"));
  op.name = label;
  return internal::Primitive(std::move(op), {x});
}

Var apply(const std::string& op_name, const std::vector<Var>& inputs, const OpAttrs& attrs,
          Loc loc) {
  internal::Builder* b = internal::Require(op_name.c_str());
  const OpDef* def = FindOpDef(op_name);
  if (def == nullptr) {
    std::vector<std::string> names;
    for (const OpDef& d : OpDefs()) names.push_back(d.name);
    throw Error(StrCat(loc.file_name(), ":", loc.line_number(), ": apply: unknown op '", op_name,
                       "'; the ops are ", Join(names, ", ")));
  }
  Op op = b->NewOp(def->kind, loc);
  op.scalar = attrs.scalar;
  op.ints = attrs.ints;
  op.name = attrs.name;
  return internal::Primitive(std::move(op), inputs);
}

Var softmax(Var x, Loc loc) { return internal::Unary(OpKind::kSoftmax, x, loc); }
Var gelu(Var x, Loc loc) { return internal::Unary(OpKind::kGelu, x, loc); }

Var layer_norm(Var x, Var gamma, Var beta, Loc loc) {
  internal::Builder* b = internal::Require("layer_norm");
  return internal::Primitive(b->NewOp(OpKind::kLayerNorm, loc), {x, gamma, beta});
}

Var scale(Var x, double c, Loc loc) {
  internal::Builder* b = internal::Require("scale");
  Op op = b->NewOp(OpKind::kScale, loc);
  op.scalar = c;
  return internal::Primitive(std::move(op), {x});
}

Var bias_add(Var x, Var b, Loc loc) {
  return internal::Binary(OpKind::kBiasAdd, x, b, loc);
}

Var transpose(Var x, Loc loc) { return internal::Unary(OpKind::kTranspose, x, loc); }

Var split_heads(Var x, int64_t batch, int64_t heads, Loc loc) {
  internal::Builder* b = internal::Require("split_heads");
  Op op = b->NewOp(OpKind::kSplitHeads, loc);
  op.ints = {batch, heads};
  return internal::Primitive(std::move(op), {x});
}

Var merge_heads(Var x, int64_t batch, Loc loc) {
  internal::Builder* b = internal::Require("merge_heads");
  Op op = b->NewOp(OpKind::kMergeHeads, loc);
  op.ints = {batch};
  return internal::Primitive(std::move(op), {x});
}

Var checkpoint_n(const std::function<Var(const std::vector<Var>&)>& body,
                 const std::vector<Var>& args, const Policy& policy, const std::string& label,
                 Loc loc) {
  return internal::TraceCheckpoint(args, body, policy, label, loc);
}

Var scan_n(const std::function<Var(Var, const std::vector<Var>&)>& body, Var carry,
           const std::vector<Var>& xs, const std::string& label, Loc loc) {
  return internal::TraceScan(
      carry, xs, {},
      [&body](const std::vector<Var>& p) {
        return body(p[0], std::vector<Var>(p.begin() + 1, p.end()));
      },
      label, loc);
}

Var scan_with_consts(
    const std::function<Var(Var, const std::vector<Var>&, const std::vector<Var>&)>& body,
    Var carry, const std::vector<Var>& xs, const std::vector<Var>& consts,
    const std::string& label, Loc loc) {
  const size_t k = xs.size();
  return internal::TraceScan(
      carry, xs, consts,
      [&body, k](const std::vector<Var>& p) {
        return body(p[0], std::vector<Var>(p.begin() + 1, p.begin() + 1 + k),
                    std::vector<Var>(p.begin() + 1 + k, p.end()));
      },
      label, loc);
}

Program Trace(const std::string& name, const std::vector<ParamDecl>& params,
              const std::function<Var(const std::vector<Var>&)>& f) {
  if (internal::Builder::Current() != nullptr) {
    throw Error(StrCat("Trace(", name, "): already tracing; nest with checkpoint or scan"));
  }
  internal::Builder builder(name, "", nullptr);
  internal::Builder::Activation active(&builder);
  std::vector<Var> vars;
  for (const ParamDecl& p : params) vars.push_back(builder.AddParam(p.name, p.shape, p.dtype));
  Var out = f(vars);
  if (out.shape().rank() != 0) {
    throw Error(StrCat("program ", name, " returns ", out.shape().ToString(),
                       "; value_and_grad needs a scalar loss (reduce it with sum)"));
  }
  return builder.Finish(out, name + "'s result");
}

}  // namespace remat
