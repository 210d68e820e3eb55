// The broadcasting and reducing loop kernels (loop_kernels.h): numpy's
// broadcasting binary ops (add, sub, mul, div) and where, the sum of a
// cotangent back to a broadcast operand's shape, and sum, mean and amax
// over chosen axes with their backwards. Every element is one formula of
// the operands' elements it maps to (the same IEEE operation as the
// same-shape kernels: a + b, a - b, a * b, a / b), so a broadcast changes
// no bit of what it computes; the reductions fix their order (below).
//
// The order of every reduction (CONTRACT.md, "Broadcasting and
// reductions"): a reduced element is the sum, from +0, of the elements of
// the full tensor that map to it, in increasing row-major (flat) index of
// the full tensor, one running sum in double rounded once to T; a mean is
// that double sum divided by the number of terms, rounded once; a max
// starts from -inf and takes each element in the same order, a NaN kept (a
// NaN propagates).
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_BROADCAST_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_BROADCAST_H_

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/loop_kernels_common.h"
#include "engines/api/shape.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

// The binary ops a broadcast kernel computes (KernelAttrs::int_a).
enum class BinaryOp : int64_t { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3 };
// The reductions (KernelAttrs::int_a of reduce and reduce_backward).
enum class ReduceOp : int64_t { kSum = 0, kMean = 1, kAmax = 2 };

// How N operands of lower or equal rank map into a full shape's elements,
// row by row (a row: the full shape's last axis): each operand's offset at
// the start of row r and its stride along the row (0 where it is broadcast).
template <size_t N>
class BroadcastWalk {
 public:
  BroadcastWalk(const Shape& full, const std::array<Shape, N>& operands) : rank_(full.rank()) {
    for (int i = 0; i < rank_; ++i) dims_[i] = full.dim(i);
    for (size_t k = 0; k < N; ++k) {
      const Shape& s = operands[k];
      int64_t stride = 1;
      for (int i = rank_ - 1; i >= 0; --i) {
        const int j = i - (rank_ - s.rank());
        const int64_t d = j >= 0 ? s.dim(j) : 1;
        strides_[k][i] = d == 1 ? 0 : stride;
        stride *= d;
      }
    }
    cols_ = rank_ == 0 ? 1 : dims_[rank_ - 1];
    rows_ = cols_ == 0 ? 0 : full.num_elements() / cols_;
  }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t col_stride(size_t k) const { return rank_ == 0 ? 0 : strides_[k][rank_ - 1]; }
  // Operand k's offset at the first element of row r.
  int64_t RowOffset(size_t k, int64_t r) const {
    int64_t offset = 0;
    for (int i = rank_ - 2; i >= 0 && r > 0; --i) {
      offset += (r % dims_[i]) * strides_[k][i];
      r /= dims_[i];
    }
    return offset;
  }

 private:
  int rank_;
  int64_t rows_ = 0, cols_ = 1;
  std::array<int64_t, kMaxRank> dims_{};
  std::array<std::array<int64_t, kMaxRank>, N> strides_{};
};

