// remat: see tools/remat_cli.h.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "engines/onednn/omp_wait.h"
#include "tools/remat_cli.h"

int main(int argc, char** argv) {
  // Timings on a shared machine: a short OpenMP spin and the heap in huge
  // pages (engines/onednn/omp_wait.h; may re-run the binary).
  remat::UseMeasurementSettings(argv);
  // Under `bazel run`, relative paths (--inputs, --dump) mean the caller's
  // directory, not the runfiles tree.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {
    if (chdir(dir) != 0) std::cerr << "remat: cannot enter " << dir << "\n";
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  return remat::RunRemat(args, std::cout, std::cerr);
}
