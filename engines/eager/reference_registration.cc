// The float64 reference engine: the eager reverse mode on plain float64 loops.
// No longer the oracle: it runs the same rules (engines/api/rules.cc) and the
// same traversal (engines/autodiff) as the engines, so a wrong rule would be
// wrong here too. The oracle is engines/oracle, a reverse mode of its own;
// this engine is held to it like any other (reference_conformance_test), and
// agrees with it to float64 rounding (harness/gradcheck_test.cc).
#include <memory>

#include "engines/api/registry.h"
#include "engines/eager/eager_engine.h"
#include "engines/reference/reference_kernels.h"

namespace remat {

REMAT_REGISTER_ENGINE(reference, "reference",
                      "eager's reverse mode on float64 loops, stores everything (not the oracle)",
                      [] {
                        return std::make_unique<EagerEngine>(
                            "reference", std::make_unique<ReferenceKernels>());
                      });

}  // namespace remat
