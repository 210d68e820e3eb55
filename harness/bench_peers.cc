#include "harness/bench_peers.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iterator>
#include <string>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "harness/bench_flags.h"
#include "harness/bench_plan.h"
#include "harness/bench_report.h"
#include "harness/case_directory.h"
#include "harness/case_spec.h"
#include "harness/conformance.h"
#include "problems/problem.h"

namespace remat::bench {

std::string PeerPython() {
  const char* venv = std::getenv("REMAT_VENV");
  return StrCat(venv ? std::string(venv) : WorkspaceDir() + "/.venv", "/bin/python");
}

std::string ShellWord(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string LastLine(const std::string& output) {
  std::string text = output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const size_t last = text.find_last_of('\n');
  return last == std::string::npos ? text : text.substr(last + 1);
}

int CaptureOutput(const std::string& command, std::string* output) {
  output->clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string TimePeer(const std::string& command, double eager_ms, nlohmann::json* row) {
  std::string output;
  const int status = CaptureOutput(command, &output);
  const std::string last_line = LastLine(output);
  std::string shown;
  if (status == 0) {
    try {
      const nlohmann::json j = nlohmann::json::parse(last_line);
      (*row)["real_time_ms"] = j.at("min_ms");
      (*row)["median_time_ms"] = j.at("median_ms");
      (*row)["times_ms"] = j.at("times_ms");
      (*row)["compile_seconds"] = j.at("compile_seconds");
      (*row)["version"] = j.at("version");
      (*row)["threads"] = j.at("threads");
      if (j.contains("peak_rss_bytes")) (*row)["peak_rss_bytes"] = j.at("peak_rss_bytes");
      (*row)["vs_eager"] = j.at("min_ms").get<double>() / eager_ms;
      char line[64];
      std::snprintf(line, sizeof line, "%9.1f ms  x eager %.2f", j.at("min_ms").get<double>(),
                    (*row)["vs_eager"].get<double>());
      shown = line;
    } catch (const std::exception& e) {
      (*row)["error"] = StrCat(command, " printed no result: ", last_line);
    }
  } else {
    (*row)["error"] = status == 77 ? last_line : StrCat("exit ", status, ": ", last_line);
  }
  if (row->contains("error")) shown = "error: " + (*row)["error"].get<std::string>();
  return shown;
}

void AddPeerRows(const std::vector<RowResult>& results, const std::vector<std::string>& peers,
                 nlohmann::json* run, std::ostream& out) {
  namespace fs = std::filesystem;
  const std::string python = PeerPython();
  const std::string script = WorkspaceDir() + "/tools/peer_time.py";
  (*run)["peer"] = {{"engines", peers}, {"python", python}, {"script", script}};
  if (!fs::exists(python)) {
    out << "\npeer: " << python << " not found (tools/python_env.sh makes .venv with JAX and "
        << "PyTorch); no peer rows\n";
    (*run)["peer"]["error"] = python + " not found";
    return;
  }
  std::string pattern = (fs::temp_directory_path() / "remat-peer-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw Error("peer: cannot create a temporary directory");
  const fs::path tmp = pattern;
  out << "\npeer: " << python << " " << script << " --engine {" << Join(peers, ",")
      << "} (least of 5 runs after 2 warm-ups)\n";
  for (const RowResult& r : results) {
    if (!IsBaselineRow(r.row) || !r.error.empty() || !r.row.program_file.empty() ||
        r.row.kind != RowKind::kValueAndGrad ||
        std::find(std::begin(kPeerProblems), std::end(kPeerProblems), r.row.problem) ==
            std::end(kPeerProblems)) {
      continue;
    }
    const ParamValues params(r.row.params.begin(), r.row.params.end());
    nlohmann::json params_json = nlohmann::json::object();
    std::string params_text;
    for (const auto& [name, value] : r.row.params) {
      params_json[name] = value;
      params_text += StrCat(params_text.empty() ? "" : ",", name, "=", value);
    }
    for (const CaseVariant& v : {CaseVariant(), CaseVariant::OfPolicy("everything_saveable")}) {
      const std::string variant = v.Label();
      Case c = MakeCase(FindProblem(r.row.problem), params, /*seed=*/1);  // eager's row's inputs
      c.program = v.Apply(c.program);
      const fs::path dir = tmp / StrCat(r.row.problem, ".", params_text, ".", variant);
      WriteCaseDirectory(c, v, dir.string());
      for (const std::string& peer : peers) {
        nlohmann::json row = {{"name", StrCat("peer/", r.row.problem, "/", params_text, "/", peer, "/",
                                              variant)},
                              {"problem", r.row.problem},
                              {"params", params_json},
                              {"engine", peer},
                              {"policy", variant},
                              {"peer", true}};
        const std::string shown =
            TimePeer(StrCat(ShellWord(python), " ", ShellWord(script), " --engine ", peer, " --repeats 5 ",
                            ShellWord(dir.string())),
                     r.real_time_ms, &row);
        out << "  " << r.row.problem << " " << params_text << "  " << peer << "/" << variant << "  "
            << shown << "\n"
            << std::flush;
        (*run)["rows"].push_back(row);
      }
    }
  }
  fs::remove_all(tmp);
}

}  // namespace remat::bench
