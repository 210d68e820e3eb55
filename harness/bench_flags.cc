#include "harness/bench_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/units.h"
#include "harness/bench_sampling.h"
#include "harness/case_spec.h"

namespace remat::bench {
namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::string piece;
  std::istringstream in(text);
  while (std::getline(in, piece, separator)) {
    if (!piece.empty()) out.push_back(piece);
  }
  return out;
}

// True for a CaseVariant label's prefix and for text whose name part (before ':') Policy::Parse
// knows: where a new policy starts in a comma-separated --policies.
bool StartsPolicy(const std::string& piece) {
  for (const char* prefix : {CaseVariant::kSchedulePrefix, CaseVariant::kCapPrefix,
                             CaseVariant::kBudgetUnderCapPrefix, CaseVariant::kPolicyPrefix}) {
    if (piece.rfind(prefix, 0) == 0) return true;
  }
  if (piece == CaseVariant::kAsWrittenLabel) return true;
  const std::string name = piece.substr(0, piece.find(':'));
  const std::vector<std::string> names = Policy::Names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::vector<std::string> SplitPolicies(const std::string& text) {
  if (text.find(';') != std::string::npos) return Split(text, ';');
  std::vector<std::string> out;
  for (const std::string& piece : Split(text, ',')) {
    // "save_only_these_names:a,b" arrives as "save_only_these_names:a" and
    // "b": a piece that starts no policy continues the previous one's labels.
    if (!out.empty() && !StartsPolicy(piece) && out.back().find(':') != std::string::npos) {
      out.back() += "," + piece;
    } else {
      out.push_back(piece);
    }
  }
  return out;
}

BenchFlags ParseBenchFlags(const std::vector<std::string>& args, std::vector<std::string>* rest) {
  BenchFlags flags;
  flags.policies = SplitPolicies(kDefaultPolicies);
  flags.max_memory_bytes = DefaultMaxMemoryBytes();
  bool policies_given = false;
  bool peer_all = false;
  bool budget_given = false;
  rest->clear();
  if (!args.empty()) rest->push_back(args[0]);
  const std::vector<std::string> ours = {"engines",         "policies",        "problems",
                                         "program",         "sweep",           "out",
                                         "max-memory",      "max-row-seconds", "sampling-budget",
                                         "memory-cap",      "windows",         "only-window",
                                         "wrt",             "models-dir",      "models",
                                         "write-cases",     "cases",           "task",
                                         "tasks",           "merge",           "submit",
                                         "slurm-config"};
  bool plans_rows = false;  // a flag that --cases does not combine with
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      rest->push_back("--help");
      continue;
    }
    if (arg == "--peer") {
      peer_all = true;  // every peer of the run's kind, once --sweep is known
      flags.peers.clear();
      continue;
    }
    if (arg.rfind("--peer=", 0) == 0) {
      // Checked against the peers of the run's kind once every flag is read.
      peer_all = false;
      flags.peers.clear();
      std::stringstream list(arg.substr(7));
      for (std::string name; std::getline(list, name, ',');) {
        if (std::find(flags.peers.begin(), flags.peers.end(), name) == flags.peers.end()) {
          flags.peers.push_back(name);
        }
      }
      if (flags.peers.empty()) throw Error("--peer=: an empty list; peers: jax, torch, torch-compile");
      continue;
    }
    if (arg == "--slurm-wait") {
      flags.slurm.emplace_back("wait", "true");
      continue;
    }
    if (arg.rfind("--slurm-", 0) == 0 && arg.rfind("--slurm-config", 0) != 0) {
      // Checked by SetSlurmOption (harness/sweep_submit.h) when submitting.
      const size_t eq = arg.find('=');
      if (eq == std::string::npos) throw Error(StrCat(arg, " needs a value (", arg, "=...)"));
      flags.slurm.emplace_back(arg.substr(8, eq - 8), arg.substr(eq + 1));
      continue;
    }
    if (arg == "--paired") {
      flags.paired = true;
      continue;
    }
    if (arg == "--unpaired") {
      flags.paired = false;
      continue;
    }
    std::string name, value;
    bool matched = false;
    for (const std::string& flag : ours) {
      const std::string dashed = "--" + flag;
      if (arg == dashed) {
        if (i + 1 >= args.size()) throw Error(StrCat(dashed, " needs a value (", dashed, "=...)"));
        name = flag;
        value = args[++i];
        matched = true;
      } else if (arg.rfind(dashed + "=", 0) == 0) {
        name = flag;
        value = arg.substr(dashed.size() + 1);
        matched = true;
      }
      if (matched) break;
    }
    if (!matched) {
      rest->push_back(arg);
      continue;
    }
    if (name == "engines" || name == "policies" || name == "problems" || name == "program" ||
        name == "sweep" || name == "wrt" || name == "memory-cap" || name == "models" ||
        name == "models-dir") {
      plans_rows = true;
    }
    if (name == "write-cases" || name == "cases" || name == "merge" || name == "submit" ||
        name == "slurm-config") {
      if (value.empty()) throw Error(StrCat("--", name, " needs a value (--", name, "=...)"));
      (name == "write-cases" ? flags.write_cases
       : name == "cases"     ? flags.cases
       : name == "merge"     ? flags.merge_dir
       : name == "submit"    ? flags.submit
                             : flags.slurm_config) = value;
      if (name == "submit" && value != "slurm") {
        throw Error(StrCat("--submit=", value, ": unknown scheduler; schedulers: slurm"));
      }
    } else if (name == "task" || name == "tasks") {
      char* end = nullptr;
      const long number = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || number < (name == "task" ? 0 : 1) || number > 100000) {
        throw Error(StrCat("--", name, "=", value, ": not a ",
                           name == "task" ? "task index (0 or more)" : "number of tasks (1 or more)"));
      }
      (name == "task" ? flags.task : flags.tasks) = static_cast<int>(number);
    } else if (name == "engines") {
      flags.engines = Split(value, ',');
    } else if (name == "policies") {
      flags.policies = SplitPolicies(value);
      policies_given = true;
    } else if (name == "problems") {
      flags.problems = Split(value, ',');
    } else if (name == "program") {
      if (value.empty()) throw Error("--program needs a file (--program=FILE)");
      flags.programs.push_back(value);
    } else if (name == "out") {
      flags.out_dir = value;
      if (flags.sweep_dir.empty()) flags.sweep_dir = value;
    } else if (name == "windows" || name == "only-window") {
      char* end = nullptr;
      const long number = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || number < 1 || number > 8) {
        throw Error(StrCat("--", name, "=", value, ": not a ",
                           name == "windows" ? "number of windows" : "window", " from 1 to 8"));
      }
      (name == "windows" ? flags.windows : flags.only_window) = static_cast<int>(number);
    } else if (name == "max-row-seconds" || name == "sampling-budget") {
      char* end = nullptr;
      const double seconds = std::strtod(value.c_str(), &end);
      const bool zero_allowed = name == "sampling-budget";
      if (value.empty() || *end != '\0' || !(seconds > 0 || (zero_allowed && seconds == 0))) {
        throw Error(StrCat("--", name, "=", value, ": not a ",
                           zero_allowed ? "number of seconds" : "positive number of seconds"));
      }
      (name == "max-row-seconds" ? flags.max_row_seconds : flags.sampling_budget_seconds) =
          seconds;
      budget_given = budget_given || name == "sampling-budget";
    } else if (name == "wrt") {
      // Checked against each case's inputs by PlanRows (WrtFromFlags).
      flags.wrt.push_back(value);
    } else if (name == "models-dir") {
      if (value.empty()) throw Error("--models-dir needs a directory (--models-dir=DIR)");
      flags.models_dir = value;
    } else if (name == "models") {
      flags.models.clear();
      for (const std::string& model : Split(value, ',')) {
        try {
          flags.models.push_back(SweepModel::Parse(model));
        } catch (const Error& e) {
          throw Error(StrCat("--models: ", e.what()), e);
        }
      }
    } else if (name == "memory-cap") {
      if (value.empty()) throw Error("--memory-cap=: expected BYTES (64MiB) or FRACx (0.5x)");
      flags.memory_cap = value;
    } else if (name == "max-memory") {
      try {
        flags.max_memory_bytes = ParseBytes(value);
      } catch (const Error& e) {
        throw Error(StrCat("--max-memory=", value, ": ", e.what()), e);
      }
    } else if (name == "sweep") {
      if (value == "depth") {
        flags.sweep = Sweep::kDepth;
      } else if (value == "width") {
        flags.sweep = Sweep::kWidth;
      } else if (value == "transformer") {
        flags.sweep = Sweep::kTransformer;
        flags.policies = SplitPolicies(kTransformerPolicies);
      } else if (value == "schedules") {
        flags.sweep = Sweep::kSchedules;
      } else if (value == "scale") {
        flags.sweep = Sweep::kScale;
      } else if (value == "dtr") {
        flags.sweep = Sweep::kDtr;
      } else if (value == "budget") {
        flags.sweep = Sweep::kBudget;
      } else if (value == "models") {
        flags.sweep = Sweep::kModels;
      } else if (value == "none" || value.empty()) {
        flags.sweep = Sweep::kNone;
      } else {
        throw Error(StrCat("--sweep=", value,
                           ": unknown sweep; sweeps: depth, width, transformer, schedules, scale, dtr, "
                           "budget, models"));
      }
    }
  }
  // --peer's names, against the peers of the run's kind (a model's peers
  // run the model itself: tools/model_time.py).
  const bool models = flags.sweep == Sweep::kModels;
  const std::vector<std::string> known =
      models ? std::vector<std::string>(std::begin(kModelPeerEngines), std::end(kModelPeerEngines))
             : std::vector<std::string>(std::begin(kPeerEngines), std::end(kPeerEngines));
  for (const std::string& name : flags.peers) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw Error(StrCat("--peer: unknown engine '", name, "'; peers", models ? " of --sweep=models" : "",
                         ": ", Join(known, ", ")));
    }
  }
  // The models sweep's point is its peers beside remat: all of them unless
  // --peer= names some.
  if (peer_all || (models && flags.peers.empty())) flags.peers = known;
  // A model's run takes seconds: its rows are sampled for kModelRowSeconds
  // each (a few pairs), not by the default run's budget.
  if (models && flags.max_row_seconds == 0) flags.max_row_seconds = kModelRowSeconds;
  if (models && !budget_given) flags.sampling_budget_seconds = 0;
  if (!models && (!flags.models.empty() || !flags.models_dir.empty())) {
    throw Error(StrCat(flags.models.empty() ? "--models-dir" : "--models",
                       " is a flag of --sweep=models"));
  }
  if (flags.only_window > flags.Windows()) {
    throw Error(StrCat("--only-window=", flags.only_window, ": the run has ", flags.Windows(),
                       " window(s)"));
  }
  if (policies_given && (flags.sweep == Sweep::kSchedules || flags.sweep == Sweep::kScale ||
                         flags.sweep == Sweep::kDtr || flags.sweep == Sweep::kBudget ||
                         flags.sweep == Sweep::kModels)) {
    throw Error(StrCat("--policies and --sweep=",
                       flags.sweep == Sweep::kSchedules ? "schedules"
                       : flags.sweep == Sweep::kScale   ? "scale"
                       : flags.sweep == Sweep::kBudget  ? "budget"
                       : flags.sweep == Sweep::kModels  ? "models"
                                                        : "dtr",
                       " do not combine: the sweep picks its own policies and schedules"));
  }
  // Sweeps: the case list decides the rows.
  if (!flags.cases.empty() && (plans_rows || !flags.peers.empty())) {
    throw Error(StrCat("--cases=", flags.cases,
                       " and the flags that plan rows (--engines, --policies, --problems, --program, "
                       "--sweep, --wrt, --memory-cap, --peer, --models) do not combine: the case "
                       "list holds its rows"));
  }
  if (!flags.write_cases.empty() && !flags.cases.empty()) {
    throw Error("--write-cases and --cases do not combine (--write-cases plans from the other flags)");
  }
  const bool submit = !flags.submit.empty();
  if ((submit || !flags.merge_dir.empty() || flags.task >= 0) && flags.cases.empty()) {
    throw Error(StrCat(submit ? "--submit" : !flags.merge_dir.empty() ? "--merge" : "--task",
                       " needs the sweep's case list (--cases=FILE)"));
  }
  if ((submit || flags.task >= 0) && flags.out_dir.empty()) {
    throw Error(StrCat(submit ? "--submit" : "--task",
                       " needs the sweep's directory (--out=DIR), where each case's results go"));
  }
  if (flags.task >= flags.tasks) {
    throw Error(StrCat("--task=", flags.task, ": not a task of 0 to ", flags.tasks - 1,
                       " (--tasks=", flags.tasks, ")"));
  }
  if (!submit && (!flags.slurm.empty() || !flags.slurm_config.empty())) {
    throw Error("--slurm-* flags are flags of --submit=slurm");
  }
  if (submit && (flags.task >= 0 || !flags.merge_dir.empty())) {
    throw Error(StrCat("--submit and ", flags.task >= 0 ? "--task" : "--merge", " do not combine"));
  }
  return flags;
}

