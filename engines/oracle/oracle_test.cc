// The oracle on hand-built programs whose gradients are derived by hand (or
// by a complex step, which no reverse mode shares): each op alone, a scan
// whose step order matters, regions and chains inline, and the engine's
// contract (memory, errors). Its agreement with central differences on the
// problems is harness/gradcheck_test.cc.
#include "engines/oracle/oracle.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "engines/oracle/op_rules.h"

namespace remat {
namespace {

Tensor F64(const Shape& shape, const std::vector<double>& values) {
  return Tensor::FromF64(shape, values);
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(t.at(i));
  return out;
}

void ExpectNear(const Tensor& got, const std::vector<double>& want, double tolerance,
                const std::string& what) {
  ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.at(static_cast<int64_t>(i)), want[i], tolerance) << what << "[" << i << "]";
  }
}

// loss = sum(op(inputs...) * t), t the last parameter: the gradient of each
// input is op's vector-Jacobian product applied to t.
Program Contracted(const std::string& name, std::vector<ParamDecl> params, const Shape& out,
                   const std::function<Var(const std::vector<Var>&)>& op) {
  params.push_back({"t", out});
  return Trace(name, params,
               [&](const std::vector<Var>& in) { return sum(mul(op(in), in.back())); });
}

TEST(OracleTest, MatMulGradientsAreDerivedByHand) {
  // a (2,3), b (3,2), t (2,2): value sum(ab * t), da = t b^T, db = a^T t.
  const Program p =
      Contracted("matmul", {{"a", Shape({2, 3})}, {"b", Shape({3, 2})}}, Shape({2, 2}),
                 [](const std::vector<Var>& in) { return matmul(in[0], in[1]); });
  const Result r = OracleValueAndGrad(
      p,
      {F64({2, 3}, {1, 2, 3, 4, 5, 6}), F64({3, 2}, {1, 0, 0, 1, 1, 1}), F64({2, 2}, {1, 2, 3, 4})},
      {0, 1});
  // ab = [[4, 5], [10, 11]]; 4 + 10 + 30 + 44 = 88.
  EXPECT_EQ(r.value.at(0), 88);
  ExpectNear(r.grads[0], {1, 2, 3, 3, 4, 7}, 0, "da");
  ExpectNear(r.grads[1], {13, 18, 17, 24, 21, 30}, 0, "db");
}

TEST(OracleTest, BatchedMatMulKeepsBatchesApart) {
  // Batch 0 is the case above; batch 1 has a = identity rows, b = 2.
  const Program p =
      Contracted("bmm", {{"a", Shape({2, 2, 3})}, {"b", Shape({2, 3, 2})}}, Shape({2, 2, 2}),
                 [](const std::vector<Var>& in) { return matmul(in[0], in[1]); });
  const Result r = OracleValueAndGrad(p,
                                      {F64({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0}),
                                       F64({2, 3, 2}, {1, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2}),
                                       F64({2, 2, 2}, {1, 2, 3, 4, 1, 1, 1, 1})},
                                      {0, 1});
  // Batch 1: ab = all 2s, contracted with ones: 8. da = t b^T = all 4s; db =
  // a^T t = rows (1,1), (1,1), (0,0).
  EXPECT_EQ(r.value.at(0), 88 + 8);
  ExpectNear(r.grads[0], {1, 2, 3, 3, 4, 7, 4, 4, 4, 4, 4, 4}, 0, "da");
  ExpectNear(r.grads[1], {13, 18, 17, 24, 21, 30, 1, 1, 1, 1, 0, 0}, 0, "db");
}

TEST(OracleTest, ReluPassesTheCotangentOnlyWherePositive) {
  const Program p = Contracted("relu", {{"x", Shape({4})}}, Shape({4}),
                               [](const std::vector<Var>& in) { return relu(in[0]); });
  const Result r =
      OracleValueAndGrad(p, {F64({4}, {-1, 0, 2, -0.0}), F64({4}, {5, 6, 7, 8})}, {0, 1});
  EXPECT_EQ(r.value.at(0), 14);
  ExpectNear(r.grads[0], {0, 0, 7, 0}, 0, "dx (relu'(0) = 0)");
  ExpectNear(r.grads[1], {0, 0, 2, 0}, 0, "dt");
}

