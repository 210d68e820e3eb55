// Program text's parser (program_text.h's ParseProgram and
// ReadProgramFile): the lexer's tokens (program_text_lexer.h) read statement
// by statement, each op's inputs, attributes and type checked as the tracer
// checks them, and each body against its op (program_text_structure.h).
#include "engines/api/program_text.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/op_def.h"
#include "engines/api/op_shape.h"
#include "engines/api/program_text_lexer.h"
#include "engines/api/program_text_structure.h"
#include "engines/api/program_text_syntax.h"
#include "engines/api/schedule_spec.h"

namespace remat {
namespace program_text {
namespace {

// Every op the text names: the primitives of the OpDef registry, then the
// structural ops.
std::vector<OpKind> AllKinds() {
  std::vector<OpKind> kinds;
  for (const OpDef& def : OpDefs()) kinds.push_back(def.kind);
  for (OpKind k : {OpKind::kCheckpoint, OpKind::kScan, OpKind::kChain}) kinds.push_back(k);
  return kinds;
}

// Programs nest this deep at most: deeper input is refused rather than
// allowed to exhaust the stack.
constexpr int kMaxDepth = 64;
// Dimensions and integer attributes are at most this, and a value has at
// most kMaxElements elements, so that no shape arithmetic overflows.
constexpr int64_t kMaxDim = int64_t{1} << 31;
constexpr int64_t kMaxElements = int64_t{1} << 48;

// Why `spec` cannot be the schedule of a `kind` op (a scan or a chain), or ""
// when it can: its syntax, checked at load time (schedule_spec.h's
// ParseScheduleSpec, and checkpoint_every:K, a scan's only). What depends on
// the chain's costs (a budget too small for it) shows when it runs.
std::string ScheduleProblem(OpKind kind, const std::string& spec) {
  if (spec.empty()) return "";  // no schedule
  try {
    if (CheckpointEvery(spec) > 0) {
      if (kind == OpKind::kScan) return "";
      return StrCat("schedule '", spec, "': checkpoint_every:K is a scan's; a chain takes ",
                    Join(ScheduleForms(), ", "));
    }
  } catch (const Error& e) {
    return e.what();  // "schedule 'SPEC': checkpoint_every takes ..."
  }
  try {
    ParseScheduleSpec(spec);
  } catch (const Error& e) {
    const std::string why = e.what();
    const bool unknown = why.rfind("unknown schedule", 0) == 0;
    return StrCat("schedule '", spec, "': ", why,
                  unknown && kind == OpKind::kScan ? " (or checkpoint_every:K)" : "");
  }
  return "";
}

// A value of the program being parsed, and where it was defined.
struct Defined {
  int id = -1;
  int line = 0;
  int column = 0;
};

// The values of one program (the file's or a body) while it is parsed.
struct Scope {
  const Scope* parent = nullptr;
  std::string what;  // "program layer_loss", "the body of checkpoint at 5:3"
  std::map<std::string, Defined> values;
};

class Parser : private SourceErrors {
 public:
  Parser(const std::string& text, const std::string& filename)
      : SourceErrors(filename), text_(text) {}

  Program File() {
    tokens_ = Lex(text_, *this);
    SkipEols();
    if (Peek().kind == TokenKind::kEof) {
      Fail(Peek(), "empty file; expected 'program NAME(PARAMS) {'");
    }
    ExpectWord("program", "expected 'program NAME(PARAMS) {' to begin the file");
    Program p;
    p.name = Name("the program's name");
    Scope scope;
    scope.what = "program " + NameText(p.name);
    ParseParams(&p, &scope);
    const Token open = Expect("{", "after the program's parameters");
    ExpectEol("after '{'");
    Statements(&p, &scope, open, 0);
    SkipEols();
    if (Peek().kind != TokenKind::kEof) {
      Fail(Peek(), StrCat("trailing text after the program's closing '}': ", Describe(Peek()),
                          "; expected the end of the file (one program per file)"));
    }
    const Shape& out = p.shapes[p.output];
    if (out.rank() != 0 || p.dtype(p.output) != DType::kF32) {
      Fail(return_token_, StrCat("program ", NameText(p.name), " returns ",
                                 TypeText(out, p.dtype(p.output)),
                                 "; expected a scalar f32[] (the loss value_and_grad "
                                 "differentiates; reduce it with sum)"));
    }
    return p;
  }

 private:

  // ---- token helpers

