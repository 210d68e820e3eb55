#include "problems/program_file.h"

#include <filesystem>
#include <set>
#include <utility>

#include "engines/api/error.h"
#include "engines/api/npy.h"
#include "engines/api/program_text.h"

namespace remat {

std::unique_ptr<ProgramFileProblem> ProgramFileProblem::Read(const std::string& path) {
  return std::make_unique<ProgramFileProblem>(ReadProgramFile(path), path);
}

ProgramFileProblem::ProgramFileProblem(Program program, std::string path)
    : program_(std::move(program)), path_(std::move(path)) {
  std::set<std::string> seen;
  for (const std::string& name : program_.param_names) {
    if (name.empty() || !seen.insert(name).second) {
      throw Error(StrCat(path_, ": program ", program_.name, " has ",
                         name.empty() ? "an input with an empty name"
                                      : "two inputs named '" + name + "'",
                         "; inputs are read (DIR/<name>.npy) and differentiated (--wrt) by name, "
                         "so each needs its own"));
    }
  }
}

std::string ProgramFileProblem::description() const {
  return StrCat("program ", program_.name, " read from ", path_);
}

Program ProgramFileProblem::Build(const ParamValues& params) const {
  if (!params.empty()) {
    throw Error(StrCat(path_, ": a program file has no size parameters (got ",
                       FormatParams(params), ")"));
  }
  return program_;
}

std::vector<std::string> ProgramFileProblem::wrt() const {
  std::vector<std::string> out;
  for (int i = 0; i < program_.num_params(); ++i) {
    if (program_.dtype(i) != DType::kI32 && !program_.is_data(i)) {
      out.push_back(program_.param_names[i]);
    }
  }
  return out;
}

Tensor ProgramFileProblem::FixedInput(const std::string& input, const Shape&,
                                      const ParamValues&) const {
  int index = -1;
  for (int i = 0; i < program_.num_params(); ++i) {
    if (program_.param_names[i] == input) index = i;
  }
  if (index < 0 || program_.dtype(index) != DType::kI32) return Tensor();
  const std::filesystem::path file = std::filesystem::path(path_).parent_path() / (input + ".npy");
  if (!std::filesystem::exists(file)) return Tensor();
  return ReadNpy(file.string());
}

}  // namespace remat
