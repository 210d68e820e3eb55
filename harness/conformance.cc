#include "harness/conformance.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/op_def.h"
#include "engines/api/rules.h"
#include "engines/oracle/oracle.h"
#include "harness/rounding_depth.h"

namespace remat {

std::string Case::ToString() const {
  return StrCat(problem->name(), params.empty() ? "" : " ", FormatParams(params));
}

std::vector<Tensor> ShapeOnlyArguments(const Program& program) {
  auto shapes_only = std::make_shared<MemoryTracker>();
  shapes_only->set_dry_run(true);
  std::vector<Tensor> args;
  for (int i = 0; i < program.num_params(); ++i) {
    args.push_back(Tensor::Zeros(program.dtype(i), program.shapes[i], shapes_only));
  }
  return args;
}

Case MakeCase(const Problem& problem, const ParamValues& params, uint64_t seed) {
  Case c;
  c.problem = &problem;
  c.params = params;
  c.program = problem.Build(params);
  c.inputs = MakeInputs(problem, c.program, params, seed);
  c.wrt = WrtIndices(problem, c.program);
  return c;
}

std::optional<std::string> FirstBitDifference(const Result& a, const Result& b) {
  if (!BitwiseEqual(a.value, b.value)) return "value";
  if (a.grads.size() != b.grads.size()) {
    return StrCat(a.grads.size(), " gradients against ", b.grads.size());
  }
  for (size_t i = 0; i < a.grads.size(); ++i) {
    if (!BitwiseEqual(a.grads[i], b.grads[i])) return StrCat("gradient ", i);
  }
  if (auto d = StateDiffers(a, b)) return d;
  return std::nullopt;
}

std::optional<std::string> StateDiffers(const Result& a, const Result& b) {
  for (const auto& [name, t] : a.state) {
    auto other = b.state.find(name);
    if (other == b.state.end()) return StrCat("state ", name, " (only one run has it)");
    if (!BitwiseEqual(t, other->second)) return StrCat("state ", name);
  }
  for (const auto& [name, t] : b.state) {
    if (!a.state.count(name)) return StrCat("state ", name, " (only one run has it)");
  }
  return std::nullopt;
}

CountedRun RunCountingStorage(Engine& engine, const Program& program,
                              const std::vector<Tensor>& args, const std::vector<int>& wrt,
                              RunOptions options) {
  CountedRun run;
  auto forward = options.on_tracker;
  options.on_tracker = [&run, forward](const std::shared_ptr<MemoryTracker>& t) {
    run.trackers.push_back(t);
    if (forward) forward(t);
  };
  const int64_t before = TensorStorageBytes();
  run.result = engine.ValueAndGrad(program, args, wrt, options);
  const int64_t allocated = TensorStorageBytes() - before;
  if (run.result.tracker &&
      std::find(run.trackers.begin(), run.trackers.end(), run.result.tracker) ==
          run.trackers.end()) {
    run.trackers.push_back(run.result.tracker);
  }
  int64_t counted = 0;
  for (const auto& t : run.trackers) counted += t->storage_bytes();
  run.untracked_bytes = allocated - counted;
  return run;
}

std::vector<std::string> OutputNames(const Case& c) {
  std::vector<std::string> names = {"value"};
  for (int w : c.wrt) names.push_back("grad " + c.program.param_names[w]);
  return names;
}

namespace {

// Element `flat` of a row-major tensor of `shape` as its index per axis,
// "[3,5]" (a scalar's is ""): what a reader finds in the tensor, where a flat
// index would have to be divided out by hand.
std::string IndexString(const Shape& shape, int64_t flat) {
  if (shape.rank() == 0) return "";
  std::vector<int64_t> index(shape.rank());
  for (int d = shape.rank() - 1; d >= 0; --d) {
    const int64_t n = shape.dim(d);
    index[d] = n > 0 ? flat % n : 0;
    flat = n > 0 ? flat / n : 0;
  }
  std::string out = "[";
  for (int d = 0; d < shape.rank(); ++d) out += StrCat(d ? "," : "", index[d]);
  return out + "]";
}

// CompareWithOracle with the rounding magnitudes `magnitudes`
// (null: their own, max|ref|).
Agreement Compare(const Case& c, const Result& got, const Result& ref, DType expected,
                  const OracleMagnitudes* magnitudes_or_null) {
  Agreement a;
  // The tensors compared, each with its rounding depth
  // (harness/rounding_depth.h): the value, each gradient, then the new
  // state (CONTRACT.md, state: a value of every state op, at its forward
  // depth; nothing more).
  struct Compared {
    std::string name;
    const Tensor* got;
    const Tensor* ref;
    double k;
    const Tensor* magnitude = nullptr;  // the oracle's rounding magnitude, if any
  };
  const OracleMagnitudes none;
  const OracleMagnitudes& magnitudes = magnitudes_or_null ? *magnitudes_or_null : none;
  std::vector<Compared> compared;
  const std::vector<double> depths = RoundingDepths(c.program, c.wrt);
  const std::vector<std::string> names = OutputNames(c);
  if (got.grads.size() != ref.grads.size() || ref.grads.size() + 1 != names.size()) {
    a.ok = false;
    a.kind = Agreement::Kind::kCount;
    a.detail = StrCat(c.ToString(), ": ", got.grads.size(), " gradients, the oracle has ",
                      ref.grads.size());
    return a;
  }
  compared.push_back({names[0], &got.value, &ref.value, depths[0],
                      magnitudes.value.defined() ? &magnitudes.value : nullptr});
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    // A gradient's bound stays relative to its own largest value: see
    // kF32ToleranceFactor (conformance.h) for why not the oracle's
    // gradient magnitudes.
    compared.push_back({names[i + 1], &got.grads[i], &ref.grads[i], depths[i + 1]});
  }
  const std::map<std::string, double> state_depths = StateRoundingDepths(c.program);
  for (const auto& [name, r] : ref.state) {
    auto it = got.state.find(name);
    if (it == got.state.end() || !it->second.defined()) {
      a.ok = false;
      a.kind = Agreement::Kind::kCount;
      a.detail = StrCat(c.ToString(), ": no new state for ", name,
                        " (the program's state op updates it: CONTRACT.md, state)");
      return a;
    }
    const auto depth = state_depths.find(name);
    const auto magnitude = magnitudes.state.find(name);
    compared.push_back({"state " + name, &it->second, &r,
                        depth == state_depths.end() ? 0 : depth->second,
                        magnitude == magnitudes.state.end() ? nullptr : &magnitude->second});
  }
  for (const auto& [name, t] : got.state) {
    if (!ref.state.count(name)) {
      a.ok = false;
      a.kind = Agreement::Kind::kCount;
      a.detail = StrCat(c.ToString(), ": a new state for ", name,
                        ", which no state op of the program updates");
      return a;
    }
  }
  for (const Compared& t : compared) {
    const Tensor& g = *t.got;
    const Tensor& r = *t.ref;
    // The expected type is the engine's dtype at the oracle's shape: the
    // oracle computes in f64, which is no part of what is expected.
    const std::string want = StrCat(DTypeName(expected), r.shape().ToString());
    if (g.dtype() != expected) {
      a.ok = false;
      a.kind = Agreement::Kind::kDType;
      a.detail = StrCat(c.ToString(), ": ", t.name, " is ", g.TypeString(), ", expected ", want,
                        " (the engine's dtype, end to end)");
      return a;
    }
    if (g.shape() != r.shape()) {
      a.ok = false;
      a.kind = Agreement::Kind::kShape;
      a.detail = StrCat(c.ToString(), ": ", t.name, " is ", g.TypeString(), ", expected ", want);
      return a;
    }
    double max_abs = 0;
    for (int64_t i = 0; i < r.num_elements(); ++i) max_abs = std::max(max_abs, std::abs(r.at(i)));
    // The magnitude each element's roundings are relative to: its own
    // rounding magnitude where the oracle carries one, never below the
    // output's largest |value| (a selection that flips within the error, a
    // rule's estimate, moves an element by up to that). Per element, so a
    // sum that cancels loosens its own element, not the whole tensor.
    const double per_magnitude = kF32ToleranceFactor * t.k * std::ldexp(1.0, -24);
    const auto scale_at = [&](int64_t i) {
      if (t.magnitude == nullptr) return max_abs;
      const double m = t.magnitude->at(i);
      return std::isfinite(m) ? std::max(max_abs, m) : max_abs;
    };
    double largest_scale = max_abs, tensor_worst = 0, tensor_worst_own = 0;
    for (int64_t i = 0; i < r.num_elements(); ++i) {
      const double scale = scale_at(i);
      largest_scale = std::max(largest_scale, scale);
      const double tolerance = per_magnitude * scale;
      const double err = std::abs(g.at(i) - r.at(i));
      // NaN in either side is a disagreement unless both are NaN.
      const bool both_nan = std::isnan(g.at(i)) && std::isnan(r.at(i));
      const auto over = [&](double tol) {
        double ratio = both_nan ? 0 : (tol > 0 ? err / tol : (err > 0 ? INFINITY : 0));
        return std::isnan(ratio) ? INFINITY : ratio;
      };
      const double ratio = over(tolerance);
      tensor_worst = std::max(tensor_worst, ratio);
      tensor_worst_own = std::max(tensor_worst_own, over(per_magnitude * max_abs));
      if (ratio > a.worst_ratio) {
        a.worst_ratio = ratio;
        a.detail = StrCat(c.ToString(), ": ", t.name, IndexString(r.shape(), i), " = ", g.at(i),
                          ", oracle ", r.at(i), ", error ", err, ", tolerance ", tolerance, " (",
                          kF32ToleranceFactor, " * K=", t.k, " * 2^-24 * ",
                          t.magnitude != nullptr ? "max(its rounding magnitude, max|ref|)="
                                                 : "max|ref|=",
                          scale, ")");
      }
    }
    a.tensors.push_back({t.name, t.k, per_magnitude * largest_scale, max_abs, tensor_worst,
                         largest_scale, tensor_worst_own});
  }
  a.ok = a.worst_ratio <= 1.0;
  if (!a.ok) a.kind = Agreement::Kind::kValue;
  return a;
}

}  // namespace

