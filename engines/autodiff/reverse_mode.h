// ReverseMode: the reverse-mode executor. It differentiates a Program by the
// rules of engines/api/rules.h on one set of Kernels, carrying out what a
// Planner (planner.h) decides at each checkpoint region, scan and chain.
// eager, reference and recompute are this executor with different planners
// (InlinePlanner; SchedulePlanner over PolicyPlanner: planners.h), so their
// gradients are computed by the same code, in the same order, and agree bit
// for bit. Public: an engine whose decisions are static (a function of the
// program, not of what is live at run time) is a Planner over it.
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
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"
#include "engines/api/program.h"
#include "engines/api/tensor.h"
#include "engines/autodiff/planner.h"

namespace remat {

// Faults the executor commits on purpose, for the gallery of faulty engines
// (harness/gallery) that tests the conformance suite: each is a bug an engine
// could have, and the suite must catch every one. Test-only: nothing outside
// harness/gallery sets one. kNone, the default, is the interpreter as
// documented above; it costs a comparison at the few places a fault acts.
enum class Fault {
  kNone,
  // A value's contributions are summed in program order (its first reader's
  // first) instead of the reverse (CONTRACT.md section 3, rules 1-3).
  kSumInProgramOrder,
  // A running sum is replaced by each new contribution instead of adding it:
  // every contribution but the last is dropped.
  kOverwriteRunningSum,
  // The cotangent of a scan's initial carry, and block 0's contribution to a
  // scheduled chain's initial carry, are dropped (zeros are returned).
  kDropInitialCarryCotangent,
  // A value the backward pass reads is freed at its last forward use (the
  // tracker's live bytes drop there), and the storage of a freed value is
  // given to the next value the forward pass computes (which overwrites it)
  // while the tape still reads it: a use after free, without undefined
  // behaviour (the storage stays mapped, and is never given back: a leak
  // the tracker does not see, as it was told of the release).
  kResidualFreedEarly,
  // A honoured region's recomputation substitutes the values saved by the
  // region's last forward instance (a cache keyed by region, not instance):
  // in a scan, every step reads the last step's saved values.
  kStaleSavedValue,
  // The residuals a recomputation records for the backward pass have
  // their shape flattened (rank 2 and 3 become rank 1).
  kRecomputeShapeMismatch,
  // A checkpoint region's needed parameter that no cotangent reached
  // contributes zeros to the enclosing sums instead of nothing (CONTRACT.md
  // 3.4): a -0.0 sum becomes +0.0.
  kZerosForUnreachedRegionInput,
  // The carry entering scan step i > 0 needs a cotangent only if step i-1's
  // output depends on a needed value, not whenever a stacked input is
  // needed (CONTRACT.md 3.5): fewer backward FLOPs and residuals than eager.
  kScanCarryNeedsByDependence,
  // A needed stacked input's gradient that no step reached (all zeros) is
  // not contributed (CONTRACT.md 3.5): a -0.0 sum stays -0.0.
  kSkipAllZeroStackedGradient,
};

class ReverseMode {
 public:
  // `kernels` is bound to each run's tracker for the length of the run;
  // `planner` decides at every region, scan and chain. Both outlive the
  // ReverseMode. `fault` is test-only (see Fault).
  ReverseMode(Kernels* kernels, const Planner* planner, Fault fault = Fault::kNone)
      : kernels_(kernels), planner_(planner), fault_(fault) {}

  // value_and_grad of `program` (see engines/api/engine.h for the contract).
  Result Run(const Program& program, const std::vector<Tensor>& args,
             const std::vector<int>& wrt, const RunOptions& options);

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
  // sums as its blocks would, inline.
  std::vector<Tensor> Backward(const Program& program, Tape* tape, Tensor dout,
                               const std::vector<bool>& needs, const std::string& where,
                               std::vector<Tensor>* sums = nullptr);

  // Runs a structural op's body as if its ops stood in the enclosing program
  // (a checkpoint the engine does not honour, an unscheduled chain); with
  // `op_tape`, the body's tape goes to op_tape->body for Backward.
  Tensor ForwardInline(const Program& body, const std::vector<Tensor>& in,
                       const std::vector<bool>& needs, OpTape* op_tape, const std::string& where);
  void ForwardCheckpoint(const Op& op, const std::vector<Tensor>& in,
                         const std::vector<bool>& needs, OpTape* op_tape, bool run,
                         const std::string& where, Tensor* out);
  std::vector<Tensor> BackwardCheckpoint(const Op& op, OpTape* op_tape, const Tensor& dout,
                                         const std::string& where);
  // A scan reversed under a schedule (engines/schedule): the forward pass
  // keeps the schedule's snapshots, the backward pass replays its actions.
  // The planner's plan for a scan; the cost model its schedule is made for.
  LoopPlan PlanScan(const Program& program, const Op& op);
  // What `program` computes after the loop `op` in its forward pass
  // (engines/schedule's ChainCosts::after_bytes).
  int64_t AfterLoopBytes(const Program& program, const Op& op) const;
  // Activation bytes the run holds apart from a loop that is being scheduled
  // now: subtracted from a budget:B (see the .cc).
  int64_t HeldOutsideLoop() const;
  Tensor ForwardScheduledScan(const Op& op, std::shared_ptr<const Schedule> schedule,
                              const std::vector<Tensor>& in, const std::vector<bool>& needs,
                              OpTape* op_tape, const std::string& where);
  std::vector<Tensor> BackwardScheduledScan(const Program& program, const Op& op, OpTape* op_tape,
                                            const Tensor& dout, const std::vector<bool>& needs,
                                            const std::string& where);
  // Runs scan step i forward from `carry` (recording `tape` if not null).
  Tensor ScanStep(const Op& op, int64_t i, const Tensor& carry, const std::vector<Tensor>& in,
                  const std::vector<bool>& needs, Tape* tape, const std::string& where);

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
  // Whether the carry entering each step of a scan needs a cotangent
  // (CONTRACT.md 3.5), by step.
  std::vector<bool> CarryNeeds(const Op& op, const std::vector<bool>& needs, int64_t length) const;
  std::vector<Tensor> BackwardScan(const Program& program, const Op& op, OpTape* op_tape,
                                   const Tensor& dout, const std::vector<bool>& needs,
                                   const std::string& where);

  void Accumulate(Tensor* acc, const Tensor& contribution);
  bool Faulty(Fault f) const { return fault_ == f; }
  // Whether the region runs inline here: the planner's decision, or a
  // scheduled step's (or a fault's).
  bool Inline(const Op& region) const;
  // Fault::kResidualFreedEarly: frees (in the tracker's books) the residuals
  // in `tape` that share `value`'s storage, and hands that storage to the
  // next value computed; Reuse does the overwriting.
  void FreeEarly(const Tensor& value);
  void Reuse(const Tensor& out);
  void Log(const std::string& phase, const std::string& where, const Op& op,
           const Program& program);
  void CollectResiduals(const Tape& tape, std::vector<Tensor>* out) const;
  // Stats::residuals and residual_bytes from the tape (the forward pass's
  // end), by engines/exec/residual_listing.h.
  void ListResiduals(const Tape& tape, Stats* stats) const;

  Kernels* kernels_;
  const Planner* planner_;
  Fault fault_;
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
  // Fault state: the buffers freed early, and those whose storage awaits
  // the next value (kResidualFreedEarly); the saved values of each region's
  // last instance (kStaleSavedValue).
  std::set<const Buffer*> freed_early_;
  std::vector<Tensor> awaiting_reuse_;
  std::map<const Program*, std::map<int, Tensor>> stale_saved_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_REVERSE_MODE_H_
