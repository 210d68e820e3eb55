// Every op the OpDef registry defines (engines/api/op_def.h) has every piece
// an op needs, and the pieces agree. For each op, on a program built from
// its OpDef's example alone (op(x...) * r, summed, so that no gradient is a
// constant):
//   shape rule     OutputShape accepts the example
//   program text   PrintProgram / ParseProgram round trip, op by name
//   FLOPs          the OpDef's count equals what both kernel tables count
//   oneDNN kernel  eager (f32 on oneDNN) runs it and agrees with the oracle
//   reference      the reference engine (f64 loops) runs it and agrees
//   every engine   on eager's kernels: eager's bits, inline and recomputed
//   oracle rule    the float64 oracle (its own rules) runs it
//   gradcheck      the oracle's gradient agrees with central differences
//   rounding depth the suite's tolerance model counts it
//   fuzzer draw    random programs (harness/random_program.h) draw it
// and every kernel of the table has an implementation on both backends.
// A failure names the op and the missing or disagreeing piece, so that an op
// added half-way fails here, not in some engine's run later.
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/op_def.h"
#include "engines/api/op_shape.h"
#include "engines/api/program_text.h"
#include "engines/api/registry.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/reference/reference_kernels.h"
#include "gtest/gtest.h"
#include "harness/conformance.h"
#include "harness/random_program.h"
#include "harness/rounding_depth.h"
#include "problems/program_file.h"

