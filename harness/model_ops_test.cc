// The ops modern models add, on the shapes their models give them (the
// one-op examples of op_completeness_test cover one shape each): numpy
// broadcasting of add, sub, mul, div and where on several shape pairs,
// sum, mean and amax over chosen axes with and without keepdim, and the
// unary ops at their edges. For each program, written in program text:
//   text           it round-trips
//   both tables    eager (oneDNN's kernels) and reference (the float64
//                  loops) agree with the oracle's own rules
//   every engine   on eager's kernels, eager's bits, as written and in a
//                  checkpoint region that saves nothing (recomputed)
//   gradcheck      the oracle's gradient agrees with central differences
// and the contract's fixed choices hold exactly: the order a broadcast
// cotangent and a sum over axes are summed in, amax's tie rule (the
// gradient split evenly among ties), hardtanh's bounds, pow by 0,
// embedding's padding_idx, cross_entropy's ignore_index (K = 0: nan) and
// adaptive_avg_pool2d's windows ([1, 1]: global_avg_pool's bits); bad input
// is an error naming the file and line, the op and the shapes.
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/program_text.h"
#include "engines/api/registry.h"
#include "gtest/gtest.h"
#include "harness/conformance.h"
#include "problems/program_file.h"

namespace remat {
namespace {

struct ModelOpCase {
  const char* name;
  const char* text;  // the program; r weights the output so no gradient is constant
  bool positive;     // its float inputs drawn > 0 (div's divisor, sqrt)
};

// clang-format off
const ModelOpCase kCases[] = {
    {"add_bias_row", R"(program p(a: f32[2,3,4], b: f32[4], r: f32[2,3,4]) {
  %y: f32[2,3,4] = add(%a, %b)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"sub_both_broadcast", R"(program p(a: f32[2,1,4], b: f32[3,1], r: f32[2,3,4]) {
  %y: f32[2,3,4] = sub(%a, %b)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"mul_layer_scale", R"(program p(a: f32[2,3,4], g: f32[1,3,1], r: f32[2,3,4]) {
  %y: f32[2,3,4] = mul(%g, %a)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"mul_by_scalar", R"(program p(a: f32[3,4], c: f32[], r: f32[3,4]) {
  %y: f32[3,4] = mul(%a, %c)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"div_rows", R"(program p(a: f32[3,4], b: f32[2,3,1], r: f32[2,3,4]) {
  %y: f32[2,3,4] = div(%a, %b)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", true},
    {"where_mask", R"(program p(c: i32[3,1] data, a: f32[3,4], b: f32[4], r: f32[3,4]) {
  %y: f32[3,4] = where(%c, %a, %b)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"sum_two_axes", R"(program p(x: f32[2,3,4], r: f32[3]) {
  %y: f32[3] = sum(%x) ints=[0,2]
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"sum_keepdim", R"(program p(x: f32[2,3,4], r: f32[2,1,4]) {
  %y: f32[2,1,4] = sum(%x) ints=[-2] keepdim=1
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"mean_last_keepdim", R"(program p(x: f32[2,3,4], r: f32[2,3,1]) {
  %y: f32[2,3,1] = mean(%x) ints=[-1] keepdim=1
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"mean_all", R"(program p(x: f32[2,3,4], r: f32[]) {
  %y: f32[] = mean(%x)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"amax_rows", R"(program p(x: f32[2,3,4], r: f32[2,4]) {
  %y: f32[2,4] = amax(%x) ints=[1]
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    {"rmsnorm_llama", R"(program p(x: f32[2,3,8], w: f32[8], e: f32[] data, r: f32[2,3,8]) {
  %sq: f32[2,3,8] = pow(%x) scalar=2
  %v: f32[2,3,1] = mean(%sq) ints=[-1] keepdim=1
  %e2: f32[] = mul(%e, %e)
  %ve: f32[2,3,1] = add(%v, %e2)
  %rs: f32[2,3,1] = rsqrt(%ve)
  %n: f32[2,3,8] = mul(%x, %rs)
  %y: f32[2,3,8] = mul(%w, %n)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})", false},
    // PyTorch's adaptive windows: 7 -> 3 overlaps (rows 0-2, 2-4, 4-6), 5 -> 2
    // overlaps too (columns 0-2, 2-4); 6 -> 2 and 4 -> 4 tile; 2 -> 7 and
    // 3 -> 5 repeat rows and columns (VGG's head on a small image: each
    // element's gradient gathers every window that repeats it).
    {"adaptive_pool", R"(program p(x: f32[2,3,7,5], r: f32[2,3,3,2], z: f32[1,2,6,4], q: f32[1,2,2,4], u: f32[2,2,2,3], v: f32[2,2,7,5]) {
  %y: f32[2,3,3,2] = adaptive_avg_pool2d(%x) ints=[3,2]
  %m = mul(%y, %r)
  %t: f32[1,2,2,4] = adaptive_avg_pool2d(%z) ints=[2,4]
  %n = mul(%t, %q)
  %w: f32[2,2,7,5] = adaptive_avg_pool2d(%u) ints=[7,5]
  %k = mul(%w, %v)
  %a: f32[] = sum(%m)
  %b: f32[] = sum(%n)
  %c: f32[] = sum(%k)
  %ab: f32[] = add(%a, %b)
  %s: f32[] = add(%ab, %c)
  return %s
})", false},
    // Hugging Face's labels: targets 0, 1, 0, 1, ... with 1 ignored, and
    // -100 (none equal: every row kept).
    {"cross_entropy_ignore", R"(program p(x: f32[6,5], t: i32[6] data, r: f32[], u: f32[4,3], v: i32[4] data) {
  %y: f32[] = cross_entropy(%x, %t) ints=[1]
  %m = mul(%y, %r)
  %k: f32[] = cross_entropy(%u, %v) ints=[-100]
  %s: f32[] = add(%m, %k)
  return %s
})", false},
};
// clang-format on

class ModelOpTest : public ::testing::TestWithParam<ModelOpCase> {};

TEST_P(ModelOpTest, BothTablesEveryEngineAndGradcheck) {
  const ModelOpCase& mc = GetParam();
  const Program program = ParseProgram(mc.text, mc.name);
  EXPECT_EQ(ProgramDifference(program, ParseProgram(PrintProgram(program), "printed")), "");
  ProgramFileProblem problem(program, mc.name);
  Case c = MakeCase(problem, {}, /*seed=*/11);
  c.wrt.clear();
  for (int i = 0; i < program.num_params(); ++i) {
    Tensor& t = c.inputs[i];
    if (t.dtype() == DType::kI32) {
      for (int64_t j = 0; j < t.num_elements(); ++j) t.i32()[j] = j % 2;  // both sides taken
      continue;
    }
    if (mc.positive) {
      for (int64_t j = 0; j < t.num_elements(); ++j) t.f32()[j] = std::abs(t.f32()[j]) + 0.5f;
    }
    c.wrt.push_back(i);
  }
  const Result oracle = MakeEngine("oracle")->ValueAndGrad(c.program, c.inputs, c.wrt);
  for (const char* engine : {"eager", "reference"}) {
    const Result got = MakeEngine(engine)->ValueAndGrad(c.program, c.inputs, c.wrt);
    const Agreement a =
        CompareWithOracle(c, got, oracle, std::string(engine) == "eager" ? DType::kF32 : DType::kF64);
    EXPECT_TRUE(a.ok) << mc.name << ": " << engine << " disagrees with the oracle: " << a.detail;
  }

  const Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
  const Program wrapped = WrapInCheckpoint(c.program, Policy::Parse("nothing_saveable"), mc.name);
  for (const std::string& name : EngineNames()) {
    std::unique_ptr<Engine> engine = MakeEngine(name);
    if (engine->kernels() != "onednn") continue;
    for (const Program* p : std::vector<const Program*>{&c.program, &wrapped}) {
      const std::optional<std::string> diff =
          FirstBitDifference(eager, engine->ValueAndGrad(*p, c.inputs, c.wrt));
      EXPECT_FALSE(diff.has_value()) << mc.name << ": " << name << (p == &wrapped ? " recomputing" : "")
                                     << " differs from eager's bits in " << *diff;
    }
  }

  // The oracle's gradient against central differences, at every element.
  for (const std::string& d : CentralDifferenceDisagreements(
           c, oracle, 1e-3f, 0, [](double g) { return 1e-4 * std::max(1.0, std::abs(g)); })) {
    ADD_FAILURE() << mc.name << ": " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ModelOpTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A one-op program's loss and gradients on `engine`, inputs given.
Result RunOne(const std::string& engine, const char* text, std::vector<Tensor> inputs) {
  const Program p = ParseProgram(text, "model_ops_test");
  std::vector<int> wrt;
  for (int i = 0; i < p.num_params(); ++i) {
    if (p.dtype(i) == DType::kF32) wrt.push_back(i);
  }
  return MakeEngine(engine)->ValueAndGrad(p, inputs, wrt);
}

Tensor F32(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::Zeros(DType::kF32, s);
  for (size_t i = 0; i < v.size(); ++i) t.f32()[i] = v[i];
  return t;
}

// CONTRACT.md's tie rule: amax's gradient is split evenly among the
// elements equal to the maximum (PyTorch's amax), on every table.
TEST(ModelOpsContract, AmaxSplitsTheGradientEvenlyAmongTies) {
  const char* text = R"(program p(x: f32[2,4]) {
  %y: f32[2] = amax(%x) ints=[1]
  %s: f32[] = sum(%y)
  return %s
})";
  const Tensor x = F32(Shape({2, 4}), {1, 3, 3, 2, 5, 5, -1, 5});
  const double want[] = {0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3};
  for (const char* engine : {"eager", "reference", "oracle"}) {
    const Result r = RunOne(engine, text, {x});
    EXPECT_EQ(r.value.at(0), 8.0) << engine;
    for (int j = 0; j < 8; ++j) {
      const double expect = std::string(engine) == "eager" ? static_cast<float>(want[j]) : want[j];
      EXPECT_EQ(r.grads[0].at(j), expect) << engine << " dx[" << j << "]";
    }
  }
}

// The order a broadcast operand's cotangent and a sum over axes are summed
// in (CONTRACT.md): increasing flat index of the output, from +0, in a
// float64 running sum rounded once. dy = (1, 1e8, -1e8) into one element
// gives 1 (a float32 running sum absorbs the 1 and gives 0); dy = (1,
// 2^60, -2^60) gives 0 (2^60 absorbs the 1 in float64; the reverse order
// would give 1).
TEST(ModelOpsContract, BroadcastCotangentsAndSumsFollowTheStatedOrder) {
  const char* add = R"(program p(a: f32[3], b: f32[1], r: f32[3]) {
  %y: f32[3] = add(%a, %b)
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})";
  const float huge = 1152921504606846976.0f;  // 2^60
  const char* sum = R"(program p(x: f32[3,1]) {
  %y: f32[1] = sum(%x) ints=[0]
  %s: f32[] = sum(%y)
  return %s
})";
  for (const auto& [terms, want] : {std::pair<std::vector<float>, float>{{1, 1e8f, -1e8f}, 1.0f},
                                    std::pair<std::vector<float>, float>{{1, huge, -huge}, 0.0f}}) {
    const Result got = RunOne("eager", add, {F32(Shape({3}), {0, 0, 0}), F32(Shape({1}), {0}),
                                             F32(Shape({3}), terms)});
    EXPECT_EQ(got.grads[1].f32()[0], want) << terms[1];
    EXPECT_EQ(RunOne("eager", sum, {F32(Shape({3, 1}), terms)}).value.f32()[0], want) << terms[1];
  }
}

