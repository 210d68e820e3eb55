// The conformance suite: every problem on the engine under test, checked
// against the float64 oracle (engines/oracle) and for what every engine must
// do. Every problem under every policy and schedule, and the zero
// contribution rules, are in conformance_variants_test.cc; the helpers both
// share in conformance_test_util.h.
// One binary per engine (see conformance.bzl): `--engine=NAME` picks it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "engines/api/tracer.h"
#include "harness/case_spec.h"
#include "harness/conformance.h"
#include "harness/conformance_test_util.h"
#include "problems/problem.h"
#include "problems/program_file.h"

namespace remat {
namespace {

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const Problem& problem = ProblemNamed(GetParam());
    case_ = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
    // Every input: a scan's or chain's initial carry (x) too, whose gradient
    // is the last cotangent a reversal produces (jax.grad(f, argnums=all)).
    case_.wrt = AllInputs(case_.program);
    engine_ = MakeEngine(EngineUnderTest());
  }

  Result Run(const RunOptions& options = {}) {
    const std::vector<std::string> before = ArgumentBytes(case_.inputs);
    Result r = engine_->ValueAndGrad(case_.program, case_.inputs, case_.wrt, options);
    ExpectArgumentsUnwritten(before, case_.program, case_.inputs,
                             StrCat(EngineUnderTest(), " on ", case_.ToString()));
    return r;
  }

  Case case_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(ConformanceTest, AgreesWithTheFloat64Oracle) {
  Result got = Run();
  Result ref = MakeEngine("oracle")->ValueAndGrad(case_.program, case_.inputs, case_.wrt);
  Agreement a = CompareWithOracle(case_, got, ref, engine_->dtype());
  EXPECT_TRUE(a.ok) << EngineUnderTest() << " disagrees with the float64 oracle: worst error is "
                    << a.worst_ratio << "x the tolerance: " << a.detail;
  // The gradients are not all zero (a vacuous comparison proves nothing),
  // but for those of inputs the problem declares unreached: those are zeros
  // of the input's shape, from every engine (CONTRACT.md 3.4, 3.5).
  const std::vector<std::string> unreached =
      case_.problem ? case_.problem->unreached_inputs() : std::vector<std::string>();
  std::set<std::string> state;  // buffers (running statistics): their gradient may be zero
  for (const StateSlot& s : CheckStateOps(case_.program)) state.insert(s.name);
  for (size_t i = 0; i < ref.grads.size() && i < case_.wrt.size(); ++i) {
    const std::string& input = case_.program.param_names[case_.wrt[i]];
    if (state.count(input)) continue;
    double norm = 0;
    for (int64_t j = 0; j < ref.grads[i].num_elements(); ++j) norm += std::abs(ref.grads[i].at(j));
    if (std::find(unreached.begin(), unreached.end(), input) == unreached.end()) {
      EXPECT_GT(norm, 0) << case_.ToString() << ": the oracle's gradient of " << input
                         << " is all zero";
      continue;
    }
    ASSERT_LT(i, got.grads.size());
    const Tensor& g = got.grads[i];
    ASSERT_TRUE(g.defined()) << EngineUnderTest() << ": no gradient for unreached " << input;
    EXPECT_EQ(g.shape(), case_.program.shapes[case_.wrt[i]])
        << EngineUnderTest() << ": the gradient of unreached " << input << " is "
        << g.TypeString();
    for (int64_t j = 0; j < g.num_elements(); ++j) {
      if (g.at(j) != 0) {
        ADD_FAILURE() << EngineUnderTest() << ": the gradient of unreached " << input << " has "
                      << g.at(j) << " at " << j << ", not 0";
        break;
      }
    }
  }
}

// Two identical runs on one instance: the same bits, and the same value of
// every Stats field that does not measure time (they are functions of the
// program, the inputs and the options: CONTRACT.md's Stats), the second run
// checked as if it were the first.
TEST_P(ConformanceTest, SameInputsGiveTheSameBits) {
  Result a = Run();
  Result b = Run();
  EXPECT_TRUE(BitwiseEqual(a.value, b.value));
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    EXPECT_TRUE(BitwiseEqual(a.grads[i], b.grads[i])) << "gradient " << i;
  }
  EXPECT_EQ(StateDiffers(a, b), std::nullopt) << "the new state (CONTRACT.md, state)";
  const std::string what = StrCat(EngineUnderTest(), " on ", case_.ToString(),
                                  ", the same run twice: Stats::");
  EXPECT_EQ(a.stats.peak_bytes, b.stats.peak_bytes) << what << "peak_bytes";
  EXPECT_EQ(a.stats.peak_bytes_by_category, b.stats.peak_bytes_by_category)
      << what << "peak_bytes_by_category";
  EXPECT_EQ(a.stats.peak_site, b.stats.peak_site) << what << "peak_site";
  EXPECT_EQ(a.stats.high_water_bytes_by_category, b.stats.high_water_bytes_by_category)
      << what << "high_water_bytes_by_category";
  EXPECT_EQ(a.stats.host_peak_bytes, b.stats.host_peak_bytes) << what << "host_peak_bytes";
  EXPECT_EQ(a.stats.predicted_peak_bytes, b.stats.predicted_peak_bytes)
      << what << "predicted_peak_bytes";
  EXPECT_EQ(a.stats.residual_bytes, b.stats.residual_bytes) << what << "residual_bytes";
  EXPECT_EQ(a.stats.residuals.size(), b.stats.residuals.size()) << what << "residuals";
  EXPECT_EQ(a.stats.flops_forward, b.stats.flops_forward) << what << "flops_forward";
  EXPECT_EQ(a.stats.flops_recomputed, b.stats.flops_recomputed) << what << "flops_recomputed";
  EXPECT_EQ(a.stats.flops_backward, b.stats.flops_backward) << what << "flops_backward";
  EXPECT_EQ(a.stats.kernel_calls, b.stats.kernel_calls) << what << "kernel_calls";
  EXPECT_EQ(KernelCalls(a.stats), KernelCalls(b.stats)) << what << "kernel_times' calls";
  EXPECT_TRUE(a.stats.op_runs == b.stats.op_runs) << what << "op_runs";
  // The peak's categories are the live bytes at the peak: on the device
  // they add up to it (the host tier is counted apart).
  for (const Stats* st : {&a.stats, &b.stats}) {
    int64_t device = 0;
    for (int c = 0; c < kNumCategories; ++c) {
      if (static_cast<Category>(c) != Category::kHost) device += st->peak_bytes_by_category[c];
    }
    EXPECT_EQ(device, st->peak_bytes)
        << EngineUnderTest() << " on " << case_.ToString()
        << ": peak_bytes_by_category (host excluded) does not add up to peak_bytes";
  }
}

