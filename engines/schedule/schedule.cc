#include "engines/schedule/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engines/api/error.h"

namespace remat {
namespace {

using Kind = ActionKind;

const char* KindName(ActionKind kind) {
  switch (kind) {
    case Kind::kAdvance:
      return "kAdvance";
    case Kind::kSnapshot:
      return "kSnapshot";
    case Kind::kRestore:
      return "kRestore";
    case Kind::kDrop:
      return "kDrop";
    case Kind::kReverse:
      return "kReverse";
    case Kind::kAdvanceTaped:
      return "kAdvanceTaped";
    case Kind::kReverseTaped:
      return "kReverseTaped";
  }
  return "kUnknown";
}

// ---------------------------------------------------------------------------
// Simulate

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

// ---------------------------------------------------------------------------
// Building schedules

// Collects a schedule's actions. The backward helpers track the position so
// that a kRestore of the carry already current is left out. Finish() puts each
// snapshot's kDrop right after its last kRestore: the restored carry then owns
// the bytes, and they are freed as soon as it moves on (or is consumed).
class Builder {
 public:
  Builder(std::string name, int64_t length) : length_(length) { schedule_.name = std::move(name); }

  void ForwardAdvance(int64_t n) { Append(schedule_.forward, Kind::kAdvance, n); }
  void ForwardSnapshot() { schedule_.forward.push_back({Kind::kSnapshot, 0}); }
  // Consecutive runs of one kind merge into one action.
  void ForwardAdvanceTaped(int64_t n) { Append(schedule_.forward, Kind::kAdvanceTaped, n); }

  void RestoreTo(int64_t position) {
    if (live_ && p_ == position) return;
    schedule_.backward.push_back({Kind::kRestore, position});
    p_ = position;
    live_ = true;
  }
  void Advance(int64_t n) {
    Append(schedule_.backward, Kind::kAdvance, n);
    p_ += n;
  }
  void Snapshot() { schedule_.backward.push_back({Kind::kSnapshot, 0}); }
  void AdvanceTaped(int64_t n) {
    Append(schedule_.backward, Kind::kAdvanceTaped, n);
    p_ += n;
  }
  void ReverseTaped(int64_t n) { Append(schedule_.backward, Kind::kReverseTaped, n); }
  void Reverse(int64_t n) {
    schedule_.backward.push_back({Kind::kReverse, n});
    live_ = false;
  }

  Schedule Finish() {
    PlaceDrops();
    return std::move(schedule_);
  }

 private:
  static void Append(std::vector<Action>& actions, Kind kind, int64_t n) {
    if (n <= 0) return;
    if (!actions.empty() && actions.back().kind == kind) {
      actions.back().n += n;
    } else {
      actions.push_back({kind, n});
    }
  }

  void PlaceDrops() {
    struct Life {
      int64_t created = -1;       // backward index of its kSnapshot; -1: the forward pass
      int64_t last_restore = -1;  // backward index of its last kRestore
    };
    std::vector<Action> backward;
    for (const Action& a : schedule_.backward) {
      if (a.kind != Kind::kDrop) backward.push_back(a);
    }
    // drops[i + 1]: the positions to drop after backward action i.
    std::vector<std::vector<int64_t>> drops(backward.size() + 1);
    std::map<int64_t, Life> open;
    auto close = [&](int64_t position, const Life& life) {
      int64_t after = life.last_restore >= 0 ? life.last_restore : life.created;
      drops[after + 1].push_back(position);
    };
    int64_t p = 0;
    for (const Action& a : schedule_.forward) {
      if (a.kind == Kind::kAdvance || a.kind == Kind::kAdvanceTaped) p += a.n;
      if (a.kind == Kind::kSnapshot) open[p] = Life{};
    }
    p = length_;
    for (size_t i = 0; i < backward.size(); ++i) {
      const Action& a = backward[i];
      if (a.kind == Kind::kAdvance || a.kind == Kind::kAdvanceTaped) p += a.n;
      if (a.kind == Kind::kRestore) {
        p = a.n;
        auto it = open.find(p);
        if (it != open.end()) it->second.last_restore = static_cast<int64_t>(i);
      }
      if (a.kind == Kind::kSnapshot) {
        auto it = open.find(p);
        if (it != open.end()) {
          close(p, it->second);
          open.erase(it);
        }
        open[p] = Life{static_cast<int64_t>(i), -1};
      }
    }
    for (const auto& [position, life] : open) close(position, life);
    schedule_.backward.clear();
    for (int64_t position : drops[0]) schedule_.backward.push_back({Kind::kDrop, position});
    for (size_t i = 0; i < backward.size(); ++i) {
      schedule_.backward.push_back(backward[i]);
      for (int64_t position : drops[i + 1]) {
        schedule_.backward.push_back({Kind::kDrop, position});
      }
    }
  }

