#include "engines/api/schedule_spec.h"

#include <limits>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/units.h"

namespace remat {

std::vector<std::string> ScheduleForms() {
  return {"every:K", "segments:K", "sqrt", "bisect", "revolve:C", "budget:BYTES"};
}

ScheduleSpec ParseScheduleSpec(const std::string& spec) {
  const size_t colon = spec.find(':');
  ScheduleSpec out;
  out.form = spec.substr(0, colon);
  const bool has_arg = colon != std::string::npos;
  const std::string arg = has_arg ? spec.substr(colon + 1) : std::string();
  auto integer = [&]() {
    int64_t v = 0;
    if (!ParseInt(arg, v)) throw Error(StrCat("\"", arg, "\" is not an integer"));
    return v;
  };
  const std::string& form = out.form;
  if ((form == "every" || form == "segments") && has_arg) {
    out.n = integer();
    if (out.n < 1) {
      throw Error(StrCat(form, " takes a number of ", form == "every" ? "steps" : "segments",
                         " K >= 1, not ", out.n));
    }
    return out;
  }
  if ((form == "sqrt" || form == "bisect") && !has_arg) return out;
  if (form == "revolve" && has_arg) {
    out.n = integer();
    if (out.n < 0 || out.n > std::numeric_limits<int>::max()) {
      throw Error("the number of slots must be in 0..2^31-1");
    }
    return out;
  }
  if (form == "budget" && has_arg) {
    out.n = ParseBytes(arg);
    return out;
  }
  for (const std::string& f : ScheduleForms()) {
    const size_t c = f.find(':');
    if (f.substr(0, c) != form) continue;
    throw Error(StrCat(form, c == std::string::npos ? " takes no argument" : " takes an argument",
                       "; the forms are ", Join(ScheduleForms(), ", ")));
  }
  throw Error(StrCat("unknown schedule; the forms are ", Join(ScheduleForms(), ", ")));
}

}  // namespace remat
