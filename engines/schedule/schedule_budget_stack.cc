// Budget's exact solver: StackDp, the DP over every schedule of the action
// language (schedule_internal::BudgetExact).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {
namespace schedule_internal {
namespace {

// The exact DP for any chain: the optimum over every schedule of the action
// language. Two normalisations lose nothing: a kRestore always takes the
// highest snapshot below the frontier (starting lower only advances more), and
// a snapshot is dropped right after its last kRestore (keeping it longer only
// costs memory). The snapshots then form a stack, and a snapshot may be
// dropped before its segment is done: its last kRestore advances to a new
// snapshot p, and what lies below p falls back to the snapshot beneath (it
// was a stepping stone; the forward pass's snapshots are free ones). Rotor's
// form keeps every snapshot until its segment is done, and misses these.
//
// Memory is counted in levels: level j leaves M_j = budget - j * unit bytes
// to a subproblem, what is kept outside it being the rest. Keeping a
// snapshot at a while deeper work runs costs k_a = ceil(carry_bytes[a] / unit)
// levels: exact when unit divides every carry size (unit = their gcd), an
// overcharge otherwise (the schedule still fits; it may recompute more).
//
// E(a, f, m, j): a on top of the stack (kept, counted in M_j), frontier f;
// the cost of bringing the frontier down to m (a <= m < f) with a dropped at
// the end. What lies below a is kept outside: budget - M_j.
//   F1 (m = a): kReverse f-a from a (a dropped first): residuals[a..f) + carry[f] <= M_j.
//   F2 (a > 0, m > a): a's last kRestore, dropped, advance to p <= m
//       (carry[i] <= M_j on the way), snapshot p: flops[a..p) + E(p, f, m, j).
//   F3 (m = a, f > a+1): Rotor's second mode: a dropped, step a run keeping
//       its tape (t_a = ceil(residual_bytes[a] / unit) levels until the
//       kReverseTaped that differentiates it), then on from the live carry at
//       a+1: flops[a] + E(a+1, f, a+1, j + t_a).
//   phase: advance a -> p keeping a, snapshot p; p's work brings the frontier
//       to f' > m; then on from a: Q(a, f, f', j) + E(a, f', m, j), where
//       Q(a, f, f', j) = min over p in (a, f'] of flops[a..p) + E(p, f, f', j + k_a).
// EG(a, m, j): the same when a was kept by the forward pass, which runs on
// past a for free: either it keeps nothing more (the walk to L fits, then
// E(a, L, m, j)) or it keeps s > a, whose work brings the frontier to f':
// QG(a, f', j) + E(a, f', m, j), QG(a, f', j) = min over s of EG(s, f', j + k_a);
// or (m = a) it tapes step a for free: EG(a+1, a+1, j + t_a), EG(L, L, j) = 0.
// A carry the forward pass reaches is snapshotted unless it is taped. Tapes
// are taken in Rotor's position (right after their step's input carry was
// last used, their rest reversed before them), which the rules make the
// only one: a taped step is never run again.
// The answer is EG(0, 0, 0). O(L^4 / 8) per level, O(L^3 / 3) entries.
class StackDp {
 public:
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  StackDp(const ChainCosts& c, int64_t budget, int64_t unit, int levels)
      : c_(c), length_(c.length()), budget_(budget), unit_(unit), levels_(levels) {
    const int64_t n = length_ + 1;
    flops_.assign(n, 0);
    residuals_.assign(n, 0);
    for (int64_t i = 0; i < length_; ++i) {
      flops_[i + 1] = flops_[i] + c.step_flops[i];
      residuals_[i + 1] = residuals_[i] + c.residual_bytes[i];
    }
    walk_.assign(n * n, 0);
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t p = a + 1; p < n; ++p) {
        // At L the forward pass ends: what the run computes next comes on top.
        walk_[a * n + p] = std::max(walk_[a * n + p - 1], p < length_ ? c.carry_bytes[p] : c.EndBytes());
      }
    }
    // Triples a <= m < f (E) and a < f' < f (Q), each with every level.
    base_.assign(n * n, 0);
    size_t count = 0;
    for (int64_t f = 1; f <= length_; ++f) {
      for (int64_t a = 0; a < f; ++a) {
        base_[f * n + a] = count;
        count += f - a;
      }
    }
    e_.assign(count * (levels_ + 1), kInf);
    q_.assign(count * (levels_ + 1), kInf);
    eg_.assign(static_cast<size_t>(n * n) * (levels_ + 1), kInf);
    qg_.assign(eg_.size(), kInf);
    Solve();
  }

  double cost() const { return eg_[G(0, 0, 0)]; }

  Schedule Emit() const {
    Builder b(BudgetName(budget_), length_);
    EmitG(b, 0, 0, 0);
    return b.Finish();
  }

