// The oracle is checked too. The float64 oracle (engines/oracle, a reverse
// mode of its own) against central finite differences, as
// torch.autograd.gradcheck does:
//
//   fd_i = (f(x + h e_i) - f(x - h e_i)) / 2h,  h = 1e-6 * max(1, |x_i|)
//   pass when |fd_i - g_i| <= atol + rtol * |g_i|,  atol = 1e-5, rtol = 1e-3
//
// (gradcheck's defaults). Truncation error is O(h^2 f''') and rounding error
// O(eps |f| / h) ~ 1e-10 |f| in float64, both far inside the tolerance.
// Inputs within h of a relu kink could fail; the seeds here have none (a
// failure there would name the entry).
//
// Which entries: every entry of every differentiated input, for every
// problem at its test sizes and three seeds; at larger sizes, in every
// matrix (the last two axes of an input), one entry in every row and one in
// every column (a wrong rule that touches one column or one row shows). The
// oracle then agrees with the old `reference` engine (eager's interpreter on
// float64 kernels: another implementation, rules.cc and engines/autodiff)
// within float64 rounding, on every problem and on random programs; and
// planting a wrong rule in the oracle is caught by this check.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/oracle/oracle.h"
#include "harness/conformance.h"
#include "harness/rounding_depth.h"
#include "harness/random_program.h"
#include "engines/api/tracer.h"
#include "problems/problem.h"
#include "problems/program_file.h"

