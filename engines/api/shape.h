// Shapes of tensors: rank 0 (a scalar) to kMaxRank (6), row-major, non-negative dims.
#ifndef REMAT_ENGINES_API_SHAPE_H_
#define REMAT_ENGINES_API_SHAPE_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace remat {

inline constexpr int kMaxRank = 6;

class Shape {
 public:
  Shape() = default;  // a scalar
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::vector<int64_t> dims);

  int rank() const { return rank_; }
  // remat::Error for an axis out of range.
  int64_t dim(int i) const;
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  // Inline: kernels' loops call it, and a call per element cost gpt's eager
  // 4% of its samples (masked_fill's loop bound, perf record of engine_loop).
  int64_t num_elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }

  // The shape without its leading axis: (L, d, d) -> (d, d).
  Shape DropLeading() const;
  // The shape with a leading axis of `n` prepended.
  Shape PrependLeading(int64_t n) const;

  // "[5,4]", "[]" for a scalar.
  std::string ToString() const;

  // Axis by axis, inline (std::array's == is a memcmp call; a plan cache
  // compares every value's shape on every run).
  bool operator==(const Shape& other) const {
    if (rank_ != other.rank_) return false;
    for (int i = 0; i < kMaxRank; ++i) {
      if (dims_[i] != other.dims_[i]) return false;
    }
    return true;
  }
  bool operator!=(const Shape& other) const { return !(*this == other); }

 private:
  // Copies `dims` in, or throws remat::Error naming them.
  void Assign(const int64_t* dims, size_t n);
  // Inline, not on the heap: every tensor (a kernel's output, a view) has a
  // shape, and a vector's allocation per tensor was a measurable part of a
  // compiled engine's time per op. Axes past rank_ are zero (== compares
  // them).
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// The shape numpy's broadcasting gives operands of shapes `a` and `b`:
// aligned on their last axes, each pair of sizes equal or one of them 1
// (the other taken), the missing leading axes of the lower rank taken from
// the other. Throws remat::Error naming both shapes and the axis where
// they do not fit.
Shape BroadcastShapes(const Shape& a, const Shape& b);

}  // namespace remat

#endif  // REMAT_ENGINES_API_SHAPE_H_