Agreement CompareWithOracle(const Case& c, const Result& got, const Result& ref, DType expected,
                            bool always_magnitudes) {
  // The magnitudes are never below the outputs' own (max|ref|), so a
  // comparison that passes without them passes with them: they are worked
  // out (a pass of the oracle) only where needed, or asked for.
  Agreement a = Compare(c, got, ref, expected, nullptr);
  if ((a.ok && !always_magnitudes) || (!a.ok && a.kind != Agreement::Kind::kValue)) return a;
  // The value's and the new state's rounding magnitudes (engines/oracle:
  // what their roundings are relative to when a sum cancels). A program the
  // oracle's magnitudes cannot run (it ran for `ref`, so this is not
  // expected) keeps the outputs' own magnitudes.
  OracleMagnitudes magnitudes;
  try {
    magnitudes = OracleRoundingMagnitudes(c.program, c.inputs);
  } catch (const Error&) {
    return a;
  }
  return Compare(c, got, ref, expected, &magnitudes);
}

std::string PairTestName(const std::string& problem, const std::string& variant) {
  std::string name = problem + "_" + variant;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

namespace {

// A residual line as the comparison reads it: the dtype is left out so that
// an engine in float64 is compared too.
std::string ListingKey(const Residual& r) {
  const size_t bracket = r.type.find('[');
  const std::string shape = bracket == std::string::npos ? r.type : r.type.substr(bracket);
  return StrCat(shape, " ", r.source, r.count > 1 ? StrCat(" (x", r.count, ")") : "");
}

// One step's shape of a stacked line ("[4,8,16]" x4 -> "[8,16]") and its
// source without checkpoint_name labels.
std::string ValueKey(const Residual& r) {
  const size_t bracket = r.type.find('[');
  std::string shape = bracket == std::string::npos ? r.type : r.type.substr(bracket);
  if (r.count > 1) {
    const size_t comma = shape.find(',');
    shape = comma == std::string::npos ? "[]" : "[" + shape.substr(comma + 1);
  }
  std::string source = r.source;
  for (size_t at; (at = source.find(" named '")) != std::string::npos;) {
    const size_t end = source.find('\'', at + 8);
    source.erase(at, end == std::string::npos ? std::string::npos : end + 1 - at);
  }
  return StrCat(shape, " ", source);
}

std::multiset<std::string> ListingKeys(const Stats& stats, bool with_arguments,
                                       bool values_only = false) {
  std::multiset<std::string> keys;
  for (const Residual& r : stats.residuals) {
    if (!with_arguments && r.is_argument) continue;
    if (!values_only) {
      keys.insert(ListingKey(r));
      continue;
    }
    for (int i = 0; i < std::max(1, r.count); ++i) keys.insert(ValueKey(r));
  }
  return keys;
}

std::string Lines(const std::multiset<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += StrCat("\n    ", k);
  return out.empty() ? "\n    (none)" : out;
}

}  // namespace

std::optional<std::string> ResidualListingDiffers(const Stats& eager, const Stats& got, bool exact,
                                                  bool values_only) {
  const std::multiset<std::string> want = ListingKeys(eager, exact, values_only);
  const std::multiset<std::string> have = ListingKeys(got, exact, values_only);
  // What `got` lists beyond eager's lines, and what it lacks (a multiset
  // difference each way).
  std::multiset<std::string> extra, missing;
  for (auto it = have.begin(); it != have.end(); it = have.upper_bound(*it)) {
    for (size_t i = want.count(*it); i < have.count(*it); ++i) extra.insert(*it);
  }
  for (auto it = want.begin(); it != want.end(); it = want.upper_bound(*it)) {
    for (size_t i = have.count(*it); i < want.count(*it); ++i) missing.insert(*it);
  }
  if (extra.empty() && (!exact || missing.empty())) return std::nullopt;
  std::string out;
  if (!extra.empty()) out += StrCat("lines eager does not list:", Lines(extra));
  if (exact && !missing.empty()) {
    out += StrCat(out.empty() ? "" : "\n  ", "eager's lines it lacks:", Lines(missing));
  }
  return out;
}

namespace {

// Schedule lines by label ("forward", "recompute", "backward"); lines with
// none of them in `unlabelled`. (What follows the label is the op, in a
// form that differs between engines: lines are counted, not matched.)
std::map<std::string, int64_t> ScheduleCounts(const std::vector<std::string>& schedule,
                                              std::vector<std::string>& unlabelled) {
  std::map<std::string, int64_t> counts;
  for (const std::string& line : schedule) {
    const std::string label = line.substr(0, line.find(' '));
    if (label != "forward" && label != "recompute" && label != "backward") {
      unlabelled.push_back(line);
    } else {
      ++counts[label];
    }
  }
  return counts;
}

// The FLOPs of one run of each primitive op, by Program::Describe(op), as
// Kernels counts them; -1 where two ops of one description differ.
void OpFlops(const Program& p, std::map<std::string, int64_t>* flops) {
  std::vector<Shape> in;
  for (const Op& op : p.ops) {
    if (!IsPrimitive(op.kind)) {
      OpFlops(*op.body, flops);
      continue;
    }
    in.clear();
    for (int v : op.inputs) in.push_back(p.shapes[v]);
    const int64_t f = Def(op.kind).flops(in, p.shapes[op.output]);
    const auto [it, inserted] = flops->emplace(Program::Describe(op), f);
    if (!inserted && it->second != f) it->second = -1;
  }
}

}  // namespace

std::vector<std::string> StatsContradictions(const Program& program, const Result& got,
                                             const Result& eager, bool schedules,
                                             bool same_kernels) {
  std::vector<std::string> out;
  const Stats& s = got.stats;
  auto at_least = [&out](const char* field, int64_t value, int64_t least) {
    if (value < least) out.push_back(StrCat("Stats::", field, " is ", value, ", below ", least));
  };
  at_least("peak_bytes", s.peak_bytes, 0);
  at_least("host_peak_bytes", s.host_peak_bytes, 0);
  at_least("predicted_peak_bytes", s.predicted_peak_bytes, -1);
  at_least("residual_bytes", s.residual_bytes, 0);
  at_least("flops_forward", s.flops_forward, 0);
  at_least("flops_recomputed", s.flops_recomputed, 0);
  at_least("flops_backward", s.flops_backward, 0);
  at_least("kernel_calls", s.kernel_calls, 0);
  at_least("arena_bytes", s.arena_bytes, -1);
  for (int c = 0; c < kNumCategories; ++c) {
    const std::string name = CategoryName(static_cast<Category>(c));
    at_least(StrCat("peak_bytes_by_category[", name, "]").c_str(), s.peak_bytes_by_category[c], 0);
    at_least(StrCat("high_water_bytes_by_category[", name, "]").c_str(),
             s.high_water_bytes_by_category[c], 0);
  }
  const std::pair<const char*, double> times[] = {{"seconds_forward", s.seconds_forward},
                                                  {"seconds_backward", s.seconds_backward},
                                                  {"seconds_in_kernels", s.seconds_in_kernels},
                                                  {"seconds_compile", s.seconds_compile}};
  for (const auto& [field, seconds] : times) {
    if (!(seconds >= 0)) out.push_back(StrCat("Stats::", field, " is ", seconds, " s, below 0"));
  }
  // The kernels' time is part of the forward and backward passes' (a
  // microsecond of slack for two clocks read apart).
  if (s.seconds_in_kernels > s.seconds_total() * 1.001 + 1e-6) {
    out.push_back(StrCat("Stats::seconds_in_kernels (", s.seconds_in_kernels,
                         " s) is more than the run's seconds_forward + seconds_backward (",
                         s.seconds_total(), " s)"));
  }
  // The kernels' time and calls by kernel, where the engine breaks them
  // down: the parts of seconds_in_kernels and kernel_calls, by the table's
  // names.
  if (!s.kernel_times.empty()) {
    std::set<std::string> table;
    for (KernelOp k : TableKernels()) table.insert(TableKernel(k).name);
    double seconds = 0;
    int64_t calls = 0;
    for (const auto& [name, t] : s.kernel_times) {
      if (table.count(name) == 0) {
        out.push_back(StrCat("Stats::kernel_times names '", name, "', no kernel of the table"));
      }
      if (t.calls < 1) {
        out.push_back(StrCat("Stats::kernel_times['", name, "'] has ", t.calls,
                             " calls (a kernel listed was called)"));
      }
      if (!(t.seconds >= 0)) {
        out.push_back(StrCat("Stats::kernel_times['", name, "'] is ", t.seconds, " s, below 0"));
      }
      seconds += t.seconds;
      calls += t.calls;
    }
    if (calls != s.kernel_calls) {
      out.push_back(StrCat("Stats::kernel_times' calls add up to ", calls,
                           ", not Stats::kernel_calls (", s.kernel_calls, ")"));
    }
    // Each kernel's ticks converted apart: rounding only.
    if (std::fabs(seconds - s.seconds_in_kernels) > 1e-9 * s.seconds_in_kernels + 1e-12) {
      out.push_back(StrCat("Stats::kernel_times' seconds add up to ", seconds,
                           ", not Stats::seconds_in_kernels (", s.seconds_in_kernels, ")"));
    }
  }
  if (got.tracker != nullptr) {
    const MemoryTracker& t = *got.tracker;
    if (s.peak_bytes != t.peak_bytes()) {
      out.push_back(StrCat("Stats::peak_bytes is ", s.peak_bytes, ", the tracker's high-water mark ",
                           t.peak_bytes()));
    }
    if (s.host_peak_bytes != t.peak_host_bytes()) {
      out.push_back(StrCat("Stats::host_peak_bytes is ", s.host_peak_bytes,
                           ", the tracker's host high-water mark ", t.peak_host_bytes()));
    }
    for (int c = 0; c < kNumCategories; ++c) {
      const Category cat = static_cast<Category>(c);
      if (s.peak_bytes_by_category[c] != t.peak_bytes(cat)) {
        out.push_back(StrCat("Stats::peak_bytes_by_category[", CategoryName(cat), "] is ",
                             s.peak_bytes_by_category[c], ", the tracker's at its peak ",
                             t.peak_bytes(cat)));
      }
      if (s.high_water_bytes_by_category[c] != t.high_water_bytes(cat)) {
        out.push_back(StrCat("Stats::high_water_bytes_by_category[", CategoryName(cat), "] is ",
                             s.high_water_bytes_by_category[c], ", the tracker's ",
                             t.high_water_bytes(cat)));
      }
    }
  }
  const Stats& e = eager.stats;
  if (s.flops_forward != e.flops_forward) {
    out.push_back(StrCat("Stats::flops_forward is ", s.flops_forward, ", eager's ", e.flops_forward,
                         " (the forward pass is the program once; recomputation is "
                         "flops_recomputed)"));
  }
  if (same_kernels && s.flops_backward != e.flops_backward) {
    out.push_back(StrCat("Stats::flops_backward is ", s.flops_backward, ", eager's ",
                         e.flops_backward, " (recomputation excluded)"));
  }
  bool recomputed = false;
  for (const auto& [op, n] : e.op_runs) {
    const int64_t have = s.op_runs.count(op) ? s.op_runs.at(op) : 0;
    if (have < n) {
      out.push_back(StrCat("Stats::op_runs counts '", op, "' ", have, " times, fewer than eager's ", n,
                           " (the forward pass runs every op)"));
    }
    recomputed = recomputed || have > n;
  }
  for (const auto& [op, n] : s.op_runs) {
    if (e.op_runs.count(op) == 0) {
      out.push_back(StrCat("Stats::op_runs counts '", op, "' (", n, " runs), an op eager never ran"));
    }
  }
  // (The converse does not hold: recomputing only ops that cost no FLOPs,
  // a reshape, is recomputation of 0 FLOPs.)
  if (s.flops_recomputed > 0 && !recomputed) {
    out.push_back(StrCat("Stats::flops_recomputed is ", s.flops_recomputed,
                         " while op_runs equals eager's (nothing recomputed)"));
  }
  if (same_kernels) {
    std::map<std::string, int64_t> flops;
    OpFlops(program, &flops);
    int64_t beyond = 0;
    bool known = true;
    for (const auto& [op, n] : s.op_runs) {
      const auto f = flops.find(op);
      const int64_t base = e.op_runs.count(op) ? e.op_runs.at(op) : 0;
      if (n <= base) continue;
      known = known && f != flops.end() && f->second >= 0;
      if (known) beyond += (n - base) * f->second;
    }
    if (known && beyond != s.flops_recomputed) {
      out.push_back(StrCat("Stats::flops_recomputed is ", s.flops_recomputed,
                           ", while the op runs beyond eager's in Stats::op_runs cost ", beyond,
                           " FLOPs"));
    }
  }
  std::set<std::string> arguments;
  for (const Residual& r : s.residuals) {
    if (r.is_argument && !arguments.insert(r.source).second) {
      out.push_back(StrCat("the residual listing lists '", r.source, "' twice"));
    }
  }
  if (schedules) {
    std::vector<std::string> unlabelled, eager_unlabelled;
    auto have = ScheduleCounts(got.schedule, unlabelled);
    auto want = ScheduleCounts(eager.schedule, eager_unlabelled);
    if (got.schedule.empty()) {
      out.push_back("Result::schedule is empty under RunOptions::record_schedule");
    } else {
      for (const std::string& line : unlabelled) {
        out.push_back(StrCat("Result::schedule's line '", line,
                             "' starts with none of forward, recompute, backward"));
      }
      int64_t runs = 0;
      for (const auto& [op, n] : s.op_runs) runs += n;
      if (!same_kernels) return out;
      if (have["forward"] != want["forward"]) {
        out.push_back(StrCat("Result::schedule has ", have["forward"], " forward lines, eager's ",
                             want["forward"], " (the forward pass runs the program once)"));
      }
      if (have["backward"] != want["backward"]) {
        out.push_back(StrCat("Result::schedule has ", have["backward"], " backward lines, eager's ",
                             want["backward"]));
      }
      if (have["forward"] + have["recompute"] != runs) {
        out.push_back(StrCat("Result::schedule has ", have["forward"], " forward and ",
                             have["recompute"], " recompute lines, while Stats::op_runs counts ",
                             runs, " op runs"));
      }
    }
  }
  return out;
}

std::vector<std::string> CentralDifferenceDisagreements(
    const Case& c, const Result& oracle, float step, int64_t per_input,
    const std::function<double(double analytic)>& tolerance) {
  std::vector<std::string> out;
  auto loss = [&](const std::vector<Tensor>& args) {
    return OracleValueAndGrad(c.program, args, {}).value.f64()[0];
  };
  for (size_t w = 0; w < c.wrt.size(); ++w) {
    const int input = c.wrt[w];
    const int64_t size = c.inputs[input].num_elements();
    const int64_t stride = per_input == 0 ? 1 : std::max<int64_t>(1, size / per_input);
    for (int64_t j = 0; j < size; j += stride) {
      std::vector<Tensor> plus = c.inputs, minus = c.inputs;
      plus[input] = Copy(c.inputs[input]);
      minus[input] = Copy(c.inputs[input]);
      const float x = c.inputs[input].f32()[j];
      plus[input].f32()[j] = x + step;
      minus[input].f32()[j] = x - step;
      const double h = static_cast<double>(plus[input].f32()[j]) - minus[input].f32()[j];
      const double numeric = (loss(plus) - loss(minus)) / h;
      const double analytic = oracle.grads[w].f64()[j];
      if (!(std::abs(numeric - analytic) <= tolerance(analytic))) {
        out.push_back(StrCat("d loss / d ", c.program.param_names[input], "[", j,
                             "]: central difference ", numeric, ", oracle ", analytic));
      }
    }
  }
  return out;
}

}  // namespace remat
