#include "tools/remat_cli.h"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/program_text.h"
#include "engines/budget/budget_solver.h"
#include "engines/budget/peak_budget.h"
#include "engines/api/registry.h"
#include "engines/onednn/platform.h"
#include "harness/case_directory.h"
#include "harness/case_spec.h"
#include "harness/case_text.h"
#include "harness/conformance.h"
#include "harness/memory_caps.h"
#include "harness/cpu_link.h"
#include "harness/run_delay.h"
#include "harness/stats_json.h"
#include "engines/schedule/schedule.h"
#include "problems/problem.h"
#include "problems/program_file.h"
#include "tools/conform.h"
#include "engines/api/npy.h"

namespace remat {
namespace {

// memory_budget regions' plans, as `remat run` prints them. A program under
// memory_budget:peak:... is resolved first (engines/budget/peak_budget.h) by
// dry runs of `engine`, as the engine's own run resolves it: one line for the
// resolution, then the plan of each region at the fraction chosen.
std::vector<std::string> BudgetLines(Engine& engine, const Program& program,
                                     const std::vector<int>& wrt) {
  const int64_t dtype_bytes = DTypeSize(engine.dtype());
  if (!HasPeakBudget(program)) return DescribeBudgetPlans(program, wrt, dtype_bytes);
  const PeakBudgetResolution r =
      ResolvePeakBudget(program, wrt, dtype_bytes, [&](const Program& p) {
        RunOptions dry;
        dry.plan_only = true;
        return engine.ValueAndGrad(p, ShapeOnlyArguments(p), wrt, dry).stats;
      });
  std::vector<std::string> out = {DescribePeakResolution(r)};
  for (const std::string& line : DescribeBudgetPlans(r.program, wrt, dtype_bytes)) {
    out.push_back(line);
  }
  return out;
}


namespace po = boost::program_options;

constexpr char kUsage[] =
    "usage: remat COMMAND [options]\n"
    "commands:\n"
    "  list        problems (with parameters and defaults), engines, policies\n"
    "  run         value and gradients of a problem on an engine, with peak memory and time\n"
    "  residuals   what an engine saves between forward and backward\n"
    "  schedule    the forward and backward computation as run, recomputation marked\n"
    "  plan        the decisions the engine made before running (regions, saves, schedules)\n"
    "  program     the program of a problem as text (remat run --program reads it back)\n"
    "  compare     two results JSON files side by side (remat compare A.json B.json)\n"
    "  conform     an engine outside remat (a command) against the float64 oracle\n"
    "`remat COMMAND --help` lists a command's options.\n";


// The engine `run` uses unless told: the store-everything baseline.
constexpr char kRunEngine[] = "eager";
// The engine the listing commands (residuals, schedule) use unless told: one
// that honours checkpoint regions and schedules, as
// jax.ad_checkpoint.print_saved_residuals does.
constexpr char kListingEngine[] = "recompute";

// Options every problem-running command shares.
struct CaseOptions {
  std::string problem;
  std::string program_file;
  std::string engine;
  std::vector<std::string> params;
  std::vector<std::string> wrt;
  uint64_t seed = 1;
  std::string inputs_dir;
  std::string max_memory;
  std::string memory_cap;
  std::string policy;
  std::string schedule;
  std::string case_line;  // --case: the case's text form (harness/case_text.h)
};

// --case LINE: the case in its one text form (the bench's case lists, the
// sweep's), read into the options it stands for. It holds the problem or
// program, size, engine, variant and wrt, so it does not combine with the
// options that give them; its engine replaces --engine's default.
void ApplyCaseLine(CaseOptions* o) {
  if (o->case_line.empty()) return;
  if (!o->problem.empty() || !o->program_file.empty() || !o->params.empty() || !o->wrt.empty() ||
      !o->policy.empty() || !o->schedule.empty() || !o->memory_cap.empty() || !o->inputs_dir.empty()) {
    throw po::error(
        "--case holds the case: it does not combine with --problem, --program, --param, --wrt, "
        "--policy, --schedule, --memory-cap or --inputs");
  }
  const CaseSpec spec = ParseCase(o->case_line);
  (spec.program_file.empty() ? o->problem : o->program_file) =
      spec.program_file.empty() ? spec.problem : spec.program_file;
  for (const auto& [name, value] : spec.params) o->params.push_back(StrCat(name, "=", value));
  if (!spec.engine.empty()) o->engine = spec.engine;
  o->wrt = spec.wrt;
  o->inputs_dir = spec.inputs_dir;
  switch (spec.variant.kind()) {
    case CaseVariant::Kind::kAsWritten:
      break;
    case CaseVariant::Kind::kPolicy:
      o->policy = spec.variant.spec();
      break;
    case CaseVariant::Kind::kSchedule:
      o->schedule = spec.variant.spec();
      break;
    case CaseVariant::Kind::kMemoryCap:
      o->memory_cap = spec.variant.spec();
      break;
    case CaseVariant::Kind::kBudgetUnderCap:
      throw Error(StrCat("--case: variant=", spec.variant.Label(),
                         " is the bench's (a search over budgets beside a cap); remat runs "
                         "variant=schedule:budget:B or variant=cap:C"));
  }
}

void AddCaseOptions(po::options_description* d, CaseOptions* o, const std::string& engine) {
  d->add_options()("problem", po::value(&o->problem), "problem name (remat list)")(
      "program", po::value(&o->program_file),
      "FILE: run a program file (the text remat program prints; engines/api/program_text.h) "
      "instead of a problem; its gradients default to every input")(
      "engine", po::value(&o->engine)->default_value(engine), "engine name (remat list)")(
      "param", po::value(&o->params)->composing(), "NAME=VALUE, repeatable: a problem parameter")(
      "wrt", po::value(&o->wrt)->composing(),
      "NAME[,NAME...] or all: the inputs to differentiate, in that order (as jax.grad's "
      "argnums); NAME* names every input starting with NAME; default: the problem's (remat "
      "list)")(
      "seed", po::value(&o->seed)->default_value(1), "seed of the generated inputs")(
      "inputs", po::value(&o->inputs_dir),
      "read inputs from DIR/<input name>.npy instead of generating them (every input needs its "
      "file; another .npy there, other than the loss.npy, grad_*.npy and state_*.npy --dump writes, is an "
      "error)")(
      "max-memory", po::value(&o->max_memory),
      "fail before allocating past this many bytes (e.g. 4GiB, 0 for none); default: 80% of "
      "physical memory")(
      "memory-cap", po::value(&o->memory_cap),
      "BYTES (e.g. 64MiB) or FRACx (e.g. 0.5x: that fraction of eager's peak on the same case): "
      "a cap the engine stays under by evicting values and recomputing them (engines that "
      "honour a cap: dtr, dtr_eq); 0 for none")(
      "policy", po::value(&o->policy),
      "NAME[:label,...]: set every checkpoint region's policy, or wrap the whole problem in "
      "one region with it (jax.checkpoint(f, policy=...)); remat list shows the names")(
      "schedule", po::value(&o->schedule),
      "reverse every scan, and every chain of checkpointed blocks, under a schedule: every:K, "
      "segments:K, sqrt, bisect, revolve:C, budget:BYTES, checkpoint_every:K (the schedule "
      "then decides what is kept: the checkpoints inside a scan's body or a block are inlined)")(
      "case", po::value(&o->case_line),
      "LINE: the whole case in its text form, as the bench's case lists write it "
      "('problem=layer_loss size=d=512,N=256 engine=recompute variant=schedule:sqrt'; "
      "harness/case_text.h), instead of --problem, --param, --engine, --policy, ...");
}

// The problem --problem names, or the program file --program reads (then
// owned by `*owned`). Exactly one of the two is given.
const Problem& ResolveProblem(const CaseOptions& o, std::shared_ptr<const Problem>* owned) {
  if (o.problem.empty() == o.program_file.empty()) {
    throw po::error(o.problem.empty()
                        ? "the option '--problem' or '--program' is required"
                        : "give --problem NAME or --program FILE, not both");
  }
  if (o.problem.empty()) {
    *owned = ProgramFileProblem::Read(o.program_file);
    return **owned;
  }
  return FindProblem(o.problem);
}

Case LoadCase(const CaseOptions& o, std::ostream& err) {
  std::shared_ptr<const Problem> owned;
  const Problem& problem = ResolveProblem(o, &owned);
  Case c = MakeCase(problem, ResolveParams(problem, ParseParamFlags(o.params)), o.seed);
  c.owner = std::move(owned);
  c.wrt = WrtFromFlags(o.wrt, c.program, c.wrt);
  if (!o.policy.empty()) {
    c.program = ApplyPolicy(c.program, Policy::Parse(o.policy));
    for (const std::string& w : PolicyWarnings(c.program)) err << "remat: " << w << "\n";
  }
  if (!o.schedule.empty()) c.program = ApplySchedule(c.program, o.schedule);
  if (!o.inputs_dir.empty()) {
    if (!std::filesystem::is_directory(o.inputs_dir)) {
      throw Error(StrCat("--inputs ", o.inputs_dir, ": not a directory"));
    }
    ReadCaseInputs(o.inputs_dir, &c);
  }
  return c;
}

RunOptions MakeRunOptions(const CaseOptions& o) {
  RunOptions r;
  // A run that would not fit is refused before it allocates, rather than
  // found by the OOM killer.
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  r.max_memory_bytes = o.max_memory.empty() ? physical / 5 * 4 : ParseBytes(o.max_memory);
  return r;
}

// Parses `args` into `desc`; returns false (after printing help) for --help.
bool Parse(const std::vector<std::string>& args, po::options_description& desc,
           std::ostream& out) {
  desc.add_options()("help", "this help");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).run(), vm);
  if (vm.count("help")) {
    out << desc;
    return false;
  }
  po::notify(vm);
  return true;
}

