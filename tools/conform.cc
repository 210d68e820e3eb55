#include "tools/conform.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "engines/api/error.h"
#include "engines/api/policy.h"
#include "engines/api/program_text.h"
#include "engines/api/registry.h"
#include "harness/case_directory.h"
#include "harness/case_spec.h"
#include "harness/conformance.h"
#include "problems/problem.h"
#include "tools/residual_diff.h"
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

// stats.json as read: the memory fields an engine may report.
struct Stats {
  int64_t peak_bytes = -1;      // -1: not reported
  int64_t residual_bytes = -1;  // -1: not reported
  double residual_slack = -1;   // a fraction; -1: not declared
  std::vector<std::string> residuals;  // the listing, one residual a line (tools/residual_diff.h)
};

// Reads stats.json; returns what is malformed or inconsistent, or "".
std::string ReadStats(const std::string& path, Stats* stats) {
  std::ifstream in(path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    return StrCat("stats.json: not JSON: ", e.what());
  }
  if (!j.is_object()) return "stats.json: not a JSON object";
  int64_t* fields[2] = {&stats->peak_bytes, &stats->residual_bytes};
  const char* keys[2] = {"peak_bytes", "residual_bytes"};
  for (int k = 0; k < 2; ++k) {
    if (!j.contains(keys[k]) || j[keys[k]].is_null()) continue;
    if (!j[keys[k]].is_number_integer()) {
      return StrCat("stats.json: ", keys[k], " is ", j[keys[k]].dump(), ", not an integer");
    }
    *fields[k] = j[keys[k]].get<int64_t>();
    if (*fields[k] < 0) return StrCat("stats.json: ", keys[k], " is negative (", *fields[k], ")");
  }
  if (stats->peak_bytes >= 0 && stats->residual_bytes >= 0 &&
      stats->peak_bytes < stats->residual_bytes) {
    return StrCat("stats.json: peak_bytes ", stats->peak_bytes, " < residual_bytes ",
                  stats->residual_bytes,
                  ": what is saved for the backward pass is held at the peak");
  }
  if (j.contains("residual_slack") && !j["residual_slack"].is_null()) {
    const nlohmann::json& v = j["residual_slack"];
    if (!v.is_number() || !(v.get<double>() >= 0)) {
      return StrCat("stats.json: residual_slack is ", v.dump(),
                    ", expected a fraction >= 0 (0.1: within 10% of remat's prediction)");
    }
    if (stats->residual_bytes < 0) {
      return "stats.json: residual_slack without residual_bytes: a slack of nothing";
    }
    stats->residual_slack = v.get<double>();
  }
  if (j.contains("residuals") && !j["residuals"].is_null()) {
    const nlohmann::json& v = j["residuals"];
    if (!v.is_array()) return StrCat("stats.json: residuals is ", v.dump(), ", expected an array of strings");
    // A line as print_saved_residuals prints it, or an object with its
    // type and source as `remat run --json` writes its own listing.
    for (size_t i = 0; i < v.size(); ++i) {
      const nlohmann::json& r = v[i];
      if (r.is_string()) {
        stats->residuals.push_back(r.get<std::string>());
      } else if (r.is_object() && r.contains("type") && r["type"].is_string() &&
                 r.contains("source") && r["source"].is_string()) {
        stats->residuals.push_back(r["type"].get<std::string>() + " " +
                                   r["source"].get<std::string>());
      } else {
        return StrCat("stats.json: residuals[", i, "] is ", r.dump(),
                      ", expected a string such as \"f32[8,16] output of relu from problems/x.cc:31\" "
                      "or an object with a \"type\" and a \"source\"");
      }
    }
    if (stats->residual_bytes < 0) return "stats.json: residuals without residual_bytes: a listing of no total";
  }
  return "";
}

