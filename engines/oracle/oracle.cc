// The oracle's traversal, its own plain reverse mode (oracle.h): the
// program flattened into a list of primitive applications (regions and
// chains inline, scans unrolled step by step), every value kept, then one
// walk backwards. Each primitive's rules are its entry in the oracle's table
// (op_rules.h); nothing here knows an op but the structural ones.
#include "engines/oracle/oracle.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/memory_tracker.h"
#include "engines/oracle/op_rules.h"

namespace remat {
namespace {

using oracle::OpRules;
using oracle::RulesFor;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One primitive application on the list.
struct Entry {
  const Op* op = nullptr;  // the program op; for a scan step's slice, the scan op
  bool slice = false;      // step `step` of the scan's input `scan_input` (a view)
  int64_t step = 0;
  int scan_input = 0;
  std::vector<int> inputs;  // slots
  int output = -1;          // slot
};

// Counts a caller's f64 argument as live input bytes for the run without
// owning it (the contract's "counted, not owned").
class CountedArgument {
 public:
  CountedArgument(std::shared_ptr<MemoryTracker> tracker, int64_t bytes)
      : tracker_(std::move(tracker)), bytes_(bytes) {
    tracker_->Allocate(bytes_, Category::kInputs);
  }
  ~CountedArgument() { tracker_->Release(bytes_, Category::kInputs); }
  CountedArgument(const CountedArgument&) = delete;
  CountedArgument& operator=(const CountedArgument&) = delete;

 private:
  std::shared_ptr<MemoryTracker> tracker_;
  int64_t bytes_;
};

class PlainReverseMode {
 public:
  explicit PlainReverseMode(const OracleOptions& options)
      : options_(options), tracker_(std::make_shared<MemoryTracker>()) {
    tracker_->set_limit_bytes(options.max_memory_bytes);
    if (options.on_tracker) options.on_tracker(tracker_);
  }

  Result Run(const Program& program, const std::vector<Tensor>& args, const std::vector<int>& wrt);

  // With magnitudes on, every slot gets a magnitude beside its value
  // (OracleRoundingMagnitudes): call before Run; Run then fills `out`.
  void TrackMagnitudes(OracleMagnitudes* out) { magnitudes_out_ = out; }

 private:
  // The forward pass: appends `p`'s primitives to the list with `params` the
  // slots of its parameters; returns the slot of its output.
  int Evaluate(const Program& p, const std::vector<int>& params);
  int Primitive(const Program& p, const Op& op, const std::vector<int>& inputs);
  int Scan(const Op& op, const std::vector<int>& inputs);
  int NewSlot(Tensor t) {
    slots_.push_back(std::move(t));
    integer_.push_back(false);
    return static_cast<int>(slots_.size()) - 1;
  }
  // The magnitude of a primitive's output (OracleRoundingMagnitudes), from
  // its inputs' values and magnitudes: the op's magnitude rule.
  Tensor Magnitude(const Op& op, const std::vector<int>& inputs, const Tensor& out);
  bool tracking() const { return magnitudes_out_ != nullptr; }

  // The backward pass: adds entry e's vector-Jacobian products (the op's
  // VjpRule), for the adjoint dy of its output, to its inputs' adjoints.
  void Vjp(const Entry& e, const Tensor& dy);
  void Contribute(const Entry& e, int input, Tensor contribution);

  // The gradients' magnitudes (OracleRoundingMagnitudes): adds entry e's
  // contributions (the op's GradMagnitudeRule) to its inputs' adjoint
  // magnitudes, for its output's adjoint dy and that adjoint's magnitude mdy.
  void MagnitudeVjp(const Entry& e, const Tensor& dy, const Tensor& mdy);
  // Vjp's contributions for adjoint `dy` with each non-integer input's value
  // v (magnitude m) replaced by substitute(v, m), one per input (undefined
  // where Vjp gives none); nothing is added to any adjoint or counted.
  std::vector<Tensor> VjpWith(const Entry& e, const oracle::Substitute& substitute,
                              const Tensor& dy);
  Tensor NewGradient(const Shape& shape) const {
    return Tensor::Zeros(DType::kF64, shape, tracker_, Category::kGradients);
  }

  void Record(const char* phase, const Entry& e);
  std::vector<Residual> Residuals(const Program& program, int64_t* bytes) const;

