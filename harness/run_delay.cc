#include "harness/run_delay.h"

#include <dirent.h>

#include <cstdio>
#include <string>

namespace remat {

int64_t ProcessRunDelayNs() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  int64_t total = 0;
  bool any = false;
  while (const dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    const std::string path = std::string("/proc/self/task/") + entry->d_name + "/schedstat";
    // "<ns on a CPU> <ns waiting on a runqueue> <timeslices>"
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      unsigned long long on_cpu = 0, waiting = 0;
      if (std::fscanf(f, "%llu %llu", &on_cpu, &waiting) == 2) {
        total += static_cast<int64_t>(waiting);
        any = true;
      }
      std::fclose(f);
    }
  }
  closedir(tasks);
  return any ? total : -1;
}

std::optional<double> RunDelayShare(int64_t before_ns, int64_t after_ns, double seconds) {
  if (before_ns < 0 || after_ns < 0 || !(seconds > 0)) return std::nullopt;
  return 1e-9 * static_cast<double>(after_ns - before_ns) / seconds;
}

}  // namespace remat