TEST(OracleTest, ReluKeepsNaN) {
  const Program p = Trace("relu_nan", {{"x", Shape({2})}},
                          [](const std::vector<Var>& in) { return sum(relu(in[0])); });
  EXPECT_TRUE(std::isnan(OracleValueAndGrad(p, {F64({2}, {NAN, 1})}, {0}).value.at(0)));
}

TEST(OracleTest, ElementwiseChainRule) {
  // loss = sin(cos(x)^2) * scale: d/dx = cos(cos^2 x) 2 cos x (-sin x) c.
  const double c = -1.5;
  const Program p = Trace("trig", {{"x", Shape()}}, [c](const std::vector<Var>& in) {
    return scale(sin(square(cos(in[0]))), c);
  });
  for (double x : {0.3, -1.2, 2.5}) {
    const Result r = OracleValueAndGrad(p, {F64({}, {x})}, {0});
    EXPECT_NEAR(r.value.at(0), c * std::sin(std::cos(x) * std::cos(x)), 1e-15);
    const double want = c * std::cos(std::cos(x) * std::cos(x)) * 2 * std::cos(x) * -std::sin(x);
    EXPECT_NEAR(r.grads[0].at(0), want, 1e-14) << x;
  }
}

TEST(OracleTest, AValueReadTwiceGetsBothContributions) {
  // loss = sum(x * x + x): 2x + 1.
  const Program p = Trace("twice", {{"x", Shape({3})}}, [](const std::vector<Var>& in) {
    return sum(add(mul(in[0], in[0]), name(in[0], "x")));
  });
  const Result r = OracleValueAndGrad(p, {F64({3}, {1, -2, 0.5})}, {0});
  EXPECT_EQ(r.value.at(0), 2 + 2 + 0.75);
  ExpectNear(r.grads[0], {3, -3, 2}, 0, "dx");
}

TEST(OracleTest, SoftmaxOfTwoIsALogistic) {
  // softmax(x0, x1) = (s(d), 1 - s(d)), s the logistic, d = x0 - x1: the loss
  // t0 s(d) + t1 (1 - s(d)) has d/dx0 = (t0 - t1) s(d)(1 - s(d)) = -d/dx1.
  const Program p = Contracted("softmax", {{"x", Shape({2, 2})}}, Shape({2, 2}),
                               [](const std::vector<Var>& in) { return softmax(in[0]); });
  const std::vector<double> x = {0.3, -0.4, 5, 1}, t = {2, -1, 0.5, 3};
  const Result r = OracleValueAndGrad(p, {F64({2, 2}, x), F64({2, 2}, t)}, {0});
  std::vector<double> want;
  double value = 0;
  for (int row = 0; row < 2; ++row) {
    const double s = 1 / (1 + std::exp(-(x[2 * row] - x[2 * row + 1])));
    const double g = (t[2 * row] - t[2 * row + 1]) * s * (1 - s);
    want.push_back(g);
    want.push_back(-g);
    value += t[2 * row] * s + t[2 * row + 1] * (1 - s);
  }
  EXPECT_NEAR(r.value.at(0), value, 1e-14);
  ExpectNear(r.grads[0], want, 1e-15, "dx");
}

