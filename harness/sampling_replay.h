// A recorded run's sampling replayed under another budget or rule, on the
// samples it recorded: what a run with less sampling would have said, from
// the same pairs, without running anything.
//
//   const nlohmann::json run = ReadRun("results/bench-....json");
//   SamplingRule rule = DefaultSamplingRule();
//   rule.target_spread = 0.015;
//   const Replay r = ReplayRun(run, rule, /*budget_seconds=*/360);
//   r.sampled_seconds;  r.controls.valid();  r.controls.noise;
//
// Each window of each row (in the run's order, which is the order it
// sampled them) is cut at the first sample after which SamplingDone holds
// under the rule a run with that budget would have given the row
// (CappedRule on what its window had left, BoundRule for the bound rows),
// the seconds spent being the row's recorded sampling seconds spread over
// its samples in proportion to their pairs' times. Then the cut rows go
// through the bench's own judgement (SetSampledFields, ComputeVsEager,
// CheckControls). A replay only ever shortens a row: a row the rule would
// have sampled longer than it was keeps every recorded sample (`longer`
// counts them), so a replay answers for budgets and targets at most as
// generous as the run's. The run's samples stand for the ones a shorter
// run would have taken; a run taken with less budget would also have
// started each row at another moment, which no replay shows.
#ifndef REMAT_HARNESS_SAMPLING_REPLAY_H_
#define REMAT_HARNESS_SAMPLING_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/bench_controls.h"
#include "harness/bench_lib.h"
#include "harness/bench_sampling.h"

namespace remat::bench {

// The run's rows as recorded (each with its samples and SetSampledFields),
// in its order: what ComputeVsEager and CheckControls need of them (row
// name, case, engine, variant, control, kind, FLOPs, eager's FLOPs, the
// kernels' share, the stream floor, caps, errors). Throws remat::Error
// naming the row and field of a results file this bench did not write
// (a row without a name, a policy that does not parse).
std::vector<RowResult> RowsOfRun(const nlohmann::json& run);

struct Replay {
  std::vector<RowResult> rows;  // judged: ComputeVsEager, CheckControls
  ControlReport controls;
  double recorded_seconds = 0;  // the run's sampling seconds, every row
  double sampled_seconds = 0;   // the replay's
  int64_t longer = 0;           // row windows the rule would have sampled past their samples
  int windows = 1;              // the run's (the most any row had)
};

// Replays `run` (a results JSON of `bench`) under `rule` (its max_seconds
// the per-row cap before the budget's share, as DefaultSamplingRule's) and
// a sampling budget of `budget_seconds` (0: none), split over the run's
// windows as the bench splits it. Rows without samples (errors, big rows,
// the peers) are judged as recorded.
Replay ReplayRun(const nlohmann::json& run, const SamplingRule& rule, double budget_seconds);

// Reads a results JSON; throws remat::Error naming the file when it cannot
// be read or parsed.
nlohmann::json ReadRun(const std::string& path);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_SAMPLING_REPLAY_H_
