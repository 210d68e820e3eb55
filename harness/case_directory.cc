#include "harness/case_directory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engines/api/error.h"
#include "engines/api/npy.h"
#include "engines/api/program_text.h"

namespace remat {
namespace {

// Checks that `dir` holds no .npy file that names no input of `program`,
// other than what --dump writes beside the inputs (loss.npy, grad_*.npy, state_*.npy): a
// misspelt input's file would otherwise be silently ignored.
void CheckNoExtraInputs(const std::string& dir, const Program& program, const std::string& what) {
  std::vector<std::string> extra;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".npy") continue;
    const std::string stem = entry.path().stem().string();
    const bool input = std::find(program.param_names.begin(), program.param_names.end(), stem) !=
                       program.param_names.end();
    if (!input && file != "loss.npy" && stem.rfind("grad_", 0) != 0 &&
        stem.rfind("state_", 0) != 0) {
      extra.push_back(file);
    }
  }
  std::sort(extra.begin(), extra.end());
  if (!extra.empty()) {
    throw Error(StrCat((std::filesystem::path(dir) / extra[0]).string(), ": no input of ", what,
                       " is named ", std::filesystem::path(extra[0]).stem().string(),
                       extra.size() > 1 ? StrCat(" (nor ", extra.size() - 1, " other files)") : "",
                       "; its inputs: ", Join(program.param_names, ", ")));
  }
}

}  // namespace

void ReadCaseInputs(const std::string& dir, Case* c) {
  if (!std::filesystem::is_directory(dir)) throw Error(StrCat(dir, ": not a directory of inputs"));
  CheckNoExtraInputs(dir, c->program, c->ToString());
  for (int i = 0; i < c->program.num_params(); ++i) {
    const std::string path = (std::filesystem::path(dir) / (c->program.param_names[i] + ".npy")).string();
    if (!std::filesystem::exists(path)) {
      throw Error(StrCat(path, ": missing: input ", c->program.param_names[i], " of ", c->ToString(), " (",
                         c->program.shapes[i].ToString(), ") has no file in ", dir));
    }
    Tensor t = ReadNpy(path);
    if (t.shape() != c->program.shapes[i]) {
      throw Error(StrCat(path, ": input ", c->program.param_names[i], " of ", c->ToString(), " should be ",
                         c->program.shapes[i].ToString(), ", the file holds ", t.TypeString()));
    }
    c->inputs[i] = t;
  }
}


std::vector<std::string> WriteCaseDirectory(const Case& c, const CaseVariant& variant,
                                            const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path root = dir;
  fs::remove_all(root);
  fs::create_directories(root);
  {
    std::ofstream p(root / "program.txt");
    p << PrintProgram(c.program);
    if (!p) throw Error(StrCat((root / "program.txt").string(), ": cannot write"));
  }
  std::vector<std::string> wrt;
  for (int w : c.wrt) wrt.push_back(c.program.param_names[w]);
  for (int i = 0; i < c.program.num_params(); ++i) {
    WriteNpy((root / (c.program.param_names[i] + ".npy")).string(), c.inputs[i]);
  }
  std::ofstream j(root / "case.json");
  j << nlohmann::json{{"problem", c.problem->name()}, {"variant", variant.Label()}, {"wrt", wrt}}.dump(2)
    << "\n";
  if (!j) throw Error(StrCat((root / "case.json").string(), ": cannot write"));
  return wrt;
}

}  // namespace remat
