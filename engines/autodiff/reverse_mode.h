// ReverseMode: the reverse-mode executor. It differentiates a Program by the
// rules of engines/api/rules.h on one set of Kernels, carrying out what a
// Planner (planner.h) decides at each checkpoint region, scan and chain.
// eager, reference and recompute are this executor with different planners
// (InlinePlanner; SchedulePlanner over PolicyPlanner: planners.h), so their
// gradients are computed by the same code, in the same order, and agree bit
// for bit. Public: an engine whose decisions are static (a function of the
// program, not of what is live at run time) is a Planner over it.
//
// How it runs: first a planning run, the whole run on a dry-run tracker
// (allocations counted, none made, no kernel run) under a PlanRecorder over
// the planner, which writes every decision into a Plan (plan.h); its Stats
// are the predicted ones. Then the run, under a PlanReader over that plan: it
// asks nothing of the planner, and a decision the plan lacks, or a loop that
// starts with other bytes live than planned, is an error. With
// RunOptions::record_plan the Result carries the plan's lines (remat plan).
//
// What it executes, in what order:
// - The forward pass runs the ops in program order and records a tape of
//   exactly the residuals each op's backward rule reads (SavesFor, with the
//   needs of CONTRACT.md section 2); values are freed at their last use.
// - A checkpoint region the planner honours keeps its inputs and the values
//   PlanSaves keeps (kOffload ones as host copies); its backward pass re-runs
//   the region's forward from those (only the ops whose results are needed:
//   a kept value is not recomputed) and differentiates it. Nested regions
//   recurse, so recursive checkpointing gives O(log D) residuals. A region
//   the planner inlines runs as if its ops stood in the enclosing program.
// - A scan without a schedule runs step by step, keeping every step's tape
//   (checkpoint_every:K: the steps between checkpointed ones run their
//   regions inline). A scan or chain with a schedule keeps the schedule's
//   snapshots, and its backward pass replays the schedule's actions
//   (engines/schedule's action language). Inside a scheduled step or block,
//   regions run inline: the schedule decides what is kept.
// - The backward pass walks the ops in reverse and frees each op's
//   residuals as soon as its rule has run.
//
// What it guarantees, whatever the planner decides:
// - CONTRACT.md section 3: ops in reverse program order (a scan's steps from
//   last to first); within an op, input cotangents in input order; a value's
//   cotangent is its first contribution, then Kernels::Add out of place
//   (engines/exec/accumulate.h); a scan's stacked gradients by rule 5; a
//   chain continues its enclosing sums (rule 6). So every planner gets
//   eager's bits.
// - CONTRACT.md section 4: one tracker per run (engines/exec/run_memory.h),
//   every byte counted in its category, nothing live after the Result but
//   its tensors; the residual listing from the tape when the forward pass
//   ends (engines/exec/residual_listing.h).
// - Memory prediction: the same executor with the same planner runs on a
//   dry-run tracker (allocations counted, none made, no kernel run), so the
//   predicted peak is that of the run, to the byte and the site.
#ifndef REMAT_ENGINES_AUTODIFF_REVERSE_MODE_H_
#define REMAT_ENGINES_AUTODIFF_REVERSE_MODE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"
#include "engines/api/program.h"
#include "engines/api/tensor.h"
#include "engines/autodiff/executor_rules.h"
#include "engines/autodiff/plan.h"
#include "engines/autodiff/planner.h"

namespace remat {

class StackedGradient;

class ReverseMode {
 public:
  // `kernels` is bound to each run's tracker for the length of the run;
  // `planner` decides at every region, scan and chain; `rules` are the
  // bookkeeping rules it applies (executor_rules.h; null: the contract's).
  // All outlive the ReverseMode.
  ReverseMode(Kernels* kernels, const Planner* planner, ExecutorRules* rules = nullptr)
      : kernels_(kernels), planner_(planner), rules_(rules ? rules : &ContractRules()) {}