  const Token& Peek() const { return tokens_[pos_]; }
  Token Next() {
    Token t = tokens_[pos_];
    if (t.kind != TokenKind::kEof) ++pos_;
    return t;
  }
  bool IsPunct(const Token& t, const char* p) const {
    return t.kind == TokenKind::kPunct && t.text == p;
  }
  bool IsWord(const Token& t, const char* w) const {
    return t.kind == TokenKind::kWord && t.text == w;
  }
  void SkipEols() {
    while (Peek().kind == TokenKind::kEol) Next();
  }
  Token Expect(const char* punct, const std::string& where) {
    if (!IsPunct(Peek(), punct)) {
      Fail(Peek(), StrCat("expected '", punct, "' ", where, ", got ", Describe(Peek())));
    }
    return Next();
  }
  Token ExpectWord(const char* word, const std::string& message) {
    if (!IsWord(Peek(), word)) Fail(Peek(), StrCat(message, ", got ", Describe(Peek())));
    return Next();
  }
  void ExpectEol(const std::string& where) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kEol) {
      Next();
      return;
    }
    if (t.kind == TokenKind::kEof) return;
    Fail(t, StrCat("trailing text ", where, ": ", Describe(t), "; expected the end of the line"));
  }
  // A NAME: an ID or a string.
  std::string Name(const std::string& what) {
    const Token& t = Peek();
    if ((t.kind == TokenKind::kWord && IsId(t.text)) || t.kind == TokenKind::kString) {
      return Next().text;
    }
    Fail(t, StrCat("expected ", what, " (a name or a quoted string), got ", Describe(t)));
  }
  std::string String(const std::string& what) {
    if (Peek().kind != TokenKind::kString) {
      Fail(Peek(), StrCat("bad attribute: expected ", what, " as a quoted string, got ",
                          Describe(Peek())));
    }
    return Next().text;
  }
  int64_t Int(const std::string& what) {
    const Token t = Next();
    if (t.kind == TokenKind::kWord) {
      const char* s = t.text.c_str();
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(s, &end, 10);
      const bool digits = t.text.find_first_not_of("-0123456789") == std::string::npos;
      if (digits && end == s + t.text.size() && errno == 0 && v >= -kMaxDim && v <= kMaxDim) {
        return v;
      }
    }
    Fail(t, StrCat("expected ", what, " (an integer of magnitude at most ", kMaxDim, "), got ",
                   Describe(t)));
  }

  // TYPE: a dtype and a shape. `dtype`, when given, receives the dtype
  // (f32 or i32); without it only f32 is taken (an op's result).
  Shape Type(DType* dtype = nullptr) {
    const Token t = Peek();
    if (t.kind != TokenKind::kWord || !IsId(t.text)) {
      Fail(t, StrCat("expected a type such as f32[8,16], got ", Describe(t)));
    }
    if (t.text == "i32" && dtype != nullptr) {
      *dtype = DType::kI32;
    } else if (t.text == "f32") {
      if (dtype != nullptr) *dtype = DType::kF32;
    } else {
      Fail(t, StrCat("unknown dtype '", t.text, "'; expected f32",
                     dtype != nullptr ? " or i32 (an integer input: ids, targets, seeds)"
                                      : " (an op's result is f32)"));
    }
    Next();
    Expect("[", "after the dtype (a shape such as [8,16], [] for a scalar)");
    std::vector<int64_t> dims;
    int64_t elements = 1;
    if (!IsPunct(Peek(), "]")) {
      while (true) {
        const Token at = Peek();
        const int64_t d = Int("a dimension");
        if (d < 0) Fail(at, StrCat("negative dimension ", d, "; expected a size >= 0"));
        dims.push_back(d);
        if (dims.size() > static_cast<size_t>(kMaxRank)) {
          Fail(at, StrCat("a shape of rank ", dims.size(), "; expected rank 0 to ", kMaxRank));
        }
        elements *= d;
        if (elements > kMaxElements) {
          Fail(at, StrCat("a shape of more than 2^48 elements; expected a smaller one"));
        }
        if (!IsPunct(Peek(), ",")) break;
        Next();
      }
    }
    Expect("]", "to close the shape");
    return Shape(std::move(dims));
  }

