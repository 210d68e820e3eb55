// The oracle's rules for the random ops: dropout, its mask drawn from the
// contract's generator (CONTRACT.md, randomness).
#include <vector>

#include "engines/api/philox.h"  // the contract's generator (CONTRACT.md, randomness)
#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// Dropout keeps element i of op `op` when its bits under the seed (a
// scalar, held as f64 here: every i32 is exact) clear the threshold of p.
bool Kept(const Op& op, const Tensor& seed, int64_t i) {
  const int64_t key = op.ints.empty() ? 0 : op.ints[0];
  return RandomBits(static_cast<int32_t>(seed.at(0)), key, i) >= DropThreshold(op.scalar);
}

Shape DropoutShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (in[1].rank() != 0) throw ShapeError(op, in, "takes a scalar seed");
  return in[0];
}

void DropoutForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                    int64_t* flops) {
  // Element i kept when its bits clear p's threshold; kept ones divided
  // by 1 - p (the kernels multiply by its reciprocal: a rounding apart).
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t n = in[0]->num_elements();
  for (int64_t i = 0; i < n; ++i) y[i] = Kept(op, *in[1], i) ? x[i] / (1 - op.scalar) : 0.0;
  *flops += n;
}

void DropoutVjp(const VjpArgs& a) {
  // y_i = x_i keep_i / (1 - p): dx_i = dy_i keep_i / (1 - p), the
  // forward's mask redrawn from the seed. The seed gets no gradient.
  const double* dy = a.dy.f64();
  const int64_t n = a.in[0]->num_elements();
  Tensor dx = a.NewGradient(a.in[0]->shape());
  for (int64_t i = 0; i < n; ++i) {
    dx.f64()[i] = Kept(a.op, *a.in[1], i) ? dy[i] / (1 - a.op.scalar) : 0.0;
  }
  *a.flops += n;
  a.Contribute(0, std::move(dx));
}

}  // namespace

const std::vector<OpEntry>& RandomRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kDropout,
       {DropoutShape, DropoutForward, DropoutVjp, RoundedSameOpMagnitude, LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