// Every field an engine reports, by its definition (StatsContradictions:
// the tracker's marks, eager's forward and backward passes, the schedule's
// lines against op_runs), and plan_only: a dry run's Result, tensors without
// data, whose peak is the one the real run then measures.
TEST_P(ConformanceTest, EveryReportedFieldFollowsItsDefinition) {
  const std::string what = StrCat(EngineUnderTest(), " on ", case_.ToString());
  RunOptions options;
  options.record_schedule = true;
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  const Result want = eager->ValueAndGrad(case_.program, case_.inputs, case_.wrt, options);
  const Result got = Run(options);
  for (const std::string& c : StatsContradictions(case_.program, got, want, /*schedules=*/true, !engine_->kernels().empty())) {
    ADD_FAILURE() << what << ": " << c;
  }
  RunOptions plan;
  plan.plan_only = true;
  Result dry;
  try {
    dry = Run(plan);
  } catch (const Error& e) {
    // An engine that cannot plan refuses plan_only by name (CONTRACT.md
    // section 5), as the float64 oracle does.
    EXPECT_NE(std::string(e.what()).find("plan_only"), std::string::npos)
        << what << ": a plan_only run threw an error that does not name plan_only: " << e.what();
    return;
  }
  std::vector<const Tensor*> outputs = {&dry.value};
  for (const Tensor& g : dry.grads) outputs.push_back(&g);
  for (const auto& [name, t] : dry.state) outputs.push_back(&t);
  for (const Tensor* t : outputs) {
    EXPECT_TRUE(!t->defined() || t->dry())
        << what << ": under RunOptions::plan_only a tensor of the Result holds data (plan_only "
        << "returns a dry run's Result: CONTRACT.md section 5)";
  }
  // The dry Result's state is the real one's, names and shapes, without data
  // (R5.1): a planner sizes what a run returns, state included.
  ASSERT_EQ(dry.state.size(), got.state.size())
      << what << ": plan_only's Result has " << dry.state.size() << " state entries, the run "
      << got.state.size() << " (R5.1: one dry tensor per state op)";
  for (const auto& [name, t] : got.state) {
    const auto found = dry.state.find(name);
    ASSERT_NE(found, dry.state.end()) << what << ": plan_only's Result has no state " << name;
    EXPECT_EQ(found->second.shape(), t.shape()) << what << ": plan_only's state " << name;
  }
  if (got.stats.predicted_peak_bytes >= 0) {
    EXPECT_EQ(dry.stats.predicted_peak_bytes, got.stats.peak_bytes)
        << what << ": plan_only's predicted peak is not the peak the run measures";
  }
}

// Section 4's inputs: the arguments are live for the whole run, each
// counted once: an argument already in the engine's dtype (its gradients'
// dtype, R1.2) and every integer argument in place, at its own size (an
// i32 is never converted), a float argument in another dtype as a tracked
// copy in the engine's. So at the peak the inputs category holds exactly
// that sum: an engine that copies ids into floats, or leaves integers
// uncounted, reports other bytes.
TEST_P(ConformanceTest, ArgumentsAreCountedOnceIntegersAtTheirOwnSize) {
  if (engine_->kernels().empty()) {
    GTEST_SKIP() << EngineUnderTest() << " runs on no kernel table: a reference whose rules read "
                    "every value in float64, integers as float64 copies (section 4's exception)";
  }
  const Result r = Run(RunOptions());
  if (r.grads.empty()) GTEST_SKIP() << "no gradient gives the engine's dtype";
  const DType engine_dtype = r.grads[0].dtype();
  int64_t want = 0;
  for (int j = 0; j < case_.program.num_params(); ++j) {
    const Tensor& a = case_.inputs[j];
    want += a.dtype() == DType::kI32 ? a.bytes() : a.num_elements() * DTypeSize(engine_dtype);
  }
  EXPECT_EQ(r.stats.peak_bytes_by_category[static_cast<int>(Category::kInputs)], want)
      << EngineUnderTest() << " on " << case_.ToString()
      << ": the inputs category at the peak is not the arguments' bytes, integers in place "
         "(CONTRACT.md section 4)";
}

TEST_P(ConformanceTest, TrackerReturnsToZeroLiveBytes) {
  std::shared_ptr<MemoryTracker> tracker;
  int64_t held = 0;
  {
    CountedRun run = RunCountingStorage(*engine_, case_.program, case_.inputs, case_.wrt);
    EXPECT_LE(run.untracked_bytes, 0)
        << EngineUnderTest() << " on " << case_.ToString() << " allocated " << run.untracked_bytes
        << " bytes of tensor storage outside the trackers it reported";
    Result& r = run.result;
    tracker = r.tracker;
    held = r.value.bytes();
    for (const Tensor& g : r.grads) held += g.bytes();
    for (const auto& [name, t] : r.state) held += t.bytes();
    // Only the results (and the caller's arguments, no longer counted) remain.
    EXPECT_EQ(tracker->live_bytes(), held) << "bytes still live besides the Result's tensors";
    EXPECT_GE(r.stats.peak_bytes, held + r.stats.residual_bytes)
        << "the peak is below the results and the residuals together";
    EXPECT_GT(r.stats.flops_forward, 0);
    EXPECT_GT(r.stats.flops_backward, 0);
    EXPECT_FALSE(r.stats.peak_site.empty());
  }
  EXPECT_EQ(tracker->live_bytes(), 0) << "bytes still live after the Result is gone";
}

TEST_P(ConformanceTest, ResidualListingNamesEverySavedValue) {
  Result r = Run();
  ASSERT_FALSE(r.stats.residuals.empty());
  int64_t computed = 0;
  for (const Residual& res : r.stats.residuals) {
    EXPECT_FALSE(res.source.empty());
    EXPECT_NE(res.source.find(res.is_argument ? "from the argument" : "output of"),
              std::string::npos)
        << res.source;
    if (!res.is_argument) computed += res.bytes;
  }
  EXPECT_EQ(computed, r.stats.residual_bytes);
}

