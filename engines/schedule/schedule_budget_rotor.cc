// Budget's solver in Rotor's form: RotorDp, after Beaumont et al.
// (schedule_internal::BudgetRotor).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {
namespace schedule_internal {
namespace {

// Rotor's DP (Beaumont et al.), over (segment [a, b), memory level j): the
// form in which every snapshot is kept until its segment is done. StackDp
// finds better schedules on some chains of differing sizes; this one is
// O(L^3) per level instead of O(L^4), for chains too long for StackDp.
// Levels as in StackDp.
//
// T(a, b, j): reverse [a, b) from the kept carry at a; every advance counts.
//   whole:  kReverse b-a (the snapshot at a dropped first):
//           residuals[a..b) + carry[b] <= M_j; cost flops[a..b)
//   split m: advance a -> m (kept a + carry[i] <= M_j for i in (a, m]),
//           snapshot m, T(m, b, j + k_a), then T(a, m, j); cost flops[a..m) + both
//   taped (b > a+1): Rotor's second mode: drop a, run step a keeping its tape
//           (t_a = ceil(residual_bytes[a] / unit) levels until it is
//           differentiated), go on from the live carry at a+1:
//           flops[a] + T(a+1, b, j + t_a), then kReverseTaped 1
// G(a, j): the same for [a, L) when the forward pass runs it for free:
//   no more forward snapshots: the walk to L fits, then T(a, L, j)
//   split m: the forward pass advances to m (fits) and keeps it: G(m, j + k_a) + T(a, m, j)
//   taped: the forward pass tapes step a (free): G(a+1, j + t_a), G(L, j) = 0
// The answer is G(0, 0). A carry reached by an advance is snapshotted only
// when its choice is a split (the others use it once, live).
class RotorDp {
 public:
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  RotorDp(const ChainCosts& c, int64_t budget, int64_t unit, int levels)
      : c_(c), length_(c.length()), budget_(budget), unit_(unit), levels_(levels) {
    flops_.assign(length_ + 1, 0);
    residuals_.assign(length_ + 1, 0);
    for (int64_t i = 0; i < length_; ++i) {
      flops_[i + 1] = flops_[i] + c.step_flops[i];
      residuals_[i + 1] = residuals_[i] + c.residual_bytes[i];
    }
    suffix_max_.assign(length_ + 1, 0);
    for (int64_t i = length_; i >= 1; --i) {
      suffix_max_[i - 1] = std::max(i < length_ ? suffix_max_[i] : 0, i < length_ ? c.carry_bytes[i] : c.EndBytes());
    }
    const size_t t_size = static_cast<size_t>((length_ + 1) * (length_ + 1)) * (levels_ + 1);
    t_.assign(t_size, kInf);
    t_choice_.assign(t_size, -1);
    g_.assign(static_cast<size_t>(length_ + 1) * (levels_ + 1), kInf);
    g_choice_.assign(g_.size(), -1);
    Solve();
  }

  double cost() const { return g_[G(0, 0)]; }

  Schedule Emit() const {
    Builder b(BudgetName(budget_), length_);
    // heads: segments [a, m) at level j to reverse after what follows them;
    // m = a + 1 with j = -1: a taped step.
    std::vector<std::tuple<int64_t, int64_t, int>> heads;
    int64_t a = 0;
    int j = 0;
    while (a < length_) {
      const int32_t choice = g_choice_[G(a, j)];
      if (choice == kTaped) {
        b.ForwardAdvanceTaped(1);
        heads.emplace_back(a, a + 1, -1);
        j += Taped(a);
        a += 1;
        continue;
      }
      if (a > 0) b.ForwardSnapshot();  // reached by an advance, restored later
      if (choice == kRest) break;
      if (choice < 0) throw Error("budget: internal error: no forward choice recorded");
      const int64_t m = choice;
      b.ForwardAdvance(m - a);
      heads.emplace_back(a, m, j);
      j += Held(a);
      a = m;
    }
    if (a < length_) {
      b.ForwardAdvance(length_ - a);
      EmitT(b, a, length_, j);
    }
    for (auto it = heads.rbegin(); it != heads.rend(); ++it) {
      if (std::get<2>(*it) < 0) {
        b.ReverseTaped(1);
      } else {
        EmitT(b, std::get<0>(*it), std::get<1>(*it), std::get<2>(*it));
      }
    }
    return b.Finish();
  }

 private:
  static constexpr int32_t kWhole = 0;
  static constexpr int32_t kRest = -2;
  static constexpr int32_t kTaped = -3;

  size_t T(int64_t a, int64_t b, int j) const {
    return static_cast<size_t>(a * (length_ + 1) + b) * (levels_ + 1) + j;
  }
  size_t G(int64_t a, int j) const { return static_cast<size_t>(a) * (levels_ + 1) + j; }
  int64_t Kept(int64_t a) const { return a == 0 ? 0 : c_.carry_bytes[a]; }
  int Held(int64_t a) const { return static_cast<int>(CeilDiv(Kept(a), unit_)); }
  int Taped(int64_t a) const { return static_cast<int>(CeilDiv(c_.residual_bytes[a], unit_)); }
  int64_t Memory(int j) const { return budget_ - j * unit_; }

