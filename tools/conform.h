// remat conform --engine-cmd "CMD": conformance of an engine that is not
// linked into remat (a PyTorch or JAX interpreter of program files, a
// separate binary), judged as the suite judges its own engines.
//
// The protocol, per case (a problem at its test sizes, under a policy or as
// written), in a fresh directory DIR:
//   remat writes  DIR/program.txt      the program (engines/api/program_text.h)
//                 DIR/<input>.npy      every input, f32, by parameter name
//                 DIR/case.json        {"problem", "policy", "wrt": [names]}
//   remat runs    sh -c 'CMD DIR'      stdout and stderr to DIR/engine.log,
//                                      killed (its process group) after the timeout
//   the engine writes  DIR/loss.npy           the value, f32[]
//                      DIR/grad_<input>.npy   one per name in "wrt", f32
//                      DIR/stats.json         optional: {"peak_bytes",
//                                             "residual_bytes"} as it measures them
//   and exits 0; or prints "unsupported: WHY" and exits kUnsupportedExit
//   for a program it cannot run as asked (the case counts as unsupported,
//   not failed).
// A case passes when the value and every gradient agree with the float64
// oracle within harness/conformance.h's per-tensor tolerance and the memory
// fields present are consistent (non-negative integers, peak >= residuals).
// Anything else (a non-zero exit, a timeout, a missing or malformed file, a
// wrong shape or dtype, a wrong number) fails, with the reason named.
#ifndef REMAT_TOOLS_CONFORM_H_
#define REMAT_TOOLS_CONFORM_H_

#include <ostream>
#include <string>
#include <vector>

namespace remat {

// The exit status by which an engine says "unsupported" (automake's SKIP).
inline constexpr int kUnsupportedExit = 77;

struct ConformOptions {
  std::string engine_cmd;
  std::vector<std::string> problems;  // empty: every registered problem
  // "" is the problem as written; others are Policy::Parse specs applied to
  // every region (ApplyPolicy). Empty: "" and every policy name that
  // Policy::Parse accepts without arguments.
  std::vector<std::string> policies;
  std::string junit_path;  // "" for none
  std::string keep_dir;    // "" for a temporary directory, removed after
  double timeout_seconds = 60;
};

struct ConformCase {
  std::string name;     // "layer_loss d=16 N=8 policy=dots_saveable"
  std::string outcome;  // "pass", "fail", "unsupported"
  std::string detail;   // the reason, or the margin for a pass
  double seconds = 0;
};

// Runs every case, prints one line per case and a summary line
// ("N passed, N failed, N unsupported") to `out`, writes the JUnit XML if
// asked. Returns the cases.
std::vector<ConformCase> RunConform(const ConformOptions& options, std::ostream& out);

// The JUnit XML of `cases` (a <testsuite> of <testcase>s: a failure as
// <failure>, unsupported as <skipped>).
std::string ConformJUnit(const std::vector<ConformCase>& cases);

}  // namespace remat

#endif  // REMAT_TOOLS_CONFORM_H_