  // value_and_grad of `program` (see engines/api/engine.h for the contract)
  // under `plan`, one PlanRun made for a program of the same structure, with
  // arguments of the same signature and the same wrt
  // (engines/exec/program_cache.h); null: PlanRun first. With
  // options.plan_only, the planning run's Result.
  Result Run(const Program& program, const std::vector<Tensor>& args,
             const std::vector<int>& wrt, const RunOptions& options,
             const Plan* plan = nullptr);
  // The planning run alone (plan.h): fills *plan and returns the dry run's
  // Result (its Stats are the prediction; tensors without data). `args` may
  // be shapes only.
  Result PlanRun(const Program& program, const std::vector<Tensor>& args,
                 const std::vector<int>& wrt, const RunOptions& options, Plan* plan);

 private:
  struct Tape;
  struct OpTape {
    std::vector<Tensor> inputs;  // saved inputs; undefined where not read
    Tensor output;               // saved output, when read
    std::vector<bool> needs;     // which input cotangents the backward computes
    std::unique_ptr<Tape> body;  // an inline checkpoint: the body's tape
    std::vector<Tape> steps;     // scan: one tape per step
    // A honoured checkpoint: the body values its policy saved (by body value
    // id; offloaded ones in the host tier), and in debug mode the hash of
    // every value the forward pass computed in it.
    std::map<int, Tensor> saved;
    std::map<int, uint64_t> hashes;
    bool honoured = false;
    // A scheduled scan: its schedule and the carries it keeps, by position
    // (position 0 is the scan's input), and the tapes of its taped steps
    // (kAdvanceTaped), by step, until kReverseTaped differentiates them.
    std::shared_ptr<const Schedule> schedule;
    std::map<int64_t, Tensor> snapshots;
    std::map<int64_t, std::unique_ptr<Tape>> taped;
    int64_t schedule_length = 0;  // steps the forward actions ran: the frontier the backward starts at
  };
  struct Tape {
    std::vector<OpTape> ops;
  };

  // What a honoured checkpoint's first forward pass keeps, and checks.
  struct Capture {
    std::vector<SaveDecision> decisions;  // by body value id (see PlanSaves)
    OpTape* into = nullptr;
  };
  // A recomputation: values to substitute instead of recomputing, and the
  // forward pass's hashes to compare with (debug mode).
  struct Recompute {
    const std::map<int, Tensor>* saved = nullptr;
    const std::map<int, uint64_t>* hashes = nullptr;
  };

  Result Execute(const Program& program, const std::vector<Tensor>& args,
                 const std::vector<int>& wrt, const RunOptions& options, bool dry_run);

  // Runs `program` on `inputs`. With a tape, records the residuals of the
  // inputs with needs[i] true; with a capture, keeps what a policy saves;
  // with a recompute, substitutes saved values and runs only needed ops.
  Tensor Forward(const Program& program, std::vector<Tensor> inputs,
                 const std::vector<bool>& needs, Tape* tape, const std::string& where,
                 const Capture* capture, const Recompute* recompute);
  // Returns the cotangent of each input with needs[i] true, consuming `tape`.
  // With `sums`, the inputs' cotangents start from (*sums)[i] and every
  // input's sum is returned: a chain adds to its enclosing program's running
  // sums as its blocks would, inline. With `into` (not with `sums`), input
  // i's cotangent may be written into into[i] where defined: when one
  // primitive op reads input i, once, and its rule takes the place
  // (BackwardArgs::into), the returned cotangent is that tensor.
  std::vector<Tensor> Backward(const Program& program, Tape* tape, Tensor dout,
                               const std::vector<bool>& needs, const std::string& where,
                               std::vector<Tensor>* sums = nullptr,
                               std::span<const Tensor> into = {});
  // A scan's backward pass, scheduled or not: the stacked inputs' gradients
  // filled slice by slice (CONTRACT.md 3.5), the inputs a step's cotangent
  // reached, and the carry's needs by step (ExecutorRules::CarryNeeds).
  struct ScanGradient {
    std::vector<StackedGradient> stacked;
    std::vector<bool> reached;
    std::vector<bool> carry_needs;
  };
  ScanGradient StartScanGradient(const Program& program, const Op& op,
                                 const std::vector<bool>& needs) const;
  // Differentiates scan step i from its tape: files its stacked inputs'
  // cotangents in g (written in their slices where StepCotangentPlaces
  // allows) and returns the cotangent of the carry entering it.
  Tensor BackwardScanStep(const Op& op, int64_t i, Tape* tape, Tensor carry_cot,
                          const std::vector<bool>& needs, ScanGradient* g,
                          const std::string& where);
  // The scan's input cotangents: the stacks', and the carry's from
  // `carry_cot` (the cotangent of the carry entering step 0).
  std::vector<Tensor> FinishScanGradient(const Op& op, const std::vector<bool>& needs,
                                         ScanGradient* g, Tensor carry_cot);
  // Where a scan step's backward pass may write its stacked inputs'
  // cotangents: slice `step` of each stack, for the inputs whose cotangent a
  // single op makes (Backward's `into`); empty when none may, or when a
  // recorder watches the run (planned's compiler places them itself).
  std::vector<Tensor> StepCotangentPlaces(const Op& op, int64_t step,
                                          const std::vector<StackedGradient>& stacked) const;

