// RoundingDepths: for each output of value_and_grad (the value, then the
// gradient of each `wrt` parameter), K, the most roundings that any path
// from the inputs to one of its elements passes through, counted from the
// program's structure alone. An f32 computation whose every rounding adds a
// relative error of at most u = 2^-24 to a quantity of magnitude at most
// max|out| ends within about K u max|out| of the exact result (first order,
// Higham's gamma_K), so the suite's tolerance against the float64 oracle is
// per output: kF32ToleranceFactor * K * 2^-24 * its magnitude (the oracle's
// rounding magnitude for the value and the state, OracleRoundingMagnitudes;
// max|oracle's output| for a gradient: harness/conformance.h).
//
// Counting (forward value v = op(inputs): Kf(v); cotangent of v: Kb(v)):
//   matmul (m,k)x(k,n)      Kf = max(Kf(a), Kf(b)) + k   (a k-term sum of products)
//     its backward          dA = dC B^T: max(Kb(C), Kf(B)) + n
//                           dB = A^T dC: max(Kf(A), Kb(C)) + m
//   sum of n elements       Kf = Kf(x) + n;  dx = broadcast: Kb(out)
//   relu, name, transpose,  exact: Kf = Kf(x); dx: Kb(out)
//   split/merge_heads
//   sin, cos, square, gelu, one rounding: Kf = Kf(x) + 1;
//   scale                   dx = dy * f'(x): max(Kb(out), Kf(x)) + 2
//   add                     Kf = max + 1; da = db = dy: Kb(out)
//   mul                     Kf = max + 1; da = dy * b: max(Kb(out), Kf(b)) + 1
//   softmax over C          Kf = Kf(x) + C + 3; dx: max(Kb, Kf(y)) + C + 3
//   layer_norm over C, R    Kf = max(inputs) + 2C + 4;
//   rows                    dx: max(Kb, Kf(x), Kf(gamma)) + 3C + 6;
//                           dgamma: max(Kb, Kf(x)) + 2C + R + 4; dbeta: Kb + R
// A value read by several ops gets one contribution from each: Kb is the
// largest contribution's plus one rounding per further addition. Checkpoint
// regions and chains count as their bodies; a scan as its steps, in order.
// Gradients that no cotangent reaches get K = 0 (they are exact zeros).
#ifndef REMAT_HARNESS_ROUNDING_DEPTH_H_
#define REMAT_HARNESS_ROUNDING_DEPTH_H_

#include <map>
#include <string>
#include <vector>

#include "engines/api/program.h"

namespace remat {

// K for the value, then for each parameter in `wrt`, in that order.
std::vector<double> RoundingDepths(const Program& program, const std::vector<int>& wrt);

// K for each state op's value (Result::state), by its parameter's name.
std::map<std::string, double> StateRoundingDepths(const Program& program);

}  // namespace remat

#endif  // REMAT_HARNESS_ROUNDING_DEPTH_H_
