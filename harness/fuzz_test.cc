// Differential testing of random programs (harness/random_program.h): for
// every case (regions under JAX's policies and memory_budget:B, bias_add
// among the ops), the engine under test (--engine=NAME, default recompute) equals
// eager bit for bit if it declares eager's kernels (Engine::kernels), or else
// agrees with the float64 oracle (engines/oracle) within tolerance, under the
// case's own random policies, whole-program policies and a schedule; eager
// agrees with the oracle; the reported peak is the tracker's, and equals the
// predicted one wherever an engine predicts; the residuals were live at once;
// every tracker ends at zero live bytes; and no tensor storage is allocated
// outside the trackers a run reports. Every engine's engine_conformance_test
// runs this binary for its engine too.
//
//   bazel-bin/harness/fuzz_test                      # the CI run: --cases=3000
//   bazel-bin/harness/fuzz_test --engine=dtr         # another engine
//   bazel-bin/harness/fuzz_test --seconds=3600       # soak for an hour
//   bazel-bin/harness/fuzz_test --seed=1234          # replay one case
//
// A failing case is shrunk (the same seed with fewer ops, shallower nesting,
// smaller dims) and printed with the command that replays it.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/api/tensor.h"
#include "harness/conformance.h"
#include "harness/random_program.h"
#include "harness/rounding_depth.h"

namespace remat {
namespace {

struct Flags {
  std::string engine = "recompute";
  uint64_t first_seed = 1;
  std::optional<uint64_t> seed;  // replay exactly one case
  int cases = 2000;
  double seconds = 0;  // > 0: soak for this long instead
  RandomOptions options;
};

Flags& GetFlags() {
  static Flags flags;
  return flags;
}

const char* const kWholePolicies[] = {"nothing_saveable", "everything_saveable",
                                      "dots_saveable", "save_only_these_names:a,b",
                                      "offload_dot_with_no_batch_dims"};

// One engine of each name for the whole run (oneDNN's primitive cache then
// serves every case).
Engine* MakeEngineCached(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Engine>> engines;
  auto& e = engines[name];
  if (!e) e = MakeEngine(name);
  return e.get();
}

// The first element where `got` differs from `want` by more than
// kF32ToleranceFactor K 2^-24 times the case's scale, K each output's
// rounding depth (harness/rounding_depth.h) and the scale the largest
// magnitude of any oracle output.
std::optional<std::string> CompareToOracle(const RandomCase& c, const Result& got,
                                           const Result& want) {
  std::vector<const Tensor*> g = {&got.value}, w = {&want.value};
  for (size_t i = 0; i < got.grads.size(); ++i) {
    g.push_back(&got.grads[i]);
    w.push_back(&want.grads[i]);
  }
  // The case's scale: a gradient that cancels to ~0 still had terms of the
  // case's size, and their rounding is what differs. Each output's own K.
  double scale = 0;
  for (const Tensor* t : w) {
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      if (std::isfinite(t->at(i))) scale = std::max(scale, std::abs(t->at(i)));
    }
  }
  const std::vector<double> depths = RoundingDepths(c.program, c.wrt);
  for (size_t t = 0; t < g.size(); ++t) {
    const double tolerance = kF32ToleranceFactor * depths[t] * std::ldexp(1.0, -24) * scale;
    for (int64_t i = 0; i < w[t]->num_elements(); ++i) {
      const double err = std::abs(g[t]->at(i) - w[t]->at(i));
      if (!(err <= tolerance) && !(std::isnan(g[t]->at(i)) && std::isnan(w[t]->at(i)))) {
        return StrCat(t == 0 ? "value" : StrCat("gradient ", t - 1), "[", i, "]: ", g[t]->at(i),
                      " vs oracle ", w[t]->at(i), ", tolerance ", tolerance, " (K=", depths[t],
                      ")");
      }
    }
  }
  return std::nullopt;
}

// True when the oracle itself jumps under perturbations of the inputs
// as small as f32's rounding (2^-23 relative): the case sits on a kink
// (relu at 0), where f32 and f64 may take different branches and no
// tolerance applies. A smooth case moves by O(1e-7) there, far inside it.
// Each perturbation is tried with both signs: a relu input that is exactly
// 0 and moves with the inputs crosses to its other branch under one of the
// two, so a kink is found whatever the draw (one sign alone missed one in
// 16 four-draw tries).
bool NearAKink(const RandomCase& c, Engine& oracle, const Result& ref) {
  uint64_t state = c.seed;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<Tensor> up, down;
    for (const Tensor& t : c.inputs) {
      if (t.dtype() == DType::kI32) {  // ids, seeds and masks are not nudged
        up.push_back(t);
        down.push_back(t);
        continue;
      }
      Tensor u = Cast(t, DType::kF64), d = Cast(t, DType::kF64);
      for (int64_t i = 0; i < u.num_elements(); ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const double nudge = ((state >> 11) * 0x1.0p-53 - 0.5) * 0x1.0p-22;
        u.f64()[i] += nudge;
        d.f64()[i] -= nudge;
      }
      up.push_back(u);
      down.push_back(d);
    }
    for (const std::vector<Tensor>* nudged : {&up, &down}) {
      Result other = oracle.ValueAndGrad(c.program, *nudged, c.wrt);
      if (CompareToOracle(c, other, ref).has_value()) return true;
    }
  }
  return false;
}


