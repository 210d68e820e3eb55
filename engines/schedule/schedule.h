// Checkpointing schedules for reversing a scan, or a chain of blocks (a step
// is then a block: OpKind::kChain): which carries to keep, what to recompute. Pure bookkeeping: no tensors, no interpreter. The recompute engine
// runs a Schedule's actions; this file defines the action language, the
// generators (PyTorch's checkpoint every k, checkpoint_sequential, recursive
// bisection, Griewank & Walther's Revolve, a memory-budget optimum after
// Beaumont et al.'s Rotor), and Simulate, which checks a schedule and is the
// cost model every generator is measured by.
//
// The chain. A scan of L steps: carry_{i+1} = step_i(carry_i), i = 0..L-1.
// Position i is the point between steps i-1 and i; "the carry at i" enters
// step i. Position 0 is the scan's input: it is always kept (by the caller),
// may be restored at any time and is never counted. The carry at L is the
// scan's output. Reversing the chain means differentiating steps L-1 down to
// 0; the frontier is the first step not yet differentiated (L at first, 0 when
// done): the cotangent of the carry at the frontier is what arrives next.
//
// The actions. A schedule runs on a machine with a position p, the carry at p
// (the "current carry", which may be consumed), a set of kept snapshots
// (positions > 0) and the frontier.
//   kAdvance n   run steps p..p+n-1 forward keeping nothing; p += n. n >= 1.
//                Forward pass: p + n <= L. Backward pass: p + n < frontier
//                (a carry at or past the frontier is never needed).
//   kSnapshot    keep the current carry, at p: 0 < p < L (forward pass),
//                0 < p < frontier (backward pass), p not already kept. n = 0.
//   kRestore n   the current carry := the kept carry at position n (n = 0 or a
//                snapshot, n < frontier); p = n.
//   kDrop n      stop keeping the snapshot at n.
//   kReverse n   requires p + n == frontier and a current carry: runs steps
//                p..p+n-1 forward keeping their residuals, then differentiates
//                them from the last to the first; frontier = p. The current
//                carry is consumed: a kRestore must follow before any
//                kAdvance, kSnapshot or kReverse. No step in p..p+n-1 may
//                be taped (kReverseTaped differentiates those).
//   kAdvanceTaped n
//                Rotor's second mode (F_all): run steps p..p+n-1 forward as
//                kAdvance does, but keep each one's residuals (its "tape")
//                until kReverseTaped differentiates it; p += n. Forward
//                pass: p + n <= L, at no recomputation cost (the forward
//                pass is free). Backward pass: p + n < frontier, with a
//                current carry; the steps count as recomputation. None of
//                the steps may already be taped.
//   kReverseTaped n
//                differentiates the taped steps frontier-n..frontier-1 from
//                their tapes, from the last to the first, without running
//                them again; frees the tapes; frontier -= n. Every one of
//                those steps must be taped; a current carry, if there is
//                one, must lie below the new frontier (p < frontier - n) and
//                stays as it is.
// No kAdvance or kAdvanceTaped runs a taped step again: a tape is taken once
// and its step's output carry is what the run goes on from.
// A Schedule has two lists. The forward pass starts at p = 0 with the input
// as current carry, holds only kAdvance, kAdvanceTaped and kSnapshot, and
// ends at p = L (the
// carry at L is the scan's output; the forward pass computes it for free: it
// is not recomputation). The backward pass starts with p = L and no current
// carry (the output belongs to the caller), must bring the frontier from L to
// 0 and end with no snapshot kept. Every generator here drops each snapshot
// right after its last kRestore (the current carry then owns those bytes).
//
// The memory model (peak_bytes, Budget and the tests all use it). The bytes
// live at a moment are
//   the carry_bytes of every kept snapshot (position 0 never counts)
//   + the current carry's carry_bytes, when there is one and it is not itself
//     a kept carry (a restored or just-snapshotted carry aliases the kept one:
//     tensors are reference counted, so it is not counted twice; after kDrop of
//     its position it counts as the current carry)
//   + residual_bytes[i] for every taped step i: from its kAdvanceTaped until
//     the kReverseTaped that differentiates it (the carry a taped step
//     produces is the current carry, counted as above)
//   + at the forward pass's end (p = L), ChainCosts::after_bytes: what the
//     run computes after the chain while the forward pass's snapshots and
//     tapes are live
//   + during a kReverse of steps a..b-1: sum of residual_bytes[a..b-1] +
//     carry_bytes[b]; the current carry is consumed by the kReverse and not
//     counted (what step a needs of it is in its residual_bytes). In the
//     run, carry_bytes[b] is the last step's output, which the kReverse's
//     forward half computes next to all the residuals: the model counts
//     activations (the cotangent arriving, of the same size, is a gradient),
//     so a budget bounds the activations a run measures.
// Memory is sampled between steps: a step's own transient memory (its input
// and output side by side, temporaries) is not modelled, nor is the cotangent
// waiting at the frontier between two kReverses (it is the caller's running
// gradient; the model counts what the schedule chooses to keep).
// peak_bytes is the maximum over both passes.
#ifndef REMAT_ENGINES_SCHEDULE_SCHEDULE_H_
#define REMAT_ENGINES_SCHEDULE_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engines/api/schedule_spec.h"
#include "engines/api/units.h"