// out = a OP b with numpy broadcasting (out has the broadcast shape).
template <typename T>
void BroadcastBinary(const Tensor& a, const Tensor& b, int64_t op, Tensor& out) {
  const BroadcastWalk<2> walk(out.shape(), {a.shape(), b.shape()});
  const T* pa = static_cast<const T*>(a.raw());
  const T* pb = static_cast<const T*>(b.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t cols = walk.cols(), sa = walk.col_stride(0), sb = walk.col_stride(1);
  auto rows = [&](auto f) {
    ForEachIndex(walk.rows(), out.num_elements(), [&](int64_t r) {
      const T* ra = pa + walk.RowOffset(0, r);
      const T* rb = pb + walk.RowOffset(1, r);
      T* ro = o + r * cols;
      for (int64_t j = 0; j < cols; ++j) ro[j] = f(ra[j * sa], rb[j * sb]);
    });
  };
  switch (static_cast<BinaryOp>(op)) {
    case BinaryOp::kAdd: return rows([](T x, T y) { return x + y; });
    case BinaryOp::kSub: return rows([](T x, T y) { return x - y; });
    case BinaryOp::kMul: return rows([](T x, T y) { return x * y; });
    case BinaryOp::kDiv: return rows([](T x, T y) { return x / y; });
  }
  throw Error(StrCat("broadcast_binary: unknown op code ", op));
}

// out = cond != 0 ? a : b, the three broadcast together (cond i32).
template <typename T>
void Where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const BroadcastWalk<3> walk(out.shape(), {cond.shape(), a.shape(), b.shape()});
  const int32_t* pc = cond.i32();
  const T* pa = static_cast<const T*>(a.raw());
  const T* pb = static_cast<const T*>(b.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t cols = walk.cols();
  const int64_t sc = walk.col_stride(0), sa = walk.col_stride(1), sb = walk.col_stride(2);
  ForEachIndex(walk.rows(), out.num_elements(), [&](int64_t r) {
    const int32_t* rc = pc + walk.RowOffset(0, r);
    const T* ra = pa + walk.RowOffset(1, r);
    const T* rb = pb + walk.RowOffset(2, r);
    T* ro = o + r * cols;
    for (int64_t j = 0; j < cols; ++j) ro[j] = rc[j * sc] != 0 ? ra[j * sa] : rb[j * sb];
  });
}

// where's cotangent for one side, dy's shape: dy where the condition picks
// that side (cond != 0 for a, side 0; cond == 0 for b, side 1), else +0.
template <typename T>
void WhereGrad(const Tensor& cond, const Tensor& dy, int64_t side, Tensor& out) {
  const BroadcastWalk<1> walk(dy.shape(), {cond.shape()});
  const int32_t* pc = cond.i32();
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t cols = walk.cols(), sc = walk.col_stride(0);
  const bool want = side == 0;
  ForEachIndex(walk.rows(), out.num_elements(), [&](int64_t r) {
    const int32_t* rc = pc + walk.RowOffset(0, r);
    for (int64_t j = 0; j < cols; ++j) {
      o[r * cols + j] = (rc[j * sc] != 0) == want ? g[r * cols + j] : T(0);
    }
  });
}

// The shape `x` reduces to with every axis in `axes` kept with size 1 (the
// kept form, of x's rank; the output's elements in the same order with or
// without keepdim).
inline Shape KeptShape(const Shape& x, std::span<const int64_t> axes) {
  std::vector<int64_t> dims(x.dims().begin(), x.dims().end());
  for (int64_t a : axes) dims[static_cast<size_t>(a)] = 1;
  return Shape(std::move(dims));
}

// Folds x into out (each element set to `init` first), out of the kept
// shape `kept` (x's rank, each axis x's size or 1), in the header's order:
// x's elements one after another in flat order, each folded into its
// element of out by fold(acc, v). On one thread: the order is the contract.
template <typename T, typename Fold>
void FoldInto(const Tensor& x, const Shape& kept, T* o, int64_t out_elements, T init, Fold fold) {
  for (int64_t i = 0; i < out_elements; ++i) o[i] = init;
  const BroadcastWalk<1> walk(x.shape(), {kept});
  const T* px = static_cast<const T*>(x.raw());
  const int64_t cols = walk.cols(), so = walk.col_stride(0);
  for (int64_t r = 0; r < walk.rows(); ++r) {
    T* ro = o + walk.RowOffset(0, r);
    const T* rx = px + r * cols;
    for (int64_t j = 0; j < cols; ++j) fold(ro[j * so], rx[j]);
  }
}

// The sums from +0, each a running sum in double of its terms (each an
// element of x, in T) in the header's order, divided by `count` (a mean's
// terms; 1 for a sum) and rounded once to T. Why double: a float running
// sum's error grows with the number of terms, and a broadcast scalar's
// gradient sums a whole activation (timm's HGNetV2 scales every map by one
// learned number: 32k terms of both signs put its gradient 21 times
// further from float64 than PyTorch's pairwise float sums).
template <typename T>
void SumInto(const Tensor& x, const Shape& kept, T* o, int64_t out_elements, int64_t count = 1) {
  std::vector<double> acc(static_cast<size_t>(out_elements), 0.0);
  const BroadcastWalk<1> walk(x.shape(), {kept});
  const T* px = static_cast<const T*>(x.raw());
  const int64_t cols = walk.cols(), so = walk.col_stride(0);
  for (int64_t r = 0; r < walk.rows(); ++r) {
    double* ra = acc.data() + walk.RowOffset(0, r);
    const T* rx = px + r * cols;
    for (int64_t j = 0; j < cols; ++j) ra[j * so] += static_cast<double>(rx[j]);
  }
  for (int64_t i = 0; i < out_elements; ++i) {
    o[i] = static_cast<T>(acc[static_cast<size_t>(i)] / static_cast<double>(count));
  }
}

// dy summed back to `out`'s shape, which broadcasts to dy's (the backward
// of a broadcast operand).
template <typename T>
void SumTo(const Tensor& dy, Tensor& out) {
  const Shape& s = out.shape();
  const int pad = dy.shape().rank() - s.rank();
  std::vector<int64_t> dims(static_cast<size_t>(pad), 1);
  dims.insert(dims.end(), s.dims().begin(), s.dims().end());
  SumInto<T>(dy, Shape(std::move(dims)), static_cast<T*>(out.raw()), out.num_elements());
}

// sum, mean or amax of x over `axes` (sorted, distinct, in range) into out.
template <typename T>
void Reduce(const Tensor& x, std::span<const int64_t> axes, int64_t op, Tensor& out) {
  const Shape kept = KeptShape(x.shape(), axes);
  T* o = static_cast<T*>(out.raw());
  const int64_t n = out.num_elements();
  const int64_t count = n == 0 ? 0 : x.num_elements() / n;
  if (static_cast<ReduceOp>(op) != ReduceOp::kAmax) {
    SumInto<T>(x, kept, o, n, static_cast<ReduceOp>(op) == ReduceOp::kMean ? count : 1);
    return;
  }
  // The max from -inf; a NaN, once seen, stays.
  FoldInto<T>(x, kept, o, n, -std::numeric_limits<T>::infinity(), [](T& m, T v) {
    if (v > m || std::isnan(v)) m = std::isnan(m) ? m : v;
  });
}

// Whether x's element v is one of amax's ties with the maximum m: equal,
// or both NaN.
template <typename T>
bool TiesWith(T v, T m) {
  return v == m || (std::isnan(v) && std::isnan(m));
}

// The backward of Reduce into out (x's shape): sum dx = dy; mean dx = dy /
// count; amax dx = dy / ties at each of the ties with the maximum (ties
// counted first), 0 elsewhere. `in` holds dy, or x, y and dy for amax
// (dy and y of the reduced shape, kept or not).
template <typename T>
void ReduceBackward(std::span<const Tensor* const> in, std::span<const int64_t> axes, int64_t op,
                    Tensor& out) {
  const Shape kept = KeptShape(out.shape(), axes);
  const Tensor& dy = *in[in.size() - 1];
  const T* g = static_cast<const T*>(dy.raw());
  T* o = static_cast<T*>(out.raw());
  const int64_t n = dy.num_elements();
  const int64_t count = n == 0 ? 0 : out.num_elements() / n;
  const BroadcastWalk<1> walk(out.shape(), {kept});
  const int64_t cols = walk.cols(), so = walk.col_stride(0);
  if (static_cast<ReduceOp>(op) != ReduceOp::kAmax) {
    const bool mean = static_cast<ReduceOp>(op) == ReduceOp::kMean;
    const T c = static_cast<T>(count);
    ForEachIndex(walk.rows(), out.num_elements(), [&](int64_t r) {
      const T* rg = g + walk.RowOffset(0, r);
      for (int64_t j = 0; j < cols; ++j) o[r * cols + j] = mean ? rg[j * so] / c : rg[j * so];
    });
    return;
  }
  const T* px = static_cast<const T*>(in[0]->raw());
  const T* py = static_cast<const T*>(in[1]->raw());
  std::vector<int64_t> ties(static_cast<size_t>(n), 0);
  for (int64_t r = 0; r < walk.rows(); ++r) {
    const int64_t base = walk.RowOffset(0, r);
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t k = base + j * so;
      if (TiesWith(px[r * cols + j], py[k])) ++ties[static_cast<size_t>(k)];
    }
  }
  ForEachIndex(walk.rows(), out.num_elements(), [&](int64_t r) {
    const int64_t base = walk.RowOffset(0, r);
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t k = base + j * so;
      o[r * cols + j] = TiesWith(px[r * cols + j], py[k])
                            ? g[k] / static_cast<T>(ties[static_cast<size_t>(k)])
                            : T(0);
    }
  });
}

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_BROADCAST_H_
