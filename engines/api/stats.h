// Stats: what one value_and_grad run cost, measured.
#ifndef REMAT_ENGINES_API_STATS_H_
#define REMAT_ENGINES_API_STATS_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/kernel_clock.h"
#include "engines/api/memory_tracker.h"

namespace remat {

// One line of the residual listing (jax.ad_checkpoint.print_saved_residuals):
// a value saved between the forward and the backward pass.
struct Residual {
  std::string type;    // "f32[8,16]"; values saved at every scan step are stacked: "f32[8,4,16]"
  std::string source;  // "from the argument w1", "output of relu at problems/x.cc:31 (middle)"
  int64_t bytes = 0;
  bool is_argument = false;
  int count = 1;       // how many tensors the line stands for (scan steps)
};

// The listing, shared and immutable once made: a compiled engine hands
// every run its plan's listing without copying it (a thousand lines of two
// strings each, on the sin chains, copied on every run, were a tenth of
// planned's time outside kernels). Reads as a const vector of Residual.
class ResidualList {
 public:
  ResidualList() = default;
  ResidualList(std::vector<Residual> lines)  // NOLINT: a vector is a listing
      : lines_(std::make_shared<const std::vector<Residual>>(std::move(lines))) {}

  size_t size() const { return lines_ ? lines_->size() : 0; }
  bool empty() const { return size() == 0; }
  const Residual& operator[](size_t i) const { return (*lines_)[i]; }
  std::vector<Residual>::const_iterator begin() const { return lines().begin(); }
  std::vector<Residual>::const_iterator end() const { return lines().end(); }
  const std::vector<Residual>& lines() const {
    static const std::vector<Residual> kNone;
    return lines_ ? *lines_ : kNone;
  }

 private:
  std::shared_ptr<const std::vector<Residual>> lines_;
};

// How many times each op ran, by Program::Describe(op): a map shared
// between copies of Stats until one of them changes it (a compiled engine
// hands every run its plan's counts without copying a map of strings).
class OpRuns {
 public:
  using Map = std::map<std::string, int64_t>;
  OpRuns() = default;
  OpRuns(Map runs)  // NOLINT: a map is the counts
      : runs_(std::make_shared<Map>(std::move(runs))) {}

  // The count of `op`, created at 0; copies the map first if it is shared.
  int64_t& operator[](const std::string& op) { return Mutable()[op]; }
  const Map& map() const {
    static const Map kNone;
    return runs_ ? *runs_ : kNone;
  }
  Map::const_iterator begin() const { return map().begin(); }
  Map::const_iterator end() const { return map().end(); }
  size_t size() const { return map().size(); }
  bool empty() const { return map().empty(); }
  size_t count(const std::string& op) const { return map().count(op); }
  int64_t at(const std::string& op) const { return map().at(op); }
  bool operator==(const OpRuns& other) const { return map() == other.map(); }

 private:
  Map& Mutable() {
    if (!runs_) {
      runs_ = std::make_shared<Map>();
    } else if (runs_.use_count() > 1) {
      runs_ = std::make_shared<Map>(*runs_);
    }
    return *runs_;
  }
  std::shared_ptr<Map> runs_;
};

struct Stats {
  // Device memory: the high-water mark of live bytes during the run, as the
  // MemoryTracker measured it (arguments, activations, gradients and oneDNN's
  // scratchpad), the live bytes by category at that moment, and the op then.
  int64_t peak_bytes = 0;
  std::array<int64_t, kNumCategories> peak_bytes_by_category{};
  std::string peak_site;
  // The high-water mark of each category alone (MemoryTracker::
  // high_water_bytes): what bounds a category, whatever moment the total
  // peak falls on. A schedule's budget:B bounds the activations' entry.
  std::array<int64_t, kNumCategories> high_water_bytes_by_category{};
  // The host tier (offloaded residuals), counted apart.
  int64_t host_peak_bytes = 0;
  // The peak the engine predicted from its schedule before running it; -1
  // when the engine makes no prediction.
  int64_t predicted_peak_bytes = -1;
  std::string predicted_peak_site;

  // Saved between forward and backward, arguments excluded, shared storage
  // counted once; and the listing, arguments included.
  int64_t residual_bytes = 0;
  ResidualList residuals;

  // FLOPs (see engines/api/kernels.h for how they are counted).
  int64_t flops_forward = 0;
  int64_t flops_recomputed = 0;
  int64_t flops_backward = 0;  // excludes recomputation

  // How many times each op ran forward (recomputation included), by
  // Program::Describe(op); a scan body's ops count once per step.
  OpRuns op_runs;

  // Engines that compile a run ahead of it (engines/planned): the seconds
  // this run spent compiling (0 when a plan of the same program, shapes and
  // wrt was cached), not included in seconds_forward or seconds_backward;
  // and the bytes of the one arena every buffer of the run was placed in
  // (-1: no arena).
  double seconds_compile = 0;
  int64_t arena_bytes = -1;

  double seconds_forward = 0;
  double seconds_backward = 0;  // recomputation included
  // Of those, the time in kernels' arithmetic (Kernels::kernel_seconds:
  // allocating outputs is not in it), and the number of kernel calls that
  // made it; the rest is the engine's overhead.
  double seconds_in_kernels = 0;
  int64_t kernel_calls = 0;
  // The same time and calls by kernel (Kernels::kernel_times): where the
  // kernels' time went. Empty for an engine that does not break it down;
  // otherwise the seconds add up to seconds_in_kernels and the calls to
  // kernel_calls, and every name is a kernel of the table (kernels.h).
  KernelTimes kernel_times;
  double seconds_total() const { return seconds_forward + seconds_backward; }
};

// The listing, as print_saved_residuals prints it, then the totals.
std::string FormatResiduals(const Stats& stats);

}  // namespace remat

#endif  // REMAT_ENGINES_API_STATS_H_
