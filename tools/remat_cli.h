// The `remat` command line (Boost.Program_options):
//
//   remat list
//   remat run --problem P [--engine E] [--param d=16 ...] [--wrt NAME,...|all]
//             [--seed S] [--inputs DIR] [--dump DIR] [--json] [--max-memory BYTES]
//             [--memory-cap BYTES|FRACx]
//   remat residuals --problem P [--engine E] [--param ...]
//   remat schedule --problem P [--engine E] [--param ...]
//   remat program --problem P [--param ...] [--format text|listing]
//   remat compare A.json B.json
//
// `run`, `residuals`, `schedule` and `program` take `--program FILE` in place
// of `--problem P`: a program file (engines/api/program_text.h; what
// `remat program` prints), its gradients by default with respect to every
// input, its inputs drawn from --seed or read from --inputs DIR (every input
// needs DIR/<input>.npy; a .npy there that names no input, other than what
// --dump writes, is an error). `program` prints the parseable text by
// default; --format=listing the jaxpr-like listing.
//
// `run` defaults to the eager engine; `residuals` and `schedule` list what an
// engine saves and default to recompute (which honours checkpoints). `run`
// times the second of two runs (the first pays oneDNN's setup, reported
// apart) and prints the platform; --json and --dump's stats.json carry it
// ("platform", "matmul_impls"). `--memory-cap` (run, residuals, schedule)
// is for engines that honour a cap (Engine::honours_memory_cap(): dtr):
// BYTES, or FRACx, that fraction of eager's peak on the same case (planned on
// a dry run); other engines refuse it. `compare` warns first when the two
// files ran on different platforms or one does not record its platform.
//
// RunRemat is the whole program, writing to `out` and `err`, so tests can
// run it in-process. Returns the exit status: 0 success, 1 a bad input or a
// failed run (the message names it), 2 a usage error.
#ifndef REMAT_TOOLS_REMAT_CLI_H_
#define REMAT_TOOLS_REMAT_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace remat {

int RunRemat(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Byte counts ("256MiB", "1.5GiB") are read by ParseBytes of
// engines/schedule/schedule.h, which budget:BYTES schedules share.

}  // namespace remat

#endif  // REMAT_TOOLS_REMAT_CLI_H_