namespace remat {
namespace {

constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-3;
constexpr uint64_t kSeeds[] = {1, 2, 3};

enum class Coverage {
  kEveryEntry,
  // In each matrix of an input (its last two axes, R x C, for every index of
  // a leading axis b): row i at column (i + b) mod C, and column j at row
  // (j + b) mod R. Inputs of rank 0 and 1: every entry.
  kEveryRowAndColumn,
  // What this test did before: at most 64 entries, stride n/64. On
  // scan_stack's (8,16,16) weights that is column 0 of every other row.
  kOldStride,
};

// The flat indices of `shape`'s entries that `coverage` checks, ascending.
std::vector<int64_t> Entries(const Shape& shape, Coverage coverage) {
  const int64_t n = shape.num_elements();
  std::vector<int64_t> out;
  if (coverage == Coverage::kOldStride) {
    const int64_t stride = std::max<int64_t>(1, n / 64);
    for (int64_t i = 0; i < n; i += stride) out.push_back(i);
    return out;
  }
  if (coverage == Coverage::kEveryEntry || shape.rank() < 2) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  const int64_t rows = shape.dim(shape.rank() - 2), cols = shape.dim(shape.rank() - 1);
  if (rows == 0 || cols == 0) return out;
  std::set<int64_t> picked;
  for (int64_t b = 0; b < n / (rows * cols); ++b) {
    for (int64_t i = 0; i < rows; ++i) picked.insert((b * rows + i) * cols + (i + b) % cols);
    for (int64_t j = 0; j < cols; ++j) picked.insert((b * rows + (j + b) % rows) * cols + j);
  }
  return std::vector<int64_t>(picked.begin(), picked.end());
}

struct Report {
  int64_t checked = 0;
  int64_t failed = 0;
  std::vector<std::string> failures;  // the first few
};

// The oracle's gradients of `program` at `args` (converted to f64) against
// central differences of its value, on the entries `coverage` picks. With
// `options`, the analytic gradients come from a run under them (a planted
// wrong rule); the differences always come from plain runs. Stops after
// `max_failed` failures.
Report Gradcheck(const std::string& what, const Program& program, const std::vector<Tensor>& args,
                 const std::vector<int>& wrt, Coverage coverage, const OracleOptions& options = {},
                 int64_t max_failed = 5) {
  std::vector<Tensor> x;
  for (const Tensor& t : args) x.push_back(t.dtype() == DType::kI32 ? t : Cast(t, DType::kF64));
  const Result base = OracleValueAndGrad(program, x, wrt, options);
  auto loss = [&] { return OracleValueAndGrad(program, x, {}).value.f64()[0]; };
  Report report;
  for (size_t j = 0; j < wrt.size() && report.failed < max_failed; ++j) {
    Tensor& input = x[wrt[j]];
    for (int64_t i : Entries(input.shape(), coverage)) {
      const double saved = input.f64()[i];
      const double h = 1e-6 * std::max(1.0, std::abs(saved));
      input.f64()[i] = saved + h;
      const double plus = loss();
      input.f64()[i] = saved - h;
      const double minus = loss();
      input.f64()[i] = saved;
      const double fd = (plus - minus) / (2 * h);
      const double g = base.grads[j].f64()[i];
      ++report.checked;
      if (!(std::abs(fd - g) <= kAtol + kRtol * std::abs(g))) {
        if (++report.failed <= 3) {
          report.failures.push_back(StrCat(what, ": d loss / d ", program.param_names[wrt[j]], "[",
                                           i, "]: oracle ", g, ", central difference ", fd));
        }
        if (report.failed >= max_failed) break;
      }
    }
  }
  return report;
}

std::vector<std::string> ProblemNames() {
  std::vector<std::string> names;
  for (const auto& p : AllProblems()) names.push_back(p->name());
  return names;
}

// A problem's parameters for central differences: its test sizes, with any
// tie built into it turned off (`ties`: moe's router). At a tie an op that
// chooses is not differentiable, and a difference across it measures the
// jump, not the gradient (the choice held fixed); the oracle's rule at the
// tie itself is checked against the reference engine below.
ParamValues Smooth(const Problem& problem, std::map<std::string, int64_t> overrides = {}) {
  for (const ParamSpec& spec : problem.params()) {
    if (spec.name == "ties") overrides["ties"] = 0;
  }
  return ResolveParams(problem, overrides, /*test_sizes=*/true);
}

// Sizes a few times the test sizes, for the row-and-column check.
ParamValues LargerSizes(const Problem& problem) {
  const std::string name = problem.name();
  std::map<std::string, int64_t> overrides;
  if (name == "layer_loss" || name == "dot_policy") overrides = {{"d", 64}, {"N", 32}};
  if (name == "scan_stack") overrides = {{"L", 12}, {"d", 48}, {"N", 16}};
  if (name == "mlp_chain") overrides = {{"L", 7}, {"d", 32}, {"N", 16}};
  if (name == "transformer_stack") {
    overrides = {{"L", 3}, {"D", 32}, {"H", 4}, {"F", 64}, {"S", 8}, {"B", 2}};
  }
  if (name == "sin_plain" || name == "sin_recursive") overrides = {{"D", 64}};
  if (name == "moe") overrides = {{"L", 2}, {"N", 16}, {"D", 16}, {"E", 5}, {"F", 8}};
  return Smooth(problem, overrides);
}

class GradcheckTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GradcheckTest, OracleMatchesCentralDifferencesOnEveryEntry) {
  const Problem& problem = FindProblem(GetParam());
  const auto start = std::chrono::steady_clock::now();
  int64_t checked = 0;
  for (uint64_t seed : kSeeds) {
    const Case c = MakeCase(problem, Smooth(problem), seed);
    const Report r = Gradcheck(StrCat(c.ToString(), " seed ", seed), c.program, c.inputs, c.wrt,
                               Coverage::kEveryEntry);
    EXPECT_EQ(r.failed, 0) << Join(r.failures, "\n");
    int64_t entries = 0;
    for (int w : c.wrt) entries += c.program.shapes[w].num_elements();
    EXPECT_EQ(r.checked, entries);
    checked += r.checked;
  }
  std::printf("gradcheck %s: every entry, %lld entries over seeds 1-3, %.2f s\n",
              problem.name().c_str(), static_cast<long long>(checked),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

TEST_P(GradcheckTest, OracleMatchesCentralDifferencesInEveryRowAndColumnAtLargerSizes) {
  const Problem& problem = FindProblem(GetParam());
  const auto start = std::chrono::steady_clock::now();
  int64_t checked = 0;
  std::string what;
  for (uint64_t seed : {4, 5}) {
    const Case c = MakeCase(problem, LargerSizes(problem), seed);
    const Report r = Gradcheck(StrCat(c.ToString(), " seed ", seed), c.program, c.inputs, c.wrt,
                               Coverage::kEveryRowAndColumn);
    EXPECT_EQ(r.failed, 0) << Join(r.failures, "\n");
    checked += r.checked;
    what = c.ToString();
  }
  std::printf("gradcheck %s: every row and column, %lld entries over seeds 4-5, %.2f s\n",
              what.c_str(), static_cast<long long>(checked),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Two implementations that share no code, agreeing to float64 rounding:
// per tensor, max |oracle - reference| <= 64 K 2^-53 max |oracle|, K the
// problem's reduction length (the f32 tolerance's form, at f64's epsilon).
// `worst` gets the largest max |oracle - reference| / max |oracle| seen.
std::optional<std::string> Disagreement(const std::string& what, const Result& oracle,
                                        const Result& reference, const std::vector<double>& k,
                                        const std::vector<std::string>& names, double* worst) {
  std::vector<const Tensor*> o = {&oracle.value}, r = {&reference.value};
  for (const Tensor& g : oracle.grads) o.push_back(&g);
  for (const Tensor& g : reference.grads) r.push_back(&g);
  if (o.size() != r.size()) return StrCat(what, ": ", o.size(), " outputs against ", r.size());
  for (size_t t = 0; t < o.size(); ++t) {
    double scale = 0;
    for (int64_t i = 0; i < o[t]->num_elements(); ++i) {
      scale = std::max(scale, std::abs(o[t]->at(i)));
    }
    const double tolerance = 64 * k[t] * std::ldexp(1.0, -53) * scale;
    for (int64_t i = 0; i < o[t]->num_elements(); ++i) {
      const double err = std::abs(o[t]->at(i) - r[t]->at(i));
      if (scale > 0) *worst = std::max(*worst, err / scale);
      if (!(err <= tolerance)) {
        return StrCat(what, ": ", names[t], "[", i, "]: oracle ", o[t]->at(i), ", reference ",
                      r[t]->at(i), ", tolerance ", tolerance);
      }
    }
  }
  return std::nullopt;
}

TEST_P(GradcheckTest, OracleAgreesWithTheOldReferenceEngine) {
  const Problem& problem = FindProblem(GetParam());
  std::unique_ptr<Engine> reference = MakeEngine("reference");
  double worst = 0;
  for (const ParamValues& params :
       {ResolveParams(problem, {}, /*test_sizes=*/true), LargerSizes(problem)}) {
    for (uint64_t seed : kSeeds) {
      const Case c = MakeCase(problem, params, seed);
      const Result o = OracleValueAndGrad(c.program, c.inputs, c.wrt);
      const Result r = reference->ValueAndGrad(c.program, c.inputs, c.wrt);
      const std::optional<std::string> bad =
          Disagreement(StrCat(c.ToString(), " seed ", seed), o, r, RoundingDepths(c.program, c.wrt),
                       OutputNames(c), &worst);
      EXPECT_FALSE(bad.has_value()) << *bad;
    }
  }
  std::printf("oracle vs reference on %s: max |difference| / max |oracle| = %.2g\n",
              problem.name().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Problems, GradcheckTest, ::testing::ValuesIn(ProblemNames()),
                         [](const auto& info) { return info.param; });

TEST(OracleAgainstReference, RandomProgramsAgree) {
  std::unique_ptr<Engine> reference = MakeEngine("reference");
  int compared = 0;
  double worst = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    const RandomCase c = MakeRandomCase(seed);
    const Result o = OracleValueAndGrad(c.program, c.inputs, c.wrt);
    const Result r = reference->ValueAndGrad(c.program, c.inputs, c.wrt);
    std::vector<std::string> names = {"value"};
    for (int w : c.wrt) names.push_back("grad " + c.program.param_names[w]);
    const std::optional<std::string> bad = Disagreement(StrCat("random program, seed ", seed), o, r,
                                                        RoundingDepths(c.program, c.wrt), names,
                                                        &worst);
    EXPECT_FALSE(bad.has_value()) << *bad << "\n" << ToString(c.program, "f64");
    ++compared;
  }
  EXPECT_EQ(compared, 400);
  std::printf(
      "oracle vs reference on %d random programs: max |difference| / max |oracle| = "
      "%.2g\n",
      compared, worst);
}

// ---------------------------------------------------------------------------
// A wrong rule is caught. Each rule of the oracle in turn is made wrong:
// every contribution it makes gets 1% of its largest magnitude (plus 0.01)
// added to its last element (Where::kLastElement), or to every element
// (kEveryElement). Every such mutant of every op kind a problem uses fails
// the every-entry check: the every-element one, because a single element can
// land where nothing downstream reads it (a dead relu's input: resnet's
// global_avg_pool mutant at its last element went unseen at the test's
// inputs); the coverage test below plants the last-element one, the
// hardest to see.
enum class Where { kLastElement, kEveryElement };

// With `planted`, counts the contributions it changed.
OracleOptions PlantWrongRule(OpKind kind, int only_input = -1, Where where = Where::kLastElement,
                             int* planted = nullptr) {
  OracleOptions options;
  options.mutate_contribution = [kind, only_input, where, planted](const Op& op, int input, Tensor& c) {
    if (op.kind != kind || (only_input >= 0 && input != only_input) || c.num_elements() == 0) {
      return;
    }
    if (planted != nullptr) ++*planted;
    double largest = 0;
    for (int64_t i = 0; i < c.num_elements(); ++i) largest = std::max(largest, std::abs(c.at(i)));
    const int64_t first = where == Where::kEveryElement ? 0 : c.num_elements() - 1;
    for (int64_t i = first; i < c.num_elements(); ++i) c.f64()[i] += 0.01 * (1 + largest);
  };
  return options;
}

void CollectKinds(const Program& p, std::set<OpKind>* kinds) {
  for (const Op& op : p.ops) {
    kinds->insert(op.kind);
    if (op.body) CollectKinds(*op.body, kinds);
  }
}

TEST_P(GradcheckTest, AWrongRuleOfAnyOpItUsesIsCaught) {
  const Problem& problem = FindProblem(GetParam());
  const Case c = MakeCase(problem, Smooth(problem));
  std::set<OpKind> kinds;
  CollectKinds(c.program, &kinds);
  kinds.erase(OpKind::kCheckpoint);  // inlined: no rule of its own
  for (OpKind kind : kinds) {
    // For a scan, the rule that sends a step's cotangent to its slice.
    int planted = 0;
    const Report r = Gradcheck(c.ToString(), c.program, c.inputs, c.wrt, Coverage::kEveryEntry,
                               PlantWrongRule(kind, -1, Where::kEveryElement, &planted),
                               /*max_failed=*/1);
    // A rule no cotangent reaches is not in play: ops whose values only
    // feed state ops (resnet's running statistics) have no bearing on the
    // loss. Every other rule, wrong, must be caught.
    if (planted == 0) continue;
    EXPECT_GT(r.failed, 0) << c.ToString() << ": a wrong " << OpKindName(kind)
                           << " rule passed gradcheck";
  }
}

// The wrong rule of the issue that made this check necessary: a matmul whose
// weight cotangent is wrong in its last element. On scan_stack the old
// stride-n/64 sample (column 0 of every other row) passes it; every entry,
// and every row and column, catch it.
TEST(GradcheckCoverage, TheOldSampleMissedAWrongWeightRule) {
  const Problem& problem = FindProblem("scan_stack");
  const Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  const OracleOptions wrong = PlantWrongRule(OpKind::kMatMul, /*only_input=*/1);
  EXPECT_EQ(Gradcheck("old", c.program, c.inputs, c.wrt, Coverage::kOldStride, wrong).failed, 0);
  EXPECT_GT(Gradcheck("every entry", c.program, c.inputs, c.wrt, Coverage::kEveryEntry, wrong,
                      /*max_failed=*/1)
                .failed,
            0);
  EXPECT_GT(Gradcheck("rows and columns", c.program, c.inputs, c.wrt, Coverage::kEveryRowAndColumn,
                      wrong, /*max_failed=*/1)
                .failed,
            0);
}

TEST(GradcheckCoverage, EveryRowAndColumnOfEveryMatrixIsVisited) {
  for (const Shape& shape : {Shape({5, 3}), Shape({3, 5}), Shape({4, 7, 2}), Shape({1, 1})}) {
    const int64_t rows = shape.dim(shape.rank() - 2), cols = shape.dim(shape.rank() - 1);
    std::set<std::pair<int64_t, int64_t>> seen_rows, seen_cols;  // (matrix, row or column)
    const std::vector<int64_t> entries = Entries(shape, Coverage::kEveryRowAndColumn);
    for (int64_t i : entries) {
      seen_rows.insert({i / (rows * cols), i / cols % rows});
      seen_cols.insert({i / (rows * cols), i % cols});
    }
    const int64_t matrices = shape.num_elements() / (rows * cols);
    EXPECT_EQ(static_cast<int64_t>(seen_rows.size()), matrices * rows) << shape.ToString();
    EXPECT_EQ(static_cast<int64_t>(seen_cols.size()), matrices * cols) << shape.ToString();
    EXPECT_LE(static_cast<int64_t>(entries.size()), matrices * (rows + cols)) << shape.ToString();
  }
}

// ---------------------------------------------------------------------------
// bias_add, which no problem uses (an exporter's MLPs and transformer blocks
// do): a biased layer in a checkpoint region, a biased output layer, and a
// bias over the last axis of a rank-3 value.

Program BiasProgram() {
  return Trace("bias_mlp",
               {{"w1", Shape({8, 12})}, {"b1", Shape({12})}, {"w2", Shape({12, 8})},
                {"b2", Shape({8})}, {"b3", Shape({4})}, {"x", Shape({6, 8})}},
               [](const std::vector<Var>& a) {
                 auto layer = [](Var h, Var w, Var b) { return gelu(bias_add(matmul(h, w), b)); };
                 Var h = checkpoint(layer, Policy(PolicyKind::kDotsSaveable), "layer")(a[5], a[0],
                                                                                       a[1]);
                 Var y = bias_add(matmul(h, a[2]), a[3]);
                 Var heads = bias_add(split_heads(y, 2, 2), a[4]);  // (4, 3, 4) + (4)
                 return sum(square(heads));
               });
}

Case BiasCase(uint64_t seed) {
  static const ProgramFileProblem* problem = new ProgramFileProblem(BiasProgram(), "bias_mlp");
  return MakeCase(*problem, {}, seed);
}

TEST(GradcheckBiasAdd, OracleMatchesCentralDifferencesAndAWrongRuleIsCaught) {
  for (uint64_t seed : kSeeds) {
    const Case c = BiasCase(seed);
    const Report r = Gradcheck(c.ToString(), c.program, c.inputs, c.wrt, Coverage::kEveryEntry);
    EXPECT_EQ(r.failed, 0) << Join(r.failures, "\n");
    EXPECT_EQ(r.checked, 8 * 12 + 12 + 12 * 8 + 8 + 4 + 6 * 8);
  }
  const Case c = BiasCase(1);
  for (int input : {0, 1}) {
    const Report r = Gradcheck(c.ToString(), c.program, c.inputs, c.wrt, Coverage::kEveryEntry,
                               PlantWrongRule(OpKind::kBiasAdd, input), /*max_failed=*/1);
    EXPECT_GT(r.failed, 0) << "a wrong bias_add rule for input " << input << " passed gradcheck";
  }
}

TEST(GradcheckBiasAdd, EnginesAgreeWithTheOracleAndEagerBitForBit) {
  const Case c = BiasCase(2);
  const Result oracle = OracleValueAndGrad(c.program, c.inputs, c.wrt);
  const Result reference = MakeEngine("reference")->ValueAndGrad(c.program, c.inputs, c.wrt);
  double worst = 0;
  std::vector<std::string> names = OutputNames(c);
  const std::optional<std::string> bad =
      Disagreement(c.ToString(), oracle, reference, RoundingDepths(c.program, c.wrt), names,
                   &worst);
  EXPECT_FALSE(bad.has_value()) << *bad;
  const Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
  const Agreement agreement = CompareWithOracle(c, eager, oracle);
  EXPECT_TRUE(agreement.ok) << agreement.detail;
  for (const char* engine : {"recompute", "dtr"}) {
    const Result r = MakeEngine(engine)->ValueAndGrad(c.program, c.inputs, c.wrt);
    const std::optional<std::string> difference = FirstBitDifference(eager, r);
    EXPECT_FALSE(difference.has_value()) << engine << ": " << *difference;
  }
  // Under a policy that saves nothing, recompute recomputes the biased layer.
  const Program recomputing = ApplyPolicy(c.program, Policy());
  const Result r = MakeEngine("recompute")->ValueAndGrad(recomputing, c.inputs, c.wrt);
  EXPECT_GT(r.stats.flops_recomputed, 0);
  EXPECT_FALSE(FirstBitDifference(eager, r).has_value());
}

}  // namespace
}  // namespace remat
