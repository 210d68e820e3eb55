// The generated mutants (see mutants.h) and their registration.
//
// Each mutant is a rule applied to one target. The rules change recompute's
// Result after the run, or the call it makes, and never touch the tracker's
// books: a mutant must be caught for what it changed, not for a leak or a
// buffer outside the trackers that the change itself made.
#include "harness/gallery/mutants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/policy.h"
#include "engines/api/program_identity.h"
#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/dtr/dtr_engine.h"
#include "harness/gallery/decorator.h"

namespace remat {
namespace {

// What an instance remembers between calls: the previous call's Stats (for
// "the previous call's" mutants) and the cache of the cache-key mutants.
struct Memory {
  std::optional<Stats> previous;
  struct Call {
    uint64_t program = 0;
    std::vector<uint64_t> values;  // a hash per argument
    std::vector<int> wrt;
    std::vector<int64_t> options;
    Program program_itself;
    RunOptions options_itself;
    // The value, gradients and state the call returned, as bits.
    std::vector<std::vector<char>> outputs;
  };
  std::vector<Call> calls;
};

using Apply = std::function<Result(Engine& inner, Memory& memory, const Program& program,
                                   const std::vector<Tensor>& args, const std::vector<int>& wrt,
                                   const RunOptions& options)>;

class MutantEngine : public Decorator {
 public:
  MutantEngine(std::string name, Apply apply) : Decorator(std::move(name)), apply_(std::move(apply)) {}
  MutantEngine(std::string name, Apply apply, std::unique_ptr<Engine> inner)
      : Decorator(std::move(name), std::move(inner)), apply_(std::move(apply)) {}
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    Result r = apply_(inner(), memory_, program, args, wrt, options);
    memory_.previous = r.stats;
    return r;
  }

 private:
  Apply apply_;
  Memory memory_;
};

// A rule that changes the Result after an honest run.
Apply After(std::function<void(Result&, Memory&)> change) {
  return [change](Engine& inner, Memory& memory, const Program& program,
                  const std::vector<Tensor>& args, const std::vector<int>& wrt,
                  const RunOptions& options) {
    Result r = inner.ValueAndGrad(program, args, wrt, options);
    change(r, memory);
    return r;
  };
}

// A rule that runs the call honestly and rethrows its remat::Error changed.
Apply RethrowingChanged(std::function<Error(const Error&)> change) {
  return [change](Engine& inner, Memory&, const Program& program, const std::vector<Tensor>& args,
                  const std::vector<int>& wrt, const RunOptions& options) -> Result {
    try {
      return inner.ValueAndGrad(program, args, wrt, options);
    } catch (const Error& e) {
      throw change(e);
    }
  };
}

// A rule that changes the call and runs it honestly.
Apply Calling(std::function<void(RunOptions&, const std::vector<Tensor>& args)> change) {
  return [change](Engine& inner, Memory&, const Program& program, const std::vector<Tensor>& args,
                  const std::vector<int>& wrt, const RunOptions& options) {
    RunOptions changed = options;
    change(changed, args);
    return inner.ValueAndGrad(program, args, wrt, changed);
  };
}

// `program` with `change` applied to every op, those of bodies included
// (bodies are copied, never edited in place: the caller's program is shared).
Program EveryOp(const Program& program, const std::function<void(Op&)>& change) {
  Program out = program;
  for (Op& op : out.ops) {
    if (op.body) op.body = std::make_shared<const Program>(EveryOp(*op.body, change));
    change(op);
  }
  return out;
}

// A rule that runs another program than the one asked for.
Apply Rewriting(std::function<void(Op&)> change) {
  return [change](Engine& inner, Memory&, const Program& program, const std::vector<Tensor>& args,
                  const std::vector<int>& wrt, const RunOptions& options) {
    return inner.ValueAndGrad(EveryOp(program, change), args, wrt, options);
  };
}

int64_t Step(int64_t x) { return std::max<int64_t>(1, (x < 0 ? -x : x) / 8); }

bool AnyDry(const std::vector<Tensor>& args) {
  for (const Tensor& a : args) {
    if (a.dry()) return true;
  }
  return false;
}

// Element `i` of a float tensor, one ulp away from zero's side it is on.
void OneUlp(const Tensor& t, int64_t i) {
  if (!t.defined() || t.dry() || t.num_elements() == 0) return;
  if (t.dtype() == DType::kF32) {
    t.f32()[i] = std::nextafter(t.f32()[i], INFINITY);
  } else if (t.dtype() == DType::kF64) {
    t.f64()[i] = std::nextafter(t.f64()[i], INFINITY);
  }
}

void Negate(const Tensor& t) {
  if (!t.defined() || t.dry() || t.dtype() != DType::kF32) return;
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = -t.f32()[i];
}

void Zero(const Tensor& t) {
  if (!t.defined() || t.dry()) return;
  std::memset(t.raw(), 0, t.bytes());
}

std::vector<char> Bits(const Tensor& t) {
  if (!t.defined() || t.dry()) return {};
  const char* p = static_cast<const char*>(t.raw());
  return std::vector<char>(p, p + t.bytes());
}

uint64_t HashBits(const Tensor& t) {
  StructureHasher h;
  const std::vector<char> bits = Bits(t);
  for (size_t i = 0; i + 8 <= bits.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bits.data() + i, 8);
    h.Word(w);
  }
  for (size_t i = bits.size() / 8 * 8; i < bits.size(); ++i) h.Word(static_cast<uint8_t>(bits[i]));
  return h.value();
}

