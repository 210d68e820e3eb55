#include "tools/conform.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/program_text.h"
#include "engines/api/registry.h"
#include "harness/conformance.h"
#include "problems/problem.h"
#include "engines/api/npy.h"

namespace remat {
namespace {

namespace fs = std::filesystem;

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// How the engine's process ended: its exit status, or why there is none.
struct Exit {
  bool timed_out = false;
  int status = -1;  // the exit status when it exited
  int signal = 0;   // the signal that killed it, otherwise
};

// Runs `sh -c 'CMD DIR'` with stdout and stderr to `log`, in a process group
// of its own so that a timeout kills the engine's children too (a shell
// wrapper's python): a hanging engine is a named failure, never a hang.
Exit RunWithTimeout(const std::string& command, const std::string& log, double timeout_seconds) {
  const pid_t pid = fork();
  if (pid < 0) throw Error("conform: fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    if (f != nullptr) dup2(fileno(stdout), fileno(stderr));
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_seconds);
  Exit e;
  int wstatus = 0;
  while (true) {
    const pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      e.timed_out = true;
      return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(wstatus)) e.status = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) e.signal = WTERMSIG(wstatus);
  return e;
}

// The last non-empty lines of the engine's log (what a failure quotes).
std::string LogTail(const std::string& log, int lines) {
  std::ifstream in(log);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) all.push_back(line);
  }
  const size_t start = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  return Join(std::vector<std::string>(all.begin() + start, all.end()), " | ");
}

// The reason the engine gave on its "unsupported: ..." line.
std::string UnsupportedReason(const std::string& log) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("unsupported:");
    if (at != std::string::npos) return line.substr(at);
  }
  return "unsupported (the engine gave no 'unsupported: ...' line)";
}

// Checks stats.json's memory fields; returns what is inconsistent, or "".
std::string CheckStats(const std::string& path, int64_t* residual_bytes) {
  std::ifstream in(path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    return StrCat("stats.json: not JSON: ", e.what());
  }
  if (!j.is_object()) return "stats.json: not a JSON object";
  int64_t values[2] = {-1, -1};
  const char* keys[2] = {"peak_bytes", "residual_bytes"};
  for (int k = 0; k < 2; ++k) {
    if (!j.contains(keys[k]) || j[keys[k]].is_null()) continue;
    if (!j[keys[k]].is_number_integer()) {
      return StrCat("stats.json: ", keys[k], " is ", j[keys[k]].dump(), ", not an integer");
    }
    values[k] = j[keys[k]].get<int64_t>();
    if (values[k] < 0) return StrCat("stats.json: ", keys[k], " is negative (", values[k], ")");
  }
  if (values[0] >= 0 && values[1] >= 0 && values[0] < values[1]) {
    return StrCat("stats.json: peak_bytes ", values[0], " < residual_bytes ", values[1],
                  ": what is saved for the backward pass is held at the peak");
  }
  *residual_bytes = values[1];
  return "";
}

// One case: writes its directory, runs the engine, judges what it wrote.
ConformCase RunCase(const ConformOptions& o, const Problem& problem, const std::string& policy,
                    const fs::path& dir, Engine& oracle, Engine& recompute) {
  ConformCase result;
  Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  if (!policy.empty()) c.program = ApplyPolicy(c.program, Policy::Parse(policy));
  result.name = c.ToString() + (policy.empty() ? "" : " policy=" + policy);
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream p(dir / "program.txt");
    p << PrintProgram(c.program);
    if (!p) throw Error(StrCat((dir / "program.txt").string(), ": cannot write"));
  }
  std::vector<std::string> wrt;
  for (int w : c.wrt) wrt.push_back(c.program.param_names[w]);
  for (int i = 0; i < c.program.num_params(); ++i) {
    WriteNpy((dir / (c.program.param_names[i] + ".npy")).string(), c.inputs[i]);
  }
  {
    std::ofstream j(dir / "case.json");
    j << nlohmann::json{{"problem", problem.name()}, {"policy", policy}, {"wrt", wrt}}.dump(2)
      << "\n";
  }
  const std::string log = (dir / "engine.log").string();
  const auto start = std::chrono::steady_clock::now();
  const Exit e = RunWithTimeout(o.engine_cmd + " " + ShellQuote(dir.string()), log,
                                o.timeout_seconds);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto fail = [&](const std::string& why) {
    result.outcome = "fail";
    result.detail = why;
    return result;
  };
  if (e.timed_out) {
    return fail(StrCat("timed out after ", o.timeout_seconds, " s (killed); log: ",
                       LogTail(log, 3)));
  }
  if (e.signal != 0) {
    return fail(StrCat("killed by signal ", e.signal, " (", strsignal(e.signal), "); log: ",
                       LogTail(log, 3)));
  }
  if (e.status == kUnsupportedExit) {
    result.outcome = "unsupported";
    result.detail = UnsupportedReason(log);
    return result;
  }
  if (e.status != 0) return fail(StrCat("exit status ", e.status, "; log: ", LogTail(log, 3)));
  Result got;
  try {
    got.value = ReadNpy((dir / "loss.npy").string());
    for (const std::string& name : wrt) {
      got.grads.push_back(ReadNpy((dir / ("grad_" + name + ".npy")).string()));
    }
    // The new state, one file per state op (CONTRACT.md, state).
    for (const StateSlot& s : CheckStateOps(c.program)) {
      got.state[s.name] = ReadNpy((dir / ("state_" + s.name + ".npy")).string());
    }
  } catch (const Error& err) {
    std::string what = err.what();
    const size_t slash = what.rfind('/', what.find(':'));
    return fail(slash == std::string::npos ? what : what.substr(slash + 1));
  }
  const Result ref = oracle.ValueAndGrad(c.program, c.inputs, c.wrt);
  const Agreement a = CompareWithOracle(c, got, ref, DType::kF32);
  if (!a.ok) {
    return fail(StrCat("disagrees with the float64 oracle (", std::setprecision(3),
                       a.worst_ratio, "x the tolerance): ", a.detail));
  }
  int64_t residual = -1;
  if (fs::exists(dir / "stats.json")) {
    const std::string bad = CheckStats((dir / "stats.json").string(), &residual);
    if (!bad.empty()) return fail(bad);
  }
  std::ostringstream detail;
  detail << "worst " << std::setprecision(2) << a.worst_ratio << "x tolerance";
  if (residual >= 0) {
    const Result mine = recompute.ValueAndGrad(c.program, c.inputs, c.wrt);
    detail << "; residuals " << residual << " B (remat recompute: " << mine.stats.residual_bytes
           << " B)";
  }
  result.outcome = "pass";
  result.detail = detail.str();
  return result;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 admits no control characters but tab, newline, return.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += '?';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

}  // namespace