// `program` as the body of one checkpoint region under `policy`, its own
// regions kept: jax.checkpoint(f, policy=...) around the whole function.
Program WrapInRegion(const Program& program, const std::string& policy) {
  return WrapInCheckpoint(program, Policy::Parse(policy), "the suite's region");
}

// The residual listing is compared with eager's, line by line (shape, source,
// count), on the program as written and with every region under
// everything_saveable:
// - an engine that stores everything (honours_checkpoints() false, no cap)
//   saves exactly eager's values, arguments included;
// - an engine that honours regions saves, under everything_saveable, only
//   values eager saves too (a region may keep fewer: one whose output an
//   enclosing region saved is not replayed), and under one
//   nothing_saveable region around the whole program nothing but arguments.
// A listing that names a value eager does not save, or with another shape or
// count, is wrong whatever the engine plans.
// The oracle is exempt: it is the judge, not an engine under the contract,
// and its own rules save other values (the loss's square, for one).
TEST_P(ConformanceTest, ResidualListingAgreesWithEagers) {
  if (EngineUnderTest() == "oracle") return;
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  const Program all = ApplyPolicy(case_.program, Policy::Parse("everything_saveable"));
  const bool exact = !engine_->honours_checkpoints();
  for (const Program* program : {static_cast<const Program*>(&case_.program), &all}) {
    if (!exact && program != &all) continue;
    const Stats want = eager->ValueAndGrad(*program, case_.inputs, case_.wrt).stats;
    const Stats got = engine_->ValueAndGrad(*program, case_.inputs, case_.wrt).stats;
    const std::optional<std::string> diff = ResidualListingDiffers(want, got, exact);
    EXPECT_FALSE(diff.has_value())
        << EngineUnderTest() << " on " << case_.ToString()
        << (program == &all ? " under everything_saveable" : "") << ": its residual listing "
        << (exact ? "is not eager's (it stores everything: honours_checkpoints() is false)"
                  : "names values eager does not save")
        << "\n  " << diff.value_or("");
  }
  if (!exact) {
    const Stats n =
        engine_->ValueAndGrad(WrapInRegion(case_.program, "nothing_saveable"), case_.inputs,
                              case_.wrt)
            .stats;
    for (const Residual& r : n.residuals) {
      EXPECT_TRUE(r.is_argument)
          << EngineUnderTest() << " on " << case_.ToString()
          << " in one nothing_saveable region saves more than the region's inputs (the "
             "arguments): "
          << r.type << " " << r.source;
    }
  }
}

// Engine::honours_checkpoints() is a claim the suite checks: the problem
// wrapped in one region under nothing_saveable, and under
// everything_saveable. An engine that honours regions recomputes under the
// first (it saved only the region's inputs, the arguments) and saves no
// more than under the second; one that runs regions inline saves the same
// under both and recomputes nothing.
TEST_P(ConformanceTest, HonoursCheckpointsAsItClaims) {
  const Program none = WrapInRegion(case_.program, "nothing_saveable");
  const Program all = WrapInRegion(case_.program, "everything_saveable");
  const Result n = engine_->ValueAndGrad(none, case_.inputs, case_.wrt);
  const Result a = engine_->ValueAndGrad(all, case_.inputs, case_.wrt);
  const std::string what =
      StrCat(EngineUnderTest(), " on ", case_.ToString(), " saves ", n.stats.residual_bytes,
             " bytes under nothing_saveable and ", a.stats.residual_bytes,
             " under everything_saveable, recomputing ", n.stats.flops_recomputed, " FLOPs: it ",
             engine_->honours_checkpoints()
                 ? "claims to honour checkpoint regions (honours_checkpoints()) and does not"
                 : "says it stores everything (honours_checkpoints() is false)");
  if (engine_->honours_checkpoints()) {
    EXPECT_LE(n.stats.residual_bytes, a.stats.residual_bytes) << what;
    EXPECT_GT(n.stats.flops_recomputed, 0) << what;
  } else {
    EXPECT_EQ(n.stats.residual_bytes, a.stats.residual_bytes) << what;
    EXPECT_EQ(n.stats.flops_recomputed, 0) << what;
  }
}