TEST(OracleTest, LayerNormOfTwo) {
  // Over C = 2, x = (a, b): h = (a - b)/2, xhat = (f, -f), f = h / sqrt(h^2 +
  // eps), f' = eps / (h^2 + eps)^(3/2). loss = t0 (g0 f + b0) + t1 (-g1 f + b1):
  // d/da = (t0 g0 - t1 g1) f' / 2 = -d/db, dgamma = (t0 f, -t1 f), dbeta = t.
  const Program p = Contracted(
      "layer_norm", {{"x", Shape({2})}, {"gamma", Shape({2})}, {"beta", Shape({2})}}, Shape({2}),
      [](const std::vector<Var>& in) { return layer_norm(in[0], in[1], in[2]); });
  const double a = 0.7, b = -0.2, eps = 1e-5;
  const std::vector<double> g = {1.1, 0.9}, beta = {0.1, -0.3}, t = {2, -0.5};
  const Result r = OracleValueAndGrad(
      p, {F64({2}, {a, b}), F64({2}, g), F64({2}, beta), F64({2}, t)}, {0, 1, 2});
  const double h = (a - b) / 2, f = h / std::sqrt(h * h + eps);
  const double fp = eps / std::pow(h * h + eps, 1.5);
  const double da = (t[0] * g[0] - t[1] * g[1]) * fp / 2;
  EXPECT_NEAR(r.value.at(0), t[0] * (g[0] * f + beta[0]) + t[1] * (-g[1] * f + beta[1]), 1e-14);
  ExpectNear(r.grads[0], {da, -da}, 1e-14, "dx");
  ExpectNear(r.grads[1], {t[0] * f, -t[1] * f}, 1e-14, "dgamma");
  ExpectNear(r.grads[2], t, 0, "dbeta");
}

TEST(OracleTest, GeluMatchesAComplexStep) {
  // f'(x) = Im f(x + i h) / h to rounding for an analytic f (no cancellation):
  // a derivative no reverse mode computes this way.
  auto gelu_of = [](std::complex<double> z) {
    const double c = std::sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * z * (1.0 + std::tanh(c * (z + 0.044715 * z * z * z)));
  };
  const Program p = Trace("gelu", {{"x", Shape({5})}},
                          [](const std::vector<Var>& in) { return sum(gelu(in[0])); });
  const std::vector<double> x = {-3, -0.5, 0, 0.8, 2.2};
  const Result r = OracleValueAndGrad(p, {F64({5}, x)}, {0});
  double value = 0;
  std::vector<double> want;
  for (double v : x) {
    value += gelu_of(v).real();
    want.push_back(gelu_of({v, 1e-30}).imag() / 1e-30);
  }
  EXPECT_NEAR(r.value.at(0), value, 1e-14);
  ExpectNear(r.grads[0], want, 1e-14, "dx");
}

TEST(OracleTest, PermutationsSendEachCotangentBackToItsElement) {
  // t = 0, 1, 2, ... in the output's order: the gradient of x shows where
  // each element of x went.
  auto iota = [](int64_t n) {
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
    return v;
  };
  {
    const Program p = Contracted("transpose", {{"x", Shape({2, 3})}}, Shape({3, 2}),
                                 [](const std::vector<Var>& in) { return transpose(in[0]); });
    const Result r = OracleValueAndGrad(p, {F64({2, 3}, iota(6)), F64({3, 2}, iota(6))}, {0});
    ExpectNear(r.grads[0], {0, 2, 4, 1, 3, 5}, 0, "transpose");
  }
  {
    // (B*S, H*Dh) = (4, 4), B = H = 2, S = Dh = 2: x[b*2 + s, h*2 + j] goes to
    // out[b*2 + h, s, j], flat ((b*2 + h)*2 + s)*2 + j.
    const Program p =
        Contracted("split_heads", {{"x", Shape({4, 4})}}, Shape({4, 2, 2}),
                   [](const std::vector<Var>& in) { return split_heads(in[0], 2, 2); });
    const Result r =
        OracleValueAndGrad(p, {F64({4, 4}, iota(16)), F64({4, 2, 2}, iota(16))}, {0, 1});
    ExpectNear(r.grads[0], {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}, 0,
               "split_heads");
    // And the forward map is the same one: out = x permuted.
    ExpectNear(r.grads[1], {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}, 0,
               "split_heads forward");
  }
  {
    // merge_heads undoes split_heads: the composition's gradient is t itself.
    const Program p = Contracted(
        "merge_split", {{"x", Shape({6, 4})}}, Shape({6, 4}),
        [](const std::vector<Var>& in) { return merge_heads(split_heads(in[0], 3, 2), 3); });
    const Result r = OracleValueAndGrad(p, {F64({6, 4}, iota(24)), F64({6, 4}, iota(24))}, {0});
    ExpectNear(r.grads[0], iota(24), 0, "merge_heads(split_heads)");
  }
}

