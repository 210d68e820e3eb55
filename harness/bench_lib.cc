#include "harness/bench_lib.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/registry.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/platform.h"
#include "engines/schedule/schedule.h"
#include "harness/stats_json.h"
#include "problems/program_file.h"

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

// True for kAsWritten and for text whose name part (before ':') Policy::Parse
// knows: where a new policy starts in a comma-separated --policies.
bool StartsPolicy(const std::string& piece) {
  if (piece == kAsWritten || piece.rfind(kSchedulePrefix, 0) == 0 || IsCap(piece) ||
      IsBudgetUnderCap(piece)) {
    return true;
  }
  const std::string name = piece.substr(0, piece.find(':'));
  const std::vector<std::string> names = Policy::Names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

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

}  // namespace

// A bound row's key for rows of the same N and d: "N=256,d=512".
std::optional<std::string> BoundKey(const OrderedParams& params) {
  std::optional<int64_t> n, d;
  for (const auto& [name, value] : params) {
    if (name == "N") n = value;
    if (name == "d") d = value;
  }
  if (!n || !d) return std::nullopt;
  return StrCat("N=", *n, ",d=", *d);
}

// The compiled engine (engines/planned), whose default rows are restricted.
constexpr char kPlannedEngine[] = "planned";

bool IsFloat64Check(const std::string& engine) {
  return engine == kOracleEngine || engine == kReferenceEngine;
}

bool HonoursMemoryCaps(const std::string& engine) {
  try {
    return MakeEngine(engine)->honours_memory_cap();
  } catch (const Error&) {
    return false;  // not registered (yet): nothing says it does
  }
}

bool IgnoresPolicies(const std::string& engine) {
  // All three run every region inline (the reference is the eager reverse
  // mode on float64, the oracle a plain reverse mode); a row per policy would
  // measure the same thing four times. So
  // does any registered engine that says it does not honour checkpoints
  // (dtr decides what to keep as it runs); a name not registered (yet) gets
  // every policy.
  if (engine == kBaselineEngine || IsFloat64Check(engine)) return true;
  // Asked afresh each time (making an engine allocates nothing of a
  // problem's): a cache here would be the bench's one mutable global.
  try {
    return !MakeEngine(engine)->honours_checkpoints();
  } catch (const Error&) {
    return false;  // not registered: nothing says it ignores them
  }
}

