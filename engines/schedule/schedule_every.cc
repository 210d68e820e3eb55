// PyTorch's checkpoint every k steps and the generators made of it:
// every:K, segments:K (checkpoint_sequential) and sqrt.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {
namespace {

using schedule_internal::Builder;
using schedule_internal::CeilDiv;
using schedule_internal::CheckLength;

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

}  // namespace

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

}  // namespace remat
