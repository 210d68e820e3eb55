#include "engines/budget/budget_solver.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>

#include "engines/api/error.h"
#include "engines/api/rules.h"
#include "engines/plan/save_plan.h"

namespace remat {
namespace {

bool IsLoop(OpKind kind) { return kind == OpKind::kScan || kind == OpKind::kChain; }

// The forward FLOPs of one op of `body`, by the FLOP model of ForwardFlops.
int64_t OpFlops(const Program& body, const Op& op) {
  Program one;
  one.shapes = body.shapes;
  one.ops = {op};
  return ForwardFlops(one);
}

// Which classes run in a recomputation given `saved`, by the executor's rule
// (see the header): the must-have classes that are not saved and the loops
// that record, then, in reverse program order, the inputs of what runs.
std::vector<bool> Runs(const BudgetProblem& p, const std::vector<bool>& saved) {
  const int n = static_cast<int>(p.classes.size());
  std::vector<bool> run(n, false);
  for (int c = 0; c < n; ++c) {
    const BudgetProblem::Class& k = p.classes[c];
    run[c] = k.always_runs || (k.must_have && !(k.saveable && saved[c]));
  }
  // Classes are in program order and read only earlier classes.
  for (int c = n - 1; c >= 0; --c) {
    if (!run[c]) continue;
    for (int u : p.classes[c].inputs) {
      const BudgetProblem::Class& in = p.classes[u];
      if (!(in.saveable && saved[u])) run[u] = true;
    }
  }
  return run;
}

// Drops saved classes that save no FLOPs, latest first, while the FLOPs
// stay the same.
void Prune(const BudgetProblem& p, std::vector<bool>* saved) {
  const int64_t flops = RecomputedFlops(p, *saved);
  for (int c = static_cast<int>(p.classes.size()) - 1; c >= 0; --c) {
    if (!(*saved)[c]) continue;
    (*saved)[c] = false;
    if (RecomputedFlops(p, *saved) != flops) (*saved)[c] = true;
  }
}

// True when the costs add up: no class that may have to be recomputed reads
// a class that may have to be recomputed (every input of a must-have class
// is a region input or a loop that runs anyway), and every class that is not
// must-have is read by no must-have class.
bool Independent(const BudgetProblem& p) {
  for (const BudgetProblem::Class& k : p.classes) {
    if (!k.must_have && !k.always_runs) continue;
    for (int u : k.inputs) {
      if (!p.classes[u].always_runs) return false;
    }
  }
  return true;
}

// Exact 0-1 knapsack over the must-have saveable classes: the Pareto front
// of (bytes, FLOPs saved), item by item; each state remembers its choice.
std::vector<bool> Knapsack(const BudgetProblem& p, int64_t budget) {
  struct State {
    int64_t bytes;
    int64_t value;
    std::vector<int> items;
  };
  std::vector<State> front = {{0, 0, {}}};
  for (int c = 0; c < static_cast<int>(p.classes.size()); ++c) {
    const BudgetProblem::Class& k = p.classes[c];
    if (!k.must_have || !k.saveable || k.always_runs || k.flops == 0) continue;
    if (k.bytes > budget) continue;
    std::vector<State> next = front;
    for (const State& s : front) {
      if (s.bytes + k.bytes > budget) continue;
      State t = s;
      t.bytes += k.bytes;
      t.value += k.flops;
      t.items.push_back(c);
      next.push_back(std::move(t));
    }
    // Keep the states no other dominates (fewer or equal bytes, more or
    // equal value): sort by bytes, then value descending, then by the items
    // (lexicographically), so that of two save sets of equal bytes and
    // value the same one survives whatever the budget.
    std::sort(next.begin(), next.end(), [](const State& a, const State& b) {
      if (a.bytes != b.bytes) return a.bytes < b.bytes;
      if (a.value != b.value) return a.value > b.value;
      return a.items < b.items;
    });
    front.clear();
    for (State& s : next) {
      if (!front.empty() && s.value <= front.back().value) continue;
      front.push_back(std::move(s));
    }
  }
  std::vector<bool> saved(p.classes.size(), false);
  for (int c : front.back().items) saved[c] = true;  // the most value within budget
  return saved;
}

struct GlpDeleter {
  void operator()(glp_prob* lp) const { glp_delete_prob(lp); }
};

// GLPK prints its progress to stdout by default: silenced once, here.
int SilentTerminal(void*, const char*) { return 1; }

// GLPK's callback: stops the search once it has made more subproblems than
// `*info` (an int64_t; 0 or less: no limit). The incumbent stays.
void StopAfterNodes(glp_tree* tree, void* info) {
  if (glp_ios_reason(tree) != GLP_ISELECT) return;
  const int64_t limit = *static_cast<const int64_t*>(info);
  int active = 0, current = 0, total = 0;
  glp_ios_tree_size(tree, &active, &current, &total);
  if (limit > 0 && total > limit) glp_ios_terminate(tree);
}

// The greatest common divisor of the bytes of the classes that may be
// saved under `budget` (1 if none): the MILP's bytes row is written in
// these units, and its bound can only move by whole units.
int64_t BytesUnit(const BudgetProblem& p, int64_t budget) {
  int64_t unit = 0;
  for (const BudgetProblem::Class& k : p.classes) {
    if (k.saveable && k.bytes <= budget && k.bytes > 0) unit = std::gcd(unit, k.bytes);
  }
  return std::max<int64_t>(unit, 1);
}

// The MILP of the header (Checkmate's, one recomputation stage).
std::vector<bool> Milp(const BudgetProblem& p, int64_t budget, const BudgetOptions& options,
                       bool* proven) {
  const int n = static_cast<int>(p.classes.size());
  glp_term_hook(SilentTerminal, nullptr);
  std::unique_ptr<glp_prob, GlpDeleter> lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  // Columns: s_c at 1 + c, r_c at 1 + n + c.
  glp_add_cols(lp.get(), 2 * n);
  for (int c = 0; c < n; ++c) {
    const BudgetProblem::Class& k = p.classes[c];
    const int s = 1 + c;
    const int r = 1 + n + c;
    glp_set_col_kind(lp.get(), s, GLP_BV);
    glp_set_col_kind(lp.get(), r, GLP_BV);
    if (!k.saveable || k.bytes > budget) glp_set_col_bnds(lp.get(), s, GLP_FX, 0, 0);
    if (k.always_runs) glp_set_col_bnds(lp.get(), r, GLP_FX, 1, 1);
    glp_set_obj_coef(lp.get(), r, static_cast<double>(k.flops));
  }
  std::vector<int> ia = {0};
  std::vector<int> ja = {0};
  std::vector<double> ar = {0};
  int rows = 0;
  auto add_row = [&](std::vector<std::pair<int, double>> terms, int type, double lo, double hi) {
    ++rows;
    glp_add_rows(lp.get(), 1);
    glp_set_row_bnds(lp.get(), rows, type, lo, hi);
    for (const auto& [col, coef] : terms) {
      ia.push_back(rows);
      ja.push_back(col);
      ar.push_back(coef);
    }
  };
  std::vector<std::pair<int, double>> bytes_row;
  for (int c = 0; c < n; ++c) {
    const BudgetProblem::Class& k = p.classes[c];
    const int s = 1 + c;
    const int r = 1 + n + c;
    if (k.must_have) add_row({{s, 1}, {r, 1}}, GLP_LO, 1, 0);
    for (int u : k.inputs) add_row({{1 + u, 1}, {1 + n + u, 1}, {r, -1}}, GLP_LO, 0, 0);
    if (k.saveable && k.bytes <= budget) bytes_row.push_back({s, static_cast<double>(k.bytes)});
  }
  // The bytes row in units of the classes' greatest common divisor (tensor
  // sizes share large powers of two): GLPK's feasibility tolerances are
  // relative, and a row of 2 MiB coefficients under a bound of 2 MiB - 1
  // used to come back 1 byte over (found by BudgetFront, which asks for
  // exactly such budgets). SolveBudget also checks, and tightens.
  const int64_t unit = BytesUnit(p, budget);
  if (unit > 1) {
    for (auto& [col, coef] : bytes_row) coef /= static_cast<double>(unit);
  }
  if (!bytes_row.empty()) {
    add_row(bytes_row, GLP_UP, 0, static_cast<double>(budget / unit));
  }
  glp_load_matrix(lp.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());

  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  // GLPK's cutting planes (Gomory mixed-integer, mixed-integer rounding,
  // mixed cover, clique), off by default. Without them, branch and cut on a
  // region whose values all have the same size (every saved set of k values
  // takes the same bytes: thousands of ties) took up to 5 s per solve: a
  // random program of 39 classes (peak_budget_test, seed 101) spent 424 s
  // in GLPK over its budget front and dry runs. With them the same 4000
  // solves take 0.6 s in all; small problems pay nothing measurable.
  parm.gmi_cuts = GLP_ON;
  parm.mir_cuts = GLP_ON;
  parm.cov_cuts = GLP_ON;
  parm.clq_cuts = GLP_ON;
  // Pseudocost branching and the feasibility pump: with GLPK's defaults
  // (Driebeck-Tomlin branching, no pump) a torchvision ViT's whole-program
  // region (120 classes) took 13.1 s over seven budgets of its front, one of
  // them stopped by the 10 s limit at 124440 FLOPs; with these, 0.85 s, all
  // seven proven optimal (that one at 123760).
  parm.br_tech = GLP_BR_PCH;
  parm.fp_heur = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  parm.tm_lim = std::max(1, static_cast<int>(std::lround(options.time_limit_seconds * 1000)));
  int64_t node_limit = options.node_limit;
  parm.cb_func = StopAfterNodes;
  parm.cb_info = &node_limit;
  const int ret = glp_intopt(lp.get(), &parm);
  const int status = glp_mip_status(lp.get());
  std::vector<bool> saved(n, false);
  *proven = ret == 0 && status == GLP_OPT;
  if (status == GLP_OPT || status == GLP_FEAS) {
    for (int c = 0; c < n; ++c) saved[c] = glp_mip_col_val(lp.get(), 1 + c) > 0.5;
  }
  // No integer solution (the limit came first): saving nothing is feasible.
  return saved;
}

}  // namespace

BudgetProblem MakeBudgetProblem(const Program& body, const std::vector<bool>& param_needs,
                                int64_t dtype_bytes,
                                const std::function<bool(const Op&)>& may_save) {
  BudgetProblem p;
  p.num_values = body.num_values();
  p.class_of.assign(body.num_values(), -1);
  const std::vector<bool> needs = ValueNeeds(body, param_needs);
  const std::vector<bool> residual = ResidualValues(body, needs);
  for (const Op& op : body.ops) {
    const int x = op.inputs.empty() ? -1 : op.inputs[0];
    int c;
    if (op.kind == OpKind::kName && x >= body.num_params()) {
      // The same tensor as the value it labels.
      c = p.class_of[x];
      p.classes[c].values.push_back(op.output);
    } else {
      c = static_cast<int>(p.classes.size());
      p.classes.emplace_back();
      BudgetProblem::Class& k = p.classes.back();
      k.values = {op.output};
      k.bytes = body.shapes[op.output].num_elements() * dtype_bytes;
      k.saveable = !IsLoop(op.kind);
      k.always_runs = IsLoop(op.kind) && needs[op.output];
    }
    p.class_of[op.output] = c;
    BudgetProblem::Class& k = p.classes[c];
    k.flops += OpFlops(body, op);
    for (int in : op.inputs) {
      const int u = p.class_of[in];
      if (u >= 0 && u != c && std::find(k.inputs.begin(), k.inputs.end(), u) == k.inputs.end()) {
        k.inputs.push_back(u);
      }
    }
    if (residual[op.output]) k.must_have = true;
    if (op.kind == OpKind::kCheckpoint && needs[op.output] && may_save(op)) k.must_have = true;
  }
  return p;
}

int64_t RecomputedFlops(const BudgetProblem& p, const std::vector<bool>& saved) {
  const std::vector<bool> run = Runs(p, saved);
  int64_t flops = 0;
  for (size_t c = 0; c < run.size(); ++c) {
    if (run[c]) flops += p.classes[c].flops;
  }
  return flops;
}

int64_t SavedBytes(const BudgetProblem& p, const std::vector<bool>& saved) {
  int64_t bytes = 0;
  for (size_t c = 0; c < saved.size(); ++c) {
    if (saved[c] && p.classes[c].saveable) bytes += p.classes[c].bytes;
  }
  return bytes;
}

BudgetPlan SolveBudget(const BudgetProblem& p, const BudgetOptions& options) {
  if (options.budget_bytes < 0) {
    throw Error(StrCat("memory_budget: a negative budget (", options.budget_bytes, " bytes)"));
  }
  BudgetPlan plan;
  bool any_choice = false;
  for (const BudgetProblem::Class& k : p.classes) {
    any_choice = any_choice || (k.saveable && k.bytes <= options.budget_bytes && k.flops > 0);
  }
  if (!any_choice) {
    plan.saved.assign(p.classes.size(), false);
    plan.solver = "trivial";
  } else if (!options.force_milp && Independent(p)) {
    plan.saved = Knapsack(p, options.budget_bytes);
    plan.solver = "knapsack";
  } else {
    // GLPK's tolerances are relative: a solution may overshoot the bound by
    // a little. Tighten the bound by the overshoot and solve again (the
    // plan then stays within the budget; it is proven optimal for the
    // tightened bound only, which is said). The bound moves by whole units
    // of the bytes row: a ResNet-50's whole-program MILP came back 1 byte
    // (one unit of 4) over its bound, and tightening by the byte left the
    // row's bound, and the answer, as they were.
    int64_t bound = options.budget_bytes;
    for (int attempt = 0;; ++attempt) {
      plan.saved = Milp(p, bound, options, &plan.proven_optimal);
      for (size_t c = 0; c < p.classes.size(); ++c) {
        if (!p.classes[c].saveable) plan.saved[c] = false;
      }
      const int64_t over = SavedBytes(p, plan.saved) - options.budget_bytes;
      if (over <= 0 || attempt == 8) break;
      const int64_t unit = BytesUnit(p, bound);
      bound = std::max<int64_t>(0, bound - (over + unit - 1) / unit * unit);
      plan.proven_optimal = false;
    }
    plan.solver = "milp";
  }
  for (size_t c = 0; c < p.classes.size(); ++c) {
    if (!p.classes[c].saveable) plan.saved[c] = false;
  }
  Prune(p, &plan.saved);
  plan.saved_bytes = SavedBytes(p, plan.saved);
  plan.recomputed_flops = RecomputedFlops(p, plan.saved);
  if (plan.saved_bytes > options.budget_bytes) {
    throw Error(StrCat("memory_budget: the ", plan.solver, " solver kept ", plan.saved_bytes,
                       " bytes over a budget of ", options.budget_bytes, " (a solver bug)"));
  }
  plan.decisions.assign(p.num_values, SaveDecision::kRecompute);
  for (size_t c = 0; c < p.classes.size(); ++c) {
    if (!plan.saved[c]) continue;
    for (int v : p.classes[c].values) plan.decisions[v] = SaveDecision::kSave;
  }
  return plan;
}

int64_t EverythingSaveableBytes(const Program& body, const std::vector<bool>& param_needs,
                                const BudgetProblem& p) {
  const std::vector<SaveDecision> d =
      PlanSaves(body, param_needs, Policy(PolicyKind::kEverythingSaveable));
  std::vector<bool> saved(p.classes.size(), false);
  for (int v = body.num_params(); v < body.num_values(); ++v) {
    if (d[v] != SaveDecision::kRecompute && p.class_of[v] >= 0) saved[p.class_of[v]] = true;
  }
  // Loop outputs everything_saveable keeps count too: it keeps them.
  int64_t bytes = 0;
  for (size_t c = 0; c < saved.size(); ++c) {
    if (saved[c]) bytes += p.classes[c].bytes;
  }
  return bytes;
}

int64_t BudgetBytes(const MemoryBudget& budget, const Program& body,
                    const std::vector<bool>& param_needs, const BudgetProblem& problem) {
  if (budget.mode == BudgetMode::kPeak) {
    throw Error(StrCat("memory_budget:", budget.text,
                       ": a peak budget is resolved over the whole program before a region is "
                       "planned (ResolvePeakBudget, engines/budget/peak_budget.h); this engine "
                       "planned the region without resolving it"));
  }
  if (!budget.is_fraction) return budget.bytes;
  const int64_t all = EverythingSaveableBytes(body, param_needs, problem);
  return static_cast<int64_t>(std::floor(budget.fraction * static_cast<double>(all)));
}

BudgetPlan PlanMemoryBudget(const Op& region, const std::vector<bool>& param_needs,
                            int64_t dtype_bytes, const std::function<bool(const Op&)>& may_save,
                            double time_limit_seconds) {
  if (region.kind != OpKind::kCheckpoint || region.policy.kind() != PolicyKind::kMemoryBudget) {
    throw Error(StrCat("PlanMemoryBudget: ", Program::Describe(region),
                       " is not a checkpoint region under memory_budget"));
  }
  const Program& body = *region.body;
  const BudgetProblem problem = MakeBudgetProblem(body, param_needs, dtype_bytes, may_save);
  BudgetOptions options;
  options.budget_bytes = BudgetBytes(region.policy.memory_budget(), body, param_needs, problem);
  options.time_limit_seconds = time_limit_seconds;
  return SolveBudget(problem, options);
}

std::vector<int64_t> BudgetFront(const BudgetProblem& problem, int64_t most,
                                 double time_limit_seconds) {
  std::vector<int64_t> out;
  BudgetOptions options;
  options.time_limit_seconds = time_limit_seconds;
  options.budget_bytes = most;
  while (options.budget_bytes >= 0) {
    const BudgetPlan plan = SolveBudget(problem, options);
    out.push_back(plan.saved_bytes);
    if (plan.saved_bytes == 0) break;
    options.budget_bytes = plan.saved_bytes - 1;
  }
  return out;
}

bool PolicyMaySave(const Policy& policy) {
  if (policy.kind() == PolicyKind::kNothingSaveable) return false;
  if (policy.kind() != PolicyKind::kMemoryBudget) return true;
  const MemoryBudget& b = policy.memory_budget();
  if (b.mode == BudgetMode::kPeak) return true;  // until resolved to a fraction
  return b.is_fraction ? b.fraction > 0 : b.bytes > 0;
}

namespace {

void DescribeIn(const Program& p, const std::vector<bool>& param_needs, int64_t dtype_bytes,
                std::vector<std::string>* out) {
  const std::vector<bool> needs = ValueNeeds(p, param_needs);
  for (const Op& op : p.ops) {
    std::vector<bool> in_needs;
    for (int v : op.inputs) in_needs.push_back(needs[v]);
    if (op.kind == OpKind::kCheckpoint && needs[op.output] && op.policy.is_peak_budget()) {
      const std::string line =
          StrCat(Program::Describe(op), ": ", op.policy.ToString(),
                 " is not resolved yet (the engine resolves it with dry runs of the whole "
                 "program: engines/budget/peak_budget.h)");
      if (std::find(out->begin(), out->end(), line) == out->end()) out->push_back(line);
    } else if (op.kind == OpKind::kCheckpoint && needs[op.output] &&
        op.policy.kind() == PolicyKind::kMemoryBudget) {
      const BudgetProblem problem = MakeBudgetProblem(
          *op.body, in_needs, dtype_bytes, [](const Op& o) { return PolicyMaySave(o.policy); });
      BudgetOptions options;
      options.budget_bytes = BudgetBytes(op.policy.memory_budget(), *op.body, in_needs, problem);
      const BudgetPlan plan = SolveBudget(problem, options);
      const std::string line =
          StrCat(Program::Describe(op), ": ", op.policy.ToString(), " (", options.budget_bytes,
                 " bytes) keeps ", plan.saved_bytes, " of the ",
                 EverythingSaveableBytes(*op.body, in_needs, problem),
                 " bytes everything_saveable keeps, recomputes ", plan.recomputed_flops, " FLOPs; ",
                 plan.solver, ", ",
                 plan.proven_optimal ? "proven optimal"
                                     : "NOT proven optimal (the node or time limit stopped it)");
      if (std::find(out->begin(), out->end(), line) == out->end()) out->push_back(line);
    }
    if (op.kind == OpKind::kScan) {
      // Step i > 0: the carry depends on earlier xs (CONTRACT.md 3.5).
      bool xs = false;
      for (size_t j = 1; j < in_needs.size(); ++j) xs = xs || in_needs[j];
      std::vector<bool> step = in_needs;
      step[0] = step[0] || xs;
      DescribeIn(*op.body, step, dtype_bytes, out);
    } else if (op.body) {
      DescribeIn(*op.body, in_needs, dtype_bytes, out);
    }
  }
}

}  // namespace

std::vector<std::string> DescribeBudgetPlans(const Program& program, const std::vector<int>& wrt,
                                             int64_t dtype_bytes) {
  std::vector<bool> needs(program.num_params(), false);
  for (int w : wrt) needs[w] = true;
  std::vector<std::string> out;
  DescribeIn(program, needs, dtype_bytes, &out);
  return out;
}

}  // namespace remat