  // '(' params ')', newlines allowed inside.
  void ParseParams(Program* p, Scope* scope) {
    Expect("(", "to open the parameter list");
    SkipEols();
    if (!IsPunct(Peek(), ")")) {
      while (true) {
        SkipEols();
        const Token id = Next();
        if (id.kind != TokenKind::kWord || !IsId(id.text)) {
          Fail(id, StrCat("expected a parameter 'ID: TYPE', got ", Describe(id)));
        }
        Expect(":", StrCat("after parameter ", id.text, " (ID: TYPE)"));
        DType dtype = DType::kF32;
        const Shape shape = Type(&dtype);
        std::string name = id.text;
        if (IsWord(Peek(), "name")) {
          Next();
          Expect("=", "after 'name' (name=\"...\")");
          name = String("the parameter's name");
        }
        bool data = false;
        if (IsWord(Peek(), "data")) {
          Next();
          data = true;
        }
        Define(scope, id, static_cast<int>(p->shapes.size()));
        if (data) {
          p->data_params.resize(p->param_names.size(), false);
          p->data_params.push_back(true);
        }
        p->param_names.push_back(name);
        p->shapes.push_back(shape);
        p->dtypes.push_back(dtype);
        SkipEols();
        if (!IsPunct(Peek(), ",")) break;
        Next();
      }
    }
    SkipEols();
    Expect(")", "to close the parameter list (parameters are separated by ',')");
  }

  void Define(Scope* scope, const Token& id, int value) {
    auto [it, inserted] = scope->values.emplace(id.text, Defined{value, id.line, id.column});
    if (!inserted) {
      Fail(id, StrCat("redefined value %", id.text, " (first defined at ", it->second.line, ":",
                      it->second.column, " in ", scope->what,
                      "); expected a new name: a value is defined once"));
    }
  }

  // The value `t` names in `scope`.
  int Resolve(const Scope& scope, const Token& t) {
    auto it = scope.values.find(t.text);
    if (it != scope.values.end()) return it->second.id;
    for (const Scope* s = scope.parent; s != nullptr; s = s->parent) {
      auto outer = s->values.find(t.text);
      if (outer != s->values.end()) {
        Fail(t, StrCat("%", t.text, " is a value of ", s->what, " (defined at ",
                       outer->second.line, ":", outer->second.column, "), captured by ",
                       scope.what, "; expected a value of the body: pass it to the body as an "
                       "input and read the body's parameter"));
      }
    }
    Fail(t, StrCat("undefined value %", t.text, " in ", scope.what,
                   "; expected a parameter or a value defined above"));
  }

  // Statements up to and including the closing '}' of the block `open`.
  void Statements(Program* p, Scope* scope, const Token& open, int depth) {
    bool returned = false;
    while (true) {
      SkipEols();
      const Token t = Peek();
      if (t.kind == TokenKind::kEof) {
        Fail(t, StrCat("unterminated ", scope->what, " (its '{' is at ", open.line, ":",
                       open.column, "); expected '}'"));
      }
      if (IsPunct(t, "}")) {
        if (!returned) {
          Fail(t, StrCat("missing return: ", scope->what,
                         " ends without one; expected 'return %VALUE' before '}'"));
        }
        Next();
        return;
      }
      if (returned) {
        Fail(t, StrCat("expected '}' after the return of ", scope->what, ", got ", Describe(t),
                       " (return is the last statement)"));
      }
      if (IsWord(t, "return")) {
        Next();
        const Token v = Next();
        if (v.kind != TokenKind::kValue) {
          Fail(v, StrCat("expected the returned value '%NAME' after 'return', got ",
                         Describe(v)));
        }
        p->output = Resolve(*scope, v);
        return_token_ = t;
        ExpectEol("after the returned value");
        returned = true;
        continue;
      }
      if (t.kind != TokenKind::kValue) {
        Fail(t, StrCat("expected a statement '%NAME: TYPE = op(...)', 'return %VALUE' or '}', "
                       "got ", Describe(t)));
      }
      Statement(p, scope, depth);
    }
  }

  OpKind Kind(const Token& t) {
    if (t.kind == TokenKind::kWord) {
      if (const OpDef* def = FindOpDef(t.text)) return def->kind;
      for (OpKind k : {OpKind::kCheckpoint, OpKind::kScan, OpKind::kChain}) {
        if (t.text == OpKindName(k)) return k;
      }
    }
    std::vector<std::string> names;
    for (OpKind k : AllKinds()) names.push_back(OpKindName(k));
    Fail(t, StrCat(t.kind == TokenKind::kWord ? "unknown op " : "expected an op, got ",
                   Describe(t), "; expected one of ", Join(names, ", ")));
  }

