// How oneDNN's OpenMP threads wait at barriers, chosen for a shared machine.
// libgomp's threads spin at every barrier for a long while by default; on a
// 2-core machine with one neighbour, a thread whose partner is descheduled
// then spins through whole time slices, and one run of transformer_stack
// took 8x its quiet time. A short spin, then sleep, costs a quiet run
// nothing measurable and bounds what a neighbour costs.
//
//   int main(int argc, char** argv) {
//     UseShortOpenMpSpin(argv);  // first thing: may re-run this binary
//
// libgomp reads its variables when it is loaded, before main, so the
// choice is made by re-running the binary with the variable set.
#ifndef REMAT_ENGINES_ONEDNN_OMP_WAIT_H_
#define REMAT_ENGINES_ONEDNN_OMP_WAIT_H_

#include <string>

namespace remat {

// The spin count set when the user set neither variable (libgomp's
// default is 300000 iterations, a few ms).
inline constexpr char kShortOpenMpSpin[] = "20000";

// When neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY is set: sets
// GOMP_SPINCOUNT=kShortOpenMpSpin and re-runs this binary with the same
// arguments (execv of /proc/self/exe); returns only if it did not (either is
// set: the user's choice stands; or the re-run failed: the run goes on as
// is). `argv` is main's, null-terminated.
void UseShortOpenMpSpin(char** argv);

// The wait settings in effect, for the platform line: "GOMP_SPINCOUNT=20000",
// "OMP_WAIT_POLICY=passive", both joined by ", " when both are set, or
// "libgomp's default spin" when neither is.
std::string OpenMpWait();

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_OMP_WAIT_H_
