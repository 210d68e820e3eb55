#include "engines/dtr/dtr_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <utility>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/api/rules.h"
#include "engines/exec/accumulate.h"
#include "engines/exec/residual_listing.h"
#include "engines/exec/run_memory.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace {

using dtr::CellId;
using dtr::CellPool;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A value of a frame: a cell, or a step of it (a scan's stacked input seen
// at step i, a step of that in a nested scan, ...): the slices are taken in
// order, each of the leading axis.
struct Handle {
  CellId cell = -1;
  std::vector<int64_t> slices;
};

Tensor Sliced(Tensor t, const std::vector<int64_t>& slices) {
  for (int64_t i : slices) t = t.Slice(i);
  return t;
}

// A bitwise fingerprint of a tensor (check_recompute_bits): FNV-1a.
uint64_t Fingerprint(const Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  if (t.dry()) return h;
  const unsigned char* p = static_cast<const unsigned char*>(t.raw());
  for (int64_t i = 0; i < t.bytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// One execution of a Program: the top level, a checkpoint region's body, a
// chain's body or one step of a scan. Frames made by the forward pass are
// kept for the backward pass, which walks them in reverse.
struct Frame {
  const Program* program = nullptr;
  Frame* parent = nullptr;
  const Op* op = nullptr;  // the op whose body this is; null at the top
  // A chain's body continues its enclosing program's running sums
  // (CONTRACT.md 3.6): its parameter i's cotangents go to the sum of the
  // chain op's input i.
  bool shares_parent_sums = false;
  std::vector<Handle> values;          // by value id
  std::vector<char> needs;             // by value id (CONTRACT.md section 2)
  std::vector<int64_t> uses;           // reads of each value in this frame, both passes
  std::vector<int64_t> backward_uses;  // of those, by backward rules
  std::vector<char> reads_saved;       // by op: its backward will run (needs its output)
  std::vector<Saves> saves;            // by op: what that backward reads
  std::vector<Tensor> sums;            // running cotangent sums, by value id
  std::vector<std::vector<std::unique_ptr<Frame>>> bodies;  // by op: its body's frames
};

class Run {
 public:
  // `memory` (engines/exec/run_memory.h) holds the run's tracker, with the
  // kernels bound to it; it outlives the Run and finishes the Result.
  Run(const Program& program, Kernels& kernels, RunMemory& memory, dtr::Heuristic heuristic,
      const RunOptions& options, int64_t cap)
      : program_(program),
        k_(kernels),
        memory_(memory),
        tracker_(memory.tracker()),
        pool_(heuristic),
        options_(options),
        cap_(cap) {}

  ~Run() {
    // The hook refers to this run's pool: it goes first, whatever happened.
    memory_.SetMemoryCap(0, nullptr);
    top_.reset();
    pool_.Clear();
  }

  // The value, the gradients and the Stats but the memory fields, which
  // RunMemory::Finish fills once the Run is gone.
  Result Go(const std::vector<Tensor>& args, const std::vector<int>& wrt);

 private:
  std::unique_ptr<Frame> NewFrame(const Program& program, Frame* parent, const Op* op,
                                  bool shares_parent_sums, const std::vector<Handle>& params,
                                  const std::vector<char>& param_needs);
  void Bind(Frame& f, int value, Handle h);
  Tensor AcquireHandle(const Handle& h) { return Sliced(pool_.Acquire(h.cell), h.slices); }

  void Forward(Frame& f);
  void ForwardPrimitive(Frame& f, const Op& op);
  void ForwardScan(Frame& f, int op_index);
  // Runs `op` again on its parents' tensors (sliced as the forward pass
  // sliced them): the value of cell `id`, of shape `expected`.
  Tensor Recompute(const Op& op, const std::vector<std::vector<int64_t>>& slices, CellId id,
                   const Shape& expected, const std::vector<Tensor>& parents);

  void Backward(Frame& f);
  void BackwardPrimitive(Frame& f, int op_index);
  void BackwardScan(Frame& f, int op_index);
  void ReleaseSaved(Frame& f, int op_index);
  // Releases the backward's uses of a frame whose backward will not run.
  void Skip(Frame& f);
  void Accumulate(Frame& f, int value, Tensor contribution);

  void ListResiduals();
  void Record(const char* what, const Op& op) {
    if (options_.record_schedule) schedule_.push_back(StrCat(what, " ", Program::Describe(op)));
  }

  const Program& program_;
  Kernels& k_;
  RunMemory& memory_;
  std::shared_ptr<MemoryTracker> tracker_;
  CellPool pool_;
  const RunOptions& options_;
  int64_t cap_;
  std::unique_ptr<Frame> top_;
  // Backward reads still to come, by cell: what the residual listing reads.
  std::vector<int64_t> backward_uses_;
  // The op that computes each cell; null for arguments.
  std::vector<const Op*> cell_ops_;
  // check_recompute_bits: each cell's fingerprint when first computed.
  std::vector<uint64_t> fingerprints_;
  Stats stats_;
  std::vector<std::string> schedule_;
  std::vector<std::pair<std::string, Handle>> state_;  // the state ops' values, in order
};

std::unique_ptr<Frame> Run::NewFrame(const Program& program, Frame* parent, const Op* op,
                                     bool shares_parent_sums, const std::vector<Handle>& params,
                                     const std::vector<char>& param_needs) {
  auto f = std::make_unique<Frame>();
  f->program = &program;
  f->parent = parent;
  f->op = op;
  f->shares_parent_sums = shares_parent_sums;
  const int n = program.num_values();
  const size_t num_ops = program.ops.size();
  f->values.resize(n);
  f->needs.assign(n, 0);
  f->uses.assign(n, 0);
  f->backward_uses.assign(n, 0);
  f->reads_saved.assign(num_ops, 0);
  f->saves.resize(num_ops);
  f->sums.resize(n);
  f->bodies.resize(num_ops);
  for (int p = 0; p < program.num_params(); ++p) f->needs[p] = param_needs[p];
  // A value needs a cotangent if any of its inputs does, in program order.
  for (const Op& o : program.ops) {
    bool need = false;
    for (int in : o.inputs) need = need || f->needs[in];
    f->needs[o.output] = need;
  }
  // Every read to come: one per op input (the forward pass), one per saved
  // input or output a backward rule will read, and one for the output, which
  // whoever binds it next releases (the enclosing frame, or the next step).
  for (size_t i = 0; i < num_ops; ++i) {
    const Op& o = program.ops[i];
    for (int in : o.inputs) ++f->uses[in];
    if (!IsPrimitive(o.kind) || !f->needs[o.output]) continue;
    std::vector<bool> needs_in;
    for (int in : o.inputs) needs_in.push_back(f->needs[in]);
    f->saves[i] = SavesFor(o.kind, needs_in);
    f->reads_saved[i] = 1;
    for (size_t j = 0; j < o.inputs.size(); ++j) {
      if (!f->saves[i].inputs[j]) continue;
      ++f->uses[o.inputs[j]];
      ++f->backward_uses[o.inputs[j]];
    }
    if (f->saves[i].output) {
      ++f->uses[o.output];
      ++f->backward_uses[o.output];
    }
  }
  ++f->uses[program.output];
  for (int p = 0; p < program.num_params(); ++p) Bind(*f, p, params[p]);
  return f;
}

void Run::Bind(Frame& f, int value, Handle h) {
  pool_.AddUses(h.cell, f.uses[value]);
  if (backward_uses_.size() <= static_cast<size_t>(h.cell)) backward_uses_.resize(h.cell + 1, 0);
  backward_uses_[h.cell] += f.backward_uses[value];
  f.values[value] = std::move(h);
}

void Run::Forward(Frame& f) {
  const Program& p = *f.program;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    switch (op.kind) {
      case OpKind::kCheckpoint:
      case OpKind::kChain: {
        // A region runs inline (dtr needs none); a chain is its blocks.
        std::vector<Handle> params;
        std::vector<char> needs;
        for (int in : op.inputs) {
          params.push_back(f.values[in]);
          needs.push_back(f.needs[in]);
        }
        std::unique_ptr<Frame> body =
            NewFrame(*op.body, &f, &op, op.kind == OpKind::kChain, params, needs);
        Forward(*body);
        const Handle out = body->values[op.body->output];
        Bind(f, op.output, out);
        pool_.ReleaseUse(out.cell);  // the body's output use
        for (int in : op.inputs) pool_.ReleaseUse(f.values[in].cell);
        f.bodies[i].push_back(std::move(body));
        break;
      }
      case OpKind::kScan: ForwardScan(f, static_cast<int>(i)); break;
      case OpKind::kName: {
        // The identity: the same cell under another name.
        const Handle in = f.values[op.inputs[0]];
        if (in.slices.empty()) pool_.AddLabel(in.cell, op.name);
        Bind(f, op.output, in);
        pool_.ReleaseUse(in.cell);
        Record("forward", op);
        ++stats_.op_runs[Program::Describe(op)];
        break;
      }
      case OpKind::kState: {
        // The identity, and the run's new state: its cell is kept to the
        // end (never evicted, never freed), as the result is.
        const Handle in = f.values[op.inputs[0]];
        pool_.MakePermanent(in.cell);
        state_.emplace_back(op.name, in);
        Bind(f, op.output, in);
        pool_.ReleaseUse(in.cell);
        Record("forward", op);
        ++stats_.op_runs[Program::Describe(op)];
        break;
      }
      default: ForwardPrimitive(f, op);
    }
  }
}

void Run::ForwardPrimitive(Frame& f, const Op& op) {
  pool_.Tick();
  const ScopedSite site(tracker_.get(), Category::kActivations, Program::Describe(op));
  std::vector<CellId> parents;
  std::vector<std::vector<int64_t>> slices;
  Tensor out;
  {
    std::vector<Tensor> in;
    for (int v : op.inputs) {
      const Handle& h = f.values[v];
      in.push_back(AcquireHandle(h));  // pinned: this op's inputs are not evicted
      parents.push_back(h.cell);
      slices.push_back(h.slices);
    }
    const int64_t flops = k_.flops();
    out = remat::Forward(k_, op, in);
    const int64_t cost = k_.flops() - flops;
    stats_.flops_forward += cost;
    ++stats_.op_runs[Program::Describe(op)];
    Record("forward", op);
    for (CellId c : parents) pool_.Unpin(c);
    // Copies are free in the FLOP model but not to run: a value costs at
    // least one per element it writes, so none scores zero.
    const int64_t weight = std::max(cost, out.num_elements());
    const CellId id = pool_.num_cells();
    if (options_.check_recompute_bits) {
      fingerprints_.resize(id + 1, 0);
      fingerprints_[id] = Fingerprint(out);
    }
    if (backward_uses_.size() <= static_cast<size_t>(id)) backward_uses_.resize(id + 1, 0);
    backward_uses_[id] = f.backward_uses[op.output];
    cell_ops_.resize(id + 1, nullptr);
    cell_ops_[id] = &op;
    dtr::RecomputeFn recompute = [this, &op, slices, id,
                                  shape = out.shape()](const std::vector<Tensor>& ps) {
      return Recompute(op, slices, id, shape, ps);
    };
    in.clear();
    pool_.AddComputed(std::move(out), parents, weight, std::move(recompute),
                      StrCat("output of ", Program::Describe(op)), f.uses[op.output]);
    f.values[op.output] = Handle{id, {}};
  }
  for (CellId c : parents) pool_.ReleaseUse(c);
}

Tensor Run::Recompute(const Op& op, const std::vector<std::vector<int64_t>>& slices, CellId id,
                      const Shape& expected, const std::vector<Tensor>& parents) {
  pool_.Tick();
  const ScopedSite site(tracker_.get(), Category::kActivations, Program::Describe(op));
  std::vector<Tensor> in;
  for (size_t j = 0; j < parents.size(); ++j) in.push_back(Sliced(parents[j], slices[j]));
  const int64_t flops = k_.flops();
  Tensor out = remat::Forward(k_, op, in);
  stats_.flops_recomputed += k_.flops() - flops;
  ++stats_.op_runs[Program::Describe(op)];
  Record("recompute", op);
  if (out.shape() != expected) {
    throw Error(StrCat("dtr: recomputing ", Program::Describe(op), " gave ", out.TypeString(),
                       ", the forward pass gave ", expected.ToString()));
  }
  if (options_.check_recompute_bits && Fingerprint(out) != fingerprints_.at(id)) {
    throw Error(StrCat("dtr: recomputing ", Program::Describe(op), " gave ", out.TypeString(),
                       " with other bits than the forward pass's (check_recompute_bits)"));
  }
  return out;
}

void Run::ForwardScan(Frame& f, int op_index) {
  const Op& op = f.program->ops[op_index];
  if (op.inputs.size() < 2) {
    throw Error(StrCat("dtr: ", Program::Describe(op),
                       " has no stacked input (a scan's inputs are carry, xs_1, ...)"));
  }
  const int64_t length = f.program->shapes[op.inputs[1]].dim(0);
  Handle carry = f.values[op.inputs[0]];
  char carry_need = f.needs[op.inputs[0]];
  // The carry entering step i > 0 needs a cotangent when the scan's carry
  // input does or any stacked input does, whatever the body computes
  // (CONTRACT.md 3.5): eager's rule, so eager's backward FLOPs and residuals.
  char any_xs_need = 0;
  for (size_t j = 1; j < op.inputs.size(); ++j) any_xs_need = any_xs_need || f.needs[op.inputs[j]];
  CellId previous_output = -1;
  for (int64_t step = 0; step < length; ++step) {
    std::vector<Handle> params = {carry};
    std::vector<char> needs = {carry_need};
    for (size_t j = 1; j < op.inputs.size(); ++j) {
      Handle x = f.values[op.inputs[j]];
      if (!IsScanConst(op, j)) x.slices.push_back(step);  // a const is seen whole
      params.push_back(std::move(x));
      needs.push_back(f.needs[op.inputs[j]]);
    }
    std::unique_ptr<Frame> body = NewFrame(*op.body, &f, &op, false, params, needs);
    if (previous_output >= 0) pool_.ReleaseUse(previous_output);  // now bound as this carry
    Forward(*body);
    carry = body->values[op.body->output];
    carry_need = f.needs[op.inputs[0]] || any_xs_need;
    previous_output = carry.cell;
    f.bodies[op_index].push_back(std::move(body));
  }
  Bind(f, op.output, carry);
  if (previous_output >= 0) pool_.ReleaseUse(previous_output);
  for (int in : op.inputs) pool_.ReleaseUse(f.values[in].cell);
}

void Run::ReleaseSaved(Frame& f, int op_index) {
  if (!f.reads_saved[op_index]) return;
  f.reads_saved[op_index] = 0;
  const Op& op = f.program->ops[op_index];
  auto release = [&](int v) {
    const CellId c = f.values[v].cell;
    --backward_uses_[c];
    pool_.ReleaseUse(c);
  };
  for (size_t j = 0; j < op.inputs.size(); ++j) {
    if (f.saves[op_index].inputs[j]) release(op.inputs[j]);
  }
  if (f.saves[op_index].output) release(op.output);
}

void Run::Skip(Frame& f) {
  for (size_t i = 0; i < f.program->ops.size(); ++i) {
    ReleaseSaved(f, static_cast<int>(i));
    for (auto& body : f.bodies[i]) Skip(*body);
    f.bodies[i].clear();
  }
}

void Run::Accumulate(Frame& f, int value, Tensor contribution) {
  Frame* frame = &f;
  while (frame->shares_parent_sums && value < frame->program->num_params()) {
    value = frame->op->inputs[value];
    frame = frame->parent;
  }
  // CONTRACT.md 3.3: the first contribution itself, then Add out of place.
  const ScopedSite site(tracker_.get(), Category::kGradients, tracker_->site());
  const int64_t flops = k_.flops();
  remat::Accumulate(k_, &frame->sums[value], std::move(contribution));
  stats_.flops_backward += k_.flops() - flops;
}

void Run::Backward(Frame& f) {
  const Program& p = *f.program;
  for (int i = static_cast<int>(p.ops.size()) - 1; i >= 0; --i) {
    const Op& op = p.ops[i];
    switch (op.kind) {
      case OpKind::kCheckpoint:
      case OpKind::kChain: {
        std::unique_ptr<Frame> body = std::move(f.bodies[i].at(0));
        f.bodies[i].clear();
        Tensor dout = std::move(f.sums[op.output]);
        f.sums[op.output] = Tensor();
        if (!f.needs[op.output] || !dout.defined()) {
          Skip(*body);
          break;
        }
        body->sums[op.body->output] = std::move(dout);
        Backward(*body);
        if (op.kind == OpKind::kCheckpoint) {
          // The region is a unit: each parameter's sum is one contribution
          // to the enclosing sums, in input order (CONTRACT.md 3.4). A chain's
          // blocks added theirs directly (3.6).
          for (size_t j = 0; j < op.inputs.size(); ++j) {
            if (!f.needs[op.inputs[j]] || !body->sums[j].defined()) continue;
            Accumulate(f, op.inputs[j], std::move(body->sums[j]));
          }
        }
        break;
      }
      case OpKind::kScan: BackwardScan(f, i); break;
      default: BackwardPrimitive(f, i);
    }
  }
}

void Run::BackwardPrimitive(Frame& f, int op_index) {
  const Op& op = f.program->ops[op_index];
  Tensor dout = std::move(f.sums[op.output]);
  f.sums[op.output] = Tensor();
  if (!f.reads_saved[op_index] || !dout.defined()) {
    ReleaseSaved(f, op_index);  // no cotangent: skipped (CONTRACT.md 3.1)
    return;
  }
  pool_.Tick();
  std::vector<Tensor> d;
  std::vector<bool> needs_in;
  {
    const ScopedSite site(tracker_.get(), Category::kGradients, Program::Describe(op));
    const Saves& saves = f.saves[op_index];
    std::vector<CellId> pinned;
    std::vector<Tensor> saved(op.inputs.size());
    std::vector<Shape> shapes;
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      const int v = op.inputs[j];
      needs_in.push_back(f.needs[v]);
      shapes.push_back(f.program->shapes[v]);
      if (!saves.inputs[j]) continue;
      saved[j] = AcquireHandle(f.values[v]);
      pinned.push_back(f.values[v].cell);
    }
    Tensor saved_output;
    if (saves.output) {
      saved_output = AcquireHandle(f.values[op.output]);
      pinned.push_back(f.values[op.output].cell);
    }
    const int64_t flops = k_.flops();
    d = remat::Backward(k_, op, saved, saved_output, dout, shapes, needs_in);
    stats_.flops_backward += k_.flops() - flops;
    Record("backward", op);
    saved.clear();
    saved_output = Tensor();
    dout = Tensor();
    for (CellId c : pinned) pool_.Unpin(c);
  }
  ReleaseSaved(f, op_index);
  const ScopedSite site(tracker_.get(), Category::kGradients, Program::Describe(op));
  for (size_t j = 0; j < op.inputs.size(); ++j) {
    if (needs_in[j] && d[j].defined()) Accumulate(f, op.inputs[j], std::move(d[j]));
  }
}

void Run::BackwardScan(Frame& f, int op_index) {
  const Op& op = f.program->ops[op_index];
  std::vector<std::unique_ptr<Frame>> steps = std::move(f.bodies[op_index]);
  f.bodies[op_index].clear();
  Tensor g = std::move(f.sums[op.output]);
  f.sums[op.output] = Tensor();
  if (!f.needs[op.output] || !g.defined()) {
    for (auto& step : steps) Skip(*step);
    return;
  }
  // Each stacked input's gradient: one tensor whose slice i is step i's
  // cotangent, copied bitwise; zeros where none reached (CONTRACT.md 3.5).
  std::vector<StackedGradient> stacked(op.inputs.size());
  {
    const ScopedSite site(tracker_.get(), Category::kGradients, Program::Describe(op));
    for (size_t j = 1; j < op.inputs.size(); ++j) {
      if (f.needs[op.inputs[j]]) {
        stacked[j] = StackedGradient(DType::kF32, f.program->shapes[op.inputs[j]], tracker_);
      }
    }
  }
  for (int step = static_cast<int>(steps.size()) - 1; step >= 0; --step) {
    std::unique_ptr<Frame> body = std::move(steps[step]);
    if (!g.defined()) {  // nothing reached the carry: earlier steps are skipped
      Skip(*body);
      continue;
    }
    body->sums[op.body->output] = std::move(g);
    g = Tensor();
    Backward(*body);
    g = body->needs[0] ? std::move(body->sums[0]) : Tensor();
    for (size_t j = 1; j < op.inputs.size(); ++j) {
      if (stacked[j].defined()) stacked[j].Set(step, body->sums[j]);
    }
  }
  const ScopedSite site(tracker_.get(), Category::kGradients, Program::Describe(op));
  if (f.needs[op.inputs[0]] && g.defined()) Accumulate(f, op.inputs[0], std::move(g));
  for (size_t j = 1; j < op.inputs.size(); ++j) {
    if (stacked[j].defined()) Accumulate(f, op.inputs[j], stacked[j].Finish());
  }
}

void Run::ListResiduals() {
  // One line per value, except that a value saved at every step of a scan
  // (the same op of the same body) is one line, stacked, as
  // print_saved_residuals shows it: the op is the stacking key. Blocks of a
  // chain traced at one source line are distinct ops: a line each.
  ResidualListing listing;
  for (CellId c = 0; c < pool_.num_cells(); ++c) {
    if (static_cast<size_t>(c) >= backward_uses_.size() || backward_uses_[c] <= 0 ||
        !pool_.resident(c)) {
      continue;
    }
    const Tensor& t = pool_.tensor(c);
    const Op* op = static_cast<size_t>(c) < cell_ops_.size() ? cell_ops_[c] : nullptr;
    if (op == nullptr) {
      listing.AddArgument(t, pool_.name(c));
    } else {
      listing.AddSaved(t, pool_.name(c), StrCat(reinterpret_cast<uintptr_t>(op)));
    }
  }
  listing.Fill(&stats_);
}

Result Run::Go(const std::vector<Tensor>& args, const std::vector<int>& wrt) {
  k_.reset_flops();
  k_.reset_kernel_seconds();
  if (cap_ > 0) {
    // The online decision point: at allocation time, evict until it fits.
    memory_.SetMemoryCap(cap_, [this](int64_t bytes_to_free) {
      const int64_t target = tracker_->live_bytes() - bytes_to_free;
      while (tracker_->live_bytes() > target && pool_.EvictOne()) {
      }
    });
  }
  const Clock::time_point t0 = Clock::now();
  // Arguments: counted, not owned, when already f32; tracked copies
  // otherwise (CONTRACT.md section 4). A buffer two arguments share counts once.
  std::vector<Handle> params;
  std::vector<char> needs(program_.num_params(), 0);
  for (int w : wrt) needs[w] = 1;
  {
    const std::vector<Tensor> inputs = memory_.Arguments(program_, args);
    for (int i = 0; i < program_.num_params(); ++i) {
      params.push_back(Handle{
          pool_.AddPermanent(inputs[i], StrCat("from the argument ", program_.param_names[i])), {}});
    }
  }
  top_ = NewFrame(program_, nullptr, nullptr, false, params, needs);
  Forward(*top_);
  const Handle output = top_->values[program_.output];
  pool_.MakePermanent(output.cell);  // the result: never evicted
  ListResiduals();
  stats_.seconds_forward = SecondsSince(t0);

  const Clock::time_point t1 = Clock::now();
  if (top_->needs[program_.output]) {
    // The output's cotangent: 1.
    const ScopedSite site(tracker_.get(), Category::kGradients, "the output's cotangent");
    Tensor seed = Tensor::Zeros(DType::kF32, Shape(), tracker_, Category::kGradients);
    if (!seed.dry()) seed.f32()[0] = 1.0f;
    top_->sums[program_.output] = seed;
    Backward(*top_);
  } else {
    Skip(*top_);
  }
  Result r;
  for (int w : wrt) {
    Tensor g = top_->sums[w];
    if (!g.defined()) {
      g = Tensor::Zeros(DType::kF32, program_.shapes[w], tracker_, Category::kGradients);
    }
    r.grads.push_back(g);
  }
  top_->sums.clear();
  {
    Tensor value = Sliced(pool_.tensor(output.cell), output.slices);
    if (pool_.name(output.cell).rfind("from the argument", 0) == 0 || !output.slices.empty()) {
      // Never the caller's buffer, nor a view of a larger one.
      const ScopedSite site(tracker_.get(), Category::kActivations, "the output");
      value = Copy(value, tracker_);
    }
    r.value = value;
  }
  for (const auto& [name, h] : state_) {
    Tensor t = Sliced(pool_.tensor(h.cell), h.slices);
    if (pool_.name(h.cell).rfind("from the argument", 0) == 0 || !h.slices.empty()) {
      const ScopedSite site(tracker_.get(), Category::kActivations, "the new state");
      t = Copy(t, tracker_);
    }
    r.state[name] = t;
  }
  stats_.seconds_backward = SecondsSince(t1);
  stats_.seconds_in_kernels = k_.kernel_seconds();
  stats_.kernel_calls = k_.kernel_calls();
  stats_.kernel_times = k_.kernel_times();
  stats_.predicted_peak_bytes = -1;
  r.stats = stats_;
  r.schedule = std::move(schedule_);
  return r;
}

}  // namespace

