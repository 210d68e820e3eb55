// The lane_math.h formulas over blocks of floats, in the widest vector
// lanes the CPU has: AVX-512 (16 floats), AVX2 (8) or x86-64's baseline SSE2
// (4). Each lane evaluates the scalar formula's operations in its order, so
// every path gives the scalar formula's bits, NaNs' sign and payload aside
// (lane_math.h; lane_blocks_test checks each path the CPU has against it).
// The loop kernels split a tensor into such blocks between OpenMP's threads
// (loop_kernels.h); the blocks start at fixed offsets, so an element takes
// the same path (vector or tail) whatever the thread count.
#ifndef REMAT_ENGINES_API_LANE_BLOCKS_H_
#define REMAT_ENGINES_API_LANE_BLOCKS_H_

#include <cstdint>
#include <vector>

namespace remat {
namespace lane_blocks {

enum class LaneIsa { kBaseline, kAvx2, kAvx512 };
// "avx512", "avx2", "baseline".
const char* LaneIsaName(LaneIsa isa);
// The paths this CPU can run, baseline first.
std::vector<LaneIsa> AvailableLaneIsas();
// The widest of `available` that the cap allows: ONEDNN_MAX_CPU_ISA's
// value, as oneDNN spells it in any case ("AVX2", "avx512_core", "ALL"):
// below AVX2 (SSE41, AVX) the baseline, AVX2 and its variants AVX2, the
// AVX-512 and AMX ones (and ALL) AVX-512; null, empty or a name not known
// here, no cap. So a run capped to emulate an AVX2 machine runs our lanes
// as one would.
LaneIsa CappedLaneIsa(const std::vector<LaneIsa>& available, const char* cap);
// What the kernels use: CappedLaneIsa(AvailableLaneIsas(), the
// environment's ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA), read once.
LaneIsa BestLaneIsa();

// out[i] = f(x[i]) (and f(x[i], dy[i])) for i in [0, n), on `isa`'s lanes
// (which the CPU must have). out may be x or dy (elementwise in place);
// it must not otherwise overlap them.
void Exp(LaneIsa isa, const float* x, float* out, int64_t n);
void Silu(LaneIsa isa, const float* x, float* out, int64_t n);
void SiluBackward(LaneIsa isa, const float* x, const float* dy, float* out, int64_t n);
// A row's exps and their sum, for softmax-like rows: e_j = e^(x[j] -
// shift) (lane_math.h's ExpLanes of the float difference), written to
// exps[j] unless exps is null, and returned summed in one fixed order on
// every path: kExpSumPartials partial sums, partial k adding the e_j with
// j = k mod kExpSumPartials of the first n - n % kExpSumPartials in
// increasing j (from 0), then the partials added in order 0, 1, ..., then
// the last n % kExpSumPartials e_j in increasing j. The partials are the
// lanes of AVX-512's one register, AVX2's two, SSE2's four, so no path
// waits on one chain of dependent additions.
inline constexpr int64_t kExpSumPartials = 16;
float ExpShiftedSum(LaneIsa isa, const float* x, float shift, float* exps, int64_t n);
// The largest number among x[0..n): -inf if there is none (n = 0, or every
// x[j] NaN); a NaN is never chosen. Of +0 and -0 it may return either (they
// compare equal). The same bits on every path otherwise.
float MaxNumber(LaneIsa isa, const float* x, int64_t n);
// One row of softmax into y (which must not overlap x): m = MaxNumber(x),
// e_j and s = ExpShiftedSum(x, m, y), then y_j = e_j / s; where s is NaN
// (a NaN or +inf in the row, or a row of -inf) every y_j is a quiet NaN.
void SoftmaxRow(LaneIsa isa, const float* x, float* y, int64_t n);
// One row of softmax's backward from its output y: d = DotSum(dy, y), then
// dx_j = y_j (dy_j - d). dx may be dy (d is taken first), not y.
void SoftmaxBackwardRow(LaneIsa isa, const float* y, const float* dy, float* dx, int64_t n);
// sum_j a[j] * b[j] (each product rounded to float, then added) in
// ExpShiftedSum's order: kExpSumPartials partial sums over the first
// n - n % kExpSumPartials products, added in order 0, 1, ..., then the last
// n % kExpSumPartials products in increasing j. The same bits on every path.
float DotSum(LaneIsa isa, const float* a, const float* b, int64_t n);

// sin, cos and their backwards (dy cos(x), -(dy sin(x))): lane_math.h's Sin
// and Cos, in double lanes.
void Sin(LaneIsa isa, const float* x, float* out, int64_t n);
void Cos(LaneIsa isa, const float* x, float* out, int64_t n);
void SinBackward(LaneIsa isa, const float* x, const float* dy, float* out, int64_t n);
void CosBackward(LaneIsa isa, const float* x, const float* dy, float* out, int64_t n);

}  // namespace lane_blocks
}  // namespace remat

#endif  // REMAT_ENGINES_API_LANE_BLOCKS_H_
