#include "engines/api/shape.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engines/api/error.h"

namespace remat {

Shape::Shape(std::initializer_list<int64_t> dims) { Assign(dims.begin(), dims.size()); }

Shape::Shape(std::vector<int64_t> dims) { Assign(dims.data(), dims.size()); }

void Shape::Assign(const int64_t* dims, size_t n) {
  auto text = [&] {
    std::string out = "[";
    for (size_t i = 0; i < n; ++i) out += (i ? "," : "") + std::to_string(dims[i]);
    return out + "]";
  };
  if (n > static_cast<size_t>(kMaxRank)) {
    throw Error(StrCat("shape ", text(), " has rank ", n, "; remat-bench supports rank 0 to ",
                       kMaxRank));
  }
  for (size_t i = 0; i < n; ++i) {
    if (dims[i] < 0) throw Error(StrCat("shape ", text(), " has a negative dimension"));
    dims_[i] = dims[i];
  }
  rank_ = static_cast<int>(n);
}

int64_t Shape::dim(int i) const {
  if (i < 0 || i >= rank_) {
    throw Error(StrCat("axis ", i, " of shape ", ToString(), ", which has rank ", rank_));
  }
  return dims_[i];
}

Shape Shape::DropLeading() const {
  if (rank_ == 0) throw Error("cannot drop the leading axis of a scalar");
  return Shape(std::vector<int64_t>(dims_.begin() + 1, dims_.begin() + rank_));
}

Shape Shape::PrependLeading(int64_t n) const {
  std::vector<int64_t> dims = {n};
  dims.insert(dims.end(), dims_.begin(), dims_.begin() + rank_);
  return Shape(std::move(dims));
}

std::string Shape::ToString() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) out += ",";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

Shape BroadcastShapes(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    // Axis i of the result is axis i - (rank - r) of an operand of rank r.
    const int ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    const int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
    if (da != db && da != 1 && db != 1) {
      throw Error(StrCat("shapes ", a.ToString(), " and ", b.ToString(),
                         " do not broadcast: axis ", i - rank, " has sizes ", da, " and ", db,
                         " (numpy's rule: equal, or one of them 1)"));
    }
    dims[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(std::move(dims));
}

}  // namespace remat
