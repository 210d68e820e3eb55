#include "harness/bench_sweep.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engines/api/error.h"
#include "harness/bench_plan.h"
#include "harness/bench_report.h"
#include "harness/sweep_merge.h"
#include "harness/sweep_results.h"
#include "harness/sweep_submit.h"

namespace remat::bench {
namespace {

std::string Absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

// This binary's path (/proc/self/exe), the tasks' default bench.
std::string SelfPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find this binary's path (/proc/self/exe); set --slurm-bench=PATH");
  return self.string();
}

}  // namespace

int WriteCasesCommand(const BenchFlags& flags, const std::vector<std::string>& args,
                      const std::vector<std::string>& registered_engines, std::ostream& log) {
  const std::vector<PlannedRow> rows = PlanRows(flags, registered_engines);
  // What planned them, for the merge's command (tools/report.py reads a
  // run's kind from it): these flags but --write-cases.
  std::vector<std::string> planning;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--write-cases") {
      ++i;
    } else if (args[i].rfind("--write-cases=", 0) != 0) {
      planning.push_back(args[i]);
    }
  }
  planning.insert(planning.begin(), args.empty() ? "bench" : args[0]);
  const std::string text = FormatCaseList(rows, CommandLine(planning));
  std::ofstream out(flags.write_cases);
  out << text;
  if (!out) throw Error(StrCat("--write-cases=", flags.write_cases, ": cannot write the file"));
  log << "bench: wrote " << rows.size() << " rows in " << GroupCases(rows).size() << " cases to "
      << flags.write_cases << "\n";
  return 0;
}

std::vector<PlannedRow> PlanCaseListRows(const BenchFlags& flags,
                                         const std::vector<std::string>& registered_engines,
                                         const nlohmann::json& source, const nlohmann::json& machine,
                                         std::ostream& log, std::vector<SweepCase>* cases) {
  const std::vector<PlannedRow> listed = ReadCaseList(flags.cases);
  for (const PlannedRow& row : listed) {
    if (row.kind == RowKind::kValueAndGrad &&
        std::find(registered_engines.begin(), registered_engines.end(), row.engine) ==
            registered_engines.end()) {
      throw Error(StrCat(flags.cases, ": row ", row.name, ": unknown engine '", row.engine,
                         "'; registered engines: ", Join(registered_engines, ", ")));
    }
  }
  const std::vector<SweepCase> all = GroupCases(listed);
  std::vector<int> share;
  if (flags.task < 0) {
    for (int i = 0; i < static_cast<int>(all.size()); ++i) share.push_back(i);
  } else {
    share = TaskShare(static_cast<int>(all.size()), flags.task, flags.tasks);
  }
  cases->clear();
  std::vector<PlannedRow> rows;
  int current = 0;
  for (const int i : share) {
    const SweepCase& c = all[i];
    if (flags.task >= 0) {
      const std::optional<nlohmann::json> file = ReadCaseResult(flags.sweep_dir, c);
      std::string why;
      if (file && CaseResultCurrent(*file, c, source, machine, &why)) {
        ++current;
        continue;
      }
      if (file && flags.only_window == 0) {
        log << "bench: case " << c.key << ": its results file is stale (" << why << "); running it\n";
      }
    }
    cases->push_back(c);
    rows.insert(rows.end(), c.rows.begin(), c.rows.end());
  }
  if (flags.task >= 0 && flags.only_window == 0) {
    log << "bench: task " << flags.task << " of " << flags.tasks << ": " << share.size() << " of "
        << all.size() << " cases, " << current << " already current, " << cases->size()
        << " to run\n";
  }
  return rows;
}

void WriteTaskResults(const BenchFlags& flags, const std::vector<SweepCase>& cases,
                      const std::vector<RowResult>& results, const std::string& command,
                      const nlohmann::json& machine, const nlohmann::json& source,
                      const std::string& date, std::ostream& log) {
  for (const SweepCase& c : cases) {
    const std::string path = WriteCaseResult(
        flags.out_dir, c, CaseResultJson(c, results, command, machine, source, date));
    log << "bench: case " << c.key << " -> " << path << "\n";
  }
}

