// Budget's solver for uniform chains: UniformDp, Rotor's DP by segment length,
// vectorised (schedule_internal::BudgetUniform).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {
namespace schedule_internal {
namespace {

// min over i < n of a[i] + b[i] (kInf when n <= 0): the uniform DP's inner
// loop, nearly all of Budget's time. Written with vector types because -O2
// does not vectorise the reduction; the AVX2 clone runs where the CPU has it.
using Lanes = int32_t __attribute__((vector_size(32)));

__attribute__((target_clones("avx2", "default"))) int32_t MinOfSums(const int32_t* a, const int32_t* b,
                                                                      int64_t n) {
  constexpr int32_t kInf32 = std::numeric_limits<int32_t>::max() / 4;
  constexpr int kWidth = sizeof(Lanes) / sizeof(int32_t);
  Lanes best;
  for (int k = 0; k < kWidth; ++k) best[k] = kInf32;
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    Lanes x, y;
    std::memcpy(&x, a + i, sizeof(Lanes));
    std::memcpy(&y, b + i, sizeof(Lanes));
    const Lanes sum = x + y;
    best = sum < best ? sum : best;
  }
  int32_t result = kInf32;
  for (int k = 0; k < kWidth; ++k) result = std::min(result, best[k]);
  for (; i < n; ++i) result = std::min(result, a[i] + b[i]);
  return result;
}

// Rotor's DP for a uniform chain (carry C at every position > 0, residual R
// and equal flops per step), where T and G depend only on the segment's
// length, whether it starts at 0, and the level: O(L^2) per level instead of
// O(L^3). Level j has M_j = budget - j * unit with unit >= C (C itself unless
// that makes too many levels), and holding a snapshot costs one level (none
// when C = 0). Costs are in steps. On uniform chains Rotor's form loses
// nothing: a snapshot dropped before its segment is done would help only if
// sizes differed (the exhaustive tests find no exception for L <= 12, and the
// tests match this DP against StackDp).
class UniformDp {
 public:
  static constexpr int32_t kInf = std::numeric_limits<int32_t>::max() / 4;

  UniformDp(int64_t length, int64_t carry, int64_t residual, int64_t after, int64_t budget,
            int64_t unit, int levels)
      : length_(length),
        carry_(carry),
        after_(after),
        residual_(residual),
        budget_(budget),
        unit_(unit),
        levels_(levels),
        held_(static_cast<int>(CeilDiv(carry, unit))),
        taped_(static_cast<int>(CeilDiv(residual, unit))) {
    Solve();
  }

  int64_t steps() const { return top_; }

