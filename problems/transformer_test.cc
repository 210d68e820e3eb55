// transformer_stack and the ops it brought (softmax, layer_norm, gelu, scale,
// transpose, split_heads, merge_heads): tracing and its errors, both float64
// engines (the oracle and the old reference) against central differences
// (each op alone and the whole problem), eager against the oracle, and
// recompute against eager bit for bit under the policies the problem's labels
// are for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat {
namespace {

const Problem& Transformer() { return FindProblem("transformer_stack"); }

ParamValues TestSizes() { return ResolveParams(Transformer(), {}, /*test_sizes=*/true); }

// The message of the remat::Error `f` throws, or a failure.
std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no remat::Error thrown";
  return "";
}

void ExpectMentions(const std::string& message, const std::vector<std::string>& words) {
  for (const std::string& w : words) {
    EXPECT_NE(message.find(w), std::string::npos) << "'" << w << "' not in: " << message;
  }
}

TEST(TransformerStackTest, TracesAtTestSizes) {
  const Program p = Transformer().Build(TestSizes());
  // L=2, D=8, H=2, F=16, S=4, B=2: N = 8 rows.
  EXPECT_EQ(p.num_params(), 12);
  EXPECT_EQ(p.shapes[0], Shape({2, 8, 8}));    // wq
  EXPECT_EQ(p.shapes[6], Shape({2, 8, 16}));   // w1
  EXPECT_EQ(p.shapes[7], Shape({2, 16, 8}));   // w2
  EXPECT_EQ(p.shapes[8], Shape({2, 8}));       // ln2_gamma
  EXPECT_EQ(p.shapes[10], Shape({8, 8}));      // x
  EXPECT_EQ(p.CountOps(OpKind::kScan), 1);
  EXPECT_EQ(p.CountOps(OpKind::kCheckpoint), 1);
  // One block's body (a scan body counts once).
  EXPECT_EQ(p.CountOps(OpKind::kMatMul), 8);
  EXPECT_EQ(p.CountOps(OpKind::kSplitHeads), 3);
  EXPECT_EQ(p.CountOps(OpKind::kTranspose), 1);
  EXPECT_EQ(p.CountOps(OpKind::kScale), 1);
  EXPECT_EQ(p.CountOps(OpKind::kSoftmax), 1);
  EXPECT_EQ(p.CountOps(OpKind::kMergeHeads), 1);
  EXPECT_EQ(p.CountOps(OpKind::kLayerNorm), 2);
  EXPECT_EQ(p.CountOps(OpKind::kGelu), 1);
  EXPECT_EQ(p.Labels(), (std::vector<std::string>{"attn_out", "attn_probs", "ffn_hidden"}));
  // The attention scale is 1/sqrt(Dh), Dh = 4; heads are (B*H, S, Dh).
  const Program& block = *p.ops[0].body->ops[0].body;
  bool found = false;
  for (const Op& op : block.ops) {
    if (op.kind == OpKind::kScale) {
      EXPECT_EQ(op.scalar, 0.5);
      EXPECT_EQ(block.shapes[op.output], Shape({4, 4, 4}));
      found = true;
    }
    if (op.kind == OpKind::kSplitHeads) {
      EXPECT_EQ(op.ints, (std::vector<int64_t>{2, 2}));
      EXPECT_EQ(block.shapes[op.output], Shape({4, 4, 4}));
    }
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(PolicyWarnings(ApplyPolicy(p, Policy::Parse("save_only_these_names:attn_probs,"
                                                          "attn_out,ffn_hidden")))
                  .empty());
}

TEST(TransformerStackTest, TracesAtDefaultSizes) {
  // Traced only: running it is the benchmark's job.
  const ParamValues params = ResolveParams(Transformer(), {});
  EXPECT_EQ(params.at("L"), 12);
  EXPECT_EQ(params.at("D"), 512);
  EXPECT_EQ(params.at("H"), 8);
  EXPECT_EQ(params.at("F"), 2048);
  EXPECT_EQ(params.at("S"), 256);
  EXPECT_EQ(params.at("B"), 4);
  const Program p = Transformer().Build(params);
  EXPECT_EQ(p.shapes[0], Shape({12, 512, 512}));
  EXPECT_EQ(p.shapes[10], Shape({1024, 512}));
  const Program& block = *p.ops[0].body->ops[0].body;
  for (const Op& op : block.ops) {
    if (op.kind == OpKind::kSoftmax) {
      EXPECT_EQ(block.shapes[op.output], Shape({32, 256, 256}));
    }
    if (op.kind == OpKind::kGelu) {
      EXPECT_EQ(block.shapes[op.output], Shape({1024, 2048}));
    }
    if (op.kind == OpKind::kScale) {
      EXPECT_EQ(op.scalar, 0.125);
    }
  }
}

TEST(TransformerStackTest, HeadsThatDoNotDivideTheWidthAreATraceError) {
  const ParamValues params = ResolveParams(Transformer(), {{"H", 3}}, /*test_sizes=*/true);
  ExpectMentions(ErrorOf([&] { Transformer().Build(params); }),
                 {"split_heads at problems/transformer_stack.cc:", "(block)", "heads=3",
                  "[8,8]", "does not divide the width 8"});
}

TEST(TransformerStackTest, ForwardFlopsFollowTheFormula) {
  // L (8ND^2 + 4NDF + 4NSD + 6NSH + 16ND + NF) + 3ND, as the file comment says.
  for (const ParamValues& p :
       {TestSizes(), ResolveParams(Transformer(), {{"L", 3}, {"D", 12}, {"H", 3}, {"F", 20},
                                                   {"S", 5}, {"B", 3}})}) {
    const double l = p.at("L"), d = p.at("D"), h = p.at("H"), f = p.at("F"), s = p.at("S");
    const double n = p.at("B") * s;
    const double want = l * (8 * n * d * d + 4 * n * d * f + 4 * n * s * d + 6 * n * s * h +
                             16 * n * d + n * f) +
                        3 * n * d;
    Case c = MakeCase(Transformer(), p);
    Result r = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
    EXPECT_EQ(static_cast<double>(r.stats.flops_forward), want) << c.ToString();
  }
}

TEST(TransformerStackTest, LayerNormScalesAreDrawnAroundOne) {
  Case c = MakeCase(Transformer(), TestSizes());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string& name = c.program.param_names[i];
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t j = 0; j < c.inputs[i].num_elements(); ++j) {
      lo = std::min(lo, c.inputs[i].at(j));
      hi = std::max(hi, c.inputs[i].at(j));
    }
    if (name.find("_gamma") != std::string::npos) {
      EXPECT_GE(lo, 0.9) << name;
      EXPECT_LT(hi, 1.1) << name;
    } else {
      EXPECT_LT(lo, 0.0) << name;
    }
  }
}

