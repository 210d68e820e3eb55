// Simulate: the cost model every generator is measured by (schedule.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"

namespace remat {
namespace {

using Kind = ActionKind;

class Machine {
 public:
  Machine(const Schedule& schedule, const ChainCosts& costs)
      : schedule_(schedule),
        costs_(costs),
        length_(costs.length()),
        kept_(static_cast<size_t>(length_) + 1, false),
        taped_(static_cast<size_t>(length_), false) {}

  ScheduleCost Run() {
    phase_ = "forward";
    for (index_ = 0; index_ < schedule_.forward.size(); ++index_) Forward(schedule_.forward[index_]);
    if (p_ != length_) {
      FailPhase(StrCat("the forward pass ends at p = ", p_, ", not at L = ", length_));
    }
    Touch(LiveBytes() + costs_.after_bytes);  // the rest of the run's forward pass
    // The output belongs to the caller: the backward pass starts without a
    // current carry, so its first use of a carry is a kRestore.
    phase_ = "backward";
    live_ = false;
    aliased_ = false;
    for (index_ = 0; index_ < schedule_.backward.size(); ++index_) {
      Backward(schedule_.backward[index_]);
    }
    if (frontier_ != 0) {
      FailPhase(StrCat("the backward pass ends with the frontier at ", frontier_, ": steps 0..",
                       frontier_ - 1, " are not differentiated"));
    }
    if (count_ != 0) {
      std::vector<std::string> left;
      for (int64_t i = 1; i <= length_; ++i) {
        if (kept_[i]) left.push_back(std::to_string(i));
      }
      FailPhase(StrCat("the backward pass ends with snapshots still kept at ", Join(left, ", ")));
    }
    return cost_;
  }

 private:
  [[noreturn]] void Fail(const Action& action, const std::string& what) const {
    throw Error(StrCat(Prefix(), phase_, " action ", index_, " (", ToString(action), "): ", what));
  }
  [[noreturn]] void FailPhase(const std::string& what) const {
    throw Error(StrCat(Prefix(), what));
  }
  std::string Prefix() const {
    return schedule_.name.empty() ? std::string() : StrCat("schedule ", schedule_.name, ": ");
  }

  int64_t LiveBytes() const {
    return kept_bytes_ + taped_bytes_ + (live_ && !aliased_ ? costs_.carry_bytes[p_] : 0);
  }
  void Touch(int64_t bytes) { cost_.peak_bytes = std::max(cost_.peak_bytes, bytes); }

  void Forward(const Action& a) {
    switch (a.kind) {
      case Kind::kAdvance:
        if (a.n < 1) Fail(a, "n must be >= 1");
        if (a.n > length_ - p_) Fail(a, StrCat("p + n = ", p_ + a.n, " is past L = ", length_));
        Advance(a, /*recompute=*/false, /*taped=*/false);
        return;
      case Kind::kAdvanceTaped:
        if (a.n < 1) Fail(a, "n must be >= 1");
        if (a.n > length_ - p_) Fail(a, StrCat("p + n = ", p_ + a.n, " is past L = ", length_));
        Advance(a, /*recompute=*/false, /*taped=*/true);
        return;
      case Kind::kSnapshot:
        Snapshot(a, length_, "L");
        return;
      default:
        Fail(a, "the forward pass holds only kAdvance, kAdvanceTaped and kSnapshot");
    }
  }