TEST(OracleTest, ScanStepsAreReversedInOrder) {
  // carry c0 (2,2) times xs[0] @ xs[1] @ xs[2] with non-commuting steps,
  // against the same product written out without a scan.
  const Shape m({2, 2});
  const Program scanned = Trace(
      "scanned", {{"c", m}, {"xs", Shape({3, 2, 2})}, {"t", m}}, [](const std::vector<Var>& in) {
        const Var y = scan([](Var c, Var x) { return sin(matmul(c, x)); }, in[0], in[1]);
        return sum(mul(y, in[2]));
      });
  const Program unrolled = Trace("unrolled", {{"c", m}, {"x0", m}, {"x1", m}, {"x2", m}, {"t", m}},
                                 [](const std::vector<Var>& in) {
                                   Var y = in[0];
                                   for (int i = 1; i <= 3; ++i) y = sin(matmul(y, in[i]));
                                   return sum(mul(y, in[4]));
                                 });
  const std::vector<double> c = {1, 0.5, -0.3, 2}, t = {1, -1, 0.5, 2};
  const std::vector<std::vector<double>> x = {
      {0.1, 0.9, -0.7, 0.2}, {1.3, -0.4, 0.6, 0.8}, {-0.5, 0.3, 1.1, 0.4}};
  std::vector<double> stacked;
  for (const auto& xi : x) stacked.insert(stacked.end(), xi.begin(), xi.end());
  const Result a =
      OracleValueAndGrad(scanned, {F64(m, c), F64(Shape({3, 2, 2}), stacked), F64(m, t)}, {0, 1});
  const Result b = OracleValueAndGrad(
      unrolled, {F64(m, c), F64(m, x[0]), F64(m, x[1]), F64(m, x[2]), F64(m, t)}, {0, 1, 2, 3});
  EXPECT_EQ(a.value.at(0), b.value.at(0));
  ExpectNear(a.grads[0], Values(b.grads[0]), 0, "dc");
  std::vector<double> want;
  for (int i = 1; i <= 3; ++i) {
    for (double v : Values(b.grads[i])) want.push_back(v);
  }
  ExpectNear(a.grads[1], want, 0, "dxs");
}

TEST(OracleTest, ScanOfAProductByHand) {
  // c0 * x0 * x1 * x2: d/dc0 = x0 x1 x2, d/dxs[i] = c0 * prod_{j != i} x_j.
  const Program p =
      Trace("product", {{"c", Shape()}, {"xs", Shape({3})}}, [](const std::vector<Var>& in) {
        return scan([](Var c, Var x) { return mul(c, x); }, in[0], in[1]);
      });
  const Result r = OracleValueAndGrad(p, {F64({}, {7}), F64({3}, {2, 3, 5})}, {0, 1});
  EXPECT_EQ(r.value.at(0), 210);
  ExpectNear(r.grads[0], {30}, 0, "dc");
  ExpectNear(r.grads[1], {105, 70, 42}, 0, "dxs");
}

