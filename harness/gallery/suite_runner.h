// Runs the suite's binaries on a faulty engine and reads what failed: the
// common part of gallery_test and mutant_test. Test-only.
#ifndef REMAT_HARNESS_GALLERY_SUITE_RUNNER_H_
#define REMAT_HARNESS_GALLERY_SUITE_RUNNER_H_

#include <map>
#include <string>
#include <vector>

namespace remat {

// argv[0] of the test binary, for Runfile outside `bazel test`.
void SetArgv0(const std::string& argv0);

// A data dependency of the test: under `bazel test` in the runfiles tree
// ($TEST_SRCDIR/$TEST_WORKSPACE), run by hand next to argv[0]'s.
std::string Runfile(const std::string& path);

// REMAT_FULL=1 in the environment (tools/ci_full.sh): gallery_test and
// mutant_test run every fault through the whole suite. Otherwise they run
// the smaller size each documents, which fails on the same faults.
bool FullSize();

struct Outcome {
  int exit_code = -1;  // -1: did not exit normally (a crash)
  std::string output;  // stdout and stderr
};

// Runs `command` (a shell line) with Bazel's test-runner variables unset,
// so that the suite's binary runs as a tool, not as this test: its XML
// (failures, on purpose) does not replace this test's, and --test_filter
// and sharding do not apply to it.
Outcome Execute(const std::string& command);

// The tests of a GoogleTest output that failed with one of `phrases` in
// their output (every failed test when `phrases` is empty), by test name
// without instantiation prefix or parameter
// ("ConformanceTest.AgreesWithTheFloat64Oracle"), and how many instances of
// each did.
std::map<std::string, int> TestsThatFailedSaying(const std::string& output,
                                                 const std::vector<std::string>& phrases);

}  // namespace remat

#endif  // REMAT_HARNESS_GALLERY_SUITE_RUNNER_H_
