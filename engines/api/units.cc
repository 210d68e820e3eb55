#include "engines/api/units.h"

#include <charconv>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"

namespace remat {
namespace {

// Wide enough that no digit string within kSaturated overflows a multiply
// by a unit or by ten.
using Wide = __int128;
constexpr Wide kSaturated = Wide(1) << 100;

}  // namespace

bool ParseInt(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}


int64_t ParseBytes(const std::string& text) {
  auto fail = [&]() -> int64_t {
    throw Error(StrCat("bytes: cannot read \"", text,
                       "\": expected a number with an optional unit, like 123, 256KiB, 64MiB, 1.5GiB or 1GB"));
  };
  size_t i = 0;
  Wide digits = 0;
  Wide scale = 1;
  bool any = false;
  bool fraction = false;
  for (; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch >= '0' && ch <= '9') {
      digits = digits * 10 + (ch - '0');
      if (fraction) scale *= 10;
      any = true;
      if (digits > kSaturated || scale > kSaturated) fail();
    } else if (ch == '.' && !fraction) {
      fraction = true;
    } else {
      break;
    }
  }
  if (!any) fail();
  const std::string unit = text.substr(i);
  static const std::vector<std::pair<std::string, int64_t>> kUnits = {
      {"", 1},
      {"B", 1},
      {"KB", 1000},
      {"MB", 1000 * 1000},
      {"GB", 1000 * 1000 * 1000},
      {"TB", int64_t{1000} * 1000 * 1000 * 1000},
      {"KiB", int64_t{1} << 10},
      {"MiB", int64_t{1} << 20},
      {"GiB", int64_t{1} << 30},
      {"TiB", int64_t{1} << 40},
  };
  for (const auto& [name, factor] : kUnits) {
    if (unit != name) continue;
    const Wide bytes = digits * factor / scale;
    if (bytes > std::numeric_limits<int64_t>::max()) {
      throw Error(StrCat("bytes: \"", text, "\" is more than int64 holds"));
    }
    return static_cast<int64_t>(bytes);
  }
  return fail();
}

}  // namespace remat