namespace remat {

enum class ActionKind { kAdvance, kSnapshot, kRestore, kDrop, kReverse, kAdvanceTaped, kReverseTaped };

// n: steps (kAdvance, kReverse, kAdvanceTaped, kReverseTaped), position
// (kRestore, kDrop), 0 (kSnapshot).
struct Action {
  ActionKind kind;
  int64_t n = 0;
  bool operator==(const Action&) const = default;
};

// "kAdvance 3", "kSnapshot", "kRestore 8".
std::string ToString(const Action& action);
// The actions joined by ", ".
std::string ToString(const std::vector<Action>& actions);

struct Schedule {
  std::string name;             // the spec that ParseSchedule maps back to it: "revolve:8"
  std::vector<Action> forward;  // p = 0 -> L: only kAdvance, kAdvanceTaped and kSnapshot
  std::vector<Action> backward; // frontier L -> 0, then no snapshot left
};

// The costs of a chain of L steps; steps may differ.
struct ChainCosts {
  std::vector<double> step_flops;       // L entries: forward cost of step i
  std::vector<int64_t> carry_bytes;     // L+1 entries: the carry entering step i (i = L: the output)
  std::vector<int64_t> residual_bytes;  // L entries: what step i keeps for its backward (kReverse, tape)
  // What the run computes after the chain's forward pass, while everything
  // the forward pass keeps (snapshots, tapes, the output) is live: the rest
  // of the program's forward pass. Counted on top of the forward pass's last
  // moment (at p = L). >= 0.
  int64_t after_bytes = 0;

