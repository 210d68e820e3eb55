// A sweep (harness/sweep_cases.h) submitted to Slurm as one job array:
// task K of N runs `bench --cases=FILE --task=K --tasks=N --out=DIR` on one
// node, whole (--exclusive: each row is timed beside eager on that node),
// retried in place when it fails (a killed bench), and requeued by Slurm
// when its node fails or it is preempted (--requeue). A task finds the
// cases already current in DIR and runs only the rest (resume).
//
//   SlurmOptions o = ReadSlurmConfig("sweep.conf");      // optional
//   SetSlurmOption(&o, "partition", "debug", "--slurm-partition");
//   std::string script = SbatchScript(o, job);           // what sbatch reads
//
// The configuration file: `key = value` lines, '#' comments; keys:
//   partition, account, time (sbatch --time), cpus_per_task, mem (sbatch
//   --mem), bench (the bench binary's path as the nodes see it, on a shared
//   filesystem; default: this binary), tries (runs of a task before it
//   fails, default 3), exclusive (true|false, default true), wait
//   (true|false: sbatch --wait, return when every task is done),
//   sbatch (more sbatch options, as one line of words).
// The same keys as flags: --slurm-partition=P, ... (flags win).
#ifndef REMAT_HARNESS_SWEEP_SUBMIT_H_
#define REMAT_HARNESS_SWEEP_SUBMIT_H_

#include <string>
#include <vector>

namespace remat::bench {

struct SlurmOptions {
  std::string partition;
  std::string account;
  std::string time;
  std::string cpus_per_task;
  std::string mem;
  std::string bench;
  std::string sbatch;  // extra sbatch words
  int tries = 3;
  bool exclusive = true;
  bool wait = false;
};

// Sets `key` (a configuration key) to `value`; `where` names its origin in
// errors ("sweep.conf:3", "--slurm-time"). Throws remat::Error for an unknown
// key (the keys listed), a bad number or boolean, or a value with a newline.
void SetSlurmOption(SlurmOptions* options, const std::string& key, const std::string& value,
                    const std::string& where);
// Reads a configuration file. Throws remat::Error naming the file and line:
// unreadable, a line without '=', or what SetSlurmOption refuses.
SlurmOptions ReadSlurmConfig(const std::string& path);

// What one submission runs: absolute paths, the array's task indices (a
// resubmission leaves out tasks whose cases are all current) and the bench
// flags every task passes on (sampling, windows, ...).
struct SweepJob {
  std::string bench;      // the binary
  std::string cases;      // the case list
  std::string out;        // the sweep's directory (its logs go to out/logs)
  std::string workspace;  // where the tasks run (the source revision is read there)
  int tasks = 1;
  std::vector<int> array;  // task indices to run, in [0, tasks)
  std::vector<std::string> bench_args;
};

// The batch script: #SBATCH lines (job name, --array, --requeue,
// --exclusive unless off, --output per task, the options set), then the
// task's loop of up to `tries` runs of the bench. Every word shell-quoted.
std::string SbatchScript(const SlurmOptions& options, const SweepJob& job);
// "0-7", "1,3,5-6": the --array value of sorted indices.
std::string ArrayRanges(const std::vector<int>& indices);
// The path of `program` on $PATH; "" if none.
std::string FindOnPath(const std::string& program);
// Single-quotes `word` for sh where it holds anything but [A-Za-z0-9_./=:,@%+-].
std::string ShellQuote(const std::string& word);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_SWEEP_SUBMIT_H_
