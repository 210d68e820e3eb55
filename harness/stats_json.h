// Stats and results as JSON (nlohmann::json), for --json, --dump and results/.
#ifndef REMAT_HARNESS_STATS_JSON_H_
#define REMAT_HARNESS_STATS_JSON_H_

#include <nlohmann/json.hpp>

#include "engines/api/stats.h"
#include "engines/onednn/platform.h"

namespace remat {

nlohmann::json StatsToJson(const Stats& stats);

// The platform a number was measured on (engines/onednn/platform.h), as
// results rows, stats.json and `remat compare` read it:
//   {"cpu": "AMD EPYC 7B13", "cpus": 2, "onednn": "oneDNN 2.6.3 (...)",
//    "onednn_isa": "avx512_core", "isa_cap": "" (none) or "AVX2",
//    "matmul_impl": "brg:avx512_core", "omp_threads": 2}
nlohmann::json PlatformToJson(const PlatformInfo& platform);
// The inverse; fields a file lacks (runs recorded before they existed) stay
// empty or 0, and compare as "(none)".
PlatformInfo PlatformFromJson(const nlohmann::json& json);

// "12.3 MiB"
std::string FormatBytes(int64_t bytes);

}  // namespace remat

#endif  // REMAT_HARNESS_STATS_JSON_H_