  // Runs a structural op's body as if its ops stood in the enclosing program
  // (a checkpoint the engine does not honour, an unscheduled chain); with
  // `op_tape`, the body's tape goes to op_tape->body for Backward.
  // A state op's value, run in the forward pass: Result::state's.
  void CommitState(const Op& op, const Tensor& value);
  Tensor ForwardInline(const Program& body, const std::vector<Tensor>& in,
                       const std::vector<bool>& needs, OpTape* op_tape, const std::string& where);
  void ForwardCheckpoint(const Op& op, const std::vector<Tensor>& in,
                         const std::vector<bool>& needs, OpTape* op_tape, bool run,
                         const std::string& where, Tensor* out);
  // `into`: Backward's, for the region's inputs.
  std::vector<Tensor> BackwardCheckpoint(const Op& op, OpTape* op_tape, const Tensor& dout,
                                         const std::string& where,
                                         std::span<const Tensor> into = {});
  // The region's input cotangents as its body's backward pass returns them
  // (recomputing a honoured region's forward first).
  std::vector<Tensor> RegionCotangents(const Op& op, OpTape* op_tape, const Tensor& dout,
                                       const std::string& where,
                                       std::span<const Tensor> into = {});
  // A scan reversed under a schedule (engines/schedule): the forward pass
  // keeps the schedule's snapshots, the backward pass replays its actions.
  // The planner's plan for a scan; the cost model its schedule is made for.
  LoopPlan PlanScan(const Program& program, const Op& op);
  // What `program` computes after the loop `op` in its forward pass
  // (engines/schedule's ChainCosts::after_bytes).
  int64_t AfterLoopBytes(const Program& program, const Op& op) const;
  // Activation bytes the run holds apart from a loop that is being scheduled
  // now: subtracted from a budget:B (see reverse_mode_scheduled.cc).
  int64_t HeldOutsideLoop() const;
  Tensor ForwardScheduledScan(const Op& op, std::shared_ptr<const Schedule> schedule,
                              const std::vector<Tensor>& in, const std::vector<bool>& needs,
                              OpTape* op_tape, const std::string& where);
  std::vector<Tensor> BackwardScheduledScan(const Program& program, const Op& op, OpTape* op_tape,
                                            const Tensor& dout, const std::vector<bool>& needs,
                                            const std::string& where);
  // Runs scan step i forward from `carry` (recording `tape` if not null);
  // `carry_needs` by step (ExecutorRules::CarryNeeds).
  Tensor ScanStep(const Op& op, int64_t i, const Tensor& carry, const std::vector<Tensor>& in,
                  const std::vector<bool>& needs, const std::vector<bool>& carry_needs,
                  Tape* tape, const std::string& where);

