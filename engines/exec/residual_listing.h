// The residual listing (Stats::residuals and residual_bytes, CONTRACT.md
// section 4), as jax.ad_checkpoint.print_saved_residuals prints it, built
// from what an engine holds for its backward pass when its forward pass
// ends. A building block: ReverseMode adds its tape's tensors, dtr its
// resident cells.
//
//   ResidualListing listing;
//   for (each argument the backward reads) listing.AddArgument(t, "from the argument w");
//   for (each computed value it holds) listing.AddSaved(t, "output of relu at ...", key);
//   listing.Fill(&stats);
//
// Lines: the arguments first, then the computed values, each in the order
// first added. Storage is counted once: a tensor whose buffer was added
// before (a name and the value it labels, two views of one buffer) adds
// nothing (buffers are known by address: the tensors added must stay alive
// until the listing is filled, as an engine's residuals do). Values added with the same non-empty `stack_key` are one line (a
// value saved at every step of a scan), its type stacked: "f32[L,4,16]" for
// L tensors of f32[4,16], `count` L, `bytes` their sum.
#ifndef REMAT_ENGINES_EXEC_RESIDUAL_LISTING_H_
#define REMAT_ENGINES_EXEC_RESIDUAL_LISTING_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engines/api/stats.h"
#include "engines/api/tensor.h"

namespace remat {

class ResidualListing {
 public:
  // An argument the backward pass reads: listed, never in residual_bytes.
  // `source` starts "from the argument".
  void AddArgument(const Tensor& t, const std::string& source);
  // A computed value saved for the backward pass (its whole buffer counts
  // in residual_bytes). `source` starts "output of". Tensors with equal
  // non-empty `stack_key` of one type share a line.
  void AddSaved(const Tensor& t, const std::string& source, const std::string& stack_key = "");

  // The lines, and the bytes of the computed ones.
  std::vector<Residual> Lines() const;
  int64_t residual_bytes() const { return residual_bytes_; }
  // stats->residuals = Lines(), stats->residual_bytes = residual_bytes().
  void Fill(Stats* stats) const;

 private:
  std::set<const Buffer*> seen_;
  std::vector<Residual> arguments_;
  std::vector<Residual> computed_;
  std::vector<Shape> shapes_;  // of each computed line's first tensor
  std::map<std::pair<std::string, std::string>, size_t> line_of_;  // (key, type) -> line
  int64_t residual_bytes_ = 0;
};

}  // namespace remat

#endif  // REMAT_ENGINES_EXEC_RESIDUAL_LISTING_H_