// What the checked cases covered: programs containing each op kind, cases
// per schedule, and how many were informative (a reference comparison on
// gradients that are mostly nonzero).
struct Coverage {
  std::map<std::string, int> programs_with;  // by OpKindName
  std::map<std::string, int> schedules;      // by spec, cases where it applied
  int chains = 0;                            // scheduled cases with a chain of regions
  int memory_budgets = 0;                    // programs with a memory_budget:B region
  int checked = 0;
  int mostly_zero = 0;  // gradients mostly zero: every check ran, but it proves less
  int kinks = 0;        // near a relu kink: no comparison with the reference
};
Coverage& GetCoverage() {
  static Coverage coverage;
  return coverage;
}

const char* const kSchedules[] = {"revolve:1", "bisect", "every:2", "sqrt", "budget:16KiB",
                                  "checkpoint_every:2"};

// Whether a checkpoint region of `p` (at any depth) holds a structural op.
bool HasNestedRegion(const Program& p, bool inside = false) {
  for (const Op& op : p.ops) {
    if (!op.body) continue;
    if (inside || HasNestedRegion(*op.body, inside || op.kind == OpKind::kCheckpoint)) return true;
  }
  return false;
}

// Whether `p` (at any depth) has a region under memory_budget:B.
bool HasMemoryBudget(const Program& p) {
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCheckpoint && op.policy.kind() == PolicyKind::kMemoryBudget) return true;
    if (op.body && HasMemoryBudget(*op.body)) return true;
  }
  return false;
}

