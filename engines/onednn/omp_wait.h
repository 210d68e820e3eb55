// The process settings a measuring binary runs under, chosen for a shared
// machine: how oneDNN's OpenMP threads wait at barriers, and where malloc
// puts the heap.
//
// The wait.
// libgomp's threads spin at every barrier for a long while by default; on a
// 2-core machine with one neighbour, a thread whose partner is descheduled
// then spins through whole time slices, and one run of transformer_stack
// took 8x its quiet time. A short spin, then sleep, costs a quiet run
// nothing measurable and bounds what a neighbour costs.
//
// The heap. Tensors come from malloc's heap (engines/api/tensor.cc), in
// 4 KiB pages wherever the kernel found them. After other cases ran in the
// same process, a case's rows ran at other ratios than alone: mlp_chain's
// schedule:bisect at 1.47-1.53x eager after transformer_stack, 1.62-1.63x
// alone, while its A/A control stayed within 1%; windows of the default run
// disagreed by up to 15% that way. With the heap in transparent huge pages
// (glibc's glibc.malloc.hugetlb=1 tunable; the machine's THP mode is
// madvise), the same sequence gave 1.63-1.64x.
//
//   int main(int argc, char** argv) {
//     UseMeasurementSettings(argv);  // first thing: may re-run this binary
//
// libgomp and glibc read their variables when they are loaded, before main,
// so the choice is made by re-running the binary with the variables set.
#ifndef REMAT_ENGINES_ONEDNN_OMP_WAIT_H_
#define REMAT_ENGINES_ONEDNN_OMP_WAIT_H_

#include <string>

namespace remat {

// The spin count set when the user set neither variable (libgomp's
// default is 300000 iterations, a few ms).
inline constexpr char kShortOpenMpSpin[] = "20000";

// The malloc tunable set when the user set none (glibc 2.35 and later
// read it; earlier ones ignore it).
inline constexpr char kHugePageMalloc[] = "glibc.malloc.hugetlb=1";

// Sets GOMP_SPINCOUNT=kShortOpenMpSpin when neither GOMP_SPINCOUNT nor
// OMP_WAIT_POLICY is set, and GLIBC_TUNABLES=kHugePageMalloc when
// GLIBC_TUNABLES is not set, and if it set either, re-runs this binary with
// the same arguments (execv of /proc/self/exe); returns only if it did not
// (the user's settings stand; or the re-run failed: the run goes on as is).
// `argv` is main's, null-terminated.
void UseMeasurementSettings(char** argv);

// The malloc setting in effect, for the platform line:
// "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", or "glibc's default".
std::string MallocSetting();

// The wait settings in effect, for the platform line: "GOMP_SPINCOUNT=20000",
// "OMP_WAIT_POLICY=passive", both joined by ", " when both are set, or
// "libgomp's default spin" when neither is.
std::string OpenMpWait();

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_OMP_WAIT_H_