// relu6 = hardtanh [0, 6]: the bounds clamp, a NaN passes, and the gradient
// is 0 at and beyond each bound (PyTorch's hardtanh_backward); pow by 0 has
// a zero gradient.
TEST(ModelOpsContract, HardtanhBoundsAndPowByZero) {
  const char* relu6 = R"(program p(x: f32[6]) {
  %y: f32[6] = hardtanh(%x) ints=[0,6]
  %s: f32[] = sum(%y)
  return %s
})";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = F32(Shape({6}), {-1, 0, 3, 6, 7, 2.5f});
  const float dx[] = {0, 0, 1, 0, 0, 1};
  for (const char* engine : {"eager", "reference", "oracle"}) {
    const Result r = RunOne(engine, relu6, {x});
    EXPECT_EQ(r.value.at(0), 0 + 0 + 3 + 6 + 6 + 2.5) << engine;
    for (int j = 0; j < 6; ++j) EXPECT_EQ(r.grads[0].at(j), dx[j]) << engine << " dx[" << j << "]";
  }
  EXPECT_TRUE(std::isnan(RunOne("eager", relu6, {F32(Shape({6}), {nan, 0, 0, 0, 0, 0})}).value.f32()[0]));
  const char* pow0 = R"(program p(x: f32[2]) {
  %y: f32[2] = pow(%x) scalar=0
  %s: f32[] = sum(%y)
  return %s
})";
  for (const char* engine : {"eager", "reference", "oracle"}) {
    const Result r = RunOne(engine, pow0, {F32(Shape({2}), {0, -3})});
    EXPECT_EQ(r.value.at(0), 2.0) << engine;
    EXPECT_EQ(r.grads[0].at(0), 0.0) << engine;
    EXPECT_EQ(r.grads[0].at(1), 0.0) << engine;
  }
}