  Schedule schedule_;
  int64_t length_;
  int64_t p_ = 0;
  bool live_ = false;
};

void CheckLength(int64_t length, const char* generator) {
  if (length < 1) throw Error(StrCat(generator, ": the chain length must be >= 1, not ", length));
}

Schedule EveryKNamed(int64_t length, int64_t k, std::string name) {
  Builder b(std::move(name), length);
  std::vector<int64_t> starts;
  for (int64_t s = 0; s < length; s += std::min(k, length - s)) starts.push_back(s);
  for (size_t i = 1; i < starts.size(); ++i) {
    b.ForwardAdvance(starts[i] - starts[i - 1]);
    b.ForwardSnapshot();
  }
  b.ForwardAdvance(length - starts.back());
  int64_t end = length;
  for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
    b.RestoreTo(*it);
    b.Reverse(end - *it);
    end = *it;
  }
  return b.Finish();
}

// ---------------------------------------------------------------------------
// Revolve's closed forms

using Wide = __int128;
constexpr Wide kSaturated = Wide(1) << 100;

// C(n, k), saturating at kSaturated.
Wide Binomial(int64_t n, int64_t k) {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  Wide r = 1;
  for (int64_t i = 1; i <= k; ++i) {
    r = r * (n - k + i) / i;  // exact: r * (n-k+i) is C(n-k+i, i) * i
    if (r >= kSaturated) return kSaturated;
  }
  return r;
}

// The fewest recomputed steps to reverse l steps from a kept start with c free
// slots when every advance counts (a head reversed in the backward pass):
// with h(c, t) = C(c+t, c+1) and t the smallest with h(c, t) >= l,
//   T(l, c) = t*l - C(c+t, c+2).
Wide FusedSteps(int64_t l, int64_t c) {
  if (l <= 0) return 0;
  if (c == 0) return Wide(l) * (l + 1) / 2;
  int64_t t = 1;
  while (Binomial(c + t, c + 1) < l) ++t;
  return Wide(t) * l - Binomial(c + t, c + 2);
}

// The same when the chain's forward pass is free (the first sweep is the
// forward pass): with g(c, u) = C(c+u+1, c+1) - 1 and u the smallest with
// g(c, u) >= l, F(l, c) = u*l + u - C(c+u+1, c+2).
Wide SweptSteps(int64_t l, int64_t c) {
  if (l <= 0) return 0;
  if (c == 0) return Wide(l) * (l + 1) / 2;
  int64_t u = 1;
  while (Binomial(c + u + 1, c + 1) - 1 < l) ++u;
  return Wide(u) * l + u - Binomial(c + u + 1, c + 2);
}

// The first minimiser of a convex function of y on [lo, hi].
template <typename F>
int64_t ConvexArgmin(int64_t lo, int64_t hi, const F& f) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (f(mid + 1) >= f(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// Reverses [a, b) from the kept carry at a with `slots` free slots, every
// advance counted: split at the binomial optimum, reverse the tail with one
// slot fewer, then the head.
void EmitRevolve(Builder& b, int64_t a, int64_t end, int64_t slots) {
  while (true) {
    const int64_t l = end - a;
    if (l == 1) {
      b.RestoreTo(a);
      b.Reverse(1);
      return;
    }
    if (slots == 0) {
      for (int64_t i = end - 1; i >= a; --i) {
        b.RestoreTo(a);
        b.Advance(i - a);
        b.Reverse(1);
      }
      return;
    }
    const int64_t y = ConvexArgmin(1, l - 1, [&](int64_t y) {
      return Wide(y) + FusedSteps(l - y, slots - 1) + FusedSteps(y, slots);
    });
    b.RestoreTo(a);
    b.Advance(y);
    if (l - y == 1) {
      b.Reverse(1);  // a one-step tail needs no snapshot
    } else {
      b.Snapshot();
      EmitRevolve(b, a + y, end, slots - 1);
    }
    end = a + y;
  }
}

// ---------------------------------------------------------------------------
// Budget

// What a Budget DP may run (inner-loop iterations) and hold (table entries),
// about a quarter of a second each way: the general DPs' scalar loops, and
// the uniform DP's vectorised one.
constexpr double kMaxWork = 4e8;
constexpr double kMaxEntries = 3e6;
constexpr double kMaxUniformWork = 3e9;
constexpr double kMaxUniformEntries = 8e6;
constexpr int64_t kMaxUniformLength = 20000;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool IsUniform(const ChainCosts& c) {
  const int64_t l = c.length();
  for (int64_t i = 1; i < l; ++i) {
    if (c.step_flops[i] != c.step_flops[0] || c.residual_bytes[i] != c.residual_bytes[0]) {
      return false;
    }
  }
  for (int64_t i = 2; i <= l; ++i) {
    if (c.carry_bytes[i] != c.carry_bytes[1]) return false;
  }
  return true;  // carry_bytes[0], the input's, is never counted
}

std::string BudgetName(int64_t budget) { return StrCat("budget:", budget); }

// The facts of a budget:B refusal: the smallest feasible B.
ErrorFacts BudgetTooSmall(int64_t smallest) {
  ErrorFacts facts;
  facts.kind = ErrorKind::kBudgetTooSmall;
  facts.smallest_feasible_bytes = smallest;
  return facts;
}

void CheckBudget(const ChainCosts& c, int64_t budget) {
  c.Validate();
  const int64_t need = MinimumFeasibleBytes(c);
  if (budget < need) {
    throw Error(StrCat("budget ", budget, " bytes is too small for this chain: the smallest feasible is ",
                       need, " bytes"),
                BudgetTooSmall(need));
  }
}

// Whether eager's schedule fits: the forward pass tapes every step, the
// backward pass differentiates them all from their tapes. It recomputes
// nothing, so when it fits it is optimal.
bool TapeAllFits(const ChainCosts& c, int64_t budget) {
  int64_t tapes = 0;
  for (int64_t i = 0; i < c.length(); ++i) {
    tapes += c.residual_bytes[i];
    if (tapes + (i + 1 < c.length() ? c.carry_bytes[i + 1] : c.EndBytes()) > budget) return false;
  }
  return true;
}

Schedule TapeAll(const ChainCosts& c, int64_t budget) {
  Builder b(BudgetName(budget), c.length());
  b.ForwardAdvanceTaped(c.length());
  b.ReverseTaped(c.length());
  return b.Finish();
}

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

struct MemoryUnits {
  int64_t unit;
  int levels;
  bool exact;       // unit divides every carry size
  double capacity;  // the most levels the limits allow
};

// Memory levels M_j = budget - j * unit for a DP that costs `work` inner
// iterations and `entries` table entries per level: unit = the gcd of the
// carries (exact) unless that makes more levels than max_work and kMaxEntries
// allow; then the smallest unit that fits. Levels past what every snapshot at
// once would cost are never reached and are left out.
MemoryUnits ChooseUnits(const ChainCosts& c, int64_t budget, double work, double entries, double max_work) {
  const int64_t l = c.length();
  int64_t gcd = 0;
  for (int64_t i = 1; i < l; ++i) gcd = std::gcd(gcd, c.carry_bytes[i]);
  for (int64_t i = 0; i < l; ++i) gcd = std::gcd(gcd, c.residual_bytes[i]);  // tapes
  if (gcd == 0) gcd = budget + 1;  // snapshots and tapes are free: one level
  auto levels_for = [&](int64_t unit) {
    int64_t all = 0;
    for (int64_t i = 1; i < l; ++i) all += CeilDiv(c.carry_bytes[i], unit);
    for (int64_t i = 0; i < l; ++i) all += CeilDiv(c.residual_bytes[i], unit);
    return std::min(budget / unit, all);
  };
  const double capacity = std::max(1.0, std::min(max_work / work, kMaxEntries / entries));
  int64_t unit = gcd;
  bool exact = true;
  if (static_cast<double>(levels_for(unit)) + 1 > capacity) {
    unit = std::max<int64_t>(gcd, static_cast<int64_t>(std::ceil(budget / std::max(1.0, capacity - 1))));
    exact = false;
  }
  return {unit, static_cast<int>(levels_for(unit)), exact, capacity};
}

double StackWork(double l) { return l * l * l * l / 8 + l * l * l; }
double StackEntries(double l) { return l * l * l / 3; }
double RotorWork(double l) { return l * l * l / 6 + l * l; }
double RotorEntries(double l) { return (l + 1) * (l + 1); }

// The schedule that keeps nothing but the input: the chain cut into the
// kReverse segments of MinimumFeasibleBytes, each reached from position 0.
Schedule MinimumMemory(const ChainCosts& c, int64_t budget) {
  const int64_t l = c.length();
  std::vector<int64_t> best(l + 1, std::numeric_limits<int64_t>::max());
  std::vector<int64_t> from(l + 1, 0);
  best[0] = 0;
  for (int64_t b = 1; b <= l; ++b) {
    int64_t residuals = 0;
    for (int64_t a = b - 1; a >= 0; --a) {
      residuals += c.residual_bytes[a];
      const int64_t need = residuals + c.carry_bytes[b];
      if (need >= best[b]) break;
      const int64_t v = std::max(best[a], need);
      if (v < best[b]) {
        best[b] = v;
        from[b] = a;
      }
    }
  }
  Builder b(BudgetName(budget), l);
  b.ForwardAdvance(l);
  for (int64_t end = l; end > 0; end = from[end]) {
    b.RestoreTo(0);
    b.Advance(from[end]);
    b.Reverse(end - from[end]);
  }
  return b.Finish();
}

// Budget's schedule for the uniform chain of c's largest carry and residual
// (and mean flops), which fits c too; keeping nothing but the input when even
// that does not fit or the chain is too long for the uniform DP.
Schedule Envelope(const ChainCosts& c, int64_t budget) {
  const int64_t l = c.length();
  int64_t carry = 0;
  int64_t residual = 0;
  double flops = 0;
  for (int64_t i = 0; i < l; ++i) {
    carry = std::max(carry, c.carry_bytes[i + 1]);
    residual = std::max(residual, c.residual_bytes[i]);
    flops += c.step_flops[i];
  }
  ChainCosts envelope = ChainCosts::Uniform(l, flops / l, carry, residual);
  envelope.after_bytes = c.after_bytes;
  if (budget < MinimumFeasibleBytes(envelope) || l > kMaxUniformLength) return MinimumMemory(c, budget);
  return schedule_internal::BudgetUniform(envelope, budget, kMaxUniformWork);
}

}  // namespace

// ---------------------------------------------------------------------------

std::string ToString(const Action& action) {
  if (action.kind == Kind::kSnapshot && action.n == 0) return "kSnapshot";
  return StrCat(KindName(action.kind), " ", action.n);
}

std::string ToString(const std::vector<Action>& actions) {
  std::vector<std::string> parts;
  parts.reserve(actions.size());
  for (const Action& a : actions) parts.push_back(ToString(a));
  return Join(parts, ", ");
}

ChainCosts ChainCosts::Uniform(int64_t length, double step_flops, int64_t carry_bytes,
                               int64_t residual_bytes) {
  if (length < 1) throw Error(StrCat("ChainCosts::Uniform: length must be >= 1, not ", length));
  ChainCosts c;
  c.step_flops.assign(length, step_flops);
  c.carry_bytes.assign(length + 1, carry_bytes);
  c.residual_bytes.assign(length, residual_bytes);
  c.Validate();
  return c;
}

void ChainCosts::Validate() const {
  const int64_t l = length();
  if (l < 1) throw Error("ChainCosts: the chain needs at least one step (step_flops is empty)");
  if (static_cast<int64_t>(carry_bytes.size()) != l + 1) {
    throw Error(StrCat("ChainCosts: carry_bytes has ", carry_bytes.size(), " entries, expected L+1 = ",
                       l + 1));
  }
  if (static_cast<int64_t>(residual_bytes.size()) != l) {
    throw Error(StrCat("ChainCosts: residual_bytes has ", residual_bytes.size(),
                       " entries, expected L = ", l));
  }
  for (int64_t i = 0; i < l; ++i) {
    if (!std::isfinite(step_flops[i]) || step_flops[i] < 0) {
      throw Error(StrCat("ChainCosts: step_flops[", i, "] = ", step_flops[i], " is not finite and >= 0"));
    }
    if (residual_bytes[i] < 0) {
      throw Error(StrCat("ChainCosts: residual_bytes[", i, "] = ", residual_bytes[i], " is negative"));
    }
  }
  if (after_bytes < 0) throw Error(StrCat("ChainCosts: after_bytes = ", after_bytes, " is negative"));
  for (int64_t i = 0; i <= l; ++i) {
    if (carry_bytes[i] < 0) {
      throw Error(StrCat("ChainCosts: carry_bytes[", i, "] = ", carry_bytes[i], " is negative"));
    }
  }
}

ScheduleCost Simulate(const Schedule& schedule, const ChainCosts& costs) {
  costs.Validate();
  return Machine(schedule, costs).Run();
}

Schedule EveryK(int64_t length, int64_t k) {
  CheckLength(length, "every");
  if (k < 1) throw Error(StrCat("every: k must be >= 1, not ", k));
  return EveryKNamed(length, k, StrCat("every:", k));
}

Schedule Segments(int64_t length, int64_t segments) {
  CheckLength(length, "segments");
  if (segments < 1) {
    throw Error(StrCat("segments: the number of segments must be >= 1, not ", segments));
  }
  // One spec reverses every scan and chain of a program, of whatever lengths:
  // more segments than steps means a segment per step (where PyTorch's
  // checkpoint_sequential would fail on a zero segment size).
  return EveryKNamed(length, CeilDiv(length, std::min(segments, length)),
                     StrCat("segments:", segments));
}

Schedule Sqrt(int64_t length) {
  CheckLength(length, "sqrt");
  const int64_t k = std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(length))));
  return EveryKNamed(length, k, "sqrt");
}

