#include "harness/bench_lib.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/registry.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/schedule/schedule.h"
#include "harness/stats_json.h"

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
  if (piece == kAsWritten || piece.rfind(kSchedulePrefix, 0) == 0) return true;
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

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") + 1 - begin);
}

// The first line of /proc/<file> that starts with `key`, after its ':'.
std::string ProcField(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return Trim(line.substr(colon + 1));
    }
  }
  return "";
}

// "0.00423", "1.23", "12.3", "123": three significant digits, no exponent.
std::string FormatMs(double ms) {
  char buf[32];
  if (ms >= 100) {
    std::snprintf(buf, sizeof buf, "%.0f", ms);
  } else if (ms >= 10) {
    std::snprintf(buf, sizeof buf, "%.1f", ms);
  } else if (ms >= 1) {
    std::snprintf(buf, sizeof buf, "%.2f", ms);
  } else {
    std::snprintf(buf, sizeof buf, "%#.3g", ms);  // keeps trailing zeros: "0.0740"
  }
  return buf;
}

// FLOP counts in SI units: "0", "209", "1.2 k", "6.71 G".
std::string FormatFlops(int64_t flops) {
  const char* units[] = {"", " k", " M", " G", " T"};
  double v = static_cast<double>(flops);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.3g%s", v, units[u]);
  return buf;
}

