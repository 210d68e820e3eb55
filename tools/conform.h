// remat conform --engine-cmd "CMD": conformance of an engine that is not
// linked into remat (a PyTorch or JAX interpreter of program files, a
// separate binary), judged as the suite judges its own engines.
//
// The protocol, per case (a problem at its test sizes, under a policy or as
// written), in a fresh directory DIR:
//   remat writes  DIR/program.txt      the program (engines/api/program_text.h)
//                 DIR/<input>.npy      every input, f32, by parameter name
//                 DIR/case.json        {"problem", "variant", "wrt": [names]}
//   remat runs    sh -c 'CMD DIR'      stdout and stderr to DIR/engine.log,
//                                      killed (its process group) after the timeout
//   the engine writes  DIR/loss.npy           the value, f32[]
//                      DIR/grad_<input>.npy   one per name in "wrt", f32
//                      DIR/state_<name>.npy   one per state op (CONTRACT.md)
//                      DIR/stats.json         optional: {"peak_bytes",
//                                             "residual_bytes", "residual_slack",
//                                             "residuals": [one line each]}
//                                             (CONTRACT.md, "Engines in another
//                                             process")
//   and exits 0; or prints "unsupported: WHY" and exits kUnsupportedExit
//   for a program it cannot run as asked (the case counts as unsupported,
//   not failed).
// A case passes when the value and every gradient agree with the float64
// oracle within harness/conformance.h's per-tensor tolerance and the memory
// fields present are consistent (non-negative integers, peak >= residuals)
// and hold what they claim:
//   - with "residual_slack": S in stats.json, the residual bytes are within
//     S (a fraction) of remat's prediction; without it the difference is
//     reported, not judged. With "residuals" (print_saved_residuals' lines)
//     a difference is shown site by site, both listings and the reason
//     (tools/residual_diff.h).
// and, over the run, the residuals follow the policy: on the problems where
// remat's prediction (the recompute engine's residual bytes) under
// nothing_saveable is below its prediction under everything_saveable, the
// engine's are below its own on at least one. An engine's op rules may make
// the two equal on a problem (PyTorch's relu keeps its output, the next
// layer's input), noted on the case that ran second of the pair; an engine
// that ignores the regions' policies follows it nowhere.
// Anything else (a non-zero exit, a timeout, a missing or malformed file, a
// wrong shape or dtype, a wrong number) fails, with the reason named.
//
// The run fails (RunConform's `ok` is false, remat exits 1) when a case
// failed, when a case was not run (--fail-fast, --time-limit), when the
// residuals follow the policy on none of the problems judged, or when every
// case was unsupported (an engine judged on nothing) unless
// allow_unsupported.
#ifndef REMAT_TOOLS_CONFORM_H_
#define REMAT_TOOLS_CONFORM_H_

#include <ostream>
#include <string>
#include <vector>

#include "harness/case_spec.h"

namespace remat {

// The exit status by which an engine says "unsupported" (automake's SKIP).
inline constexpr int kUnsupportedExit = 77;

struct ConformOptions {
  std::string engine_cmd;
  std::vector<std::string> problems;  // empty: every registered problem
  // What each problem runs under (harness/case_spec.h): as written, a
  // policy applied to every region, or a schedule (those run only on the
  // problems with a scan or a chain of checkpointed blocks). Empty: as
  // written and every policy Policy::Parse accepts without arguments. A
  // memory cap has no place in a case directory: RunConform refuses one.
  std::vector<CaseVariant> variants;
  std::string junit_path;  // "" for none
  std::string keep_dir;    // "" for a temporary directory, removed after
  double timeout_seconds = 60;     // per case
  double time_limit_seconds = 0;   // the whole run; 0 for none
  bool fail_fast = false;          // stop at the first failed case
  bool allow_unsupported = false;  // a run of only unsupported cases is ok
};

enum class ConformOutcome { kPass, kFail, kUnsupported, kNotRun };

struct ConformCase {
  std::string name;     // "layer_loss N=8 d=16 policy=dots_saveable"
  std::string problem;  // "layer_loss"
  CaseVariant variant;
  ConformOutcome outcome = ConformOutcome::kNotRun;
  std::string detail;   // the reason, or the margin for a pass
  double seconds = 0;
  // The engine's residual bytes (stats.json) and remat's prediction for the
  // same program; -1 where there is none.
  int64_t residual_bytes = -1;
  int64_t predicted_residual_bytes = -1;
  // Where the two differ and the engine's stats.json lists its residuals:
  // both listings, place by place, with the reason (tools/residual_diff.h),
  // as indented lines printed under the case's; "" otherwise.
  std::string residual_diff;
};

struct ConformRun {
  std::vector<ConformCase> cases;
  bool ok = false;
  std::string verdict;  // why the run failed; "" when ok
};

// Runs every case, prints one line per case (a failed one followed by the
// command that reruns it alone) and a summary line ("N passed, N failed, N
// unsupported", then ", N not run" when some were not), then the verdict
// when the run failed, to `out`; writes the JUnit XML if asked.
ConformRun RunConform(const ConformOptions& options, std::ostream& out);

// The JUnit XML of `cases` (a <testsuite> of <testcase>s: a failure as
// <failure>, unsupported and not run as <skipped>).
std::string ConformJUnit(const std::vector<ConformCase>& cases);

}  // namespace remat

#endif  // REMAT_TOOLS_CONFORM_H_