double Norm(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) s += t.at(i) * t.at(i);
  return std::sqrt(s);
}

// Where the timed run's time went (Stats::kernel_times): the kernels by
// their share of the run's total, the largest first, the smallest past
// kMaxKernelsShown summed, then the time outside kernels. Empty when the
// engine does not break its kernels' time down.
std::string KernelBreakdown(const Stats& s) {
  constexpr size_t kMaxKernelsShown = 8;
  const double total = s.seconds_total();
  if (s.kernel_times.empty() || !(total > 0)) return "";
  const auto kernels = LargestFirst(s.kernel_times);
  std::ostringstream line;
  line << std::fixed << std::setprecision(1);
  line << "of the timed run's " << std::setprecision(3) << total * 1e3 << " ms: "
       << std::setprecision(1);
  for (size_t i = 0; i < kernels.size() && i < kMaxKernelsShown; ++i) {
    const auto& [name, t] = kernels[i];
    line << (i ? ", " : "") << name << " " << 100 * t.seconds / total << "% (" << t.calls
         << (t.calls == 1 ? " call)" : " calls)");
  }
  if (kernels.size() > kMaxKernelsShown) {
    double rest = 0;
    for (size_t i = kMaxKernelsShown; i < kernels.size(); ++i) rest += kernels[i].second.seconds;
    line << ", " << kernels.size() - kMaxKernelsShown << " other kernels " << 100 * rest / total
         << "%";
  }
  line << "; outside kernels " << 100 * std::max(0.0, total - s.seconds_in_kernels) / total
       << "% (the engine's own work: dispatch, allocation, copies)";
  return line.str();
}

