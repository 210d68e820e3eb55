#include "engines/dtr/dtr_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "harness/conformance.h"
#include "harness/random_program.h"
#include "problems/problem.h"

namespace remat {
namespace {

// Seeded f32 values in [-1, 1).
Tensor Seeded(const Shape& shape, uint64_t seed) {
  std::vector<float> v(shape.num_elements());
  uint64_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>((s >> 40) * 0x1.0p-24 * 2 - 1);
  }
  return Tensor::FromF32(shape, v);
}

std::vector<Tensor> SeededArgs(const Program& p) {
  std::vector<Tensor> args;
  for (int i = 0; i < p.num_params(); ++i) args.push_back(Seeded(p.shapes[i], i + 1));
  return args;
}

Result RunUnder(Engine& engine, const Program& p, const std::vector<Tensor>& args,
                const std::vector<int>& wrt, int64_t cap, bool record = false) {
  RunOptions options;
  options.memory_cap_bytes = cap;
  options.record_schedule = record;
  return engine.ValueAndGrad(p, args, wrt, options);
}

int CountPrefix(const std::vector<std::string>& lines, const std::string& prefix) {
  return static_cast<int>(std::count_if(
      lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
}

TEST(DtrEngineTest, RegistersBothHeuristicsOnEagersKernels) {
  for (const char* name : {"dtr", "dtr_eq"}) {
    std::unique_ptr<Engine> e = MakeEngine(name);
    EXPECT_EQ(e->name(), name);
    EXPECT_EQ(e->kernels(), MakeEngine("eager")->kernels());
    EXPECT_TRUE(e->honours_memory_cap());
    EXPECT_FALSE(e->honours_checkpoints());
  }
  EXPECT_FALSE(MakeEngine("eager")->honours_memory_cap());
}

// The heuristic in a program: an expensive and a cheap value of one size,
// each read by the backward pass (relu saves its input, square too), x not
// differentiated, every tensor 128x128 floats (T = 64 KiB):
//
//   tick 1  m = x @ w     2*128^3 = 4194304 FLOPs
//   tick 2  s = sin(w)    16384 FLOPs
//   tick 3  r = relu(m)
//   tick 4  q = square(s)
//   tick 5  a = r + q;  loss = sum(a)
//
// Live at add: x, w, m, s, r, q and a, 7T, the run's peak (the backward
// holds at most 6T and a matmul's scratchpad). One byte less and add must
// evict m or s (its inputs r and q are pinned). m was last read at tick 3,
// s at tick 4, so at tick 5 their staleness is 3 and 2:
//   h(m) = 4194304 / (65536 * 3) = 21.3,   h(s) = 16384 / (65536 * 2) = 0.125
// (neither has an evicted neighbour), so s goes, and square's backward
// recomputes it: 16384 FLOPs, once; m is never recomputed.
TEST(DtrEngineTest, EvictsTheCheapValueAndRecomputesOnlyIt) {
  const Program p = Trace("cheap_and_dear", {{"x", Shape({128, 128})}, {"w", Shape({128, 128})}},
                          [](const std::vector<Var>& in) {
                            Var m = matmul(in[0], in[1]);
                            Var s = sin(in[1]);
                            return sum(add(relu(m), square(s)));
                          });
  const std::vector<Tensor> args = SeededArgs(p);
  const std::vector<int> wrt = {1};
  const int64_t tensor = 128 * 128 * 4;
  for (const char* name : {"dtr", "dtr_eq"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Engine> dtr = MakeEngine(name);
    const Result eager = MakeEngine("eager")->ValueAndGrad(p, args, wrt);
    const Result free = RunUnder(*dtr, p, args, wrt, 0);
    EXPECT_FALSE(FirstBitDifference(eager, free).has_value());
    EXPECT_EQ(free.stats.flops_recomputed, 0);
    ASSERT_EQ(free.stats.peak_bytes, 7 * tensor) << free.stats.peak_site;
    const Result capped = RunUnder(*dtr, p, args, wrt, free.stats.peak_bytes - 1, true);
    EXPECT_FALSE(FirstBitDifference(eager, capped).has_value());
    EXPECT_LT(capped.stats.peak_bytes, 7 * tensor);
    EXPECT_EQ(CountPrefix(capped.schedule, "recompute sin"), 1)
        << ::testing::PrintToString(capped.schedule);
    EXPECT_EQ(CountPrefix(capped.schedule, "recompute"), 1);
    EXPECT_EQ(capped.stats.flops_recomputed, 128 * 128);
  }
}

// A chain of sins whose backward reads each one's input: under the smallest
// cap the values are evicted as soon as the forward pass is past them, and
// the backward's reads recompute runs of them, each from its nearest
// resident ancestor, parents first.
TEST(DtrEngineTest, RecomputesEvictedParentsRecursively) {
  const Program p = Trace("sins", {{"x", Shape({8, 8})}}, [](const std::vector<Var>& in) {
    Var y = in[0];
    for (int i = 0; i < 12; ++i) y = sin(y);
    return sum(y);
  });
  const std::vector<Tensor> args = SeededArgs(p);
  const Result eager = MakeEngine("eager")->ValueAndGrad(p, args, {0});
  DtrEngine dtr;
  const int64_t smallest = dtr.SmallestFeasibleCap(p, args, {0});
  const Result r = RunUnder(dtr, p, args, {0}, smallest, true);
  EXPECT_FALSE(FirstBitDifference(eager, r).has_value());
  EXPECT_LE(r.stats.peak_bytes, smallest);
  // The longest run of recomputations between two backward ops: each
  // recomputed sin's parent was evicted too, up to the argument.
  int longest = 0, run = 0;
  for (const std::string& line : r.schedule) {
    run = line.rfind("recompute", 0) == 0 ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_GE(longest, 3) << ::testing::PrintToString(r.schedule);
  EXPECT_GT(r.stats.flops_recomputed, r.stats.flops_forward);  // little memory, much work
  // One byte less does not run, and the error says which cap did.
  try {
    RunUnder(dtr, p, args, {0}, smallest - 1);
    ADD_FAILURE() << "ran under " << smallest - 1 << " bytes";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(StrCat("the smallest cap that worked is ", smallest, " bytes")),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("program sins"), std::string::npos) << m;
    EXPECT_NE(m.find("--memory-cap"), std::string::npos) << m;
  }
}

// scan_stack (a scan) and mlp_chain (a loop of checkpointed blocks) from the
// smallest cap that works to eager's peak: eager's bits, peak <= cap.
TEST(DtrEngineTest, ScanStackAndMlpChainAtSeveralCaps) {
  const std::vector<std::pair<std::string, ParamValues>> cases = {
      {"scan_stack", {{"L", 8}, {"d", 16}, {"N", 8}}},
      {"scan_stack", {{"L", 24}, {"d", 32}, {"N", 16}}},
      {"mlp_chain", {{"L", 7}, {"d", 16}, {"N", 8}}},
      {"mlp_chain", {{"L", 16}, {"d", 32}, {"N", 32}}},
  };
  for (const auto& [problem, params] : cases) {
    const Case c = MakeCase(FindProblem(problem), params);
    const Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
    for (dtr::Heuristic h : {dtr::Heuristic::kDtr, dtr::Heuristic::kDtrEqClass}) {
      DtrEngine dtr(h);
      const int64_t smallest = dtr.SmallestFeasibleCap(c.program, c.inputs, c.wrt);
      const int64_t peak = eager.stats.peak_bytes;
      ASSERT_LT(smallest, peak) << c.ToString();
      for (int quarter = 0; quarter <= 4; ++quarter) {
        const int64_t cap = smallest + (peak - smallest) * quarter / 4;
        SCOPED_TRACE(StrCat(dtr.name(), " on ", c.ToString(), " under ", cap, " bytes"));
        std::shared_ptr<MemoryTracker> tracker;
        {
          const Result r = RunUnder(dtr, c.program, c.inputs, c.wrt, cap);
          tracker = r.tracker;
          const std::optional<std::string> diff = FirstBitDifference(eager, r);
          EXPECT_FALSE(diff.has_value()) << *diff;
          EXPECT_LE(r.stats.peak_bytes, cap);
          if (quarter < 3) {
            EXPECT_GT(r.stats.flops_recomputed, 0);
          }
          EXPECT_EQ(r.stats.predicted_peak_bytes, -1);
        }
        EXPECT_EQ(tracker->live_bytes(), 0);
      }
    }
  }
}

// The paper's claim for a feedforward chain of N uniform layers: memory
// O(sqrt N) for O(N) recomputation. scan_stack with d = N = 16: a layer's
// activations are two 1 KiB tensors (its matmul's output, which relu saves,
// and relu's output, which the next matmul saves), a = 2 KiB. The cap is
// what the run needs besides activations (arguments, gradients, scratchpad:
// their high-water marks without a cap) plus sqrt(L) layers' activations.
// Measured on this machine (recomputed FLOPs over forward FLOPs; the same
// for dtr and dtr_eq):
//   L      16     64     256    1024
//   ratio  0.45   0.74   0.88   0.97
// so at most one more forward pass: O(N). The same runs with the cap at the
// smallest that works (O(1) activations) recompute 7.5, 31, 127 and 511
// forward passes' worth, L/2: quadratic.
TEST(DtrEngineTest, FeedforwardChainRunsInSqrtMemoryWithLinearRecomputation) {
  for (const int64_t layers : {16, 64, 256, 1024}) {
    const Case c = MakeCase(FindProblem("scan_stack"), {{"L", layers}, {"d", 16}, {"N", 16}});
    const Result eager = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
    DtrEngine dtr;
    const Result free = RunUnder(dtr, c.program, c.inputs, c.wrt, 0);
    const auto& hw = free.stats.high_water_bytes_by_category;
    const int64_t besides = hw[static_cast<int>(Category::kInputs)] +
                            hw[static_cast<int>(Category::kGradients)] +
                            hw[static_cast<int>(Category::kScratchpad)];
    const int64_t layer = 2 * 16 * 16 * 4;
    const int64_t cap = besides + static_cast<int64_t>(std::sqrt(layers) * layer);
    const Result r = RunUnder(dtr, c.program, c.inputs, c.wrt, cap);
    SCOPED_TRACE(StrCat("L=", layers, ", cap ", cap, " = ", besides, " + sqrt(L) x ", layer));
    EXPECT_FALSE(FirstBitDifference(eager, r).has_value());
    EXPECT_LE(r.stats.peak_bytes, cap);
    EXPECT_GT(r.stats.flops_recomputed, 0);
    EXPECT_LE(r.stats.flops_recomputed, r.stats.flops_forward);
  }
}

// Random programs (nested checkpoint regions under policies, scans, every
// op) at the smallest cap that works and halfway to the uncapped peak:
// eager's bits, peak <= cap.
TEST(DtrEngineTest, RandomProgramsKeepEagersBitsUnderCaps) {
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  int recomputing = 0, capped = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    const RandomCase rc = MakeRandomCase(seed);
    const Result base = eager->ValueAndGrad(rc.program, rc.inputs, rc.wrt);
    DtrEngine dtr(seed % 2 ? dtr::Heuristic::kDtr : dtr::Heuristic::kDtrEqClass);
    const Result free = RunUnder(dtr, rc.program, rc.inputs, rc.wrt, 0);
    ASSERT_FALSE(FirstBitDifference(base, free).has_value()) << ReplayCommand(rc);
    const int64_t smallest = dtr.SmallestFeasibleCap(rc.program, rc.inputs, rc.wrt);
    const int64_t peak = free.stats.peak_bytes;
    // Every cap from the smallest that worked up runs (the greedy choices
    // could in principle make a larger cap fail; they do not here).
    for (const int64_t cap : {smallest, smallest + (peak - smallest) / 4,
                              (smallest + peak) / 2, peak - (peak - smallest) / 4, peak - 1}) {
      if (cap < smallest) continue;  // peak - 1, when nothing can be evicted
      const Result r = RunUnder(dtr, rc.program, rc.inputs, rc.wrt, cap);
      const std::optional<std::string> diff = FirstBitDifference(base, r);
      ASSERT_FALSE(diff.has_value()) << dtr.name() << " under " << cap << " bytes: the " << *diff
                                     << " differs from eager's; " << ReplayCommand(rc);
      ASSERT_LE(r.stats.peak_bytes, cap) << ReplayCommand(rc);
      recomputing += r.stats.flops_recomputed > 0;
      ++capped;
    }
  }
  std::printf("%d of %d capped runs recomputed\n", recomputing, capped);
  // The caps bite: a good share of the bit comparisons above are of values
  // dtr recomputed, not only of stored ones. Not every cap below the
  // uncapped peak needs recomputation (the uncapped run holds some values
  // longer than they are needed, and a cap makes dtr drop them), so the share
  // is a coverage floor, not a rule: 50% to 55% on programs drawn since the
  // generator takes every registry op (AVX-512 and AVX2 alike); a quarter
  // leaves room for the generator to change again.
  EXPECT_GT(recomputing, capped / 4);
}

// A dry run (plan_only, arguments without data) makes the same choices as
// the real run: the same peak, at the same site, the same recomputation.
TEST(DtrEngineTest, PlanOnlyMakesTheSameChoicesWithoutData) {
  const Case c = MakeCase(FindProblem("transformer_stack"),
                          ResolveParams(FindProblem("transformer_stack"), {}, true));
  DtrEngine dtr;
  const Result free = RunUnder(dtr, c.program, c.inputs, c.wrt, 0);
  const int64_t cap =
      std::max(dtr.SmallestFeasibleCap(c.program, c.inputs, c.wrt), free.stats.peak_bytes * 3 / 4);
  ASSERT_LT(cap, free.stats.peak_bytes);
  RunOptions options;
  options.memory_cap_bytes = cap;
  options.check_recompute_bits = true;  // every recomputation has the forward pass's bits
  const Result real = dtr.ValueAndGrad(c.program, c.inputs, c.wrt, options);
  options.plan_only = true;
  const Result plan = dtr.ValueAndGrad(c.program, ShapeOnlyArguments(c.program), c.wrt, options);
  EXPECT_TRUE(plan.value.dry());
  EXPECT_EQ(plan.stats.peak_bytes, real.stats.peak_bytes);
  EXPECT_EQ(plan.stats.peak_site, real.stats.peak_site);
  EXPECT_EQ(plan.stats.flops_recomputed, real.stats.flops_recomputed);
  EXPECT_GT(real.stats.flops_recomputed, 0);
  EXPECT_LE(real.stats.peak_bytes, cap);
}

TEST(DtrEngineTest, BadCapsAndLimitsAreClearErrors) {
  const Case c =
      MakeCase(FindProblem("layer_loss"), ResolveParams(FindProblem("layer_loss"), {}, true));
  DtrEngine dtr;
  try {
    RunUnder(dtr, c.program, c.inputs, c.wrt, -5);
    ADD_FAILURE() << "a negative cap was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-5 bytes is negative"), std::string::npos) << e.what();
  }
  // max_memory_bytes is a limit, not a cap: dtr does not evict to meet it.
  const Result free = RunUnder(dtr, c.program, c.inputs, c.wrt, 0);
  RunOptions limited;
  limited.max_memory_bytes = free.stats.peak_bytes - 1;
  try {
    dtr.ValueAndGrad(c.program, c.inputs, c.wrt, limited);
    ADD_FAILURE() << "a run past --max-memory succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
  }
  // Under a cap, the same limit is met by evicting.
  limited.memory_cap_bytes = limited.max_memory_bytes;
  const Result capped = dtr.ValueAndGrad(c.program, c.inputs, c.wrt, limited);
  EXPECT_LE(capped.stats.peak_bytes, limited.max_memory_bytes);
}

// The residual listing is what is resident for the backward when the
// forward pass ends: less under a cap.
TEST(DtrEngineTest, ResidualsShrinkUnderACap) {
  // Activations (64x16 floats a value) outweigh the weights (16x16 a step):
  // the smallest cap leaves the forward pass no room to keep them all.
  const Case c = MakeCase(FindProblem("scan_stack"), {{"L", 8}, {"d", 16}, {"N", 64}});
  DtrEngine dtr;
  const Result free = RunUnder(dtr, c.program, c.inputs, c.wrt, 0);
  // Every step's relu input (matmul's output) and output (the next step's
  // matmul input, the last one square's), stacked; x, step 0's matmul
  // input, is an argument.
  EXPECT_EQ(free.stats.residual_bytes, 2 * 8 * 64 * 16 * 4) << FormatResiduals(free.stats);
  EXPECT_NE(FormatResiduals(free.stats).find("f32[8,64,16] output of matmul"), std::string::npos)
      << FormatResiduals(free.stats);
  const int64_t smallest = dtr.SmallestFeasibleCap(c.program, c.inputs, c.wrt);
  const Result capped = RunUnder(dtr, c.program, c.inputs, c.wrt, smallest);
  EXPECT_LT(capped.stats.residual_bytes, free.stats.residual_bytes)
      << FormatResiduals(capped.stats);
}

}  // namespace
}  // namespace remat