  Schedule Emit() const {
    Builder b(BudgetName(budget_), length_);
    // heads: segments [a, m) at level j reversed after what follows them; j =
    // -1: the taped step a.
    std::vector<std::tuple<int64_t, int64_t, int>> heads;
    int64_t a = 0;
    int j = 0;
    while (a < length_) {
      const int64_t x = length_ - a;
      const int32_t value = a == 0 ? top_ : G(j)[x];
      const int32_t* self = a == 0 ? t0_.data() : T(j);
      if (WalkFits(a, j) && value == self[x]) {
        if (a > 0) b.ForwardSnapshot();
        break;  // no more forward snapshots
      }
      if (j + taped_ <= levels_ && value == G(j + taped_)[x - 1]) {
        b.ForwardAdvanceTaped(1);
        heads.emplace_back(a, a + 1, -1);
        a += 1;
        j += taped_;
        continue;
      }
      const int tail = j + (a == 0 ? 0 : held_);
      if (tail > levels_) throw Error("budget: internal error: no level for a split");
      const int32_t* g_tail = G(tail);
      int64_t y = 1;
      while (y < x && g_tail[x - y] + self[y] != value) ++y;
      if (y == x) throw Error("budget: internal error: no split found");
      if (a > 0) b.ForwardSnapshot();
      b.ForwardAdvance(y);
      heads.emplace_back(a, a + y, j);
      a += y;
      j = tail;
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
  int32_t* T(int j) { return &t_[static_cast<size_t>(j) * (length_ + 1)]; }
  const int32_t* T(int j) const { return &t_[static_cast<size_t>(j) * (length_ + 1)]; }
  int32_t* G(int j) { return &g_[static_cast<size_t>(j) * (length_ + 1)]; }
  const int32_t* G(int j) const { return &g_[static_cast<size_t>(j) * (length_ + 1)]; }
  int64_t Memory(int j) const { return budget_ - j * unit_; }
  // The forward pass may walk from a to L keeping a (free at a = 0), the run
  // computing after_ bytes more at L.
  bool WalkFits(int64_t a, int j) const { return Memory(j) >= (a == 0 ? 0 : carry_) + carry_ + after_; }
  // The longest segment one kReverse can take from a kept start with `memory`
  // bytes: residuals + the arriving carry (a > 0: the start's snapshot is
  // dropped first; a = 0: the input is free; the same bound either way).
  int64_t Whole(int64_t memory) const {
    if (memory < carry_) return 0;
    if (residual_ == 0) return length_;
    return std::min(length_, (memory - carry_) / residual_);
  }

  // min over y in [1, x) of a[y] + b[x - y], with b_reversed[i] = b[length - i].
  int32_t MinPlus(const int32_t* a, const int32_t* b_reversed, int64_t x) const {
    return MinOfSums(a + 1, b_reversed + (length_ - x) + 1, x - 1);
  }

  // T(x, j) for a > 0 (j < 0: t0_, a = 0 at level 0) starts by taping its
  // first step.
  bool TapeFirst(int64_t x, int j) const {
    const int level = std::max(j, 0);
    if (x < 2 || level + taped_ > levels_ || x <= Whole(Memory(level))) return false;
    const int32_t value = j < 0 ? t0_[x] : T(j)[x];
    return value == 1 + T(level + taped_)[x - 1];
  }

  void Solve() {
    const size_t row = static_cast<size_t>(length_ + 1);
    t_.assign(row * (levels_ + 1), kInf);
    g_.assign(row * (levels_ + 1), kInf);
    t0_.assign(row, kInf);
    std::vector<int32_t> advanced(row, kInf);  // y + T(y, j)
    std::vector<int32_t> t_reversed(row), g_reversed(row);
    // Deeper levels first: a split's tail and a tape's rest live deeper (at
    // the same level when their bytes are 0, then at smaller x).
    for (int j = levels_; j >= 0; --j) {
      const int64_t memory = Memory(j);
      int32_t* t = T(j);
      int32_t* g = G(j);
      if (memory < carry_) continue;
      // Nothing left to run: every step taped, the output live.
      g[0] = memory >= carry_ + after_ ? 0 : kInf;
      const int64_t whole = Whole(memory);
      const bool split = memory >= 2 * carry_ && j + held_ <= levels_;
      const int tail = j + held_;
      const bool tape = j + taped_ <= levels_;
      const int32_t* t_tape = tape ? T(j + taped_) : nullptr;
      const int32_t* g_tape = tape ? G(j + taped_) : nullptr;
      if (split && held_ > 0) Reverse(T(tail), t_reversed);
      for (int64_t x = 1; x <= length_; ++x) {
        int32_t best = kInf;
        if (x <= whole) {
          best = static_cast<int32_t>(x);
        } else {
          if (split) {
            if (held_ == 0) Reverse(t, t_reversed, x);
            best = std::min(best, MinPlus(advanced.data(), t_reversed.data(), x));
          }
          if (tape && x >= 2) best = std::min(best, 1 + t_tape[x - 1]);
        }
        t[x] = std::min(kInf, best);
        advanced[x] = std::min<int64_t>(kInf, x + t[x]);
      }
      const bool walk = WalkFits(1, j);
      if (split && held_ > 0) Reverse(G(tail), g_reversed);
      for (int64_t x = 1; x <= length_; ++x) {
        int32_t best = kInf;
        if (walk) {
          best = t[x];
          if (split) {
            if (held_ == 0) Reverse(g, g_reversed, x);
            best = std::min(best, MinPlus(t, g_reversed.data(), x));
          }
        }
        if (tape) best = std::min(best, g_tape[x - 1]);
        g[x] = std::min(kInf, best);
      }
    }
    // The segments starting at the input: level 0 only, and holding position
    // 0 costs nothing, so their split tails stay at level 0.
    const int64_t whole0 = Whole(budget_);
    const bool split = budget_ >= carry_;
    const bool tape = taped_ <= levels_;
    Reverse(T(0), t_reversed);
    for (int64_t x = 1; x <= length_; ++x) {
      int32_t best = kInf;
      if (x <= whole0) {
        best = static_cast<int32_t>(x);
      } else {
        if (split) best = std::min(best, MinPlus(advanced.data(), t_reversed.data(), x));
        if (tape && x >= 2) best = std::min(best, 1 + T(taped_)[x - 1]);
      }
      t0_[x] = std::min(kInf, best);
      advanced[x] = std::min<int64_t>(kInf, x + t0_[x]);
    }
    top_ = t0_[length_];
    if (split) {
      Reverse(G(0), g_reversed);
      top_ = std::min(top_, MinPlus(t0_.data(), g_reversed.data(), length_));
    }
    if (tape) top_ = std::min(top_, G(taped_)[length_ - 1]);
  }

  void Reverse(const int32_t* v, std::vector<int32_t>& out, int64_t upto = -1) const {
    // out[i] = v[length - i] for the entries a MinPlus up to x reads.
    const int64_t lo = upto < 0 ? 0 : length_ - upto;
    for (int64_t i = lo; i <= length_; ++i) out[i] = v[length_ - i];
  }

  void EmitT(Builder& b, int64_t a, int64_t end, int j) const {
    while (true) {
      const int64_t x = end - a;
      const int64_t memory = Memory(j);
      const int64_t whole = Whole(memory);
      b.RestoreTo(a);
      if (x <= whole) {
        b.Reverse(x);
        return;
      }
      if (TapeFirst(x, a == 0 ? -1 : j)) {
        b.AdvanceTaped(1);
        EmitLive(b, a + 1, end, j + taped_);
        b.ReverseTaped(1);
        return;
      }
      const int32_t* self = a == 0 ? t0_.data() : T(j);
      const int tail = j + (a == 0 ? 0 : held_);
      if (tail > levels_) throw Error("budget: internal error: no level for a split");
      const int32_t* t_tail = T(tail);
      const int32_t value = self[x];
      int64_t y = 1;
      while (y < x && y + self[y] + t_tail[x - y] != value) ++y;
      if (y == x) throw Error("budget: internal error: no split found");
      b.Advance(y);
      EmitLive(b, a + y, end, tail);
      end = a + y;
    }
  }

  // The carry at a > 0 is live after an advance: it is snapshotted only when
  // T(end - a, j) splits (and so restores it later).
  void EmitLive(Builder& b, int64_t a, int64_t end, int j) const {
    const int64_t x = end - a;
    if (x > Whole(Memory(j)) && !TapeFirst(x, j)) b.Snapshot();
    EmitT(b, a, end, j);
  }

  int64_t length_;
  int64_t carry_;
  int64_t after_;  // ChainCosts::after_bytes
  int64_t residual_;
  int64_t budget_;
  int64_t unit_;
  int levels_;
  int held_;
  int taped_;                // levels a tape holds
  std::vector<int32_t> t_;   // T(x, j) at [j][x]: segments starting at a > 0
  std::vector<int32_t> g_;   // G(x, j) at [j][x]
  std::vector<int32_t> t0_;  // T(x) for segments starting at 0 (level 0)
  int32_t top_ = kInf;       // G(L) from position 0
};

}  // namespace

Schedule BudgetUniform(const ChainCosts& c, int64_t budget, double max_work) {
  CheckBudget(c, budget);
  if (!IsUniform(c)) throw Error("budget: BudgetUniform needs a uniform chain");
  if (TapeAllFits(c, budget)) return TapeAll(c, budget);
  const int64_t l = c.length();
  if (l > kMaxUniformLength) {
    throw Error(StrCat("budget: chains of more than ", kMaxUniformLength, " steps are not supported (L = ",
                       l, ")"));
  }
  const int64_t carry = c.carry_bytes[1];
  const int64_t residual = c.residual_bytes[0];
  // Levels with room for the live carry: M_j >= carry (a tape's rest may
  // need no more: the output after the last step taped).
  const int64_t room = budget - carry;  // >= 0: the budget is feasible
  // Units of the gcd of the carry and the residual: a snapshot and a tape
  // each cost whole levels.
  int64_t unit = std::max<int64_t>(std::gcd(carry, residual), 1);
  int64_t levels = carry == 0 && residual == 0 ? 0 : room / unit;
  const double cap = std::max(1.0, std::min(max_work / (static_cast<double>(l) * l),
                                             kMaxUniformEntries / (l + 1.0)));
  if (static_cast<double>(levels) + 1 > cap) {
    unit = std::max<int64_t>(unit, static_cast<int64_t>(std::ceil(room / std::max(1.0, cap - 1))));
    levels = room / unit;
  }
  UniformDp dp(l, carry, residual, c.after_bytes, budget, unit, static_cast<int>(levels));
  if (dp.steps() >= UniformDp::kInf) {
    throw Error(StrCat("budget: internal error: no schedule found within ", budget, " bytes"));
  }
  return dp.Emit();
}

}  // namespace schedule_internal
}  // namespace remat
