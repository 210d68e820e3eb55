// Stats and results as JSON (nlohmann::json), for --json, --dump and results/.
#ifndef REMAT_HARNESS_STATS_JSON_H_
#define REMAT_HARNESS_STATS_JSON_H_

#include <nlohmann/json.hpp>

#include "engines/api/stats.h"

namespace remat {

nlohmann::json StatsToJson(const Stats& stats);

// "12.3 MiB"
std::string FormatBytes(int64_t bytes);

}  // namespace remat

#endif  // REMAT_HARNESS_STATS_JSON_H_