// ---------------------------------------------------------------------------
// Tracer errors of the new ops name the op, where it was traced and the shapes.

ParamDecl Param(const std::string& name, Shape shape) { return {name, std::move(shape)}; }

std::string TraceError(const std::vector<ParamDecl>& params,
                       const std::function<Var(const std::vector<Var>&)>& f) {
  return ErrorOf([&] { Trace("bad", params, f); });
}

TEST(TransformerOpsTest, ShapeErrorsNameTheOpTheSiteAndTheShapes) {
  const std::string here = "problems/transformer_test.cc:";
  ExpectMentions(TraceError({Param("s", Shape())},
                            [](const std::vector<Var>& in) { return sum(softmax(in[0])); }),
                 {"softmax at " + here, "last axis", "[]"});
  ExpectMentions(
      TraceError({Param("x", Shape({3, 4})), Param("g", Shape({3})), Param("b", Shape({4}))},
                 [](const std::vector<Var>& in) { return sum(layer_norm(in[0], in[1], in[2])); }),
      {"layer_norm at " + here, "[3,4]", "gamma and beta of shape [4]", "got [3] and [4]"});
  ExpectMentions(TraceError({Param("x", Shape({5}))},
                            [](const std::vector<Var>& in) { return sum(transpose(in[0])); }),
                 {"transpose at " + here, "rank-2 or rank-3", "[5]"});
  ExpectMentions(
      TraceError({Param("x", Shape({6, 4}))},
                 [](const std::vector<Var>& in) { return sum(split_heads(in[0], 4, 2)); }),
      {"split_heads at " + here, "[6,4]", "batch=4 does not divide the 6 rows"});
  ExpectMentions(
      TraceError({Param("x", Shape({6, 4}))},
                 [](const std::vector<Var>& in) { return sum(split_heads(in[0], 2, 0)); }),
      {"split_heads at " + here, "heads=0", "must be positive"});
  ExpectMentions(
      TraceError({Param("x", Shape({6, 4}))},
                 [](const std::vector<Var>& in) { return sum(merge_heads(in[0], 2)); }),
      {"merge_heads at " + here, "rank-3", "[6,4]"});
  ExpectMentions(
      TraceError({Param("x", Shape({6, 4, 2}))},
                 [](const std::vector<Var>& in) { return sum(merge_heads(in[0], 4)); }),
      {"merge_heads at " + here, "batch=4 does not divide", "[6,4,2]"});
}