DtrEngine::DtrEngine(dtr::Heuristic heuristic)
    : heuristic_(heuristic), kernels_(std::make_unique<OneDnnKernels>()) {}

DtrEngine::~DtrEngine() = default;

std::string DtrEngine::kernels() const { return kernels_->name(); }

Result DtrEngine::RunOnce(const Program& program, const std::vector<Tensor>& args,
                          const std::vector<int>& wrt, const RunOptions& options, int64_t cap,
                          bool dry) {
  RunMemory memory(*kernels_, options, dry);
  Result r;
  {
    Run run(program, *kernels_, memory, heuristic_, options, cap);
    r = run.Go(args, wrt);
  }
  // Once the run's cells are gone: the stats from the tracker, the
  // arguments' counts released, the books checked.
  memory.Finish(&r);
  return r;
}

bool DtrEngine::FitsUnder(const Program& program, const std::vector<Tensor>& args,
                          const std::vector<int>& wrt, int64_t cap) {
  try {
    RunOnce(program, args, wrt, RunOptions(), cap, /*dry=*/true);
    return true;
  } catch (const MemoryCapError&) {
    return false;
  }
}

int64_t DtrEngine::SmallestFeasibleCap(const Program& program, const std::vector<Tensor>& args,
                                       const std::vector<int>& wrt, int64_t infeasible) {
  ValidateArguments(program, args, wrt);
  // Without a cap nothing is evicted: its peak is a cap that works.
  int64_t works = RunOnce(program, args, wrt, RunOptions(), 0, /*dry=*/true).stats.peak_bytes;
  int64_t fails = std::max<int64_t>(0, std::min(infeasible, works - 1));
  while (works - fails > 1) {
    const int64_t mid = fails + (works - fails) / 2;
    (FitsUnder(program, args, wrt, mid) ? works : fails) = mid;
  }
  return works;
}