std::vector<ConformCase> RunConform(const ConformOptions& o, std::ostream& out) {
  if (o.engine_cmd.empty()) throw Error("--engine-cmd: empty; expected a command, e.g. \"python3 my_engine.py\"");
  if (!(o.timeout_seconds > 0)) throw Error(StrCat("--timeout ", o.timeout_seconds, ": expected seconds > 0"));
  std::vector<const Problem*> problems;
  if (o.problems.empty()) {
    for (const auto& p : AllProblems()) problems.push_back(p.get());
  } else {
    for (const std::string& name : o.problems) problems.push_back(&FindProblem(name));
  }
  std::vector<std::string> policies = o.policies;
  if (policies.empty()) {
    policies.push_back("");
    for (const std::string& name : Policy::Names()) {
      // A policy that needs arguments (save_from_both_policies:P+Q) is
      // run only when --policies gives them.
      try {
        Policy::Parse(name);
      } catch (const Error&) {
        continue;
      }
      policies.push_back(name);
    }
  }
  for (const std::string& p : policies) {
    if (!p.empty()) Policy::Parse(p);  // a bad spec is an error before any case runs
  }
  fs::path root;
  const bool keep = !o.keep_dir.empty();
  if (keep) {
    root = o.keep_dir;
  } else {
    std::string pattern = (fs::temp_directory_path() / "remat-conform-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw Error("conform: cannot create a temporary directory");
    root = pattern;
  }
  std::unique_ptr<Engine> oracle = MakeEngine("oracle");
  std::unique_ptr<Engine> recompute = MakeEngine("recompute");
  std::vector<ConformCase> cases;
  int counts[3] = {0, 0, 0};
  for (const Problem* problem : problems) {
    for (const std::string& policy : policies) {
      const std::string dir_name = problem->name() + "." + (policy.empty() ? "as_written" : policy);
      std::string safe;
      for (char ch : dir_name) safe += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' ? ch : '_';
      ConformCase r;
      try {
        r = RunCase(o, *problem, policy, root / safe, *oracle, *recompute);
      } catch (const Error& e) {
        r.name = problem->name() + (policy.empty() ? "" : " policy=" + policy);
        r.outcome = "fail";
        r.detail = e.what();
      }
      const char* label = r.outcome == "pass" ? "PASS " : r.outcome == "fail" ? "FAIL " : "UNSUP";
      out << label << " " << r.name << ": " << r.detail << "\n" << std::flush;
      ++counts[r.outcome == "pass" ? 0 : r.outcome == "fail" ? 1 : 2];
      cases.push_back(r);
    }
  }
  out << counts[0] << " passed, " << counts[1] << " failed, " << counts[2] << " unsupported\n";
  if (!o.junit_path.empty()) {
    std::ofstream x(o.junit_path);
    x << ConformJUnit(cases);
    if (!x) throw Error(StrCat("--junit ", o.junit_path, ": cannot write"));
  }
  if (!keep) fs::remove_all(root);
  return cases;
}

std::string ConformJUnit(const std::vector<ConformCase>& cases) {
  int failures = 0, skipped = 0;
  double total = 0;
  for (const ConformCase& c : cases) {
    failures += c.outcome == "fail";
    skipped += c.outcome == "unsupported";
    total += c.seconds;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuite name=\"remat conform\" tests=\"" << cases.size() << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << total << "\">\n";
  for (const ConformCase& c : cases) {
    x << "  <testcase classname=\"conform\" name=\"" << XmlEscape(c.name) << "\" time=\""
      << c.seconds << "\"";
    if (c.outcome == "pass") {
      x << "/>\n";
    } else if (c.outcome == "fail") {
      x << ">\n    <failure message=\"" << XmlEscape(c.detail) << "\"/>\n  </testcase>\n";
    } else {
      x << ">\n    <skipped message=\"" << XmlEscape(c.detail) << "\"/>\n  </testcase>\n";
    }
  }
  x << "</testsuite>\n";
  return x.str();
}

}  // namespace remat