// The options a run's outcome depends on, as numbers (on_tracker aside).
std::vector<int64_t> OptionKey(const RunOptions& o) {
  return {o.max_memory_bytes, o.memory_cap_bytes, o.predict_memory, o.plan_only,
          o.record_schedule,  o.record_plan,      o.check_recompute_bits};
}

// The result cache keyed on every component but `dropped`: a hit returns
// what the cached call would have (its program, wrt or options in place of
// this call's; for "values", its numbers).
enum class KeyPart { kProgram, kValues, kWrt, kOptions };

Apply CacheWithout(KeyPart dropped) {
  return [dropped](Engine& inner, Memory& memory, const Program& program,
                   const std::vector<Tensor>& args, const std::vector<int>& wrt,
                   const RunOptions& options) {
    Memory::Call key;
    key.program = StructureHash(program);
    for (const Tensor& a : args) key.values.push_back(HashBits(a));
    key.wrt = wrt;
    key.options = OptionKey(options);
    const Memory::Call* hit = nullptr;
    for (const Memory::Call& c : memory.calls) {
      const bool same = (dropped == KeyPart::kProgram ||
                         (c.program == key.program && SameStructure(c.program_itself, program))) &&
                        (dropped == KeyPart::kValues || c.values == key.values) &&
                        (dropped == KeyPart::kWrt || c.wrt == key.wrt) &&
                        (dropped == KeyPart::kOptions || c.options == key.options);
      // A cache needs something to key on that makes the call the same
      // shape: the parameters' count and shapes always.
      if (same && c.program_itself.num_params() == program.num_params()) {
        bool shapes = true;
        for (int i = 0; i < program.num_params(); ++i) {
          shapes = shapes && c.program_itself.shapes[i] == program.shapes[i];
        }
        if (shapes) {
          hit = &c;
          break;
        }
      }
    }
    if (hit == nullptr) {
      Result r = inner.ValueAndGrad(program, args, wrt, options);
      key.program_itself = program;
      key.options_itself = options;
      key.options_itself.on_tracker = nullptr;
      key.outputs.push_back(Bits(r.value));
      for (const Tensor& g : r.grads) key.outputs.push_back(Bits(g));
      for (const auto& [name, s] : r.state) key.outputs.push_back(Bits(s));
      memory.calls.push_back(std::move(key));
      return r;
    }
    switch (dropped) {
      case KeyPart::kProgram:
        return inner.ValueAndGrad(hit->program_itself, args, wrt, options);
      case KeyPart::kWrt:
        return inner.ValueAndGrad(program, args, hit->wrt, options);
      case KeyPart::kOptions: {
        RunOptions cached = hit->options_itself;
        cached.on_tracker = options.on_tracker;
        return inner.ValueAndGrad(program, args, wrt, cached);
      }
      case KeyPart::kValues: {
        Result r = inner.ValueAndGrad(program, args, wrt, options);
        std::vector<Tensor> outputs = {r.value};
        for (const Tensor& g : r.grads) outputs.push_back(g);
        for (const auto& [name, s] : r.state) outputs.push_back(s);
        for (size_t i = 0; i < outputs.size() && i < hit->outputs.size(); ++i) {
          if (!outputs[i].dry() && static_cast<size_t>(outputs[i].bytes()) == hit->outputs[i].size()) {
            std::memcpy(outputs[i].raw(), hit->outputs[i].data(), hit->outputs[i].size());
          }
        }
        return r;
      }
    }
    return inner.ValueAndGrad(program, args, wrt, options);
  };
}