int List(std::ostream& out) {
  out << "problems:\n";
  for (const auto& p : AllProblems()) {
    out << "  " << std::left << std::setw(14) << p->name() << " " << p->description() << "\n";
    for (const ParamSpec& s : p->params()) {
      out << "      --param " << s.name << "=N   " << s.help << " (default " << s.default_value
          << ", tests " << s.test_value << ")\n";
    }
    // Traced only (no inputs are made): cheap at any size.
    const Program program = p->Build(ResolveParams(*p, {}));
    out << "      inputs " << Join(program.param_names, ", ") << "; gradients (--wrt) by default "
        << Join(p->wrt(), ", ") << "\n";
  }
  out << "engines:\n";
  for (const EngineInfo& e : RegisteredEngines()) {
    out << "  " << std::left << std::setw(14) << e.name << " " << e.description << "\n";
  }
  out << "policies (--policy):\n";
  for (const std::string& name : Policy::Names()) out << "  " << name << "\n";
  out << "schedules (--schedule, for scans and chains of checkpointed blocks):\n";
  for (const std::string& form : ScheduleForms()) out << "  " << form << "\n";
  out << "  checkpoint_every:K (PyTorch's: checkpoint one block in K, store the others)\n";
  return 0;
}

// What every output carrying measured numbers records of where they were
// measured: the platform, and the matmul implementations this process ran.
void AddPlatform(nlohmann::json* j) {
  (*j)["platform"] = PlatformToJson(DescribePlatform());
  (*j)["matmul_impls"] = OneDnnMatMulImplsSeen();
}

std::vector<std::string> WrtNames(const Case& c) {
  std::vector<std::string> names;
  for (int w : c.wrt) names.push_back(c.program.param_names[w]);
  return names;
}

// stats.json: the timed run's Stats, and what they depend on.
nlohmann::json StatsFileJson(const Case& c, const Result& r, const Stats& first_run) {
  nlohmann::json j = StatsToJson(r.stats);
  j["wrt"] = WrtNames(c);
  j["first_run_seconds"] = first_run.seconds_total();
  j["first_run_peak_bytes"] = first_run.peak_bytes;
  AddPlatform(&j);
  return j;
}

void Dump(const std::string& dir, const Case& c, const Result& r, const Stats& first_run) {
  std::filesystem::create_directories(dir);
  auto path = [&](const std::string& file) { return (std::filesystem::path(dir) / file).string(); };
  WriteNpy(path("loss.npy"), r.value);
  for (size_t j = 0; j < c.wrt.size(); ++j) {
    WriteNpy(path("grad_" + c.program.param_names[c.wrt[j]] + ".npy"), r.grads[j]);
  }
  for (const auto& [name, t] : r.state) WriteNpy(path("state_" + name + ".npy"), t);
  for (int i = 0; i < c.program.num_params(); ++i) {
    WriteNpy(path(c.program.param_names[i] + ".npy"), c.inputs[i]);
  }
  std::ofstream json(path("stats.json"));
  json << StatsFileJson(c, r, first_run).dump(2) << "\n";
  if (!json) throw Error(StrCat(path("stats.json"), ": cannot write"));
}