TEST(TransformerOpsTest, ShapesOfTheReshapingOps) {
  Program p = Trace("shapes", {Param("x", Shape({6, 4}))}, [](const std::vector<Var>& in) {
    const Var heads = split_heads(in[0], 2, 2);  // B=2, S=3, H=2, Dh=2
    EXPECT_EQ(heads.shape(), Shape({4, 3, 2}));
    EXPECT_EQ(transpose(heads).shape(), Shape({4, 2, 3}));
    EXPECT_EQ(transpose(in[0]).shape(), Shape({4, 6}));
    const Var merged = merge_heads(heads, 2);
    EXPECT_EQ(merged.shape(), Shape({6, 4}));
    return sum(merged);
  });
  EXPECT_EQ(p.CountOps(OpKind::kSplitHeads), 1);
}

// ---------------------------------------------------------------------------
// The float64 engines against central differences, as
// harness/gradcheck_test.cc: fd = (f(x + h) - f(x - h)) / 2h,
// h = 1e-6 max(1, |x|), |fd - g| <= 1e-5 + 1e-3 |g| (gradcheck's tolerances).
// Both: the oracle (engines/oracle) judges the engines; the old reference
// runs rules.cc, which eager and recompute run too.

void ExpectEngineMatchesCentralDifferences(Engine& engine, const Program& program,
                                           std::vector<Tensor> x, const std::vector<int>& wrt,
                                           int max_elements_per_input) {
  const Result base = engine.ValueAndGrad(program, x, wrt);
  auto loss = [&] { return engine.ValueAndGrad(program, x, {}).value.f64()[0]; };
  int checked = 0;
  for (size_t j = 0; j < wrt.size(); ++j) {
    Tensor& input = x[wrt[j]];
    const int64_t n = input.num_elements();
    const int64_t stride = std::max<int64_t>(1, n / max_elements_per_input);
    double norm = 0;
    for (int64_t i = 0; i < n; i += stride) {
      const double saved = input.f64()[i];
      const double h = 1e-6 * std::max(1.0, std::abs(saved));
      input.f64()[i] = saved + h;
      const double plus = loss();
      input.f64()[i] = saved - h;
      const double minus = loss();
      input.f64()[i] = saved;
      const double fd = (plus - minus) / (2 * h);
      const double g = base.grads[j].f64()[i];
      norm += std::abs(g);
      EXPECT_LE(std::abs(fd - g), 1e-5 + 1e-3 * std::abs(g))
          << program.name << ": d loss / d " << program.param_names[wrt[j]] << "[" << i
          << "]: analytic " << g << ", central difference " << fd;
      ++checked;
    }
    EXPECT_GT(norm, 0) << program.name << ": the gradient of " << program.param_names[wrt[j]]
                       << " is zero, which checks nothing";
  }
  EXPECT_GT(checked, 0);
}