// The two budgets an engine that honours checkpoints must keep (CONTRACT.md
// section 4), at a B that binds, between the smallest reachable and the
// largest useful:
// - memory_budget:peak:B bounds the whole run's measured peak: peak:min is
//   at most the fraction-1 peak (memory_budget:1, everything a region may
//   keep), a B half way between is kept, and one byte under peak:min's peak
//   is refused with an error that says the smallest peak reachable;
// - a budget:B schedule bounds the activations' high-water mark: B half way
//   between a one-slot revolve's and an unbounded budget's is kept.
// An engine that runs regions inline ignores both (as every policy).
TEST_P(ConformanceTest, BudgetsBoundWhatTheyPromise) {
  if (!engine_->honours_checkpoints()) {
    GTEST_SKIP() << EngineUnderTest() << " runs checkpoint regions inline: budgets do not apply";
  }
  const std::string what = StrCat(EngineUnderTest(), " on ", case_.ToString());
  const auto under_policy = [&](const std::string& spec) {
    return engine_->ValueAndGrad(ApplyPolicy(case_.program, Policy::Parse(spec)), case_.inputs,
                                 case_.wrt)
        .stats;
  };
  const int64_t min_peak = under_policy("memory_budget:peak:min").peak_bytes;
  const int64_t whole_peak = under_policy("memory_budget:1").peak_bytes;
  EXPECT_LE(min_peak, whole_peak) << what << ": memory_budget:peak:min measured a peak of "
                                  << min_peak << " bytes, above memory_budget:1's " << whole_peak;
  const int64_t between = min_peak + (whole_peak - min_peak) / 2;
  const std::string mid = StrCat("memory_budget:peak:", between, "B");
  try {
    const int64_t peak = under_policy(mid).peak_bytes;
    EXPECT_LE(peak, between) << what << " under " << mid << ": measured a peak of " << peak
                             << " bytes, past the budget";
  } catch (const Error& e) {
    ADD_FAILURE() << what << " under " << mid << " (at least peak:min's " << min_peak
                  << " bytes) threw: " << e.what();
  }
  const std::string under = StrCat("memory_budget:peak:", min_peak - 1, "B");
  try {
    under_policy(under);
    ADD_FAILURE() << what << " under " << under << ", one byte below the smallest peak "
                  << "reachable (peak:min's), ran instead of refusing";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("smallest peak reachable"), std::string::npos)
        << what << " under " << under << ": " << e.what();
  }

  const auto under_schedule = [&](const std::string& spec) -> std::optional<Stats> {
    Program p;
    try {
      p = ApplySchedule(case_.program, spec);
    } catch (const Error&) {
      return std::nullopt;  // no scan and no chain: no schedule applies
    }
    return engine_->ValueAndGrad(p, case_.inputs, case_.wrt).stats;
  };
  const auto activations = [](const Stats& s) {
    return s.high_water_bytes_by_category[static_cast<int>(Category::kActivations)];
  };
  const std::optional<Stats> one_slot = under_schedule("revolve:1");
  if (!one_slot) return;
  const std::optional<Stats> unbounded = under_schedule("budget:1TiB");
  ASSERT_TRUE(unbounded.has_value());
  const int64_t budget =
      activations(*one_slot) + (activations(*unbounded) - activations(*one_slot)) / 2;
  const std::string spec = StrCat("budget:", budget, "B");
  try {
    const std::optional<Stats> kept = under_schedule(spec);
    ASSERT_TRUE(kept.has_value());
    EXPECT_LE(activations(*kept), budget)
        << what << " under the schedule " << spec << ": the activations' high-water mark is "
        << activations(*kept) << " bytes, past the budget";
  } catch (const Error& e) {
    ADD_FAILURE() << what << " under the schedule " << spec << " (half way between revolve:1's "
                  << activations(*one_slot) << " activation bytes and an unbounded budget's "
                  << activations(*unbounded) << ") threw: " << e.what();
  }
}

// grads[j] is the gradient of input wrt[j], whatever the order of wrt
// (jax.grad's argnums): every input in reverse order gives the in-order
// run's gradients, bit for bit (the same cotangents are computed), in
// reverse; the last input alone gives its gradient (against the oracle:
// with one input wanted, less is computed).
TEST_P(ConformanceTest, GradientsFollowTheOrderOfWrt) {
  const Result in_order = Run();
  const std::vector<int> reversed(case_.wrt.rbegin(), case_.wrt.rend());
  const Result r = engine_->ValueAndGrad(case_.program, case_.inputs, reversed);
  ASSERT_EQ(r.grads.size(), reversed.size());
  for (size_t j = 0; j < reversed.size(); ++j) {
    // wrt[j] reversed is case_.wrt[n - 1 - j], whose in-order gradient is
    // grads[n - 1 - j].
    EXPECT_TRUE(BitwiseEqual(r.grads[j], in_order.grads[reversed.size() - 1 - j]))
        << EngineUnderTest() << " on " << case_.ToString() << " with wrt in reverse order: grads["
        << j << "] (" << r.grads[j].TypeString() << ") is not the gradient of wrt[" << j
        << "] = " << case_.program.param_names[reversed[j]] << " (gradients follow wrt)";
  }
  Case last = case_;
  last.wrt = {case_.wrt.back()};
  const Result one = engine_->ValueAndGrad(last.program, last.inputs, last.wrt);
  const Result ref = MakeEngine("oracle")->ValueAndGrad(last.program, last.inputs, last.wrt);
  const Agreement a = CompareWithOracle(last, one, ref, engine_->dtype());
  EXPECT_TRUE(a.ok) << EngineUnderTest() << " with wrt = {"
                    << case_.program.param_names[last.wrt[0]] << "} alone: worst error is "
                    << a.worst_ratio << "x the tolerance: " << a.detail
                    << " (gradients follow wrt)";
  // On eager's kernels, the same run as eager's with the same wrt, to the bit.
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  if (engine_->kernels() == eager->kernels()) {
    const Result want = eager->ValueAndGrad(last.program, last.inputs, last.wrt);
    const std::optional<std::string> diff = FirstBitDifference(want, one);
    EXPECT_FALSE(diff.has_value()) << EngineUnderTest() << " with wrt = {"
                                   << case_.program.param_names[last.wrt[0]]
                                   << "} alone: the " << diff.value_or("")
                                   << " differs from eager's with the same wrt";
  }
}

