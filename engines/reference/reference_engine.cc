// The float64 reference engine: the eager reverse mode on plain float64 loops.
// Slow and obviously right; every f32 engine is checked against it, and it is
// checked against central finite differences (harness/gradcheck_test.cc).
#include <memory>

#include "engines/api/registry.h"
#include "engines/eager/eager_engine.h"
#include "engines/reference/reference_kernels.h"

namespace remat {

REMAT_REGISTER_ENGINE(reference, "reference",
                      "float64 plain loops, stores everything: the correctness oracle", [] {
                        return std::make_unique<EagerEngine>(
                            "reference", std::make_unique<ReferenceKernels>());
                      });

}  // namespace remat
