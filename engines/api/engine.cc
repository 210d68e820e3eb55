#include "engines/api/engine.h"

#include <algorithm>
#include <cstddef>

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
    // f32 parameters take f32 or f64 (converted); an i32 parameter takes
    // i32 only: an id or seed passed as a float is a caller's mistake.
    const bool want_int = program.dtype(i) == DType::kI32;
    if (want_int != (a.dtype() == DType::kI32)) {
      throw Error(StrCat("program ", program.name, ": argument ", program.param_names[i],
                         " should be ", DTypeName(program.dtype(i)), program.shapes[i].ToString(),
                         want_int ? "" : " (or f64)", ", got ", a.TypeString()));
    }
  }
  CheckStateOps(program);
  // Every run validates: a handful of indices, each compared with those
  // before it (a std::set allocated a node per index per run).
  for (size_t i = 0; i < wrt.size(); ++i) {
    const int w = wrt[i];
    if (w < 0 || w >= program.num_params()) {
      throw Error(StrCat("program ", program.name, ": wrt index ", w, " is not a parameter (0..",
                         program.num_params() - 1, ")"));
    }
    if (std::find(wrt.begin(), wrt.begin() + static_cast<std::ptrdiff_t>(i), w) !=
        wrt.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw Error(StrCat("program ", program.name, ": wrt names ", program.param_names[w],
                         " twice"));
    }
    if (program.dtype(w) == DType::kI32) {
      throw Error(StrCat("program ", program.name, ": wrt names ", program.param_names[w],
                         ", an integer input (i32", program.shapes[w].ToString(),
                         "); integers are never differentiated"));
    }
  }
}

}  // namespace remat
