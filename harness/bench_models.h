// --sweep=models: the models people train, at the sizes they train them
// (tools/real_models.py), as programs exported from PyTorch
// (tools/model_time.py export, into --models-dir), timed as remat's rows
// beside the peers: JAX on the same program, PyTorch on the model itself.
//
//   std::vector<ModelExport> models = ExportModels(flags, std::cerr);
//   ... flags.programs = ProgramsOf(models); PlanRows ...; run ...
//   AddModelPeerRows(results, models, flags.peers, &run, std::cout);
#ifndef REMAT_HARNESS_BENCH_MODELS_H_
#define REMAT_HARNESS_BENCH_MODELS_H_

#include <cstdint>
#include <ostream>
#include <functional>
#include <string>
#include <vector>

#include "harness/bench_flags.h"
#include "harness/bench_lib.h"
#include <nlohmann/json.hpp>

namespace remat::bench {

// One exported model: its name (tools/real_models.py's), the directory
// holding program.txt, its inputs and model.json, and what model.json says.
struct ModelExport {
  std::string model;
  std::string dir;
  int64_t batch = 0;
  int64_t tokens = 0;  // tokens per sequence, or a ResNet's image side
  int64_t parameters = 0;
  std::string program() const { return dir + "/program.txt"; }
  // "gpt2@1x1024": the case's name in the rows and the report.
  std::string Label() const;
};

// The models of the run (flags.models, else kDefaultSweepModels), each
// exported into <models dir>/<model>/ (flags.models_dir, else
// WorkspaceDir()/.models) by `python tools/model_time.py export --if-stale`
// in PeerPython(): an export whose model.json names the same model, sizes
// and sources (a digest of the exporter's and the model's files) is kept as
// it is. A NAME@fit model is exported at FitBatch's batch, with --meta (the
// weights, not the trace: a real trace of GPT-2 small holds 9 GB a
// sequence). One line per model to `log`. Throws remat::Error naming the
// model, the command and the exporter's last line when one fails, and
// naming the Python when it is missing.
std::vector<ModelExport> ExportModels(const BenchFlags& flags, std::ostream& log);

// The largest batch in [1, limit] for which `fits` holds, given that it
// holds up to some batch and not past it: doubling from 1 until it fails,
// then bisecting between the last that held and the first that did not
// (about 2 log2(answer) calls). 0 when it fails at 1.
int64_t LargestFitting(const std::function<bool(int64_t)>& fits, int64_t limit);

// The largest batch of `model` at its default tokens whose eager step fits
// within `max_memory_bytes`, by remat's own planner: each candidate batch
// is exported shapes-only (model_time.py export --shapes-only, program.txt
// alone, into <root>/<model>.fit/<batch>, kept while current) and eager's
// step planned on it (a dry run: its predicted peak, every category, against
// the limit, as --max-memory refuses a run). At most kMaxFitBatch. Throws
// remat::Error naming the model and the planner's error when batch 1 does
// not fit, and the command when an export fails.
inline constexpr int64_t kMaxFitBatch = 256;
int64_t FitBatch(const std::string& model, const std::string& root, int64_t max_memory_bytes,
                 std::ostream& log);

// Reads <dir>/model.json (what tools/model_time.py export writes); throws
// remat::Error naming the file and the field it lacks.
ModelExport ReadModelExport(const std::string& model, const std::string& dir);

// The peers of each model beside its eager row in `results` (rows of
// program file export.program()): "jax" runs the program (as written and
// under everything_saveable) in tools/peer_time.py, "torch",
// "torch-checkpoint" and "torch-compile" the model in tools/model_time.py
// time. Each row: {"name": "peer/<model>/<engine>[/<policy>]", "model",
// "engine", "policy", "peer": true, real_time_ms (the least of 5 steps
// after 2 warm-ups, fewer once they took `max_seconds`: one at least),
// vs_eager (over eager's row), peak_rss_bytes, ...} or with "error" (the
// run goes on); their rates: AnnotateModelRows.
void AddModelPeerRows(const std::vector<RowResult>& results, const std::vector<ModelExport>& models,
                      const std::vector<std::string>& peers, double max_seconds, nlohmann::json* run,
                      std::ostream& out);

// Adds to every row of each model in run["rows"] (remat's and the peers',
// by program file; not the bound row) what the report sets them beside:
// "useful_gflops", eager's FLOPs of one step (forward and backward, no
// recomputation) over the row's time, and "of_ceiling", the case's ceiling
// (its bound row's time plus its stream_floor_ms: eager's matmuls bare and
// its other kernels' bytes at the stream rate) over the row's time. A model
// without an eager row or a bound row gets neither field.
void AnnotateModelRows(const std::vector<ModelExport>& models, nlohmann::json* run);

}  // namespace remat::bench

#endif  // REMAT_HARNESS_BENCH_MODELS_H_