BenchFlags ParseBenchFlags(const std::vector<std::string>& args, std::vector<std::string>* rest) {
  BenchFlags flags;
  flags.policies = SplitPolicies(kDefaultPolicies);
  flags.max_memory_bytes = DefaultMaxMemoryBytes();
  bool policies_given = false;
  rest->clear();
  if (!args.empty()) rest->push_back(args[0]);
  const std::vector<std::string> ours = {"engines",         "policies",        "problems",
                                         "program",         "sweep",           "out",
                                         "max-memory",      "max-row-seconds", "sampling-budget",
                                         "memory-cap",      "windows",         "only-window",
                                         "wrt"};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      rest->push_back("--help");
      continue;
    }
    if (arg == "--peer") {
      flags.peers.assign(std::begin(kPeerEngines), std::end(kPeerEngines));
      continue;
    }
    if (arg.rfind("--peer=", 0) == 0) {
      flags.peers.clear();
      std::stringstream list(arg.substr(7));
      for (std::string name; std::getline(list, name, ',');) {
        if (std::find(std::begin(kPeerEngines), std::end(kPeerEngines), name) == std::end(kPeerEngines)) {
          throw Error(StrCat("--peer: unknown engine '", name, "'; peers: ",
                             Join(std::vector<std::string>(std::begin(kPeerEngines), std::end(kPeerEngines)),
                                  ", ")));
        }
        if (std::find(flags.peers.begin(), flags.peers.end(), name) == flags.peers.end()) {
          flags.peers.push_back(name);
        }
      }
      if (flags.peers.empty()) throw Error("--peer=: an empty list; peers: jax, torch, torch-compile");
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
    if (name == "engines") {
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
    } else if (name == "wrt") {
      // Checked against each case's inputs by PlanRows (WrtFromFlags).
      flags.wrt.push_back(value);
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
      } else if (value == "none" || value.empty()) {
        flags.sweep = Sweep::kNone;
      } else {
        throw Error(StrCat("--sweep=", value,
                           ": unknown sweep; sweeps: depth, width, transformer, schedules, scale, dtr, "
                           "budget"));
      }
    }
  }
  if (flags.only_window > flags.Windows()) {
    throw Error(StrCat("--only-window=", flags.only_window, ": the run has ", flags.Windows(),
                       " window(s)"));
  }
  if (policies_given && (flags.sweep == Sweep::kSchedules || flags.sweep == Sweep::kScale ||
                         flags.sweep == Sweep::kDtr || flags.sweep == Sweep::kBudget)) {
    throw Error(StrCat("--policies and --sweep=",
                       flags.sweep == Sweep::kSchedules ? "schedules"
                       : flags.sweep == Sweep::kScale   ? "scale"
                       : flags.sweep == Sweep::kBudget  ? "budget"
                                                        : "dtr",
                       " do not combine: the sweep picks its own policies and schedules"));
  }
  return flags;
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
      "FLOPs; a summary table at the end; JSON into results/bench-<UTC>.json and\n"
      "results/latest.json.\n"
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
      "  --wrt=NAME[,NAME...]|all  the inputs every case differentiates, as remat run's\n"
      "                    --wrt (NAME* a prefix; all: every float input); default: each\n"
      "                    problem's own, a program file's every float input\n"
      "  --memory-cap=C    engines that honour memory caps (dtr) run under C: BYTES or\n"
      "                    FRACx of eager's peak on each case (rows 'cap:C'); in\n"
      "                    --policies, 'cap:C' and 'budget-under-cap:C' are rows too\n"
      "  --out=DIR         where the JSON goes (default: results/ of the workspace under\n"
      "                    `bazel run`, else the current directory)\n"
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
      "); a row\n"
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
      100 * kWindowAllowance, "% is flagged\n"
      "\n"
      "Google Benchmark's flags work as usual, e.g. --benchmark_filter=scan_stack,\n"
      "--benchmark_out=FILE; each row is one Google Benchmark iteration (its whole\n"
      "sampling), so --benchmark_min_time changes nothing and\n"
      "--benchmark_repetitions=N samples each row N times over.\n");
}

OrderedParams OrderParams(const Problem& problem, const ParamValues& params) {
  OrderedParams out;
  for (const ParamSpec& spec : problem.params()) {
    auto it = params.find(spec.name);
    if (it != params.end()) out.emplace_back(spec.name, it->second);
  }
  return out;
}

std::string FormatOrderedParams(const OrderedParams& params) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : params) parts.push_back(StrCat(name, "=", value));
  return Join(parts, ",");
}

