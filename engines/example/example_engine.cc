// "example": a store-everything engine written from docs/engines.md ("Adding an
// engine" and CONTRACT.md, on engines/exec's building blocks: RunMemory for
// the tracker, arguments and Stats (section 4), Accumulate and
// StackedGradient for the order of accumulation (section 3),
// ResidualListing for Stats::residuals. Its own traversal: a tape per
// program execution, regions inline, scans step by step, no plan
// (predicted_peak_bytes -1). On eager's kernels, so held to eager's bits.
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/registry.h"
#include "engines/api/rules.h"
#include "engines/exec/accumulate.h"
#include "engines/exec/residual_listing.h"
#include "engines/exec/run_memory.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace {

// One execution of a program (the top level, a region's or chain's body, a
// scan step): what each op's backward rule reads.
struct Tape {
  std::vector<bool> needs;                  // by value (CONTRACT.md section 2)
  std::vector<std::vector<Tensor>> inputs;  // by op: the saved inputs
  std::vector<Tensor> outputs;              // by op: the saved output
  std::vector<std::vector<Tape>> bodies;    // by op: a body's tape, or a scan's steps
};

class ExampleEngine : public Engine {
 public:
  std::string name() const override { return "example"; }
  DType dtype() const override { return DType::kF32; }
  std::string kernels() const override { return k_.name(); }
  bool honours_checkpoints() const override { return false; }

  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    ValidateArguments(program, args, wrt);
    if (!options.plan_only) RequireArgumentData(program, args);
    RunMemory memory(k_, options, /*dry_run=*/options.plan_only);
    tracker_ = memory.tracker();
    // The run's tensors held by the engine go when the run does, thrown or
    // not (a refused run must leave its tracker at zero).
    struct Forget {
      ExampleEngine* e;
      ~Forget() {
        e->state_.clear();
        e->origin_.clear();
        e->arguments_.clear();
      }
    } forget{this};
    Result r;
    // RunOptions::record_schedule: a line per kernel run, as it runs.
    schedule_ = options.record_schedule ? &r.schedule : nullptr;
    op_runs_.clear();
    std::vector<bool> needs(program.num_params(), false);
    for (int w : wrt) needs[w] = true;
    Tape tape;
    k_.reset_flops();
    {
      const std::vector<Tensor> inputs = memory.Arguments(program, args);
      ResidualListing listing;
      for (int i = 0; i < program.num_params(); ++i) {
        origin_[inputs[i].buffer()] = {"from the argument " + program.param_names[i], false};
        arguments_[inputs[i].buffer()] = inputs[i];
      }
      ScopedSite site(tracker_.get(), Category::kActivations, "forward");
      r.value = Forward(program, inputs, needs, &tape, "");
      List(tape, memory, &listing);
      listing.Fill(&r.stats);
      origin_.clear();
      arguments_.clear();
    }
    r.stats.flops_forward = k_.flops();
    k_.reset_flops();
    {
      ScopedSite site(tracker_.get(), Category::kGradients, "backward");
      Tensor one = Tensor::Zeros(DType::kF32, Shape(), tracker_);
      if (!one.dry()) one.f32()[0] = 1.0f;
      std::vector<Tensor> cot = Backward(program, &tape, one, needs, nullptr);
      for (int w : wrt) {
        r.grads.push_back(cot[w].defined() ? cot[w]
                                           : Tensor::Zeros(DType::kF32, program.shapes[w], tracker_));
      }
    }
    r.stats.flops_backward = k_.flops();
    r.stats.op_runs = OpRuns(std::move(op_runs_));
    op_runs_.clear();
    r.state = std::move(state_);
    state_.clear();
    memory.Finish(&r);
    return r;
  }

 private:
  Tensor Forward(const Program& p, std::vector<Tensor> in, const std::vector<bool>& param_needs,
                 Tape* t, const std::string& where) {
    t->needs.assign(param_needs.begin(), param_needs.end());
    t->needs.resize(p.num_values(), false);
    for (const Op& op : p.ops) {
      for (int v : op.inputs) t->needs[op.output] = t->needs[op.output] || t->needs[v];
    }
    t->inputs.resize(p.ops.size());
    t->outputs.resize(p.ops.size());
    t->bodies.resize(p.ops.size());
    std::vector<Tensor> values = std::move(in);  // kept to the end: store everything
    values.resize(p.num_values());
    for (size_t k = 0; k < p.ops.size(); ++k) {
      const Op& op = p.ops[k];
      std::vector<Tensor> x;
      std::vector<bool> x_needs;
      for (int v : op.inputs) {
        x.push_back(values[v]);
        x_needs.push_back(t->needs[v]);
      }
      const std::string site = where + Program::Describe(op);
      tracker_->set_site(site);
      if (op.kind == OpKind::kCheckpoint || op.kind == OpKind::kChain) {
        t->bodies[k].resize(1);
        values[op.output] = Forward(*op.body, x, x_needs, &t->bodies[k][0], where);
      } else if (op.kind == OpKind::kScan) {
        const int64_t length = x[1].shape().dim(0);
        bool any_xs = false;
        for (size_t j = 1; j < x.size(); ++j) any_xs = any_xs || x_needs[j];
        t->bodies[k].resize(length);
        Tensor carry = x[0];
        for (int64_t i = 0; i < length; ++i) {
          std::vector<Tensor> step = {carry};
          for (size_t j = 1; j < x.size(); ++j) {
            step.push_back(IsScanConst(op, j) ? x[j] : x[j].Slice(i));  // consts whole (3.5)
          }
          std::vector<bool> step_needs = x_needs;
          step_needs[0] = x_needs[0] || (i > 0 && any_xs);  // CONTRACT.md 3.5
          carry = Forward(*op.body, step, step_needs, &t->bodies[k][i],
                          where + "scan step " + std::to_string(i) + ": ");
        }
        values[op.output] = carry;
      } else {
        values[op.output] = remat::Forward(k_, op, x);
        ++op_runs_[Program::Describe(op)];
        if (schedule_ != nullptr) schedule_->push_back("forward " + Program::Describe(op));
        // The source print_saved_residuals gives: the op, then its labels.
        const Buffer* out = values[op.output].buffer();
        // The new state: the forward pass runs every op once.
        if (op.kind == OpKind::kState) state_[op.name] = values[op.output];
        if (op.kind == OpKind::kName) {
          origin_[out].first += " named '" + op.name + "'";
        } else if (arguments_.count(out) == 0) {
          origin_[out] = {"output of " + Program::Describe(op), !where.empty()};
        }
        if (!t->needs[op.output]) continue;
        const Saves saves = SavesFor(op.kind, x_needs);
        t->inputs[k].resize(x.size());
        for (size_t j = 0; j < x.size(); ++j) {
          if (saves.inputs[j]) t->inputs[k][j] = x[j];
        }
        if (saves.output) t->outputs[k] = values[op.output];
      }
    }
    return values[p.output];
  }

  // Returns each parameter's cotangent sum (undefined: none reached it). A
  // chain's body continues the enclosing sums (`sums`, CONTRACT.md 3.6).
  std::vector<Tensor> Backward(const Program& p, Tape* t, Tensor dout,
                               const std::vector<bool>& param_needs, std::vector<Tensor>* sums) {
    std::vector<Tensor> cot(p.num_values());
    for (int i = 0; sums && i < p.num_params(); ++i) cot[i] = (*sums)[i];
    cot[p.output] = std::move(dout);
    for (int k = static_cast<int>(p.ops.size()) - 1; k >= 0; --k) {
      const Op& op = p.ops[k];
      Tensor d = std::move(cot[op.output]);
      // Op k's residuals are freed once its rule has run, or skipped it.
      const std::vector<Tensor> saved = std::move(t->inputs[k]);
      const Tensor saved_output = std::move(t->outputs[k]);
      std::vector<Tape> bodies = std::move(t->bodies[k]);
      if (!d.defined() || !t->needs[op.output]) continue;  // CONTRACT.md 3.1
      tracker_->set_site(Program::Describe(op));
      std::vector<bool> x_needs;
      std::vector<Shape> shapes;
      for (int v : op.inputs) {
        x_needs.push_back(t->needs[v]);
        shapes.push_back(p.shapes[v]);
      }
      std::vector<Tensor> din(op.inputs.size());
      if (op.kind == OpKind::kCheckpoint) {  // a unit (3.4)
        din = Backward(*op.body, &bodies[0], d, x_needs, nullptr);
      } else if (op.kind == OpKind::kChain) {  // continues the sums (3.6)
        std::vector<Tensor> chain_sums;
        for (int v : op.inputs) chain_sums.push_back(std::move(cot[v]));
        chain_sums = Backward(*op.body, &bodies[0], d, x_needs, &chain_sums);
        for (size_t j = 0; j < op.inputs.size(); ++j) cot[op.inputs[j]] = chain_sums[j];
        continue;
      } else if (op.kind == OpKind::kScan) {  // step by step (3.5)
        std::vector<StackedGradient> stacked(op.inputs.size());
        for (size_t j = 1; j < op.inputs.size(); ++j) {
          if (x_needs[j]) stacked[j] = StackedGradient(DType::kF32, shapes[j], tracker_);
        }
        for (int64_t i = static_cast<int64_t>(bodies.size()) - 1; i >= 0 && d.defined(); --i) {
          Tape& step = bodies[i];
          std::vector<bool> step_needs(step.needs.begin(), step.needs.begin() + op.inputs.size());
          std::vector<Tensor> ds = Backward(*op.body, &step, d, step_needs, nullptr);
          for (size_t j = 1; j < ds.size(); ++j) {
            if (stacked[j].defined() && ds[j].defined()) stacked[j].Set(i, ds[j]);
          }
          d = ds[0];
        }
        if (x_needs[0]) din[0] = d;
        for (size_t j = 1; j < op.inputs.size(); ++j) {
          if (stacked[j].defined()) din[j] = stacked[j].Finish();
        }
      } else {
        din = remat::Backward(k_, op, saved, saved_output, d, shapes, x_needs);
        if (schedule_ != nullptr) schedule_->push_back("backward " + Program::Describe(op));
      }
      for (size_t j = 0; j < op.inputs.size(); ++j) {  // input order (3.2)
        if (din[j].defined()) Accumulate(k_, &cot[op.inputs[j]], din[j]);
      }
    }
    std::vector<Tensor> out(p.num_params());
    for (int i = 0; i < p.num_params(); ++i) {
      if (param_needs[i] || sums) out[i] = cot[i];
    }
    return out;
  }

  // The saved tensors, as print_saved_residuals lists them (a value of a
  // scan's body stacked over the steps).
  void List(const Tape& t, const RunMemory& memory, ResidualListing* listing) {
    auto add = [&](const Tensor& s) {
      if (!s.defined()) return;
      const auto& [source, in_scan] = origin_.at(s.buffer());
      if (memory.IsArgument(s.buffer())) {
        listing->AddArgument(arguments_.at(s.buffer()), source);  // the whole argument
      } else {
        listing->AddSaved(s, source, in_scan ? source : "");  // a scan's steps: one line
      }
    };
    for (size_t k = 0; k < t.inputs.size(); ++k) {
      for (const Tensor& s : t.inputs[k]) add(s);
      add(t.outputs[k]);
      for (const Tape& body : t.bodies[k]) List(body, memory, listing);
    }
  }

  OneDnnKernels k_;
  std::shared_ptr<MemoryTracker> tracker_;
  std::vector<std::string>* schedule_ = nullptr;  // the run's Result::schedule, or null
  OpRuns::Map op_runs_;                            // the run's Stats::op_runs
  // Each buffer's source, and whether a scan step computed it.
  std::unordered_map<const Buffer*, std::pair<std::string, bool>> origin_;
  std::unordered_map<const Buffer*, Tensor> arguments_;
  std::map<std::string, Tensor> state_;  // the state ops' values (Result::state)
};

}  // namespace

REMAT_REGISTER_ENGINE(example, "example",
                      "a store-everything engine on engines/exec's building blocks (the README's "
                      "example)",
                      [] { return std::make_unique<ExampleEngine>(); });

}  // namespace remat