int Run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CaseOptions o;
  std::string dump_dir;
  bool json = false;
  po::options_description desc("remat run: value and gradients of a problem on an engine");
  AddCaseOptions(&desc, &o, kRunEngine);
  desc.add_options()("dump", po::value(&dump_dir),
                     "write DIR/loss.npy, DIR/grad_<input>.npy, DIR/<input>.npy, DIR/stats.json")(
      "json", po::bool_switch(&json), "print one JSON object instead of the table");
  if (!Parse(args, desc, out)) return 0;
  ApplyCaseLine(&o);
  Case c = LoadCase(o, err);
  std::unique_ptr<Engine> engine = MakeEngine(o.engine);
  RunOptions options = MakeRunOptions(o);
  const ResolvedCap cap = ResolveMemoryCap(o.memory_cap, c.program, c.wrt, *engine);
  options.memory_cap_bytes = cap.bytes;
  // The first run pays for setup: oneDNN creates (JIT-compiles) its
  // primitives, the allocator first touches its pages. Its time is reported
  // apart and the second run is the one timed; its Result is dropped first,
  // so the two never hold memory at once.
  Stats first_run = engine->ValueAndGrad(c.program, c.inputs, c.wrt, options).stats;
  // How long the timed run's threads waited for a CPU (harness/run_delay.h):
  // a neighbour's share of its time, said next to the number.
  // And how far apart its CPUs were (harness/cpu_link.h), read right before
  // and after it: a virtual machine's CPUs move, and an engine's time with
  // them.
  const std::optional<double> link_before = CpuLinkRoundTripNs();
  const int64_t delay_before = ProcessRunDelayNs();
  const auto timed_start = std::chrono::steady_clock::now();
  Result r = engine->ValueAndGrad(c.program, c.inputs, c.wrt, options);
  const std::optional<double> run_delay = RunDelayShare(
      delay_before, ProcessRunDelayNs(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - timed_start).count());
  const std::optional<double> link_after = CpuLinkRoundTripNs();
  if (first_run.peak_bytes != r.stats.peak_bytes) {
    // Never expected (the schedule and the kernels' scratchpads are the
    // same): said rather than hidden, since it would make peaks irreproducible.
    err << "remat: warning: the first run peaked at " << first_run.peak_bytes
        << " bytes, the timed run at " << r.stats.peak_bytes << "\n";
  }
  if (!dump_dir.empty()) Dump(dump_dir, c, r, first_run);
  const std::vector<std::string> names = WrtNames(c);
  if (json) {
    nlohmann::json j = {{"problem", c.problem->name()},
                        {"params", c.params},
                        {"engine", engine->name()},
                        {"dtype", DTypeName(engine->dtype())},
                        {"wrt", names},
                        {"loss", r.value.at(0)},
                        {"stats", StatsToJson(r.stats)},
                        {"first_run_seconds", first_run.seconds_total()},
                        {"first_run_peak_bytes", first_run.peak_bytes}};
    if (cap.bytes > 0) j["memory_cap_bytes"] = cap.bytes;
    // The timed run's threads' wait for a CPU, a share of its time
    // (harness/run_delay.h); null where the kernel does not say.
    j["run_delay"] = run_delay ? nlohmann::json(*run_delay) : nlohmann::json(nullptr);
    j["busy"] = run_delay && *run_delay > kQuietRunDelay;
    // The CPUs' round trip before and after the timed run, in ns (null: one
    // CPU).
    j["cpu_link_ns"] = {link_before ? nlohmann::json(*link_before) : nlohmann::json(nullptr),
                        link_after ? nlohmann::json(*link_after) : nlohmann::json(nullptr)};
    if (engine->honours_checkpoints()) {
      const std::vector<std::string> plans =
          BudgetLines(*engine, c.program, c.wrt);
      if (!plans.empty()) j["memory_budget_plans"] = plans;
    }
    j["grad_norms"] = nlohmann::json::object();
    for (size_t i = 0; i < r.grads.size(); ++i) j["grad_norms"][names[i]] = Norm(r.grads[i]);
    // The new state's norms (CONTRACT.md, state; --dump writes the tensors).
    if (!r.state.empty()) {
      j["state_norms"] = nlohmann::json::object();
      for (const auto& [name, t] : r.state) j["state_norms"][name] = Norm(t);
    }
    AddPlatform(&j);
    out << j.dump(2) << "\n";
    return 0;
  }
  const Stats& s = r.stats;
  out << std::setprecision(9);
  out << "problem     " << c.ToString() << "\n";
  out << "engine      " << engine->name() << " (" << DTypeName(engine->dtype()) << ")\n";
  out << "platform    " << FormatPlatform(DescribePlatform()) << "\n";
  const std::vector<std::string> impls = OneDnnMatMulImplsSeen();
  if (!impls.empty()) out << "matmuls     " << Join(impls, ", ") << " (as run)\n";
  out << "loss        " << r.value.at(0) << "\n";
  for (size_t i = 0; i < r.grads.size(); ++i) {
    out << "grad " << std::left << std::setw(7) << names[i] << " norm " << Norm(r.grads[i])
        << "\n";
  }
  for (const auto& [name, t] : r.state) out << "state " << name << " norm " << Norm(t) << "\n";
  out << "peak        " << FormatBytes(s.peak_bytes) << " (" << s.peak_bytes << " bytes) at "
      << s.peak_site << "\n";
  if (cap.bytes > 0) {
    out << "memory cap  " << FormatBytes(cap.bytes) << " (" << cap.bytes << " bytes"
        << (cap.how.empty() ? "" : ", " + cap.how) << "; peak is " << std::setprecision(3)
        << 100.0 * static_cast<double>(s.peak_bytes) / static_cast<double>(cap.bytes)
        << "% of it)" << std::setprecision(9) << "\n";
  }
  if (s.predicted_peak_bytes >= 0) {
    out << "predicted   " << s.predicted_peak_bytes << " bytes at " << s.predicted_peak_site
        << " (dry run of the schedule)\n";
  }
  if (s.host_peak_bytes > 0) out << "host tier   " << FormatBytes(s.host_peak_bytes) << " at peak\n";
  out << "  at peak  ";
  for (int cat = 0; cat < kNumCategories; ++cat) {
    out << " " << CategoryName(static_cast<Category>(cat)) << " " << s.peak_bytes_by_category[cat];
  }
  out << "\n";
  // Each category's own maximum: what a budget bounds (activations), and
  // unlike the line above, not moved by where a kernel's scratchpad puts the
  // total peak.
  out << "  high water";
  for (int cat = 0; cat < kNumCategories; ++cat) {
    out << " " << CategoryName(static_cast<Category>(cat)) << " "
        << s.high_water_bytes_by_category[cat];
  }
  out << "\n";
  out << "residuals   " << FormatBytes(s.residual_bytes) << " (" << s.residual_bytes
      << " bytes, arguments excluded; remat residuals --engine " << engine->name()
      << " lists them)\n";
  out << "flops       forward " << s.flops_forward << ", recomputed " << s.flops_recomputed
      << ", backward " << s.flops_backward << "\n";
  if (engine->honours_checkpoints()) {
    // memory_budget regions: what each keeps, and whether the solver proved
    // its plan optimal (engines/budget).
    for (const std::string& line :
         BudgetLines(*engine, c.program, c.wrt)) {
      out << "budget      " << line << "\n";
    }
  }
  out << std::fixed << std::setprecision(3);
  out << "time        forward " << s.seconds_forward * 1e3 << " ms, backward "
      << s.seconds_backward * 1e3 << " ms, total " << s.seconds_total() * 1e3
      << " ms (steady state: the second of two runs)\n";
  if (const std::string kernels = KernelBreakdown(s); !kernels.empty()) {
    out << "kernels     " << kernels << "\n";
  }
  if (run_delay) {
    out << "load        " << (*run_delay > kQuietRunDelay ? "BUSY: " : "quiet: ")
        << "the timed run's threads waited for a CPU " << std::setprecision(1)
        << 100 * *run_delay << "% of its time"
        << (*run_delay > kQuietRunDelay
                ? " (another process took a CPU: the time above is not the engine's alone; "
                  "rerun on a quiet machine)"
                : "")
        << "\n" << std::setprecision(3);
  }
  if (link_before && link_after) {
    out << "cpus        a cache line's round trip between the CPUs: " << std::setprecision(0)
        << *link_before << " ns before the timed run, " << *link_after
        << " ns after (a hypervisor moves a virtual machine's CPUs: where they share a cache "
           "it is some 50 ns, apart several times that, and the time above moves with it; "
           "see harness/cpu_link.h)\n"
        << std::setprecision(3);
  }
  out << "setup       first run " << first_run.seconds_total() * 1e3
      << " ms (oneDNN primitive creation, first touch of memory)\n";
  // An engine that compiles ahead (planned): the first run compiled, the
  // second reused its plan; compile time is in neither run's total.
  if (first_run.seconds_compile > 0 || s.seconds_compile > 0) {
    out << "compile     first run " << first_run.seconds_compile * 1e3 << " ms, second run "
        << s.seconds_compile * 1e3 << " ms (plans cached by program, shapes and wrt)\n";
  }
  if (s.arena_bytes >= 0) {
    out << "arena       " << FormatBytes(s.arena_bytes) << " (" << s.arena_bytes
        << " bytes: every buffer of the run at a planned offset)\n";
  }
  if (!dump_dir.empty()) out << "dumped to   " << dump_dir << "\n";
  return 0;
}