TEST(OracleTest, RegionsChainsAndPoliciesChangeNothing) {
  const Shape m({3, 3});
  const Program p = Trace("blocks", {{"w0", m}, {"w1", m}, {"w2", m}, {"x", Shape({2, 3})}},
                          [](const std::vector<Var>& in) {
                            Var y = in[3];
                            for (int i = 0; i < 3; ++i) {
                              y = checkpoint([](Var y, Var w) { return cos(matmul(y, w)); },
                                             Policy(), "block")(y, in[i]);
                            }
                            return sum(square(y));
                          });
  std::vector<Tensor> args;
  for (int i = 0; i < 3; ++i) {
    std::vector<double> v;
    for (int j = 0; j < 9; ++j) v.push_back(0.1 * (j - 4) + 0.05 * i);
    args.push_back(F64(m, v));
  }
  args.push_back(F64({2, 3}, {0.5, -1, 0.25, 1, 2, -0.5}));
  const Result base = OracleValueAndGrad(InlineCheckpoints(p), args, {0, 1, 2, 3});
  for (const Program& variant :
       {p, ApplySchedule(p, "revolve:1"), ApplyPolicy(p, Policy::Parse("nothing_saveable"))}) {
    const Result r = OracleValueAndGrad(variant, args, {0, 1, 2, 3});
    EXPECT_EQ(r.value.at(0), base.value.at(0));
    for (int j = 0; j < 4; ++j) ExpectNear(r.grads[j], Values(base.grads[j]), 0, "grad");
  }
  EXPECT_EQ(ApplySchedule(p, "revolve:1").CountOps(OpKind::kChain), 1);
}

TEST(OracleTest, F32ArgumentsAreConvertedExactly) {
  const Program p = Trace("sq", {{"x", Shape({2})}},
                          [](const std::vector<Var>& in) { return sum(square(in[0])); });
  const Result a = OracleValueAndGrad(p, {Tensor::FromF32(Shape({2}), {0.1f, 3.0f})}, {0});
  const Result b = OracleValueAndGrad(p, {F64({2}, {0.1f, 3.0f})}, {0});
  EXPECT_EQ(a.value.dtype(), DType::kF64);
  EXPECT_EQ(a.value.at(0), b.value.at(0));
  EXPECT_TRUE(BitwiseEqual(a.grads[0], b.grads[0]));
}

TEST(OracleTest, UnreachedGradientsAreZeros) {
  const Program p = Trace("unused", {{"x", Shape({2})}, {"y", Shape({3})}},
                          [](const std::vector<Var>& in) { return sum(in[0]); });
  const Result r = OracleValueAndGrad(p, {F64({2}, {1, 2}), F64({3}, {1, 2, 3})}, {1, 0});
  ExpectNear(r.grads[0], {0, 0, 0}, 0, "dy");
  ExpectNear(r.grads[1], {1, 1}, 0, "dx");
}

TEST(OracleTest, AnOpWithoutARuleIsAnErrorNamingIt) {
  Program p =
      Trace("p", {{"x", Shape({2})}}, [](const std::vector<Var>& in) { return sum(relu(in[0])); });
  p.ops[0].kind = static_cast<OpKind>(99);
  try {
    OracleValueAndGrad(p, {F64({2}, {1, 2})}, {0});
    ADD_FAILURE() << "an unknown op ran";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("no rule for op kind 99"), std::string::npos) << m;
    EXPECT_NE(m.find("oracle_test.cc"), std::string::npos) << m;
  }
}

// Every primitive op has its entry in the oracle's own table (op_rules.h),
// with every rule set; a new OpKind without one is named here.
TEST(OracleTest, EveryPrimitiveHasAnEntryInTheOraclesTable) {
  for (int k = 0; k <= static_cast<int>(OpKind::kChain); ++k) {  // kChain is the last kind
    const OpKind kind = static_cast<OpKind>(k);
    const oracle::OpRules* rules = oracle::FindRules(kind);
    if (kind == OpKind::kCheckpoint || kind == OpKind::kScan || kind == OpKind::kChain) {
      EXPECT_EQ(rules, nullptr) << OpKindName(kind) << " is structural: the traversal's";
      continue;
    }
    ASSERT_NE(rules, nullptr) << OpKindName(kind) << " has no entry in the oracle's table";
    EXPECT_NE(rules->shape, nullptr) << OpKindName(kind) << ": no shape rule";
    EXPECT_NE(rules->forward, nullptr) << OpKindName(kind) << ": no forward rule";
    EXPECT_NE(rules->vjp, nullptr) << OpKindName(kind) << ": no vector-Jacobian product";
    EXPECT_NE(rules->magnitude, nullptr) << OpKindName(kind) << ": no magnitude rule";
    EXPECT_NE(rules->grad_magnitude, nullptr) << OpKindName(kind) << ": no gradient magnitude rule";
  }
}

