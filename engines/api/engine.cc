#include "engines/api/engine.h"

#include <set>

#include "engines/api/error.h"

namespace remat {

void ValidateArguments(const Program& program, const std::vector<Tensor>& args,
                       const std::vector<int>& wrt) {
  if (static_cast<int>(args.size()) != program.num_params()) {
    throw Error(StrCat("program ", program.name, " takes ", program.num_params(),
                       " arguments (", Join(program.param_names, ", "), "), got ", args.size()));
  }
  for (int i = 0; i < program.num_params(); ++i) {
    const Tensor& a = args[i];
    if (!a.defined()) {
      throw Error(StrCat("program ", program.name, ": argument ", program.param_names[i],
                         " is undefined"));
    }
    if (a.shape() != program.shapes[i]) {
      throw Error(StrCat("program ", program.name, ": argument ", program.param_names[i],
                         " should be ", program.shapes[i].ToString(), ", got ", a.TypeString()));
    }
  }
  std::set<int> seen;
  for (int w : wrt) {
    if (w < 0 || w >= program.num_params()) {
      throw Error(StrCat("program ", program.name, ": wrt index ", w, " is not a parameter (0..",
                         program.num_params() - 1, ")"));
    }
    if (!seen.insert(w).second) {
      throw Error(StrCat("program ", program.name, ": wrt names ", program.param_names[w],
                         " twice"));
    }
  }
}

}  // namespace remat
