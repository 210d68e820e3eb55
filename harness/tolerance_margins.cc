// Prints, for every problem (or those named), each output's rounding depth
// K, its rounding magnitude (the oracle's, for the value and the state: how
// many times the output's own largest magnitude it is; 1 for a gradient,
// whose tolerance is relative to itself), its tolerance against the
// float64 oracle as a fraction of the output's largest magnitude, how much
// of the tolerance an engine's error used, then (old) how much it would use
// of a tolerance relative to the output's own magnitude, and for a gradient
// the oracle's gradient magnitude over its largest |value|, which the
// verdict does not use (harness/conformance.h says why):
//
//   tools/bazel run //harness:tolerance_margins                 # test sizes, eager
//   tools/bazel run //harness:tolerance_margins -- --default_sizes --engine=recompute
//   tools/bazel run //harness:tolerance_margins -- scan_stack mlp_chain
//   tools/bazel run //harness:tolerance_margins -- --default_sizes --bounds_only
// (--bounds_only: K and the tolerance from the program alone, nothing run:
// the oracle's plain loops take minutes at the default sizes.)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/oracle/oracle.h"
#include "harness/conformance.h"
#include "harness/rounding_depth.h"
#include "problems/problem.h"

int main(int argc, char** argv) {
  std::string engine = "eager";
  bool default_sizes = false;
  bool bounds_only = false;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--engine=", 9) == 0) {
      engine = argv[i] + 9;
    } else if (std::strcmp(argv[i], "--default_sizes") == 0) {
      default_sizes = true;
    } else if (std::strcmp(argv[i], "--bounds_only") == 0) {
      bounds_only = true;
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "tolerance_margins: unknown flag %s\n", argv[i]);
      return 2;
    } else {
      names.push_back(argv[i]);
    }
  }
  try {
    if (names.empty()) {
      for (const auto& p : remat::AllProblems()) names.push_back(p->name());
    }
    std::printf("%-34s %-16s %10s %12s %12s %10s %10s %16s\n", "case", "output", "K", "M/max|ref|",
                "tol/max|ref|", "used", "used(old)", "grad M (unused)");
    for (const std::string& name : names) {
      const remat::Problem& problem = remat::FindProblem(name);
      remat::Case c = remat::MakeCase(problem, remat::ResolveParams(problem, {}, !default_sizes));
      c.wrt.clear();
      for (int i = 0; i < c.program.num_params(); ++i) {
        if (c.program.dtype(i) != remat::DType::kI32) c.wrt.push_back(i);  // never differentiated
      }
      if (bounds_only) {
        const std::vector<double> k = remat::RoundingDepths(c.program, c.wrt);
        const std::vector<std::string> outputs = remat::OutputNames(c);
        for (size_t t = 0; t < k.size(); ++t) {
          std::printf("%-34s %-16s %10.0f %12s %12.2e %10s %10s\n", c.ToString().c_str(),
                      outputs[t].c_str(), k[t], "-", remat::kF32ToleranceFactor * k[t] * 0x1p-24,
                      "-", "-");
        }
        std::fflush(stdout);
        continue;
      }
      std::unique_ptr<remat::Engine> e = remat::MakeEngine(engine);
      remat::Result got = e->ValueAndGrad(c.program, c.inputs, c.wrt);
      remat::Result ref = remat::MakeEngine("oracle")->ValueAndGrad(c.program, c.inputs, c.wrt);
      const remat::Agreement a =
          remat::CompareWithOracle(c, got, ref, e->dtype(), /*always_magnitudes=*/true);
      // The oracle's gradient magnitudes, which the verdict does not use
      // (harness/conformance.h): how far a bound built on them would reach.
      const remat::OracleMagnitudes grad_magnitudes =
          remat::OracleRoundingMagnitudes(c.program, c.inputs, c.wrt);
      for (size_t i = 0; i < a.tensors.size(); ++i) {
        const auto& t = a.tensors[i];
        const double fraction = t.max_abs > 0 ? t.tolerance / t.max_abs : 0;
        const double times = t.max_abs > 0 ? t.magnitude / t.max_abs : 1;
        char unused[32] = "-";
        if (i >= 1 && i <= grad_magnitudes.grads.size() && t.max_abs > 0) {
          const remat::Tensor& m = grad_magnitudes.grads[i - 1];
          double largest = 0;
          for (int64_t j = 0; j < m.num_elements(); ++j) largest = std::max(largest, m.at(j));
          std::snprintf(unused, sizeof unused, "%.2f", largest / t.max_abs);
        }
        std::printf("%-34s %-16s %10.0f %12.2f %12.2e %9.1f%% %9.1f%% %16s\n",
                    c.ToString().c_str(), t.name.c_str(), t.k, times, fraction,
                    100 * t.worst_ratio, 100 * t.worst_ratio_own, unused);
      }
      if (!a.ok) std::printf("  OUT OF TOLERANCE: %s\n", a.detail.c_str());
      std::fflush(stdout);
    }
  } catch (const remat::Error& e) {
    std::fprintf(stderr, "tolerance_margins: %s\n", e.what());
    return 1;
  }
  return 0;
}