  void Backward(const Action& a) {
    switch (a.kind) {
      case Kind::kAdvance:
      case Kind::kAdvanceTaped:
        if (a.n < 1) Fail(a, "n must be >= 1");
        RequireLive(a);
        if (a.n >= frontier_ - p_) {
          Fail(a, StrCat("p + n = ", p_ + a.n, " must stay below the frontier ", frontier_,
                         " (a carry at or past the frontier is never needed)"));
        }
        Advance(a, /*recompute=*/true, /*taped=*/a.kind == Kind::kAdvanceTaped);
        return;
      case Kind::kReverseTaped: {
        if (a.n < 1) Fail(a, "n must be >= 1");
        if (a.n > frontier_) {
          Fail(a, StrCat("n = ", a.n, " is more than the ", frontier_, " steps below the frontier"));
        }
        for (int64_t i = frontier_ - a.n; i < frontier_; ++i) {
          if (!taped_[i]) {
            Fail(a, StrCat("step ", i, " is not taped (no kAdvanceTaped ran it since it was ",
                           "last differentiated)"));
          }
        }
        if (live_ && p_ >= frontier_ - a.n) {
          Fail(a, StrCat("the current carry at p = ", p_, " is at or past the new frontier ",
                         frontier_ - a.n, "; a carry there is never needed"));
        }
        for (int64_t i = frontier_ - a.n; i < frontier_; ++i) {
          taped_[i] = false;
          taped_bytes_ -= costs_.residual_bytes[i];
        }
        frontier_ -= a.n;
        cost_.taped_steps += a.n;
        return;
      }
      case Kind::kSnapshot:
        RequireLive(a);
        Snapshot(a, frontier_, "the frontier");
        return;
      case Kind::kRestore:
        if (a.n < 0 || a.n > length_) Fail(a, StrCat("position ", a.n, " is outside 0..", length_));
        if (a.n != 0 && !kept_[a.n]) Fail(a, StrCat("position ", a.n, " is not a snapshot"));
        if (a.n >= frontier_) {
          Fail(a, StrCat("position ", a.n, " is not below the frontier ", frontier_));
        }
        p_ = a.n;
        live_ = true;
        aliased_ = true;
        consumed_at_ = -1;
        return;
      case Kind::kDrop:
        if (a.n < 1 || a.n > length_ || !kept_[a.n]) {
          Fail(a, StrCat("position ", a.n, " is not a snapshot"));
        }
        kept_[a.n] = false;
        kept_bytes_ -= costs_.carry_bytes[a.n];
        --count_;
        // A current carry restored from it survives and now counts on its own.
        if (live_ && aliased_ && p_ == a.n) aliased_ = false;
        return;
      case Kind::kReverse: {
        if (a.n < 1) Fail(a, "n must be >= 1");
        RequireLive(a);
        if (p_ + a.n != frontier_) {
          Fail(a, StrCat("p + n = ", p_ + a.n, " but the frontier is ", frontier_));
        }
        int64_t residuals = 0;
        for (int64_t i = p_; i < frontier_; ++i) {
          if (taped_[i]) {
            Fail(a, StrCat("step ", i, " is taped: kReverseTaped differentiates it, not a kReverse"));
          }
        }
        for (int64_t i = p_; i < frontier_; ++i) {
          residuals += costs_.residual_bytes[i];
          cost_.recomputed_flops += costs_.step_flops[i];
        }
        cost_.recomputed_steps += a.n;
        Touch(kept_bytes_ + taped_bytes_ + residuals + costs_.carry_bytes[frontier_]);
        frontier_ = p_;
        live_ = false;
        aliased_ = false;
        consumed_at_ = static_cast<int64_t>(index_);
        return;
      }
    }
    Fail(a, "unknown action kind");
  }

  void RequireLive(const Action& a) const {
    if (live_) return;
    if (consumed_at_ >= 0) {
      Fail(a, StrCat("no current carry: the kReverse at backward action ", consumed_at_,
                     " consumed it; kRestore first"));
    }
    Fail(a, "no current carry at the start of the backward pass; kRestore first");
  }

  void Advance(const Action& a, bool recompute, bool taped) {
    const int64_t n = a.n;
    for (int64_t i = p_; i < p_ + n; ++i) {
      if (taped_[i]) {
        Fail(a, StrCat("step ", i, " is taped: it is not run again (its output carry is ",
                       "kept or consumed after its kAdvanceTaped)"));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      if (recompute) cost_.recomputed_flops += costs_.step_flops[p_];
      if (taped) {
        taped_[p_] = true;
        taped_bytes_ += costs_.residual_bytes[p_];
      }
      ++p_;
      aliased_ = false;
      Touch(LiveBytes());
    }
    if (recompute) cost_.recomputed_steps += n;
  }

  void Snapshot(const Action& a, int64_t limit, const char* limit_name) {
    if (a.n != 0) Fail(a, StrCat("kSnapshot takes no argument (n = ", a.n, ")"));
    if (p_ == 0) Fail(a, "position 0, the chain's input, is always kept");
    if (p_ >= limit) Fail(a, StrCat("p = ", p_, " must be below ", limit_name, " ", limit));
    if (kept_[p_]) Fail(a, StrCat("position ", p_, " is already a snapshot"));
    // The current carry (never aliased here: p is not kept) becomes the
    // snapshot: its bytes move, they are not added.
    kept_[p_] = true;
    kept_bytes_ += costs_.carry_bytes[p_];
    aliased_ = true;
    ++count_;
    cost_.max_snapshots = std::max(cost_.max_snapshots, count_);
    Touch(LiveBytes());
  }

  const Schedule& schedule_;
  const ChainCosts& costs_;
  const int64_t length_;
  std::vector<bool> kept_;
  std::vector<bool> taped_;  // taped_[i]: step i's tape is kept
  int64_t kept_bytes_ = 0;
  int64_t taped_bytes_ = 0;
  int count_ = 0;
  int64_t p_ = 0;
  bool live_ = true;     // the current carry exists
  bool aliased_ = true;  // ... and is a kept carry (position 0 or a snapshot)
  int64_t frontier_ = length_;
  int64_t consumed_at_ = -1;
  const char* phase_ = "forward";
  size_t index_ = 0;
  ScheduleCost cost_;
};

}  // namespace

ScheduleCost Simulate(const Schedule& schedule, const ChainCosts& costs) {
  costs.Validate();
  return Machine(schedule, costs).Run();
}

}  // namespace remat
