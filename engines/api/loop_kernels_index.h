// The loop kernels that read by an integer index (loop_kernels.h): embedding's
// gather and scatter-add of rows and masked_fill's select. Each throws
// remat::Error for an index outside its bound, naming the kernel, the
// position and the value.
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_INDEX_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_INDEX_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engines/api/loop_kernels_common.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

template <typename T>
void GatherRows(const Tensor& table, const Tensor& ids, Tensor& out) {
  const T* t = static_cast<const T*>(table.raw());
  T* y = static_cast<T*>(out.raw());
  const int64_t v = table.shape().dim(0), d = table.shape().dim(1);
  const std::vector<int64_t> rows = CheckedIndices("embedding", ids, ids.num_elements(), v);
  ForEachIndex(static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.size()) * d,
               [&](int64_t p) {
                 const T* from = t + rows[static_cast<size_t>(p)] * d;
                 std::copy(from, from + d, y + p * d);
               });
}

// `padding` (null: none) is embedding's padding_idx: its row's gradient
// stays zero (positions reading it add nothing).
template <typename T>
void ScatterAddRows(const Tensor& dy, const Tensor& ids, const int64_t* padding, Tensor& out) {
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t v = out.shape().dim(0), d = out.shape().dim(1);
  const int64_t i_count = out.num_elements();
  for (int64_t i = 0; i < i_count; ++i) o[i] = 0;
  const int64_t p_count = ids.num_elements();
  for (int64_t p = 0; p < p_count; ++p) {  // increasing position
    const int64_t id = IndexAt("embedding's backward", ids, p, v);
    if (padding != nullptr && id == *padding) continue;
    for (int64_t j = 0; j < d; ++j) o[id * d + j] += g[p * d + j];
  }
}

template <typename T>
void MaskedFill(const Tensor& x, const Tensor& mask, double fill, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  const int32_t* m = mask.i32();
  T* y = static_cast<T*>(out.raw());
  const T c = static_cast<T>(fill);
  // In ForEachLaneBlock's pieces, each a loop the compiler vectorizes: x is
  // read at every index and the fill selected (a select, not a branch), so
  // the lanes give the scalar's bits. One index at a time, the select took
  // 18 us a call on gpt's scores (4x4x64x64), 2.4% of eager's kernel time.
  ForEachLaneBlock(x.num_elements(), [&](int64_t offset, int64_t length) {
    const T* ab = a + offset;
    const int32_t* mb = m + offset;
    T* yb = y + offset;
    // In a register: read through the closure, the fill was loaded again at
    // every index (a store to y might have changed it) and nothing was
    // vectorized.
    const T fill_value = c;
    REMAT_ELEMENTWISE_SIMD
    for (int64_t i = 0; i < length; ++i) {
      const T v = ab[i];
      yb[i] = mb[i] != 0 ? fill_value : v;
    }
  });
}

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_INDEX_H_