  // L steps of equal cost and size. length >= 1, sizes >= 0.
  static ChainCosts Uniform(int64_t length, double step_flops, int64_t carry_bytes,
                            int64_t residual_bytes);
  int64_t length() const { return static_cast<int64_t>(step_flops.size()); }
  // The forward pass's last moment beyond what it keeps: the output and
  // what the run computes after it.
  int64_t EndBytes() const { return carry_bytes.back() + after_bytes; }
  // Throws remat::Error unless L >= 1, the vectors have L, L+1 and L entries,
  // and every flop count is finite and >= 0 and every size >= 0.
  void Validate() const;
};

struct ScheduleCost {
  double recomputed_flops = 0;   // forward work in the backward pass: kAdvance, kAdvanceTaped
                                 // and kReverse's forward half
  int64_t recomputed_steps = 0;  // the same in steps (a kReverse n counts n)
  int64_t taped_steps = 0;       // steps differentiated from a tape (kReverseTaped)
  int64_t peak_bytes = 0;        // the memory model's high-water mark over both passes
  int max_snapshots = 0;         // most snapshots kept at once (position 0 not counted)
};

// Runs the action lists on the cost model, checking every rule above. A
// violation throws remat::Error naming the phase, the action index and what is
// wrong: "backward action 7 (kReverse 3): p + n = 5 but the frontier is 8".
ScheduleCost Simulate(const Schedule& schedule, const ChainCosts& costs);

// The generators. All take the chain length L >= 1 and throw remat::Error on
// invalid parameters. The fixed-pattern generators below (every:K to
// revolve:C) take no tapes: every step's cotangent passes through kReverse
// and each step is recomputed at least once (a kReverse's forward half), so
// recomputed_steps >= L for them. Budget also takes tapes.

// PyTorch's checkpoint every k steps (k >= 1): the forward pass keeps the
// carries at k, 2k, ... (< L); the backward pass reverses the segments from
// the last, each with one kReverse from its restored start. Name "every:K".
Schedule EveryK(int64_t length, int64_t k);
// checkpoint_sequential with `segments` >= 1 segments: EveryK with k =
// ceil(L / min(segments, L)) (more segments than steps: one per step). Name
// "segments:K".
Schedule Segments(int64_t length, int64_t segments);
// EveryK with k = round(sqrt(L)): about 2 sqrt(L) carries and residuals kept
// at once. Name "sqrt".
Schedule Sqrt(int64_t length);
// Recursive bisection: split [a, b) at a + (b-a)/2, reverse the right half
// then the left; the forward pass takes the first sweep's snapshots
// (L/2, 3L/4, ...). ceil(log2 L) snapshots at most, each step reversed by a
// kReverse 1, about L log2(L) / 2 recomputed steps. Name "bisect".
Schedule Bisect(int64_t length);
// Griewank & Walther's binomial checkpointing with `slots` >= 0 snapshot
// slots (position 0 is free and not counted): the fewest recomputed steps
// possible for that many snapshots with single-step kReverse, namely
// RevolveRecomputedSteps(L, slots). The forward pass takes the snapshots of
// the first sweep. max_snapshots <= slots. Name "revolve:C".
Schedule Revolve(int64_t length, int slots);
// The closed form of Revolve's cost in this model (recomputed steps in the
// backward pass, a kReverse 1 counting one step): with
//   g(c, u) = C(c+u+1, c+1) - 1  (the longest chain that c slots reverse with
//                                 no step run more than u times backward)
// and u the smallest integer >= 1 with g(slots, u) >= L,
//   RevolveRecomputedSteps(L, c) = u*L + u - C(c+u+1, c+2).
// Hence L when slots >= L-1 and L(L+1)/2 when slots = 0. Throws remat::Error
// if the result overflows int64.
int64_t RevolveRecomputedSteps(int64_t length, int slots);

// The schedule with the fewest recomputed FLOPs whose Simulate peak_bytes is
// <= budget_bytes, over snapshots anywhere, single-step and multi-step
// kReverse, and Rotor's second mode (taped steps, in the forward pass and in
// recomputation): dynamic programming over the chain, after Beaumont et al.'s
// Rotor (steps may differ in flops and sizes). At each segment the DPs either
// keep the start's carry and advance (kSnapshot, kReverse) or run the first
// step taped and go on from its output (kAdvanceTaped, then kReverseTaped
// once the rest is reversed). More memory never recomputes more; between body
// checkpointing and eager's whole tape, recomputation falls at least in
// proportion to the memory (each step taped instead of kept costs its
// residual less its carry, and saves its rerun). Name "budget:BYTES". Throws
// remat::Error if no schedule fits: "budget 1000 bytes is too small for this
// chain: the smallest feasible is 4096 bytes" (MinimumFeasibleBytes).
//
// Memory is counted in levels of `unit` bytes below the budget; keeping a
// snapshot costs ceil(carry_bytes / unit) levels, a tape ceil(residual_bytes
// / unit). unit is the gcd of the carry and residual sizes (exact) unless that makes too many levels for the time and
// table limits (about a quarter of a second); then it is rounded up to
// budget / (the levels that fit): the schedule still fits the budget, but a
// snapshot may be charged more than its size, so it may recompute more than
// the optimum.
//   Uniform chains (equal step_flops, residual_bytes and carry_bytes at
//     1..L; position 0 never counts): Rotor's form (every snapshot kept until
//     its segment is done; the exhaustive tests find nothing better on
//     uniform chains) by segment length, O(L^2) per level, vectorised: exact
//     up to about 3e9 / L^2 levels of gcd(carry, residual) bytes (178 at L =
//     4096), rounded beyond. L = 4096 takes under a second (0.8 s at 1000
//     carries on a busy machine). At most 20000 steps.
//   Other chains: the exact DP over every schedule of the action language,
//     including snapshots dropped before their segment is done (stepping
//     stones: with differing sizes these beat Rotor's form), O(L^4 / 8) per
//     level, when its limits allow gcd units (about 100 steps and fewer
//     levels than 3e6 / (L^3 / 3)). Otherwise the best of: the same with
//     rounded units (up to about 104 steps), Rotor's form, O(L^3 / 6) per
//     level (up to about 610 steps), and the uniform chain of the largest
//     carry and residual (its schedule fits this chain too; below its
//     smallest feasible budget, the schedule that keeps nothing but the
//     input). Non-uniform chains of hundreds of steps get good, not optimal,
//     schedules, in under 0.6 s.
// In every case eager's schedule (every step taped in the forward pass) is
// taken when it fits: it recomputes nothing.
Schedule Budget(const ChainCosts& costs, int64_t budget_bytes);
// The smallest peak_bytes of any schedule: the forward pass's largest carry
// (at L: EndBytes), or the best partition of the chain into kReverse segments
// (residuals plus the arriving cotangent), whichever is larger. Tapes do not
// lower it (a taped step holds its residual and its output, as a kReverse 1
// does).
int64_t MinimumFeasibleBytes(const ChainCosts& costs);

// "every:K", "segments:K", "sqrt", "bisect", "revolve:C", "budget:BYTES" for
// the chain `costs` describes. Anything else throws remat::Error listing the
// valid forms.
//
// budget:B bounds the activations of the whole run, not only the chain's:
// `held_bytes` is what the run holds apart from the chain while it runs and
// reverses (values computed before it and still live, the program's output,
// which lives through the backward pass), and the chain is solved for
// B - held_bytes (the schedule keeps the name "budget:B"). A budget that
// leaves the chain less than MinimumFeasibleBytes throws, naming the
// smallest feasible B (held bytes included).
Schedule ParseSchedule(const std::string& spec, const ChainCosts& costs,
                       int64_t held_bytes = 0);

// ParseBytes (engines/api/units.h) and ParseScheduleSpec, ScheduleForms
// (engines/api/schedule_spec.h) are included for the specs above.

namespace schedule_internal {
// Budget's solvers, for tests. max_work bounds a DP's inner-loop count:
// memory is rounded to coarser units until it fits.
// The DP over every schedule of the action language (any chain; O(L^4) per
// memory level).
Schedule BudgetExact(const ChainCosts& costs, int64_t budget_bytes, double max_work);
// Rotor's DP, where each snapshot is kept until its segment is done (any
// chain; O(L^3) per level).
Schedule BudgetRotor(const ChainCosts& costs, int64_t budget_bytes, double max_work);
// Rotor's DP for uniform chains, by length instead of position (O(L^2) per
// level).
Schedule BudgetUniform(const ChainCosts& costs, int64_t budget_bytes, double max_work);
}  // namespace schedule_internal

}  // namespace remat

#endif  // REMAT_ENGINES_SCHEDULE_SCHEDULE_H_
