#include "engines/api/program_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat {
namespace {

// The message ParseProgram throws for `text`, or "" if it parses.
std::string ParseError(const std::string& text) {
  try {
    ParseProgram(text, "t.remat");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A message starting with "t.remat:LINE:COLUMN: " and containing `words`.
void ExpectError(const std::string& text, int line, int column, const std::string& words) {
  const std::string message = ParseError(text);
  const std::string where = "t.remat:" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  EXPECT_EQ(message.rfind(where, 0), 0u) << "expected at " << where << " got: " << message
                                         << "\nfor:\n" << text;
  EXPECT_NE(message.find(words), std::string::npos) << "expected '" << words << "' in: "
                                                    << message;
}

constexpr char kSmall[] = R"(# a two-layer loss
program small(w: f32[4,4], x: f32[2,4]) {
  %h: f32[2,4] = matmul(%x, %w) @ "small.py:3" scope="layer"
  %r = relu(%h)
  %c: f32[2,4] = checkpoint(%r, %w) name="block" policy="dots_saveable" {
    body(a: f32[2,4], b: f32[4,4])
    %m: f32[2,4] = matmul(%a, %b)
    %n: f32[2,4] = name(%m) name="m"
    return %n
  }

  %s: f32[] = sum(%c)
  return %s
}
)";

TEST(ProgramTextTest, ParsesAHandWrittenProgram) {
  const Program p = ParseProgram(kSmall, "small.remat");
  EXPECT_EQ(p.name, "small");
  EXPECT_EQ(p.param_names, (std::vector<std::string>{"w", "x"}));
  ASSERT_EQ(p.ops.size(), 4u);
  EXPECT_EQ(p.ops[0].kind, OpKind::kMatMul);
  EXPECT_EQ(p.ops[0].inputs, (std::vector<int>{1, 0}));
  EXPECT_EQ(p.ops[0].site, "small.py:3");
  EXPECT_EQ(p.ops[0].scope, "layer");
  EXPECT_EQ(p.shapes[p.ops[1].output], Shape({2, 4}));  // inferred
  const Op& c = p.ops[2];
  EXPECT_EQ(c.kind, OpKind::kCheckpoint);
  EXPECT_EQ(c.name, "block");
  EXPECT_EQ(c.policy.ToString(), "dots_saveable");
  ASSERT_NE(c.body, nullptr);
  EXPECT_EQ(c.body->name, "checkpoint");
  EXPECT_EQ(c.body->param_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.body->ops[1].name, "m");
  EXPECT_EQ(p.Labels(), std::vector<std::string>{"m"});
  EXPECT_EQ(p.output, 5);
  EXPECT_EQ(p.shapes[5], Shape());
  // Printed and parsed again: the same program.
  const Program again = ParseProgram(PrintProgram(p), "printed");
  EXPECT_EQ(ProgramDifference(p, again), "");
  EXPECT_EQ(PrintProgram(again), PrintProgram(p));
}

TEST(ProgramTextTest, EveryAttributeRoundTrips) {
  // Values no problem has: odd names, quoting, scalars to the bit, policies
  // of every shape, parameter names that are not IDs.
  Program p = Trace("odd \"name\"", {{"x", Shape({4, 6})}, {"g", Shape({6})}, {"b", Shape({6})}},
                    [](const std::vector<Var>& a) {
                      Var y = layer_norm(a[0], a[1], a[2]);
                      y = scale(y, 0.1);
                      y = scale(y, -0.0);
                      y = scale(y, std::nextafter(1.0, 2.0));
                      y = scale(y, std::numeric_limits<double>::infinity());
                      y = scale(y, 1e-310);  // subnormal
                      Var h = split_heads(y, 2, 3);
                      h = softmax(h);
                      Var m = merge_heads(h, 2);
                      m = name(gelu(m), "a \\ label\twith\nodd\x01 bytes");
                      return sum(transpose(m));
                    });
  p.param_names[1] = "";     // as a chain's unnamed inputs
  p.param_names[2] = "has space";
  p.data_params = {true, false, true};  // x and b: data inputs
  p.ops[0].site = "";
  p.ops[1].scope = "scope \"quoted\"";
  const std::vector<std::string> policies = {
      "save_from_both_policies:dots_saveable+save_only_these_names:a,b",
      "save_and_offload_only_these_names:a,b/c",
      "offload_dot_with_no_batch_dims",
      "save_anything_except_these_names:x",
      "save_only_these_names:",
  };
  for (const std::string& spec : policies) {
    SCOPED_TRACE(spec);
    const Program wrapped = ApplyPolicy(p, Policy::Parse(spec));
    const std::string text = PrintProgram(wrapped);
    const Program parsed = ParseProgram(text, "t");
    EXPECT_EQ(ProgramDifference(wrapped, parsed), "") << text;
    EXPECT_EQ(PrintProgram(parsed), text);
  }
  const std::string text = PrintProgram(p);
  EXPECT_NE(text.find("scalar=0.1 "), std::string::npos) << text;
  EXPECT_NE(text.find("scalar=-0 "), std::string::npos) << text;
  EXPECT_NE(text.find("scalar=1.0000000000000002 "), std::string::npos) << text;
  EXPECT_NE(text.find("1: f32[6] name=\"\","), std::string::npos) << text;
  EXPECT_NE(text.find("x: f32[4,6] data,"), std::string::npos) << text;
  EXPECT_NE(text.find("name=\"has space\" data)"), std::string::npos) << text;
  EXPECT_NE(text.find("program \"odd \\\"name\\\"\"("), std::string::npos) << text;
}

TEST(ProgramTextTest, ProgramDifferenceFindsEachAttribute) {
  const Program p = ParseProgram(kSmall, "t");
  auto changed = [&](auto edit) {
    Program q = p;
    auto body = std::make_shared<Program>(*q.ops[2].body);
    q.ops[2].body = body;
    edit(q, *body);
    return ProgramDifference(p, q);
  };
  EXPECT_EQ(changed([](Program&, Program&) {}), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.ops[0].site = "x"; }), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.ops[0].scope = "x"; }), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.ops[2].policy = Policy(); }), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.ops[2].name = "x"; }), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.ops[0].scalar = -0.0; }), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.ops[0].schedule = "sqrt"; }), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.ops[0].ints = {1}; }), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.param_names[0] = "v"; }), "");
  EXPECT_NE(changed([](Program& q, Program&) { q.data_params = {true}; }), "");
  EXPECT_NE(changed([](Program&, Program& b) { b.ops[1].name = "n"; }), "");
  EXPECT_NE(changed([](Program&, Program& b) { b.name = "n"; }), "");
}