SweepModel SweepModel::Parse(const std::string& text) {
  SweepModel m;
  m.name = text;
  const std::string fit = "@fit";
  if (text.size() > fit.size() && text.compare(text.size() - fit.size(), fit.size(), fit) == 0) {
    m.name = text.substr(0, text.size() - fit.size());
    m.fit_batch = true;
  } else if (text.find('@') != std::string::npos) {
    throw Error(StrCat("'", text, "': NAME or NAME@fit (the largest batch that fits --max-memory)"));
  }
  if (std::find(std::begin(kSweepModels), std::end(kSweepModels), m.name) == std::end(kSweepModels)) {
    throw Error(StrCat("unknown model '", m.name, "'; models: ",
                       Join(std::vector<std::string>(std::begin(kSweepModels), std::end(kSweepModels)),
                            ", ")));
  }
  return m;
}

int64_t DefaultMaxMemoryBytes() {
  // The same default as the command line's: a run that would not fit is
  // refused before it allocates, rather than found by the OOM killer.
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  return physical / 5 * 4;
}

std::string BenchHelp() {
  return StrCat(
      "tools/bazel run //harness:bench -- [flags] [Google Benchmark flags]\n"
      "\n"
      "Every problem on every engine (and policy): time, peak memory, residual bytes,\n"
      "FLOPs; a summary table at the end; JSON into results/runs/bench-<UTC>.json\n"
      "and results/runs/latest.json (ignored by git; tools/promote_run.py records\n"
      "a run in results/ and regenerates results/REPORT.md).\n"
      "\n"
      "  --engines=a,b     engines to run (default: every registered engine but '",
      kOracleEngine, "' and '", kReferenceEngine,
      "')\n"
      "  --policies=p,q    rows per engine that honours policies (default:\n"
      "                    ",
      kDefaultPolicies,
      ");\n"
      "                    'schedule:SPEC' reverses a scan under a schedule (every:K,\n"
      "                    segments:K, sqrt, bisect, revolve:C, budget:BYTES,\n"
      "                    checkpoint_every:K; problems with a scan only);\n"
      "                    'as-written' is the problem's own checkpoint regions, any other\n"
      "                    is applied to it as jax.checkpoint(f, policy=...) would; names\n"
      "                    policies take labels: save_only_these_names:a,b (use ';' to\n"
      "                    separate policies if that reads ambiguously)\n"
      "  --problems=a,b    problems to run (default: all, at their bench sizes)\n"
      "  --program=FILE    a program file to run (the text `remat program` prints),\n"
      "                    repeatable; without --problems, only the files run\n"
      "  --sweep=depth     scan_stack at d=512,N=256 with L = 8,16,...,1024\n"
      "  --sweep=width     layer_loss at N=256 with d = 128,...,2048\n"
      "  --sweep=transformer  transformer_stack at L=12,D=512,H=8,F=2048,S=256,B=4 under\n"
      "                    checkpoint every 1, 2, 4 blocks and the selective policies\n"
      "  --sweep=schedules every schedule on scan_stack L=256,d=512,N=256 (the frontier),\n"
      "                    and eager, as-written, sqrt, bisect, revolve:8, budget:16MiB\n"
      "                    at L = 16, 64, 256, 1024 (peak vs depth)\n"
      "  --sweep=scale     scan_stack at L=2048,d=1024,N=1024 (16 GiB of weights and\n"
      "                    gradients; eager stores 16 GiB more, past this machine's\n"
      "                    memory: refused): eager, sqrt, revolve:8, budget:128MiB,\n"
      "                    each run once (one to three minutes each)\n"
      "  --sweep=dtr       dtr under caps between the smallest at which budget:B runs\n"
      "                    and eager's peak, next to budget:B at the same peak\n"
      "                    (budget-under-cap:F), on scan_stack and mlp_chain at 3 depths\n"
      "  --sweep=budget    the memory_budget:B curve, B = 0, 0.1, ..., 1, on every problem\n"
      "                    at its first bench size (transformer_stack L=4), with JAX's\n"
      "                    policies and sqrt, revolve:4, budget:4MiB as points\n"
      "  --sweep=models    the models people train at their sizes (tools/real_models.py:\n"
      "                    nanoGPT Shakespeare 4x256, GPT-2 small 1x1024, a 100 M\n"
      "                    Llama 1x1024, ResNet-50 16x224x224), exported once into\n"
      "                    --models-dir by tools/model_time.py (.venv): eager and\n"
      "                    recompute (as written, memory_budget:peak:min) on each\n"
      "                    program, beside the peers (--peer; default all: jax on the\n"
      "                    program, torch, torch-checkpoint, torch-compile on the model)\n"
      "  --models=a,b      the models of --sweep=models (default: all four)\n"
      "  --models-dir=DIR  where --sweep=models keeps its exports, each redone when\n"
      "                    the exporter or the model changed (default: .models/ in\n"
      "                    the workspace)\n"
      "  --wrt=NAME[,NAME...]|all  the inputs every case differentiates, as remat run's\n"
      "                    --wrt (NAME* a prefix; all: every float input); default: each\n"
      "                    problem's own, a program file's every float input\n"
      "  --memory-cap=C    engines that honour memory caps (dtr) run under C: BYTES or\n"
      "                    FRACx of eager's peak on each case (rows 'cap:C'); in\n"
      "                    --policies, 'cap:C' and 'budget-under-cap:C' are rows too\n"
      "  --out=DIR         where the JSON goes (default: results/runs/ of the workspace\n"
      "                    under `bazel run`, else the current directory)\n"
      "  --max-memory=B    refuse a row whose predicted peak exceeds B bytes (4GiB,\n"
      "                    512MiB, 0 for no limit) before it allocates; the row reports\n"
      "                    the error (default: 80% of physical memory)\n"
      "  --peer[=LIST]     also time the field's engines (jax, torch, torch-compile; all\n"
      "                    three without a list) on every size of scan_stack, mlp_chain,\n"
      "                    transformer_stack and gpt the run has an eager row at, as\n"
      "                    written and under everything_saveable (tools/peer_time.py in\n"
      "                    .venv: tools/python_env.sh), x eager against that row\n"
      "  --unpaired        time rows alone, x eager from eager's own row (faster, and\n"
      "                    at the mercy of a neighbour's load). By default every row is\n"
      "                    paired: its runs interleave with eager runs on the same case,\n"
      "                    x eager = the median over the quiet pairs of row time /\n"
      "                    eager time, sampled until its 95% interval is within 1%\n"
      "                    (--paired is accepted: it is the default)\n"
      "  --max-row-seconds=S  the time cap of one row's sampling (default: ",
      DefaultSamplingRule().max_seconds,
      "; a row\n"
      "                    with fewer than ", kQuietSamplesAtCap,
      " quiet pairs there goes on, up to ", kCapStretch,
      "x, outside\n"
      "                    the sampling budget; given, it is a hard cap); a row\n"
      "                    stopped by it shows its spread, which may be above 1%\n"
      "  --sampling-budget=S  once the run has sampled S seconds (default: ",
      kDefaultSamplingBudgetSeconds,
      "; 0:\n"
      "                    none), each further row takes 3 samples and stops:\n"
      "                    under a neighbour's load the run still ends in minutes, its\n"
      "                    rows flagged rather than sampled for ever\n"
      "  --windows=N       sample the rows in N passes (default: ", kDefaultWindows,
      " for the default\n"
      "                    run, 1 for a sweep), each taking 1/N of the budget; a row\n"
      "                    whose windows' x eager differ by more than ",
      100 * kWindowAllowance, "% and by more\n"
      "                    than their 95% intervals allow is flagged\n"
      "\n"
      "Sweeps over many machines (Slurm job arrays; README, 'Sweeps on Slurm'):\n"
      "  --write-cases=FILE  write the rows the other flags plan as a case list (one\n"
      "                    case a line, harness/sweep_cases.h) and run nothing\n"
      "  --cases=FILE      run the rows of a case list (not with --engines, --policies,\n"
      "                    --problems, --program, --sweep, --wrt, --memory-cap, --peer)\n"
      "  --task=K --tasks=N --out=DIR  run task K's share of the list's cases (each\n"
      "                    case's rows together, on this machine), skipping cases whose\n"
      "                    results file in DIR is current (same rows, source commit,\n"
      "                    machine); one results file per case into DIR\n"
      "  --submit=slurm --cases=FILE --tasks=N --out=DIR  submit the list as an sbatch\n"
      "                    job array of the tasks with cases not yet current; DIR on a\n"
      "                    filesystem the nodes share; Slurm options from\n"
      "                    --slurm-config=FILE (key = value lines) and --slurm-KEY=VALUE:\n"
      "                    partition, account, time, cpus_per_task, mem, bench (the\n"
      "                    binary's path on the nodes), tries (default 3), exclusive\n"
      "                    (default true), wait (--slurm-wait: until the array is done),\n"
      "                    sbatch (more sbatch words)\n"
      "  --merge=DIR --cases=FILE [--out=OUT]  every case's results file in DIR into\n"
      "                    one results JSON as a local run writes it, naming any case\n"
      "                    missing and warning when its cases ran on different CPUs/ISAs\n"
      "\n"
      "Google Benchmark's flags work as usual, e.g. --benchmark_filter=scan_stack,\n"
      "--benchmark_out=FILE; each row is one Google Benchmark iteration (its whole\n"
      "sampling), so --benchmark_min_time changes nothing and\n"
      "--benchmark_repetitions=N samples each row N times over.\n");
}

}  // namespace remat::bench