// Whether `program` asks for checkpointing: a checkpoint region, a chain of
// blocks or a scheduled scan, at any depth.
bool AsksForCheckpointing(const Program& program) {
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::kCheckpoint || op.kind == OpKind::kChain) return true;
    if (op.kind == OpKind::kScan && !op.schedule.empty()) return true;
    if (op.body && AsksForCheckpointing(*op.body)) return true;
  }
  return false;
}

// The rule: an engine whose honours_checkpoints() is false runs checkpoint
// regions inline and scans and chains unscheduled, so what it lists for a
// program that asks for checkpointing is not what the program asks for: the
// listing says so in its first line.
void WarnIfCheckpointsIgnored(const Engine& engine, const Program& program, std::ostream& out) {
  if (engine.honours_checkpoints() || !AsksForCheckpointing(program)) return;
  out << "note: " << engine.name() << " ignores the program's checkpoint regions: "
      << (engine.honours_memory_cap()
              ? "it decides what to keep as it runs, under --memory-cap (without one it saves "
                "everything)"
              : "it saves everything")
      << "; --engine " << kListingEngine << " honours them\n";
}

int Residuals(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CaseOptions o;
  po::options_description desc(
      "remat residuals: what an engine saves between forward and backward "
      "(as jax.ad_checkpoint.print_saved_residuals)");
  AddCaseOptions(&desc, &o, kListingEngine);
  if (!Parse(args, desc, out)) return 0;
  ApplyCaseLine(&o);
  Case c = LoadCase(o, err);
  std::unique_ptr<Engine> engine = MakeEngine(o.engine);
  RunOptions options = MakeRunOptions(o);
  options.memory_cap_bytes = ResolveMemoryCap(o.memory_cap, c.program, c.wrt, *engine).bytes;
  Result r = engine->ValueAndGrad(c.program, c.inputs, c.wrt, options);
  WarnIfCheckpointsIgnored(*engine, c.program, out);
  out << "# " << c.ToString() << " on " << engine->name() << "\n";
  out << FormatResiduals(r.stats);
  return 0;
}