// The first property the case violates, or nothing. Every case gets the
// bit-for-bit, peak and leak checks (they need no nonzero gradient); only a
// case on a relu kink skips the comparison with the reference. `coverage`
// (null while shrinking) records what the case exercised.
std::optional<std::string> Check(const RandomCase& c, Coverage* coverage) {
  Engine& eager = *MakeEngineCached("eager");
  const std::string& name = GetFlags().engine;
  Engine& engine = *MakeEngineCached(name);
  const bool same_kernels = engine.kernels() == eager.kernels();
  Engine& oracle = *MakeEngineCached("oracle");
  Result ref = oracle.ValueAndGrad(c.program, c.inputs, c.wrt);
  if (coverage) {
    ++coverage->checked;
    for (int k = 0; k <= static_cast<int>(OpKind::kChain); ++k) {
      if (c.program.CountOps(static_cast<OpKind>(k)) > 0) {
        ++coverage->programs_with[OpKindName(static_cast<OpKind>(k))];
      }
    }
    coverage->memory_budgets += HasMemoryBudget(c.program);
    // Like benchdnn, a case whose gradients are mostly zero proves less.
    int64_t zeros = 0, total = 0;
    for (const Tensor& g : ref.grads) {
      for (int64_t i = 0; i < g.num_elements(); ++i) zeros += g.at(i) == 0.0;
      total += g.num_elements();
    }
    if (total == 0 || zeros * 2 > total) ++coverage->mostly_zero;
  }
  Result e = eager.ValueAndGrad(c.program, c.inputs, c.wrt);
  if (e.stats.peak_bytes != e.stats.predicted_peak_bytes) {
    return StrCat("eager: measured peak ", e.stats.peak_bytes, " != predicted ",
                  e.stats.predicted_peak_bytes);
  }
  // Eager against the oracle, unless the case sits on a kink.
  bool kink = false;
  if (std::optional<std::string> bad = CompareToOracle(c, e, ref)) {
    if (!NearAKink(c, oracle, ref)) return "eager vs the float64 oracle: " + *bad;
    kink = true;
    if (coverage) ++coverage->kinks;
  }
  // The engine under test, under the case's policies, whole-program ones and
  // a schedule over its scans and chains of regions (one per case, by seed).
  std::vector<std::pair<std::string, Program>> programs = {{"as generated", c.program}};
  for (const char* p : kWholePolicies) {
    programs.push_back({p, ApplyPolicy(c.program, Policy::Parse(p))});
  }
  const char* spec = kSchedules[c.seed % (sizeof(kSchedules) / sizeof(kSchedules[0]))];
  try {
    programs.push_back({StrCat("schedule ", spec), ApplySchedule(c.program, spec)});
    if (coverage) {
      ++coverage->schedules[spec];
      if (programs.back().second.CountOps(OpKind::kChain) > 0) ++coverage->chains;
    }
  } catch (const Error& error) {
    // Nothing to schedule is the one expected refusal.
    if (std::string(error.what()).find("has no scan and no chain") == std::string::npos) {
      return StrCat("ApplySchedule(", spec, ") threw: ", error.what());
    }
  }
  for (const auto& [what, program] : programs) {
    Result r;
    int64_t untracked = 0;
    try {
      CountedRun run = RunCountingStorage(engine, program, c.inputs, c.wrt);
      r = std::move(run.result);
      untracked = run.untracked_bytes;
    } catch (const Error& error) {
      // A budget below the smallest feasible is refused, with that number.
      if (error.kind() == ErrorKind::kBudgetTooSmall) continue;
      throw;
    }
    // Negative: storage kept from an earlier run (CONTRACT.md section 4).
    if (untracked > 0) {
      return StrCat(name, " (", what, ") allocated ", untracked,
                    " bytes of tensor storage outside the trackers it reported");
    }
    if (same_kernels) {
      if (auto diff = FirstBitDifference(e, r)) {
        return StrCat(name, " (", what, ") differs from eager in its ", *diff);
      }
    } else if (kink) {
      // No tolerance applies on a kink; the other checks still do.
    } else if (auto bad = CompareToOracle(c, r, ref)) {
      return StrCat(name, " (", what, ") vs the float64 oracle: ", *bad);
    }
    if (r.stats.peak_bytes != r.tracker->peak_bytes()) {
      return StrCat(name, " (", what, "): reported peak ", r.stats.peak_bytes,
                    " is not the tracker's high-water mark, ", r.tracker->peak_bytes());
    }
    const int64_t covered =
        r.stats.high_water_bytes_by_category[static_cast<int>(Category::kActivations)] +
        r.stats.high_water_bytes_by_category[static_cast<int>(Category::kHost)];
    if (covered < r.stats.residual_bytes) {
      return StrCat(name, " (", what, "): the residuals (", r.stats.residual_bytes,
                    " bytes) were never live at once, the activations' and host's high-water "
                    "marks are ", covered, " (a residual freed before the backward pass read it)");
    }
    if (r.stats.predicted_peak_bytes >= 0 && r.stats.peak_bytes != r.stats.predicted_peak_bytes) {
      return StrCat(name, " (", what, "): measured peak ", r.stats.peak_bytes, " != predicted ",
                    r.stats.predicted_peak_bytes);
    }
    // The residual listing against eager's on the same program (CONTRACT.md
    // section 4), value by value: exactly eager's values for an engine that
    // stores everything; for one that honours regions, under
    // everything_saveable, no value eager does not save.
    // A region nested in another keeps its inputs (its recomputation starts
    // from them, and the enclosing region's recomputation hands them over),
    // which eager need not: the subset check skips programs with one.
    const bool exact = !engine.honours_checkpoints();
    if (name != "oracle" &&
        (exact || (what == std::string("everything_saveable") && !HasNestedRegion(program)))) {
      const Stats want = what == std::string("as generated")
                             ? e.stats
                             : eager.ValueAndGrad(program, c.inputs, c.wrt).stats;
      if (auto diff = ResidualListingDiffers(want, r.stats, exact, /*values_only=*/true)) {
        return StrCat(name, " (", what, "): the residual listing ",
                      exact ? "is not eager's" : "names values eager does not save", ": ", *diff);
      }
    }
    std::shared_ptr<MemoryTracker> tracker = r.tracker;
    r = Result();
    if (tracker->live_bytes() != 0 || tracker->live_bytes(Category::kHost) != 0) {
      return StrCat(name, " (", what, "): ", tracker->live_bytes(), " bytes still live");
    }
  }
  return std::nullopt;
}