// One instance through a sequence of calls that differ from the call
// before in one thing each (the input values, the policy, the wrt list, the
// program), then back to the first call: every call is checked against a
// fresh instance's first run of it, bits and every Stats field that does
// not measure time, so that a cache keyed on too little (a plan reused for
// other values, another policy, another wrt, another program) or state kept
// between runs shows.
TEST_P(ConformanceTest, ASequenceOfCallsIsCheckedAsIfEachWereTheFirst) {
  const Problem& other_problem = FindProblem(GetParam() == "layer_loss" ? "dot_policy" : "layer_loss");
  Case other = MakeCase(other_problem, ResolveParams(other_problem, {}, /*test_sizes=*/true));
  other.wrt = AllInputs(other.program);
  Case new_values = MakeCase(*case_.problem, case_.params, /*seed=*/2);
  new_values.wrt = case_.wrt;
  Case policy = case_;
  policy.program = ApplyPolicy(case_.program, Policy::Parse("everything_saveable"));
  Case nothing = case_;
  nothing.program = ApplyPolicy(case_.program, Policy::Parse("nothing_saveable"));
  Case offload = case_;
  offload.program = ApplyPolicy(case_.program, Policy::Parse("offload_dot_with_no_batch_dims"));
  Case one_input = case_;
  one_input.wrt = {case_.wrt.front()};
  Case reversed = case_;
  reversed.wrt.assign(case_.wrt.rbegin(), case_.wrt.rend());
  const std::vector<std::pair<std::string, const Case*>> calls = {
      {"the first call", &case_},           {"new input values", &new_values},
      {"everything_saveable", &policy},     {"nothing_saveable", &nothing},
      {"offloading dots", &offload},        {"one input in wrt", &one_input},     {"wrt reversed", &reversed},
      {"another program", &other},          {"the first call again", &case_}};
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto& [what, c] = calls[i];
    const std::string where = StrCat(EngineUnderTest(), " on ", case_.ToString(), ", call ", i + 1,
                                     " of a sequence on one instance (", what, ")");
    const Result got = engine_->ValueAndGrad(c->program, c->inputs, c->wrt);
    const Result want = MakeEngine(EngineUnderTest())->ValueAndGrad(c->program, c->inputs, c->wrt);
    const std::optional<std::string> diff = FirstBitDifference(want, got);
    EXPECT_FALSE(diff.has_value()) << where << ": the " << diff.value_or("")
                                   << " differs from a fresh instance's";
    const Stats& a = want.stats;
    const Stats& b = got.stats;
    EXPECT_EQ(a.peak_bytes, b.peak_bytes) << where << ": Stats::peak_bytes";
    EXPECT_EQ(a.peak_bytes_by_category, b.peak_bytes_by_category)
        << where << ": Stats::peak_bytes_by_category";
    EXPECT_EQ(a.high_water_bytes_by_category, b.high_water_bytes_by_category)
        << where << ": Stats::high_water_bytes_by_category";
    EXPECT_EQ(a.host_peak_bytes, b.host_peak_bytes) << where << ": Stats::host_peak_bytes";
    EXPECT_EQ(a.peak_site, b.peak_site) << where << ": Stats::peak_site";
    EXPECT_EQ(a.predicted_peak_bytes, b.predicted_peak_bytes) << where << ": Stats::predicted_peak_bytes";
    EXPECT_EQ(a.predicted_peak_site, b.predicted_peak_site) << where << ": Stats::predicted_peak_site";
    EXPECT_EQ(a.residual_bytes, b.residual_bytes) << where << ": Stats::residual_bytes";
    EXPECT_EQ(ResidualListingDiffers(a, b, /*exact=*/true), std::nullopt)
        << where << ": Stats::residuals";
    EXPECT_EQ(a.flops_forward, b.flops_forward) << where << ": Stats::flops_forward";
    EXPECT_EQ(a.flops_recomputed, b.flops_recomputed) << where << ": Stats::flops_recomputed";
    EXPECT_EQ(a.flops_backward, b.flops_backward) << where << ": Stats::flops_backward";
    EXPECT_EQ(a.kernel_calls, b.kernel_calls) << where << ": Stats::kernel_calls";
    EXPECT_EQ(KernelCalls(a), KernelCalls(b)) << where << ": Stats::kernel_times' calls";
    EXPECT_TRUE(a.op_runs == b.op_runs) << where << ": Stats::op_runs";
  }
}

// Arguments in float64 are accepted and converted to the engine's dtype
// (CONTRACT.md: what numpy.save writes by default): an f32 engine given the
// f64 images of its f32 inputs computes exactly what it computes from them.
TEST_P(ConformanceTest, Float64ArgumentsAreConverted) {
  if (engine_->dtype() != DType::kF32) return;
  const Result want = Run();
  std::vector<Tensor> wide;
  for (const Tensor& t : case_.inputs) {
    if (t.dtype() == DType::kI32) {  // integers stay integers
      wide.push_back(t);
      continue;
    }
    std::vector<double> v(static_cast<size_t>(t.num_elements()));
    for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = t.f32()[i];
    wide.push_back(Tensor::FromF64(t.shape(), v));
  }
  Result got;
  try {
    got = engine_->ValueAndGrad(case_.program, wide, case_.wrt);
  } catch (const Error& e) {
    FAIL() << EngineUnderTest() << " on " << case_.ToString()
           << " refused float64 arguments: " << e.what();
  }
  const std::optional<std::string> diff = FirstBitDifference(want, got);
  EXPECT_FALSE(diff.has_value()) << EngineUnderTest() << " on " << case_.ToString()
                                 << " with float64 arguments: the " << diff.value_or("")
                                 << " differs from the run on their float32 values";
  for (const Tensor& g : got.grads) {
    EXPECT_EQ(g.dtype(), DType::kF32) << "gradients are in the engine's dtype";
  }
}

// One NaN, or one Inf, in one input at a time: the engine's gradients are
// NaN, +Inf or -Inf exactly where eager's are (bit for bit, for an engine on
// eager's kernels). An engine on other kernels may follow the oracle
// instead, element by element: relu's derivative at a NaN input is where
// JAX (select: 0) and PyTorch (threshold_backward: the cotangent) disagree;
// eager's oneDNN kernel gives the cotangent, the oracle 0. One poisoned element, not one per input: a poison
// everywhere makes every output NaN and any engine pass. The comparison
// means something only where eager's gradients are part NaN, part finite
// (x's gradient in a scan: the poisoned row only), so each problem must have
// such a case.
TEST_P(ConformanceTest, ASingleNonFiniteInputSpreadsAsInEager) {
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  std::unique_ptr<Engine> oracle = MakeEngine("oracle");
  const bool same_kernels = engine_->kernels() == eager->kernels();
  auto kind = [](double v) { return std::isnan(v) ? 'n' : std::isinf(v) ? (v > 0 ? '+' : '-') : 'f'; };
  int informative = 0;
  for (int j = 0; j < case_.program.num_params(); ++j) {
    if (case_.program.dtype(j) == DType::kI32) continue;  // no NaN among integers
    for (float bad : {NAN, INFINITY}) {
      SCOPED_TRACE(StrCat(case_.ToString(), ": input ", case_.program.param_names[j], "[",
                          case_.inputs[j].num_elements() / 2, "] = ", bad));
      std::vector<Tensor> inputs;
      for (const Tensor& t : case_.inputs) inputs.push_back(Copy(t));
      if (inputs[j].num_elements() == 0) continue;
      inputs[j].f32()[inputs[j].num_elements() / 2] = bad;
      Result want = eager->ValueAndGrad(case_.program, inputs, case_.wrt);
      Result got = engine_->ValueAndGrad(case_.program, inputs, case_.wrt);
      Result alt = same_kernels ? want : oracle->ValueAndGrad(case_.program, inputs, case_.wrt);
      ASSERT_EQ(got.grads.size(), want.grads.size());
      if (same_kernels) {
        const std::optional<std::string> diff = FirstBitDifference(want, got);
        EXPECT_FALSE(diff.has_value()) << "the " << diff.value_or("") << " differs from eager's";
      }
      int64_t finite = 0, non_finite = 0;
      for (size_t g = 0; g < want.grads.size(); ++g) {
        for (int64_t i = 0; i < want.grads[g].num_elements(); ++i) {
          const char w = kind(want.grads[g].at(i));
          const char r = kind(got.grads[g].at(i));
          (w == 'f' ? finite : non_finite) += 1;
          if (w != r && kind(alt.grads[g].at(i)) != r) {
            ADD_FAILURE() << "grad " << case_.program.param_names[case_.wrt[g]] << "[" << i
                          << "] is " << got.grads[g].at(i) << ", eager's " << want.grads[g].at(i)
                          << " (NaN and Inf must spread as in eager)";
            break;
          }
        }
      }
      if (finite > 0 && non_finite > 0) ++informative;
    }
  }
  // sin_plain and sin_recursive have one scalar input: a poison there is
  // everywhere, and only the all-NaN (all-Inf) pattern is there to compare.
  // gpt mixes every row into every gradient (attention over earlier
  // positions, LayerNorm and the tied head's logits over the vocabulary, a
  // mean over rows): one poisoned element reaches every gradient element
  // there too. Whether a poison leaves anything finite is the problem's
  // property (eager's run), not the engine's: a problem where none does has
  // had its all-non-finite patterns compared above, and is skipped here
  // with that said, rather than failed.
  int64_t largest = 0;
  for (const Tensor& t : case_.inputs) largest = std::max(largest, t.num_elements());
  if (largest > 1 && informative == 0) {
    GTEST_SKIP() << case_.ToString()
                 << ": no single poisoned element left any gradient part finite (every row "
                    "mixes into every gradient); only all-non-finite patterns were compared";
  }
}