 private:
  size_t E(int64_t a, int64_t f, int64_t m, int j) const {
    return (base_[f * (length_ + 1) + a] + (m - a)) * (levels_ + 1) + j;
  }
  // Q(a, f, f') for a < f' < f shares E's layout with m = f'.
  size_t Q(int64_t a, int64_t f, int64_t f2, int j) const { return E(a, f, f2, j); }
  size_t G(int64_t a, int64_t m, int j) const {
    return (static_cast<size_t>(a) * (length_ + 1) + m) * (levels_ + 1) + j;
  }
  int64_t Walk(int64_t a, int64_t p) const { return walk_[a * (length_ + 1) + p]; }
  int64_t Kept(int64_t a) const { return a == 0 ? 0 : c_.carry_bytes[a]; }
  int Held(int64_t a) const { return static_cast<int>(CeilDiv(Kept(a), unit_)); }
  int Taped(int64_t a) const { return static_cast<int>(CeilDiv(c_.residual_bytes[a], unit_)); }
  int64_t Memory(int j) const { return budget_ - j * unit_; }
  double Flops(int64_t a, int64_t b) const { return flops_[b] - flops_[a]; }
  bool WholeFits(int64_t a, int64_t f, int j) const {
    return residuals_[f] - residuals_[a] + c_.carry_bytes[f] <= Memory(j);
  }

  // The options, shared by Solve and Emit so that Emit finds the same values.
  double F2(int64_t a, int64_t f, int64_t m, int j, int64_t p) const {
    return Flops(a, p) + e_[E(p, f, m, j)];
  }
  double Phase(int64_t a, int64_t f, int64_t m, int j, int64_t f2) const {
    return q_[Q(a, f, f2, j)] + e_[E(a, f2, m, j)];
  }
  double QOption(int64_t a, int64_t f, int64_t f2, int j, int64_t p) const {
    return Flops(a, p) + e_[E(p, f, f2, j + Held(a))];
  }
  double GSplit(int64_t a, int64_t m, int j, int64_t f2) const {
    return qg_[G(a, f2, j)] + e_[E(a, f2, m, j)];
  }
  // F3, and the forward pass's tape: kInf where they do not apply.
  double F3(int64_t a, int64_t f, int64_t m, int j) const {
    if (m != a || f < a + 2 || j + Taped(a) > levels_) return kInf;
    return Flops(a, a + 1) + e_[E(a + 1, f, a + 1, j + Taped(a))];
  }
  double GTape(int64_t a, int64_t m, int j) const {
    if (m != a || j + Taped(a) > levels_) return kInf;
    return eg_[G(a + 1, a + 1, j + Taped(a))];
  }

  void Solve() {
    for (int64_t f = 1; f <= length_; ++f) {
      for (int64_t a = f - 1; a >= 0; --a) {
        const int64_t kept = Kept(a);
        const int held = Held(a);
        for (int j = 0; j <= levels_; ++j) {
          const int64_t memory = Memory(j);
          if (kept > memory) continue;
          if (j + held <= levels_) {
            for (int64_t f2 = a + 1; f2 < f; ++f2) {
              double best = kInf;
              for (int64_t p = a + 1; p <= f2 && kept + Walk(a, p) <= memory; ++p) {
                best = std::min(best, QOption(a, f, f2, j, p));
              }
              q_[Q(a, f, f2, j)] = best;
            }
          }
          const int64_t last_m = a == 0 ? 0 : f - 1;  // position 0 is never dropped
          for (int64_t m = a; m <= last_m; ++m) {
            double best = kInf;
            if (m == a && WholeFits(a, f, j)) best = Flops(a, f);
            best = std::min(best, F3(a, f, m, j));
            if (a > 0) {
              for (int64_t p = a + 1; p <= m && Walk(a, p) <= memory; ++p) {
                best = std::min(best, F2(a, f, m, j, p));
              }
            }
            for (int64_t f2 = m + 1; f2 < f; ++f2) best = std::min(best, Phase(a, f, m, j, f2));
            e_[E(a, f, m, j)] = best;
          }
        }
      }
    }
    for (int j = 0; j <= levels_; ++j) {
      if (c_.EndBytes() <= Memory(j)) eg_[G(length_, length_, j)] = 0;  // all taped
    }
    for (int64_t a = length_ - 1; a >= 0; --a) {
      const int64_t kept = Kept(a);
      const int held = Held(a);
      for (int j = 0; j <= levels_; ++j) {
        const int64_t memory = Memory(j);
        if (kept > memory) continue;
        if (j + held <= levels_) {
          for (int64_t f2 = a + 1; f2 < length_; ++f2) {
            double best = kInf;
            for (int64_t s = a + 1; s <= f2 && kept + Walk(a, s) <= memory; ++s) {
              best = std::min(best, eg_[G(s, f2, j + held)]);
            }
            qg_[G(a, f2, j)] = best;
          }
        }
        const bool walk_to_end = kept + Walk(a, length_) <= memory;
        const int64_t last_m = a == 0 ? 0 : length_ - 1;
        for (int64_t m = a; m <= last_m; ++m) {
          double best = walk_to_end ? e_[E(a, length_, m, j)] : kInf;
          best = std::min(best, GTape(a, m, j));
          for (int64_t f2 = m + 1; f2 < length_; ++f2) best = std::min(best, GSplit(a, m, j, f2));
          eg_[G(a, m, j)] = best;
        }
      }
    }
  }