int PrintProgram(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CaseOptions o;
  std::string format = "text";
  bool inline_checkpoints = false;
  po::options_description desc(
      "remat program: the program of a problem (or of a program file, as read back) as text "
      "that remat run --program FILE reads");
  AddCaseOptions(&desc, &o, kRunEngine);
  desc.add_options()("format", po::value(&format)->default_value(format),
                     "text: the program text format (engines/api/program_text.h); listing: the "
                     "jaxpr-like listing, not parseable")(
      "inline", po::bool_switch(&inline_checkpoints),
      "inline every checkpoint region first (the function without checkpointing, as "
      "torch.compile sees a model; then --policy wraps the whole of it in one region)");
  if (!Parse(args, desc, out)) return 0;
  ApplyCaseLine(&o);
  if (format != "text" && format != "listing") {
    throw Error(StrCat("--format '", format, "': expected text or listing"));
  }
  // Traced only: no inputs are made, so any size can be listed.
  std::shared_ptr<const Problem> owned;
  const Problem& problem = ResolveProblem(o, &owned);
  const ParamValues params = ResolveParams(problem, ParseParamFlags(o.params));
  Program program = problem.Build(params);
  WrtFromFlags(o.wrt, program, {});  // checked, though a listing takes no gradient
  if (inline_checkpoints) program = InlineCheckpoints(program);
  if (!o.policy.empty()) {
    program = ApplyPolicy(program, Policy::Parse(o.policy));
    for (const std::string& w : PolicyWarnings(program)) err << "remat: " << w << "\n";
  }
  if (!o.schedule.empty()) program = ApplySchedule(program, o.schedule);
  out << "# " << problem.name() << (params.empty() ? "" : " ") << FormatParams(params)
      << (inline_checkpoints ? " --inline" : "") << (o.policy.empty() ? "" : " --policy " + o.policy)
      << (o.schedule.empty() ? "" : " --schedule " + o.schedule) << "\n"
      << (format == "text" ? remat::PrintProgram(program) : ToString(program));
  return 0;
}

int PrintSchedule(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CaseOptions o;
  po::options_description desc(
      "remat schedule: the forward and the backward computation as the engine runs them, "
      "recomputation marked (as the JAX tutorial's print_fwd_bwd)");
  AddCaseOptions(&desc, &o, kListingEngine);
  if (!Parse(args, desc, out)) return 0;
  ApplyCaseLine(&o);
  Case c = LoadCase(o, err);
  std::unique_ptr<Engine> engine = MakeEngine(o.engine);
  RunOptions options = MakeRunOptions(o);
  options.memory_cap_bytes = ResolveMemoryCap(o.memory_cap, c.program, c.wrt, *engine).bytes;
  options.record_schedule = true;
  Result r = engine->ValueAndGrad(c.program, c.inputs, c.wrt, options);
  WarnIfCheckpointsIgnored(*engine, c.program, out);
  out << "# " << c.ToString() << " on " << engine->name() << "\n";
  // The peak below counts oneDNN's scratchpad, which the platform decides.
  out << "# platform: " << FormatPlatform(DescribePlatform()) << "\n";
  out << "forward computation:\n";
  bool backward = false;
  for (const std::string& line : r.schedule) {
    if (!backward && line.rfind("forward", 0) != 0) {
      out << "saved for the backward pass:\n" << FormatResiduals(r.stats);
      out << "backward computation:\n";
      backward = true;
    }
    out << "  " << line << "\n";
  }
  out << "peak " << r.stats.peak_bytes << " bytes at " << r.stats.peak_site << "; recomputed "
      << r.stats.flops_recomputed << " FLOPs\n";
  return 0;
}

int PrintPlan(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CaseOptions o;
  po::options_description desc(
      "remat plan: what the engine decided before running, one line per decision (engines/"
      "autodiff/plan.h): each checkpoint region honoured or inlined, what a honoured region "
      "saves, offloads or recomputes (by body value, as `remat program` numbers them), and each "
      "scan's or chain's schedule. Planned by a dry run, as --plan-only: no kernel runs");
  AddCaseOptions(&desc, &o, kListingEngine);
  if (!Parse(args, desc, out)) return 0;
  ApplyCaseLine(&o);
  Case c = LoadCase(o, err);
  std::unique_ptr<Engine> engine = MakeEngine(o.engine);
  RunOptions options = MakeRunOptions(o);
  options.plan_only = true;
  options.record_plan = true;
  Result r = engine->ValueAndGrad(c.program, c.inputs, c.wrt, options);
  WarnIfCheckpointsIgnored(*engine, c.program, out);
  out << "# " << c.ToString() << " on " << engine->name() << "\n";
  if (r.plan.empty()) {
    out << "no plan: " << engine->name()
        << " makes no decisions ahead of its run (it decides online, or the program has no "
           "checkpoint region, scan or chain)\n";
    return 0;
  }
  for (const std::string& line : r.plan) out << line << "\n";
  out << "predicted peak " << r.stats.predicted_peak_bytes << " bytes at "
      << r.stats.predicted_peak_site << "\n";
  return 0;
}

