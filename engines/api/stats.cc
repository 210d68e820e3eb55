#include "engines/api/stats.h"

#include "engines/api/error.h"

namespace remat {

std::string FormatResiduals(const Stats& stats) {
  std::string out;
  int64_t argument_bytes = 0;
  for (const Residual& r : stats.residuals) {
    out += StrCat(r.type, " ", r.source, r.count > 1 ? StrCat(" (", r.count, " scan steps)") : "",
                  "\n");
    if (r.is_argument) argument_bytes += r.bytes;
  }
  out += StrCat("residuals: ", stats.residual_bytes, " bytes saved, plus ", argument_bytes,
                " bytes of arguments\n");
  return out;
}

}  // namespace remat