std::string ShellQuote(const std::string& arg) {
  const bool safe = !arg.empty() && arg.find_first_not_of(
                                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_@%+=:,./-") == std::string::npos;
  if (safe) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Variant(const PlannedRow& row) {
  if (row.kind == RowKind::kMatMulBound || IgnoresPolicies(row.engine)) return row.engine;
  return row.engine + "/" + row.policy;
}

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

}  // namespace

bool IgnoresPolicies(const std::string& engine) {
  // Both run every region inline (the reference is the eager reverse mode on
  // float64); a row per policy would measure the same thing four times. So
  // does any registered engine that says it does not honour checkpoints
  // (dtr decides what to keep as it runs); a name not registered (yet) gets
  // every policy.
  if (engine == kBaselineEngine || engine == kOracleEngine) return true;
  static std::map<std::string, bool>* const inline_engines = new std::map<std::string, bool>();
  auto it = inline_engines->find(engine);
  if (it == inline_engines->end()) {
    bool ignores = false;
    try {
      ignores = !MakeEngine(engine)->honours_checkpoints();
    } catch (const Error&) {
      // Not registered: nothing says it ignores them.
    }
    it = inline_engines->emplace(engine, ignores).first;
  }
  return it->second;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

BenchFlags ParseBenchFlags(const std::vector<std::string>& args, std::vector<std::string>* rest) {
  BenchFlags flags;
  flags.policies = SplitPolicies(kDefaultPolicies);
  flags.max_memory_bytes = DefaultMaxMemoryBytes();
  bool policies_given = false;
  rest->clear();
  if (!args.empty()) rest->push_back(args[0]);
  const std::vector<std::string> ours = {"engines", "policies", "problems", "sweep", "out",
                                         "max-memory"};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      rest->push_back("--help");
      continue;
    }
    if (arg == "--peer") {
      flags.peer = true;
      continue;
    }
    if (arg == "--paired") {
      flags.paired = true;
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
    } else if (name == "out") {
      flags.out_dir = value;
    } else if (name == "max-memory") {
      try {
        flags.max_memory_bytes = ParseBytes(value);
      } catch (const Error& e) {
        throw Error(StrCat("--max-memory=", value, ": ", e.what()));
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
      } else if (value == "none" || value.empty()) {
        flags.sweep = Sweep::kNone;
      } else {
        throw Error(StrCat("--sweep=", value,
                           ": unknown sweep; sweeps: depth, width, transformer, schedules, scale"));
      }
    }
  }
  if (policies_given && (flags.sweep == Sweep::kSchedules || flags.sweep == Sweep::kScale)) {
    throw Error(StrCat("--policies and --sweep=",
                       flags.sweep == Sweep::kSchedules ? "schedules" : "scale",
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
      kOracleEngine,
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
      "  --out=DIR         where the JSON goes (default: results/ of the workspace under\n"
      "                    `bazel run`, else the current directory)\n"
      "  --max-memory=B    refuse a row whose predicted peak exceeds B bytes (4GiB,\n"
      "                    512MiB, 0 for no limit) before it allocates; the row reports\n"
      "                    the error (default: 80% of physical memory)\n"
      "  --peer            also run tools/peer_pytorch.py (PyTorch, if installed) on every\n"
      "                    scan_stack size of the run, and add its rows\n"
      "  --paired          time every row against an eager run interleaved with its own\n"
      "                    (alternating which goes first): x eager is then the median of\n"
      "                    the per-pair ratios, which a noisy neighbour moves far less;\n"
      "                    rows take about twice as long\n"
      "\n"
      "Google Benchmark's flags work as usual, e.g. --benchmark_filter=scan_stack,\n"
      "--benchmark_min_time=0.1, --benchmark_repetitions=3, --benchmark_out=FILE.\n"
      "A row slower than --benchmark_min_time (0.5 s) is timed once: on a shared\n"
      "machine, --benchmark_repetitions=3 gives a mean that one stall cannot own.\n");
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
  // with depth (linearly, or as log D for sin_recursive). The whole default
  // run with eager and recompute took about a minute on a 2-core Xeon
  // (scan_stack L=128 is a third of it), leaving room for more engines
  // within three minutes; --sweep goes further.
  static const std::map<std::string, std::vector<std::map<std::string, int64_t>>> kSizes = {
      {"scan_stack", {{}, {{"L", 32}}, {{"L", 128}}}},
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
  } else if (sweep == Sweep::kWidth) {
    const Problem& p = FindProblem("layer_loss");
    for (int64_t d = 128; d <= 2048; d *= 2) out.push_back(ResolveParams(p, {{"d", d}, {"N", 256}}));
  }
  return out;
}

std::vector<std::string> SweepPolicies(Sweep sweep, const ParamValues& size) {
  std::vector<std::string> out;
  if (sweep == Sweep::kScale) return SplitPolicies(kScalePolicies);
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
  if (engines.empty()) {
    for (const std::string& e : registered_engines) {
      if (e != kOracleEngine) engines.push_back(e);
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
    if (p != kAsWritten && !IsSchedule(p)) Policy::Parse(p);
    if (std::find(policies.begin(), policies.end(), p) == policies.end()) policies.push_back(p);
  }

  // Problems and their sizes.
  std::vector<std::pair<const Problem*, std::vector<ParamValues>>> cases;
  if (flags.sweep != Sweep::kNone) {
    if (!flags.problems.empty()) {
      throw Error("--problems and --sweep do not combine: a sweep picks its problem");
    }
    const char* problem = flags.sweep == Sweep::kTransformer ? "transformer_stack"
                          : flags.sweep == Sweep::kWidth     ? "layer_loss"
                                                             : "scan_stack";
    cases.emplace_back(&FindProblem(problem), SweepSizes(flags.sweep));
  } else if (flags.problems.empty()) {
    for (const auto& p : AllProblems()) cases.emplace_back(p.get(), DefaultBenchSizes(*p));
  } else {
    for (const std::string& name : flags.problems) {
      const Problem& p = FindProblem(name);
      cases.emplace_back(&p, DefaultBenchSizes(p));
    }
  }

  std::vector<PlannedRow> bounds, rows;
  std::set<std::string> bound_keys;
  for (const auto& [problem, sizes] : cases) {
    // Schedules reverse scans and chains of blocks: their rows go to problems
    // that have one (ApplySchedule says which).
    const Program program = problem->Build(sizes.front());
    bool schedulable = true;
    try {
      ApplySchedule(program, "sqrt");
    } catch (const Error&) {
      schedulable = false;
    }
    for (const ParamValues& size : sizes) {
      const OrderedParams params = OrderParams(*problem, size);
      const std::string formatted = FormatOrderedParams(params);
      const std::string case_key =
          formatted.empty() ? problem->name() : problem->name() + "/" + formatted;
      std::vector<std::string> size_policies = SweepPolicies(flags.sweep, size);
      if (size_policies.empty()) size_policies = policies;
      for (const std::string& engine : engines) {
        std::vector<std::string> engine_policies = size_policies;
        if (IgnoresPolicies(engine)) engine_policies = {kAsWritten};
        for (const std::string& policy : engine_policies) {
          if (IsSchedule(policy) && !schedulable) continue;
          PlannedRow row;
          row.problem = problem->name();
          row.params = params;
          row.engine = engine;
          row.policy = policy;
          row.case_key = case_key;
          row.big = flags.sweep == Sweep::kScale;
          row.name = StrCat("BM_ValueAndGrad/", case_key, "/", engine, "/", policy);
          rows.push_back(row);
        }
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
  std::map<std::string, double> baseline_ms, bound_gflops;
  for (const RowResult& r : *rows) {
    if (!r.error.empty() || r.real_time_ms <= 0) continue;
    if (r.row.kind == RowKind::kValueAndGrad && r.row.engine == kBaselineEngine) {
      baseline_ms.emplace(r.row.case_key, r.real_time_ms);
    }
    if (r.row.kind == RowKind::kMatMulBound && r.gflops > 0) {
      if (auto key = BoundKey(r.row.params)) bound_gflops.emplace(*key, r.gflops);
    }
  }
  for (RowResult& r : *rows) {
    r.vs_eager.reset();
    r.of_matmul_bound.reset();
    if (!r.error.empty() || r.row.kind != RowKind::kValueAndGrad) continue;
    auto base = baseline_ms.find(r.row.case_key);
    if (base != baseline_ms.end()) r.vs_eager = r.real_time_ms / base->second;
    if (auto key = BoundKey(r.row.params)) {
      auto bound = bound_gflops.find(*key);
      if (bound != bound_gflops.end()) r.of_matmul_bound = r.gflops / bound->second;
    }
  }
}

nlohmann::json MachineInfo() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  cpu_set_t set;
  CPU_ZERO(&set);
  int64_t cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  const std::string mem_kib = ProcField("/proc/meminfo", "MemTotal");  // "23456789 kB"
  int64_t memory_bytes = 0;
  if (!mem_kib.empty()) memory_bytes = std::strtoll(mem_kib.c_str(), nullptr, 10) * 1024;
  const char* omp = std::getenv("OMP_NUM_THREADS");
  // Spinning OpenMP threads on a shared 2-core machine make timings erratic.
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::string cpu = ProcField("/proc/cpuinfo", "model name");
  return {{"hostname", host},
          {"cores", cores},
          {"cpu", cpu.empty() ? "unknown" : cpu},
          {"memory_bytes", memory_bytes},
          {"omp_num_threads", omp ? omp : "unset"},
          {"omp_wait_policy", wait_policy ? wait_policy : "unset"},
          {"gomp_spincount", std::getenv("GOMP_SPINCOUNT") ? std::getenv("GOMP_SPINCOUNT") : "unset"},
          {"onednn", OneDnnVersion()}};
}

std::string CommandLine(const std::vector<std::string>& args) {
  std::string out = "tools/bazel run //harness:bench";
  if (args.size() > 1) {
    out += " --";
    for (size_t i = 1; i < args.size(); ++i) out += " " + ShellQuote(args[i]);
  }
  return out;
}

std::string UtcDate(std::time_t when) {
  std::tm tm{};
  gmtime_r(&when, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string UtcStamp(std::time_t when) {
  std::tm tm{};
  gmtime_r(&when, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

nlohmann::json ResultsJson(const std::string& command, const nlohmann::json& machine,
                           const std::string& date, const std::vector<RowResult>& rows) {
  nlohmann::json out_rows = nlohmann::json::array();
  for (const RowResult& r : rows) {
    nlohmann::json params = nlohmann::json::object();
    for (const auto& [name, value] : r.row.params) params[name] = value;
    nlohmann::json by_category = nlohmann::json::object();
    for (int c = 0; c < kNumCategories; ++c) {
      by_category[CategoryName(static_cast<Category>(c))] = r.peak_bytes_by_category[c];
    }
    nlohmann::json row = {{"name", r.row.name},
                          {"problem", r.row.problem},
                          {"params", params},
                          {"engine", r.row.engine},
                          {"policy", r.row.policy},
                          {"iterations", r.iterations},
                          {"real_time_ms", r.real_time_ms},
                          {"mean_time_ms", r.mean_time_ms},
                          {"peak_bytes", r.peak_bytes},
                          {"peak_bytes_by_category", by_category},
                          {"max_bytes_used", r.max_bytes_used},
                          {"predicted_peak_bytes", r.predicted_peak_bytes},
                          {"residual_bytes", r.residual_bytes},
                          {"flops_forward", r.flops_forward},
                          {"flops_recomputed", r.flops_recomputed},
                          {"flops_backward", r.flops_backward},
                          {"gflops", r.gflops},
                          {"vs_eager", nullptr}};
    if (r.vs_eager) row["vs_eager"] = *r.vs_eager;
    if (r.vs_eager_paired) row["vs_eager_paired"] = *r.vs_eager_paired;
    if (r.of_matmul_bound) row["of_matmul_bound"] = *r.of_matmul_bound;
    if (r.overhead_fraction) row["overhead_fraction"] = *r.overhead_fraction;
    if (r.row.big) row["big"] = true;
    if (!r.error.empty()) row["error"] = r.error;
    out_rows.push_back(row);
  }
  return {{"command", command}, {"machine", machine}, {"date", date}, {"rows", out_rows}};
}

std::string FormatSummary(const std::vector<RowResult>& rows) {
  using Line = std::vector<std::string>;
  std::vector<Line> lines = {
      {"problem / size", "engine / policy", "time ms", "x eager", "peak", "activations",
       "residual", "recomputed FLOP", "overhead"}};
  std::string last_case;
  for (const RowResult& r : rows) {
    if (r.row.kind != RowKind::kValueAndGrad) continue;
    std::string label = r.row.case_key == last_case ? "" : r.row.case_key;
    last_case = r.row.case_key;
    std::replace(label.begin(), label.end(), '/', ' ');
    if (!r.error.empty()) {
      lines.push_back({label, Variant(r.row), "failed: " + r.error});
      continue;
    }
    char ratio[32] = "-";
    if (r.vs_eager_paired) {
      std::snprintf(ratio, sizeof ratio, "%.2f p", *r.vs_eager_paired);
    } else if (r.vs_eager) {
      std::snprintf(ratio, sizeof ratio, "%.2f", *r.vs_eager);
    }
    char overhead[32] = "-";
    if (r.overhead_fraction) std::snprintf(overhead, sizeof overhead, "%.1f%%", 100 * *r.overhead_fraction);
    lines.push_back({label, Variant(r.row), FormatMs(r.real_time_ms), ratio,
                     FormatBytes(r.peak_bytes),
                     FormatBytes(r.peak_bytes_by_category[static_cast<int>(Category::kActivations)]),
                     FormatBytes(r.residual_bytes),
                     FormatFlops(r.flops_recomputed), overhead});
  }
  // Column widths from the content; text columns left-aligned, numbers right.
  std::vector<size_t> width(lines[0].size(), 0);
  for (const Line& line : lines) {
    // A failed row's message spans the number columns: it sets no width there.
    const size_t columns = line.size() == width.size() ? line.size() : 2;
    for (size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], line[c].size());
  }
  std::ostringstream out;
  out << "\nSummary: median time of one value_and_grad; x eager = time / eager's on the same "
         "problem and size;\npeak = the MemoryTracker's high-water mark, activations = the "
         "activations live at that moment\n(the rest: arguments, gradients, scratchpad); "
         "residual = saved for the backward pass (arguments excluded);\n"
         "overhead = the engine's time outside kernel calls; 'p': x eager paired with "
         "interleaved eager runs (--paired).\n\n";
  for (const Line& line : lines) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      std::string cell = line[c];
      if (c < 2) {
        if (c + 1 < line.size()) cell.resize(std::max(width[c], cell.size()), ' ');
      } else if (line.size() == width.size()) {
        cell = std::string(width[c] - cell.size(), ' ') + cell;
      }
      text += (c == 0 ? "" : "  ") + cell;
    }
    out << text << "\n";
  }
  // The ceiling: how close the baseline gets to oneDNN's bare matmul.
  for (const RowResult& bound : rows) {
    if (bound.row.kind != RowKind::kMatMulBound) continue;
    const std::string key = FormatOrderedParams(bound.row.params);
    if (!bound.error.empty()) {
      out << "\noneDNN matmul bound (" << key << "): failed: " << bound.error << "\n";
      continue;
    }
    char gflops[32];
    std::snprintf(gflops, sizeof gflops, "%.1f", bound.gflops);
    out << "\noneDNN matmul alone, " << key
        << " (a dense layer's x w, dy w^T, x^T dy): " << FormatMs(bound.real_time_ms) << " ms, "
        << gflops << " GFLOP/s (the ceiling)\n";
    for (const RowResult& r : rows) {
      if (r.row.engine != kBaselineEngine || !r.of_matmul_bound) continue;
      if (BoundKey(r.row.params) != BoundKey(bound.row.params)) continue;
      char pct[96];
      std::snprintf(pct, sizeof pct, "%.1f GFLOP/s = %.0f%% of the bound", r.gflops,
                    100 * *r.of_matmul_bound);
      out << "  " << kBaselineEngine << " on " << r.row.case_key << ": " << pct << "\n";
    }
  }
  return out.str();
}

std::string ResultsDir(const std::string& out_flag) {
  if (!out_flag.empty()) return out_flag;
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace && *workspace) return (std::filesystem::path(workspace) / "results").string();
  return ".";
}

std::vector<std::string> WriteResults(const std::string& dir, const std::string& stamp,
                                      const nlohmann::json& run) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(StrCat("cannot create ", dir, ": ", ec.message()));
  const std::string text = run.dump(2) + "\n";
  std::vector<std::string> written;
  for (const std::string& file : {"bench-" + stamp + ".json", std::string("latest.json")}) {
    const std::filesystem::path path = std::filesystem::path(dir) / file;
    // Written whole, then renamed: a reader never sees half a file.
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp);
      out << text;
      if (!out.flush()) throw Error(StrCat("cannot write ", tmp.string()));
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw Error(StrCat("cannot rename ", tmp.string(), " to ", path.string(), ": ",
                               ec.message()));
    written.push_back(path.string());
  }
  return written;
}

}  // namespace remat::bench
