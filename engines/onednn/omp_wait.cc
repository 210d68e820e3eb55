#include "engines/onednn/omp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace remat {

void UseShortOpenMpSpin(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("GOMP_SPINCOUNT", kShortOpenMpSpin, 1);
  execv("/proc/self/exe", argv);
  // Only on failure: run with libgomp's default, which the platform line names.
  unsetenv("GOMP_SPINCOUNT");
}

std::string OpenMpWait() {
  std::string out;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    if (const char* value = std::getenv(name)) {
      out += (out.empty() ? "" : ", ") + std::string(name) + "=" + value;
    }
  }
  return out.empty() ? "libgomp's default spin" : out;
}

}  // namespace remat