Tensor I32(const Shape& s, const std::vector<int32_t>& v) {
  Tensor t = Tensor::Zeros(DType::kI32, s);
  for (size_t i = 0; i < v.size(); ++i) t.i32()[i] = v[i];
  return t;
}

// embedding's padding_idx: that row's gradient is exactly 0 on every table
// (the forward still reads it), every other row's is the bits of the
// embedding without it; no padding_idx gives the bits of before.
TEST(ModelOpsContract, EmbeddingPaddingRowHasNoGradient) {
  const auto text = [](const char* attrs) {
    return StrCat("program p(w: f32[4,3], ids: i32[5] data, r: f32[5,3]) {\n"
                  "  %h: f32[5,3] = embedding(%w, %ids)", attrs,
                  "\n  %m = mul(%h, %r)\n  %s: f32[] = sum(%m)\n  return %s\n}\n");
  };
  const std::vector<Tensor> in = {
      F32(Shape({4, 3}), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), I32(Shape({5}), {2, 0, 2, 3, 0}),
      F32(Shape({5, 3}), {1, -2, 3, 0.5f, 4, -1, 2, 2, 2, -3, 1, 0.25f, 5, 6, 7})};
  for (const char* engine : {"eager", "reference", "oracle"}) {
    const Result plain = RunOne(engine, text("").c_str(), in);
    const Result padded = RunOne(engine, text(" ints=[2]").c_str(), in);
    EXPECT_EQ(plain.value.at(0), padded.value.at(0)) << engine;  // the forward reads row 2
    for (int64_t j = 0; j < 12; ++j) {
      const double want = j / 3 == 2 ? 0.0 : plain.grads[0].at(j);
      EXPECT_EQ(padded.grads[0].at(j), want) << engine << " dw[" << j << "]";
    }
    EXPECT_NE(plain.grads[0].at(6), 0.0) << engine;
  }
  EXPECT_FALSE(FirstBitDifference(RunOne("eager", text(" ints=[2]").c_str(), in),
                                  RunOne("dtr", text(" ints=[2]").c_str(), in))
                   .has_value());
}

