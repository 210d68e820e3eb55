#include "harness/gallery/suite_runner.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace remat {
namespace {

std::string& Argv0() {
  static std::string argv0;
  return argv0;
}

}  // namespace

void SetArgv0(const std::string& argv0) { Argv0() = argv0; }

bool FullSize() {
  const char* full = std::getenv("REMAT_FULL");
  return full != nullptr && std::string(full) == "1";
}

// A data dependency of this test: under `bazel test` in the runfiles tree
// ($TEST_SRCDIR/$TEST_WORKSPACE), run by hand next to argv[0]'s.
std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    return std::string(srcdir) + "/" + workspace + "/" + path;
  }
  return Argv0() + ".runfiles/remat_bench/" + path;
}


// The variables through which Bazel's test runner speaks to a GoogleTest
// binary. The suite's binaries run here as tools, not as this test: left
// set, their XML (failures, on purpose) would replace this test's test.xml,
// and --test_filter or sharding would apply to them. (ONEDNN_MAX_CPU_ISA
// and OpenMP's settings pass through: a capped run caps them too.)
static const char* const kTestRunnerVariables[] = {
    "XML_OUTPUT_FILE",         "GTEST_OUTPUT",      "GTEST_FILTER",
    "TESTBRIDGE_TEST_ONLY",    "TESTBRIDGE_TEST_RUNNER_FAIL_FAST",
    "TEST_PREMATURE_EXIT_FILE", "GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS",
    "GTEST_SHARD_STATUS_FILE", "TEST_SHARD_INDEX",  "TEST_TOTAL_SHARDS",
    "TEST_SHARD_STATUS_FILE",
};

Outcome Execute(const std::string& command) {
  Outcome o;
  std::string clean = "env";
  for (const char* v : kTestRunnerVariables) clean += std::string(" -u ") + v;
  FILE* pipe = popen((clean + " " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    o.output = "popen failed: " + command;
    return o;
  }
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    o.output.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  return o;
}

// "Problems/ConformanceTest.AgreesWithTheFloat64Oracle/layer_loss" ->
// "ConformanceTest.AgreesWithTheFloat64Oracle": a test, without its
// instantiation's prefix and parameter.
static std::string TestOf(const std::string& instance) {
  std::string name = instance.substr(0, instance.find(' '));
  const size_t dot = name.find('.');
  const size_t prefix = name.rfind('/', dot);
  if (prefix != std::string::npos) name = name.substr(prefix + 1);
  const size_t param = name.find('/', name.find('.'));
  if (param != std::string::npos) name = name.substr(0, param);
  return name;
}

// The tests of a GoogleTest output that failed with one of `phrases` in
// their output, and how many instances of each did.
std::map<std::string, int> TestsThatFailedSaying(const std::string& output,
                                                 const std::vector<std::string>& phrases) {
  std::map<std::string, int> tests;
  std::string current, text;
  size_t pos = 0;
  while (pos < output.size()) {
    size_t end = output.find('\n', pos);
    if (end == std::string::npos) end = output.size();
    const std::string line = output.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("[ RUN      ] ", 0) == 0) {
      current = line.substr(13);
      text.clear();
    } else if (line.rfind("[  FAILED  ] ", 0) == 0 && !current.empty()) {
      bool says = phrases.empty();
      for (const std::string& phrase : phrases) says = says || text.find(phrase) != std::string::npos;
      if (says) ++tests[TestOf(current)];
      current.clear();
    } else if (line.rfind("[       OK ] ", 0) == 0 || line.rfind("[  SKIPPED ] ", 0) == 0 ||
               line.rfind("[==========] ", 0) == 0) {
      // A test that ended without failing, or the summary: the "[  FAILED  ]"
      // lines of the summary repeat failures already counted and belong to
      // no running test (read as the last one's, a skipped test was counted
      // as failing once).
      current.clear();
    } else if (!current.empty()) {
      text += line + "\n";
    }
  }
  return tests;
}

}  // namespace remat
