// Registers the float64 oracle (engines/oracle/oracle.h) as "oracle".
#include <memory>

#include "engines/api/registry.h"
#include "engines/oracle/oracle.h"

namespace remat {

REMAT_REGISTER_ENGINE(oracle, "oracle",
                      "float64, a plain reverse mode of its own (no shared rules or kernels): the "
                      "correctness oracle",
                      [] { return std::make_unique<OracleEngine>(); });

}  // namespace remat
