// The memory_budget:B curve on shapes alone (dry runs: exact bytes, FLOPs
// and peaks, no arithmetic, no storage), the numbers of results/REPORT.md's
// budget section and of --sweep=budget's rows:
//
//   tools/bazel run //harness:budget_curve > results/budget_curve-DATE.tsv
//   /usr/bin/python3 tools/plot_budget.py results/budget_curve-DATE.tsv --out results
//
// For every problem at its first bench size (DefaultBenchSizes: the default
// run's; transformer_stack at L=4), `recompute` under each policy and
// schedule of kBudgetSweepPolicies (memory_budget:0 ... 1, JAX's policies,
// the schedules where the problem has a scan or a chain), and eager: one
// tab-separated line each with the residual bytes, the planned peak, the
// activations' high-water mark, and FLOPs forward and recomputed.
//
// The second mode (memory_budget:peak:B, engines/budget/peak_budget.h):
//
//   tools/bazel run //harness:budget_curve -- --peak=29MiB,30MiB,32MiB,min
//       [--problem=transformer_stack]
//
// resolves memory_budget:peak:LIMIT for each limit on the problem (default
// transformer_stack) at its first bench size, by recompute's dry runs, and
// prints one line each: the fraction chosen, the predicted peak and the
// recomputed FLOPs (or why no plan fits).
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/budget/peak_budget.h"
#include "harness/bench_lib.h"
#include "harness/case_spec.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat {
namespace {

using bench::DefaultBenchSizes;
using bench::kBudgetSweepPolicies;

int Peak(const std::string& problem_name, const std::string& limits) {
  const Problem& problem = FindProblem(problem_name);
  const ParamValues size = DefaultBenchSizes(problem).front();
  Case c = MakeCase(problem, size);
  std::string size_text;
  for (const auto& [k, v] : size) size_text += StrCat(size_text.empty() ? "" : ",", k, "=", v);
  std::unique_ptr<Engine> engine = MakeEngine("recompute");
  auto dry = [&](const Program& p) {
    RunOptions o;
    o.plan_only = true;
    return engine->ValueAndGrad(p, c.inputs, c.wrt, o).stats;
  };
  std::printf("problem\tsize\tpolicy\tfraction\tpeak_bytes\tflops_recomputed\tdry_runs\tcandidates\n");
  for (size_t start = 0; start < limits.size();) {
    size_t end = limits.find(',', start);
    if (end == std::string::npos) end = limits.size();
    const std::string policy = "memory_budget:peak:" + limits.substr(start, end - start);
    start = end + 1;
    const Program program = ApplyPolicy(c.program, Policy::Parse(policy));
    try {
      const PeakBudgetResolution r = ResolvePeakBudget(program, c.wrt, 4, dry);
      std::printf("%s\t%s\t%s\t%.17g\t%lld\t%lld\t%d\t%d\n", problem.name().c_str(),
                  size_text.c_str(), policy.c_str(), r.fraction,
                  static_cast<long long>(r.peak_bytes), static_cast<long long>(r.recomputed_flops),
                  r.dry_runs, r.candidates);
    } catch (const Error& e) {
      std::printf("%s\t%s\t%s\tinfeasible\t-\t-\t-\t-\t# %s\n", problem.name().c_str(),
                  size_text.c_str(), policy.c_str(), e.what());
    }
  }
  return 0;
}

int Main() {
  std::printf(
      "problem\tsize\tengine\tpolicy\tresidual_bytes\tpeak_bytes\tactivations_high_water\t"
      "flops_forward\tflops_recomputed\n");
  for (const auto& problem : AllProblems()) {
    const ParamValues size = DefaultBenchSizes(*problem).front();
    Case c = MakeCase(*problem, size);
    std::string size_text;  // "-" for a problem without parameters
    for (const auto& [k, v] : size) size_text += StrCat(size_text.empty() ? "" : ",", k, "=", v);
    if (size_text.empty()) size_text = "-";
    auto emit = [&](const std::string& engine_name, const std::string& policy) {
      Program program = c.program;
      try {
        program = CaseVariant::Parse(policy).Apply(c.program);
      } catch (const Error&) {
        return;  // a schedule on a problem without a scan or a chain
      }
      std::unique_ptr<Engine> engine = MakeEngine(engine_name);
      RunOptions o;
      o.plan_only = true;
      const Result r = engine->ValueAndGrad(program, c.inputs, c.wrt, o);
      const Stats& s = r.stats;
      std::printf("%s\t%s\t%s\t%s\t%lld\t%lld\t%lld\t%lld\t%lld\n", problem->name().c_str(),
                  size_text.c_str(), engine_name.c_str(), policy.c_str(),
                  static_cast<long long>(s.residual_bytes), static_cast<long long>(s.peak_bytes),
                  static_cast<long long>(
                      s.high_water_bytes_by_category[static_cast<int>(Category::kActivations)]),
                  static_cast<long long>(s.flops_forward),
                  static_cast<long long>(s.flops_recomputed));
    };
    emit("eager", CaseVariant::kAsWrittenLabel);
    const std::string policies = kBudgetSweepPolicies;  // ';'-separated
    for (size_t start = 0; start < policies.size();) {
      size_t end = policies.find(';', start);
      if (end == std::string::npos) end = policies.size();
      emit("recompute", policies.substr(start, end - start));
      start = end + 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  try {
    std::string peak, problem = "transformer_stack";
    for (int i = 1; i < argc; ++i) {
      if (std::strncmp(argv[i], "--peak=", 7) == 0) {
        peak = argv[i] + 7;
      } else if (std::strncmp(argv[i], "--problem=", 10) == 0) {
        problem = argv[i] + 10;
      } else {
        std::fprintf(stderr, "budget_curve: unknown flag %s (--peak=LIMITS, --problem=NAME)\n",
                     argv[i]);
        return 2;
      }
    }
    if (!peak.empty()) return remat::Peak(problem, peak);
    return remat::Main();
  } catch (const remat::Error& e) {
    std::fprintf(stderr, "budget_curve: %s\n", e.what());
    return 1;
  }
}
