// The Builder's bookkeeping (schedule_internal.h): where each kDrop goes.
#include <cstdint>
#include <map>
#include <vector>

#include "engines/api/error.h"
#include "engines/schedule/schedule.h"
#include "engines/schedule/schedule_internal.h"

namespace remat {
namespace schedule_internal {

void Builder::PlaceDrops() {
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

void CheckLength(int64_t length, const char* generator) {
  if (length < 1) throw Error(StrCat(generator, ": the chain length must be >= 1, not ", length));
}

}  // namespace schedule_internal
}  // namespace remat