int MergeCommand(const BenchFlags& flags, std::ostream& log) {
  std::ifstream list(flags.cases);
  if (!list) throw Error(StrCat("--cases=", flags.cases, ": cannot read the file"));
  std::stringstream text;
  text << list.rdbuf();
  const std::vector<SweepCase> cases = GroupCases(ParseCaseList(text.str(), flags.cases));
  if (!std::filesystem::is_directory(flags.merge_dir)) {
    throw Error(StrCat("--merge=", flags.merge_dir, ": not a directory"));
  }
  const MergedSweep merged = MergeSweep(cases, flags.merge_dir, CaseListPlannedBy(text.str()));
  for (const std::string& w : merged.warnings) log << "bench: merge: " << w << "\n";
  const std::time_t now = std::time(nullptr);
  const std::vector<std::string> written =
      WriteResults(ResultsDir(flags.out_dir), UtcStamp(now), merged.run);
  log << "bench: merged " << merged.run["rows"].size() << " rows of "
      << cases.size() - merged.missing.size() << " of " << cases.size() << " cases into "
      << Join(written, " and ") << "\n";
  if (!merged.missing.empty()) {
    log << "bench: merge: " << merged.missing.size() << " case(s) have no results (their task "
        << "failed every try, or has not run; resubmit to run only them):\n";
    for (const std::string& m : merged.missing) log << "  " << m << "\n";
    return 1;
  }
  return 0;
}

std::vector<std::string> TaskArgs(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool drop = a.rfind("--slurm-", 0) == 0;
    for (const char* flag : {"--submit", "--cases", "--task", "--tasks", "--out", "--slurm-config"}) {
      const std::string f = flag;
      if (a == f) {
        ++i;  // and its value
        drop = true;
      } else if (a.rfind(f + "=", 0) == 0) {
        drop = true;
      }
    }
    if (!drop) out.push_back(a);
  }
  return out;
}

int SubmitCommand(const BenchFlags& flags, const std::vector<std::string>& args, std::ostream& log) {
  SlurmOptions options;
  if (!flags.slurm_config.empty()) options = ReadSlurmConfig(flags.slurm_config);
  for (const auto& [key, value] : flags.slurm) SetSlurmOption(&options, key, value, "--slurm-" + key);
  const std::string sbatch = FindOnPath("sbatch");
  if (sbatch.empty()) {
    throw Error(
        "--submit=slurm: sbatch is not on PATH (Slurm's client: Debian's slurm-client; "
        "tools/slurm/local_cluster.sh start runs a one-node cluster here)");
  }
  const std::vector<SweepCase> cases = GroupCases(ReadCaseList(flags.cases));
  SweepJob job;
  job.bench = options.bench.empty() ? SelfPath() : options.bench;
  job.cases = Absolute(flags.cases);
  job.out = Absolute(flags.out_dir);
  job.workspace = Absolute(WorkspaceDir());
  job.tasks = flags.tasks;
  job.bench_args = TaskArgs(args);
  // Resume: a task whose every case has a file of these rows and this
  // source is left out (the machine is the task's to judge: which node it
  // lands on is not known here).
  const nlohmann::json source = SourceInfo();
  for (int k = 0; k < flags.tasks; ++k) {
    bool done = true;
    for (const int i : TaskShare(static_cast<int>(cases.size()), k, flags.tasks)) {
      const std::optional<nlohmann::json> file = ReadCaseResult(job.out, cases[i]);
      done = done && file && CaseResultCurrent(*file, cases[i], source, file->value("machine", nlohmann::json()));
    }
    if (!done) job.array.push_back(k);
  }
  if (job.array.empty()) {
    log << "bench: every case of " << flags.cases << " has a current results file in " << job.out
        << "; nothing to submit (merge: --merge=" << job.out << ")\n";
    return 0;
  }
  std::error_code ec;
  std::filesystem::create_directories(job.out + "/logs", ec);
  if (ec) throw Error(StrCat("--out=", flags.out_dir, ": cannot create ", job.out, "/logs: ", ec.message()));
  const std::string script_path = StrCat(job.out, "/sweep-", UtcStamp(std::time(nullptr)), ".sbatch");
  {
    std::ofstream script(script_path);
    script << SbatchScript(options, job);
    if (!script) throw Error(StrCat("cannot write ", script_path));
  }
  const std::string command =
      StrCat(ShellQuote(sbatch), " --parsable", options.wait ? " --wait" : "", " ", ShellQuote(script_path));
  log << "bench: " << command << "  (" << job.array.size() << " of " << flags.tasks << " tasks, "
      << cases.size() << " cases)\n"
      << std::flush;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw Error(StrCat("cannot run ", command));
  std::string output;
  std::array<char, 256> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  const int status = pclose(pipe);
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  const std::string job_id = output.substr(0, output.find(';'));
  if (job_id.empty()) {
    throw Error(StrCat("sbatch refused the sweep (", script_path, "; exit status ", status, ")"));
  }
  log << "bench: submitted job " << job_id << " (array " << ArrayRanges(job.array) << "); logs in "
      << job.out << "/logs; then: bench --merge=" << job.out << " --cases=" << job.cases << "\n";
  if (status != 0) {
    log << "bench: job " << job_id << ": a task failed (sbatch --wait exit status "
        << WEXITSTATUS(status) << "); the merge names its cases\n";
    return 1;
  }
  return 0;
}

}  // namespace remat::bench
