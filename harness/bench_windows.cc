#include "harness/bench_windows.h"

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include <nlohmann/json.hpp>

extern char** environ;

namespace remat::bench {

double SampleWindowInChild(const std::vector<std::string>& args, int window,
                           const std::vector<std::unique_ptr<RowState>>& states) {
  char dir_template[] = "/tmp/remat-bench-window-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) throw Error("cannot create a scratch directory for the window's process");
  std::vector<std::string> child_args = args;
  child_args.push_back(StrCat("--only-window=", window));
  child_args.push_back(StrCat("--out=", dir));
  std::vector<char*> argv;
  for (std::string& a : child_args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) {
    std::filesystem::remove_all(dir);
    throw Error("cannot start the window's process");
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const std::filesystem::path latest = std::filesystem::path(dir) / "latest.json";
  nlohmann::json run;
  {
    std::ifstream in(latest);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !in) {
      std::filesystem::remove_all(dir);
      throw Error(StrCat("its process failed (status ", status, ")"));
    }
    run = nlohmann::json::parse(in);
  }
  std::filesystem::remove_all(dir);
  std::map<std::string, const nlohmann::json*> rows;
  for (const nlohmann::json& row : run["rows"]) rows[row["name"].get<std::string>()] = &row;
  double seconds = 0;
  for (const auto& s : states) {
    auto it = rows.find(s->row.name);
    if (it == rows.end()) continue;
    const nlohmann::json& row = *it->second;
    const nlohmann::json& samples = row["samples_ms"];
    if (samples["row"].empty()) continue;
    Timings& t = s->timings;
    if (!t.row_ms.empty()) t.window_starts.push_back(t.row_ms.size());
    auto append = [&samples](const char* key, std::vector<double>* to) {
      for (const nlohmann::json& v : samples[key]) to->push_back(v.get<double>());
    };
    append("row", &t.row_ms);
    append("eager", &t.eager_ms);
    append("row_delay", &t.row_delay);
    append("eager_delay", &t.eager_delay);
    // Readings line up with the samples they were taken for (the first
    // window's rows may have samples without one).
    t.link_ns.resize(t.row_ms.size() - samples["row"].size(), 0);
    if (samples.contains("link_ns")) {
      // The window's readings count toward the run's reference, each once:
      // a reading stands for every sample taken within kCpuLinkPeriod of
      // it, so a run of equal values is one reading.
      double last = 0;
      for (const nlohmann::json& v : samples["link_ns"]) {
        const double ns = v.get<double>();
        if (ns != last) s->session->link.Saw(ns);
        last = ns;
        t.link_ns.push_back(ns);
      }
    }
    s->window = window;
    s->runs += row["iterations"].get<int64_t>();
    s->sampling_seconds += row["sampling_seconds"].get<double>();
    seconds += row["sampling_seconds"].get<double>();
  }
  return seconds;
}

}  // namespace remat::bench
