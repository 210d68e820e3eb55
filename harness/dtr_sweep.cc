// dtr against the budget:B schedule at the same activation memory, on
// shapes alone (dry runs: exact bytes and FLOPs, no arithmetic, no storage):
//
//   tools/bazel run //harness:dtr_sweep -- [--engine=dtr|dtr_eq] [--problems=scan_stack,mlp_chain]
//       [--depths=16,64,256,1024] [--points=5] [--param=d=512 ...]
//
// For each problem and depth L: eager's planned peak P, dtr's smallest
// feasible cap S (bisection over dry runs), and `points` caps from S to P.
// At each cap, dtr's measured peak, activations high-water A and recomputed
// FLOPs; then `recompute` under --schedule budget:A (which bounds the
// activations' high-water mark by A) planned on the same shapes: its peak,
// activations and recomputed FLOPs; and budget:B for the largest B whose
// planned peak fits under the same cap (the same total memory): its
// activations' high-water mark and recomputed FLOPs. Recomputation is also shown as a multiple of the forward
// pass's FLOPs.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/dtr/dtr_engine.h"
#include "harness/conformance.h"
#include "harness/memory_caps.h"
#include "problems/problem.h"

namespace remat {
namespace {

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int64_t Activations(const Stats& s) {
  return s.high_water_bytes_by_category[static_cast<int>(Category::kActivations)];
}

double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 0; }

int Main(int argc, char** argv) {
  std::string engine = "dtr";
  std::vector<std::string> problems = {"scan_stack", "mlp_chain"};
  std::vector<int64_t> depths = {16, 64, 256, 1024};
  int points = 5;
  std::vector<std::string> param_flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> std::optional<std::string> {
      const std::string prefix = std::string(flag) + "=";
      if (a.rfind(prefix, 0) != 0) return std::nullopt;
      return a.substr(prefix.size());
    };
    if (auto v = value("--engine")) {
      engine = *v;
    } else if (auto v = value("--problems")) {
      problems = Split(*v);
    } else if (auto v = value("--depths")) {
      depths.clear();
      for (const std::string& d : Split(*v)) depths.push_back(std::stoll(d));
    } else if (auto v = value("--points")) {
      points = std::stoi(*v);
    } else if (auto v = value("--param")) {
      param_flags.push_back(*v);
    } else {
      throw Error(StrCat("dtr_sweep: unknown argument ", a,
                         " (--engine, --problems, --depths, --points, --param)"));
    }
  }
  if (points < 2) throw Error("--points: at least 2 (the smallest cap and eager's peak)");
  const std::map<std::string, int64_t> overrides = ParseParamFlags(param_flags);
  DtrEngine dtr(engine == "dtr_eq" ? dtr::Heuristic::kDtrEqClass : dtr::Heuristic::kDtr);
  if (dtr.name() != engine) throw Error(StrCat("--engine: dtr or dtr_eq, not ", engine));
  std::unique_ptr<Engine> eager = MakeEngine("eager");
  RunOptions plan;
  plan.plan_only = true;
  std::printf("%-10s %5s %6s %13s | %13s %13s %11s %6s | %13s %13s %11s %6s | %13s %11s %6s\n",
              "problem", "L", "cap", "cap bytes", engine.c_str(), "activations A", "recomputed",
              "x fwd", "budget:A peak", "activations", "recomputed", "x fwd", "budget<=cap A",
              "recomputed", "x fwd");
  for (const std::string& name : problems) {
    const Problem& problem = FindProblem(name);
    for (const int64_t depth : depths) {
      std::map<std::string, int64_t> o = overrides;
      o["L"] = depth;
      const ParamValues params = ResolveParams(problem, o);
      const Program program = problem.Build(params);
      const std::vector<Tensor> args = ShapeOnlyArguments(program);
      const std::vector<int> wrt = WrtIndices(problem, program);
      const Stats e = eager->ValueAndGrad(program, args, wrt, plan).stats;
      const int64_t smallest = dtr.SmallestFeasibleCap(program, args, wrt);
      std::printf("# %s %s: eager peak %lld, activations %lld; %s's smallest cap %lld\n",
                  name.c_str(), FormatParams(params).c_str(),
                  static_cast<long long>(e.peak_bytes), static_cast<long long>(Activations(e)),
                  engine.c_str(), static_cast<long long>(smallest));
      for (int k = 0; k < points; ++k) {
        const int64_t cap = smallest + (e.peak_bytes - smallest) * k / (points - 1);
        RunOptions capped = plan;
        capped.memory_cap_bytes = cap;
        const Stats d = dtr.ValueAndGrad(program, args, wrt, capped).stats;
        char same_a[128] = "";
        int64_t smallest_budget = 0;
        if (std::optional<Stats> b =
                PlanBudget(program, wrt, Activations(d), &smallest_budget)) {
          std::snprintf(same_a, sizeof same_a, "%13lld %13lld %11.4g %6.2f",
                        static_cast<long long>(b->peak_bytes),
                        static_cast<long long>(Activations(*b)),
                        static_cast<double>(b->flops_recomputed),
                        Ratio(b->flops_recomputed, b->flops_forward));
        } else {
          std::snprintf(same_a, sizeof same_a, "%-53s",
                        StrCat("infeasible (smallest budget ", smallest_budget, ")").c_str());
        }
        char same_peak[128] = "";
        if (auto b = LargestBudgetUnder(program, wrt, cap, Activations(e))) {
          std::snprintf(same_peak, sizeof same_peak, "%13lld %11.4g %6.2f",
                        static_cast<long long>(Activations(b->second)),
                        static_cast<double>(b->second.flops_recomputed),
                        Ratio(b->second.flops_recomputed, b->second.flops_forward));
        } else {
          std::snprintf(same_peak, sizeof same_peak, "%s", "no budget fits");
        }
        std::printf("%-10s %5lld %5.0f%% %13lld | %13lld %13lld %11.4g %6.2f | %s | %s\n",
                    name.c_str(), static_cast<long long>(depth),
                    100.0 * Ratio(cap, e.peak_bytes), static_cast<long long>(cap),
                    static_cast<long long>(d.peak_bytes), static_cast<long long>(Activations(d)),
                    static_cast<double>(d.flops_recomputed),
                    Ratio(d.flops_recomputed, d.flops_forward), same_a, same_peak);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  try {
    return remat::Main(argc, argv);
  } catch (const remat::Error& e) {
    std::fprintf(stderr, "dtr_sweep: %s\n", e.what());
    return 1;
  }
}
