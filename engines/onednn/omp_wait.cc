#include "engines/onednn/omp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace remat {

void UseMeasurementSettings(char** argv) {
  const bool spin = std::getenv("GOMP_SPINCOUNT") == nullptr &&
                    std::getenv("OMP_WAIT_POLICY") == nullptr;
  const bool heap = std::getenv("GLIBC_TUNABLES") == nullptr;
  if (!spin && !heap) return;
  if (spin) setenv("GOMP_SPINCOUNT", kShortOpenMpSpin, 1);
  if (heap) setenv("GLIBC_TUNABLES", kHugePageMalloc, 1);
  execv("/proc/self/exe", argv);
  // Only on failure: run with the defaults, which the platform line names.
  if (spin) unsetenv("GOMP_SPINCOUNT");
  if (heap) unsetenv("GLIBC_TUNABLES");
}

std::string MallocSetting() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables == nullptr ? "glibc's default" : std::string("GLIBC_TUNABLES=") + tunables;
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