struct Rule {
  std::string engine_suffix;
  std::string mutation;
  std::string allowed_by;
  Apply apply;
  // The conforming engine mutated: recompute, or for the rules of engines
  // that honour a memory cap (which recompute does not), dtr.
  bool over_dtr = false;
};

// Every gradient whose elements are all zero (of either sign).
bool AllZero(const Tensor& t) {
  if (!t.defined() || t.dry() || t.dtype() != DType::kF32) return false;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (t.f32()[i] != 0.0f) return false;
  }
  return true;
}

// The integer fields of Stats, each category of the per-category arrays
// apart.
struct IntField {
  std::string name;
  std::function<int64_t&(Stats&)> get;
};

std::vector<IntField> IntFields() {
  std::vector<IntField> f = {
      {"peak_bytes", [](Stats& s) -> int64_t& { return s.peak_bytes; }},
      {"host_peak_bytes", [](Stats& s) -> int64_t& { return s.host_peak_bytes; }},
      {"predicted_peak_bytes", [](Stats& s) -> int64_t& { return s.predicted_peak_bytes; }},
      {"residual_bytes", [](Stats& s) -> int64_t& { return s.residual_bytes; }},
      {"flops_forward", [](Stats& s) -> int64_t& { return s.flops_forward; }},
      {"flops_recomputed", [](Stats& s) -> int64_t& { return s.flops_recomputed; }},
      {"flops_backward", [](Stats& s) -> int64_t& { return s.flops_backward; }},
      {"kernel_calls", [](Stats& s) -> int64_t& { return s.kernel_calls; }},
      {"arena_bytes", [](Stats& s) -> int64_t& { return s.arena_bytes; }},
  };
  for (int c = 0; c < kNumCategories; ++c) {
    const std::string cat = CategoryName(static_cast<Category>(c));
    f.push_back({"peak_bytes_by_category_" + cat,
                 [c](Stats& s) -> int64_t& { return s.peak_bytes_by_category[c]; }});
    f.push_back({"high_water_bytes_by_category_" + cat,
                 [c](Stats& s) -> int64_t& { return s.high_water_bytes_by_category[c]; }});
  }
  return f;
}

// Sentences of engines/api/CONTRACT.md that allow a mutant (quoted where
// they are used).
constexpr char kNoArenaRule[] =
    "CONTRACT.md section 5: arena_bytes is -1 for an engine without an arena; no rule relates "
    "it to the run otherwise";
constexpr char kTimeRule[] =
    "CONTRACT.md section 5: time is what the bench reads; no rule of the suite depends on it";
constexpr char kKernelAttributionRule[] =
    "CONTRACT.md section 5: the suite holds kernel_times to adding up to seconds_in_kernels and "
    "kernel_calls, by kernels of the table, with the same calls for the same run; which kernel "
    "made a call or took a second it cannot see";
constexpr char kRecomputeBitsRule[] =
    "CONTRACT.md section 5: check_recompute_bits is a debug check that fires only on kernels "
    "that are not reproducible; on a conforming engine's kernels ignoring it cannot be seen";
constexpr char kNoPlanRule[] =
    "CONTRACT.md section 4: an engine with no static plan reports -1 (predict_memory is a "
    "request an engine without a plan need not honour)";
constexpr char kPlanListingRule[] =
    "engine.h (Result::plan): empty for an engine that decides online";