  // The steps of a scheduled scan or chain, for the action interpreter:
  // forward(i, carry, tape) runs step i from the carry entering it (keeping
  // its residuals in `tape` if not null); backward(i, tape, carry_cot)
  // differentiates it from its tape, files the cotangents of its other
  // inputs and returns the cotangent of the carry entering it.
  struct Steps {
    std::function<Tensor(int64_t, const Tensor&, Tape*)> forward;
    std::function<Tensor(int64_t, Tape*, Tensor)> backward;
  };
  // The forward actions of op_tape->schedule from `input`; returns the carry
  // at the end. The backward actions, from the cotangent of that carry;
  // returns the cotangent of `input` (undefined where none reaches it).
  Tensor ForwardScheduled(const Op& op, const Steps& steps, const Tensor& input, OpTape* op_tape);
  Tensor BackwardScheduled(const Steps& steps, const Tensor& input, Tensor dout, OpTape* op_tape);

  // A chain of blocks (OpKind::kChain): inline unless it has a schedule and
  // checkpoints are honoured.
  Tensor ForwardChain(const Program& p, const Op& op, const std::vector<Tensor>& in,
                      const std::vector<bool>& needs, OpTape* op_tape, const std::string& where);
  // Returns the sums of the chain's inputs' cotangents, continued from `sums`
  // (the enclosing program's sums so far, by input).
  std::vector<Tensor> BackwardChain(const Op& op, OpTape* op_tape, const Tensor& dout,
                                    std::vector<Tensor> sums, const std::string& where);
  // The planner's plan for a chain; the cost model of its blocks.
  LoopPlan PlanChain(const Program& p, const Op& op);
  // Block i of a chain forward from `carry` (unused for block 0), every
  // nested region inline.
  Tensor ChainStep(const Op& op, int64_t i, const Tensor& carry, const std::vector<Tensor>& in,
                   const std::vector<bool>& value_needs, Tape* tape, const std::string& where);
  Tensor ForwardScan(const Program& program, const Op& op, const std::vector<Tensor>& in,
                     const std::vector<bool>& needs, OpTape* op_tape, const std::string& where);
  std::vector<Tensor> BackwardScan(const Program& program, const Op& op, OpTape* op_tape,
                                   const Tensor& dout, const std::vector<bool>& needs,
                                   const std::string& where);

  // Hands the residuals just recorded in `op_tape` to the rules.
  void RecordResiduals(OpTape* op_tape);
  // Whether the region runs inline here: the planner's decision, or a
  // scheduled step's.
  bool Inline(const Op& region) const;
  void Log(const std::string& phase, const std::string& where, const Op& op,
           const Program& program);
  void CollectResiduals(const Tape& tape, std::vector<Tensor>* out) const;
  // Stats::residuals and residual_bytes from the tape (the forward pass's
  // end), by engines/exec/residual_listing.h.
  void ListResiduals(const Tape& tape, Stats* stats) const;

  Kernels* kernels_;
  const Planner* planner_;
  // The planner of the run in progress: a PlanRecorder over planner_ in the
  // planning run, a PlanReader over its plan in the run (plan.h).
  const Planner* active_planner_ = nullptr;
  ExecutorRules* rules_;
  RunOptions run_options_;
  std::shared_ptr<MemoryTracker> tracker_;
  bool recomputing_ = false;
  bool inline_checkpoints_ = false;  // in a step checkpoint_every stores
  int64_t recomputed_flops_ = 0;
  int64_t output_bytes_ = 0;  // the program's output, live through the backward pass
  std::map<std::string, int64_t> op_runs_;
  std::vector<std::string>* schedule_ = nullptr;
  // Where each live buffer came from, for the residual listing.
  std::unordered_map<const Buffer*, std::string> origin_;
  // The op that computed each live buffer (a scan body's op is one op at
  // every step): what stacks a scan's residuals into one listing line.
  std::unordered_map<const Buffer*, const Op*> producer_;
  std::unordered_map<const Buffer*, Tensor> arguments_;  // the whole argument, by buffer
  // The new state, as the forward pass's state ops give it (Result::state).
  std::map<std::string, Tensor> state_;
  // The run's tensor of each parameter a state op updates, by name.
  std::map<std::string, Tensor> state_params_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_REVERSE_MODE_H_
