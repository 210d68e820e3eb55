// The Engine interface: every engine computes the value and the gradients of
// a Program's scalar output, and reports what that cost.
//
//   std::unique_ptr<Engine> engine = MakeEngine("eager");
//   Result r = engine->ValueAndGrad(program, args, /*wrt=*/{0, 1});
//
// The whole contract (the order of accumulation that bit-for-bit agreement
// with eager depends on, and the memory accounting the suite checks) is
// engines/api/CONTRACT.md. In short:
// - args[i] matches the program's parameter i in shape; engines accept f32 or
//   f64 arguments and convert to their own dtype (the oracle and the
//   reference run in f64).
// - grads[j] is the gradient with respect to parameter wrt[j], in the
//   engine's dtype; value is rank 0.
// - All storage of a run is allocated through one MemoryTracker per run
//   (Result::tracker); once the Result's tensors are dropped, its live bytes
//   are back to zero.
// - Bad input (argument count, shapes, wrt) throws remat::Error naming it.
#ifndef REMAT_ENGINES_API_ENGINE_H_
#define REMAT_ENGINES_API_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/memory_tracker.h"
#include "engines/api/program.h"
#include "engines/api/stats.h"
#include "engines/api/tensor.h"

namespace remat {

struct RunOptions {
  // Live device bytes a run may reach. When the engine predicts its peak, a
  // predicted peak past the limit throws remat::Error before anything is
  // allocated; otherwise the allocation that would pass it throws. 0: none.
  int64_t max_memory_bytes = 0;
  // A cap on live device bytes that engines which rematerialize online
  // (Engine::honours_memory_cap()) stay under by evicting tensors and
  // recomputing them when needed: the measured peak never passes it, and the
  // gradients are the same bits as without it. A cap the program cannot run
  // in throws remat::Error naming the smallest cap that worked, before the
  // run allocates past what the cap allows. Unlike max_memory_bytes, which
  // refuses a run, the cap changes how the run goes. Other engines ignore
  // it. 0: none.
  int64_t memory_cap_bytes = 0;
  // Predict the peak from the schedule (a dry run: the same schedule with
  // allocations counted, none made, no kernel run) before running.
  bool predict_memory = true;
  // Only predict: return the dry run's Result (its Stats; tensors without
  // data). Arguments may then be shapes only (tensors of a dry-run tracker),
  // so a problem far larger than memory can be planned.
  bool plan_only = false;
  // Record the schedule as executed (Result::schedule).
  bool record_schedule = false;
  // Record the plan the run carried out (Result::plan).
  bool record_plan = false;
  // Time kernels' arithmetic (Stats::seconds_in_kernels): two clock reads a
  // kernel call, tens of ns where a scalar kernel takes about as much. The
  // bench times its samples without (false) and measures the kernels' share
  // in runs of their own. Stats::kernel_calls is counted either way.
  bool time_kernels = true;
  // Determinism check of recomputation (PyTorch's determinism_check): every
  // recomputed value must have the shape and dtype of the forward pass's; in
  // this debug mode, also the same bits. A mismatch throws remat::Error.
  bool check_recompute_bits = false;
  // Called with every tracker the run creates (the dry run's too), as soon
  // as it exists: a caller can then check that a run which threw released
  // everything it had allocated (live bytes back to 0). Null: not called.
  std::function<void(const std::shared_ptr<MemoryTracker>&)> on_tracker;
};

struct Result {
  Tensor value;
  std::vector<Tensor> grads;
  Stats stats;
  std::shared_ptr<MemoryTracker> tracker;
  // With RunOptions::record_schedule: one line per op executed, in order,
  // each marked forward, recompute or backward.
  std::vector<std::string> schedule;
  // With RunOptions::record_plan, from an engine that plans before it runs
  // (engines/autodiff/plan.h): one line per decision of the plan the run
  // carried out. Empty for an engine that decides online.
  std::vector<std::string> plan;
  // The program's new state (CONTRACT.md, state): for every state op, the
  // value of its input as the forward pass computed it, under the name of
  // the parameter it updates; once per run, whatever the engine recomputes.
  // Empty for a program without state ops.
  std::map<std::string, Tensor> state;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  virtual DType dtype() const = 0;
  // The kernel set the engine computes with (Kernels::name(): "onednn" for
  // eager's f32 kernels, "reference" for the float64 loops); "" for kernels
  // of its own. An engine on eager's kernels declares it and is then held to
  // eager's bits: the conformance suite compares its value and gradients with
  // eager's by memcmp, under every policy and schedule, not with a tolerance.
  virtual std::string kernels() const { return ""; }
  // Whether the engine honours a program's checkpoint regions (their
  // policies, checkpoint_name labels) and the schedules of its scans and
  // chains: saves what they allow and recomputes the rest. False for an
  // engine that runs them inline and stores everything (eager, reference).
  virtual bool honours_checkpoints() const = 0;
  // Whether the engine honours RunOptions::memory_cap_bytes (evicts and
  // rematerializes online to stay under it). The command line refuses
  // --memory-cap for an engine that does not; the conformance suite holds
  // one that does to the cap (peak <= cap, eager's bits, a clear error below
  // the smallest cap that works).
  virtual bool honours_memory_cap() const { return false; }
  virtual Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                              const std::vector<int>& wrt, const RunOptions& options = {}) = 0;
};

// Throws remat::Error unless `args` fit `program`'s parameters, `wrt`
// names distinct parameters and the program's state ops are valid
// (CheckStateOps).
void ValidateArguments(const Program& program, const std::vector<Tensor>& args,
                       const std::vector<int>& wrt);

}  // namespace remat

#endif  // REMAT_ENGINES_API_ENGINE_H_