std::vector<ParamValues> DefaultBenchSizes(const Problem& problem) {
  // Overrides of the problem's defaults, per size. The defaults (d=512,
  // N=256, L=8, D=8) run in milliseconds; deeper sizes show how memory grows
  // with depth (linearly, or as log D for sin_recursive). Every row is
  // sampled until its ratio settles, and paired with as many eager runs:
  // with scan_stack's third size at L=128, its rows took 70 of the run's 102
  // seconds of sampling on the 2-core EPYC (then: least times, 6 pairs); at
  // L=64, with the median of pairs sampled to a 1% interval, the whole
  // default run took 2 to 2.5 minutes there when the machine was quiet.
  // Sampled in two windows (kDefaultWindows), L=64's 15 rows alone needed 58
  // of the 150 s budget for their fewest pairs, and the rows after them were
  // left 3 pairs a window: the default run stops at L=32. --sweep=depth goes
  // further.
  static const std::map<std::string, std::vector<std::map<std::string, int64_t>>> kSizes = {
      {"scan_stack", {{}, {{"L", 32}}}},
      // A small stack by default (seconds at the problem's L=12, D=512);
      // --sweep=transformer runs that size. At S=64 the smallest
      // feasible budget (2.25 MiB) is below the default run's (4 MiB).
      {"transformer_stack", {{{"L", 4}, {"D", 256}, {"H", 4}, {"F", 1024}, {"S", 64}, {"B", 2}}}},
      {"sin_plain", {{}, {{"D", 64}}, {{"D", 1024}}}},
      // A quarter of the problem's batch: the default budget (4 MiB) lies
      // between its smallest feasible (2 MiB) and storing every block.
      {"mlp_chain", {{{"N", 512}}}},
      {"sin_recursive", {{}, {{"D", 64}}, {{"D", 1024}}}},
  };
  std::vector<ParamValues> out;
  auto it = kSizes.find(problem.name());
  if (it == kSizes.end()) return {ResolveParams(problem, {})};
  for (const auto& overrides : it->second) out.push_back(ResolveParams(problem, overrides));
  return out;
}

std::vector<ParamValues> SweepSizes(Sweep sweep) {
  std::vector<ParamValues> out;
  if (sweep == Sweep::kDepth) {
    const Problem& p = FindProblem("scan_stack");
    for (int64_t l = 8; l <= 1024; l *= 2) {
      out.push_back(ResolveParams(p, {{"L", l}, {"d", 512}, {"N", 256}}));
    }
  } else if (sweep == Sweep::kTransformer) {
    out.push_back(ResolveParams(FindProblem("transformer_stack"), {}));
  } else if (sweep == Sweep::kSchedules) {
    const Problem& p = FindProblem("scan_stack");
    for (int64_t l : kScheduleDepths) {
      out.push_back(ResolveParams(p, {{"L", l}, {"d", 512}, {"N", 256}}));
    }
  } else if (sweep == Sweep::kScale) {
    out.push_back(ResolveParams(FindProblem("scan_stack"), {{"L", 2048}, {"d", 1024}, {"N", 1024}}));
  } else if (sweep == Sweep::kDtr) {
    // Every problem's sizes: PlanRows takes them per problem (DtrSweepSizes).
  } else if (sweep == Sweep::kWidth) {
    const Problem& p = FindProblem("layer_loss");
    for (int64_t d = 128; d <= 2048; d *= 2) out.push_back(ResolveParams(p, {{"d", d}, {"N", 256}}));
  }
  return out;
}

std::vector<DtrSweepCase> DtrSweepCases() {
  // The bench's default sizes (N=256, d=512; mlp_chain N=512, d=256), at
  // three depths. Caps: on scan_stack eager's peak is two-thirds arguments and
  // gradients, so budget:B first runs near 0.78x (L=16); on mlp_chain at 0.51x,
  // 0.43x and 0.41x of it (L=16, 64, 256).
  return {{"scan_stack", {16, 64, 256}, {"0.8x", "0.9x", "1x"}},
          {"mlp_chain", {16, 64, 256}, {"0.6x", "0.75x", "0.9x"}}};
}