  // The forward pass is at a with the carry live (a > 0: not yet kept).
  void EmitG(Builder& b, int64_t a, int64_t m, int j) const {
    if (a == length_) return;  // every step from here taped
    const double value = eg_[G(a, m, j)];
    if (GTape(a, m, j) == value) {
      b.ForwardAdvanceTaped(1);
      EmitG(b, a + 1, a + 1, j + Taped(a));
      b.ReverseTaped(1);
      return;
    }
    if (a > 0) b.ForwardSnapshot();
    if (Kept(a) + Walk(a, length_) <= Memory(j) && e_[E(a, length_, m, j)] == value) {
      b.ForwardAdvance(length_ - a);
      EmitE(b, a, length_, m, j, /*kept=*/true);
      return;
    }
    for (int64_t f2 = m + 1; f2 < length_; ++f2) {
      if (GSplit(a, m, j, f2) != value) continue;
      const double q = qg_[G(a, f2, j)];
      for (int64_t s = a + 1; s <= f2; ++s) {
        if (Kept(a) + Walk(a, s) > Memory(j) || eg_[G(s, f2, j + Held(a))] != q) continue;
        b.ForwardAdvance(s - a);
        EmitG(b, s, f2, j + Held(a));
        EmitE(b, a, f2, m, j, /*kept=*/true);
        return;
      }
    }
    throw Error("budget: internal error: no forward choice matches");
  }

  // Whether E(a, f, m, j) starts with a's last kRestore (F1 or F2): then a
  // needs no snapshot when the carry at a is live.
  bool FinalFirst(int64_t a, int64_t f, int64_t m, int j) const {
    const double value = e_[E(a, f, m, j)];
    if (m == a && WholeFits(a, f, j) && Flops(a, f) == value) return true;
    if (F3(a, f, m, j) == value) return true;
    for (int64_t p = a + 1; p <= m && Walk(a, p) <= Memory(j); ++p) {
      if (F2(a, f, m, j, p) == value) return true;
    }
    return false;
  }

  // kept: a is a snapshot (or 0); otherwise the carry at a is live and unkept,
  // and FinalFirst holds.
  void EmitE(Builder& b, int64_t a, int64_t f, int64_t m, int j, bool kept) const {
    while (true) {
      const double value = e_[E(a, f, m, j)];
      if (kept) b.RestoreTo(a);
      if (m == a && WholeFits(a, f, j) && Flops(a, f) == value) {
        b.Reverse(f - a);
        return;
      }
      if (F3(a, f, m, j) == value) {
        b.AdvanceTaped(1);
        EmitChild(b, a + 1, f, a + 1, j + Taped(a));
        b.ReverseTaped(1);
        return;
      }
      for (int64_t p = a + 1; a > 0 && p <= m && Walk(a, p) <= Memory(j); ++p) {
        if (F2(a, f, m, j, p) != value) continue;
        b.Advance(p - a);
        EmitChild(b, p, f, m, j);
        return;
      }
      if (!kept) throw Error("budget: internal error: an unkept carry needs a phase");
      bool done = false;
      for (int64_t f2 = m + 1; f2 < f && !done; ++f2) {
        if (Phase(a, f, m, j, f2) != value) continue;
        const double q = q_[Q(a, f, f2, j)];
        for (int64_t p = a + 1; p <= f2; ++p) {
          if (Kept(a) + Walk(a, p) > Memory(j) || QOption(a, f, f2, j, p) != q) continue;
          b.Advance(p - a);
          EmitChild(b, p, f, f2, j + Held(a));
          f = f2;
          done = true;
          break;
        }
      }
      if (!done) throw Error("budget: internal error: no backward choice matches");
    }
  }

  // The carry at p is live after an advance: keep it unless its work starts
  // by dropping it.
  void EmitChild(Builder& b, int64_t p, int64_t f, int64_t m, int j) const {
    const bool kept = !FinalFirst(p, f, m, j);
    if (kept) b.Snapshot();
    EmitE(b, p, f, m, j, kept);
  }

  const ChainCosts& c_;
  int64_t length_;
  int64_t budget_;
  int64_t unit_;
  int levels_;
  std::vector<double> flops_;
  std::vector<int64_t> residuals_;
  std::vector<int64_t> walk_;  // walk_[a][p]: the largest carry at a+1..p (at L: EndBytes)
  std::vector<size_t> base_;
  std::vector<double> e_, q_, eg_, qg_;
};

}  // namespace

Schedule BudgetExact(const ChainCosts& c, int64_t budget, double max_work) {
  const double l = static_cast<double>(c.length());
  return SolveBudget<StackDp>(c, budget, max_work, StackWork(l), StackEntries(l));
}

}  // namespace schedule_internal
}  // namespace remat
