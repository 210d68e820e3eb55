// The bench's controls: rows whose answer is known before the run, so that
// the run can tell whether its ratios are measurements. A run whose
// controls are off says so at the top of its summary and in its JSON, and
// prints no ratio for the cases they cover.
//
//   ComputeVsEager(&results);
//   const ControlReport controls = CheckControls(&results);
//   std::cout << FormatControls(controls) << FormatSummary(results, platform);
//   run["controls"] = ControlsJson(controls);
//
// Two kinds, both paired with the case's eager like every other row:
// - A/A (PlannedRow::control): a second eager instance on the case as
//   written. Same engine, same program, same kernels: any distance from
//   1.00 is the measurement's, not the engine's. PlanRows puts one on every
//   case that has rows besides eager's.
// - Same plan: recompute under everything_saveable on a case where it
//   recomputes nothing (Stats::flops_recomputed 0), which is eager's plan
//   exactly, on the matmul-dominated cases (those with N and d): there
//   kernels are nearly all the time, so the engines' bookkeeping, which
//   differs, is within the allowance. (On the scalar chains it is most of
//   the time: no control there.)
// A control is off when its x eager is noise, missing, or further from 1.00
// than kControlAllowance. Every other row of that case (eager's own
// and the controls excepted) is then untrusted (RowResult::untrusted, with the control and
// its ratio), and the run's ratios are not valid.
#ifndef REMAT_HARNESS_BENCH_CONTROLS_H_
#define REMAT_HARNESS_BENCH_CONTROLS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/bench_lib.h"

namespace remat::bench {

// How far a control's x eager may be from 1.00.
inline constexpr double kControlAllowance = 0.02;

enum class ControlKind {
  kNone,
  kAToA,      // a second eager (PlannedRow::control)
  kSamePlan,  // recompute/everything_saveable recomputing nothing, on a matmul case
};
// Which control `r` is (kNone for every other row). kSamePlan reads the
// row's FLOPs, so call it on measured rows.
ControlKind ControlOf(const RowResult& r);

struct ControlCheck {
  std::string case_key;
  std::string variant;  // "eager A/A control", "recompute/everything_saveable"
  ControlKind kind = ControlKind::kNone;
  std::optional<double> ratio;  // its x eager (paired when paired)
  bool ok = false;
  std::string why;  // when not ok: "x eager 1.043, 4.3% from 1.00", "noise: ..."
};

struct ControlReport {
  std::vector<ControlCheck> checks;
  // Every check ok (and at least one run: a run with no control has no
  // evidence either way, and says so).
  bool valid() const;
  // The rows with a ratio to eager (every measured row but eager's own and
  // the controls, failed rows excluded), and how many of them are
  // trustworthy: neither noise nor on a case whose control is off.
  int64_t rows = 0;
  int64_t trusted = 0;
  int64_t noise = 0;      // of rows: flagged as noise (ComputeVsEager)
  int64_t untrusted = 0;  // of rows: not noise, on a case whose control is off
};

// Checks every control in `rows` (after ComputeVsEager) and marks the rows
// of each case whose control is off as untrusted (clearing earlier marks).
ControlReport CheckControls(std::vector<RowResult>* rows);

// The lines at the top of the summary: whether the run's ratios are valid
// (and, if not, which controls are off and by how much), and how many rows
// are trustworthy and why the others are not.
std::string FormatControls(const ControlReport& report);

// {"valid": bool, "allowance": 0.02, "rows": n, "trusted": n, "noise": n,
//  "untrusted": n, "checks": [{"case", "variant", "kind", "x_eager" (or
//  null), "ok", "why"}]}
nlohmann::json ControlsJson(const ControlReport& report);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_CONTROLS_H_
