// softmax and its backward over the last axis (the operand seen as (rows,
// C)): lane_blocks' row loops, one dispatch a row.
#include <cstdint>

#include "engines/api/lane_blocks.h"
#include "engines/api/loop_kernels.h"
#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/onednn_kernels_internal.h"

namespace remat {

using onednn_kernels_internal::LastDim;
using onednn_kernels_internal::NumRows;


// softmax and its backward over the last axis, as loops of our own rather
// than oneDNN's primitives (lane_blocks::SoftmaxRow and
// SoftmaxBackwardRow, which state the arithmetic): the same bits on every
// ISA, where oneDNN's exp and sums are its own on each, and one dispatch a
// row, so that rows as short as attention's (64) run about as fast as
// oneDNN's: gpt's scores (1024 rows of 64) 87-95 us a run against
// oneDNN's 84-93, their backward 21 against 28-29, transformer_stack's
// 46 and 13 against 48-67 and 19-25 (engine_loop's "alone, in cache"
// column, alternating builds). m = the row's largest number
// (lane_blocks::MaxNumber: 16 partial maxima; of +0 and -0 either, which
// changes no e_j), so a NaN or +inf in the row (or a row of -inf) makes s
// NaN, and the whole row NaN, as in the reference and in JAX.
void OneDnnKernels::DoSoftmax(const Tensor& x, Tensor& out) {
  if (dry_run() || out.num_elements() == 0) return;
  const int64_t c = LastDim(out), rows = NumRows(out);
  const float* x0 = x.f32();
  float* o0 = out.f32();
  const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
  loop_kernels::ForEachIndex(rows, rows * c, [x0, o0, c, isa](int64_t r) {
    lane_blocks::SoftmaxRow(isa, x0 + r * c, o0 + r * c, c);
  });
}

void OneDnnKernels::DoSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  if (dry_run() || out.num_elements() == 0) return;
  const int64_t c = LastDim(out), rows = NumRows(out);
  const float* y0 = y.f32();
  const float* g0 = dy.f32();
  float* o0 = out.f32();
  const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
  loop_kernels::ForEachIndex(rows, rows * c, [y0, g0, o0, c, isa](int64_t r) {
    lane_blocks::SoftmaxBackwardRow(isa, y0 + r * c, g0 + r * c, o0 + r * c, c);
  });
}

}  // namespace remat
