#include "harness/bench_plan.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "problems/program_file.h"

namespace remat::bench {

namespace {
// Whether `program` multiplies matrices anywhere (regions and scan bodies
// included): the cases a matmul bound row measures.
bool HasMatMul(const Program& program) {
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::kMatMul) return true;
    if (op.body && HasMatMul(*op.body)) return true;
  }
  return false;
}
}  // namespace

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
  if (sweep == Sweep::kModels) return SplitPolicies(kModelPolicies);
  if (sweep != Sweep::kSchedules) return out;
  // The frontier's case also has its place in the depth series: its rows
  // once, the frontier's order first.
  if (size.at("L") == kFrontierDepth) out = SplitPolicies(kFrontierPolicies);
  for (const std::string& p : SplitPolicies(kDepthSchedulePolicies)) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

std::string CaseKeyOf(const std::string& problem, const std::string& program_file,
                      const OrderedParams& params) {
  const std::string name =
      program_file.empty()
          ? problem
          : problem + "@" + std::filesystem::path(program_file).filename().string();
  const std::string formatted = FormatOrderedParams(params);
  return formatted.empty() ? name : name + "/" + formatted;
}

std::string RowName(const PlannedRow& row) {
  if (row.kind == RowKind::kMatMulBound) return StrCat("BM_OneDnnMatMulBound/", row.case_key);
  return StrCat("BM_ValueAndGrad/", row.case_key, "/", row.engine, "/", row.variant.Label(),
                row.control ? "/control" : "");
}

std::vector<PlannedRow> PlanRows(
    const BenchFlags& flags, const std::vector<std::string>& registered_engines,
    const std::vector<std::pair<std::string, std::string>>& models) {
  // Engines: the baseline first, then the others by name.
  std::vector<std::string> engines = flags.engines;
  if (engines.empty() && flags.sweep == Sweep::kDtr) engines = {kBaselineEngine, "dtr", "recompute"};
  if (engines.empty() && flags.sweep == Sweep::kModels) {
    engines.assign(std::begin(kModelEngines), std::end(kModelEngines));
  }
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

  // Parse throws remat::Error naming the label (a policy's error lists the
  // valid names) before anything runs.
  std::vector<CaseVariant> policies;
  for (const std::string& p : flags.policies) {
    const CaseVariant v = CaseVariant::Parse(p);
    if (std::find(policies.begin(), policies.end(), v) == policies.end()) policies.push_back(v);
  }

  // Problems and their sizes.
  // Problems, their sizes, and the program file each comes from (if any).
  struct PlannedCase {
    const Problem* problem;
    std::vector<ParamValues> sizes;
    std::string program_file;
    std::string label;  // a model's (--sweep=models); else the case is named by its problem
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
    } else if (flags.sweep == Sweep::kModels) {
      for (const auto& [label, path] : models) {
        files.push_back(ProgramFileProblem::Read(path));
        cases.push_back({files.back().get(), {ParamValues()}, path, label});
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

  std::vector<PlannedRow> rows;
  for (const auto& [problem, sizes, program_file, label] : cases) {
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
    const bool schedulable = Schedulable(program);
    const bool has_matmul = HasMatMul(program);
    for (const ParamValues& size : sizes) {
      const std::ptrdiff_t case_begin = static_cast<std::ptrdiff_t>(rows.size());
      const OrderedParams params = OrderParams(*problem, size);
      const std::string formatted = FormatOrderedParams(params);
      const std::string case_key =
          label.empty() ? CaseKeyOf(problem->name(), program_file, params)
                        : (formatted.empty() ? label : label + "/" + formatted);
      std::vector<CaseVariant> size_policies;
      for (const std::string& label : SweepPolicies(flags.sweep, size)) {
        size_policies.push_back(CaseVariant::Parse(label));
      }
      if (size_policies.empty()) size_policies = policies;
      if (flags.sweep == Sweep::kDtr) {
        size_policies.clear();
        for (const std::string& cap : dtr_caps[problem->name()]) {
          size_policies.push_back(CaseVariant::OfCap(cap));
          size_policies.push_back(CaseVariant::OfBudgetUnderCap(cap));
        }
      }
      for (const std::string& engine : engines) {
        const bool caps = HonoursMemoryCaps(engine);
        std::vector<CaseVariant> engine_policies = size_policies;
        if (IgnoresPolicies(engine)) {
          engine_policies = {CaseVariant()};
          // An engine that evicts runs under the caps instead (eager's row
          // is the pairing's baseline either way).
          if (caps && flags.sweep == Sweep::kDtr) engine_policies.clear();
          if (caps && !flags.memory_cap.empty()) {
            engine_policies = {CaseVariant::OfCap(flags.memory_cap)};
          }
        }
        // planned runs recompute's plans, compiled: in the default run (no
        // --engines) its rows are the problems as written, its overhead next
        // to eager's on every problem, so that the default run stays about
        // as long as it was (its other 87 rows doubled recompute's share);
        // --engines=planned gives it every policy and schedule.
        if (flags.engines.empty() && flags.sweep == Sweep::kNone && engine == kPlannedEngine) {
          engine_policies = {CaseVariant()};
        }
        if (caps) {
          for (const CaseVariant& p : size_policies) {
            if (p.is_cap() && std::find(engine_policies.begin(), engine_policies.end(), p) ==
                                  engine_policies.end()) {
              engine_policies.push_back(p);
            }
          }
        }
        for (const CaseVariant& variant : engine_policies) {
          if (variant.needs_loop() && !schedulable) continue;
          if (variant.is_cap() && !caps) continue;
          if (variant.is_budget_under_cap() && IgnoresPolicies(engine)) continue;
          PlannedRow row;
          row.problem = problem->name();
          row.program_file = program_file;
          row.params = params;
          row.engine = engine;
          row.variant = variant;
          row.wrt = flags.wrt;
          row.case_key = case_key;
          // A model's inputs are its export's: its weights as initialised
          // (drawn uniform in [-1, 1), a 12-layer model's activations blow
          // up, and nanoGPT ran 8 times slower).
          if (!label.empty()) row.inputs_dir = std::filesystem::path(program_file).parent_path().string();
          row.big = flags.sweep == Sweep::kScale;
          row.name = RowName(row);
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
        control.name = RowName(control);
        rows.insert(baseline + 1, control);
      }
      // The case's matmul bound (kMatMulBound), before its rows: sampled
      // next to them, at the machine's speed of that moment. Not on the big
      // rows' case: it replays a run of eager, which cannot run there.
      if (has_matmul && flags.sweep != Sweep::kScale) {
        PlannedRow bound;
        bound.kind = RowKind::kMatMulBound;
        bound.problem = problem->name();
        bound.program_file = program_file;
        bound.params = params;
        bound.engine = kBoundEngine;
        bound.wrt = flags.wrt;
        bound.case_key = case_key;
        if (!label.empty()) bound.inputs_dir = std::filesystem::path(program_file).parent_path().string();
        bound.name = RowName(bound);
        rows.insert(rows.begin() + case_begin, bound);
      }
    }
  }
  return rows;
}

}  // namespace remat::bench
