// The helpers conformance_test.cc and conformance_variants_test.cc share.
#include "harness/conformance_test_util.h"

#include <gtest/gtest.h>

#include "harness/runfiles.h"
#include "problems/problem.h"

namespace remat {

std::string& EngineUnderTest() {
  static std::string name;
  return name;
}

// Each kernel's calls (Stats::kernel_times without the times, which differ
// from run to run): the same for the same run.
std::map<std::string, int64_t> KernelCalls(const Stats& s) {
  std::map<std::string, int64_t> calls;
  for (const auto& [name, t] : s.kernel_times) calls[name] = t.calls;
  return calls;
}

// Every float input (integers are never differentiated).
std::vector<int> AllInputs(const Program& program) {
  std::vector<int> all;
  for (int i = 0; i < program.num_params(); ++i) {
    if (program.dtype(i) != DType::kI32) all.push_back(i);
  }
  return all;
}

// The arguments' bytes, to check after a run that the engine wrote none of
// them (CONTRACT.md, state: the caller applies the new state; an engine
// that keeps state in place, as nn.BatchNorm2d does, writes its buffers).
std::vector<std::string> ArgumentBytes(const std::vector<Tensor>& args) {
  std::vector<std::string> bytes;
  for (const Tensor& a : args) {
    bytes.push_back(a.dry() ? std::string()
                            : std::string(static_cast<const char*>(a.raw()),
                                          static_cast<size_t>(a.bytes())));
  }
  return bytes;
}
void ExpectArgumentsUnwritten(const std::vector<std::string>& before, const Program& program,
                              const std::vector<Tensor>& args, const std::string& what) {
  const std::vector<std::string> after = ArgumentBytes(args);
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    EXPECT_EQ(before[i], after[i]) << what << " wrote to its argument " << program.param_names[i]
                                   << " (arguments are never written: CONTRACT.md, state)";
  }
}

// Program files the suite runs as problems, beside the registered ones:
// the ops an exporter writes for a model (broadcasting, reductions over
// axes, where; expand, cat, select, strided slices; grouped and biased
// convolutions; adaptive pooling, embedding's padding_idx, cross_entropy's
// ignore_index) that no C++ problem uses. Their data (integer inputs) lie
// beside them (ProgramFileProblem::FixedInput), so each is read through
// RematBenchFile: the suite also runs in another workspace's runfiles, where
// remat-bench lies beside the working directory, not in it.
namespace {

const char* const kProgramFiles[] = {
    "problems/files/llama_rmsnorm.remat",
    "problems/files/vit_tokens.remat",
    "problems/files/mobilenet_block.remat",
    "problems/files/model_heads.remat",
};

}  // namespace

const std::vector<std::unique_ptr<ProgramFileProblem>>& FileProblems() {
  static const auto* files = [] {
    auto* v = new std::vector<std::unique_ptr<ProgramFileProblem>>;
    for (const char* path : kProgramFiles) {
      v->push_back(ProgramFileProblem::Read(RematBenchFile(path)));
    }
    return v;
  }();
  return *files;
}

// A registered problem, or a program file's by its program's name.
const Problem& ProblemNamed(const std::string& name) {
  for (const auto& f : FileProblems()) {
    if (f->name() == name) return *f;
  }
  return FindProblem(name);
}

std::vector<std::string> ProblemNames() {
  std::vector<std::string> names;
  for (const auto& p : AllProblems()) names.push_back(p->name());
  for (const auto& f : FileProblems()) names.push_back(f->name());
  return names;
}

// The smallest cap that worked, as a run refused under a cap reports it
// (ErrorKind::kCapTooSmall's facts, CONTRACT.md section 4), or -1.
int64_t SmallestCapIn(const Error& e) {
  if (e.kind() != ErrorKind::kCapTooSmall) return -1;
  return e.facts().smallest_feasible_bytes;
}

}  // namespace remat
