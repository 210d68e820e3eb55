// "my_engine": an engine written outside remat-bench, the least code there
// is (docs/engines.md, "Static decisions"): a Planner of its own over
// remat-bench's public reverse-mode executor, on eager's oneDNN kernels. This
// one stores everything: every checkpoint region runs inline, every scan step
// by step. Replace the planner's answers to honour regions and schedules
// (then the suite also holds it to the budgets, CONTRACT.md section 4), or
// the whole engine with a traversal of your own on //engines/exec's building
// blocks (remat-bench's engines/example/example_engine.cc).
#include <memory>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/autodiff/planner.h"
#include "engines/autodiff/reverse_mode_engine.h"
#include "engines/onednn/onednn_kernels.h"

namespace my_engine {
namespace {

class StoreEverythingPlanner : public remat::Planner {
 public:
  // False: the suite then expects eager's residuals exactly, and no
  // recomputation under any policy.
  bool honours_checkpoints() const override { return false; }

  // Inline: the region's ops run as if they stood in the enclosing program.
  remat::RegionPlan PlanRegion(const remat::Op&) const override { return {}; }

  // Asked only of a region PlanRegion honours, and none is.
  std::vector<remat::SaveDecision> PlanSaves(const remat::Op&,
                                             const std::vector<bool>&) const override {
    throw remat::Error("my_engine: PlanSaves called, but every region runs inline");
  }

  // No schedule: a scan step by step with every step's residuals kept, a
  // chain inline.
  remat::LoopPlan PlanLoop(const remat::Op&, const remat::LoopModel&) const override { return {}; }
};

REMAT_REGISTER_ENGINE(my_engine, "my_engine",
                      "stores everything: a Planner of its own over the reverse-mode executor "
                      "(examples/outside_workspace)",
                      [] {
                        return std::make_unique<remat::ReverseModeEngine>(
                            "my_engine", std::make_unique<remat::OneDnnKernels>(),
                            std::make_unique<StoreEverythingPlanner>());
                      });

}  // namespace
}  // namespace my_engine
