#include "harness/case_directory.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engines/api/error.h"
#include "engines/api/npy.h"
#include "engines/api/program_text.h"

namespace remat {

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
