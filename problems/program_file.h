// A program read from a file (engines/api/program_text.h) as a Problem, so
// that everything that runs problems (remat run, residuals, schedule, the
// bench) runs it the same way: it has no size parameters, its gradients are
// taken with respect to every input unless told otherwise, and its inputs
// are drawn as problems' are (MakeInputs: seeded, uniform in [-1, 1)).
#ifndef REMAT_PROBLEMS_PROGRAM_FILE_H_
#define REMAT_PROBLEMS_PROGRAM_FILE_H_

#include <memory>
#include <string>
#include <vector>

#include "engines/api/program.h"
#include "problems/problem.h"

namespace remat {

class ProgramFileProblem : public Problem {
 public:
  // Reads and parses `path`. Throws remat::Error naming the file and line
  // for a bad file, and for a program whose inputs cannot be told apart by
  // name (an empty or repeated parameter name): inputs are given and
  // selected (--inputs DIR/<name>.npy, --wrt) by name.
  static std::unique_ptr<ProgramFileProblem> Read(const std::string& path);
  ProgramFileProblem(Program program, std::string path);

  std::string name() const override { return program_.name; }
  std::string description() const override;
  std::vector<ParamSpec> params() const override { return {}; }
  Program Build(const ParamValues& params) const override;
  // Every float input that is not marked `data`, in order (integer inputs
  // are never differentiated; data inputs only when --wrt names them).
  std::vector<std::string> wrt() const override;
  // An integer input (token ids, targets, a mask, a seed) is read from
  // <name>.npy beside the program file where there is one, as
  // tools/torch_export.py writes them: no random draw gives ids within a
  // vocabulary or a causal mask. Float inputs, and integer ones without a
  // file, are drawn (MakeCase). A file that cannot be read is an Error
  // naming it.
  Tensor FixedInput(const std::string& input, const Shape& shape,
                    const ParamValues& params) const override;

  const std::string& path() const { return path_; }

 private:
  Program program_;
  std::string path_;
};

}  // namespace remat

#endif  // REMAT_PROBLEMS_PROGRAM_FILE_H_