  // Which attributes `kind` takes.
  static bool Takes(OpKind kind, const std::string& key) {
    if (key == "scope" || key == "@") return true;
    if (key == "name") return kind == OpKind::kName || kind == OpKind::kState || IsStructural(kind);
    if (key == "policy") return kind == OpKind::kCheckpoint;
    if (key == "schedule") return kind == OpKind::kScan || kind == OpKind::kChain;
    if (key == "consts") return kind == OpKind::kScan;
    if (key == "scalar") {
      return !IsStructural(kind) && (Def(kind).has_scalar || Def(kind).default_scalar != 0);
    }
    if (key == "ints") return !IsStructural(kind) && Def(kind).num_ints != 0;
    if (key == "keepdim") return !IsStructural(kind) && Def(kind).reduces_axes;
    return false;
  }

  // The scalar= value v (at token `at`) as op stores it: an op whose
  // scalar is optional (OpDef::default_scalar) stores its default as 0,
  // the value that leaving scalar= out gives, and takes no explicit 0.
  double OptionalScalar(const Op& op, double v, const Token& at) {
    const double d = Def(op.kind).default_scalar;
    if (d == 0) return v;
    if (v == 0) {
      Fail(at, StrCat("bad attribute: ", OpKindName(op.kind), "'s scalar= must not be 0; leave it "
                      "out for its default ", NumberText(d)));
    }
    return v == d ? 0.0 : v;
  }

