// Griewank & Walther's binomial checkpointing: revolve:C, and its closed
// forms.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {
namespace {

using schedule_internal::Builder;
using schedule_internal::CheckLength;

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

}  // namespace

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

}  // namespace remat
