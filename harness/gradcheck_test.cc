// The oracle is checked too: the float64 reference's gradients against
// central finite differences, as torch.autograd.gradcheck does, for every
// problem at its test size.
//
//   fd_i = (f(x + h e_i) - f(x - h e_i)) / 2h,  h = 1e-6 * max(1, |x_i|)
//   pass when |fd_i - g_i| <= atol + rtol * |g_i|,  atol = 1e-5, rtol = 1e-3
//
// (gradcheck's defaults). Truncation error is O(h^2 f''') and rounding error
// O(eps |f| / h) ~ 1e-10 |f| in float64, both far inside the tolerance.
// Inputs near a relu kink could still fail; the seeded inputs are checked to
// keep every element at least 2h from one (a failure there would name it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engines/api/registry.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat {
namespace {

constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-3;
constexpr int kMaxElementsPerInput = 64;

class GradcheckTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GradcheckTest, ReferenceMatchesCentralDifferences) {
  const Problem& problem = FindProblem(GetParam());
  Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  std::unique_ptr<Engine> reference = MakeEngine("reference");
  std::vector<Tensor> x;
  for (const Tensor& t : c.inputs) x.push_back(Cast(t, DType::kF64));
  Result base = reference->ValueAndGrad(c.program, x, c.wrt);
  auto loss = [&](const std::vector<Tensor>& args) {
    return reference->ValueAndGrad(c.program, args, {}).value.f64()[0];
  };
  int checked = 0;
  for (size_t j = 0; j < c.wrt.size(); ++j) {
    Tensor& input = x[c.wrt[j]];
    const int64_t n = input.num_elements();
    const int64_t stride = std::max<int64_t>(1, n / kMaxElementsPerInput);
    for (int64_t i = 0; i < n; i += stride) {
      const double saved = input.f64()[i];
      const double h = 1e-6 * std::max(1.0, std::abs(saved));
      input.f64()[i] = saved + h;
      const double plus = loss(x);
      input.f64()[i] = saved - h;
      const double minus = loss(x);
      input.f64()[i] = saved;
      const double fd = (plus - minus) / (2 * h);
      const double g = base.grads[j].f64()[i];
      EXPECT_LE(std::abs(fd - g), kAtol + kRtol * std::abs(g))
          << c.ToString() << ": d loss / d " << c.program.param_names[c.wrt[j]] << "[" << i
          << "]: analytic " << g << ", central difference " << fd;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

std::vector<std::string> ProblemNames() {
  std::vector<std::string> names;
  for (const auto& p : AllProblems()) names.push_back(p->name());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Problems, GradcheckTest, ::testing::ValuesIn(ProblemNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace remat
