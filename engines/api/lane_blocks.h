// The lane_math.h formulas over blocks of floats, in the widest vector
// lanes the CPU has: AVX-512 (16 floats), AVX2 (8) or x86-64's baseline SSE2
// (4). Each lane evaluates the scalar formula's operations in its order, so
// every path gives the scalar formula's bits, NaNs' sign and payload aside
// (lane_math.h; lane_blocks_test checks each path the CPU has against it).
// An element goes through the same path whatever the thread count: the
// loop kernels' blocks start at fixed offsets. The loop kernels split a tensor into such
// blocks between OpenMP's threads (loop_kernels.h).
#ifndef REMAT_ENGINES_API_LANE_BLOCKS_H_
#define REMAT_ENGINES_API_LANE_BLOCKS_H_

#include <cstdint>
#include <vector>

namespace remat {
namespace lane_blocks {

enum class LaneIsa { kBaseline, kAvx2, kAvx512 };
// "avx512", "avx2", "baseline".
const char* LaneIsaName(LaneIsa isa);
// The paths this CPU can run, baseline first; Best(): the widest of them,
// what the kernels use.
std::vector<LaneIsa> AvailableLaneIsas();
LaneIsa BestLaneIsa();

// out[i] = f(x[i]) (and f(x[i], dy[i])) for i in [0, n), on `isa`'s lanes
// (which the CPU must have). out may be x or dy (elementwise in place);
// it must not otherwise overlap them.
void Exp(LaneIsa isa, const float* x, float* out, int64_t n);
void Silu(LaneIsa isa, const float* x, float* out, int64_t n);
void SiluBackward(LaneIsa isa, const float* x, const float* dy, float* out, int64_t n);

}  // namespace lane_blocks
}  // namespace remat

#endif  // REMAT_ENGINES_API_LANE_BLOCKS_H_
