// --peer: the field's engines (JAX, PyTorch) timed on the run's peer cases
// by tools/peer_time.py, as rows of the results JSON.
#ifndef REMAT_HARNESS_BENCH_PEERS_H_
#define REMAT_HARNESS_BENCH_PEERS_H_

#include <ostream>
#include <string>
#include <vector>

#include "harness/bench_lib.h"

namespace remat::bench {

// The field's engines (--peer) on the run's peer cases: for every eager row
// of a kPeerProblems problem, the case as written and under
// everything_saveable (no checkpointing), written as remat conform writes a
// case (program.txt, <input>.npy, case.json) with eager's inputs, and timed
// by tools/peer_time.py in the workspace's .venv (or $REMAT_VENV). Each peer
// row's time is its least run, as the bench's rows', and vs_eager is that
// over the eager row's time in this run. A peer that is not installed, that
// refuses a case (unsupported) or fails is a row with the error: the run
// goes on.
void AddPeerRows(const std::vector<RowResult>& results, const std::vector<std::string>& peers,
                 nlohmann::json* run, std::ostream& out);

// The Python the peers run on: $REMAT_VENV/bin/python, else the workspace's
// .venv/bin/python (tools/python_env.sh makes it).
std::string PeerPython();
// `text` as one word of a POSIX shell command line (single-quoted).
std::string ShellWord(const std::string& text);
// Runs `command` through the shell; returns its exit status (-1 when it did
// not exit) and its output, stdout and stderr together.
int CaptureOutput(const std::string& command, std::string* output);
// The last line of a command's output that is not empty, its trailing
// spaces and newlines dropped: what a script says last.
std::string LastLine(const std::string& output);
// Times one peer: runs `command` (a script that prints one JSON object as
// its last line, with min_ms, median_ms, times_ms, compile_seconds,
// version, threads; exit 77 and a reason for a case it refuses) and fills
// `row` with those fields and vs_eager (min_ms over `eager_ms`), or with
// "error". Returns what the summary shows of it.
std::string TimePeer(const std::string& command, double eager_ms, nlohmann::json* row);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_PEERS_H_