TEST(OracleTest, MalformedProgramsAndArgumentsAreErrors) {
  Program p = Trace("p", {{"x", Shape({2, 3})}},
                    [](const std::vector<Var>& in) { return sum(relu(in[0])); });
  EXPECT_THROW(OracleValueAndGrad(p, {}, {0}), Error);
  EXPECT_THROW(OracleValueAndGrad(p, {F64({3, 2}, {1, 2, 3, 4, 5, 6})}, {0}), Error);
  EXPECT_THROW(OracleValueAndGrad(p, {F64({2, 3}, {1, 2, 3, 4, 5, 6})}, {1}), Error);
  Program wrong_shape = p;
  wrong_shape.shapes[wrong_shape.ops[0].output] = Shape({3, 2});
  try {
    OracleValueAndGrad(wrong_shape, {F64({2, 3}, {1, 2, 3, 4, 5, 6})}, {0});
    ADD_FAILURE() << "a wrong recorded shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu at"), std::string::npos) << e.what();
  }
  Program bad_input = p;
  bad_input.ops[1].inputs = {7};
  EXPECT_THROW(OracleValueAndGrad(bad_input, {F64({2, 3}, {1, 2, 3, 4, 5, 6})}, {0}), Error);
}

TEST(OracleTest, EveryByteIsCountedAndGivenBack) {
  const Program p =
      Trace("mm", {{"w", Shape({4, 4})}, {"x", Shape({3, 4})}},
            [](const std::vector<Var>& in) { return sum(square(relu(matmul(in[1], in[0])))); });
  std::vector<Tensor> args = {Tensor::Zeros(DType::kF32, Shape({4, 4})),
                              F64({3, 4}, std::vector<double>(12, 0.5))};
  args[0].f32()[5] = 1;
  std::shared_ptr<MemoryTracker> tracker;
  int64_t peak = 0;
  {
    const Result r = OracleValueAndGrad(p, args, {0});
    tracker = r.tracker;
    peak = r.stats.peak_bytes;
    EXPECT_EQ(tracker->live_bytes(), r.value.bytes() + r.grads[0].bytes());
    // w converted (128 bytes) and x counted (96); matmul, relu, square, sum
    // (96 + 96 + 96 + 8) and the value (8); the adjoints of all but w and x
    // are kept to the end with w's.
    EXPECT_EQ(r.stats.high_water_bytes_by_category[static_cast<int>(Category::kInputs)], 224);
    EXPECT_EQ(r.stats.residual_bytes, 96 * 3 + 8);
    EXPECT_GE(peak, 224 + 96 * 3 + 8 + 8 + 128);
    EXPECT_EQ(r.stats.predicted_peak_bytes, -1);
    EXPECT_GT(r.stats.flops_backward, 0);
    EXPECT_EQ(r.stats.flops_forward, 2 * 3 * 4 * 4 + 12 * 3);
  }
  EXPECT_EQ(tracker->live_bytes(), 0);
  OracleOptions limited;
  limited.max_memory_bytes = peak - 1;
  try {
    OracleValueAndGrad(p, args, {0}, limited);
    ADD_FAILURE() << "a run past the limit succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
  }
  limited.max_memory_bytes = peak;
  EXPECT_EQ(OracleValueAndGrad(p, args, {0}, limited).stats.peak_bytes, peak);
}