Schedule Bisect(int64_t length) {
  CheckLength(length, "bisect");
  Builder b("bisect", length);
  // The first sweep: the forward pass keeps the right half's start, then its
  // right half's, ... down to a one-step segment.
  std::vector<std::pair<int64_t, int64_t>> heads;
  int64_t a = 0;
  while (length - a > 1) {
    const int64_t m = a + (length - a) / 2;
    b.ForwardAdvance(m - a);
    b.ForwardSnapshot();
    heads.emplace_back(a, m);
    a = m;
  }
  b.ForwardAdvance(length - a);
  b.RestoreTo(a);
  b.Reverse(length - a);
  // Each head [a, m) by the same rule, every advance now recomputation.
  struct Recurse {
    Builder& b;
    void operator()(int64_t a, int64_t end) const {
      while (end - a > 1) {
        const int64_t m = a + (end - a) / 2;
        b.RestoreTo(a);
        b.Advance(m - a);
        if (end - m == 1) {
          b.Reverse(1);
        } else {
          b.Snapshot();
          (*this)(m, end);
        }
        end = m;
      }
      b.RestoreTo(a);
      b.Reverse(1);
    }
  };
  for (auto it = heads.rbegin(); it != heads.rend(); ++it) Recurse{b}(it->first, it->second);
  return b.Finish();
}