// cross_entropy's ignore_index: every row ignored is 0/0, a nan loss, and
// an all-zero gradient (PyTorch's); some kept, the mean over those only.
TEST(ModelOpsContract, CrossEntropyIgnoresRowsAndKZeroIsNan) {
  const char* text = R"(program p(x: f32[3,4], t: i32[3] data) {
  %y: f32[] = cross_entropy(%x, %t) ints=[-100]
  return %y
})";
  const Tensor x = F32(Shape({3, 4}), {1, 2, 3, 4, -1, 0, 1, 2, 0.5f, 0.25f, 0, 3});
  for (const char* engine : {"eager", "reference", "oracle"}) {
    const Result none = RunOne(engine, text, {x, I32(Shape({3}), {-100, -100, -100})});
    EXPECT_TRUE(std::isnan(none.value.at(0))) << engine;
    for (int64_t j = 0; j < 12; ++j) EXPECT_EQ(none.grads[0].at(j), 0.0) << engine << " dx[" << j << "]";
    const Result one = RunOne(engine, text, {x, I32(Shape({3}), {-100, 2, -100})});
    // Row 1 alone: lse(-1, 0, 1, 2) - 1.
    const double lse = std::log(std::exp(-1.0) + std::exp(0.0) + std::exp(1.0) + std::exp(2.0));
    EXPECT_NEAR(one.value.at(0), lse - 1, 1e-6) << engine;
    for (int64_t j : {0, 1, 2, 3, 8, 9, 10, 11}) EXPECT_EQ(one.grads[0].at(j), 0.0) << engine;
    EXPECT_NEAR(one.grads[0].at(6), std::exp(1.0 - lse) - 1, 1e-6) << engine;
  }
  // A target other than the ignore_index outside [0, C): an error naming it.
  try {
    RunOne("eager", text, {x, I32(Shape({3}), {-100, 4, 0})});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 4 at position 1 is outside [0, 4)"), std::string::npos)
        << e.what();
  }
}