nlohmann::json LoadResults(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(StrCat(path, ": cannot open"));
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw Error(StrCat(path, ": not JSON: ", e.what()));
  }
  if (!j.is_object() || !j.contains("rows") || !j["rows"].is_array()) {
    throw Error(StrCat(path, ": not a results file (no \"rows\"; written by //harness:bench)"));
  }
  return j;
}

// The platform a results file's rows ran on (its "machine"), and what it
// lacks of PlatformToJson's keys: a file recorded before they existed.
struct FilePlatform {
  PlatformInfo platform;
  bool has_machine = false;
  std::vector<std::string> missing;
};

FilePlatform ReadPlatform(const nlohmann::json& results) {
  FilePlatform f;
  f.has_machine = results.contains("machine") && results["machine"].is_object();
  const nlohmann::json machine = f.has_machine ? results["machine"] : nlohmann::json::object();
  const nlohmann::json keys = PlatformToJson(PlatformInfo());
  for (const auto& [key, value] : keys.items()) {
    if (!machine.contains(key)) f.missing.push_back(key);
  }
  f.platform = PlatformFromJson(machine);
  return f;
}

// Warnings, printed before anything else, when A's and B's numbers may not
// be comparable: different platforms, or a platform a file does not record.
void WarnAboutPlatforms(const std::vector<std::string>& files, const nlohmann::json& a,
                        const nlohmann::json& b, std::ostream& out) {
  const FilePlatform pa = ReadPlatform(a), pb = ReadPlatform(b);
  auto unknown = [&](const char* label, const char* other, const std::string& file,
                     const FilePlatform& f) {
    if (f.missing.empty()) return;
    out << "warning: the platform of " << label << " (" << file << ") is unknown ("
        << (f.has_machine ? StrCat("its \"machine\" lacks ", Join(f.missing, ", "))
                          : std::string("it has no \"machine\""))
        << ": recorded before remat-bench wrote them): its times and scratchpad bytes may not "
           "be comparable with "
        << other << "'s\n";
  };
  unknown("A", "B", files[0], pa);
  unknown("B", "A", files[1], pb);
  // Differences are looked for only when both files record the platform in
  // full: a partial record cannot tell a different platform from a field it
  // never wrote.
  if (!pa.missing.empty() || !pb.missing.empty()) return;
  const std::vector<std::string> differences = PlatformDifferences(pa.platform, pb.platform);
  if (differences.empty()) return;
  out << "warning: A and B ran on different platforms (" << Join(differences, "; ")
      << "): their times and scratchpad bytes are not comparable\n";
}

// Side by side, with B's time over A's per row. The noise is measured from
// the two runs themselves: most rows do not change between two runs of the
// same code, so the spread of their log time ratios (the median absolute
// deviation, scaled to a standard deviation) is the run-to-run noise; a row
// is flagged when its ratio is beyond 3 of those (and at least 5%).
int Compare(const std::vector<std::string>& args, std::ostream& out) {
  std::vector<std::string> files;
  po::options_description desc("remat compare A.json B.json: two benchmark runs side by side");
  desc.add_options()("files", po::value(&files)->multitoken(), "A.json B.json");
  po::positional_options_description positional;
  positional.add("files", 2);
  desc.add_options()("help", "this help");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(positional).run(), vm);
  if (vm.count("help")) {
    out << desc;
    return 0;
  }
  po::notify(vm);
  if (files.size() != 2) throw Error("compare takes two results files: remat compare A.json B.json");
  const nlohmann::json a = LoadResults(files[0]), b = LoadResults(files[1]);
  std::map<std::string, double> a_ms, b_ms;
  for (const auto& row : a["rows"]) {
    if (row.contains("real_time_ms") && row["real_time_ms"].is_number()) {
      a_ms[row.value("name", "")] = row["real_time_ms"].get<double>();
    }
  }
  std::vector<std::pair<std::string, double>> ratios;
  for (const auto& row : b["rows"]) {
    const std::string name = row.value("name", "");
    if (!row.contains("real_time_ms") || !row["real_time_ms"].is_number()) continue;
    b_ms[name] = row["real_time_ms"].get<double>();
    auto it = a_ms.find(name);
    if (it != a_ms.end() && it->second > 0) ratios.push_back({name, b_ms[name] / it->second});
  }
  std::vector<double> logs;
  for (const auto& [name, r] : ratios) logs.push_back(std::log(r));
  std::sort(logs.begin(), logs.end());
  double noise = 0;
  if (!logs.empty()) {
    const double median = logs[logs.size() / 2];
    std::vector<double> dev;
    for (double l : logs) dev.push_back(std::abs(l - median));
    std::sort(dev.begin(), dev.end());
    noise = 1.4826 * dev[dev.size() / 2];
  }
  const double threshold = std::max(3 * noise, std::log(1.05));
  WarnAboutPlatforms(files, a, b, out);
  out << "A: " << files[0] << " (" << a.value("date", "?") << ")\n";
  out << "B: " << files[1] << " (" << b.value("date", "?") << ")\n";
  out << std::fixed << std::setprecision(3);
  out << "run-to-run noise (MAD of log ratios): " << 100 * (std::exp(noise) - 1)
      << "%; flagged beyond " << 100 * (std::exp(threshold) - 1) << "%\n\n";
  out << std::left << std::setw(72) << "row" << std::right << std::setw(12) << "A ms"
      << std::setw(12) << "B ms" << std::setw(9) << "B/A" << "\n";
  int flagged = 0;
  for (const auto& [name, r] : ratios) {
    const bool flag = std::abs(std::log(r)) > threshold;
    flagged += flag;
    out << std::left << std::setw(72) << name << std::right << std::setw(12) << a_ms[name]
        << std::setw(12) << b_ms[name] << std::setw(9) << r
        << (flag ? (r > 1 ? "  slower" : "  faster") : "") << "\n";
  }
  for (const auto& [name, ms] : a_ms) {
    if (!b_ms.count(name)) out << std::left << std::setw(72) << name << "  only in A\n";
  }
  for (const auto& [name, ms] : b_ms) {
    if (!a_ms.count(name)) out << std::left << std::setw(72) << name << "  only in B\n";
  }
  out << "\n" << ratios.size() << " rows compared, " << flagged << " beyond the noise\n";
  return 0;
}