// Replays the seed with smaller options while it still fails.
RandomCase Shrink(RandomCase c) {
  bool improved = true;
  while (improved) {
    improved = false;
    for (int field = 0; field < 4; ++field) {
      RandomOptions smaller = c.options;
      int* value[] = {&smaller.max_ops, &smaller.max_depth, &smaller.max_dim, &smaller.max_length};
      if (*value[field] <= (field == 1 ? 0 : 1)) continue;
      --*value[field];
      RandomCase candidate;
      try {
        candidate = MakeRandomCase(c.seed, smaller);
        if (!Check(candidate, nullptr)) continue;
      } catch (const Error&) {
        continue;
      }
      c = candidate;
      improved = true;
    }
  }
  return c;
}

// Floors on what a run of at least kMinCasesForFloors cases must cover, so
// that a change to the generator (or to what Check accepts) cannot quietly
// turn the fuzzer into a test of nothing. Measured at 3000 cases (seed 1..):
// see the line the test prints; the floors sit well below it.
constexpr int kMinCasesForFloors = 300;
constexpr double kMinInformative = 0.6;    // not mostly-zero, not on a kink
constexpr double kMinProgramsWithOp = 0.05;
constexpr double kMinPerSchedule = 0.03;   // of checked cases, each spec
constexpr double kMinChains = 0.03;        // scheduled cases with a chain

// Where the build asks for poisoned blocks (conformance.bzl sets
// REMAT_POISON_UNINITIALIZED=1 on every engine's fuzz test), they are: a
// fresh uninitialized tensor reads NaN, so the programs below ran with it.
TEST(FuzzTest, UninitializedBlocksArePoisonedWhenAsked) {
  const char* asked = std::getenv("REMAT_POISON_UNINITIALIZED");
  if (asked != nullptr && std::strcmp(asked, "1") == 0) {
    ASSERT_TRUE(PoisonUninitialized()) << "REMAT_POISON_UNINITIALIZED=1 did not turn poison on";
  }
  if (!PoisonUninitialized()) GTEST_SKIP() << "poison is off in this run";
  for (int64_t n : {1, 17, 4096, 1 << 20}) {
    Tensor t = Tensor::Uninitialized(DType::kF32, Shape({n}), nullptr);
    EXPECT_TRUE(std::isnan(t.f32()[0]) && std::isnan(t.f32()[n - 1])) << n << " floats";
  }
}