  void Attributes(Op* op, const Token& op_token) {
    std::set<std::string> seen;
    while (Peek().kind != TokenKind::kEol && Peek().kind != TokenKind::kEof &&
           !IsPunct(Peek(), "{")) {
      const Token key = Next();
      std::string k;
      if (IsPunct(key, "@")) {
        k = "@";
      } else if (key.kind == TokenKind::kWord) {
        k = key.text;
      } else {
        Fail(key, StrCat("expected an attribute (@ \"site\", scope=, name=, policy=, schedule=, "
                         "consts=, scalar=, ints=, keepdim=) or the end of the line, got ",
                         Describe(key)));
      }
      static const std::set<std::string> kKeys = {"@",      "scope",  "name", "policy", "schedule",
                                                  "consts", "scalar", "ints", "keepdim"};
      if (!kKeys.count(k)) {
        Fail(key, StrCat("bad attribute: unknown attribute '", k,
                         "'; expected @ \"site\", scope=, name=, policy=, schedule=, consts=, "
                         "scalar=, ints= or keepdim="));
      }
      if (!Takes(op->kind, k)) {
        Fail(key, StrCat("bad attribute: ", OpKindName(op->kind), " takes no ",
                         k == "@" ? std::string("@") : k + "="));
      }
      if (!seen.insert(k).second) {
        Fail(key, StrCat("bad attribute: ", k, " given twice; expected it once"));
      }
      if (k == "@") {
        op->site = String("the site after '@'");
        continue;
      }
      Expect("=", StrCat("after attribute '", k, "'"));
      if (k == "scope") {
        op->scope = String("scope");
      } else if (k == "name") {
        op->name = String("name");
      } else if (k == "schedule") {
        const Token at = Peek();
        op->schedule = String("schedule");
        const std::string problem = ScheduleProblem(op->kind, op->schedule);
        if (!problem.empty()) Fail(at, problem);
      } else if (k == "policy") {
        const Token at = Peek();
        const std::string spec = String("policy");
        try {
          op->policy = Policy::Parse(spec);
        } catch (const Error& e) {
          Fail(at, StrCat("bad attribute: policy ", Quote(spec), ": ", e.what()));
        }
      } else if (k == "scalar") {
        const Token at = Next();
        char* end = nullptr;
        const char* s = at.text.c_str();
        const double v = at.kind == TokenKind::kWord ? std::strtod(s, &end) : 0.0;
        if (at.kind != TokenKind::kWord || at.text.empty() || end != s + at.text.size()) {
          Fail(at, StrCat("bad attribute: expected a number after scalar= (e.g. 0.125), got ",
                          Describe(at)));
        }
        op->scalar = OptionalScalar(*op, v, at);
      } else if (k == "consts") {
        const Token at = Peek();
        const int64_t n = Int("the number of consts after consts=");
        if (n < 0 || n > 1024) {
          Fail(at, StrCat("bad attribute: consts=", n, "; expected the number of the scan's "
                          "trailing loop-invariant inputs (0 to 1024)"));
        }
        op->num_consts = static_cast<int>(n);
      } else if (k == "keepdim") {
        // A reduction's keepdim, held in Op::scalar (op_def.h, reduces_axes).
        const Token at = Peek();
        const int64_t v = Int("0 or 1 after keepdim=");
        if (v != 0 && v != 1) {
          Fail(at, StrCat("bad attribute: keepdim=", v, "; expected 0 (drop the reduced axes) or 1 "
                          "(keep them with size 1)"));
        }
        op->scalar = static_cast<double>(v);
      } else if (k == "ints") {
        Expect("[", "after ints= (a list such as [2,4])");
        while (true) {
          op->ints.push_back(Int("an integer attribute"));
          if (!IsPunct(Peek(), ",")) break;
          Next();
        }
        Expect("]", "to close the ints list");
      }
    }
    if (op->kind == OpKind::kName && op->name.empty()) {
      Fail(op_token, "name needs a non-empty label: name=\"LABEL\"");
    }
    if (!IsStructural(op->kind) && Def(op->kind).has_scalar && !seen.count("scalar")) {
      Fail(op_token, StrCat(OpKindName(op->kind), " needs its constant: scalar=C"));
    }
    if (!IsStructural(op->kind) && Def(op->kind).num_ints != 0 && !Def(op->kind).reduces_axes &&
        !Def(op->kind).optional_ints && !seen.count("ints")) {
      const char* what = op->kind == OpKind::kSplitHeads   ? "[BATCH,HEADS]"
                         : op->kind == OpKind::kMergeHeads ? "[BATCH]"
                         : op->kind == OpKind::kReshape    ? "[D0,D1,...] (the output's dims)"
                         : op->kind == OpKind::kPermute    ? "[P0,P1,...] (output axis i is input axis Pi)"
                         : op->kind == OpKind::kTopKSoftmax ? "[K]"
                         : op->kind == OpKind::kDropout    ? "[KEY]"
                         : op->kind == OpKind::kConv2d || op->kind == OpKind::kConv2dBias
                             ? "[STRIDE,PADDING] or [SH,SW,PH,PW,DH,DW,GROUPS]"
                         : op->kind == OpKind::kMaxPool2d  ? "[KERNEL,STRIDE,PADDING]"
                         : op->kind == OpKind::kHardtanh   ? "[MIN,MAX] (relu6: [0,6])"
                         : op->kind == OpKind::kSlice      ? "[AXIS,START,LENGTH] or [AXIS,START,LENGTH,STEP]"
                         : op->kind == OpKind::kExpand     ? "[D0,D1,...] (the output's dims)"
                         : op->kind == OpKind::kCat        ? "[AXIS]"
                         : op->kind == OpKind::kSelect     ? "[AXIS,INDEX]"
                         : op->kind == OpKind::kAdaptiveAvgPool2d ? "[OH,OW]"
                                                            : "[...]";
      Fail(op_token, StrCat(OpKindName(op->kind), " needs ints=", what));
    }
  }