  void Solve() {
    for (int64_t len = 1; len <= length_; ++len) {
      for (int64_t a = 0; a + len <= length_; ++a) {
        const int64_t b = a + len;
        const int64_t kept = Kept(a);
        const int held = Held(a);
        for (int j = 0; j <= levels_; ++j) {
          const int64_t memory = Memory(j);
          if (kept > memory) continue;
          double best = kInf;
          int32_t choice = -1;
          if (residuals_[b] - residuals_[a] + c_.carry_bytes[b] <= memory) {
            best = flops_[b] - flops_[a];
            choice = kWhole;
          }
          if (j + held <= levels_) {
            int64_t walk = 0;
            for (int64_t m = a + 1; m < b; ++m) {
              walk = std::max(walk, c_.carry_bytes[m]);
              if (kept + walk > memory) break;
              const double v = flops_[m] - flops_[a] + t_[T(m, b, j + held)] + t_[T(a, m, j)];
              if (v < best) {
                best = v;
                choice = static_cast<int32_t>(m);
              }
            }
          }
          if (len >= 2 && j + Taped(a) <= levels_) {
            const double v = flops_[a + 1] - flops_[a] + t_[T(a + 1, b, j + Taped(a))];
            if (v < best) {
              best = v;
              choice = kTaped;
            }
          }
          t_[T(a, b, j)] = best;
          t_choice_[T(a, b, j)] = choice;
        }
      }
    }
    for (int j = 0; j <= levels_; ++j) {
      if (c_.EndBytes() <= Memory(j)) g_[G(length_, j)] = 0;  // every step taped
    }
    for (int64_t a = length_ - 1; a >= 0; --a) {
      const int64_t kept = Kept(a);
      const int held = Held(a);
      for (int j = 0; j <= levels_; ++j) {
        const int64_t memory = Memory(j);
        if (kept > memory) continue;
        double best = kInf;
        int32_t choice = -1;
        if (j + Taped(a) <= levels_ && g_[G(a + 1, j + Taped(a))] < kInf) {
          best = g_[G(a + 1, j + Taped(a))];
          choice = kTaped;
        }
        if (kept + suffix_max_[a] <= memory && t_[T(a, length_, j)] < best) {
          best = t_[T(a, length_, j)];
          choice = kRest;
        }
        if (j + held <= levels_) {
          int64_t walk = 0;
          for (int64_t m = a + 1; m < length_; ++m) {
            walk = std::max(walk, c_.carry_bytes[m]);
            if (kept + walk > memory) break;
            const double v = g_[G(m, j + held)] + t_[T(a, m, j)];
            if (v < best) {
              best = v;
              choice = static_cast<int32_t>(m);
            }
          }
        }
        g_[G(a, j)] = best;
        g_choice_[G(a, j)] = choice;
      }
    }
  }

  void EmitT(Builder& b, int64_t a, int64_t end, int j) const {
    while (true) {
      const int32_t choice = t_choice_[T(a, end, j)];
      if (choice == -1) throw Error("budget: internal error: no schedule recorded");
      b.RestoreTo(a);
      if (choice == kWhole) {
        b.Reverse(end - a);
        return;
      }
      if (choice == kTaped) {
        b.AdvanceTaped(1);
        EmitLive(b, a + 1, end, j + Taped(a));
        b.ReverseTaped(1);
        return;
      }
      const int64_t m = choice;
      b.Advance(m - a);
      EmitLive(b, m, end, j + Held(a));
      end = m;
    }
  }

  // The carry at a is live after an advance: it is snapshotted only when
  // T(a, end, j) splits (and so restores it later).
  void EmitLive(Builder& b, int64_t a, int64_t end, int j) const {
    const int32_t choice = t_choice_[T(a, end, j)];
    if (choice != kWhole && choice != kTaped) b.Snapshot();
    EmitT(b, a, end, j);
  }

  const ChainCosts& c_;
  int64_t length_;
  int64_t budget_;
  int64_t unit_;
  int levels_;
  std::vector<double> flops_;
  std::vector<int64_t> residuals_;
  std::vector<int64_t> suffix_max_;  // suffix_max_[a]: the largest carry at a+1..L (at L: EndBytes)
  std::vector<double> t_;
  std::vector<int32_t> t_choice_;
  std::vector<double> g_;
  std::vector<int32_t> g_choice_;
};

}  // namespace

Schedule BudgetRotor(const ChainCosts& c, int64_t budget, double max_work) {
  const double l = static_cast<double>(c.length());
  return SolveBudget<RotorDp>(c, budget, max_work, RotorWork(l), RotorEntries(l));
}

}  // namespace schedule_internal
}  // namespace remat