// The rounding magnitudes (OracleRoundingMagnitudes): what an f32 result's
// roundings are relative to, by each op's rule. Arguments are exact (no
// error to carry); each program ends in a sum, whose own terms count too.
TEST(OracleTest, RoundingMagnitudesAreTheSumsOfAbsoluteTerms) {
  // sum(x): its terms' magnitude, not its (cancelled) result.
  const Program summed =
      Trace("cancelling", {{"x", Shape({3})}}, [](const std::vector<Var>& in) { return sum(in[0]); });
  OracleMagnitudes m = OracleRoundingMagnitudes(summed, {F64({3}, {1000, -1000, 0.5})});
  EXPECT_DOUBLE_EQ(m.value.at(0), 2000.5);
  // matmul: |a| |b| = 3 5 + 4 6 = 39, though ab = -9; then the sum's |-9|.
  const Program product = Trace("product", {{"a", Shape({1, 2})}, {"b", Shape({2, 1})}},
                                [](const std::vector<Var>& in) { return sum(matmul(in[0], in[1])); });
  m = OracleRoundingMagnitudes(product, {F64({1, 2}, {3, -4}), F64({2, 1}, {5, 6})});
  EXPECT_DOUBLE_EQ(m.value.at(0), 39 + 9);
  // sin of an exact input: its own rounding, |sin x|; then the sum's.
  const Program sined =
      Trace("sined", {{"x", Shape({1})}}, [](const std::vector<Var>& in) { return sum(sin(in[0])); });
  m = OracleRoundingMagnitudes(sined, {F64({1}, {2.0})});
  EXPECT_DOUBLE_EQ(m.value.at(0), 2 * std::abs(std::sin(2.0)));
  // a - b: |a| + |b|, however close a and b are; then the sum's |a - b|.
  const Program diff = Trace("diff", {{"a", Shape({1})}, {"b", Shape({1})}},
                             [](const std::vector<Var>& in) { return sum(apply("sub", {in[0], in[1]})); });
  m = OracleRoundingMagnitudes(diff, {F64({1}, {1.0}), F64({1}, {0.999})});
  EXPECT_NEAR(m.value.at(0), 1.999 + 0.001, 1e-12);
  // A rounded value's error is carried by the derivative: sin(sin(x)).
  const Program twice = Trace("twice", {{"x", Shape({1})}},
                              [](const std::vector<Var>& in) { return sum(sin(sin(in[0]))); });
  m = OracleRoundingMagnitudes(twice, {F64({1}, {2.0})});
  const double inner = std::abs(std::sin(2.0));
  const double outer = std::max(std::abs(std::cos(std::sin(2.0))) * inner, std::abs(std::sin(std::sin(2.0))));
  EXPECT_DOUBLE_EQ(m.value.at(0), std::abs(std::sin(std::sin(2.0))) + outer);
}