void ExpectGradientsMatchCentralDifferences(const Program& program, std::vector<Tensor> x,
                                            const std::vector<int>& wrt,
                                            int max_elements_per_input = 1 << 30) {
  for (Tensor& t : x) t = Cast(t, DType::kF64);
  for (const char* name : {"oracle", "reference"}) {
    SCOPED_TRACE(name);
    ExpectEngineMatchesCentralDifferences(*MakeEngine(name), program, x, wrt,
                                          max_elements_per_input);
  }
}

// Uniform in [lo, hi), from a fixed seed.
Tensor Random(const Shape& shape, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(shape.num_elements());
  for (double& v : values) v = dist(rng);
  return Tensor::FromF64(shape, values);
}

// loss = sum(op(x...) * t) for a random cotangent t (an input not
// differentiated): the gradient is op's VJP applied to t.
struct OpCase {
  std::string name;
  std::vector<ParamDecl> params;  // the op's operands, then "t"
  std::function<Var(const std::vector<Var>&)> op;
  std::vector<int> wrt;
};

void CheckOp(const OpCase& c) {
  SCOPED_TRACE(c.name);
  std::vector<ParamDecl> params = c.params;
  Shape out_shape;
  Trace("probe", params, [&](const std::vector<Var>& in) {
    const Var y = c.op(in);
    out_shape = y.shape();
    return sum(y);
  });
  params.push_back({"t", out_shape});
  const Program program = Trace(c.name, params, [&](const std::vector<Var>& in) {
    return sum(mul(c.op(in), in.back()));
  });
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < params.size(); ++i) {
    // gamma near 1, like the problem's.
    const bool gamma = params[i].name == "gamma";
    inputs.push_back(Random(params[i].shape, 100 + static_cast<uint32_t>(i), gamma ? 0.5 : -2.0,
                            gamma ? 1.5 : 2.0));
  }
  ExpectGradientsMatchCentralDifferences(program, inputs, c.wrt);
}

TEST(TransformerOpsTest, Float64GradientsMatchCentralDifferences) {
  const std::vector<OpCase> cases = {
      {"softmax rows", {Param("x", Shape({3, 5}))},
       [](const std::vector<Var>& in) { return softmax(in[0]); }, {0}},
      {"softmax rank 3", {Param("x", Shape({2, 3, 4}))},
       [](const std::vector<Var>& in) { return softmax(in[0]); }, {0}},
      {"softmax of a vector", {Param("x", Shape({6}))},
       [](const std::vector<Var>& in) { return softmax(in[0]); }, {0}},
      {"layer_norm", {Param("x", Shape({4, 6})), Param("gamma", Shape({6})),
                      Param("beta", Shape({6}))},
       [](const std::vector<Var>& in) { return layer_norm(in[0], in[1], in[2]); }, {0, 1, 2}},
      {"layer_norm rank 3", {Param("x", Shape({2, 3, 5})), Param("gamma", Shape({5})),
                             Param("beta", Shape({5}))},
       [](const std::vector<Var>& in) { return layer_norm(in[0], in[1], in[2]); }, {0, 1, 2}},
      {"gelu", {Param("x", Shape({3, 7}))},
       [](const std::vector<Var>& in) { return gelu(in[0]); }, {0}},
      {"scale", {Param("x", Shape({2, 3, 2}))},
       [](const std::vector<Var>& in) { return scale(in[0], -0.3); }, {0}},
      {"transpose rank 2", {Param("x", Shape({3, 5}))},
       [](const std::vector<Var>& in) { return transpose(in[0]); }, {0}},
      {"transpose rank 3", {Param("x", Shape({2, 3, 4}))},
       [](const std::vector<Var>& in) { return transpose(in[0]); }, {0}},
      {"split_heads", {Param("x", Shape({6, 6}))},  // B=2, S=3, H=3, Dh=2
       [](const std::vector<Var>& in) { return split_heads(in[0], 2, 3); }, {0}},
      {"merge_heads", {Param("x", Shape({6, 3, 2}))},  // B=2, H=3, S=3, Dh=2
       [](const std::vector<Var>& in) { return merge_heads(in[0], 2); }, {0}},
      // Nonlinear around the reshapes, so a wrong permutation shows.
      {"split, attend, merge", {Param("x", Shape({4, 4}))},
       [](const std::vector<Var>& in) {
         const Var q = split_heads(in[0], 2, 2);
         return merge_heads(matmul(softmax(matmul(q, transpose(q))), q), 2);
       },
       {0}},
  };
  for (const OpCase& c : cases) CheckOp(c);
}

