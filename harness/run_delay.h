// How long this process's threads waited for a CPU: interference by other
// processes, measured directly (wall times show it only indirectly).
//
//   const int64_t before = ProcessRunDelayNs();
//   ... timed work ...
//   const double share = RunDelayShare(before, ProcessRunDelayNs(), seconds);
//   if (share > kQuietRunDelay) ... the time is not the work's alone ...
#ifndef REMAT_HARNESS_RUN_DELAY_H_
#define REMAT_HARNESS_RUN_DELAY_H_

#include <cstdint>
#include <optional>

namespace remat {

// The time this process's threads have spent runnable but waiting for a CPU
// (the second field of /proc/self/task/*/schedstat, summed), in ns; -1 where
// the kernel does not say. On a machine whose other processes leave our
// threads alone it barely moves; when a neighbour takes a CPU our OpenMP
// threads want, it grows by the time they wait. Only live threads count: a
// thread that has exited takes its wait with it (OpenMP's pool lives as long
// as the process).
int64_t ProcessRunDelayNs();

// Work is quiet when the run delay grew by at most this share of its wall
// time while it ran: no neighbour took a CPU from it. (Waking an OpenMP
// thread costs a little delay too; on an idle machine samples stayed below
// 1%.)
inline constexpr double kQuietRunDelay = 0.02;

// The delay between two readings as a share of `seconds` of wall time;
// empty if either reading is -1 or no time passed.
std::optional<double> RunDelayShare(int64_t before_ns, int64_t after_ns, double seconds);

}  // namespace remat

#endif  // REMAT_HARNESS_RUN_DELAY_H_