// "+12.5%": how far `got` is from `predicted`, relative to it.
std::string RelativeDifference(int64_t got, int64_t predicted) {
  if (predicted == 0) return got == 0 ? "+0%" : "+inf%";
  std::ostringstream s;
  const double d = 100.0 * (static_cast<double>(got) - predicted) / predicted;
  s << (d >= 0 ? "+" : "");
  // "+137%", "+8.33%": never an exponent.
  if (std::abs(d) >= 100) {
    s << std::fixed << std::setprecision(0) << d << "%";
  } else {
    s << std::setprecision(3) << d << "%";
  }
  return s.str();
}

// A case's name as every line and the JUnit XML print it: the problem at
// its test sizes, and the variant unless as written ("policy=dots_saveable",
// "schedule=sqrt").
std::string CaseName(const Problem& problem, const CaseVariant& variant) {
  Case named;  // no program, no inputs: only what ToString prints
  named.problem = &problem;
  named.params = ResolveParams(problem, {}, /*test_sizes=*/true);
  const std::string name = named.ToString();
  if (variant.is_as_written()) return name;
  return StrCat(name, variant.is_schedule() ? " schedule=" : " policy=", variant.spec());
}

// Whether the problem at its test sizes has a scan or a chain: where the
// schedules run.
bool HasLoop(const Problem& problem) {
  return Schedulable(problem.Build(ResolveParams(problem, {}, /*test_sizes=*/true)));
}

// One case: writes its directory, runs the engine, judges what it wrote;
// returns `result` (named by the caller) with the outcome filled in.
ConformCase RunCase(const ConformOptions& o, const Problem& problem, const CaseVariant& variant,
                    const fs::path& dir, double timeout_seconds, Engine& oracle,
                    Engine& recompute, ConformCase result) {
  Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  c.program = variant.Apply(c.program);
  const std::vector<std::string> wrt = WriteCaseDirectory(c, variant, dir.string());
  const std::string log = (dir / "engine.log").string();
  const auto start = std::chrono::steady_clock::now();
  const Exit e = RunWithTimeout(o.engine_cmd + " " + ShellQuote(dir.string()), log,
                                timeout_seconds);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto fail = [&](const std::string& why) {
    result.outcome = ConformOutcome::kFail;
    result.detail = why;
    return result;
  };
  if (e.timed_out) {
    return fail(StrCat("timed out after ", timeout_seconds, " s (killed",
                       timeout_seconds < o.timeout_seconds ? ": the run's --time-limit" : "",
                       "); log: ", LogTail(log, 3)));
  }
  if (e.signal != 0) {
    return fail(StrCat("killed by signal ", e.signal, " (", strsignal(e.signal), "); log: ",
                       LogTail(log, 3)));
  }
  if (e.status == kUnsupportedExit) {
    result.outcome = ConformOutcome::kUnsupported;
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
    // The case's name leads the line already; the detail need not repeat it.
    std::string what = a.detail;
    const std::string prefix = c.ToString() + ": ";
    if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
    switch (a.kind) {
      case Agreement::Kind::kShape: return fail("wrong shape: " + what);
      case Agreement::Kind::kDType: return fail("wrong dtype: " + what);
      case Agreement::Kind::kCount: return fail(what);
      default:
        return fail(StrCat("disagrees with the float64 oracle (", std::setprecision(3),
                           a.worst_ratio, "x the tolerance): ", what));
    }
  }
  Stats stats;
  if (fs::exists(dir / "stats.json")) {
    const std::string bad = ReadStats((dir / "stats.json").string(), &stats);
    if (!bad.empty()) return fail(bad);
  }
  std::ostringstream detail;
  detail << "worst " << std::setprecision(2) << a.worst_ratio << "x tolerance";
  if (stats.residual_bytes >= 0) {
    const Result mine = recompute.ValueAndGrad(c.program, c.inputs, c.wrt);
    result.residual_bytes = stats.residual_bytes;
    result.predicted_residual_bytes = mine.stats.residual_bytes;
    const std::string off = RelativeDifference(stats.residual_bytes, mine.stats.residual_bytes);
    if (stats.residual_bytes != mine.stats.residual_bytes && !stats.residuals.empty()) {
      result.residual_diff =
          FormatResidualDiffs(DiffResiduals(c.program, mine.stats.residuals, stats.residuals), "      ");
    }
    if (stats.residual_slack >= 0 &&
        std::abs(static_cast<double>(stats.residual_bytes - mine.stats.residual_bytes)) >
            stats.residual_slack * static_cast<double>(mine.stats.residual_bytes)) {
      return fail(StrCat("residuals ", stats.residual_bytes, " B, remat's prediction ",
                         mine.stats.residual_bytes, " B (", off,
                         "): beyond the engine's declared residual_slack of ",
                         100 * stats.residual_slack, "%"));
    }
    detail << "; residuals " << stats.residual_bytes << " B (remat recompute: "
           << mine.stats.residual_bytes << " B"
           << (stats.residual_bytes == mine.stats.residual_bytes ? "" : ", " + off) << ")";
  }
  result.outcome = ConformOutcome::kPass;
  result.detail = detail.str();
  return result;
}