namespace remat {
namespace {

// op(x0, ..., xn-1) * r, summed: parameters x0.. (the example's shapes) and
// r (the op's output shape); gradients wanted for every x.
Program OneOpProgram(const OpDef& def) {
  Op op;
  op.kind = def.kind;
  op.site = StrCat("harness/op_completeness_test.cc (", def.name, ")");
  const std::vector<Shape> in = def.example(op);
  Program p;
  p.name = StrCat("op_", def.name);
  for (size_t i = 0; i < in.size(); ++i) {
    p.shapes.push_back(in[i]);
    p.dtypes.push_back((def.int_inputs >> i) & 1 ? DType::kI32 : DType::kF32);
    p.param_names.push_back(StrCat("x", i));
    op.inputs.push_back(static_cast<int>(i));
  }
  const Shape out = OutputShape(op, in);
  const int r = static_cast<int>(p.shapes.size());
  p.shapes.push_back(out);
  p.param_names.push_back("r");
  op.output = static_cast<int>(p.shapes.size());
  p.shapes.push_back(out);
  p.ops.push_back(op);
  Op mul;
  mul.kind = OpKind::kMul;
  mul.inputs = {op.output, r};
  mul.output = static_cast<int>(p.shapes.size());
  mul.site = op.site;
  p.shapes.push_back(out);
  p.ops.push_back(mul);
  Op sum;
  sum.kind = OpKind::kSum;
  sum.inputs = {mul.output};
  sum.output = static_cast<int>(p.shapes.size());
  sum.site = op.site;
  p.shapes.push_back(Shape());
  p.ops.push_back(sum);
  p.output = sum.output;
  return p;
}

class OpCompletenessTest : public ::testing::TestWithParam<OpKind> {};

TEST_P(OpCompletenessTest, HasEveryPiece) {
  const OpDef& def = Def(GetParam());
  SCOPED_TRACE(StrCat("op ", def.name));
  // Every piece of the definition is there (a field left out of an entry
  // is null).
  const std::pair<const char*, bool> pieces[] = {
      {"shape rule", def.shape != nullptr},
      {"saves rule", def.saves != nullptr},
      {"forward rule", def.forward != nullptr},
      {"backward rule", def.backward != nullptr},
      {"FLOP count", def.flops != nullptr},
      {"forward rounding depth", def.forward_depth != nullptr},
      {"backward rounding depth", def.backward_depth != nullptr},
      {"example", def.example != nullptr},
  };
  bool whole = def.name != nullptr && def.arity > 0;
  for (const auto& [piece, present] : pieces) {
    EXPECT_TRUE(present) << def.name << ": its OpDef has no " << piece;
    whole = whole && present;
  }
  if (!whole) return;
  Program program;
  try {
    program = OneOpProgram(def);
  } catch (const Error& e) {
    FAIL() << def.name << ": shape rule rejects its own example: " << e.what();
  }
  const int n = def.arity;

  // Program text: printed, read back by name, printed again the same.
  try {
    const std::string text = PrintProgram(program);
    const Program back = ParseProgram(text, "op_completeness_test");
    EXPECT_EQ(PrintProgram(back), text) << def.name << ": program text does not round-trip";
  } catch (const Error& e) {
    ADD_FAILURE() << def.name << ": program text: " << e.what();
  }

  // FLOPs: the OpDef's model is what both kernel tables count.
  {
    std::vector<Shape> in(program.shapes.begin(), program.shapes.begin() + n);
    const int64_t want = def.flops(in, program.shapes[program.ops[0].output]);
    OneDnnKernels onednn;
    ReferenceKernels reference;
    for (Kernels* k : std::vector<Kernels*>{&onednn, &reference}) {
      std::vector<Tensor> args;
      for (size_t i = 0; i < in.size(); ++i) {
        args.push_back(Tensor::Zeros((def.int_inputs >> i) & 1 ? DType::kI32 : k->dtype(), in[i]));
      }
      try {
        k->reset_flops();
        def.forward(*k, program.ops[0], args);
        EXPECT_EQ(k->flops(), want) << def.name << ": the " << k->name()
                                    << " kernels count other FLOPs than the OpDef's model";
      } catch (const Error& e) {
        ADD_FAILURE() << def.name << ": no " << k->name() << " kernel for its forward: " << e.what();
      }
    }
  }

  ProgramFileProblem problem(program, "op_completeness_test");
  Case c = MakeCase(problem, {}, /*seed=*/7);
  // Integer inputs within the op's bound (ids < V), from the seeded draw.
  for (int j = 0; j < n; ++j) {
    if (((def.int_inputs >> j) & 1) == 0 || def.int_bound == nullptr) continue;
    const std::vector<Shape> shapes(program.shapes.begin(), program.shapes.begin() + n);
    const int64_t bound = def.int_bound(shapes, j);
    for (int64_t i = 0; i < c.inputs[j].num_elements(); ++i) {
      c.inputs[j].i32()[i] = static_cast<int32_t>(c.inputs[j].i32()[i] % bound);
    }
  }
  if (def.positive_inputs) {  // the op's domain: |x| + 0.5, exact in f32
    for (int i : c.wrt) {
      float* x = c.inputs[i].f32();
      for (int64_t j = 0; j < c.inputs[i].num_elements(); ++j) x[j] = std::abs(x[j]) + 0.5f;
    }
  }
  Result oracle;
  try {
    oracle = MakeEngine("oracle")->ValueAndGrad(c.program, c.inputs, c.wrt);
  } catch (const Error& e) {
    FAIL() << def.name << ": no oracle rule: " << e.what();
  }

  for (const char* engine : {"eager", "reference"}) {
    try {
      const Result got = MakeEngine(engine)->ValueAndGrad(c.program, c.inputs, c.wrt);
      const Agreement a = CompareWithOracle(
          c, got, oracle, std::string(engine) == "eager" ? DType::kF32 : DType::kF64);
      EXPECT_TRUE(a.ok) << def.name << ": " << engine << " (" << (std::string(engine) == "eager"
                                                                      ? "oneDNN kernels"
                                                                      : "reference kernels")
                        << ") disagrees with the oracle: " << a.detail;
    } catch (const Error& e) {
      ADD_FAILURE() << def.name << ": " << engine << " cannot run it: " << e.what();
    }
  }

  // Every engine on eager's kernels gives eager's bits, on the program as
  // it is and inside a checkpoint region that saves nothing (the op then
  // runs again in the backward pass: recomputed, compiled, evicted).
  {
    const Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
    const Program wrapped =
        WrapInCheckpoint(c.program, Policy::Parse("nothing_saveable"), "op_completeness_test");
    for (const std::string& name : EngineNames()) {
      std::unique_ptr<Engine> engine = MakeEngine(name);
      if (engine->kernels() != "onednn") continue;
      for (const Program* p : std::vector<const Program*>{&c.program, &wrapped}) {
        try {
          const Result got = engine->ValueAndGrad(*p, c.inputs, c.wrt);
          const std::optional<std::string> diff = FirstBitDifference(eager, got);
          EXPECT_FALSE(diff.has_value())
              << def.name << ": " << name << (p == &wrapped ? " (in a checkpoint region)" : "")
              << " differs from eager's bits in " << *diff;
        } catch (const Error& e) {
          ADD_FAILURE() << def.name << ": " << name << " cannot run it"
                        << (p == &wrapped ? " in a checkpoint region: " : ": ") << e.what();
        }
      }
    }
  }

  // Gradcheck of the oracle: central differences in the f32 inputs, each
  // step the difference the two rounded points really are.
  double largest = 0;
  for (const Tensor& g : oracle.grads) {
    for (int64_t j = 0; j < g.num_elements(); ++j) largest = std::max(largest, std::abs(g.f64()[j]));
  }
  for (const std::string& d : CentralDifferenceDisagreements(
           c, oracle, 1e-2f, 5, [&](double) { return 1e-3 * std::max(1.0, largest); })) {
    ADD_FAILURE() << def.name << ": the oracle's gradient disagrees with central differences: " << d;
  }

  // The suite's tolerance model counts the op.
  try {
    const std::vector<double> depths = RoundingDepths(c.program, c.wrt);
    ASSERT_EQ(depths.size(), c.wrt.size() + 1) << def.name;
    for (double k : depths) EXPECT_TRUE(std::isfinite(k) && k >= 0) << def.name << ": rounding depth " << k;
  } catch (const Error& e) {
    ADD_FAILURE() << def.name << ": no rounding depth: " << e.what();
  }
}

// How many of the random programs of seeds 1..kDrawSeeds use each op, at
// any depth (regions, scans and chains included).
constexpr uint64_t kDrawSeeds = 300;

void CountKinds(const Program& p, std::map<OpKind, int>& seen) {
  for (const Op& op : p.ops) {
    ++seen[op.kind];
    if (op.body) CountKinds(*op.body, seen);
  }
}

const std::map<OpKind, int>& DrawnKinds() {
  static const std::map<OpKind, int> seen = [] {
    std::map<OpKind, int> out;
    for (uint64_t seed = 1; seed <= kDrawSeeds; ++seed) {
      std::map<OpKind, int> once;
      CountKinds(MakeRandomCase(seed).program, once);
      for (const auto& [kind, n] : once) ++out[kind];
    }
    return out;
  }();
  return seen;
}

// The conformance fuzzers (every engine's fuzz test, dtr's and the budget's
// random-program tests) run what random programs contain: an op they never
// draw is never fuzzed.
TEST_P(OpCompletenessTest, RandomProgramsDrawIt) {
  const OpDef& def = Def(GetParam());
  const auto it = DrawnKinds().find(def.kind);
  EXPECT_TRUE(it != DrawnKinds().end() && it->second > 0)
      << def.name << ": no random program of seeds 1.." << kDrawSeeds
      << " draws it (harness/random_program.cc draws the registry's ops whose operands share "
         "one shape or its last dimension by one rule; any other op needs a rule there)";
}

std::vector<OpKind> AllPrimitives() {
  std::vector<OpKind> out;
  for (const OpDef& def : OpDefs()) out.push_back(def.kind);
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpCompletenessTest, ::testing::ValuesIn(AllPrimitives()),
                         [](const ::testing::TestParamInfo<OpKind>& info) {
                           return std::string(OpKindName(info.param));
                         });

// Every kernel of the table has an implementation on both backends.
TEST(KernelTableTest, BothBackendsImplementEveryKernel) {
  for (KernelOp op : TableKernels()) {
    const KernelDef& def = TableKernel(op);
    EXPECT_NE(KernelImpls<OneDnnKernels>::Get().Find(def.name), nullptr)
        << "kernel " << def.name << ": no oneDNN implementation (REMAT_KERNEL_IMPL in "
        << "engines/onednn/onednn_kernels.cc)";
    EXPECT_NE(KernelImpls<ReferenceKernels>::Get().Find(def.name), nullptr)
        << "kernel " << def.name << ": no reference implementation (REMAT_KERNEL_IMPL in "
        << "engines/reference/reference_kernels.cc)";
  }
}

TEST(OpRegistryTest, NamesAreUniqueAndFindable) {
  for (const OpDef& def : OpDefs()) {
    const OpDef* found = FindOpDef(def.name);
    ASSERT_NE(found, nullptr) << def.name;
    EXPECT_EQ(found->kind, def.kind) << def.name << " names two ops";
    EXPECT_STREQ(OpKindName(def.kind), def.name);
  }
  EXPECT_EQ(FindOpDef("checkpoint"), nullptr);
  EXPECT_EQ(FindOpDef("no_such_op"), nullptr);
  EXPECT_THROW(Def(OpKind::kScan), Error);
}

}  // namespace
}  // namespace remat