  void Statement(Program* p, Scope* scope, int depth) {
    const Token id = Next();
    bool declared = false;
    Shape declared_shape;
    Token type_at;
    if (IsPunct(Peek(), ":")) {
      Next();
      type_at = Peek();
      declared_shape = Type();
      declared = true;
    }
    Expect("=", StrCat("after %", id.text, declared ? ": TYPE" : "",
                       " (a statement is %NAME: TYPE = op(INPUTS) ATTRIBUTES)"));
    const Token op_token = Next();
    Op op;
    op.kind = Kind(op_token);
    Expect("(", StrCat("after ", OpKindName(op.kind), " (its inputs in parentheses)"));
    std::vector<Token> arg_tokens;
    if (!IsPunct(Peek(), ")")) {
      while (true) {
        const Token v = Next();
        if (v.kind != TokenKind::kValue) {
          Fail(v, StrCat("expected an input '%NAME' of ", OpKindName(op.kind), ", got ",
                         Describe(v)));
        }
        op.inputs.push_back(Resolve(*scope, v));
        arg_tokens.push_back(v);
        if (!IsPunct(Peek(), ",")) break;
        Next();
      }
    }
    Expect(")", StrCat("after the inputs of ", OpKindName(op.kind),
                       " (inputs are separated by ',')"));
    Attributes(&op, op_token);
    const std::string where = StrCat(OpKindName(op.kind), " at ", op_token.line, ":",
                                     op_token.column);
    Shape out;
    if (IsStructural(op.kind)) {
      const Token open = Peek();
      if (!IsPunct(open, "{")) {
        Fail(open, StrCat(OpKindName(op.kind), " needs a body: expected '{' at the end of the "
                          "line, got ", Describe(open)));
      }
      if (depth + 1 >= kMaxDepth) {
        Fail(open, StrCat("bodies nested more than ", kMaxDepth, " deep; expected fewer"));
      }
      Next();
      ExpectEol("after '{'");
      SkipEols();
      ExpectWord("body", StrCat("expected 'body(PARAMS)' as the first line of the body of ",
                                where));
      auto body = std::make_shared<Program>();
      body->name = OpKindName(op.kind);
      if (!IsPunct(Peek(), "(")) body->name = Name("the body's name");
      Scope inner;
      inner.parent = scope;
      inner.what = "the body of " + where;
      const Token params_at = Peek();
      ParseParams(body.get(), &inner);
      ExpectEol("after the body's parameters");
      Statements(body.get(), &inner, open, depth + 1);
      out = StructuralShape(*this, *p, op, *body, op_token, params_at, where);
      op.body = std::move(body);
    } else {
      if (IsPunct(Peek(), "{")) {
        Fail(Peek(), StrCat(OpKindName(op.kind), " takes no body; expected the end of the line"));
      }
      const int arity = Arity(op.kind);
      if (static_cast<int>(op.inputs.size()) != arity) {
        Fail(op_token, StrCat("wrong arity: ", OpKindName(op.kind), " takes ", arity,
                              arity == 1 ? " input" : " inputs", ", got ", op.inputs.size(),
                              "; expected ", OpKindName(op.kind), "(",
                              arity == 1 ? "%X" : arity == 2 ? "%A, %B" : "%X, %GAMMA, %BETA",
                              ")"));
      }
      std::vector<Shape> shapes;
      std::vector<DType> dtypes;
      for (int v : op.inputs) {
        shapes.push_back(p->shapes[v]);
        dtypes.push_back(p->dtype(v));
      }
      try {
        out = OutputShape(op, shapes);
      } catch (const Error& e) {
        Fail(op_token, StrCat("shape mismatch: ", OpKindName(op.kind), "(",
                              Types(*p, op.inputs), "): ", e.what()));
      }
      try {
        CheckInputDTypes(op, dtypes);
      } catch (const Error& e) {
        Fail(op_token, StrCat("dtype mismatch: ", OpKindName(op.kind), "(",
                              Types(*p, op.inputs), "): ", e.what()));
      }
    }
    if (declared && declared_shape != out) {
      Fail(type_at, StrCat("shape mismatch: %", id.text, " is declared ",
                           TypeText(declared_shape), " but ", OpKindName(op.kind), "(",
                           Types(*p, op.inputs), ") gives ", TypeText(out)));
    }
    ExpectEol(StrCat("after the ", OpKindName(op.kind), " statement"));
    op.output = p->num_values();
    Define(scope, id, op.output);
    p->shapes.push_back(out);
    if (!p->dtypes.empty()) p->dtypes.resize(p->shapes.size(), DType::kF32);
    p->ops.push_back(std::move(op));
  }

  const std::string& text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  Token return_token_;
};

}  // namespace
}  // namespace program_text

Program ParseProgram(const std::string& text, const std::string& filename) {
  return program_text::Parser(text, filename).File();
}

Program ReadProgramFile(const std::string& path) {
  // Only regular files, and not past kMaxFileBytes: a device or a pipe
  // (--program /dev/zero) would otherwise be read forever.
  constexpr uintmax_t kMaxFileBytes = uintmax_t{1} << 30;
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status)) throw Error(StrCat(path, ": cannot open"));
  if (!std::filesystem::is_regular_file(status)) {
    throw Error(StrCat(path, ": not a regular file; expected a program file"));
  }
  if (std::filesystem::file_size(path, error) > kMaxFileBytes || error) {
    throw Error(StrCat(path, ": larger than 1 GiB (or of unknown size); expected a program file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(StrCat(path, ": cannot read"));
  return ParseProgram(text.str(), path);
}

}  // namespace remat
