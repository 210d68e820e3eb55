// Test helpers of the remat command line's tests (remat_cli_test,
// remat_cli_files_test): RunRemat's output, and a fresh temporary directory.
#ifndef REMAT_TOOLS_REMAT_CLI_TEST_UTIL_H_
#define REMAT_TOOLS_REMAT_CLI_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tools/remat_cli.h"

namespace remat {

struct Output {
  int status;
  std::string out;
  std::string err;
};

inline Output Remat(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int status = RunRemat(args, out, err);
  return {status, out.str(), err.str()};
}

inline std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

// The first line of `text`.
inline std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace remat

#endif  // REMAT_TOOLS_REMAT_CLI_TEST_UTIL_H_
