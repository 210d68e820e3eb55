#include "engines/api/shape.h"

#include "engines/api/error.h"

namespace remat {

Shape::Shape(std::initializer_list<int64_t> dims) : dims_(dims) { Check(); }

Shape::Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) { Check(); }

void Shape::Check() const {
  if (rank() > kMaxRank) {
    throw Error(StrCat("shape ", ToString(), " has rank ", rank(),
                       "; remat-bench supports rank 0 to ", kMaxRank));
  }
  for (int64_t d : dims_) {
    if (d < 0) throw Error(StrCat("shape ", ToString(), " has a negative dimension"));
  }
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

Shape Shape::DropLeading() const {
  if (dims_.empty()) throw Error("cannot drop the leading axis of a scalar");
  return Shape(std::vector<int64_t>(dims_.begin() + 1, dims_.end()));
}

Shape Shape::PrependLeading(int64_t n) const {
  std::vector<int64_t> dims = {n};
  dims.insert(dims.end(), dims_.begin(), dims_.end());
  return Shape(std::move(dims));
}

std::string Shape::ToString() const {
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

}  // namespace remat