Schedule Revolve(int64_t length, int slots) {
  CheckLength(length, "revolve");
  if (slots < 0) throw Error(StrCat("revolve: the number of slots must be >= 0, not ", slots));
  Builder b(StrCat("revolve:", slots), length);
  // More than L-1 slots change nothing: every position is kept at L-1.
  int64_t free_slots = std::min<int64_t>(slots, length - 1);
  // The first sweep is the forward pass: each split point is kept for free,
  // and the tail beyond it gets one slot fewer.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> heads;
  int64_t a = 0;
  while (length - a > 1 && free_slots > 0) {
    const int64_t l = length - a;
    const int64_t c = free_slots;
    const int64_t y = ConvexArgmin(1, l - 1, [&](int64_t y) {
      return SweptSteps(l - y, c - 1) + FusedSteps(y, c);
    });
    b.ForwardAdvance(y);
    b.ForwardSnapshot();
    heads.emplace_back(a, a + y, c);
    a += y;
    --free_slots;
  }
  b.ForwardAdvance(length - a);
  EmitRevolve(b, a, length, free_slots);
  for (auto it = heads.rbegin(); it != heads.rend(); ++it) {
    EmitRevolve(b, std::get<0>(*it), std::get<1>(*it), std::get<2>(*it));
  }
  return b.Finish();
}