TEST_P(ConformanceTest, BadArgumentsAreClearErrors) {
  std::vector<Tensor> fewer(case_.inputs.begin(), case_.inputs.end() - 1);
  try {
    engine_->ValueAndGrad(case_.program, fewer, case_.wrt);
    ADD_FAILURE() << "missing argument accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(case_.program.name), std::string::npos) << e.what();
  }
  std::vector<Tensor> reshaped = case_.inputs;
  reshaped[0] = Tensor::Zeros(DType::kF32, Shape({3, 1, 2}));
  try {
    engine_->ValueAndGrad(case_.program, reshaped, case_.wrt);
    ADD_FAILURE() << "wrong shape accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(case_.program.param_names[0]), std::string::npos) << m;
    EXPECT_NE(m.find("[3,1,2]"), std::string::npos) << m;
  }
  EXPECT_THROW(engine_->ValueAndGrad(case_.program, case_.inputs, {case_.program.num_params()}),
               Error);
  EXPECT_THROW(engine_->ValueAndGrad(case_.program, case_.inputs, {-1}), Error);
  // A repeated index in wrt (jax.grad's argnums may not repeat one).
  try {
    engine_->ValueAndGrad(case_.program, case_.inputs, {case_.wrt[0], case_.wrt[0]});
    ADD_FAILURE() << EngineUnderTest() << " accepted wrt = {" << case_.wrt[0] << ", "
                  << case_.wrt[0] << "}";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(case_.program.param_names[case_.wrt[0]]),
              std::string::npos)
        << "the error names the repeated input: " << e.what();
  }
  // An integer parameter (token ids, targets, seeds: CONTRACT.md section 2)
  // takes an i32 argument only and is never differentiated.
  for (int i = 0; i < case_.program.num_params(); ++i) {
    if (case_.program.dtype(i) != DType::kI32) continue;
    const std::string& name = case_.program.param_names[i];
    try {
      engine_->ValueAndGrad(case_.program, case_.inputs, {i});
      ADD_FAILURE() << EngineUnderTest() << " on " << case_.ToString()
                    << " differentiated the integer input " << name << " (wrt = {" << i << "})";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
          << "the error names the integer input: " << e.what();
    }
    std::vector<Tensor> as_float = case_.inputs;
    as_float[i] = Tensor::Zeros(DType::kF32, case_.program.shapes[i]);
    try {
      engine_->ValueAndGrad(case_.program, as_float, case_.wrt);
      ADD_FAILURE() << EngineUnderTest() << " on " << case_.ToString()
                    << " accepted an f32 argument for the integer input " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
          << "the error names the integer input: " << e.what();
    }
  }
}

// A limit one byte under the peak: refused, before allocating when the
// engine predicts (predict_memory), at the allocation that would pass it when
// it does not; either way every tracker of the failed run (RunOptions::
// on_tracker) ends with nothing live.
//
// An engine that reports a predicted peak (predicted_peak_bytes >= 0) plans
// before it runs, so a limit under its prediction is refused with no tensor
// storage allocated in any of its trackers: a prediction made up after the
// run (the measured peak copied) cannot do that.
TEST_P(ConformanceTest, MemoryLimitIsAnErrorAndLeaksNothing) {
  Result r = Run();
  const bool predicts = r.stats.predicted_peak_bytes >= 0;
  for (bool predict : {true, false}) {
    SCOPED_TRACE(predict ? "predicting" : "not predicting");
    std::vector<std::shared_ptr<MemoryTracker>> trackers;
    RunOptions options;
    options.max_memory_bytes = r.stats.peak_bytes - 1;
    options.predict_memory = predict;
    options.on_tracker = [&](const std::shared_ptr<MemoryTracker>& t) { trackers.push_back(t); };
    try {
      Run(options);
      ADD_FAILURE() << "a run past --max-memory succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
    }
    // Refused from a plan the engine kept from an earlier run of the case
    // (engines/exec/program_cache.h), a run creates no tracker at all; one
    // that is not predicting allocates, in a tracker it must report.
    if (!predict) {
      EXPECT_FALSE(trackers.empty())
          << EngineUnderTest() << " never called RunOptions::on_tracker";
    }
    for (const auto& t : trackers) {
      EXPECT_EQ(t->live_bytes(), 0) << EngineUnderTest() << ": a failed run leaked";
      EXPECT_EQ(t->live_bytes(Category::kHost), 0);
      // The limit is hard (R4.8): the allocation that would pass it throws,
      // so no moment of the refused run held more. A dry run's counts are a
      // prediction, which may pass the limit: that is how it refuses.
      if (!t->dry_run()) {
        EXPECT_LE(t->peak_bytes(), options.max_memory_bytes)
            << EngineUnderTest() << " held " << t->peak_bytes() << " bytes in a run refused for "
            << "--max-memory " << options.max_memory_bytes
            << ": the limit was checked after it was passed, not at the allocation that passed it";
      }
      if (predict && predicts) {
        EXPECT_EQ(t->storage_bytes(), 0)
            << EngineUnderTest() << " reports a predicted peak (" << r.stats.predicted_peak_bytes
            << " bytes) but allocated " << t->storage_bytes()
            << " bytes before refusing a limit one byte under it: the prediction is not a plan "
               "made before the run";
      }
    }
  }
  RunOptions options;
  options.max_memory_bytes = r.stats.peak_bytes;
  Result exact = Run(options);  // the measured peak is enough
  EXPECT_EQ(exact.stats.peak_bytes, r.stats.peak_bytes);
}