TEST(TransformerStackTest, Float64GradientsMatchCentralDifferencesOnATinyStack) {
  const ParamValues p = ResolveParams(
      Transformer(), {{"L", 2}, {"D", 4}, {"H", 2}, {"F", 6}, {"S", 3}, {"B", 2}});
  Case c = MakeCase(Transformer(), p, /*seed=*/7);
  ExpectGradientsMatchCentralDifferences(c.program, c.inputs, c.wrt);
}

// ---------------------------------------------------------------------------
// The f32 engines against the float64 oracle, within the problem's
// tolerance, at the test size and others.

TEST(TransformerStackTest, EagerAgreesWithTheOracle) {
  const std::vector<ParamValues> sizes = {
      TestSizes(),
      ResolveParams(Transformer(), {{"L", 4}, {"D", 16}, {"H", 4}, {"F", 32}, {"S", 8}, {"B", 2}}),
      ResolveParams(Transformer(), {{"L", 1}, {"D", 32}, {"H", 2}, {"F", 64}, {"S", 16}, {"B", 3}}),
  };
  for (const ParamValues& p : sizes) {
    for (uint64_t seed : {1, 2, 3}) {
      Case c = MakeCase(Transformer(), p, seed);
      Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
      Result ref = MakeEngine("oracle")->ValueAndGrad(c.program, c.inputs, c.wrt);
      Agreement a = CompareWithOracle(c, eager, ref);
      EXPECT_TRUE(a.ok) << "seed " << seed << ": worst error is " << a.worst_ratio
                        << "x the tolerance: " << a.detail;
      RecordProperty(c.ToString() + " seed " + std::to_string(seed), std::to_string(a.worst_ratio));
    }
  }
}

// ---------------------------------------------------------------------------
// recompute against eager, bit for bit, and what each policy recomputes.

int64_t Runs(const Stats& s, const std::string& kind) {
  int64_t n = 0;
  for (const auto& [op, count] : s.op_runs) {
    if (op.rfind(kind + " at", 0) == 0) n += count;
  }
  return n;
}

struct PolicyCase {
  std::string policy;
  // Evaluations per block (forward and recomputation) of some ops.
  int softmax, gelu, merge_heads, matmul;
};

