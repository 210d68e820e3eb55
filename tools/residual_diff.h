// Where an outside engine's residuals differ from remat's prediction, place
// by place: what `remat conform` prints under a case whose residual bytes
// differ, so a reader sees both listings and why they differ rather than a
// percentage.
//
// The engine's listing is the "residuals" array of its stats.json, one
// string per residual in jax.ad_checkpoint.print_saved_residuals' form:
//   "<type> <source>"   e.g. "bool[8,16] output of gt from problems/layer_loss.cc:48 (%5 relu)"
// <type> is dtype[dims] (f32, f16, bf16, f64, i8, i32, i64, u8, u32, bool;
// a memory space such as f32<host>[8,16] is allowed). A line whose source
// starts "from the argument", "from a constant" or "from a literal" is an
// input, which neither side counts (as residual_bytes excludes them).
//
// A residual's place is the first "FILE:LINE" in its source: remat's
// listing names the op's site ("output of relu at problems/x.cc:31"); an
// engine that names the program's sites (tools/jax_engine.py does) lines up
// with it. A site that the program uses only inside a scan's body counts at
// the outermost such scan's site: an engine that stacks a scan's residuals
// (lax.scan) reports them as outputs of the scan, remat as its body's ops
// (N scan steps). A line without a place counts under "(no site)".
#ifndef REMAT_TOOLS_RESIDUAL_DIFF_H_
#define REMAT_TOOLS_RESIDUAL_DIFF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engines/api/program.h"
#include "engines/api/stats.h"

namespace remat {

// One place where the two listings keep a different number of bytes.
struct PlaceDiff {
  std::string place;                      // "problems/layer_loss.cc:48", or "(no site)"
  int64_t remat_bytes = 0;                // remat's residuals there
  int64_t engine_bytes = 0;               // the engine's; -1 when a type was unreadable
  std::vector<std::string> remat_lines;   // "f32[8,16] output of matmul at ..."
  std::vector<std::string> engine_lines;  // as the engine wrote them
  std::string reason;                     // derived from the two sets of lines
};

// The bytes of a listing type ("f32[8,16]" -> 512, "bool[8]" -> 8,
// "f32[]" -> 4); -1 for a type it cannot read.
int64_t ListedTypeBytes(const std::string& type);

// The places where `engine` (the stats.json listing) and `remat` (the
// recompute engine's listing for the same program) keep different bytes,
// in the order they first appear in remat's listing, then the engine's.
// Places where the two keep the same bytes are left out, even when the
// values differ (the bytes are what is compared).
std::vector<PlaceDiff> DiffResiduals(const Program& program, const ResidualList& remat,
                                     const std::vector<std::string>& engine);

// The diffs as indented lines for remat conform's output, each place's
// bytes and reason, then its lines from both listings; "" when none.
std::string FormatResidualDiffs(const std::vector<PlaceDiff>& diffs, const std::string& indent);

}  // namespace remat

#endif  // REMAT_TOOLS_RESIDUAL_DIFF_H_