int64_t RevolveRecomputedSteps(int64_t length, int slots) {
  CheckLength(length, "RevolveRecomputedSteps");
  if (slots < 0) throw Error(StrCat("RevolveRecomputedSteps: slots must be >= 0, not ", slots));
  const Wide steps = SweptSteps(length, std::min<int64_t>(slots, length - 1));
  if (steps > std::numeric_limits<int64_t>::max()) {
    throw Error(StrCat("RevolveRecomputedSteps(", length, ", ", slots, ") overflows int64"));
  }
  return static_cast<int64_t>(steps);
}

int64_t MinimumFeasibleBytes(const ChainCosts& c) {
  c.Validate();
  const int64_t l = c.length();
  int64_t walk = c.EndBytes();
  for (int64_t i = 1; i < l; ++i) walk = std::max(walk, c.carry_bytes[i]);
  // best[b]: the smallest peak of reversing steps 0..b-1 in kReverse segments.
  std::vector<int64_t> best(l + 1, std::numeric_limits<int64_t>::max());
  best[0] = 0;
  for (int64_t b = 1; b <= l; ++b) {
    int64_t residuals = 0;
    for (int64_t a = b - 1; a >= 0; --a) {
      residuals += c.residual_bytes[a];
      const int64_t need = residuals + c.carry_bytes[b];
      if (need >= best[b]) break;  // longer segments only need more
      best[b] = std::min(best[b], std::max(best[a], need));
    }
  }
  return std::max(walk, best[l]);
}

