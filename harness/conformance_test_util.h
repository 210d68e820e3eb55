// What the conformance suite's test files share (one binary per engine,
// harness/conformance.bzl): the engine under test, the problems the suite
// runs (the registered ones and the program files), and the checks every
// run gets.
#ifndef REMAT_HARNESS_CONFORMANCE_TEST_UTIL_H_
#define REMAT_HARNESS_CONFORMANCE_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/registry.h"
#include "engines/api/tensor.h"
#include "problems/program_file.h"

namespace remat {

// The engine the binary tests: main() sets it from --engine=NAME.
std::string& EngineUnderTest();

// Each kernel's calls (Stats::kernel_times without the times, which differ
// from run to run): the same for the same run.
std::map<std::string, int64_t> KernelCalls(const Stats& s);

// Every float input of `program` (integers are never differentiated).
std::vector<int> AllInputs(const Program& program);

// The arguments' bytes before a run, and the check after it that the engine
// wrote none of them (CONTRACT.md, state): a failure names `what` and the
// argument.
std::vector<std::string> ArgumentBytes(const std::vector<Tensor>& args);
void ExpectArgumentsUnwritten(const std::vector<std::string>& before, const Program& program,
                              const std::vector<Tensor>& args, const std::string& what);

// The program files the suite runs as problems beside the registered ones
// (problems/files, read once), a problem by name among both, and every name.
const std::vector<std::unique_ptr<ProgramFileProblem>>& FileProblems();
const Problem& ProblemNamed(const std::string& name);
std::vector<std::string> ProblemNames();

// The smallest cap that worked, as a run refused under a cap reports it
// (ErrorKind::kCapTooSmall's facts, CONTRACT.md section 4), or -1.
int64_t SmallestCapIn(const Error& e);

}  // namespace remat

#endif  // REMAT_HARNESS_CONFORMANCE_TEST_UTIL_H_
