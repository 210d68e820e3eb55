#include "harness/source_revision.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace remat {
namespace {

// `dir` single-quoted for the shell (a quote inside closes, escapes and
// reopens).
std::string Quoted(const std::string& dir) {
  std::string out = "'";
  for (char c : dir) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command's standard output, and whether it exited 0. Its stderr is
// dropped: a missing git or a directory outside a checkout is an answer
// (the caller's error), not a message on the bench's output.
bool Capture(const std::string& command, std::string* out) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return false;
  std::array<char, 256> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out->append(buffer.data(), n);
  const int status = pclose(pipe);
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

SourceRevision ReadSourceRevision(const std::string& dir) {
  SourceRevision revision;
  const std::string git = "git -C " + Quoted(dir.empty() ? "." : dir);
  std::string head;
  if (!Capture(git + " rev-parse --verify HEAD", &head)) {
    revision.error = "`git rev-parse HEAD` failed in " + (dir.empty() ? "." : dir) +
                     " (no git, or not a checkout)";
    return revision;
  }
  while (!head.empty() && (head.back() == '\n' || head.back() == '\r')) head.pop_back();
  if (head.size() != 40 || head.find_first_not_of("0123456789abcdef") != std::string::npos) {
    revision.error = "`git rev-parse HEAD` in " + dir + " printed '" + head + "'";
    return revision;
  }
  std::string status;
  if (!Capture(git + " status --porcelain --untracked-files=no", &status)) {
    revision.error = "`git status` failed in " + dir;
    return revision;
  }
  revision.commit = head;
  revision.modified = !status.empty();
  return revision;
}

std::string DescribeSourceRevision(const SourceRevision& revision) {
  if (revision.commit.empty()) return "not recorded: " + revision.error;
  return revision.commit +
         (revision.modified ? " (tracked files modified)" : " (tree as committed)");
}

}  // namespace remat
