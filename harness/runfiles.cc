#include "harness/runfiles.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace remat {

std::string RematBenchFile(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string in_repository = std::string(kRematBenchRepository) + "/" + path;
  std::vector<std::string> candidates;
  // The runfiles root first: the working directory alone is ambiguous, since
  // another workspace may hold a file of the same relative path.
  for (const char* variable : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* root = std::getenv(variable);
    if (root != nullptr && *root != '\0') {
      candidates.push_back(std::string(root) + "/" + in_repository);
    }
  }
  candidates.push_back(path);
  candidates.push_back("../" + in_repository);
  for (const std::string& candidate : candidates) {
    std::error_code ignored;  // an unreadable candidate is one that does not exist
    if (fs::exists(candidate, ignored)) return candidate;
  }
  return path;
}

}  // namespace remat
