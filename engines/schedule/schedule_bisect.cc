// Recursive bisection: bisect.
#include <cstdint>
#include <utility>
#include <vector>

#include "engines/schedule/schedule.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {

using schedule_internal::Builder;
using schedule_internal::CheckLength;

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

}  // namespace remat
