#include "engines/exec/residual_listing.h"

#include <utility>

#include "engines/api/error.h"

namespace remat {

void ResidualListing::AddArgument(const Tensor& t, const std::string& source) {
  if (!t.defined() || !seen_.insert(t.buffer()).second) return;
  arguments_.push_back({t.TypeString(), source, t.bytes(), /*is_argument=*/true, 1});
}

void ResidualListing::AddSaved(const Tensor& t, const std::string& source,
                               const std::string& stack_key) {
  if (!t.defined() || !seen_.insert(t.buffer()).second) return;
  const int64_t bytes = t.buffer()->bytes();
  residual_bytes_ += bytes;
  if (!stack_key.empty()) {
    auto [it, added] = line_of_.emplace(std::make_pair(stack_key, t.TypeString()), computed_.size());
    if (!added) {
      Residual& line = computed_[it->second];
      line.bytes += bytes;
      line.count += 1;
      return;
    }
  }
  computed_.push_back({t.TypeString(), source, bytes, /*is_argument=*/false, 1});
  shapes_.push_back(t.shape());
}

std::vector<Residual> ResidualListing::Lines() const {
  std::vector<Residual> out = arguments_;
  for (size_t i = 0; i < computed_.size(); ++i) {
    Residual line = computed_[i];
    if (line.count > 1) {
      // Stacked over the steps, as JAX lists a scan's residuals.
      std::string dims;
      for (int64_t d : shapes_[i].dims()) dims += StrCat(",", d);
      line.type = StrCat(line.type.substr(0, line.type.find('[')), "[", line.count, dims, "]");
    }
    out.push_back(std::move(line));
  }
  return out;
}

void ResidualListing::Fill(Stats* stats) const {
  stats->residuals = Lines();
  stats->residual_bytes = residual_bytes_;
}

}  // namespace remat