namespace schedule_internal {

// Runs one of the DPs (StackDp, RotorDp) at the memory units its work and
// table size allow.
template <typename Dp>
Schedule SolveBudget(const ChainCosts& c, int64_t budget, double max_work, double work,
                     double entries) {
  CheckBudget(c, budget);
  if (TapeAllFits(c, budget)) return TapeAll(c, budget);
  const MemoryUnits units = ChooseUnits(c, budget, work, entries, max_work);
  Dp dp(c, budget, units.unit, units.levels);
  if (!(dp.cost() < Dp::kInf)) {
    throw Error(StrCat("budget: internal error: no schedule found within ", budget, " bytes"));
  }
  return dp.Emit();
}

Schedule BudgetExact(const ChainCosts& c, int64_t budget, double max_work) {
  const double l = static_cast<double>(c.length());
  return SolveBudget<StackDp>(c, budget, max_work, StackWork(l), StackEntries(l));
}

Schedule BudgetRotor(const ChainCosts& c, int64_t budget, double max_work) {
  const double l = static_cast<double>(c.length());
  return SolveBudget<RotorDp>(c, budget, max_work, RotorWork(l), RotorEntries(l));
}

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

Schedule Budget(const ChainCosts& c, int64_t budget) {
  CheckBudget(c, budget);
  if (TapeAllFits(c, budget)) return TapeAll(c, budget);
  if (IsUniform(c)) return schedule_internal::BudgetUniform(c, budget, kMaxUniformWork);
  // The exact DP when memory needs no rounding. Otherwise the better of what
  // each solver finds within its limits: the exact DP and Rotor's form with
  // rounded units (Rotor's limits leave finer ones), and the uniform chain of
  // the largest carry and residual (every size only grows, so its schedule
  // fits this chain).
  const double l = static_cast<double>(c.length());
  const MemoryUnits stack = ChooseUnits(c, budget, StackWork(l), StackEntries(l), kMaxWork);
  if (stack.exact) return schedule_internal::BudgetExact(c, budget, kMaxWork);
  const MemoryUnits rotor = ChooseUnits(c, budget, RotorWork(l), RotorEntries(l), kMaxWork);
  constexpr double kFewestLevels = 8;  // below this, rounding costs more than the search gains
  std::vector<Schedule> candidates;
  if (stack.capacity >= kFewestLevels) candidates.push_back(schedule_internal::BudgetExact(c, budget, kMaxWork));
  if (rotor.exact || rotor.capacity >= kFewestLevels) {
    candidates.push_back(schedule_internal::BudgetRotor(c, budget, kMaxWork));
  }
  candidates.push_back(Envelope(c, budget));
  size_t best = 0;
  double best_flops = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double flops = Simulate(candidates[i], c).recomputed_flops;
    if (flops < best_flops) {
      best = i;
      best_flops = flops;
    }
  }
  return std::move(candidates[best]);
}