// adaptive_avg_pool2d [1, 1] is global_avg_pool's bits (a reshape away);
// overlapping windows' gradients add in the stated order.
TEST(ModelOpsContract, AdaptivePoolOneByOneIsGlobalPool) {
  const char* adaptive = R"(program p(x: f32[2,3,5,7], r: f32[2,3,1,1]) {
  %y: f32[2,3,1,1] = adaptive_avg_pool2d(%x) ints=[1,1]
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})";
  const char* global = R"(program p(x: f32[2,3,5,7], r: f32[2,3,1,1]) {
  %g: f32[2,3] = global_avg_pool(%x)
  %y: f32[2,3,1,1] = reshape(%g) ints=[2,3,1,1]
  %m = mul(%y, %r)
  %s: f32[] = sum(%m)
  return %s
})";
  std::vector<float> xv(210), rv(6);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.37f * static_cast<float>(i)) * 3;
  for (size_t i = 0; i < rv.size(); ++i) rv[i] = 1.5f - static_cast<float>(i) * 0.7f;
  const std::vector<Tensor> in = {F32(Shape({2, 3, 5, 7}), xv), F32(Shape({2, 3, 1, 1}), rv)};
  for (const char* engine : {"eager", "reference"}) {
    const std::optional<std::string> diff =
        FirstBitDifference(RunOne(engine, global, in), RunOne(engine, adaptive, in));
    EXPECT_FALSE(diff.has_value()) << engine << ": " << *diff;
  }
}

// Bad input: the file and line, the op, the shapes and what was expected.
TEST(ModelOpsErrors, NameTheFileLineOpAndShapes) {
  const struct {
    const char* line;
    const char* want;
  } cases[] = {
      {"%y: f32[2,3] = add(%a, %b)", "bad.remat:2:18: shape mismatch: add(f32[2,3], f32[4]): add: shapes "
                                     "[2,3] and [4] do not broadcast: axis -1 has sizes 3 and 4"},
      {"%y: f32[2] = sum(%a) ints=[1,-1]", "bad.remat:2:16: shape mismatch: sum(f32[2,3]): sum: axis -1 is given twice"},
      {"%y: f32[2] = mean(%a) ints=[2]", "bad.remat:2:16: shape mismatch: mean(f32[2,3]): mean: axis 2 is outside [2,3]"},
      {"%y: f32[2,1] = amax(%a) ints=[1] keepdim=2", "bad.remat:2:44: bad attribute: keepdim=2; expected 0"},
      {"%y: f32[2,3] = hardtanh(%a)", "bad.remat:2:18: hardtanh needs ints=[MIN,MAX]"},
      {"%y: f32[2,3] = hardtanh(%a) ints=[3,1]", "the lower bound is above the upper one"},
      {"%y: f32[2,3] = where(%a, %a, %a)", "where's input 0 is f32; where takes i32 there"},
      {"%y: f32[2,3] = pow(%a)", "bad.remat:2:18: pow needs its constant: scalar=C"},
      {"%y: f32[2,3] = sqrt(%a) keepdim=1", "bad.remat:2:27: bad attribute: sqrt takes no keepdim="},
      {"%y: f32[3] = sum(%a) ints=[1]", "bad.remat:2:"},
      {"%y: f32[2,3] = adaptive_avg_pool2d(%a) ints=[1,1]",
       "bad.remat:2:18: shape mismatch: adaptive_avg_pool2d(f32[2,3]): adaptive_avg_pool2d to [1,1] takes x "
       "(N, C, H, W)"},
      {"%y: f32[2,3] = adaptive_avg_pool2d(%a)", "bad.remat:2:18: adaptive_avg_pool2d needs ints=[OH,OW]"},
      {"%y: f32[2,3] = adaptive_avg_pool2d(%a) ints=[1]",
       "bad.remat:2:18: shape mismatch: adaptive_avg_pool2d(f32[2,3]): adaptive_avg_pool2d takes 2 integer "
       "attributes, got 1"},
  };
  for (const auto& c : cases) {
    const std::string text = StrCat("program bad(a: f32[2,3], b: f32[4]) {\n  ", c.line,
                                    "\n  %s: f32[] = sum(%y)\n  return %s\n}\n");
    try {
      ParseProgram(text, "bad.remat");
      ADD_FAILURE() << c.line << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.want), std::string::npos) << c.line << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace remat