// Every problem, at its default and test sizes, under every kind of policy
// and a few schedules: printed and parsed, the same program, and the same
// bits from eager and recompute (at test sizes).
TEST(ProgramTextTest, EveryProblemRoundTripsToTheSameBits) {
  int checked = 0, ran = 0;
  for (const auto& problem : AllProblems()) {
    for (bool test_sizes : {false, true}) {
      const ParamValues params = ResolveParams(*problem, {}, test_sizes);
      const Program base = problem->Build(params);
      std::vector<std::string> labels = base.Labels();
      const std::string names = labels.empty() ? "none" : Join(labels, ",");
      std::vector<std::pair<std::string, Program>> variants = {{"as traced", base}};
      for (const std::string& spec :
           {std::string("everything_saveable"), std::string("nothing_saveable"),
            std::string("dots_saveable"), std::string("dots_with_no_batch_dims_saveable"),
            "save_only_these_names:" + names, "save_any_names_but_these:" + names,
            "save_anything_except_these_names:" + names,
            "save_from_both_policies:dots_saveable+save_only_these_names:" + names,
            "save_and_offload_only_these_names:/" + names,
            std::string("offload_dot_with_no_batch_dims")}) {
        variants.push_back({"policy " + spec, ApplyPolicy(base, Policy::Parse(spec))});
      }
      for (const char* spec : {"every:2", "revolve:2", "checkpoint_every:2", "sqrt"}) {
        try {
          variants.push_back({std::string("schedule ") + spec, ApplySchedule(base, spec)});
        } catch (const Error&) {
          // No scan and no chain: nothing to schedule.
        }
      }
      for (const auto& [what, program] : variants) {
        SCOPED_TRACE(StrCat(problem->name(), " ", FormatParams(params), " ", what));
        const std::string text = PrintProgram(program);
        const Program parsed = ParseProgram(text, problem->name() + ".remat");
        ASSERT_EQ(ProgramDifference(program, parsed), "") << text;
        ASSERT_EQ(PrintProgram(parsed), text);
        ++checked;
        if (!test_sizes) continue;
        const std::vector<Tensor> inputs = MakeInputs(*problem, program, params, 7);
        const std::vector<int> wrt = WrtIndices(*problem, program);
        for (const char* engine : {"eager", "recompute"}) {
          const Result a = MakeEngine(engine)->ValueAndGrad(program, inputs, wrt, {});
          const Result b = MakeEngine(engine)->ValueAndGrad(parsed, inputs, wrt, {});
          const auto difference = FirstBitDifference(a, b);
          EXPECT_FALSE(difference.has_value()) << engine << ": " << *difference;
          ++ran;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(ran, 100);
}

// ------------------------------------------------------------- errors

// One bad input per row: ParseProgram's message starts with
// "t.remat:LINE:COLUMN: " and contains `words`. `what` names the case (the
// test's name: ProgramTextBadInputTest.ReportsWhereAndWhat/WHAT).
struct ErrorCase {
  const char* what;
  const char* text;
  int line;
  int column;
  const char* words;
};

const ErrorCase kErrorCases[] = {
    {"EmptyFile1", "", 1, 1, "empty file; expected 'program NAME(PARAMS) {'"},
    {"EmptyFile2", "\n  # only a comment\n\n", 4, 1, "empty file"},
    {"NotAProgram", "module m() {}\n", 1, 1, "expected 'program NAME(PARAMS) {' to begin the file"},
    {"UnknownOp", "program p(x: f32[2]) {\n  %y = erfinv(%x)\n  return %y\n}\n", 2, 8,
     "unknown op 'erfinv'; expected one of matmul, relu,"},
    {"WrongArity1", "program p(x: f32[2,2]) {\n  %y = matmul(%x)\n  return %y\n}\n", 2, 8,
     "wrong arity: matmul takes 2 inputs, got 1; expected matmul(%A, %B)"},
    {"WrongArity2", "program p(x: f32[2]) {\n  %y = relu(%x, %x)\n  return %y\n}\n", 2, 8,
     "wrong arity: relu takes 1 input, got 2"},
    // A body with more parameters than its op has inputs.
    {"WrongArity3",
     "program p(x: f32[2]) {\n  %y = checkpoint(%x) {\n    body(a: f32[2], b: f32[2])\n"
     "    return %a\n  }\n  %s = sum(%y)\n  return %s\n}\n",
     3, 9, "wrong arity: the body of checkpoint at 2:8 has 2 parameters for 1 inputs"},
    {"ShapeMismatchNamesBothShapes1",
     "program p(a: f32[2,3], b: f32[2,3]) {\n  %y = matmul(%a, %b)\n  return %y\n}\n", 2, 8,
     "shape mismatch: matmul(f32[2,3], f32[2,3]): matmul contracting dimensions "
     "differ: [2,3] x [2,3] (3 != 2)"},
    {"ShapeMismatchNamesBothShapes2",
     "program p(a: f32[2], b: f32[3]) {\n  %y = add(%a, %b)\n  return %y\n}\n", 2, 8,
     "add: shapes [2] and [3] do not broadcast"},
    // A declared type other than the inferred one.
    {"ShapeMismatchNamesBothShapes3",
     "program p(a: f32[2,3]) {\n  %y: f32[3,2] = relu(%a)\n  return %y\n}\n", 2, 7,
     "shape mismatch: %y is declared f32[3,2] but relu(f32[2,3]) gives f32[2,3]"},
    // A body parameter of another shape than its input.
    {"ShapeMismatchNamesBothShapes4",
     "program p(x: f32[2]) {\n  %y = checkpoint(%x) {\n    body(a: f32[3])\n"
     "    return %a\n  }\n  %s = sum(%y)\n  return %s\n}\n",
     3, 9,
     "shape mismatch: parameter 0 of the body of checkpoint at 2:8 is f32[3] but its "
     "input is f32[2]"},
    // A scan body that changes the carry's shape.
    {"ShapeMismatchNamesBothShapes5",
     "program p(c: f32[2], xs: f32[3,2,4]) {\n  %y = scan(%c, %xs) {\n"
     "    body(a: f32[2], x: f32[2,4])\n    return %x\n  }\n  %s = sum(%y)\n  return %s\n}\n",
     2, 8, "the body of scan at 2:8 returns f32[2,4] but the carry is f32[2]"},
    // A scan const (consts=1: the last input, seen whole by every step) of
    // another shape in the body than its input's.
    {"ShapeMismatchNamesBothShapes7",
     "program p(c: f32[2], xs: f32[3,2], m: i32[4]) {\n  %y = scan(%c, %xs, %m) consts=1 {\n"
     "    body(a: f32[2], x: f32[2], k: i32[3])\n    return %a\n  }\n  %s = sum(%y)\n"
     "  return %s\n}\n",
     3, 9,
     "shape mismatch: parameter 2 of the body of scan at 2:8 is i32[3] but its input const is "
     "i32[4]"},
    // A float const: it would need a gradient summed over the steps.
    {"ScanConstIsFloat",
     "program p(c: f32[2], xs: f32[3,2], m: f32[2]) {\n  %y = scan(%c, %xs, %m) consts=1 {\n"
     "    body(a: f32[2], x: f32[2], k: f32[2])\n    return %a\n  }\n  %s = sum(%y)\n"
     "  return %s\n}\n",
     2, 8,
     "dtype mismatch: const 1 of scan (input 2) is f32[2]; a scan's consts are integer "
     "values, which no step differentiates (stack a float loop invariant as an xs)"},
    // More consts than inputs after the carry and one xs.
    {"ScanConstsLeaveNoXs",
     "program p(c: f32[2], m: i32[3,2]) {\n  %y = scan(%c, %m) consts=1 {\n"
     "    body(a: f32[2], k: i32[3,2])\n    return %a\n  }\n  %s = sum(%y)\n"
     "  return %s\n}\n",
     2, 8,
     "wrong arity: scan takes a carry, at least one xs and its 1 consts, got 2 inputs"},
    {"ScanConstsNegative",
     "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) consts=-1 {\n"
     "    body(a: f32[2], x: f32[2])\n    return %a\n  }\n  %s = sum(%y)\n"
     "  return %s\n}\n",
     2, 29, "bad attribute: consts=-1"},
    {"ConstsOnACheckpoint",
     "program p(x: f32[2]) {\n  %y = checkpoint(%x) consts=1 {\n    body(a: f32[2])\n"
     "    return %a\n  }\n  %s = sum(%y)\n  return %s\n}\n",
     2, 23, "bad attribute: checkpoint takes no consts="},
    // The program's result is not a scalar.
    {"ShapeMismatchNamesBothShapes6", "program p(a: f32[2]) {\n  return %a\n}\n", 2, 3,
     "program p returns f32[2]; expected a scalar f32[]"},
    {"UnknownDtype1", "program p(a: f64[2]) {\n  return %a\n}\n", 1, 14,
     "unknown dtype 'f64'; expected f32"},
    {"UnknownDtype2", "program p(a: f32[2]) {\n  %b: bf16[2] = relu(%a)\n  return %b\n}\n", 2, 7,
     "unknown dtype 'bf16'"},
    {"UndefinedAndRedefinedValues1", "program p(a: f32[]) {\n  %b = relu(%c)\n  return %b\n}\n", 2,
     13, "undefined value %c in program p; expected a parameter or a value defined above"},
    {"UndefinedAndRedefinedValues2",
     "program p(a: f32[]) {\n  %b = relu(%a)\n  %b = sin(%a)\n  return %b\n}\n", 3, 3,
     "redefined value %b (first defined at 2:3 in program p)"},
    {"UndefinedAndRedefinedValues3", "program p(a: f32[], a: f32[]) {\n  return %a\n}\n", 1, 21,
     "redefined value %a (first defined at 1:11"},
    // Defined later is undefined here.
    {"UndefinedAndRedefinedValues4",
     "program p(a: f32[]) {\n  %b = relu(%c)\n  %c = relu(%a)\n  return %c\n}\n", 2, 13,
     "undefined value %c"},
    {"CaptureFromTheEnclosingProgram",
     "program p(x: f32[2], w: f32[2]) {\n  %y = checkpoint(%x) {\n    body(a: f32[2])\n"
     "    %m = mul(%a, %w)\n    return %m\n  }\n  %s = sum(%y)\n  return %s\n}\n",
     4, 18,
     "%w is a value of program p (defined at 1:22), captured by the body of checkpoint "
     "at 2:8; expected a value of the body: pass it to the body as an input"},
    {"MissingReturn1", "program p(a: f32[]) {\n  %b = relu(%a)\n}\n", 3, 1,
     "missing return: program p ends without one; expected 'return %VALUE' before '}'"},
    {"MissingReturn2",
     "program p(x: f32[2]) {\n  %y = checkpoint(%x) {\n    body(a: f32[2])\n  }\n"
     "  return %y\n}\n",
     4, 3, "missing return: the body of checkpoint at 2:8 ends without one"},
    {"MissingReturn3", "program p(a: f32[]) {\n  return %a\n  %b = relu(%a)\n}\n", 3, 3,
     "expected '}' after the return of program p"},
    {"UnterminatedBody1", "program p(a: f32[]) {\n  return %a\n", 3, 1,
     "unterminated program p (its '{' is at 1:21); expected '}'"},
    {"UnterminatedBody2",
     "program p(x: f32[2]) {\n  %y = checkpoint(%x) {\n    body(a: f32[2])\n    return %a\n", 5, 1,
     "unterminated the body of checkpoint at 2:8 (its '{' is at 2:23)"},
    {"UnterminatedBody3", "program p(x: f32[2]) {\n  %y = checkpoint(%x)\n  return %y\n}\n", 2, 22,
     "checkpoint needs a body: expected '{' at the end of the line"},
    {"BadAttribute1", "program p(a: f32[]) {\n  %b = relu(%a) colour=\"red\"\n  return %b\n}\n", 2,
     17, "bad attribute: unknown attribute 'colour'"},
    {"BadAttribute2",
     "program p(a: f32[]) {\n  %b = relu(%a) policy=\"dots_saveable\"\n  return %b\n}\n", 2, 17,
     "bad attribute: relu takes no policy="},
    {"BadAttribute3", "program p(a: f32[]) {\n  %b = scale(%a) scalar=abc\n  return %b\n}\n", 2, 25,
     "bad attribute: expected a number after scalar="},
    {"BadAttribute4", "program p(a: f32[]) {\n  %b = scale(%a)\n  return %b\n}\n", 2, 8,
     "scale needs its constant: scalar=C"},
    {"BadAttribute5", "program p(a: f32[]) {\n  %b = relu(%a) @ \"x\" @ \"y\"\n  return %b\n}\n", 2,
     23, "bad attribute: @ given twice"},
    {"BadAttribute6", "program p(a: f32[]) {\n  %b = relu(%a) scope=3\n  return %b\n}\n", 2, 23,
     "bad attribute: expected scope as a quoted string, got '3'"},
    {"BadAttribute7",
     "program p(x: f32[2]) {\n  %y = checkpoint(%x) policy=\"sometimes\" {\n"
     "    body(a: f32[2])\n    return %a\n  }\n  %s = sum(%y)\n  return %s\n}\n",
     2, 30, "bad attribute: policy \"sometimes\": unknown policy 'sometimes'; policies:"},
    {"BadAttribute8", "program p(a: f32[]) {\n  %b = name(%a)\n  return %b\n}\n", 2, 8,
     "name needs a non-empty label"},
    // layer_norm's eps: 0 is no eps (leave scalar= out for the default), a
    // negative one a shape error naming it.
    {"LayerNormEpsZero",
     "program p(x: f32[2,4], g: f32[4], c: f32[4]) {\n  %b = layer_norm(%x, %g, %c) scalar=0\n"
     "  %s = sum(%b)\n  return %s\n}\n",
     2, 38, "bad attribute: layer_norm's scalar= must not be 0; leave it out for its default 1e-05"},
    {"LayerNormEpsNegative",
     "program p(x: f32[2,4], g: f32[4], c: f32[4]) {\n  %b = layer_norm(%x, %g, %c) scalar=-1\n"
     "  %s = sum(%b)\n  return %s\n}\n",
     2, 8, "layer_norm's eps must be positive and finite; got -1"},
    // The layout ops' attributes: bad ones name the op, its ints and x.
    {"SliceStepZero",
     "program p(x: f32[2,7]) {\n  %b = slice(%x) ints=[1,0,3,0]\n  %s = sum(%b)\n  return %s\n}\n",
     2, 8, "slice: ints = [1,0,3,0] (axis, start, length[, step >= 1]) is not within x [2,7]"},
    {"SliceStepPastTheEnd",
     "program p(x: f32[2,7]) {\n  %b = slice(%x) ints=[1,1,4,2]\n  %s = sum(%b)\n  return %s\n}\n",
     2, 8, "slice: ints = [1,1,4,2] (axis, start, length[, step >= 1]) is not within x [2,7]"},
    {"SelectOutside",
     "program p(x: f32[2,7]) {\n  %b = select(%x) ints=[1,7]\n  %s = sum(%b)\n  return %s\n}\n",
     2, 8, "select: ints = [1,7] (axis, index) is not within x [2,7]"},
    {"SelectWithoutInts",
     "program p(x: f32[2,7]) {\n  %b = select(%x)\n  %s = sum(%b)\n  return %s\n}\n",
     2, 8, "select needs ints=[AXIS,INDEX]"},
    {"CatOtherAxesDiffer",
     "program p(x: f32[2,7], y: f32[3,7]) {\n  %b = cat(%x, %y) ints=[1]\n  %s = sum(%b)\n"
     "  return %s\n}\n",
     2, 8, "cat: [2,7] and [3,7] do not join on axis 1"},
    {"ExpandDoesNotBroadcast",
     "program p(x: f32[3,2]) {\n  %b = expand(%x) ints=[4,3,5]\n  %s = sum(%b)\n  return %s\n}\n",
     2, 8, "expand: x [3,2] does not broadcast to [4,3,5]"},
    // adaptive_avg_pool2d, embedding's padding_idx, cross_entropy's
    // ignore_index: bad ones name the op, the value and the shapes.
    {"AdaptivePoolOfAnEmptyPlane",
     "program p(x: f32[1,2,0,5]) {\n  %b = adaptive_avg_pool2d(%x) ints=[4,2]\n  %s = sum(%b)\n"
     "  return %s\n}\n",
     2, 8, "adaptive_avg_pool2d to [4,2] takes x (N, C, H, W) with H, W >= 1 and OH, OW >= 1; got [1,2,0,5]"},
    {"AdaptivePoolZero",
     "program p(x: f32[1,2,3,5]) {\n  %b = adaptive_avg_pool2d(%x) ints=[1,0]\n  %s = sum(%b)\n"
     "  return %s\n}\n",
     2, 8, "adaptive_avg_pool2d to [1,0] takes x"},
    {"AdaptivePoolWithoutInts",
     "program p(x: f32[1,2,3,5]) {\n  %b = adaptive_avg_pool2d(%x)\n  %s = sum(%b)\n  return %s\n}\n",
     2, 8, "adaptive_avg_pool2d needs ints=[OH,OW]"},
    {"EmbeddingPaddingOutside",
     "program p(w: f32[4,3], i: i32[2]) {\n  %b = embedding(%w, %i) ints=[4]\n  %s = sum(%b)\n"
     "  return %s\n}\n",
     2, 8, "embedding's ints=[4] on the table [4,3]: expected ints=[PADDING_IDX] with 0 <= PADDING_IDX < 4"},
    {"EmbeddingPaddingNegative",
     "program p(w: f32[4,3], i: i32[2]) {\n  %b = embedding(%w, %i) ints=[-1]\n  %s = sum(%b)\n"
     "  return %s\n}\n",
     2, 8, "embedding's ints=[-1] on the table [4,3]"},
    {"CrossEntropyTwoIgnores",
     "program p(x: f32[2,3], t: i32[2]) {\n  %b = cross_entropy(%x, %t) ints=[-100,0]\n  return %b\n}\n",
     2, 8, "cross_entropy's ints=[-100,0]: expected ints=[IGNORE_INDEX] or no ints"},
    {"TrailingGarbage1", "program p(a: f32[]) {\n  return %a\n}\nprogram q(b: f32[]) {\n", 4, 1,
     "trailing text after the program's closing '}': 'program'; expected the end of "
     "the file"},
    {"TrailingGarbage2", "program p(a: f32[]) {\n  %b = relu(%a) )\n  return %b\n}\n", 2, 17,
     "expected an attribute"},
    {"TrailingGarbage3", "program p(a: f32[]) {\n  return %a %a\n}\n", 2, 13,
     "trailing text after the returned value: '%a'; expected the end of the line"},
    {"LexicalErrors1", "program p(a: f32[]) {\n  %b = relu(%a) @ \"x\n  return %b\n}\n", 2, 19,
     "unterminated string"},
    {"LexicalErrors2", "program p(a: f32[]) {\n  %b = relu(%a) @ \"\\q\"\n  return %b\n}\n", 2, 20,
     "bad escape"},
    {"LexicalErrors3", "program p(a: f32[]) {\n  %b = relu(%a) $\n  return %b\n}\n", 2, 17,
     "unexpected character '$'"},
    {"LexicalErrors4", "program p(a: f32[]) {\n  % = relu(%a)\n  return %b\n}\n", 2, 3,
     "expected a value name after '%'"},
    {"BadShapes1", "program p(a: f32[1,2,3,4,5,6,7]) {\n  return %a\n}\n", 1, 30,
     "a shape of rank 7; expected rank 0 to 6"},
    {"BadShapes2", "program p(a: f32[-2]) {\n  return %a\n}\n", 1, 18, "negative dimension -2"},
    {"BadShapes3", "program p(a: f32[99999999999]) {\n  return %a\n}\n", 1, 18,
     "expected a dimension (an integer of magnitude at most"},
    {"BadShapes4", "program p(a: f32[2147483648,2147483648]) {\n  return %a\n}\n", 1, 29,
     "more than 2^48 elements"},
    {"BadChains",
     "program p(x: f32[2]) {\n  %y = chain(%x) {\n    body(a: f32[2])\n"
     "    %r = relu(%a)\n    return %r\n  }\n  %s = sum(%y)\n  return %s\n}\n",
     2, 8,
     "block 0 of the body of chain at 2:8 is a relu; expected a chain's blocks to be "
     "checkpoint ops"},
    {"BadSchedule1",
     "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) schedule=\"every:x\" {\n"
     "    body(a: f32[2], x: f32[2])\n    %m = mul(%a, %x)\n    return %m\n  }\n  %s = sum(%y)\n  "
     "return %s\n}\n",
     2, 31, "schedule \'every:x\': \"x\" is not an integer"},
    {"BadSchedule2",
     "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) schedule=\"lru:4\" {\n"
     "    body(a: f32[2], x: f32[2])\n    %m = mul(%a, %x)\n    return %m\n  }\n  %s = sum(%y)\n  "
     "return %s\n}\n",
     2, 31,
     "schedule \'lru:4\': unknown schedule; the forms are every:K, segments:K, sqrt, "
     "bisect, revolve:C, budget:BYTES (or checkpoint_every:K)"},
    {"BadSchedule3",
     "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) schedule=\"sqrt:2\" {\n"
     "    body(a: f32[2], x: f32[2])\n    %m = mul(%a, %x)\n    return %m\n  }\n  %s = sum(%y)\n  "
     "return %s\n}\n",
     2, 31, "schedule \'sqrt:2\': sqrt takes no argument"},
    {"BadSchedule4",
     "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) schedule=\"revolve\" {\n"
     "    body(a: f32[2], x: f32[2])\n    %m = mul(%a, %x)\n    return %m\n  }\n  %s = sum(%y)\n  "
     "return %s\n}\n",
     2, 31, "schedule \'revolve\': revolve takes an argument"},
    {"BadSchedule5",
     "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) schedule=\"every:0\" {\n"
     "    body(a: f32[2], x: f32[2])\n    %m = mul(%a, %x)\n    return %m\n  }\n  %s = sum(%y)\n  "
     "return %s\n}\n",
     2, 31, "schedule \'every:0\': every takes a number of steps K >= 1, not 0"},
    {"BadSchedule6",
     "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) schedule=\"budget:lots\" {\n"
     "    body(a: f32[2], x: f32[2])\n    %m = mul(%a, %x)\n    return %m\n  }\n  %s = sum(%y)\n  "
     "return %s\n}\n",
     2, 31, "schedule \'budget:lots\': bytes: cannot read \"lots\""},
    {"BadSchedule7",
     "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) schedule=\"checkpoint_every:0\" "
     "{\n"
     "    body(a: f32[2], x: f32[2])\n    %m = mul(%a, %x)\n    return %m\n  }\n  %s = sum(%y)\n  "
     "return %s\n}\n",
     2, 31, "schedule \'checkpoint_every:0\': checkpoint_every takes a number of blocks >= 1"},
    // checkpoint_every:K is a scan's: a chain's schedule is one of ParseSchedule's.
    {"BadSchedule8",
     "program p(x: f32[2]) {\n  %y = chain(%x) schedule=\"checkpoint_every:2\" {\n    body(a: "
     "f32[2])\n"
     "    %b = checkpoint(%a) {\n      body(c: f32[2])\n      return %c\n    }\n    return %b\n  "
     "}\n"
     "  %s = sum(%y)\n  return %s\n}\n",
     2, 27,
     "schedule \'checkpoint_every:2\': checkpoint_every:K is a scan\'s; a chain takes every:K,"},
};

class ProgramTextBadInputTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ProgramTextBadInputTest, ReportsWhereAndWhat) {
  const ErrorCase& c = GetParam();
  ExpectError(c.text, c.line, c.column, c.words);
}

INSTANTIATE_TEST_SUITE_P(Cases, ProgramTextBadInputTest, ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& info) {
                           return std::string(info.param.what);
                         });

// Schedules are checked for their syntax on loading (bad ones are rows of
// kErrorCases); good ones load, each of the forms, checkpoint_every:K on a
// scan included, and "" (no schedule).
TEST(ProgramTextTest, GoodSchedulesLoad) {
  for (const char* spec : {"every:2", "segments:1", "sqrt", "bisect", "revolve:0", "budget:1KiB",
                           "budget:64", "checkpoint_every:2", ""}) {
    const std::string text = StrCat(
        "program p(c: f32[2], xs: f32[3,2]) {\n  %y = scan(%c, %xs) schedule=\"", spec,
        "\" {\n    body(a: f32[2], x: f32[2])\n    %m = mul(%a, %x)\n    return %m\n  }\n"
        "  %s = sum(%y)\n  return %s\n}\n");
    EXPECT_EQ(ParseError(text), "") << spec;
    if (ParseError(text).empty()) {
      EXPECT_EQ(ParseProgram(text, "t").ops[0].schedule, spec);
    }
  }
}

TEST(ProgramTextErrorTest, DeepNestingIsRefused) {
  std::string text = "program p(x: f32[]) {\n";
  for (int i = 0; i < 70; ++i) text += "%y = checkpoint(%x) {\nbody(x: f32[])\n";
  const std::string message = ParseError(text);
  EXPECT_NE(message.find("bodies nested more than 64 deep"), std::string::npos) << message;
}

// The hand-written example of docs/programs.md (programs as files): it parses, keeps its labels and
// attributes, and eager and recompute agree on it bit for bit.
TEST(ProgramTextTest, TheHandWrittenExampleRuns) {
  const Program p = ReadProgramFile("problems/files/mlp_bias.remat");
  EXPECT_EQ(p.name, "mlp_bias");
  EXPECT_EQ(p.CountOps(OpKind::kBiasAdd), 2);
  EXPECT_EQ(p.ops[0].policy.ToString(), "dots_saveable");
  EXPECT_EQ(p.ops[0].body->ops[1].scope, "layer1");
  EXPECT_EQ(ProgramDifference(p, ParseProgram(PrintProgram(p), "printed")), "");
  std::vector<Tensor> inputs;
  for (int i = 0; i < p.num_params(); ++i) {
    Tensor t = Tensor::Zeros(DType::kF32, p.shapes[i]);
    for (int64_t j = 0; j < t.num_elements(); ++j) t.f32()[j] = 0.01f * static_cast<float>(j % 17) - 0.08f;
    inputs.push_back(t);
  }
  const std::vector<int> wrt = {0, 1, 2, 3, 4};
  const Result eager = MakeEngine("eager")->ValueAndGrad(p, inputs, wrt, {});
  const Result recompute = MakeEngine("recompute")->ValueAndGrad(p, inputs, wrt, {});
  EXPECT_FALSE(FirstBitDifference(eager, recompute).has_value());
  EXPECT_GT(recompute.stats.flops_recomputed, 0);
}

// Program file `p` round-trips, every f32 engine gives eager's bits on
// gradients of every parameter, recompute recomputes, and the float64
// engines agree with it to f32 rounding.
void ExpectEveryEngineRunsIt(const Program& p) {
  EXPECT_EQ(ProgramDifference(p, ParseProgram(PrintProgram(p), "printed")), "");
  std::vector<Tensor> inputs;
  std::vector<int> wrt;
  for (int i = 0; i < p.num_params(); ++i) {
    Tensor t = Tensor::Zeros(DType::kF32, p.shapes[i]);
    for (int64_t j = 0; j < t.num_elements(); ++j) {
      t.f32()[j] = 0.02f * static_cast<float>((j * 7 + i) % 23) - 0.2f;
    }
    inputs.push_back(t);
    wrt.push_back(i);
  }
  const Result eager = MakeEngine("eager")->ValueAndGrad(p, inputs, wrt, {});
  for (const char* engine : {"recompute", "planned", "dtr"}) {
    const Result r = MakeEngine(engine)->ValueAndGrad(p, inputs, wrt, {});
    EXPECT_FALSE(FirstBitDifference(eager, r).has_value()) << engine;
  }
  EXPECT_GT(MakeEngine("recompute")->ValueAndGrad(p, inputs, wrt, {}).stats.flops_recomputed, 0);
  for (const char* engine : {"oracle", "reference"}) {
    const Result r = MakeEngine(engine)->ValueAndGrad(p, inputs, wrt, {});
    ASSERT_EQ(r.grads.size(), eager.grads.size());
    for (size_t g = 0; g < r.grads.size(); ++g) {
      double scale = 0, err = 0;
      for (int64_t j = 0; j < r.grads[g].num_elements(); ++j) {
        scale = std::max(scale, std::abs(r.grads[g].at(j)));
        err = std::max(err, std::abs(r.grads[g].at(j) - eager.grads[g].at(j)));
      }
      EXPECT_GT(scale, 0) << engine << " gradient " << g;
      EXPECT_LE(err, 1e-4 * scale) << engine << " gradient " << g;
    }
  }
}

// The LLaMA-style block (rms_norm, silu) on every engine.
TEST(ProgramTextTest, TheLlamaBlockRunsOnEveryEngine) {
  const Program p = ReadProgramFile("problems/files/llama_mlp.remat");
  EXPECT_EQ(p.CountOps(OpKind::kRmsNorm), 2);
  EXPECT_EQ(p.CountOps(OpKind::kSilu), 1);
  ExpectEveryEngineRunsIt(p);
}

// A ViT's tokens: the class token expanded to the batch and joined before
// the patches (cat), position embeddings broadcast (expand), a checkpointed
// layer_norm at eps 1e-6, the class token's output x[:, 0] (select) and
// every other token (slice by a step of 2), on every engine.
TEST(ProgramTextTest, TheVitTokensRunOnEveryEngine) {
  const Program p = ReadProgramFile("problems/files/vit_tokens.remat");
  for (OpKind k : {OpKind::kExpand, OpKind::kCat, OpKind::kSelect, OpKind::kSlice}) {
    EXPECT_GE(p.CountOps(k), 1) << OpKindName(k);
  }
  ExpectEveryEngineRunsIt(p);
}

// A MobileNet block as its library writes it: a depthwise 3x3 conv with
// bias, stride 2 (the 7-int form, groups = C), and a pointwise 1x1 conv
// with bias (the 2-int form), checkpointed, on every engine.
TEST(ProgramTextTest, TheMobileNetBlockRunsOnEveryEngine) {
  const Program p = ReadProgramFile("problems/files/mobilenet_block.remat");
  EXPECT_EQ(p.ops[0].body->CountOps(OpKind::kConv2dBias), 2);
  ExpectEveryEngineRunsIt(p);
}

// layer_norm's eps: scalar= optional, 0 (left out) the default 1e-5,
// printed without scalar= so that files written before read and print the
// same; an explicit 1e-5 reads as the default; another eps prints back to
// the bit.
TEST(ProgramTextTest, LayerNormTakesAnyEps) {
  const auto parse = [](const std::string& attrs) {
    return ParseProgram(StrCat("program p(x: f32[2,4], g: f32[4], b: f32[4]) {\n"
                               "  %y = layer_norm(%x, %g, %b)", attrs, "\n  %s = sum(%y)\n  return %s\n}\n"),
                        "t");
  };
  const Program plain = parse("");
  EXPECT_EQ(plain.ops[0].scalar, 0.0);
  EXPECT_EQ(PrintProgram(plain).find("scalar="), std::string::npos) << PrintProgram(plain);
  EXPECT_EQ(parse(" scalar=1e-5").ops[0].scalar, 0.0);
  const Program bert = parse(" scalar=1e-12");
  EXPECT_EQ(bert.ops[0].scalar, 1e-12);
  EXPECT_EQ(ProgramDifference(bert, ParseProgram(PrintProgram(bert), "printed")), "");
  // The eps changes the result: rows of variance near 1e-6.
  std::vector<Tensor> in = {Tensor::FromF32({2, 4}, {1e-3f, -1e-3f, 2e-3f, 0, 0, 1e-3f, -2e-3f, 1e-3f}),
                            Tensor::FromF32({4}, {1, 2, 3, 4}), Tensor::FromF32({4}, {0, 0, 0, 0})};
  const Program weighted = ParseProgram(
      "program p(x: f32[2,4], g: f32[4], b: f32[4]) {\n  %y = layer_norm(%x, %g, %b) scalar=1e-12\n"
      "  %q = square(%y)\n  %s = sum(%q)\n  return %s\n}\n", "t");
  Program weighted_default = weighted;
  weighted_default.ops[0].scalar = 0;
  const Result small = MakeEngine("eager")->ValueAndGrad(weighted, in, {0}, {});
  const Result large = MakeEngine("eager")->ValueAndGrad(weighted_default, in, {0}, {});
  const Result oracle = MakeEngine("oracle")->ValueAndGrad(weighted, in, {0}, {});
  EXPECT_NEAR(small.value.at(0), oracle.value.at(0), 1e-4 * std::abs(oracle.value.at(0)));
  EXPECT_GT(std::abs(small.value.at(0) - large.value.at(0)), 0.01 * std::abs(small.value.at(0)));
  for (const char* engine : {"recompute", "planned", "dtr"}) {
    EXPECT_FALSE(FirstBitDifference(small, MakeEngine(engine)->ValueAndGrad(weighted, in, {0}, {})).has_value())
        << engine;
  }
}

// The optional ints of embedding (padding_idx) and cross_entropy
// (ignore_index) and adaptive_avg_pool2d's sizes read and print back; left
// out, no ints are printed, as before they could be given.
TEST(ProgramTextTest, NewIndexAndPoolAttributesRoundTrip) {
  const std::string text =
      "program p(w: f32[5,4], ids: i32[3], x: f32[3,5], t: i32[3], im: f32[1,2,7,7]) {\n"
      "  %h: f32[3,4] = embedding(%w, %ids) ints=[0]\n"
      "  %g: f32[3,4] = embedding(%w, %ids)\n"
      "  %l: f32[] = cross_entropy(%x, %t) ints=[-100]\n"
      "  %k: f32[] = cross_entropy(%x, %t)\n"
      "  %p: f32[1,2,3,3] = adaptive_avg_pool2d(%im) ints=[3,3]\n"
      "  %a: f32[] = add(%l, %k)\n"
      "  return %a\n"
      "}\n";
  const Program p = ParseProgram(text, "t");
  EXPECT_EQ(p.ops[0].ints, std::vector<int64_t>({0}));
  EXPECT_TRUE(p.ops[1].ints.empty());
  EXPECT_EQ(p.ops[2].ints, std::vector<int64_t>({-100}));
  EXPECT_TRUE(p.ops[3].ints.empty());
  EXPECT_EQ(p.shapes[p.ops[4].output], Shape({1, 2, 3, 3}));
  const std::string printed = PrintProgram(p);
  EXPECT_EQ(ProgramDifference(p, ParseProgram(printed, "printed")), "") << printed;
  EXPECT_NE(printed.find("embedding(%w, %ids) ints=[0]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("cross_entropy(%x, %t) ints=[-100]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("cross_entropy(%x, %t)\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("adaptive_avg_pool2d(%im) ints=[3,3]"), std::string::npos) << printed;
}

TEST(ProgramTextTest, ReadProgramFileNamesAMissingFile) {
  try {
    ReadProgramFile("/nonexistent/p.remat");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/p.remat: cannot open");
  }
  try {
    ReadProgramFile("/dev/zero");  // never read: it would not end
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/dev/zero: not a regular file; expected a program file");
  }
}

}  // namespace
}  // namespace remat