TEST(FuzzTest, RandomProgramsAgreeAcrossEngines) {
  const Flags& f = GetFlags();
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Coverage& cov = GetCoverage();
  int failures = 0;
  for (uint64_t i = 0;; ++i) {
    const uint64_t seed = f.seed ? *f.seed : f.first_seed + i;
    if (f.seed && i > 0) break;
    if (!f.seed && f.seconds <= 0 && cov.checked >= f.cases) break;
    if (!f.seed && f.seconds > 0 && elapsed() > f.seconds) break;
    RandomCase c = MakeRandomCase(seed, f.options);
    std::optional<std::string> failure;
    try {
      failure = Check(c, &cov);
    } catch (const Error& e) {
      failure = StrCat("threw on a valid program: ", e.what());
    }
    if (failure) {
      ++failures;
      RandomCase small = Shrink(c);
      std::optional<std::string> small_failure;
      try {
        small_failure = Check(small, nullptr);
      } catch (const Error& e) {
        small_failure = StrCat("threw on a valid program: ", e.what());
      }
      ADD_FAILURE() << "seed " << seed << ": " << *failure << "\nshrunk: "
                    << small_failure.value_or(*failure) << "\nreplay: " << ReplayCommand(small)
                    << " --engine=" << f.engine << "\n" << ToString(small.program);
      if (failures >= 3) break;
    }
  }
  const double n = std::max(1, cov.checked);
  std::string ops, schedules;
  for (const auto& [op, count] : cov.programs_with) ops += StrCat(" ", op, " ", count);
  for (const auto& [spec, count] : cov.schedules) schedules += StrCat(" ", spec, " ", count);
  std::printf("fuzz (%s): %d random programs checked in %.1f s; %d with mostly-zero gradients, "
              "%d on a relu kink (no reference comparison)\n  programs with:%s\n  schedules:%s; "
              "%d with a chain of regions; %d with a memory_budget region\n",
              f.engine.c_str(), cov.checked, elapsed(), cov.mostly_zero, cov.kinks, ops.c_str(),
              schedules.c_str(), cov.chains, cov.memory_budgets);
  if (f.seed || f.seconds > 0 || cov.checked < kMinCasesForFloors || failures > 0) {
    EXPECT_GT(cov.checked, 0);
    return;
  }
  EXPECT_GE((cov.checked - cov.mostly_zero - cov.kinks) / n, kMinInformative)
      << "too few informative cases";
  for (OpKind k : {OpKind::kMatMul, OpKind::kRelu, OpKind::kSin, OpKind::kCos, OpKind::kSquare,
                   OpKind::kAdd, OpKind::kMul, OpKind::kSum, OpKind::kName, OpKind::kBiasAdd,
                   OpKind::kCheckpoint, OpKind::kScan}) {
    EXPECT_GE(cov.programs_with[OpKindName(k)] / n, kMinProgramsWithOp)
        << "too few programs with " << OpKindName(k);
  }
  for (const char* spec : kSchedules) {
    EXPECT_GE(cov.schedules[spec] / n, kMinPerSchedule) << "too few cases under " << spec;
  }
  EXPECT_GE(cov.chains / n, kMinChains) << "too few chains of regions under a schedule";
  EXPECT_GE(cov.memory_budgets / n, kMinProgramsWithOp) << "too few programs with memory_budget";
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  remat::Flags& f = remat::GetFlags();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return arg.compare(0, n, name) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--engine=")) f.engine = v;
    else if (const char* v = value("--seed=")) f.seed = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("--first_seed=")) f.first_seed = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("--cases=")) f.cases = std::atoi(v);
    else if (const char* v = value("--seconds=")) f.seconds = std::atof(v);
    else if (const char* v = value("--max_ops=")) f.options.max_ops = std::atoi(v);
    else if (const char* v = value("--max_depth=")) f.options.max_depth = std::atoi(v);
    else if (const char* v = value("--max_dim=")) f.options.max_dim = std::atoi(v);
    else if (const char* v = value("--max_length=")) f.options.max_length = std::atoi(v);
    else {
      std::fprintf(stderr, "fuzz_test: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  try {
    remat::MakeEngine(f.engine);
  } catch (const remat::Error& e) {
    std::fprintf(stderr, "fuzz_test: %s\n", e.what());
    return 2;
  }
  return RUN_ALL_TESTS();
}