Result DtrEngine::ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                               const std::vector<int>& wrt, const RunOptions& options) {
  ValidateArguments(program, args, wrt);
  const int64_t cap = options.memory_cap_bytes;
  if (cap < 0) {
    throw Error(StrCat(name(), ": program ", program.name, ": memory cap ", cap,
                       " bytes is negative (--memory-cap; 0 for none)"));
  }
  try {
    return RunOnce(program, args, wrt, options, cap, options.plan_only);
  } catch (const MemoryCapError& e) {
    // The run stopped at the cap, before allocating past it, and gave back
    // everything. Which cap would have worked is found without storage.
    const int64_t smallest = SmallestFeasibleCap(program, args, wrt, cap);
    ErrorFacts facts;
    facts.kind = ErrorKind::kCapTooSmall;
    facts.smallest_feasible_bytes = smallest;
    throw Error(StrCat(name(), ": program ", program.name, " does not run under a memory cap of ",
                       cap, " bytes (--memory-cap): ", e.what(),
                       "; the smallest cap that worked is ", smallest, " bytes"),
                facts);
  }
}

REMAT_REGISTER_ENGINE(dtr, "dtr",
                      "Dynamic Tensor Rematerialization: runs the program as written, evicts "
                      "the lowest h_DTR = cost / (size x staleness) under --memory-cap, "
                      "recomputes on demand",
                      [] { return std::make_unique<DtrEngine>(dtr::Heuristic::kDtr); });
REMAT_REGISTER_ENGINE(dtr_eq, "dtr_eq",
                      "dtr with h_DTR^eq: the evicted neighbourhood estimated by union-find "
                      "equivalence classes",
                      [] { return std::make_unique<DtrEngine>(dtr::Heuristic::kDtrEqClass); });

}  // namespace remat
