#include "harness/sweep_submit.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "engines/api/error.h"

namespace remat::bench {
namespace {

bool ParseBool(const std::string& value, const std::string& where) {
  if (value == "true" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "no") return false;
  throw Error(StrCat(where, ": '", value, "' is not true or false"));
}

std::string Trim(const std::string& text) {
  const size_t a = text.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  const size_t b = text.find_last_not_of(" \t\r");
  return text.substr(a, b - a + 1);
}

}  // namespace

void SetSlurmOption(SlurmOptions* o, const std::string& key, const std::string& value,
                    const std::string& where) {
  if (value.find('\n') != std::string::npos) throw Error(StrCat(where, ": a value with a newline"));
  if (key == "partition") {
    o->partition = value;
  } else if (key == "account") {
    o->account = value;
  } else if (key == "time") {
    o->time = value;
  } else if (key == "cpus_per_task" || key == "cpus-per-task") {
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 1) {
      throw Error(StrCat(where, ": cpus_per_task '", value, "' is not a positive number"));
    }
    o->cpus_per_task = value;
  } else if (key == "mem") {
    o->mem = value;
  } else if (key == "bench") {
    o->bench = value;
  } else if (key == "sbatch") {
    o->sbatch = value;
  } else if (key == "tries") {
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 1 || n > 100) {
      throw Error(StrCat(where, ": tries '", value, "' is not a number from 1 to 100"));
    }
    o->tries = static_cast<int>(n);
  } else if (key == "exclusive") {
    o->exclusive = ParseBool(value, where);
  } else if (key == "wait") {
    o->wait = ParseBool(value, where);
  } else {
    throw Error(StrCat(where, ": unknown Slurm option '", key,
                       "'; options: partition, account, time, cpus_per_task, mem, bench, tries, "
                       "exclusive, wait, sbatch"));
  }
}

SlurmOptions ReadSlurmConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(StrCat("--slurm-config=", path, ": cannot read the file"));
  SlurmOptions options;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const std::string where = StrCat(path, ":", number);
    const std::string text = Trim(line);
    if (text.empty() || text[0] == '#') continue;
    const size_t eq = text.find('=');
    if (eq == std::string::npos) {
      throw Error(StrCat(where, ": '", text, "' is not 'key = value'"));
    }
    SetSlurmOption(&options, Trim(text.substr(0, eq)), Trim(text.substr(eq + 1)), where);
  }
  return options;
}

std::string ShellQuote(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,@%+-") ==
          std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ArrayRanges(const std::vector<int>& indices) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    parts.push_back(j == i ? StrCat(indices[i]) : StrCat(indices[i], "-", indices[j]));
    i = j + 1;
  }
  return Join(parts, ",");
}

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path == nullptr ? "" : path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string SbatchScript(const SlurmOptions& o, const SweepJob& job) {
  std::string s = "#!/bin/bash\n# remat-bench sweep (harness/sweep_submit.h): one task runs its share of\n"
                  "# the case list on one node, retried in place when the bench fails.\n";
  auto directive = [&s](const std::string& option) { s += "#SBATCH " + option + "\n"; };
  directive("--job-name=remat-sweep");
  directive("--array=" + ArrayRanges(job.array));
  directive("--requeue");
  if (o.exclusive) directive("--exclusive");
  directive("--nodes=1");
  directive("--output=" + ShellQuote(job.out + "/logs/task-%a.out"));
  if (!o.partition.empty()) directive("--partition=" + ShellQuote(o.partition));
  if (!o.account.empty()) directive("--account=" + ShellQuote(o.account));
  if (!o.time.empty()) directive("--time=" + ShellQuote(o.time));
  if (!o.cpus_per_task.empty()) directive("--cpus-per-task=" + o.cpus_per_task);
  if (!o.mem.empty()) directive("--mem=" + ShellQuote(o.mem));
  if (!o.sbatch.empty()) directive(o.sbatch);
  std::string command = ShellQuote(job.bench) + " --cases=" + ShellQuote(job.cases) +
                        " --tasks=" + StrCat(job.tasks) + " --task=\"$SLURM_ARRAY_TASK_ID\"" +
                        " --out=" + ShellQuote(job.out);
  for (const std::string& a : job.bench_args) command += " " + ShellQuote(a);
  s += StrCat("cd ", ShellQuote(job.workspace), " || exit 1\n",
              "export BUILD_WORKSPACE_DIRECTORY=", ShellQuote(job.workspace), "\n",
              "tries=", o.tries, "\n",
              "for ((try = 1; try <= tries; try++)); do\n",
              "  echo \"remat sweep: task $SLURM_ARRAY_TASK_ID try $try of $tries on $(hostname)"
              " (job $SLURM_JOB_ID, restart ${SLURM_RESTART_COUNT:-0})\"\n",
              "  ", command, "\n",
              "  status=$?\n",
              "  [[ $status == 0 ]] && exit 0\n",
              "  echo \"remat sweep: task $SLURM_ARRAY_TASK_ID try $try failed (exit $status)\" >&2\n",
              "done\n",
              "echo \"remat sweep: task $SLURM_ARRAY_TASK_ID failed every one of $tries tries\" >&2\n",
              "exit 1\n");
  return s;
}

}  // namespace remat::bench
