// The syntax of a schedule spec ("every:4", "sqrt", "revolve:8",
// "budget:256MiB"), without a chain: what a program file's loader checks at
// load time and engines/schedule's ParseSchedule reads. It lives here, below
// engines/schedule, so that the program text reader checks specs without
// depending on the schedules themselves.
#ifndef REMAT_ENGINES_API_SCHEDULE_SPEC_H_
#define REMAT_ENGINES_API_SCHEDULE_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace remat {

// A spec's form and argument, checked as far as they can be before the
// chain's costs are known (a known form, an argument where one is due and
// none where not, an integer K >= 1 for every: and segments:, C in
// 0..2^31-1 for revolve:, BYTES in ParseBytes's forms). Throws remat::Error
// saying why, without the spec (ParseSchedule prefixes 'schedule "SPEC": ').
struct ScheduleSpec {
  std::string form;  // "every", "segments", "sqrt", "bisect", "revolve", "budget"
  int64_t n = 0;     // every, segments: K; revolve: C; budget: bytes
};
ScheduleSpec ParseScheduleSpec(const std::string& spec);
// The forms ParseSchedule accepts: every:K, segments:K, sqrt, bisect,
// revolve:C, budget:BYTES.
std::vector<std::string> ScheduleForms();

}  // namespace remat

#endif  // REMAT_ENGINES_API_SCHEDULE_SPEC_H_