Schedule ParseSchedule(const std::string& spec, const ChainCosts& costs, int64_t held_bytes) {
  costs.Validate();
  const int64_t l = costs.length();
  ScheduleSpec s;
  try {
    s = ParseScheduleSpec(spec);
  } catch (const Error& e) {
    throw Error(StrCat("schedule \"", spec, "\": ", e.what()), e);
  }
  if (s.form == "every") return EveryK(l, s.n);
  if (s.form == "segments") return Segments(l, s.n);
  if (s.form == "sqrt") return Sqrt(l);
  if (s.form == "bisect") return Bisect(l);
  if (s.form == "revolve") return Revolve(l, static_cast<int>(s.n));
  // budget:B
  const int64_t budget = s.n;
  if (held_bytes <= 0) return Budget(costs, budget);
  // The chain gets what the run does not hold elsewhere.
  const int64_t need = MinimumFeasibleBytes(costs);
  if (budget - held_bytes < need) {
    throw Error(StrCat("budget ", budget, " bytes is too small for this chain: the smallest feasible is ",
                       need + held_bytes, " bytes (", need, " for the chain, ", held_bytes,
                       " held outside it while it runs)"),
                BudgetTooSmall(need + held_bytes));
  }
  Schedule schedule = Budget(costs, budget - held_bytes);
  schedule.name = BudgetName(budget);
  return schedule;
}

}  // namespace remat