// An engine that honours RunOptions::memory_cap_bytes stays under it and
// keeps its bits: at 50%, 70% and 90% of its uncapped peak (or the smallest
// cap that works, if that is more) the value and gradients are the uncapped
// run's bits, the measured peak is at most the cap, something was recomputed
// when the cap is below the uncapped peak, and every byte is given back. A
// cap below the smallest that works is an error that names it.
TEST_P(ConformanceTest, StaysUnderAMemoryCapWithTheSameBits) {
  if (!engine_->honours_memory_cap()) {
    GTEST_SKIP() << EngineUnderTest() << " does not honour a memory cap";
  }
  const Result uncapped = Run();
  const int64_t peak = uncapped.stats.peak_bytes;
  // A run the cap stops gives every byte back as it throws, the engine's own
  // pools included (R4.9, R4.3): nothing is left live for a later call to
  // free.
  std::vector<std::shared_ptr<MemoryTracker>> stopped;
  const auto nothing_left = [&](const std::string& what) {
    for (const auto& t : stopped) {
      EXPECT_EQ(t->live_bytes(), 0) << EngineUnderTest() << " on " << case_.ToString() << ", "
                                    << what << ": " << t->live_bytes()
                                    << " bytes still live after the run threw";
      EXPECT_EQ(t->live_bytes(Category::kHost), 0) << what;
    }
    stopped.clear();
  };
  RunOptions one_byte;
  one_byte.memory_cap_bytes = 1;
  one_byte.on_tracker = [&](const std::shared_ptr<MemoryTracker>& t) { stopped.push_back(t); };
  int64_t smallest = -1;
  try {
    Run(one_byte);
    ADD_FAILURE() << EngineUnderTest() << " ran " << case_.ToString() << " under a 1-byte cap";
  } catch (const Error& e) {
    smallest = SmallestCapIn(e);
    EXPECT_GT(smallest, 0) << "no smallest cap that worked (ErrorKind::kCapTooSmall) in: "
                           << e.what();
    EXPECT_NE(std::string(e.what()).find("--memory-cap"), std::string::npos) << e.what();
  }
  nothing_left("stopped by a 1-byte cap");
  ASSERT_GT(smallest, 0);
  EXPECT_LE(smallest, peak) << "the uncapped run is a run under a cap of its own peak";
  for (const double fraction : {0.5, 0.7, 0.9}) {
    const int64_t cap = std::max(smallest, static_cast<int64_t>(fraction * peak));
    const std::string what = StrCat(EngineUnderTest(), " on ", case_.ToString(), " under a cap of ",
                                    cap, " bytes (", fraction, " x ", peak, ")");
    std::shared_ptr<MemoryTracker> tracker;
    {
      RunOptions options;
      options.memory_cap_bytes = cap;
      Result r = Run(options);
      tracker = r.tracker;
      const std::optional<std::string> diff = FirstBitDifference(uncapped, r);
      EXPECT_FALSE(diff.has_value()) << what << ": the " << diff.value_or("")
                                     << " differs from the uncapped run's";
      EXPECT_LE(r.stats.peak_bytes, cap) << what;
      if (cap < peak) {
        EXPECT_GT(r.stats.flops_recomputed, 0) << what;
      }
    }
    EXPECT_EQ(tracker->live_bytes(), 0) << what << ": bytes still live after the Result is gone";
  }
  RunOptions below;
  below.memory_cap_bytes = smallest - 1;
  below.on_tracker = one_byte.on_tracker;
  try {
    Run(below);
    ADD_FAILURE() << EngineUnderTest() << " ran under " << smallest - 1
                  << " bytes, below the smallest cap that worked (" << smallest << ")";
  } catch (const Error& e) {
    EXPECT_EQ(SmallestCapIn(e), smallest) << e.what();
  }
  nothing_left("stopped by a cap one byte below the smallest that worked");
}

INSTANTIATE_TEST_SUITE_P(Problems, ConformanceTest, ::testing::ValuesIn(ProblemNames()),
                         [](const auto& info) { return info.param; });

