#include "harness/bench_models.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/registry.h"
#include "harness/bench_peers.h"
#include "harness/bench_plan.h"
#include "harness/bench_report.h"
#include "harness/case_directory.h"
#include "harness/case_spec.h"
#include "harness/conformance.h"
#include "problems/problem.h"
#include "problems/program_file.h"

namespace remat::bench {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string ModelExport::Label() const { return StrCat(model, "@", batch, "x", tokens); }

ModelExport ReadModelExport(const std::string& model, const std::string& dir) {
  const std::string path = dir + "/model.json";
  std::ifstream in(path);
  if (!in) throw Error(StrCat(path, ": cannot read the export's model.json"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(StrCat(path, ": not JSON (", e.what(), ")"));
  }
  ModelExport m;
  m.model = model;
  m.dir = dir;
  for (const char* field : {"model", "batch", "tokens", "parameters"}) {
    if (!j.contains(field)) throw Error(StrCat(path, ": no \"", field, "\""));
  }
  const nlohmann::json& named = j.at("model");
  if (named != model) {
    throw Error(StrCat(path, ": the export of model ", named.is_string() ? named.get<std::string>() : named.dump(),
                       ", not ", model));
  }
  m.batch = j.at("batch").get<int64_t>();
  m.tokens = j.at("tokens").get<int64_t>();
  m.parameters = j.at("parameters").get<int64_t>();
  return m;
}

int64_t LargestFitting(const std::function<bool(int64_t)>& fits, int64_t limit) {
  int64_t good = 0, bad = limit + 1;  // fits at good (0: none yet), not at bad
  for (int64_t b = 1; b <= limit; b *= 2) {
    if (!fits(b)) {
      bad = b;
      break;
    }
    good = b;
  }
  if (bad == limit + 1 && good < limit && fits(limit)) return limit;
  if (bad == limit + 1 && good < limit) bad = limit;
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

int64_t FitBatch(const std::string& model, const std::string& root, int64_t max_memory_bytes,
                 std::ostream& log) {
  const std::string python = PeerPython();
  const std::string script = WorkspaceDir() + "/tools/model_time.py";
  std::string first_error;
  auto fits = [&](int64_t batch) {
    const std::string dir = StrCat(root, "/", model, ".fit/", batch);
    const std::string command = StrCat(ShellWord(python), " ", ShellWord(script), " export ", model, " ",
                                       ShellWord(dir), " --batch ", batch, " --shapes-only --if-stale");
    std::string output;
    const int status = CaptureOutput(command, &output);
    if (status != 0) {
      throw Error(StrCat("--sweep=models: ", model, "@fit: exporting batch ", batch, " failed (exit ",
                         status, " of `", command, "`): ", LastLine(output)));
    }
    const std::unique_ptr<ProgramFileProblem> problem = ProgramFileProblem::Read(dir + "/program.txt");
    const Program program = problem->Build(ParamValues());
    RunOptions options;
    options.plan_only = true;
    options.max_memory_bytes = max_memory_bytes;
    try {
      const Stats s = MakeEngine(kBaselineEngine)
                          ->ValueAndGrad(program, ShapeOnlyArguments(program), WrtIndices(*problem, program),
                                         options)
                          .stats;
      log << "bench: " << model << "@fit: batch " << batch << ": eager's planned peak "
          << s.predicted_peak_bytes << " bytes, within " << max_memory_bytes << "\n" << std::flush;
      return true;
    } catch (const Error& e) {
      if (batch == 1) first_error = e.what();
      log << "bench: " << model << "@fit: batch " << batch << " does not fit: " << e.what() << "\n"
          << std::flush;
      return false;
    }
  };
  const int64_t batch = LargestFitting(fits, kMaxFitBatch);
  if (batch == 0) {
    throw Error(StrCat("--sweep=models: ", model, "@fit: not even batch 1 fits --max-memory=",
                       max_memory_bytes, ": ", first_error));
  }
  return batch;
}

std::vector<ModelExport> ExportModels(const BenchFlags& flags, std::ostream& log) {
  std::vector<SweepModel> models = flags.models;
  if (models.empty()) {
    for (const char* m : kDefaultSweepModels) models.push_back(SweepModel::Parse(m));
  }
  const std::string python = PeerPython();
  if (!fs::exists(python)) {
    throw Error(StrCat("--sweep=models: ", python,
                       " not found (tools/python_env.sh makes .venv with PyTorch, transformers and "
                       "torchvision; $REMAT_VENV names another)"));
  }
  const std::string root = flags.models_dir.empty() ? WorkspaceDir() + "/.models" : flags.models_dir;
  const std::string script = WorkspaceDir() + "/tools/model_time.py";
  std::vector<ModelExport> out;
  for (const SweepModel& choice : models) {
    const std::string& model = choice.name;
    const std::string dir = root + "/" + model;
    std::string sizing;
    if (choice.fit_batch) {
      const int64_t batch = FitBatch(model, root, flags.max_memory_bytes, log);
      sizing = StrCat(" --batch ", batch, " --meta");
    }
    const std::string command = StrCat(ShellWord(python), " ", ShellWord(script), " export ", model, " ",
                                       ShellWord(dir), sizing, " --if-stale");
    std::string output;
    const int status = CaptureOutput(command, &output);
    if (status != 0) {
      throw Error(StrCat("--sweep=models: exporting ", model, " failed (exit ", status, " of `",
                         command, "`): ", LastLine(output)));
    }
    log << "bench: " << LastLine(output) << "\n" << std::flush;
    out.push_back(ReadModelExport(model, dir));
  }
  return out;
}

void AddModelPeerRows(const std::vector<RowResult>& results, const std::vector<ModelExport>& models,
                      const std::vector<std::string>& peers, double max_seconds, nlohmann::json* run,
                      std::ostream& out) {
  const std::string python = PeerPython();
  const std::string root = WorkspaceDir();
  (*run)["peer"] = {{"engines", peers}, {"python", python}};
  std::string pattern = (fs::temp_directory_path() / "remat-model-peer-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw Error("peer: cannot create a temporary directory");
  const fs::path tmp = pattern;
  out << "\npeer: " << python << " tools/model_time.py time MODEL --engine {torch,torch-checkpoint,"
      << "torch-compile} (the model) and tools/peer_time.py --engine jax (its program), each the "
      << "least of 5 steps after 2 warm-ups (fewer once they took " << max_seconds << " s)\n";
  for (const ModelExport& m : models) {
    const auto eager = std::find_if(results.begin(), results.end(), [&](const RowResult& r) {
      return IsBaselineRow(r.row) && r.row.kind == RowKind::kValueAndGrad &&
             r.row.program_file == m.program();
    });
    if (eager == results.end() || !eager->error.empty() || eager->real_time_ms <= 0) {
      out << "  " << m.Label() << ": no eager row to set peers beside\n";
      continue;
    }
    for (const std::string& peer : peers) {
      std::vector<std::pair<std::string, std::string>> variants;  // (policy, command)
      if (peer == "jax") {
        const std::unique_ptr<ProgramFileProblem> problem = ProgramFileProblem::Read(m.program());
        for (const CaseVariant& v : {CaseVariant(), CaseVariant::OfPolicy("everything_saveable")}) {
          Case c = MakeCase(*problem, ParamValues(), /*seed=*/1);
          ReadCaseInputs(m.dir, &c);  // eager's row's inputs: the export's
          c.program = v.Apply(c.program);
          const fs::path dir = tmp / StrCat(m.model, ".", v.Label());
          WriteCaseDirectory(c, v, dir.string());
          variants.push_back({v.Label(), StrCat(ShellWord(python), " ", ShellWord(root + "/tools/peer_time.py"),
                                                " --engine jax --repeats 5 --max-seconds ", max_seconds, " ",
                                                ShellWord(dir.string()))});
        }
      } else {
        variants.push_back(
            {peer == "torch-checkpoint" ? "as-written" : "everything_saveable",
             StrCat(ShellWord(python), " ", ShellWord(root + "/tools/model_time.py"), " time ", m.model, " --engine ",
                    peer, " --batch ", m.batch, " --tokens ", m.tokens, " --repeats 5 --max-seconds ",
                    max_seconds)});
      }
      for (const auto& [policy, command] : variants) {
        nlohmann::json row = {{"name", StrCat("peer/", m.model, "/", peer, "/", policy)},
                              {"problem", eager->row.problem},
                              {"model", m.model},
                              {"model_label", m.Label()},
                              {"program_file", m.program()},
                              {"engine", peer},
                              {"policy", policy},
                              {"peer", true}};
        const std::string shown = TimePeer(command, eager->real_time_ms, &row);  // its rate: AnnotateModelRows
        out << "  " << m.Label() << "  " << peer << "/" << policy << "  " << shown << "\n" << std::flush;
        (*run)["rows"].push_back(row);
      }
      if (peer == "jax") {  // its case directories: the model's inputs, once a variant
        fs::remove_all(tmp / StrCat(m.model, ".as-written"));
        fs::remove_all(tmp / StrCat(m.model, ".everything_saveable"));
      }
    }
  }
  fs::remove_all(tmp);
}

void AnnotateModelRows(const std::vector<ModelExport>& models, nlohmann::json* run) {
  if (!run->contains("rows")) return;
  nlohmann::json& rows = (*run)["rows"];
  auto ms_of = [](const nlohmann::json& r) {
    return !r.contains("error") && r.contains("real_time_ms") && r["real_time_ms"].is_number()
               ? r["real_time_ms"].get<double>()
               : 0.0;
  };
  for (const ModelExport& m : models) {
    double ceiling_ms = 0;
    double eager_flops = 0;
    for (const nlohmann::json& r : rows) {
      if (r.value("program_file", "") != m.program() || r.value("peer", false)) continue;
      if (r.value("matmul_bound", false) && ms_of(r) > 0 && r.contains("stream_floor_ms")) {
        ceiling_ms = ms_of(r) + r["stream_floor_ms"].get<double>();
      }
      if (r.value("engine", "") == kBaselineEngine && !r.value("control", false) && ms_of(r) > 0) {
        eager_flops = r.value("flops_forward", 0.0) + r.value("flops_backward", 0.0);
      }
    }
    for (nlohmann::json& r : rows) {
      const double ms = ms_of(r);
      if (r.value("program_file", "") != m.program() || r.value("matmul_bound", false) || ms <= 0) continue;
      if (eager_flops > 0) r["useful_gflops"] = eager_flops / (ms * 1e6);
      if (ceiling_ms > 0) r["of_ceiling"] = ceiling_ms / ms;
    }
  }
}

}  // namespace remat::bench