std::vector<Rule> Rules() {
  std::vector<Rule> rules;
  // Every integer field: too low, too high, the previous call's.
  for (const IntField& f : IntFields()) {
    // Which of the three the contract allows: arena_bytes says nothing
    // about the run but for -1 (none, the floor). (kernel_calls is the sum
    // of kernel_times' calls, which remat's engines report.)
    const bool arena = f.name == "arena_bytes";
    const std::string allowed_high = arena ? kNoArenaRule : "";
    const std::string allowed_stale = arena ? kNoArenaRule : "";
    auto get = f.get;
    rules.push_back({f.name + "_low", f.name + " reported lower than measured (by max(1, |x|/8))",
                     "", After([get](Result& r, Memory&) {
                       int64_t& x = get(r.stats);
                       x -= Step(x);
                     })});
    rules.push_back({f.name + "_high", f.name + " reported higher than measured (by max(1, |x|/8))",
                     allowed_high, After([get](Result& r, Memory&) {
                       int64_t& x = get(r.stats);
                       x += Step(x);
                     })});
    rules.push_back({f.name + "_stale", f.name + " of the instance's previous call", allowed_stale,
                     After([get](Result& r, Memory& m) {
                       if (m.previous) get(r.stats) = get(*m.previous);
                     })});
  }
  // The op counts.
  rules.push_back({"op_runs_low", "the first op's run count one lower", "",
                   After([](Result& r, Memory&) {
                     if (!r.stats.op_runs.empty()) --r.stats.op_runs[r.stats.op_runs.begin()->first];
                   })});
  rules.push_back({"op_runs_high", "the last op's run count one higher", "",
                   After([](Result& r, Memory&) {
                     if (!r.stats.op_runs.empty()) ++r.stats.op_runs[r.stats.op_runs.map().rbegin()->first];
                   })});
  rules.push_back({"op_runs_dropped", "the first op left out of the counts", "",
                   After([](Result& r, Memory&) {
                     OpRuns::Map m = r.stats.op_runs.map();
                     if (!m.empty()) m.erase(m.begin());
                     r.stats.op_runs = OpRuns(std::move(m));
                   })});
  rules.push_back({"op_runs_extra", "a count for an op the program does not have", "",
                   After([](Result& r, Memory&) { r.stats.op_runs["phantom at nowhere.cc:1"] = 1; })});
  rules.push_back({"op_runs_stale", "the op counts of the instance's previous call", "",
                   After([](Result& r, Memory& m) {
                     if (m.previous) r.stats.op_runs = m.previous->op_runs;
                   })});
  // The kernels' time and calls by kernel.
  rules.push_back({"kernel_times_calls_high", "the last kernel's calls one higher", "",
                   After([](Result& r, Memory&) {
                     if (!r.stats.kernel_times.empty()) ++r.stats.kernel_times.rbegin()->second.calls;
                   })});
  rules.push_back({"kernel_times_dropped", "the first kernel left out", "",
                   After([](Result& r, Memory&) {
                     if (!r.stats.kernel_times.empty()) {
                       r.stats.kernel_times.erase(r.stats.kernel_times.begin());
                     }
                   })});
  rules.push_back({"kernel_times_extra", "a kernel the table does not have, one call of no time",
                   "", After([](Result& r, Memory&) {
                     if (!r.stats.kernel_times.empty()) r.stats.kernel_times["phantom"] = {0, 1};
                   })});
  rules.push_back({"kernel_times_stale", "the kernel times of the instance's previous call", "",
                   After([](Result& r, Memory& m) {
                     if (m.previous) r.stats.kernel_times = m.previous->kernel_times;
                   })});
  rules.push_back({"kernel_times_seconds_moved",
                   "the first kernel's seconds counted as the last's", kKernelAttributionRule,
                   After([](Result& r, Memory&) {
                     KernelTimes& t = r.stats.kernel_times;
                     if (t.size() < 2) return;
                     t.rbegin()->second.seconds += t.begin()->second.seconds;
                     t.begin()->second.seconds = 0;
                   })});
  rules.push_back({"kernel_times_call_moved", "one of the first kernel's calls counted as the last's",
                   kKernelAttributionRule, After([](Result& r, Memory&) {
                     KernelTimes& t = r.stats.kernel_times;
                     if (t.size() < 2 || t.begin()->second.calls < 2) return;
                     --t.begin()->second.calls;
                     ++t.rbegin()->second.calls;
                   })});
  // The residual listing.
  auto listing = [&rules](const std::string& suffix, const std::string& what,
                          std::function<void(std::vector<Residual>&)> change) {
    rules.push_back({suffix, what, "", After([change](Result& r, Memory&) {
                       std::vector<Residual> lines = r.stats.residuals.lines();
                       change(lines);
                       r.stats.residuals = ResidualList(std::move(lines));
                     })});
  };
  auto first_saved = [](std::vector<Residual>& lines) -> Residual* {
    for (Residual& l : lines) {
      if (!l.is_argument) return &l;
    }
    return nullptr;
  };
  listing("residuals_line_dropped", "the first saved value (not an argument) left out of the listing",
          [first_saved](std::vector<Residual>& lines) {
            Residual* l = first_saved(lines);
            if (l != nullptr) lines.erase(lines.begin() + (l - lines.data()));
          });
  listing("residuals_line_repeated", "the first listing line listed twice",
          [](std::vector<Residual>& lines) {
            if (!lines.empty()) lines.push_back(lines.front());
          });
  listing("residuals_bytes_high", "the first saved value's bytes one higher",
          [first_saved](std::vector<Residual>& lines) {
            if (Residual* l = first_saved(lines)) ++l->bytes;
          });
  listing("residuals_count_high", "the first saved value's count one higher",
          [first_saved](std::vector<Residual>& lines) {
            if (Residual* l = first_saved(lines)) ++l->count;
          });
  listing("residuals_source_other", "the first saved value's source another line's",
          [](std::vector<Residual>& lines) {
            if (lines.size() >= 2) std::swap(lines.front().source, lines.back().source);
          });
  listing("residuals_type_other", "the first saved value's type written with one more axis",
          [first_saved](std::vector<Residual>& lines) {
            if (Residual* l = first_saved(lines)) l->type.insert(l->type.find('[') + 1, "1,");
          });
  listing("residuals_argument_flag_flipped", "the first line's is_argument flag flipped",
          [](std::vector<Residual>& lines) {
            if (!lines.empty()) lines.front().is_argument = !lines.front().is_argument;
          });
  // The peak's site.
  rules.push_back({"peak_site_empty", "peak_site left empty", "",
                   After([](Result& r, Memory&) { r.stats.peak_site.clear(); })});
  rules.push_back({"peak_site_other", "peak_site names no op of the program", "",
                   After([](Result& r, Memory&) { r.stats.peak_site = "nowhere.cc:1"; })});
  rules.push_back({"predicted_peak_site_other", "predicted_peak_site names no op of the program",
                   "", After([](Result& r, Memory&) {
                     if (r.stats.predicted_peak_bytes >= 0) r.stats.predicted_peak_site = "nowhere.cc:1";
                   })});
  // The times.
  rules.push_back({"seconds_forward_negative", "seconds_forward below zero", "",
                   After([](Result& r, Memory&) { r.stats.seconds_forward = -1e-3; })});
  rules.push_back({"seconds_backward_negative", "seconds_backward below zero", "",
                   After([](Result& r, Memory&) { r.stats.seconds_backward = -1e-3; })});
  rules.push_back({"seconds_in_kernels_past_total",
                   "seconds_in_kernels more than the run's whole time", "",
                   After([](Result& r, Memory&) {
                     r.stats.seconds_in_kernels = 2 * r.stats.seconds_total() + 1;
                   })});
  rules.push_back({"seconds_compile_negative", "seconds_compile below zero", "",
                   After([](Result& r, Memory&) { r.stats.seconds_compile = -1e-3; })});
  rules.push_back({"seconds_forward_doubled", "seconds_forward twice what was measured", kTimeRule,
                   After([](Result& r, Memory&) { r.stats.seconds_forward *= 2; })});
  // The outputs: the value, the first and the last gradient, the state.
  rules.push_back({"value_one_ulp", "the value one ulp up", "",
                   After([](Result& r, Memory&) { OneUlp(r.value, 0); })});
  rules.push_back({"value_sign", "the value's sign flipped", "",
                   After([](Result& r, Memory&) { Negate(r.value); })});
  for (const bool last : {false, true}) {
    const std::string g = last ? "grad_last" : "grad_first";
    auto pick = [last](Result& r) -> Tensor* {
      if (r.grads.empty()) return nullptr;
      return last ? &r.grads.back() : &r.grads.front();
    };
    rules.push_back({g + "_one_ulp", g + ": its last element one ulp up", "",
                     After([pick](Result& r, Memory&) {
                       if (Tensor* t = pick(r)) OneUlp(*t, t->num_elements() - 1);
                     })});
    rules.push_back({g + "_sign", g + ": its sign flipped", "", After([pick](Result& r, Memory&) {
                       if (Tensor* t = pick(r)) Negate(*t);
                     })});
    rules.push_back({g + "_zeros", g + ": all zeros", "", After([pick](Result& r, Memory&) {
                       if (Tensor* t = pick(r)) Zero(*t);
                     })});
    rules.push_back({g + "_flattened", g + ": rank 1, same elements", "",
                     After([pick](Result& r, Memory&) {
                       Tensor* t = pick(r);
                       if (t != nullptr && t->shape().rank() != 1) {
                         *t = t->Reshaped(Shape({t->num_elements()}));
                       }
                     })});
    rules.push_back({g + "_f64", g + ": returned as f64 (same values)", "",
                     After([pick](Result& r, Memory&) {
                       Tensor* t = pick(r);
                       if (t == nullptr || t->dry() || t->dtype() != DType::kF32) return;
                       Tensor d = Tensor::Zeros(DType::kF64, t->shape(), r.tracker,
                                                Category::kGradients);
                       for (int64_t i = 0; i < t->num_elements(); ++i) d.f64()[i] = t->f32()[i];
                       *t = d;
                     })});
  }
  rules.push_back({"grads_swapped", "the first two gradients in each other's place", "",
                   After([](Result& r, Memory&) {
                     if (r.grads.size() >= 2) std::swap(r.grads[0], r.grads[1]);
                   })});
  rules.push_back({"grads_rotated", "gradients rotated by one place (the last first)", "",
                   After([](Result& r, Memory&) {
                     if (r.grads.size() >= 2) {
                       std::rotate(r.grads.rbegin(), r.grads.rbegin() + 1, r.grads.rend());
                     }
                   })});
  rules.push_back({"grad_missing", "the last gradient left out", "", After([](Result& r, Memory&) {
                     if (!r.grads.empty()) r.grads.pop_back();
                   })});
  rules.push_back({"grad_extra", "the last gradient returned twice", "",
                   After([](Result& r, Memory&) {
                     if (!r.grads.empty()) r.grads.push_back(r.grads.back());
                   })});
  rules.push_back({"state_one_ulp", "the first new state's first element one ulp up", "",
                   After([](Result& r, Memory&) {
                     if (!r.state.empty()) OneUlp(r.state.begin()->second, 0);
                   })});
  rules.push_back({"state_missing", "the first new state left out", "",
                   After([](Result& r, Memory&) {
                     if (!r.state.empty()) r.state.erase(r.state.begin());
                   })});
  rules.push_back({"state_extra", "a new state for a parameter with no state op", "",
                   After([](Result& r, Memory&) { r.state["phantom"] = r.value; })});
  // The options: ignored, and inverted where they are a choice.
  rules.push_back({"plan_only_ignored", "plan_only ignored: the run made (when the arguments have data)",
                   "", Calling([](RunOptions& o, const std::vector<Tensor>& args) {
                     if (!AnyDry(args)) o.plan_only = false;
                   })});
  rules.push_back({"predict_memory_ignored", "predict_memory ignored: no prediction", kNoPlanRule,
                   Calling([](RunOptions& o, const std::vector<Tensor>&) {
                     o.predict_memory = false;
                   })});
  rules.push_back({"max_memory_bytes_ignored", "max_memory_bytes ignored", "",
                   Calling([](RunOptions& o, const std::vector<Tensor>&) { o.max_memory_bytes = 0; })});
  rules.push_back({"max_memory_bytes_checked_after_run",
                   "max_memory_bytes checked when the run is over, not at the allocation that "
                   "would pass it (unless predicting): the run made without the limit, then its "
                   "peak compared with it and the error thrown, every byte given back",
                   "",
                   [](Engine& inner, Memory&, const Program& program,
                      const std::vector<Tensor>& args, const std::vector<int>& wrt,
                      const RunOptions& options) {
                     if (options.max_memory_bytes <= 0 || options.predict_memory) {
                       return inner.ValueAndGrad(program, args, wrt, options);
                     }
                     RunOptions unlimited = options;
                     unlimited.max_memory_bytes = 0;
                     int64_t peak = 0;
                     {
                       Result r = inner.ValueAndGrad(program, args, wrt, unlimited);
                       if (r.stats.peak_bytes <= options.max_memory_bytes) return r;
                       peak = r.stats.peak_bytes;
                     }
                     throw Error(StrCat("program ", program.name, ": the run's peak, ", peak,
                                        " bytes, is past --max-memory ",
                                        options.max_memory_bytes, " bytes"));
                   }});
  rules.push_back({"on_tracker_ignored", "on_tracker never called", "",
                   Calling([](RunOptions& o, const std::vector<Tensor>&) { o.on_tracker = nullptr; })});
  rules.push_back({"record_schedule_ignored", "record_schedule ignored: no schedule", "",
                   Calling([](RunOptions& o, const std::vector<Tensor>&) {
                     o.record_schedule = false;
                   })});
  rules.push_back({"record_plan_ignored", "record_plan ignored: no plan lines", kPlanListingRule,
                   Calling([](RunOptions& o, const std::vector<Tensor>&) { o.record_plan = false; })});
  rules.push_back({"schedule_recompute_as_forward",
                   "the schedule's recompute lines labelled forward", "",
                   After([](Result& r, Memory&) {
                     for (std::string& line : r.schedule) {
                       if (line.rfind("recompute ", 0) == 0) line = "forward " + line.substr(10);
                     }
                   })});
  rules.push_back({"schedule_backward_as_forward", "the schedule's backward lines labelled forward",
                   "", After([](Result& r, Memory&) {
                     for (std::string& line : r.schedule) {
                       if (line.rfind("backward ", 0) == 0) line = "forward " + line.substr(9);
                     }
                   })});
  rules.push_back({"schedule_line_dropped", "the schedule's last line left out", "",
                   After([](Result& r, Memory&) {
                     if (!r.schedule.empty()) r.schedule.pop_back();
                   })});
  rules.push_back({"time_kernels_ignored", "time_kernels ignored: kernels never timed", kTimeRule,
                   Calling([](RunOptions& o, const std::vector<Tensor>&) { o.time_kernels = false; })});
  rules.push_back({"check_recompute_bits_ignored", "check_recompute_bits ignored",
                   kRecomputeBitsRule, Calling([](RunOptions& o, const std::vector<Tensor>&) {
                     o.check_recompute_bits = false;
                   })});
  rules.push_back({"tracker_replaced", "Result::tracker a new tracker, not the run's", "",
                   After([](Result& r, Memory&) { r.tracker = std::make_shared<MemoryTracker>(); })});
  rules.push_back({"memory_cap_bytes_ignored",
                   "memory_cap_bytes ignored (by an engine that does not claim to honour it)",
                   "CONTRACT.md section 4: engines whose honours_memory_cap() is false ignore it",
                   Calling([](RunOptions& o, const std::vector<Tensor>&) { o.memory_cap_bytes = 0; })});
  // The arguments, the errors and the cap.
  rules.push_back({"wrt_repeat_accepted",
                   "a repeated index in wrt accepted (its gradient returned twice), not refused", "",
                   [](Engine& inner, Memory&, const Program& program,
                      const std::vector<Tensor>& args, const std::vector<int>& wrt,
                      const RunOptions& options) {
                     std::vector<int> unique;
                     for (int w : wrt) {
                       if (std::find(unique.begin(), unique.end(), w) == unique.end()) {
                         unique.push_back(w);
                       }
                     }
                     Result r = inner.ValueAndGrad(program, args, unique, options);
                     if (unique.size() == wrt.size() || r.grads.size() != unique.size()) return r;
                     std::vector<Tensor> grads;
                     for (int w : wrt) {
                       grads.push_back(r.grads[std::find(unique.begin(), unique.end(), w) -
                                               unique.begin()]);
                     }
                     r.grads = std::move(grads);
                     return r;
                   }});
  rules.push_back({"integer_wrt_accepted",
                   "an integer parameter in wrt accepted: left out of the run, its gradient f32 "
                   "zeros",
                   "",
                   [](Engine& inner, Memory&, const Program& program,
                      const std::vector<Tensor>& args, const std::vector<int>& wrt,
                      const RunOptions& options) {
                     std::vector<int> floats;
                     for (int w : wrt) {
                       if (w < 0 || w >= program.num_params() || program.dtype(w) != DType::kI32) {
                         floats.push_back(w);
                       }
                     }
                     Result r = inner.ValueAndGrad(program, args, floats, options);
                     if (floats.size() == wrt.size() || r.grads.size() != floats.size()) return r;
                     std::vector<Tensor> grads;
                     size_t next = 0;
                     for (int w : wrt) {
                       grads.push_back(program.dtype(w) == DType::kI32
                                           ? Tensor::Zeros(DType::kF32, program.shapes[w])
                                           : r.grads[next++]);
                     }
                     r.grads = std::move(grads);
                     return r;
                   }});
  rules.push_back({"out_of_range_ids_clamped",
                   "an id or target outside [0, B) clamped into it and the run made again (JAX's "
                   "gathers' default), not an error",
                   "",
                   [](Engine& inner, Memory&, const Program& program,
                      const std::vector<Tensor>& args, const std::vector<int>& wrt,
                      const RunOptions& options) {
                     try {
                       return inner.ValueAndGrad(program, args, wrt, options);
                     } catch (const Error& e) {
                       // "...: index 11 at position 3 is outside [0, 11)"
                       const std::string text = e.what();
                       const size_t at = text.find("is outside [0, ");
                       if (at == std::string::npos) throw;
                       const int64_t bound = std::stoll(text.substr(at + 15));
                       std::vector<Tensor> clamped;
                       for (const Tensor& a : args) {
                         if (a.dtype() != DType::kI32 || !a.defined() || a.dry()) {
                           clamped.push_back(a);
                           continue;
                         }
                         Tensor c = Copy(a);
                         for (int64_t i = 0; i < c.num_elements(); ++i) {
                           c.i32()[i] = static_cast<int32_t>(
                               std::clamp<int64_t>(c.i32()[i], 0, bound - 1));
                         }
                         clamped.push_back(c);
                       }
                       return inner.ValueAndGrad(program, clamped, wrt, options);
                     }
                   }});
  rules.push_back({"error_without_names",
                   "every remat::Error rethrown as \"bad input\": the program, op and argument "
                   "left out (typed facts kept)",
                   "", RethrowingChanged([](const Error& e) { return Error("bad input", e.facts()); })});
  rules.push_back({"argument_written", "the first argument's first element one ulp up after the run",
                   "",
                   [](Engine& inner, Memory&, const Program& program,
                      const std::vector<Tensor>& args, const std::vector<int>& wrt,
                      const RunOptions& options) {
                     Result r = inner.ValueAndGrad(program, args, wrt, options);
                     if (!args.empty()) OneUlp(args[0], 0);
                     return r;
                   }});
  rules.push_back({"unreached_gradient_undefined",
                   "a gradient that is all zeros returned as an empty tensor", "",
                   After([](Result& r, Memory&) {
                     for (Tensor& g : r.grads) {
                       if (AllZero(g)) g = Tensor();
                     }
                   })});
  rules.push_back({"capped_memory_cap_bytes_doubled",
                   "dtr, which honours memory caps, run under twice the cap asked for", "",
                   Calling([](RunOptions& o, const std::vector<Tensor>&) { o.memory_cap_bytes *= 2; }),
                   /*over_dtr=*/true});
  rules.push_back({"capped_smallest_cap_understated",
                   "dtr's smallest feasible cap (ErrorFacts::smallest_feasible_bytes) reported "
                   "one byte lower",
                   "", RethrowingChanged([](const Error& e) {
                     ErrorFacts facts = e.facts();
                     if (facts.smallest_feasible_bytes > 0) --facts.smallest_feasible_bytes;
                     return Error(e.what(), facts);
                   }),
                   /*over_dtr=*/true});
  // The budgets: read as something else.
  rules.push_back({"peak_budget_as_fraction_1",
                   "memory_budget:peak:B regions run as memory_budget:1 (the peak bound ignored)", "",
                   Rewriting([](Op& op) {
                     if (op.kind == OpKind::kCheckpoint && op.policy.is_peak_budget()) {
                       op.policy = Policy::Parse("memory_budget:1");
                     }
                   })});
  rules.push_back({"schedule_budget_ignored",
                   "budget:B schedules run as budget:1TiB (the activations' bound ignored)", "",
                   Rewriting([](Op& op) {
                     if (op.schedule.rfind("budget:", 0) == 0) op.schedule = "budget:1TiB";
                   })});
  // A result cache keyed on all but one component.
  rules.push_back({"cache_without_program", "results cached without the program in the key", "",
                   CacheWithout(KeyPart::kProgram)});
  rules.push_back({"cache_without_values", "results cached without the argument values in the key",
                   "", CacheWithout(KeyPart::kValues)});
  rules.push_back({"cache_without_wrt", "results cached without wrt in the key", "",
                   CacheWithout(KeyPart::kWrt)});
  rules.push_back({"cache_without_options", "results cached without the run options in the key",
                   "", CacheWithout(KeyPart::kOptions)});
  return rules;
}

struct Registered {
  std::vector<Mutant> mutants;
};

const Registered& Registry() {
  static const auto* registered = [] {
    auto* out = new Registered;
    for (Rule& rule : Rules()) {
      const std::string name = "mutant_" + rule.engine_suffix;
      Apply apply = rule.apply;
      const bool over_dtr = rule.over_dtr;
      RegisterEngine(name, rule.mutation, [name, apply, over_dtr]() -> std::unique_ptr<Engine> {
        if (over_dtr) return std::make_unique<MutantEngine>(name, apply, std::make_unique<DtrEngine>());
        return std::make_unique<MutantEngine>(name, apply);
      });
      out->mutants.push_back({name, rule.mutation, rule.allowed_by});
    }
    return out;
  }();
  return *registered;
}

[[maybe_unused]] const bool registered = (Registry(), true);

}  // namespace

const std::vector<Mutant>& Mutants() { return Registry().mutants; }

}  // namespace remat
