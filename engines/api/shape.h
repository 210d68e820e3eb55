// Shapes of tensors: rank 0 (a scalar) to 3, row-major, non-negative dims.
#ifndef REMAT_ENGINES_API_SHAPE_H_
#define REMAT_ENGINES_API_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace remat {

inline constexpr int kMaxRank = 3;

class Shape {
 public:
  Shape() = default;  // a scalar
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::vector<int64_t> dims);

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_.at(i); }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t num_elements() const;

  // The shape without its leading axis: (L, d, d) -> (d, d).
  Shape DropLeading() const;
  // The shape with a leading axis of `n` prepended.
  Shape PrependLeading(int64_t n) const;

  // "[5,4]", "[]" for a scalar.
  std::string ToString() const;

  bool operator==(const Shape& other) const { return dims_ == other.dims_; }
  bool operator!=(const Shape& other) const { return dims_ != other.dims_; }

 private:
  void Check() const;
  std::vector<int64_t> dims_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_API_SHAPE_H_