// relu'(0) = 0 end to end (JAX and PyTorch agree): on exact zeros of both
// signs, directly and through a matmul whose row of zeros gives exact zeros,
// inside a checkpoint region so that an engine that recomputes does so at the
// kink. loss = sum(relu(x) * v) + sum(relu(x @ w) * u), in a region:
//   x = [[0, -0, 1, -1], [0, 0, 0, 0]] (2x4), v = 2, w = 1 (4x3), u = 3.
//   d/dx of the first sum: v where x > 0: [[0, 0, 2, 0], [0, 0, 0, 0]];
//   x @ w = [[0, 0, 0], [0, 0, 0]] (row 0: 0 - 0 + 1 - 1; row 1: zeros), so
//   relu'(x @ w) = 0 everywhere and the second sum adds nothing to dx, dw.
//   dv = relu(x) = [[0, 0, 1, 0], [0, 0, 0, 0]]; du = relu(x @ w) = 0.
TEST(ReluAtZeroTest, TheDerivativeAtZeroIsZeroEndToEnd) {
  Program program = Trace(
      "relu_at_zero",
      {{"x", Shape({2, 4})}, {"v", Shape({2, 4})}, {"w", Shape({4, 3})}, {"u", Shape({2, 3})}},
      [](const std::vector<Var>& in) {
        auto region = checkpoint(
            [](Var x, Var v, Var w, Var u) {
              return add(sum(mul(relu(x), v)), sum(mul(relu(matmul(x, w)), u)));
            },
            Policy(), "kink");
        return region(in[0], in[1], in[2], in[3]);
      });
  std::vector<Tensor> args;
  const std::vector<std::vector<float>> values = {
      {0.0f, -0.0f, 1.0f, -1.0f, 0, 0, 0, 0}, std::vector<float>(8, 2.0f),
      std::vector<float>(12, 1.0f), std::vector<float>(6, 3.0f)};
  for (int i = 0; i < 4; ++i) {
    Tensor t = Tensor::Zeros(DType::kF32, program.shapes[i]);
    for (int64_t j = 0; j < t.num_elements(); ++j) t.f32()[j] = values[i][j];
    args.push_back(t);
  }
  for (const std::string& spec : {std::string("as-written"), std::string("everything_saveable")}) {
    const Program p =
        spec == "as-written" ? program : ApplyPolicy(program, Policy::Parse(spec));
    Result r = MakeEngine(EngineUnderTest())->ValueAndGrad(p, args, {0, 1, 2, 3});
    const std::vector<std::vector<double>> want = {
        {0, 0, 2, 0, 0, 0, 0, 0}, {0, 0, 1, 0, 0, 0, 0, 0}, std::vector<double>(12, 0.0),
        std::vector<double>(6, 0.0)};
    EXPECT_EQ(r.value.at(0), 2.0) << spec;
    for (int g = 0; g < 4; ++g) {
      for (int64_t j = 0; j < r.grads[g].num_elements(); ++j) {
        EXPECT_EQ(r.grads[g].at(j), want[g][j])
            << EngineUnderTest() << " under " << spec << ": grad " << program.param_names[g]
            << "[" << j << "] (relu'(0) must be 0)";
      }
    }
  }
}

// LayerNorm's epsilon is 1e-5 and its variance the biased one, end to end:
// on rows whose variance (2.4e-6 and 4.8e-6) is of the order of epsilon, so
// that 1e-6 (or 1e-5 added elsewhere, or an unbiased variance) moves every
// output by tens of percent, where the transformer's rows (variance near
// 1/3) move by 1e-5 relative, inside the f32 tolerance. Inside a checkpoint
// region, so that an engine that recomputes does so here too; against the
// oracle, within 1e-4 of each tensor's largest magnitude (f32 rounding is
// 1e-6 here). loss = sum(layer_norm(x, gamma, beta) * v).
TEST(LayerNormEpsilonTest, IsTheContractsEndToEnd) {
  Program program = Trace(
      "layer_norm_epsilon",
      {{"x", Shape({2, 4})}, {"gamma", Shape({4})}, {"beta", Shape({4})}, {"v", Shape({2, 4})}},
      [](const std::vector<Var>& in) {
        auto region = checkpoint(
            [](Var x, Var gamma, Var beta, Var v) {
              return sum(mul(layer_norm(x, gamma, beta), v));
            },
            Policy(), "normalized");
        return region(in[0], in[1], in[2], in[3]);
      });
  const float u = 1.0f / 1024;  // exact: the rows' means and deviations are exact too
  const std::vector<std::vector<float>> values = {
      {u, -u, 3 * u, -3 * u, 2 * u, 0, -u, 3 * u},
      {1.0f, 0.5f, -2.0f, 1.5f},
      {0.25f, 0.0f, -0.5f, 1.0f},
      {1.0f, -2.0f, 3.0f, 0.5f, -1.0f, 2.0f, 0.25f, -3.0f}};
  std::vector<Tensor> args;
  for (int i = 0; i < 4; ++i) args.push_back(Tensor::FromF32(program.shapes[i], values[i]));
  const std::vector<int> wrt = {0, 1, 2, 3};
  const Result ref = MakeEngine("oracle")->ValueAndGrad(program, args, wrt);
  for (const std::string& spec : {std::string("as-written"), std::string("everything_saveable")}) {
    const Program p =
        spec == "as-written" ? program : ApplyPolicy(program, Policy::Parse(spec));
    const Result r = MakeEngine(EngineUnderTest())->ValueAndGrad(p, args, wrt);
    std::vector<const Tensor*> got = {&r.value}, want = {&ref.value};
    for (int g = 0; g < 4; ++g) {
      got.push_back(&r.grads[g]);
      want.push_back(&ref.grads[g]);
    }
    for (size_t t = 0; t < got.size(); ++t) {
      double scale = 0;
      for (int64_t j = 0; j < want[t]->num_elements(); ++j) {
        scale = std::max(scale, std::abs(want[t]->at(j)));
      }
      for (int64_t j = 0; j < want[t]->num_elements(); ++j) {
        EXPECT_LE(std::abs(got[t]->at(j) - want[t]->at(j)), 1e-4 * scale)
            << EngineUnderTest() << " under " << spec << ": "
            << (t == 0 ? std::string("the value") : "grad " + program.param_names[t - 1]) << "["
            << j << "] is " << got[t]->at(j) << ", the oracle's " << want[t]->at(j)
            << " (LayerNorm's epsilon is 1e-5, its variance biased)";
      }
    }
  }
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  // --engine=NAME is read before GoogleTest registers the parameterized tests.
  // After InitGoogleTest, only our flags are left: anything else (a
  // misspelled --engine) is an error, never a silent run on eager.
  ::testing::InitGoogleTest(&argc, argv);
  bool named = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--engine=", 9) == 0) {
      remat::EngineUnderTest() = argv[i] + 9;
      named = true;
    } else {
      std::fprintf(stderr, "conformance_test: unknown flag %s (it takes --engine=NAME)\n", argv[i]);
      return 2;
    }
  }
  if (!named) {
    std::fprintf(stderr, "conformance_test: --engine=NAME is required\n");
    return 2;
  }
  try {
    remat::MakeEngine(remat::EngineUnderTest());
  } catch (const remat::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  std::printf("engine under test: %s\n", remat::EngineUnderTest().c_str());
  return RUN_ALL_TESTS();
}
