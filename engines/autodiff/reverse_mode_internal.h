// What the parts of ReverseMode (reverse_mode.h) share across its files:
//   reverse_mode.cc            the run: PlanRun, Run, Execute, the schedule
//                              log and the residual listing
//   reverse_mode_forward.cc    the forward pass, checkpoint regions' forward
//   reverse_mode_backward.cc   the backward pass, checkpoint regions' backward
//   reverse_mode_scan.cc       scans, scheduled or not
//   reverse_mode_chain.cc      chains of blocks (OpKind::kChain)
//   reverse_mode_scheduled.cc  the action interpreter scheduled scans and
//                              chains share, and their cost model's inputs
// Internal to engines/autodiff: reverse_mode.h is the API.
#ifndef REMAT_ENGINES_AUTODIFF_REVERSE_MODE_INTERNAL_H_
#define REMAT_ENGINES_AUTODIFF_REVERSE_MODE_INTERNAL_H_

#include <cstdint>

#include "engines/api/program.h"

namespace remat {
namespace reverse_mode_internal {

// What a kReverse keeps of one step (engines/schedule's residual_bytes): the
// values the step's backward pass reads that it computed, and the carry
// entering it when the backward reads that too (a matmul's input: inside a
// kReverse the carry of every step but the first is held as that step's
// residual; the model charges the first one as well, one carry too many at
// most, so a schedule stays within its budget). Its other inputs are
// arguments (a slice of xs is a view): no new bytes. `carry` is the carry's
// parameter index, -1 for none.
int64_t StepResidualBytes(const Program& body, int carry, int64_t item);

}  // namespace reverse_mode_internal
}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_REVERSE_MODE_INTERNAL_H_
