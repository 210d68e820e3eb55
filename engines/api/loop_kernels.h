// Loop kernels that both backends run as they are, on their own float type
// T (float for oneDNN's backend, double for the reference one): gathers,
// scatters, selects and the cross-entropy's row loops, which oneDNN has no
// primitive for. op_defs.cc states each one's order of arithmetic; these
// follow it. Each throws remat::Error for an index outside its bound,
// naming the kernel, the position and the value.
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engines/api/error.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

inline int64_t IndexAt(const char* kernel, const Tensor& ids, int64_t p, int64_t bound) {
  const int32_t id = ids.i32()[p];
  if (id < 0 || id >= bound) {
    throw Error(StrCat(kernel, ": index ", id, " at position ", p, " is outside [0, ", bound, ")"));
  }
  return id;
}

template <typename T>
void GatherRows(const Tensor& table, const Tensor& ids, Tensor& out) {
  const T* t = static_cast<const T*>(table.raw());
  T* y = static_cast<T*>(out.raw());
  const int64_t v = table.shape().dim(0), d = table.shape().dim(1);
  for (int64_t p = 0; p < ids.num_elements(); ++p) {
    const int64_t id = IndexAt("embedding", ids, p, v);
    for (int64_t j = 0; j < d; ++j) y[p * d + j] = t[id * d + j];
  }
}

template <typename T>
void ScatterAddRows(const Tensor& dy, const Tensor& ids, Tensor& out) {
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t v = out.shape().dim(0), d = out.shape().dim(1);
  for (int64_t i = 0; i < out.num_elements(); ++i) o[i] = 0;
  for (int64_t p = 0; p < ids.num_elements(); ++p) {  // increasing position
    const int64_t id = IndexAt("embedding's backward", ids, p, v);
    for (int64_t j = 0; j < d; ++j) o[id * d + j] += g[p * d + j];
  }
}

template <typename T>
void MaskedFill(const Tensor& x, const Tensor& mask, double fill, Tensor& out) {
  const T* a = static_cast<const T*>(x.raw());
  const int32_t* m = mask.i32();
  T* y = static_cast<T*>(out.raw());
  const T c = static_cast<T>(fill);
  for (int64_t i = 0; i < x.num_elements(); ++i) y[i] = m[i] != 0 ? c : a[i];
}

// Row r's max and sum of exp(x - max), j in order.
template <typename T>
void RowStats(const T* xr, int64_t cols, T* m, T* s) {
  *m = xr[0];
  for (int64_t j = 1; j < cols; ++j) *m = std::max(*m, xr[j]);
  *s = 0;
  for (int64_t j = 0; j < cols; ++j) *s += std::exp(xr[j] - *m);
}

template <typename T>
void CrossEntropy(const Tensor& logits, const Tensor& targets, Tensor& out) {
  const T* x = static_cast<const T*>(logits.raw());
  const int64_t rows = logits.shape().dim(0), cols = logits.shape().dim(1);
  T total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const int64_t t = IndexAt("cross_entropy", targets, r, cols);
    T m, s;
    RowStats(xr, cols, &m, &s);
    total += (m + std::log(s)) - xr[t];
  }
  static_cast<T*>(out.raw())[0] = total / static_cast<T>(rows);
}

template <typename T>
void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, const Tensor& dy,
                          Tensor& out) {
  const T* x = static_cast<const T*>(logits.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t rows = logits.shape().dim(0), cols = logits.shape().dim(1);
  const T g = static_cast<const T*>(dy.raw())[0] / static_cast<T>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const int64_t t = IndexAt("cross_entropy's backward", targets, r, cols);
    T m, s;
    RowStats(xr, cols, &m, &s);
    for (int64_t j = 0; j < cols; ++j) {
      o[r * cols + j] = (std::exp(xr[j] - m) / s - (j == t ? T(1) : T(0))) * g;
    }
  }
}


}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_H_