  const OracleOptions& options_;
  std::shared_ptr<MemoryTracker> tracker_;
  std::vector<Tensor> slots_;
  // By slot: an i32 argument's values (or a view of one), which no
  // magnitude replaces (VjpWith): they are indices, masks, seeds.
  std::vector<bool> integer_;
  // By slot, with TrackMagnitudes: each value's rounding magnitude.
  std::vector<Tensor> mags_;
  OracleMagnitudes* magnitudes_out_ = nullptr;
  std::vector<Entry> list_;
  std::map<int, Tensor> adjoints_;  // by slot
  // With TrackMagnitudes and a gradient asked for: each adjoint's magnitude.
  std::map<int, Tensor> adjoint_magnitudes_;  // by slot
  // Set inside VjpWith: Contribute hands each contribution here instead.
  std::vector<Tensor>* captured_ = nullptr;
  int64_t flops_forward_ = 0;
  int64_t flops_backward_ = 0;
  std::map<std::string, int64_t> op_runs_;
  std::vector<std::string>* schedule_ = nullptr;
};

Result PlainReverseMode::Run(const Program& program, const std::vector<Tensor>& args,
                             const std::vector<int>& wrt) {
  ValidateArguments(program, args, wrt);
  for (int i = 0; i < program.num_params(); ++i) {
    if (args[i].dry()) {
      throw Error(StrCat("oracle: program ", program.name, ": argument ", program.param_names[i],
                         " has shape but no data; the oracle runs, it does not plan"));
    }
  }
  if (program.output < 0 || program.output >= program.num_values() ||
      program.shapes[program.output].rank() != 0) {
    throw Error(StrCat("oracle: program ", program.name,
                       " must return a rank-0 value (value_and_grad differentiates a scalar)"));
  }
  Result result;
  result.tracker = tracker_;
  schedule_ = options_.record_schedule ? &result.schedule : nullptr;

  // Arguments: f64 ones in place, counted; f32 ones converted (exactly).
  int64_t counted_bytes = 0;
  {
    ScopedSite site(tracker_.get(), Category::kInputs, "arguments");
    for (int i = 0; i < program.num_params(); ++i) {
      if (args[i].dtype() == DType::kF64) {
        NewSlot(args[i]);
        counted_bytes += args[i].bytes();
      } else {
        NewSlot(Cast(args[i], DType::kF64, tracker_));
      }
      integer_.back() = program.dtype(i) == DType::kI32;
      if (tracking()) {
        // An argument is exact: no error to carry, magnitude 0. An
        // integer's (ids, targets, a seed, a mask) is its value, so that the
        // rules that read it as an index read the same index.
        mags_.push_back(program.dtype(i) == DType::kI32
                            ? Copy(slots_.back(), tracker_)
                            : Tensor::Zeros(DType::kF64, slots_.back().shape(), tracker_));
      }
    }
  }
  CountedArgument counted(tracker_, counted_bytes);
  std::vector<int> params(program.num_params());
  for (int i = 0; i < program.num_params(); ++i) params[i] = i;

  const Clock::time_point forward_start = Clock::now();
  const int output = Evaluate(program, params);
  {
    ScopedSite site(tracker_.get(), Category::kActivations, "value");
    result.value = Copy(slots_[output], tracker_);
  }
  // The new state: each state op's value, as the forward pass computed it.
  for (const Entry& e : list_) {
    if (e.op->kind != OpKind::kState || e.slice) continue;
    ScopedSite site(tracker_.get(), Category::kActivations, Program::Describe(*e.op));
    result.state[e.op->name] = Copy(slots_[e.output], tracker_);
  }
  result.stats.seconds_forward = SecondsSince(forward_start);
  result.stats.residuals = Residuals(program, &result.stats.residual_bytes);
  if (tracking()) {
    magnitudes_out_->value = mags_[output];
    for (const Entry& e : list_) {
      if (e.op->kind == OpKind::kState && !e.slice) magnitudes_out_->state[e.op->name] = mags_[e.output];
    }
  }

  // The backward pass: d value / d value = 1, then every entry from the last
  // to the first. An entry's output adjoint is complete when it is reached:
  // every reader of its output comes later in the list. With no gradient
  // asked for (a loss evaluated for central differences) there is none.
  const Clock::time_point backward_start = Clock::now();
  if (!wrt.empty()) {
    {
      ScopedSite site(tracker_.get(), Category::kGradients, "seed");
      Tensor seed = NewGradient(Shape());
      seed.f64()[0] = 1.0;
      adjoints_[output] = seed;
    }
    for (auto e = list_.rbegin(); e != list_.rend(); ++e) {
      auto dy = adjoints_.find(e->output);
      if (dy == adjoints_.end()) continue;  // the value does not reach the output
      ScopedSite site(tracker_.get(), Category::kGradients, Program::Describe(*e->op));
      Record("backward", *e);
      Vjp(*e, dy->second);
    }
  }
  // The gradients' magnitudes: the same walk over the adjoints' magnitudes.
  if (tracking() && !wrt.empty()) {
    {
      Tensor seed = Tensor::Zeros(DType::kF64, Shape(), tracker_, Category::kGradients);
      seed.f64()[0] = 1.0;
      adjoint_magnitudes_[output] = seed;
    }
    for (auto e = list_.rbegin(); e != list_.rend(); ++e) {
      auto mdy = adjoint_magnitudes_.find(e->output);
      auto dy = adjoints_.find(e->output);
      if (mdy == adjoint_magnitudes_.end() || dy == adjoints_.end()) continue;
      MagnitudeVjp(*e, dy->second, mdy->second);
    }
    for (int w : wrt) {
      auto found = adjoint_magnitudes_.find(w);
      magnitudes_out_->grads.push_back(found != adjoint_magnitudes_.end()
                                           ? found->second
                                           : Tensor::Zeros(DType::kF64, program.shapes[w], tracker_,
                                                           Category::kGradients));
    }
  }
  for (int w : wrt) {
    auto adjoint = adjoints_.find(w);
    if (adjoint != adjoints_.end()) {
      result.grads.push_back(adjoint->second);
    } else {
      ScopedSite site(tracker_.get(), Category::kGradients, "unreached gradient");
      result.grads.push_back(NewGradient(program.shapes[w]));
    }
  }
  result.stats.seconds_backward = SecondsSince(backward_start);

  Stats& s = result.stats;
  s.peak_bytes = tracker_->peak_bytes();
  s.peak_site = tracker_->peak_site();
  for (int c = 0; c < kNumCategories; ++c) {
    s.peak_bytes_by_category[c] = tracker_->peak_bytes(static_cast<Category>(c));
    s.high_water_bytes_by_category[c] = tracker_->high_water_bytes(static_cast<Category>(c));
  }
  s.host_peak_bytes = tracker_->peak_host_bytes();
  s.predicted_peak_bytes = -1;
  s.flops_forward = flops_forward_;
  s.flops_recomputed = 0;
  s.flops_backward = flops_backward_;
  s.op_runs = op_runs_;
  // No kernels: all of the oracle's time is its own loops.
  s.seconds_in_kernels = 0;
  return result;
}

int PlainReverseMode::Evaluate(const Program& p, const std::vector<int>& params) {
  if (static_cast<int>(params.size()) != p.num_params()) {
    throw Error(StrCat("oracle: program ", p.name, " takes ", p.num_params(), " parameters, got ",
                       params.size()));
  }
  std::vector<int> env(p.num_values(), -1);  // value id -> slot
  for (int i = 0; i < p.num_params(); ++i) {
    if (slots_[params[i]].shape() != p.shapes[i]) {
      throw Error(StrCat("oracle: program ", p.name, ": parameter ", p.param_names[i], " is ",
                         p.shapes[i].ToString(), ", given ", slots_[params[i]].TypeString()));
    }
    env[i] = params[i];
  }
  for (const Op& op : p.ops) {
    std::vector<int> inputs;
    for (int v : op.inputs) {
      if (v < 0 || v >= p.num_values() || env[v] < 0) {
        throw Error(StrCat("oracle: program ", p.name, ": ", Program::Describe(op), " reads value ",
                           v, ", which is not defined before it"));
      }
      inputs.push_back(env[v]);
    }
    if (op.output < p.num_params() || op.output >= p.num_values() || env[op.output] >= 0) {
      throw Error(StrCat("oracle: program ", p.name, ": ", Program::Describe(op), " writes value ",
                         op.output, ", which is not a fresh value"));
    }
    int out = -1;
    switch (op.kind) {
      case OpKind::kCheckpoint:
      case OpKind::kChain:
        // Inline: a policy or a schedule changes what is kept, not the math.
        if (!op.body) throw Error(StrCat("oracle: ", Program::Describe(op), " has no body"));
        out = Evaluate(*op.body, inputs);
        break;
      case OpKind::kScan:
        out = Scan(op, inputs);
        break;
      default:
        // Every primitive, by its entry in the oracle's table (op_rules.h);
        // an op without one is refused there (oracle_test checks that every
        // OpKind has one).
        out = Primitive(p, op, inputs);
        break;
    }
    if (slots_[out].shape() != p.shapes[op.output]) {
      throw Error(StrCat("oracle: program ", p.name, ": ", Program::Describe(op), " gives ",
                         slots_[out].TypeString(), " where the program says ",
                         p.shapes[op.output].ToString()));
    }
    env[op.output] = out;
  }
  if (p.output < 0 || p.output >= p.num_values() || env[p.output] < 0) {
    throw Error(StrCat("oracle: program ", p.name, " has no output value"));
  }
  return env[p.output];
}

int PlainReverseMode::Scan(const Op& op, const std::vector<int>& inputs) {
  if (!op.body) throw Error(StrCat("oracle: ", Program::Describe(op), " has no body"));
  if (inputs.size() < 2) {
    throw Error(StrCat("oracle: ", Program::Describe(op), " needs a carry and at least one xs"));
  }
  const Shape& first = slots_[inputs[1]].shape();
  const int64_t length = first.rank() > 0 ? first.dim(0) : 0;
  for (size_t k = 1; k < inputs.size(); ++k) {
    if (IsScanConst(op, k)) continue;
    const Shape& xs = slots_[inputs[k]].shape();
    if (xs.rank() == 0 || xs.dim(0) != length || length == 0) {
      throw Error(StrCat("oracle: ", Program::Describe(op),
                         ": every xs needs the same non-empty leading axis; input ", k, " is ",
                         xs.ToString()));
    }
  }
  // Unrolled: step i runs the body on the carry and views of slice i.
  int carry = inputs[0];
  for (int64_t i = 0; i < length; ++i) {
    std::vector<int> params = {carry};
    for (size_t k = 1; k < inputs.size(); ++k) {
      if (IsScanConst(op, k)) {  // every step sees it whole (program.h)
        params.push_back(inputs[k]);
        continue;
      }
      Entry e;
      e.op = &op;
      e.slice = true;
      e.step = i;
      e.scan_input = static_cast<int>(k);
      e.inputs = {inputs[k]};
      e.output = NewSlot(slots_[inputs[k]].Slice(i));
      integer_.back() = integer_[inputs[k]];
      if (tracking()) mags_.push_back(mags_[inputs[k]].Slice(i));
      list_.push_back(e);
      Record("forward", e);
      params.push_back(e.output);
    }
    carry = Evaluate(*op.body, params);
  }
  return carry;
}

int PlainReverseMode::Primitive(const Program& p, const Op& op, const std::vector<int>& inputs) {
  std::vector<Shape> shapes;
  std::vector<const Tensor*> in;
  for (int s : inputs) {
    shapes.push_back(slots_[s].shape());
    in.push_back(&slots_[s]);
  }
  const OpRules& rules = RulesFor(op);
  const Shape shape = rules.shape(op, shapes);
  if (shape != p.shapes[op.output]) {
    throw Error(StrCat("oracle: ", Program::Describe(op), " gives ", shape.ToString(),
                       " where the program says ", p.shapes[op.output].ToString()));
  }
  Tensor out;
  {
    ScopedSite site(tracker_.get(), Category::kActivations, Program::Describe(op));
    out = Tensor::Zeros(DType::kF64, shape, tracker_, Category::kActivations);
  }
  rules.forward(op, in, out, &flops_forward_);
  if (tracking()) {
    ScopedSite site(tracker_.get(), Category::kActivations, Program::Describe(op));
    mags_.push_back(Magnitude(op, inputs, out));
  }
  ++op_runs_[Program::Describe(op)];
  Entry e;
  e.op = &op;
  e.inputs = inputs;
  e.output = NewSlot(out);
  list_.push_back(e);
  Record("forward", e);
  return e.output;
}

Tensor PlainReverseMode::Magnitude(const Op& op, const std::vector<int>& inputs, const Tensor& out) {
  oracle::MagnitudeArgs args{.op = op, .out = out, .tracker = tracker_};
  for (int s : inputs) {
    args.in.push_back(&slots_[s]);
    args.mags.push_back(&mags_[s]);
  }
  return RulesFor(op).magnitude(args);
}

// ---------------------------------------------------------------------------
// The backward pass. Each contribution is a new tensor of its input's shape
// (the op's VjpRule); Contribute adds it into the input's adjoint. FLOPs:
// this oracle's own count of the rules' loops (and one per element for each
// addition into an adjoint), only so that a run reports its backward work;
// it is not an engine's count.

void PlainReverseMode::Vjp(const Entry& e, const Tensor& dy_tensor) {
  if (e.slice) {
    // out = xs[step]: the step's adjoint goes to slice `step` of xs.
    Tensor c = NewGradient(dy_tensor.shape());
    std::memcpy(c.f64(), dy_tensor.f64(), dy_tensor.bytes());
    Contribute(e, 0, std::move(c));
    return;
  }
  oracle::VjpArgs args{.op = *e.op,
                       .dy = dy_tensor,
                       .tracker = tracker_,
                       .flops = &flops_backward_,
                       .contribute = [this, &e](int input, Tensor contribution) {
                         Contribute(e, input, std::move(contribution));
                       }};
  for (int s : e.inputs) args.in.push_back(&slots_[s]);
  RulesFor(*e.op).vjp(args);
}

void PlainReverseMode::Contribute(const Entry& e, int input, Tensor contribution) {
  if (captured_ != nullptr) {
    (*captured_)[input] = std::move(contribution);
    return;
  }
  if (options_.mutate_contribution) {
    options_.mutate_contribution(*e.op, e.slice ? e.scan_input : input, contribution);
  }
  const int slot = e.inputs[input];
  auto found = adjoints_.find(slot);
  if (e.slice) {
    // Into slice `step` of the stacked input's adjoint.
    if (found == adjoints_.end()) {
      found = adjoints_.emplace(slot, NewGradient(slots_[slot].shape())).first;
    }
    double* to = found->second.f64() + e.step * contribution.num_elements();
    for (int64_t i = 0; i < contribution.num_elements(); ++i) to[i] += contribution.f64()[i];
    flops_backward_ += contribution.num_elements();
    return;
  }
  if (found == adjoints_.end()) {
    adjoints_.emplace(slot, std::move(contribution));
    return;
  }
  double* to = found->second.f64();
  for (int64_t i = 0; i < contribution.num_elements(); ++i) to[i] += contribution.f64()[i];
  flops_backward_ += contribution.num_elements();
}

// ---------------------------------------------------------------------------
// The gradients' rounding magnitudes (OracleRoundingMagnitudes, oracle.h;
// magnitude_rules.cc states the rules' reasons): each entry's rule, given a
// way to rerun its VjpRule on substituted inputs (VjpWith).

std::vector<Tensor> PlainReverseMode::VjpWith(const Entry& e, const oracle::Substitute& substitute,
                                              const Tensor& dy) {
  std::vector<Tensor> saved;
  std::map<int, bool> replaced;  // a slot read twice (mul(x, x)) is replaced once
  for (int slot : e.inputs) {
    saved.push_back(slots_[slot]);
    if (integer_[slot] || replaced[slot]) continue;
    replaced[slot] = true;
    slots_[slot] = substitute(slots_[slot], mags_[slot]);
  }
  std::vector<Tensor> out(e.inputs.size());
  const int64_t flops = flops_backward_;
  captured_ = &out;
  try {
    Vjp(e, dy);
  } catch (...) {
    captured_ = nullptr;
    for (size_t k = 0; k < e.inputs.size(); ++k) slots_[e.inputs[k]] = saved[k];
    throw;
  }
  captured_ = nullptr;
  flops_backward_ = flops;  // the magnitudes are no part of the run's work
  for (size_t k = 0; k < e.inputs.size(); ++k) slots_[e.inputs[k]] = saved[k];
  return out;
}

void PlainReverseMode::MagnitudeVjp(const Entry& e, const Tensor& dy, const Tensor& mdy) {
  const auto add = [&](int slot, const Tensor& m, int64_t step) {
    auto found = adjoint_magnitudes_.find(slot);
    if (found == adjoint_magnitudes_.end()) {
      found = adjoint_magnitudes_
                  .emplace(slot, Tensor::Zeros(DType::kF64, slots_[slot].shape(), tracker_,
                                               Category::kGradients))
                  .first;
    }
    double* to = found->second.f64() + (step >= 0 ? step * m.num_elements() : 0);
    for (int64_t i = 0; i < m.num_elements(); ++i) to[i] += std::abs(m.f64()[i]);
  };
  if (e.slice) {  // a step's slice of a stacked input: its magnitude goes to slice `step`
    add(e.inputs[0], mdy, e.step);
    return;
  }
  oracle::GradMagnitudeArgs args{
      .op = *e.op,
      .y = slots_[e.output],
      .dy = dy,
      .mdy = mdy,
      .tracker = tracker_,
      .vjp_with = [this, &e](const oracle::Substitute& substitute, const Tensor& adjoint) {
        return VjpWith(e, substitute, adjoint);
      }};
  for (int s : e.inputs) {
    args.in.push_back(&slots_[s]);
    args.mags.push_back(&mags_[s]);
  }
  const std::vector<Tensor> m = RulesFor(*e.op).grad_magnitude(args);
  for (size_t k = 0; k < m.size(); ++k) {
    if (m[k].defined() && !integer_[e.inputs[k]]) add(e.inputs[k], m[k], -1);
  }
}

void PlainReverseMode::Record(const char* phase, const Entry& e) {
  if (schedule_ == nullptr) return;
  schedule_->push_back(StrCat(phase, " ", Program::Describe(*e.op),
                              e.slice ? StrCat(" step ", e.step, " of input ", e.scan_input) : "",
                              " -> ", slots_[e.output].TypeString()));
}

// Every value the list keeps: the arguments, then one line per op and type
// (the steps of a scan stacked into one). Views (a scan step's slice) share
// their stacked input's storage and are not counted again.
std::vector<Residual> PlainReverseMode::Residuals(const Program& program, int64_t* bytes) const {
  std::vector<Residual> out;
  for (int i = 0; i < program.num_params(); ++i) {
    Residual r;
    r.type = slots_[i].TypeString();
    r.source = StrCat("from the argument ", program.param_names[i]);
    r.bytes = slots_[i].bytes();
    r.is_argument = true;
    out.push_back(r);
  }
  *bytes = 0;
  std::map<std::string, size_t> line;  // source and type -> index in out
  for (const Entry& e : list_) {
    if (e.slice) continue;
    const Tensor& t = slots_[e.output];
    const std::string source = StrCat("output of ", Program::Describe(*e.op));
    const std::string key = StrCat(source, "|", t.TypeString());
    auto found = line.find(key);
    if (found == line.end()) {
      line.emplace(key, out.size());
      Residual r;
      r.type = t.TypeString();
      r.source = source;
      r.bytes = t.bytes();
      out.push_back(r);
    } else {
      Residual& r = out[found->second];
      r.bytes += t.bytes();
      r.count += 1;
      r.type =
          StrCat("f64[", r.count, t.shape().rank() > 0 ? "," : "", t.shape().ToString().substr(1));
    }
    *bytes += t.bytes();
  }
  return out;
}

}  // namespace

OracleMagnitudes OracleRoundingMagnitudes(const Program& program, const std::vector<Tensor>& args,
                                          const std::vector<int>& wrt) {
  OracleOptions options;
  PlainReverseMode mode(options);
  OracleMagnitudes out;
  mode.TrackMagnitudes(&out);
  mode.Run(program, args, wrt);
  return out;
}

Result OracleValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                          const std::vector<int>& wrt, const OracleOptions& options) {
  PlainReverseMode reverse_mode(options);
  return reverse_mode.Run(program, args, wrt);
}

Result OracleEngine::ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                                  const std::vector<int>& wrt, const RunOptions& options) {
  if (options.plan_only) {
    throw Error(StrCat("oracle: program ", program.name,
                       ": the oracle makes no plan (RunOptions::plan_only); it only runs"));
  }
  OracleOptions oracle_options;
  oracle_options.max_memory_bytes = options.max_memory_bytes;
  oracle_options.record_schedule = options.record_schedule;
  oracle_options.on_tracker = options.on_tracker;
  return OracleValueAndGrad(program, args, wrt, oracle_options);
}

}  // namespace remat
