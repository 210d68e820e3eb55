// Finds remat-bench's data files (Bazel `data` dependencies such as
// problems/files) at run time, whichever workspace built the binary: this
// repository's own, or another one that has remat-bench as an external
// repository (examples/outside_workspace). The conformance suite reads its
// program files through it.
#ifndef REMAT_HARNESS_RUNFILES_H_
#define REMAT_HARNESS_RUNFILES_H_

#include <string>

namespace remat {

// The repository name remat-bench's runfiles lie under: its own workspace
// name, which another workspace must also give it
// (local_repository(name = "remat_bench", ...)).
inline constexpr char kRematBenchRepository[] = "remat_bench";

// `path` is relative to remat-bench's repository root
// ("problems/files/vit_tokens.remat"). Returns the first of these that
// exists:
//   1. $TEST_SRCDIR/remat_bench/<path>, then $RUNFILES_DIR/remat_bench/<path>:
//      the runfiles tree, where remat-bench lies under its repository name
//      whether it is the main workspace (a test's working directory is then
//      that same folder) or an external repository (the working directory is
//      then <runfiles>/<the main workspace's name>, beside it);
//   2. <path> relative to the working directory (a binary run by hand from a
//      checkout of remat-bench, or by `bazel run` in its own workspace);
//   3. ../remat_bench/<path> (`bazel run` from another workspace, where the
//      working directory is <runfiles>/<main workspace>).
// If none exists, returns `path` unchanged, so that the reader's error names
// the file as the caller wrote it. Symlinked runfiles trees only (Bazel's
// default on Linux); a manifest-only tree is not read.
std::string RematBenchFile(const std::string& path);

}  // namespace remat

#endif  // REMAT_HARNESS_RUNFILES_H_