// The gradients' magnitudes: each vector-Jacobian product's terms in
// absolute value, and the errors carried (magnitude_rules.cc's rules).
TEST(OracleTest, GradientMagnitudesAreTheSumsOfAbsoluteTerms) {
  // d sum(a b) / db = a^T 1, column sums that cancel: |a|^T 1 = (2000, 3),
  // and dy's errors (M(dy) = 1, the sum's) in quadrature, sqrt(sum a^2);
  // a is exact (an argument), so nothing more.
  const Program product = Trace("product", {{"a", Shape({2, 2})}, {"b", Shape({2, 1})}},
                                [](const std::vector<Var>& in) { return sum(matmul(in[0], in[1])); });
  const std::vector<Tensor> ab = {F64({2, 2}, {1000, 1, -1000, 2}), F64({2, 1}, {1, 1})};
  OracleMagnitudes m = OracleRoundingMagnitudes(product, ab, {1});
  ASSERT_EQ(m.grads.size(), 1u);
  EXPECT_DOUBLE_EQ(OracleValueAndGrad(product, ab, {1}).grads[0].at(0), 0);
  EXPECT_DOUBLE_EQ(m.grads[0].at(0), 2000 + std::sqrt(2e6));
  EXPECT_DOUBLE_EQ(m.grads[0].at(1), 3 + std::sqrt(5.0));
  // sin(sin(x)): d/dx = cos(sin x) cos x. The outer sine's input sin x is
  // rounded (M = |sin x|), so its derivative carries that error, |dy|
  // |sin(sin x)| M; the inner's input is exact.
  const Program twice = Trace("twice", {{"x", Shape({1})}},
                              [](const std::vector<Var>& in) { return sum(sin(sin(in[0]))); });
  m = OracleRoundingMagnitudes(twice, {F64({1}, {2.0})}, {0});
  const double s = std::sin(2.0);
  EXPECT_NEAR(m.grads[0].at(0),
              std::abs(std::cos(2.0)) * (std::abs(std::cos(s)) + std::abs(std::sin(s)) * std::abs(s)),
              1e-8);
  // softmax against a constant w: the gradient y (w - sum y w) is 0, its
  // terms y (M + sum y M), with M(dy) = 2 (mul's: |w| + the quadrature of
  // dy's error, both 1).
  const Program soft = Trace("soft", {{"x", Shape({3})}, {"w", Shape({3})}},
                             [](const std::vector<Var>& in) { return sum(mul(softmax(in[0]), in[1])); });
  const std::vector<Tensor> xw = {F64({3}, {0.5, -1, 2}), F64({3}, {1, 1, 1})};
  m = OracleRoundingMagnitudes(soft, xw, {0, 1});
  ASSERT_EQ(m.grads.size(), 2u);
  const Result r = OracleValueAndGrad(soft, xw, {0});
  double total = 0;
  for (double v : {0.5, -1.0, 2.0}) total += std::exp(v);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(r.grads[0].at(j), 0, 1e-15);
    EXPECT_NEAR(m.grads[0].at(j), 4 * std::exp(xw[0].at(j)) / total, 1e-12);
  }
  // Unasked, no gradients' magnitudes; a value that does not reach the
  // output, magnitude 0.
  EXPECT_TRUE(OracleRoundingMagnitudes(soft, xw).grads.empty());
}

// The magnitudes are at least the value's and the gradients' own size (the
// tolerance never tightens), and finite.
TEST(OracleTest, RoundingMagnitudesBoundTheValueOnEveryProgram) {
  const Program chain = Trace("chain", {{"x", Shape({4})}, {"w", Shape({4})}},
                              [](const std::vector<Var>& in) {
                                Var h = mul(in[0], in[1]);
                                for (int i = 0; i < 3; ++i) h = sin(add(h, in[1]));
                                return sum(softmax(h));
                              });
  const std::vector<Tensor> args = {F64({4}, {0.5, -1, 2, -0.25}), F64({4}, {1, 2, -3, 0.5})};
  const OracleMagnitudes m = OracleRoundingMagnitudes(chain, args, {0, 1});
  const Result r = OracleValueAndGrad(chain, args, {0, 1});
  EXPECT_GE(m.value.at(0), std::abs(r.value.at(0)));
  EXPECT_TRUE(std::isfinite(m.value.at(0)));
  ASSERT_EQ(m.grads.size(), 2u);
  for (int g = 0; g < 2; ++g) {
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_GE(m.grads[g].at(i), std::abs(r.grads[g].at(i))) << "grad " << g << "[" << i << "]";
      EXPECT_TRUE(std::isfinite(m.grads[g].at(i)));
    }
  }
}

TEST(OracleTest, IsRegisteredAsAFloat64EngineOfItsOwn) {
  std::unique_ptr<Engine> engine = MakeEngine("oracle");
  EXPECT_EQ(engine->name(), "oracle");
  EXPECT_EQ(engine->dtype(), DType::kF64);
  EXPECT_EQ(engine->kernels(), "");
  EXPECT_FALSE(engine->honours_checkpoints());
  const Program p =
      Trace("s", {{"x", Shape()}}, [](const std::vector<Var>& in) { return sin(in[0]); });
  RunOptions plan;
  plan.plan_only = true;
  EXPECT_THROW(engine->ValueAndGrad(p, {F64({}, {1})}, {0}, plan), Error);
  EXPECT_NEAR(engine->ValueAndGrad(p, {F64({}, {1})}, {0}).grads[0].at(0), std::cos(1.0), 1e-16);
}

}  // namespace
}  // namespace remat