std::vector<std::string> SweepPolicies(Sweep sweep, const ParamValues& size) {
  std::vector<std::string> out;
  if (sweep == Sweep::kScale) return SplitPolicies(kScalePolicies);
  if (sweep == Sweep::kBudget) return SplitPolicies(kBudgetSweepPolicies);
  if (sweep != Sweep::kSchedules) return out;
  // The frontier's case also has its place in the depth series: its rows
  // once, the frontier's order first.
  if (size.at("L") == kFrontierDepth) out = SplitPolicies(kFrontierPolicies);
  for (const std::string& p : SplitPolicies(kDepthSchedulePolicies)) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

std::vector<PlannedRow> PlanRows(const BenchFlags& flags,
                                 const std::vector<std::string>& registered_engines) {
  // Engines: the baseline first, then the others by name.
  std::vector<std::string> engines = flags.engines;
  if (engines.empty() && flags.sweep == Sweep::kDtr) engines = {kBaselineEngine, "dtr", "recompute"};
  if (engines.empty()) {
    for (const std::string& e : registered_engines) {
      if (!IsFloat64Check(e)) engines.push_back(e);
    }
  }
  for (const std::string& e : engines) {
    if (std::find(registered_engines.begin(), registered_engines.end(), e) ==
        registered_engines.end()) {
      throw Error(StrCat("--engines: unknown engine '", e,
                         "'; registered engines: ", Join(registered_engines, ", ")));
    }
  }
  std::sort(engines.begin(), engines.end(), [](const std::string& a, const std::string& b) {
    const bool a_base = a == kBaselineEngine, b_base = b == kBaselineEngine;
    return a_base != b_base ? a_base : a < b;
  });
  engines.erase(std::unique(engines.begin(), engines.end()), engines.end());

  std::vector<std::string> policies;
  for (const std::string& p : flags.policies) {
    // Parse throws remat::Error listing the valid names; the row keeps the
    // text as given so that its name reads like the flag.
    if (p != kAsWritten && !IsSchedule(p) && !IsCap(p) && !IsBudgetUnderCap(p)) Policy::Parse(p);
    if (std::find(policies.begin(), policies.end(), p) == policies.end()) policies.push_back(p);
  }

  // Problems and their sizes.
  // Problems, their sizes, and the program file each comes from (if any).
  struct PlannedCase {
    const Problem* problem;
    std::vector<ParamValues> sizes;
    std::string program_file;
  };
  std::vector<PlannedCase> cases;
  std::vector<std::unique_ptr<ProgramFileProblem>> files;
  // --sweep=dtr: each problem's depths, and per case its rows' caps.
  std::map<std::string, std::vector<std::string>> dtr_caps;
  if (flags.sweep != Sweep::kNone) {
    if (!flags.problems.empty() || !flags.programs.empty()) {
      throw Error(StrCat(flags.problems.empty() ? "--program" : "--problems",
                         " and --sweep do not combine: a sweep picks its problem"));
    }
    if (flags.sweep == Sweep::kDtr) {
      for (const DtrSweepCase& d : DtrSweepCases()) {
        const Problem& p = FindProblem(d.problem);
        std::vector<ParamValues> sizes;
        for (int64_t l : d.depths) {
          ParamValues size = DefaultBenchSizes(p).front();
          size["L"] = l;
          sizes.push_back(ResolveParams(p, size));
        }
        cases.push_back({&p, sizes, ""});
        for (const char* cap : d.caps) dtr_caps[d.problem].push_back(cap);
      }
    } else if (flags.sweep == Sweep::kBudget) {
      for (const auto& p : AllProblems()) {
        cases.push_back({p.get(), {DefaultBenchSizes(*p).front()}, ""});
      }
    } else {
      const char* problem = flags.sweep == Sweep::kTransformer ? "transformer_stack"
                            : flags.sweep == Sweep::kWidth     ? "layer_loss"
                                                               : "scan_stack";
      cases.push_back({&FindProblem(problem), SweepSizes(flags.sweep), ""});
    }
  } else if (flags.problems.empty() && flags.programs.empty()) {
    for (const auto& p : AllProblems()) cases.push_back({p.get(), DefaultBenchSizes(*p), ""});
  } else {
    for (const std::string& name : flags.problems) {
      const Problem& p = FindProblem(name);
      cases.push_back({&p, DefaultBenchSizes(p), ""});
    }
  }
  for (const std::string& path : flags.programs) {
    files.push_back(ProgramFileProblem::Read(path));
    cases.push_back({files.back().get(), {ParamValues()}, path});
  }

  std::vector<PlannedRow> bounds, rows;
  std::set<std::string> bound_keys;
  for (const auto& [problem, sizes, program_file] : cases) {
    // Schedules reverse scans and chains of blocks: their rows go to problems
    // that have one (ApplySchedule says which).
    const Program program = problem->Build(sizes.front());
    // --wrt names inputs of every case (remat::Error naming the flag and
    // the inputs otherwise): checked here, before anything runs.
    try {
      WrtFromFlags(flags.wrt, program, {});
    } catch (const Error& e) {
      throw Error(StrCat(problem->name(), ": ", e.what()));
    }
    bool schedulable = true;
    try {
      ApplySchedule(program, "sqrt");
    } catch (const Error&) {
      schedulable = false;
    }
    for (const ParamValues& size : sizes) {
      const std::ptrdiff_t case_begin = static_cast<std::ptrdiff_t>(rows.size());
      const OrderedParams params = OrderParams(*problem, size);
      const std::string formatted = FormatOrderedParams(params);
      const std::string name =
          program_file.empty()
              ? problem->name()
              : problem->name() + "@" + std::filesystem::path(program_file).filename().string();
      const std::string case_key = formatted.empty() ? name : name + "/" + formatted;
      std::vector<std::string> size_policies = SweepPolicies(flags.sweep, size);
      if (size_policies.empty()) size_policies = policies;
      if (flags.sweep == Sweep::kDtr) {
        size_policies.clear();
        for (const std::string& cap : dtr_caps[problem->name()]) {
          size_policies.push_back(StrCat(kCapPrefix, cap));
          size_policies.push_back(StrCat(kBudgetUnderCapPrefix, cap));
        }
      }
      for (const std::string& engine : engines) {
        const bool caps = HonoursMemoryCaps(engine);
        std::vector<std::string> engine_policies = size_policies;
        if (IgnoresPolicies(engine)) {
          engine_policies = {kAsWritten};
          // An engine that evicts runs under the caps instead (eager's row
          // is the pairing's baseline either way).
          if (caps && flags.sweep == Sweep::kDtr) engine_policies.clear();
          if (caps && !flags.memory_cap.empty()) {
            engine_policies = {StrCat(kCapPrefix, flags.memory_cap)};
          }
        }
        // planned runs recompute's plans, compiled: in the default run (no
        // --engines) its rows are the problems as written, its overhead next
        // to eager's on every problem, so that the default run stays about
        // as long as it was (its other 87 rows doubled recompute's share);
        // --engines=planned gives it every policy and schedule.
        if (flags.engines.empty() && flags.sweep == Sweep::kNone && engine == kPlannedEngine) {
          engine_policies = {kAsWritten};
        }
        if (caps) {
          for (const std::string& p : size_policies) {
            if (IsCap(p) && std::find(engine_policies.begin(), engine_policies.end(), p) ==
                                engine_policies.end()) {
              engine_policies.push_back(p);
            }
          }
        }
        for (const std::string& policy : engine_policies) {
          if ((IsSchedule(policy) || IsBudgetUnderCap(policy)) && !schedulable) continue;
          if (IsCap(policy) && !caps) continue;
          if (IsBudgetUnderCap(policy) && IgnoresPolicies(engine)) continue;
          PlannedRow row;
          row.problem = problem->name();
          row.program_file = program_file;
          row.params = params;
          row.engine = engine;
          row.policy = policy;
          row.case_key = case_key;
          row.big = flags.sweep == Sweep::kScale;
          row.name = StrCat("BM_ValueAndGrad/", case_key, "/", engine, "/", policy);
          rows.push_back(row);
        }
      }
      // The A/A control (harness/bench_controls.h), right after eager's
      // row, on every case whose other rows eager's is compared with
      // (not the big rows, which eager cannot run).
      const auto baseline = std::find_if(rows.begin() + case_begin, rows.end(),
                                         [](const PlannedRow& r) { return IsBaselineRow(r); });
      if (baseline != rows.end() && rows.end() - (rows.begin() + case_begin) > 1 &&
          flags.sweep != Sweep::kScale) {
        PlannedRow control = *baseline;
        control.control = true;
        control.name += "/control";
        rows.insert(baseline + 1, control);
      }
      const std::optional<std::string> key = BoundKey(params);
      if (key && bound_keys.insert(*key).second) {
        PlannedRow bound;
        bound.kind = RowKind::kMatMulBound;
        bound.problem = kBoundProblem;
        for (const auto& p : params) {
          if (p.first == "N" || p.first == "d") bound.params.push_back(p);
        }
        std::sort(bound.params.begin(), bound.params.end());  // "N" < "d": N first
        bound.engine = kBoundEngine;
        bound.case_key = StrCat(kBoundProblem, "/", *key);
        bound.name = StrCat("BM_OneDnnMatMulBound/", *key);
        bounds.push_back(bound);
      }
    }
  }
  bounds.insert(bounds.end(), rows.begin(), rows.end());
  return bounds;
}

void ComputeVsEager(std::vector<RowResult>* rows) {
  std::map<std::string, const RowResult*> baseline, bound;
  for (const RowResult& r : *rows) {
    if (!r.error.empty() || r.real_time_ms <= 0) continue;
    if (IsBaselineRow(r.row)) {
      baseline.emplace(r.row.case_key, &r);
    }
    if (r.row.kind == RowKind::kMatMulBound && r.gflops > 0) {
      if (auto key = BoundKey(r.row.params)) bound.emplace(*key, &r);
    }
  }
  // Copies: the pointers above are into `rows`, which the loop below writes.
  struct Baseline {
    double ms;
    int64_t flops;
    double spread;
    std::optional<double> overhead;  // eager's share of time outside kernels
    std::optional<double> overhead_ns_per_call;
  };
  std::map<std::string, Baseline> baseline_ms_flops;
  for (const auto& [key, r] : baseline) {
    baseline_ms_flops[key] = {r->real_time_ms, r->total_flops(), r->spread.value_or(0),
                              r->overhead_fraction, r->overhead_ns_per_call};
  }
  struct Bound {
    double gflops;
    double spread;
    bool quiet;
  };
  std::map<std::string, Bound> bound_gflops_spread;
  for (const auto& [key, r] : bound) {
    bound_gflops_spread[key] = {r->gflops, r->spread.value_or(0), r->quiet};
  }
  for (RowResult& r : *rows) {
    r.vs_eager.reset();
    r.of_matmul_bound.reset();
    r.flop_floor.reset();
    r.overhead_per_call_vs_eager.reset();
    r.noise.clear();
    if (!r.error.empty() || r.row.kind != RowKind::kValueAndGrad) continue;
    auto base = baseline_ms_flops.find(r.row.case_key);
    if (base != baseline_ms_flops.end()) r.vs_eager = r.real_time_ms / base->second.ms;
    if (base != baseline_ms_flops.end() && base->second.overhead_ns_per_call &&
        *base->second.overhead_ns_per_call > 0 && r.overhead_ns_per_call) {
      r.overhead_per_call_vs_eager = *r.overhead_ns_per_call / *base->second.overhead_ns_per_call;
    }
    // Matmul-dominated: the cases with a bound (N and d).
    const std::optional<std::string> key = BoundKey(r.row.params);
    const double spread = r.spread.value_or(0);
    // Unpaired, the ratio carries the uncertainty of eager's row too.
    const double ratio_spread =
        spread + (r.vs_eager_paired || base == baseline_ms_flops.end() ? 0 : base->second.spread);
    // Below the FLOP model's floor: at eager's kernel rate the row cannot
    // take less than its FLOPs' share of eager's time, and recomputation
    // does not make kernels much faster (kFlopFloorAllowance). A ratio below
    // it means the eager runs were slowed and the row's were not.
    int64_t eager_flops = r.eager_flops;
    if (eager_flops == 0 && base != baseline_ms_flops.end()) eager_flops = base->second.flops;
    if (eager_flops > 0 && r.total_flops() > 0) {
      r.flop_floor = static_cast<double>(r.total_flops()) / static_cast<double>(eager_flops);
      if (!key) r.flop_floor = std::min(*r.flop_floor, 1.0);
      // The floor holds for the time in kernels' arithmetic: an engine
      // with less overhead than eager's may take less time than eager's
      // FLOPs alone allow, so the floor is scaled by the kernel share of
      // eager's time over the row's. On the matmul problems that is a few
      // percent (eager's 5% outside kernels on scan_stack against planned's
      // 0.3%: planned/as-written at 1.16-1.22 x eager was flagged under the
      // unscaled floor of 1.34). Where time does not follow FLOPs (the
      // scalar chains are mostly engine overhead) and kernels are a small
      // share of either (kMinKernelShareForFloor), there is no floor: a
      // kernel of tens of ns takes what the caches the engine leaves allow
      // (planned's scalar sin measured 13 ns a call against eager's 16),
      // not what its FLOPs do.
      const std::optional<double> eager_overhead =
          base != baseline_ms_flops.end() ? base->second.overhead : std::nullopt;
      if (eager_overhead && r.overhead_fraction) {
        const double eager_share = 1 - *eager_overhead;
        const double row_share = 1 - *r.overhead_fraction;
        if (!key &&
            (eager_share < kMinKernelShareForFloor || row_share < kMinKernelShareForFloor)) {
          r.flop_floor.reset();
        } else if (row_share > 0) {
          *r.flop_floor *= std::min(1.0, eager_share / row_share);
        }
      }
    }
    const std::optional<double> ratio = r.vs_eager_paired ? r.vs_eager_paired : r.vs_eager;
    char text[160];
    // A neighbour took a CPU from (nearly) every sample: even the least time
    // is a disturbed one.
    if (!r.quiet) {
      r.noise = StrCat("too few quiet samples (", r.quiet_samples, " of ", r.samples,
                       "): a neighbour kept a CPU busy");
    }
    auto add_noise = [&r](const std::string& why) {
      r.noise = r.noise.empty() ? why : r.noise + "; " + why;
    };
    if (r.flop_floor && ratio &&
        *ratio < *r.flop_floor * (1 - kFlopFloorAllowance - ratio_spread)) {
      std::snprintf(text, sizeof text, "x eager %.2f below the FLOP floor %.2f", *ratio,
                    *r.flop_floor);
      add_noise(text);
    }
    // Windows that disagree: the row's number depends on when it was taken.
    if (r.window_values.size() >= 2) {
      const auto [lo, hi] = std::minmax_element(r.window_values.begin(), r.window_values.end());
      if (*lo > 0 && *hi / *lo - 1 > kWindowAllowance) {
        std::string values;
        for (double v : r.window_values) {
          std::snprintf(text, sizeof text, "%s%.3f", values.empty() ? "" : ", ", v);
          values += text;
        }
        std::snprintf(text, sizeof text, " (%.1f%% apart)", 100 * (*hi / *lo - 1));
        add_noise(StrCat("its windows disagree: x eager ", values, text));
      }
    }
    // Above the matmul bound: oneDNN's matmuls alone, on operands already in
    // cache, are the fastest this work can run; a row past them was timed
    // while the bound's runs were slowed.
    if (!key) continue;
    auto ceiling = bound_gflops_spread.find(*key);
    if (ceiling == bound_gflops_spread.end()) continue;
    r.of_matmul_bound = r.gflops / ceiling->second.gflops;
    // A bound a neighbour slowed is no ceiling: nothing is held against it.
    if (ceiling->second.quiet &&
        *r.of_matmul_bound > 1 + kBoundAllowance + spread + ceiling->second.spread) {
      std::snprintf(text, sizeof text, "%.1f GFLOP/s above the matmul bound's %.1f", r.gflops,
                    ceiling->second.gflops);
      add_noise(text);
    }
  }
}

}  // namespace remat::bench