TEST(TransformerStackTest, RecomputeEqualsEagerBitForBitUnderEachPolicy) {
  Case c = MakeCase(Transformer(), TestSizes());
  const int64_t l = c.params.at("L");
  Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
  // Per block, 8 matmuls run forward. A recomputation reruns the ops whose
  // outputs a backward rule reads, and what they are computed from, and
  // stops at saved values. A region may save any value its recomputation
  // would compute (engines/autodiff's PlanSaves): dots_saveable keeps every
  // matmul output, even those that reach a backward rule only through
  // split_heads, scale, merge_heads or add, so no matmul reruns.
  const std::vector<PolicyCase> cases = {
      // Everything the backward reads is recomputed: all 8 matmuls.
      {"as-written", 2, 2, 2, 16},
      {"nothing_saveable", 2, 2, 2, 16},
      {"everything_saveable", 1, 1, 1, 8},
      {"dots_saveable", 2, 2, 2, 8},
      // Saving the name keeps the value it labels (one tensor): softmax, the
      // scores and probs @ v do not rerun. Six matmuls do: the Q, K, V
      // projections (the scores' and probs @ v's backward read q, k, v), the
      // output projection (LayerNorm reads x + attn_out @ wo) and the FFN's
      // two.
      {"save_only_these_names:attn_probs,attn_out", 1, 2, 1, 14},
      // gelu is not rerun (the w2 matmul reads the named value; gelu's
      // backward reads its input, h @ w1, which is rerun).
      {"save_only_these_names:ffn_hidden", 2, 1, 2, 16},
  };
  for (const PolicyCase& pc : cases) {
    SCOPED_TRACE(pc.policy);
    const Program program =
        pc.policy == "as-written" ? c.program : ApplyPolicy(c.program, Policy::Parse(pc.policy));
    RunOptions options;
    options.check_recompute_bits = true;
    Result r = MakeEngine("recompute")->ValueAndGrad(program, c.inputs, c.wrt, options);
    EXPECT_EQ(FirstBitDifference(eager, r).value_or("none"), "none");
    EXPECT_EQ(Runs(r.stats, "softmax"), pc.softmax * l);
    EXPECT_EQ(Runs(r.stats, "gelu"), pc.gelu * l);
    EXPECT_EQ(Runs(r.stats, "merge_heads"), pc.merge_heads * l);
    EXPECT_EQ(Runs(r.stats, "matmul"), pc.matmul * l);
    EXPECT_LE(r.stats.residual_bytes, eager.stats.residual_bytes);
    EXPECT_EQ(r.stats.peak_bytes, r.stats.predicted_peak_bytes);
    if (pc.policy == "everything_saveable") {
      EXPECT_EQ(r.stats.flops_recomputed, 0);
    }
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Schedules of the block scan (engines/schedule; every:k is segment
// checkpointing): recompute under each equals eager bit for bit, and its
// measured peak is the predicted one.
TEST(TransformerStackTest, ScheduledBlockScansEqualEagerBitForBit) {
  const Problem& p = FindProblem("transformer_stack");
  Case c = MakeCase(p, ResolveParams(p, {{"L", 4}}, /*test_sizes=*/true));
  Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
  for (const char* spec : {"every:1", "every:2", "every:4", "sqrt", "revolve:1", "budget:8KiB"}) {
    SCOPED_TRACE(spec);
    Result r = MakeEngine("recompute")->ValueAndGrad(ApplySchedule(c.program, spec), c.inputs,
                                                     c.wrt);
    EXPECT_EQ(FirstBitDifference(eager, r).value_or("none"), "none");
    EXPECT_EQ(r.stats.peak_bytes, r.stats.predicted_peak_bytes);
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// PyTorch's checkpoint_every (seed 004's CheckpointedTransformer): one block
// in k is checkpointed, the others store everything, so 1/k of the blocks
// are recomputed; gradients equal eager's bit for bit.
TEST(TransformerStackTest, CheckpointEveryKRecomputesOneBlockInK) {
  const Problem& p = FindProblem("transformer_stack");
  Case c = MakeCase(p, ResolveParams(p, {{"L", 4}}, /*test_sizes=*/true));
  Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
  Result every1 = MakeEngine("recompute")->ValueAndGrad(c.program, c.inputs, c.wrt);
  for (int64_t k : {1, 2, 4}) {
    SCOPED_TRACE(k);
    Result r = MakeEngine("recompute")->ValueAndGrad(
        ApplySchedule(c.program, StrCat("checkpoint_every:", k)), c.inputs, c.wrt);
    EXPECT_EQ(FirstBitDifference(eager, r).value_or("none"), "none");
    EXPECT_EQ(r.stats.flops_recomputed, every1.stats.flops_recomputed / k);
    EXPECT_EQ(r.stats.peak_bytes, r.stats.predicted_peak_bytes);
  }
  EXPECT_THROW(ApplySchedule(c.program, "checkpoint_every:0"), Error);
}

}  // namespace
}  // namespace remat