// Splits "a,b" into {"a", "b"}; every flag may be given more than once.
std::vector<std::string> SplitCommas(const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (const std::string& f : flags) {
    std::stringstream ss(f);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  }
  return out;
}

int Conform(const std::vector<std::string>& args, std::ostream& out) {
  ConformOptions o;
  std::vector<std::string> problems, policies;
  po::options_description desc(
      "remat conform: run an engine outside remat (a command) on every problem and policy and "
      "judge it against the float64 oracle (the protocol: tools/conform.h)");
  desc.add_options()("engine-cmd", po::value(&o.engine_cmd)->required(),
                     "CMD: run as `sh -c 'CMD DIR'` per case; DIR holds program.txt, "
                     "<input>.npy, case.json; the engine writes loss.npy, grad_<input>.npy and "
                     "optionally stats.json, or prints 'unsupported: WHY' and exits 77")(
      "problems", po::value(&problems)->composing(), "NAME[,NAME...]: default every problem")(
      "policies", po::value(&policies)->composing(),
      "SPEC[,SPEC...]: policies applied to every region (as-written or as_written: the "
      "problem as it is), or schedule:SPEC (the problems with a scan or a chain of "
      "checkpointed blocks); default as-written and every policy")(
      "junit", po::value(&o.junit_path), "FILE: write a JUnit XML report")(
      "keep", po::value(&o.keep_dir), "DIR: keep each case's directory under DIR")(
      "timeout", po::value(&o.timeout_seconds)->default_value(60), "seconds per case")(
      "time-limit", po::value(&o.time_limit_seconds)->default_value(0),
      "seconds for the whole run (0: none); the cases left are not run, and the run fails")(
      "fail-fast", po::bool_switch(&o.fail_fast), "stop at the first failed case")(
      "allow-unsupported", po::bool_switch(&o.allow_unsupported),
      "exit 0 when every case is unsupported (otherwise an engine judged on nothing fails)");
  if (!Parse(args, desc, out)) return 0;
  o.problems = SplitCommas(problems);
  for (const std::string& p : SplitCommas(policies)) {
    o.variants.push_back(CaseVariant::Parse(p == "as_written" ? CaseVariant::kAsWrittenLabel : p));
  }
  return RunConform(o, out).ok ? 0 : 1;
}

}  // namespace


int RunRemat(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "help") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  // Boost.Program_options 1.74 formats its errors by substituting
  // placeholders such as %canonical_option% in a loop; an argument that
  // contains one never terminates it (found by tools/fuzz/cli_fuzzer.cc). No
  // option or value of remat contains '%', so such an argument is refused
  // before Boost sees it.
  for (const std::string& a : rest) {
    if (a.find('%') != std::string::npos) {
      err << "remat " << command << ": argument '" << a
          << "' contains '%', which no option or value of remat takes\n";
      return 2;
    }
  }
  try {
    if (command == "list") return List(out);
    if (command == "run") return Run(rest, out, err);
    if (command == "residuals") return Residuals(rest, out, err);
    if (command == "schedule") return PrintSchedule(rest, out, err);
    if (command == "plan") return PrintPlan(rest, out, err);
    if (command == "program") return PrintProgram(rest, out, err);
    if (command == "compare") return Compare(rest, out);
    if (command == "conform") return Conform(rest, out);
    err << "remat: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const po::error& e) {
    err << "remat " << command << ": " << e.what() << " (remat " << command << " --help)\n";
    return 2;
  } catch (const Error& e) {
    err << "remat " << command << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    err << "remat " << command << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace remat
