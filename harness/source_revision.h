// The source a run was built from, for its results file: the commit of the
// checkout and whether its tracked files differ from it. A reader of a
// recorded run (results/, REPORT.md) reproduces it at that commit; a run
// from a modified tree says so instead of claiming a commit it was not.
#ifndef REMAT_HARNESS_SOURCE_REVISION_H_
#define REMAT_HARNESS_SOURCE_REVISION_H_

#include <string>

namespace remat {

struct SourceRevision {
  // The 40-hex-digit commit of HEAD; empty when not known (then `error`
  // says why: no git, not a checkout).
  std::string commit;
  // Tracked files differ from `commit` (untracked files are not counted:
  // results/ itself gains files as runs are recorded).
  bool modified = false;
  std::string error;
};

// The revision of the git checkout at `dir` (the workspace: bazel run's
// BUILD_WORKSPACE_DIRECTORY, or the current directory). Runs `git`; never
// throws.
SourceRevision ReadSourceRevision(const std::string& dir);

// "a28375b0d165... (tree as committed)", "... (tracked files modified)", or
// "not recorded: <error>".
std::string DescribeSourceRevision(const SourceRevision& revision);

}  // namespace remat

#endif  // REMAT_HARNESS_SOURCE_REVISION_H_