// Whether the engine's residuals follow the policy on one problem: where
// remat saves strictly less under nothing_saveable than under
// everything_saveable, does the engine too? Judged on the run, not on the
// case (CONTRACT.md, "Engines in another process"): an engine whose op rules
// differ may legitimately save the same under both on a problem (PyTorch's
// relu saves its output, which is the next layer's input: a chain of them
// saves as much stored as checkpointed), but an engine that follows the
// policy nowhere ignores it. `later` is the case of the two that ran second;
// a pair that does not follow gets a note in its detail.
enum class PolicyOrder { kNotJudged, kFollows, kDoesNot };
PolicyOrder JudgePolicyOrder(const ConformCase& earlier, ConformCase* later) {
  if (earlier.outcome != ConformOutcome::kPass || later->outcome != ConformOutcome::kPass) {
    return PolicyOrder::kNotJudged;
  }
  if (earlier.residual_bytes < 0 || later->residual_bytes < 0) return PolicyOrder::kNotJudged;
  const bool later_is_nothing = later->variant == CaseVariant::OfPolicy("nothing_saveable");
  const ConformCase& nothing = later_is_nothing ? *later : earlier;
  const ConformCase& everything = later_is_nothing ? earlier : *later;
  if (nothing.predicted_residual_bytes >= everything.predicted_residual_bytes) {
    return PolicyOrder::kNotJudged;
  }
  if (nothing.residual_bytes < everything.residual_bytes) return PolicyOrder::kFollows;
  later->detail += StrCat("; note: ", nothing.residual_bytes, " B under nothing_saveable, not below ",
                          everything.residual_bytes, " B under everything_saveable, where remat saves ",
                          nothing.predicted_residual_bytes, " B < ",
                          everything.predicted_residual_bytes, " B");
  return PolicyOrder::kDoesNot;
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

ConformRun RunConform(const ConformOptions& o, std::ostream& out) {
  if (o.engine_cmd.empty()) throw Error("--engine-cmd: empty; expected a command, e.g. \"python3 my_engine.py\"");
  if (!(o.timeout_seconds > 0)) throw Error(StrCat("--timeout ", o.timeout_seconds, ": expected seconds > 0"));
  if (!(o.time_limit_seconds >= 0)) {
    throw Error(StrCat("--time-limit ", o.time_limit_seconds, ": expected seconds >= 0 (0: none)"));
  }
  std::vector<const Problem*> problems;
  if (o.problems.empty()) {
    for (const auto& p : AllProblems()) problems.push_back(p.get());
  } else {
    for (const std::string& name : o.problems) problems.push_back(&FindProblem(name));
  }
  std::vector<CaseVariant> variants = o.variants;
  if (variants.empty()) {
    variants.push_back(CaseVariant());
    for (const std::string& name : Policy::Names()) {
      // A policy that needs arguments (save_from_both_policies:P+Q) is
      // run only when --policies gives them.
      try {
        variants.push_back(CaseVariant::OfPolicy(name));
      } catch (const Error&) {
      }
    }
  }
  for (const CaseVariant& v : variants) {
    if (v.is_cap() || v.is_budget_under_cap()) {
      throw Error(StrCat("conform: '", v.Label(), "': a case directory carries no memory cap "
                         "(an engine outside remat runs the program, under a policy or a "
                         "schedule, or as written)"));
    }
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
  ConformRun run;
  const auto start = std::chrono::steady_clock::now();
  std::string stopped;  // why the remaining cases are not run
  // The problems where remat's residuals differ between nothing_saveable and
  // everything_saveable and the engine reported both; those where the
  // engine's did not follow.
  int judged_problems = 0;
  std::vector<std::string> unfollowed;
  for (const Problem* problem : problems) {
    // The index in run.cases of this problem's nothing_saveable and
    // everything_saveable cases, once run: the pair JudgePolicyOrder reads.
    int nothing = -1, everything = -1;
    std::string last_diff, last_diff_policy;  // the problem's last printed residual listing
    // Built once per problem, and only where a variant asks.
    std::optional<bool> has_loop;
    for (const CaseVariant& variant : variants) {
      if (variant.needs_loop()) {
        if (!has_loop) has_loop = HasLoop(*problem);
        if (!*has_loop) continue;
      }
      const std::string dir_name =
          problem->name() + "." + (variant.is_as_written() ? "as_written" : variant.Label());
      std::string safe;
      for (char ch : dir_name) safe += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' ? ch : '_';
      ConformCase r;
      r.problem = problem->name();
      r.variant = variant;
      r.name = CaseName(*problem, variant);
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (stopped.empty() && o.time_limit_seconds > 0 && elapsed >= o.time_limit_seconds) {
        stopped = StrCat("not run: the run's --time-limit of ", o.time_limit_seconds,
                         " s was reached");
      }
      if (!stopped.empty()) {
        r.outcome = ConformOutcome::kNotRun;
        r.detail = stopped;
        run.cases.push_back(r);
        continue;
      }
      const double timeout =
          o.time_limit_seconds > 0 ? std::min(o.timeout_seconds, o.time_limit_seconds - elapsed)
                                   : o.timeout_seconds;
      try {
        r = RunCase(o, *problem, variant, root / safe, timeout, *oracle, *recompute, r);
      } catch (const Error& e) {
        r.outcome = ConformOutcome::kFail;
        r.detail = e.what();
      }
      const bool is_nothing = variant == CaseVariant::OfPolicy("nothing_saveable");
      const bool is_everything = variant == CaseVariant::OfPolicy("everything_saveable");
      PolicyOrder order = PolicyOrder::kNotJudged;
      if (is_nothing && everything >= 0) order = JudgePolicyOrder(run.cases[everything], &r);
      if (is_everything && nothing >= 0) order = JudgePolicyOrder(run.cases[nothing], &r);
      if (order != PolicyOrder::kNotJudged) {
        ++judged_problems;
        if (order == PolicyOrder::kDoesNot) unfollowed.push_back(problem->name());
      }
      if (is_nothing) nothing = static_cast<int>(run.cases.size());
      if (is_everything) everything = static_cast<int>(run.cases.size());
      const char* label = r.outcome == ConformOutcome::kPass   ? "PASS "
                          : r.outcome == ConformOutcome::kFail ? "FAIL "
                                                               : "UNSUP";
      out << label << " " << r.name << ": " << r.detail << "\n";
      if (!r.residual_diff.empty()) {
        // Policies often leave a problem's residuals alone: a listing the
        // previous case of the problem printed is named, not repeated.
        if (r.residual_diff == last_diff && !last_diff_policy.empty()) {
          out << "      residuals differ from remat's as under " << last_diff_policy << "\n";
        } else {
          out << "      where the residuals differ from remat's, by site:\n" << r.residual_diff;
        }
        last_diff = r.residual_diff;
        last_diff_policy = variant.Label();
      }
      if (r.outcome == ConformOutcome::kFail) {
        // benchdnn's repro line: the one command that reruns this case,
        // keeping its directory to look into.
        out << "      rerun: remat conform --engine-cmd " << ShellQuote(o.engine_cmd)
            << " --problems " << problem->name() << " --policies " << variant.Label()
            << " --keep /tmp/remat-conform\n";
        if (o.fail_fast) stopped = "not run: --fail-fast stopped the run at the first failure";
      }
      out << std::flush;
      run.cases.push_back(r);
    }
  }
  int passed = 0, failed = 0, unsupported = 0, not_run = 0;
  for (const ConformCase& c : run.cases) {
    passed += c.outcome == ConformOutcome::kPass;
    failed += c.outcome == ConformOutcome::kFail;
    unsupported += c.outcome == ConformOutcome::kUnsupported;
    not_run += c.outcome == ConformOutcome::kNotRun;
  }
  if (judged_problems > 0) {
    out << "residuals follow the policy (less under nothing_saveable than everything_saveable, as "
           "remat's) on "
        << judged_problems - static_cast<int>(unfollowed.size()) << " of " << judged_problems
        << " problems" << (unfollowed.empty() ? "" : "; not on " + Join(unfollowed, ", "))
        << "\n";
  }
  out << passed << " passed, " << failed << " failed, " << unsupported << " unsupported";
  if (not_run > 0) out << ", " << not_run << " not run (" << stopped.substr(9) << ")";
  out << "\n";
  if (failed > 0) {
    run.verdict = StrCat(failed, " of ", run.cases.size(), " cases failed");
  } else if (not_run > 0) {
    run.verdict = StrCat(not_run, " of ", run.cases.size(), " cases were not run");
  } else if (judged_problems > 0 && static_cast<int>(unfollowed.size()) == judged_problems) {
    run.verdict = StrCat("the residuals follow the policy on none of the ", judged_problems,
                         " problems where remat's do: the engine saves as much under "
                         "nothing_saveable as under everything_saveable, as one that ignores the "
                         "regions' policy does");
  } else if (unsupported == static_cast<int>(run.cases.size()) && !o.allow_unsupported) {
    run.verdict = StrCat("every case (", unsupported,
                         ") was unsupported: the engine was judged on nothing "
                         "(--allow-unsupported accepts that)");
  }
  run.ok = run.verdict.empty();
  if (!run.ok) out << "remat conform: " << run.verdict << "\n";
  if (!o.junit_path.empty()) {
    std::ofstream x(o.junit_path);
    x << ConformJUnit(run.cases);
    if (!x) throw Error(StrCat("--junit ", o.junit_path, ": cannot write"));
  }
  if (!keep) fs::remove_all(root);
  return run;
}

std::string ConformJUnit(const std::vector<ConformCase>& cases) {
  int failures = 0, skipped = 0;
  double total = 0;
  for (const ConformCase& c : cases) {
    failures += c.outcome == ConformOutcome::kFail;
    skipped += c.outcome == ConformOutcome::kUnsupported || c.outcome == ConformOutcome::kNotRun;
    total += c.seconds;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuite name=\"remat conform\" tests=\"" << cases.size() << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"" << total << "\">\n";
  for (const ConformCase& c : cases) {
    x << "  <testcase classname=\"conform\" name=\"" << XmlEscape(c.name) << "\" time=\""
      << c.seconds << "\"";
    if (c.outcome == ConformOutcome::kPass) {
      x << "/>\n";
    } else if (c.outcome == ConformOutcome::kFail) {
      x << ">\n    <failure message=\"" << XmlEscape(c.detail) << "\"/>\n  </testcase>\n";
    } else {
      x << ">\n    <skipped message=\"" << XmlEscape(c.detail) << "\"/>\n  </testcase>\n";
    }
  }
  x << "</testsuite>\n";
  return x.str();
}

}  // namespace remat
