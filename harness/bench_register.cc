#include "harness/bench_register.h"

#include <exception>
#include <map>
#include <regex>
#include <string>

#include "engines/api/engine.h"
#include "engines/api/registry.h"
#include "harness/bench_matmul_bound.h"
#include "harness/bench_sampling.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat::bench {

bool FilterSelects(std::string filter, const std::string& name) {
  // A string, not the literal: GCC 12 inlines assign(const char*) here and
  // warns of a false -Wrestrict (its bug 105329).
  if (filter.empty() || filter == "all") filter = std::string(".");
  bool negate = false;
  if (filter[0] == '-') {
    negate = true;
    filter = filter.substr(1);
  }
  try {
    return std::regex_search(name, std::regex(filter, std::regex::extended)) != negate;
  } catch (const std::regex_error&) {
    return true;  // the library reports a bad filter itself
  }
}

double RowWeight(BenchSession& session, const PlannedRow& row) {
  std::map<std::string, double>& by_case = session.weight_by_case;
  if (row.kind == RowKind::kMatMulBound) return kBoundMinSeconds;
  if (row.big || !row.program_file.empty()) {
    return SamplingWeight(0);
  }
  auto it = by_case.find(row.case_key);
  if (it != by_case.end()) return it->second;
  double weight = SamplingWeight(0);
  try {
    const Problem& problem = FindProblem(row.problem);
    const ParamValues values(row.params.begin(), row.params.end());
    const Program program = problem.Build(values);
    RunOptions options;
    options.plan_only = true;
    const Stats s = MakeEngine(kBaselineEngine)
                        ->ValueAndGrad(program, ShapeOnlyArguments(program),
                                       WrtIndices(problem, program), options)
                        .stats;
    weight = SamplingWeight(s.flops_forward + s.flops_recomputed + s.flops_backward);
  } catch (const std::exception&) {
    // The row reports its error when it runs; here it weighs the floor.
  }
  by_case.emplace(row.case_key, weight);
  return weight;
}

}  // namespace remat::bench
