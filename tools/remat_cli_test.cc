#include "tools/remat_cli.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/onednn/platform.h"
#include "harness/conformance.h"
#include "harness/cpu_link.h"
#include "harness/run_delay.h"
#include "harness/stats_json.h"
#include "problems/problem.h"
#include "engines/schedule/schedule.h"
#include "engines/api/npy.h"
#include "tools/remat_cli_test_util.h"

namespace remat {
namespace {

TEST(RematCliTest, ListShowsProblemsEnginesAndPolicies) {
  Output o = Remat({"list"});
  EXPECT_EQ(o.status, 0) << o.err;
  for (const char* word : {"layer_loss", "scan_stack", "dot_policy", "sin_chain", "sin_recursive",
                           "--param L=N", "eager", "reference", "dtr", "dtr_eq", "dots_saveable"}) {
    EXPECT_NE(o.out.find(word), std::string::npos) << word << "\n" << o.out;
  }
}

TEST(RematCliTest, RunPrintsLossGradientsPeakAndTime) {
  for (const auto& p : AllProblems()) {
    std::vector<std::string> args = {"run", "--problem", p->name(), "--engine", "eager"};
    for (const ParamSpec& s : p->params()) {
      args.push_back("--param");
      args.push_back(s.name + "=" + std::to_string(s.test_value));
    }
    Output o = Remat(args);
    ASSERT_EQ(o.status, 0) << p->name() << ": " << o.err;
    for (const char* word : {"loss", "grad", "peak", "high water", "residuals", "flops", "time"}) {
      EXPECT_NE(o.out.find(word), std::string::npos) << word << "\n" << o.out;
    }
  }
}

TEST(RematCliTest, DumpThenInputsRoundTripsBitForBit) {
  const std::string a = TempDir("dump_a"), b = TempDir("dump_b");
  const std::vector<std::string> common = {"--problem", "layer_loss", "--param", "d=8",
                                           "--param", "N=4"};
  std::vector<std::string> first = {"run", "--dump", a, "--seed", "5"};
  first.insert(first.end(), common.begin(), common.end());
  ASSERT_EQ(Remat(first).status, 0);
  // The dumped gradients are what the engine computes on the same inputs.
  Case c = MakeCase(FindProblem("layer_loss"), {{"d", 8}, {"N", 4}}, 5);
  Result r = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
  EXPECT_TRUE(BitwiseEqual(ReadNpy(a + "/loss.npy"), r.value));
  EXPECT_TRUE(BitwiseEqual(ReadNpy(a + "/grad_w2.npy"), r.grads[1]));
  EXPECT_TRUE(std::filesystem::exists(a + "/stats.json"));
  // Reading the dumped inputs back (a different seed is then ignored).
  std::vector<std::string> second = {"run", "--inputs", a, "--dump", b, "--seed", "9"};
  second.insert(second.end(), common.begin(), common.end());
  Output o = Remat(second);
  ASSERT_EQ(o.status, 0) << o.err;
  for (const char* f : {"loss.npy", "grad_w1.npy", "grad_w2.npy", "grad_w3.npy"}) {
    EXPECT_TRUE(BitwiseEqual(ReadNpy(a + "/" + f), ReadNpy(b + "/" + f))) << f;
  }
}

TEST(RematCliTest, JsonOutputParses) {
  Output o = Remat({"run", "--problem", "sin_chain", "--json"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("\"peak_bytes\""), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"grad_norms\""), std::string::npos) << o.out;
}

TEST(RematCliTest, ResidualsAndProgramListings) {
  Output r = Remat({"residuals", "--problem", "sin_chain"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("f32[5,4] from the argument W1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output of sin"), std::string::npos) << r.out;
  Output p = Remat({"program", "--problem", "scan_stack", "--param", "L=3"});
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.out.find("weights: f32[3,512,512]"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find(" = scan(%"), std::string::npos) << p.out;
  // The jaxpr-like listing is kept under --format=listing.
  Output listing =
      Remat({"program", "--problem", "scan_stack", "--param", "L=3", "--format", "listing"});
  ASSERT_EQ(listing.status, 0) << listing.err;
  EXPECT_NE(listing.out.find("scan[length=3]"), std::string::npos) << listing.out;
  Output bad = Remat({"program", "--problem", "scan_stack", "--format", "yaml"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("expected text or listing"), std::string::npos) << bad.err;
}

TEST(RematCliTest, SchedulesApplyToAChainOfBlocks) {
  // mlp_chain is a loop of checkpointed blocks (no scan): --schedule groups
  // them into a chain and reverses it, the memory prediction holding.
  Output p = Remat({"program", "--problem", "mlp_chain", "--param", "L=5", "--schedule",
                    "revolve:2"});
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.out.find("= chain(%"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("schedule=\"revolve:2\""), std::string::npos) << p.out;
  Output r = Remat({"run", "--problem", "mlp_chain", "--param", "L=9", "--param", "d=32", "--param",
                    "N=256", "--engine", "recompute", "--schedule", "budget:256KiB", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stats"]["peak_bytes"], j["stats"]["predicted_peak_bytes"]) << r.out;
  EXPECT_GT(j["stats"]["flops_recomputed"].get<int64_t>(), 0) << r.out;
  Output small = Remat({"run", "--problem", "mlp_chain", "--param", "d=32", "--engine",
                        "recompute", "--schedule", "budget:64KiB"});
  EXPECT_EQ(small.status, 1);
  EXPECT_NE(small.err.find("the smallest feasible is"), std::string::npos) << small.err;
}

TEST(RematCliTest, BadInputIsAClearError) {
  struct Bad {
    std::vector<std::string> args;
    int status;
    const char* says;
  };
  const std::string dir = TempDir("bad_inputs");
  std::filesystem::create_directories(dir);
  const std::vector<Bad> cases = {
      {{"frobnicate"}, 2, "unknown command"},
      {{"run", "--problem", "nope"}, 1, "problems: layer_loss"},
      {{"run", "--problem", "sin_chain", "--engine", "nope"}, 1, "engines: "},
      {{"run", "--problem", "scan_stack", "--param", "depth=3"}, 1, "L (default 8)"},
      {{"run", "--problem", "scan_stack", "--param", "L=x"}, 1, "not an integer"},
      {{"run", "--problem", "scan_stack", "--param", "L"}, 1, "NAME=INTEGER"},
      {{"run", "--problem", "sin_chain", "--inputs", dir}, 1, "W1.npy"},
      {{"run", "--problem", "sin_chain", "--max-memory", "lots"}, 1, "cannot read \"lots\""},
      {{"run", "--problem", "sin_chain", "--max-memory", "100B"}, 1, "--max-memory"},
      {{"run"}, 2, "--problem"},
      {{"run", "--problem", "sin_chain", "--program", "x.remat"}, 2, "not both"},
      {{"run", "--program", "/nonexistent/x.remat"}, 1, "/nonexistent/x.remat: cannot open"},
      {{"run", "--problem", "sin_chain", "--bogus"}, 2, "bogus"},
      // Found by the fuzzer: Boost loops forever formatting this error.
      {{"program", "--p%canonical_option%"}, 2, "contains '%'"},
      {{"run", "--problem", "sin_chain", "--seed", "%canonical_option%"}, 2, "contains '%'"},
  };
  for (const Bad& b : cases) {
    Output o = Remat(b.args);
    EXPECT_EQ(o.status, b.status) << b.args[0] << " " << o.err;
    EXPECT_NE(o.err.find(b.says), std::string::npos) << "expected '" << b.says << "' in: " << o.err;
  }
}

TEST(RematCliTest, InputOfTheWrongShapeNamesFileAndShapes) {
  const std::string dir = TempDir("wrong_shape");
  ASSERT_EQ(Remat({"run", "--problem", "sin_chain", "--dump", dir}).status, 0);
  WriteNpy(dir + "/W2.npy", Tensor::Zeros(DType::kF32, Shape({5, 6})));
  Output o = Remat({"run", "--problem", "sin_chain", "--inputs", dir});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("W2.npy"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("[6,5]"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("[5,6]"), std::string::npos) << o.err;
}



// Lines of `text` that start with `prefix`.
int CountLines(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(prefix, 0) == 0;
  return n;
}


TEST(RematCliTest, WrtChoosesTheInputsToDifferentiate) {
  const std::vector<std::string> layer = {"run", "--problem", "layer_loss", "--param", "d=8",
                                          "--param", "N=4"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = layer;
    args.insert(args.end(), extra.begin(), extra.end());
    return Remat(args);
  };
  // The default is the problem's (the weights); all adds the input x, as
  // jax.grad(f, argnums=(0, 1, 2, 3)).
  Output plain = with({"--json"});
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["wrt"],
            nlohmann::json({"w1", "w2", "w3"}));
  Output all = with({"--json", "--wrt", "all"});
  ASSERT_EQ(all.status, 0) << all.err;
  const nlohmann::json j = nlohmann::json::parse(all.out);
  EXPECT_EQ(j["wrt"], nlohmann::json({"w1", "w2", "w3", "x"}));
  ASSERT_TRUE(j["grad_norms"].contains("x")) << all.out;
  EXPECT_GT(j["grad_norms"]["x"].get<double>(), 0) << all.out;
  // The printed norms name each input.
  Output text = with({"--wrt", "x,w2"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(CountLines(text.out, "grad x "), 1) << text.out;
  EXPECT_EQ(CountLines(text.out, "grad w2 "), 1) << text.out;
  EXPECT_EQ(CountLines(text.out, "grad w1 "), 0) << text.out;

  // --dump writes a gradient per differentiated input, in the order named,
  // each bit for bit what the engine computes with that wrt.
  const std::string dir = TempDir("dump_wrt");
  Output dumped = with({"--wrt", "x,w*", "--dump", dir, "--seed", "3"});
  ASSERT_EQ(dumped.status, 0) << dumped.err;
  Case c = MakeCase(FindProblem("layer_loss"), {{"d", 8}, {"N", 4}}, 3);
  Result r = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, {3, 0, 1, 2});
  const std::vector<std::string> order = {"x", "w1", "w2", "w3"};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_TRUE(BitwiseEqual(ReadNpy(dir + "/grad_" + order[i] + ".npy"), r.grads[i])) << order[i];
  }
  std::ifstream stats(dir + "/stats.json");
  EXPECT_EQ(nlohmann::json::parse(stats)["wrt"], nlohmann::json(order));
  // The weights' gradients do not depend on whether x's is taken too.
  Result weights = MakeEngine("eager")->ValueAndGrad(c.program, c.inputs, c.wrt);
  EXPECT_TRUE(BitwiseEqual(ReadNpy(dir + "/grad_w2.npy"), weights.grads[1]));
  // A prefix, as problems' wrt specs use: mlp_chain's default is w*.
  Output chain = Remat({"run", "--problem", "mlp_chain", "--param", "L=3", "--param", "d=8",
                        "--param", "N=4", "--wrt", "w*", "--json"});
  ASSERT_EQ(chain.status, 0) << chain.err;
  EXPECT_EQ(nlohmann::json::parse(chain.out)["wrt"], nlohmann::json({"w0", "w1", "w2"}));
  // residuals and schedule take --wrt too: x's cotangent needs w1 saved.
  Output saved = Remat({"residuals", "--problem", "layer_loss", "--param", "d=8", "--param",
                        "N=4", "--wrt", "x"});
  ASSERT_EQ(saved.status, 0) << saved.err;
  EXPECT_NE(saved.out.find("from the argument w1"), std::string::npos) << saved.out;

  struct Bad {
    std::vector<std::string> wrt;
    std::vector<const char*> says;
  };
  for (const Bad& b : std::vector<Bad>{
           {{"--wrt", "y"}, {"'y'", "not an input of layer_loss", "w1, w2, w3, x"}},
           {{"--wrt", "v*"}, {"'v*'", "w1, w2, w3, x"}},
           {{"--wrt", "x,w1,x"}, {"names x twice"}},
           {{"--wrt", "x", "--wrt", "x"}, {"names x twice"}},
           {{"--wrt", "w*,w2"}, {"names w2 twice", "'w*'"}},
           {{"--wrt", "x,,w1"}, {"'x,,w1'", "empty name"}},
           {{"--wrt", ""}, {"empty name"}},
           {{"--wrt", "all,x"}, {"--wrt all", "no other name"}},
       }) {
    Output o = with(b.wrt);
    EXPECT_EQ(o.status, 1) << b.wrt[1] << ": " << o.err;
    for (const char* word : b.says) {
      EXPECT_NE(o.err.find(word), std::string::npos) << "expected '" << word << "' in: " << o.err;
    }
  }
  Output program = Remat({"program", "--problem", "layer_loss", "--wrt", "y"});
  EXPECT_EQ(program.status, 1);
  EXPECT_NE(program.err.find("'y'"), std::string::npos) << program.err;
}

TEST(RematCliTest, ListingsHonourCheckpointsByDefault) {
  // sin_recursive checkpoints recursively: the default engine (recompute)
  // saves O(log D) values, where eager saves all D.
  const std::vector<std::string> recursive = {"--problem", "sin_recursive", "--param", "D=8"};
  auto listing = [&](const std::string& command, std::vector<std::string> extra) {
    std::vector<std::string> args = {command};
    args.insert(args.end(), recursive.begin(), recursive.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return Remat(args);
  };
  Output honoured = listing("residuals", {});
  ASSERT_EQ(honoured.status, 0) << honoured.err;
  EXPECT_EQ(honoured.out.rfind("# sin_recursive D=8 on recompute", 0), 0) << honoured.out;
  Output eager = listing("residuals", {"--engine", "eager"});
  ASSERT_EQ(eager.status, 0) << eager.err;
  EXPECT_EQ(CountLines(eager.out, "f32[] "), 8) << eager.out;
  EXPECT_LT(CountLines(honoured.out, "f32[] "), 8) << honoured.out;
  EXPECT_GT(CountLines(honoured.out, "f32[] "), 0) << honoured.out;
  // An engine that ignores the checkpoints says so first.
  const std::string note =
      "note: eager ignores the program's checkpoint regions: it saves everything; --engine "
      "recompute honours them";
  EXPECT_EQ(FirstLine(eager.out), note) << eager.out;
  EXPECT_EQ(honoured.out.find("ignores"), std::string::npos) << honoured.out;
  Output reference = listing("residuals", {"--engine", "reference"});
  ASSERT_EQ(reference.status, 0) << reference.err;
  EXPECT_EQ(FirstLine(reference.out).rfind("note: reference ignores", 0), 0) << reference.out;
  // schedule, the other listing, likewise.
  Output schedule = listing("schedule", {});
  ASSERT_EQ(schedule.status, 0) << schedule.err;
  EXPECT_EQ(schedule.out.rfind("# sin_recursive D=8 on recompute", 0), 0) << schedule.out;
  EXPECT_NE(schedule.out.find("recompute "), std::string::npos) << schedule.out;
  Output eager_schedule = listing("schedule", {"--engine", "eager"});
  ASSERT_EQ(eager_schedule.status, 0) << eager_schedule.err;
  EXPECT_EQ(FirstLine(eager_schedule.out), note) << eager_schedule.out;
  // No note where there is nothing to ignore (sin_plain has no region) ...
  Output plain = Remat({"residuals", "--problem", "sin_plain", "--engine", "eager"});
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out.find("ignores"), std::string::npos) << plain.out;
  // ... and one where a schedule is what is ignored.
  Output scheduled = Remat({"residuals", "--problem", "scan_stack", "--param", "L=4", "--param",
                            "d=8", "--param", "N=4", "--schedule", "sqrt", "--engine", "eager"});
  ASSERT_EQ(scheduled.status, 0) << scheduled.err;
  EXPECT_EQ(FirstLine(scheduled.out).rfind("note: eager ignores", 0), 0) << scheduled.out;
  // The registry's engines say which they are.
  EXPECT_TRUE(MakeEngine("recompute")->honours_checkpoints());
  EXPECT_FALSE(MakeEngine("eager")->honours_checkpoints());
  EXPECT_FALSE(MakeEngine("reference")->honours_checkpoints());
}

TEST(RematCliTest, RunTimesTheSecondRunAndReportsSetupApart) {
  for (const char* engine : {"eager", "recompute", "dtr"}) {
    for (const auto& p : AllProblems()) {
      SCOPED_TRACE(std::string(engine) + " " + p->name());
      std::vector<std::string> args = {"run", "--problem", p->name(), "--engine", engine, "--json"};
      for (const ParamSpec& s : p->params()) {
        args.push_back("--param");
        args.push_back(s.name + "=" + std::to_string(s.test_value));
      }
      Output o = Remat(args);
      ASSERT_EQ(o.status, 0) << o.err;
      EXPECT_EQ(o.err, "");
      const nlohmann::json j = nlohmann::json::parse(o.out);
      // Memory is a property of the schedule, not of the run: the setup run
      // and the timed run peak alike.
      EXPECT_EQ(j["first_run_peak_bytes"], j["stats"]["peak_bytes"]) << o.out;
      EXPECT_GT(j["first_run_seconds"].get<double>(), 0) << o.out;
    }
  }
  Output text = Remat({"run", "--problem", "layer_loss", "--param", "d=8", "--param", "N=4"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("(steady state: the second of two runs)"), std::string::npos)
      << text.out;
  EXPECT_EQ(CountLines(text.out, "setup       first run "), 1) << text.out;
  // The load the timed run saw, said next to its time (harness/run_delay.h).
  EXPECT_EQ(CountLines(text.out, "load        "), 1) << text.out;
  // And how far apart the CPUs were (harness/cpu_link.h), where there are two.
  if (CpuLinkRoundTripNs()) {
    EXPECT_EQ(CountLines(text.out, "cpus        a cache line's round trip between the CPUs: "), 1)
        << text.out;
  }
  EXPECT_NE(text.out.find("the timed run's threads waited for a CPU"), std::string::npos)
      << text.out;
  // Where the timed run's time went: its kernels, the largest first, and
  // the rest (layer_loss's eager runs matmuls, relus and the loss's sum).
  EXPECT_EQ(CountLines(text.out, "kernels     of the timed run's "), 1) << text.out;
  EXPECT_NE(text.out.find("matmul "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("; outside kernels "), std::string::npos) << text.out;
  Output as_json = Remat({"run", "--problem", "layer_loss", "--param", "d=8", "--param", "N=4",
                          "--json"});
  ASSERT_EQ(as_json.status, 0) << as_json.err;
  const nlohmann::json j = nlohmann::json::parse(as_json.out);
  // The same by kernel in the JSON: calls adding up to kernel_calls.
  {
    const nlohmann::json& stats = j["stats"];
    ASSERT_TRUE(stats.contains("kernel_times") && stats["kernel_times"].contains("matmul"))
        << as_json.out;
    int64_t calls = 0;
    for (const auto& [name, t] : stats["kernel_times"].items()) {
      EXPECT_GE(t["seconds"].get<double>(), 0) << name;
      calls += t["calls"].get<int64_t>();
    }
    EXPECT_EQ(calls, stats["kernel_calls"].get<int64_t>()) << as_json.out;
  }
  ASSERT_TRUE(j.contains("run_delay") && j.contains("busy")) << as_json.out;
  ASSERT_TRUE(j.contains("cpu_link_ns") && j["cpu_link_ns"].size() == 2) << as_json.out;
  if (CpuLinkRoundTripNs()) {
    EXPECT_GT(j["cpu_link_ns"][0].get<double>(), 0) << as_json.out;
  }
  if (j["run_delay"].is_number()) {
    EXPECT_EQ(j["busy"].get<bool>(), j["run_delay"].get<double>() > kQuietRunDelay);
  }
  const std::string dir = TempDir("dump_first_run");
  ASSERT_EQ(Remat({"run", "--problem", "sin_chain", "--dump", dir}).status, 0);
  std::ifstream in(dir + "/stats.json");
  const nlohmann::json stats = nlohmann::json::parse(in);
  EXPECT_GT(stats["first_run_seconds"].get<double>(), 0);
  EXPECT_EQ(stats["first_run_peak_bytes"], stats["peak_bytes"]);
}

TEST(RematCliTest, MemoryCapRunsAnOnlineEngineUnderIt) {
  const std::vector<std::string> mlp = {"--problem", "mlp_chain", "--param", "L=9", "--param",
                                        "d=32", "--param", "N=256"};
  auto run = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), mlp.begin(), mlp.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return Remat(args);
  };
  Output eager = run({"--json"});
  ASSERT_EQ(eager.status, 0) << eager.err;
  const int64_t eager_peak = nlohmann::json::parse(eager.out)["stats"]["peak_bytes"];
  // FRACx: a fraction of eager's peak on the same case.
  Output fraction = run({"--engine", "dtr", "--memory-cap", "0.6x", "--json"});
  ASSERT_EQ(fraction.status, 0) << fraction.err;
  const nlohmann::json j = nlohmann::json::parse(fraction.out);
  const int64_t cap = j["memory_cap_bytes"];
  EXPECT_EQ(cap, static_cast<int64_t>(0.6 * static_cast<double>(eager_peak)));
  EXPECT_LE(j["stats"]["peak_bytes"].get<int64_t>(), cap) << fraction.out;
  EXPECT_GT(j["stats"]["flops_recomputed"].get<int64_t>(), 0) << fraction.out;
  EXPECT_EQ(j["first_run_peak_bytes"], j["stats"]["peak_bytes"]);
  // BYTES: the same cap, dumped: eager's bits.
  const std::string a = TempDir("cap_eager"), b = TempDir("cap_dtr");
  ASSERT_EQ(run({"--dump", a}).status, 0);
  Output capped = run({"--engine", "dtr_eq", "--memory-cap", std::to_string(cap), "--dump", b});
  ASSERT_EQ(capped.status, 0) << capped.err;
  for (const std::string f : {"loss.npy", "grad_w0.npy", "grad_w4.npy", "grad_w8.npy"}) {
    EXPECT_TRUE(BitwiseEqual(ReadNpy(a + "/" + f), ReadNpy(b + "/" + f))) << f;
  }
  EXPECT_NE(capped.out.find("memory cap  "), std::string::npos) << capped.out;
  EXPECT_NE(capped.out.find(StrCat("(", cap, " bytes; peak is ")), std::string::npos) << capped.out;
  // 0 is no cap.
  Output none = run({"--engine", "dtr", "--memory-cap", "0"});
  ASSERT_EQ(none.status, 0) << none.err;
  EXPECT_EQ(none.out.find("memory cap"), std::string::npos) << none.out;
  // The listings take it too.
  Output listing = Remat({"schedule", "--problem", "scan_stack", "--param", "L=4", "--param",
                          "d=16", "--param", "N=64", "--engine", "dtr", "--memory-cap", "0.7x"});
  ASSERT_EQ(listing.status, 0) << listing.err;
  EXPECT_GT(CountLines(listing.out, "  recompute "), 0) << listing.out;
  EXPECT_NE(listing.out.find("under --memory-cap"), std::string::npos) << listing.out;

  struct Bad {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<Bad> bad = {
      {{"--memory-cap", "0.5x"}, "engine eager does not honour a memory cap"},
      {{"--engine", "recompute", "--memory-cap", "1MiB"}, "engines that do: dtr, dtr_eq"},
      {{"--engine", "dtr", "--memory-cap", "lots"}, "cannot read \"lots\""},
      {{"--engine", "dtr", "--memory-cap", "-1MiB"}, "cannot read \"-1MiB\""},
      {{"--engine", "dtr", "--memory-cap", "0x"}, "a positive fraction of eager's peak"},
      {{"--engine", "dtr", "--memory-cap", "-0.5x"}, "a positive fraction of eager's peak"},
      {{"--engine", "dtr", "--memory-cap", "x"}, "a positive fraction of eager's peak"},
      {{"--engine", "dtr", "--memory-cap", "halfx"}, "a positive fraction of eager's peak"},
      {{"--engine", "dtr", "--memory-cap", "nanx"}, "a positive fraction of eager's peak"},
      {{"--engine", "dtr", "--memory-cap", "1e-9x"}, "is not a byte count"},
      {{"--engine", "dtr", "--memory-cap", "1"}, "the smallest cap that worked is "},
  };
  for (const Bad& c : bad) {
    Output o = run(c.args);
    EXPECT_EQ(o.status, 1) << c.args.back() << ": " << o.err;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << "expected '" << c.says << "' in: " << o.err;
    EXPECT_NE(o.err.find("--memory-cap"), std::string::npos) << o.err;
  }
}

TEST(RematCliTest, OutputsWithNumbersCarryThePlatform) {
  const nlohmann::json platform = PlatformToJson(DescribePlatform());
  Output text = Remat({"run", "--problem", "layer_loss", "--param", "d=8", "--param", "N=4"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("\nplatform    " + FormatPlatform(DescribePlatform()) + "\n"),
            std::string::npos)
      << text.out;
  Output json = Remat({"run", "--problem", "layer_loss", "--param", "d=8", "--param", "N=4",
                       "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["platform"], platform);
  // The matmul impls the run used: layer_loss has matmuls, and each impl is
  // one this process's oneDNN created.
  ASSERT_TRUE(j["matmul_impls"].is_array()) << json.out;
  EXPECT_FALSE(j["matmul_impls"].empty()) << json.out;
  const std::vector<std::string> seen = OneDnnMatMulImplsSeen();
  for (const auto& impl : j["matmul_impls"]) {
    EXPECT_NE(std::find(seen.begin(), seen.end(), impl.get<std::string>()), seen.end()) << impl;
  }
  const std::string dir = TempDir("dump_platform");
  ASSERT_EQ(Remat({"run", "--problem", "layer_loss", "--param", "d=8", "--param", "N=4", "--dump",
                   dir})
                .status,
            0);
  std::ifstream in(dir + "/stats.json");
  const nlohmann::json stats = nlohmann::json::parse(in);
  EXPECT_EQ(stats["platform"], platform);
  EXPECT_FALSE(stats["matmul_impls"].empty());
  // PlatformFromJson reads back what was written.
  EXPECT_TRUE(PlatformDifferences(PlatformFromJson(stats["platform"]), DescribePlatform()).empty());
  EXPECT_EQ(PlatformFromJson(stats["platform"]).malloc_setting, DescribePlatform().malloc_setting);
  EXPECT_FALSE(PlatformFromJson(stats["platform"]).malloc_setting.empty());
  // The schedule listing prints a peak, so the platform too.
  Output schedule = Remat({"schedule", "--problem", "sin_chain"});
  ASSERT_EQ(schedule.status, 0) << schedule.err;
  EXPECT_NE(schedule.out.find("# platform: " + FormatPlatform(DescribePlatform())),
            std::string::npos)
      << schedule.out;
}


// memory_budget regions print their plan: the budget, what is kept of
// everything_saveable's bytes, the FLOPs recomputed, and whether the
// solver proved the plan optimal; a bad B is an error that names it.
TEST(RematCliTest, MemoryBudgetPrintsEachRegionsPlan) {
  Output o = Remat({"run", "--problem", "transformer_stack", "--param", "L=2", "--param", "D=16",
                    "--param", "H=2", "--param", "F=32", "--param", "S=4", "--param", "B=1",
                    "--engine", "recompute", "--policy", "memory_budget:0.5"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("budget      checkpoint at"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("memory_budget:0.5 ("), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("milp, proven optimal"), std::string::npos) << o.out;
  // eager runs regions inline: no plan to print.
  Output e = Remat({"run", "--problem", "sin_chain", "--engine", "eager", "--policy",
                    "memory_budget:0.5"});
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_EQ(e.out.find("budget      "), std::string::npos) << e.out;
  Output bad = Remat({"run", "--problem", "sin_chain", "--policy", "memory_budget:lots"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("memory_budget:lots"), std::string::npos) << bad.err;
}

// memory_budget:peak:... prints its resolution (the fraction, the peak
// against the limit) and then each region's plan at that fraction; a limit
// no plan fits is an error naming the policy and the smallest peak.
TEST(RematCliTest, PeakBudgetPrintsItsResolution) {
  const std::vector<std::string> small = {"--problem", "transformer_stack", "--param", "L=2",
                                          "--param",   "D=16",              "--param", "H=2",
                                          "--param",   "F=32",              "--param", "S=4",
                                          "--param",   "B=1",               "--engine", "recompute"};
  std::vector<std::string> args = {"run"};
  args.insert(args.end(), small.begin(), small.end());
  std::vector<std::string> min = args;
  min.insert(min.end(), {"--policy", "memory_budget:peak:min"});
  Output o = Remat(min);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("budget      memory_budget:peak:min (the smallest peak): fraction "),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("budget      checkpoint at"), std::string::npos) << o.out;
  std::vector<std::string> tiny = args;
  tiny.insert(tiny.end(), {"--policy", "memory_budget:peak:10B"});
  Output bad = Remat(tiny);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("'memory_budget:peak:10B'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("the smallest peak reachable is"), std::string::npos) << bad.err;
  Output parse = Remat({"run", "--problem", "sin_chain", "--policy", "memory_budget:peak:0.5x"});
  EXPECT_EQ(parse.status, 1);
  EXPECT_NE(parse.err.find("memory_budget:peak:0.5x"), std::string::npos) << parse.err;
}

TEST(RematCliTest, ParseBytes) {
  EXPECT_EQ(ParseBytes("1000"), 1000);
  EXPECT_EQ(ParseBytes("256MiB"), 256ll << 20);
  EXPECT_EQ(ParseBytes("1.5GiB"), 3ll << 29);
  EXPECT_EQ(ParseBytes("2GB"), 2000000000ll);
  EXPECT_THROW(ParseBytes("-1"), Error);
  EXPECT_THROW(ParseBytes("MiB"), Error);
}

// The remat binary chooses a short OpenMP spin where the user chose
// nothing (engines/onednn/omp_wait.h), and its platform line says how
// threads wait; a user's choice stands.
TEST(RematCliTest, TheBinaryWaitsShortlyAtBarriersUnlessTold) {
  const std::string remat = std::filesystem::absolute("tools/remat").string();
  const auto platform_of = [&](const std::string& env) {
    const std::string out = TempDir("omp_wait.txt");
    const std::string command = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env + " " + remat +
                                " run --problem sin_chain > " + out + " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("platform", 0) == 0) return line;
    }
    return std::string("no platform line");
  };
  EXPECT_NE(platform_of("").find("(OpenMP wait: GOMP_SPINCOUNT=20000)"), std::string::npos);
  EXPECT_NE(platform_of("OMP_WAIT_POLICY=active").find("(OpenMP wait: OMP_WAIT_POLICY=active)"),
            std::string::npos);
}

// remat conform --engine-cmd: engines written as shell scripts around the
// remat binary (a right engine) and deliberately wrong ones.
std::string EngineScript(const std::string& name, const std::string& body) {
  const std::string path = TempDir(name + ".sh");
  std::ofstream f(path);
  f << "#!/bin/sh\nd=\"$1\"\nremat=" << std::filesystem::absolute("tools/remat").string() << "\n"
    << body << "\n";
  f.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

Output ConformOn(const std::string& script, const std::string& problem,
                 const std::string& policies, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"conform", "--engine-cmd", script, "--problems", problem,
                                   "--policies", policies};
  args.insert(args.end(), extra.begin(), extra.end());
  return Remat(args);
}

Output Conform(const std::string& script, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"conform", "--engine-cmd", script, "--problems", "layer_loss",
                                   "--policies", "as_written"};
  args.insert(args.end(), extra.begin(), extra.end());
  return Remat(args);
}

constexpr char kRightEngine[] =
    "\"$remat\" run --program \"$d/program.txt\" --inputs \"$d\" --wrt all --dump \"$d\" "
    "--engine recompute >/dev/null";
// Right numbers, but it stores everything whatever the policy.
constexpr char kPolicyIgnoringEngine[] =
    "\"$remat\" run --program \"$d/program.txt\" --inputs \"$d\" --wrt all --dump \"$d\" "
    "--engine eager >/dev/null";

TEST(RematCliTest, ConformPassesARightEngineAndWritesJUnit) {
  const std::string xml = TempDir("conform.xml");
  Output o = Conform(EngineScript("right", kRightEngine), {"--junit", xml});
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("PASS  layer_loss"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("1 passed, 0 failed, 0 unsupported"), std::string::npos) << o.out;
  std::ifstream in(xml);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<testsuite name=\"remat conform\" tests=\"1\" failures=\"0\""),
            std::string::npos)
      << text.str();
}

TEST(RematCliTest, ConformNamesWhatIsWrongWithAWrongEngine) {
  const struct {
    const char* name;
    std::string body;
    const char* reason;
  } engines[] = {
      {"crashes", "echo boom >&2; exit 3", "exit status 3; log: boom"},
      {"writes_nothing", "true", "loss.npy: cannot open"},
      {"garbage", "echo garbage > \"$d/loss.npy\"", "loss.npy"},
      {"other_inputs",
       "\"$remat\" run --program \"$d/program.txt\" --seed 7 --wrt all --dump \"$d\" >/dev/null",
       "disagrees with the float64 oracle"},
      {"loses_a_gradient", std::string(kRightEngine) + "; rm \"$d/grad_w2.npy\"", "grad_w2.npy"},
      {"inconsistent_stats",
       std::string(kRightEngine) +
           "; echo '{\"peak_bytes\": 10, \"residual_bytes\": 20}' > \"$d/stats.json\"",
       "peak_bytes 10 < residual_bytes 20"},
      {"negative_stats",
       std::string(kRightEngine) + "; echo '{\"residual_bytes\": -1}' > \"$d/stats.json\"",
       "residual_bytes is negative"},
  };
  for (const auto& e : engines) {
    Output o = Conform(EngineScript(e.name, e.body));
    EXPECT_EQ(o.status, 1) << e.name << "\n" << o.out << o.err;
    EXPECT_NE(o.out.find("FAIL  layer_loss"), std::string::npos) << e.name << "\n" << o.out;
    EXPECT_NE(o.out.find(e.reason), std::string::npos) << e.name << "\n" << o.out;
    EXPECT_NE(o.out.find("0 passed, 1 failed, 0 unsupported"), std::string::npos) << o.out;
  }
}

TEST(RematCliTest, ConformKillsAHangingEngineAtTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  Output o = Conform(EngineScript("hangs", "sleep 60"), {"--timeout", "1"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(o.status, 1) << o.out;
  EXPECT_NE(o.out.find("timed out after 1 s"), std::string::npos) << o.out;
}

TEST(RematCliTest, ConformCountsUnsupportedApartFromFailed) {
  const std::string unsupported = EngineScript("unsupported", "echo 'unsupported: no regions'; exit 77");
  Output o = Conform(unsupported, {"--allow-unsupported"});
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("UNSUP layer_loss N=8 d=16: unsupported: no regions"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("0 passed, 0 failed, 1 unsupported"), std::string::npos) << o.out;
  // Without --allow-unsupported, an engine judged on nothing fails the run.
  Output nothing = Conform(unsupported);
  EXPECT_EQ(nothing.status, 1) << nothing.out;
  EXPECT_NE(nothing.out.find("every case (1) was unsupported: the engine was judged on nothing"),
            std::string::npos)
      << nothing.out;
  EXPECT_EQ(Remat({"conform"}).status, 2);  // --engine-cmd is required
  EXPECT_EQ(Conform("true", {"--policies", "no_such_policy"}).status, 1);
}

// --policies takes the bench's and the suite's variant labels: a schedule
// runs on the problems that have a scan or a chain (the program the engine
// reads carries it), and is skipped elsewhere; a cap, which a case
// directory cannot carry, and a schedule no engine could read are refused
// before any case runs, naming the label.
TEST(RematCliTest, ConformRunsSchedulesWhereThereIsALoopAndRefusesWhatNoCaseCanCarry) {
  const std::string keep = TempDir("conform_schedules");
  Output o = ConformOn(EngineScript("right_scheduled", kRightEngine), "layer_loss,scan_stack",
                       "as_written,schedule:revolve:1", {"--keep", keep});
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("PASS  scan_stack"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" schedule=revolve:1: "), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("layer_loss N=8 d=16 schedule="), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("3 passed, 0 failed, 0 unsupported"), std::string::npos) << o.out;
  std::ifstream program(keep + "/scan_stack.schedule_revolve_1/program.txt");
  std::stringstream text;
  text << program.rdbuf();
  EXPECT_NE(text.str().find("revolve:1"), std::string::npos) << text.str();
  std::ifstream case_json(keep + "/scan_stack.schedule_revolve_1/case.json");
  std::stringstream json;
  json << case_json.rdbuf();
  EXPECT_NE(json.str().find("\"variant\": \"schedule:revolve:1\""), std::string::npos)
      << json.str();

  for (const char* label : {"cap:0.5x", "budget-under-cap:0.5x", "schedule:revolve"}) {
    Output refused = ConformOn("true", "scan_stack", label);
    EXPECT_EQ(refused.status, 1) << label << ": " << refused.out << refused.err;
    EXPECT_NE(refused.err.find(label), std::string::npos) << refused.err;
    EXPECT_EQ(refused.out.find("PASS"), std::string::npos) << refused.out;
  }
}

// A wrong shape or dtype is named as such, with the type expected (the
// engine's f32, not the oracle's f64), and a wrong element by its index on
// every axis.
TEST(RematCliTest, ConformNamesAWrongShapeAndTheElementByAxis) {
  Output o = Conform(EngineScript(
      "wrong_shape", std::string(kRightEngine) + "; cp \"$d/loss.npy\" \"$d/grad_w2.npy\""));
  EXPECT_EQ(o.status, 1) << o.out;
  EXPECT_NE(o.out.find("FAIL  layer_loss N=8 d=16: wrong shape: grad w2 is f32[], expected f32[16,16]"),
            std::string::npos)
      << o.out;

  const Problem& problem = FindProblem("layer_loss");
  const Case c = MakeCase(problem, ResolveParams(problem, {}, /*test_sizes=*/true));
  const Result ref = MakeEngine("oracle")->ValueAndGrad(c.program, c.inputs, c.wrt);
  Result got;
  got.value = Cast(ref.value, DType::kF32);
  for (const Tensor& g : ref.grads) got.grads.push_back(Cast(g, DType::kF32));
  ASSERT_EQ(got.grads[0].shape().rank(), 2);
  const int64_t cols = got.grads[0].shape().dim(1);
  got.grads[0].f32()[2 * cols + 3] += 1.0f;  // grad 0's row 2, column 3
  const Agreement a = CompareWithOracle(c, got, ref);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.kind, Agreement::Kind::kValue);
  EXPECT_NE(a.detail.find("[2,3] = "), std::string::npos) << a.detail;
  got.grads[0] = Cast(got.grads[0], DType::kF64);
  const Agreement dtype = CompareWithOracle(c, got, ref);
  EXPECT_EQ(dtype.kind, Agreement::Kind::kDType);
  EXPECT_NE(dtype.detail.find("is f64[16,16], expected f32[16,16]"), std::string::npos)
      << dtype.detail;
}

// Memory claims are judged: residuals that ignore the policy (eager saves
// the same under every policy) fail the run where remat's prediction
// differs (sin_chain saves 44 B under nothing_saveable, 116 B under
// everything_saveable; layer_loss 2560 B under both), and a declared
// residual_slack is held to.
TEST(RematCliTest, ConformJudgesResidualsAgainstThePolicy) {
  const std::string both = "everything_saveable,nothing_saveable";
  Output right = ConformOn(EngineScript("right_memory", kRightEngine), "sin_chain,layer_loss", both);
  EXPECT_EQ(right.status, 0) << right.out;
  EXPECT_NE(right.out.find("residuals follow the policy (less under nothing_saveable than "
                           "everything_saveable, as remat's) on 1 of 1 problems\n4 passed, 0 failed"),
            std::string::npos)
      << right.out;

  const std::string ignores = EngineScript("ignores_policies", kPolicyIgnoringEngine);
  Output o = ConformOn(ignores, "sin_chain,layer_loss", both);
  EXPECT_EQ(o.status, 1) << o.out;
  EXPECT_NE(o.out.find(" policy=nothing_saveable: worst "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("; note: 116 B under nothing_saveable, not below 116 B under "
                       "everything_saveable, where remat saves 44 B < 116 B"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("on 0 of 1 problems; not on sin_chain\n4 passed, 0 failed"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("remat conform: the residuals follow the policy on none of the 1 problems"),
            std::string::npos)
      << o.out;
  // The pair is judged in either order of the two cases.
  Output reversed = ConformOn(ignores, "sin_chain", "nothing_saveable,everything_saveable");
  EXPECT_EQ(reversed.status, 1) << reversed.out;
  EXPECT_NE(reversed.out.find(" policy=everything_saveable: worst "), std::string::npos)
      << reversed.out;
  EXPECT_NE(reversed.out.find("; note: 116 B under nothing_saveable"), std::string::npos)
      << reversed.out;
  // Where remat saves the same under both, nothing is judged.
  Output same = ConformOn(ignores, "layer_loss", both);
  EXPECT_EQ(same.status, 0) << same.out;
  EXPECT_EQ(same.out.find("residuals follow"), std::string::npos) << same.out;

  Output slack = Conform(EngineScript("claims_slack",
                                      std::string(kRightEngine) +
                                          "; echo '{\"residual_bytes\": 1, \"residual_slack\": 0.1}' "
                                          "> \"$d/stats.json\""));
  EXPECT_EQ(slack.status, 1) << slack.out;
  EXPECT_NE(slack.out.find("beyond the engine's declared residual_slack of 10%"), std::string::npos)
      << slack.out;
  Output bad = Conform(EngineScript("bad_slack", std::string(kRightEngine) +
                                                     "; echo '{\"residual_bytes\": 1, "
                                                     "\"residual_slack\": \"some\"}' > \"$d/stats.json\""));
  EXPECT_NE(bad.out.find("residual_slack is \"some\", expected a fraction"), std::string::npos)
      << bad.out;
}

// An engine that lists its residuals (print_saved_residuals' lines) is
// shown beside remat's listing, site by site, where the bytes differ; the
// same listing under the next policy is named, not repeated; a malformed
// listing fails the case.
TEST(RematCliTest, ConformShowsWhereTheResidualsDifferSiteBySite) {
  const std::string listing =
      "{\"residual_bytes\": 128, \"residuals\": [\"f32[16,16] from the argument w2\", "
      "\"bool[8,16] output of gt from problems/layer_loss.cc:48 (relu)\"]}";
  Output o = ConformOn(EngineScript("lists_residuals", std::string(kRightEngine) + "; echo '" +
                                                           listing + "' > \"$d/stats.json\""),
                       "layer_loss", "as-written,dots_saveable");
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("residuals 128 B (remat recompute: 2560 B, -95%)\n"
                       "      where the residuals differ from remat's, by site:\n"
                       "      problems/layer_loss.cc:48: remat 1024 B, the engine 128 B: "),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("        remat:  f32[8,16] output of relu at problems/layer_loss.cc:48\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("        engine: bool[8,16] output of gt from problems/layer_loss.cc:48 (relu)\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("      problems/layer_loss.cc:50: remat 512 B, the engine 0 B: the engine keeps "
                       "nothing here"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find(" policy=dots_saveable: worst "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("      residuals differ from remat's as under as-written\n"), std::string::npos)
      << o.out;

  Output bad = Conform(EngineScript("bad_listing", std::string(kRightEngine) +
                                                       "; echo '{\"residual_bytes\": 1, "
                                                       "\"residuals\": [3]}' > \"$d/stats.json\""));
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("stats.json: residuals[0] is 3, expected a string"), std::string::npos)
      << bad.out;
}

// --fail-fast stops at the first failure and --time-limit bounds the whole
// run; the cases left are counted as not run, the run fails, and a failed
// case prints the command that reruns it alone.
TEST(RematCliTest, ConformStopsAtFailFastAndTheTimeLimit) {
  const std::string two = "as-written,dots_saveable,nothing_saveable";
  Output o = ConformOn(EngineScript("crashes_fast", "exit 3"), "layer_loss", two, {"--fail-fast"});
  EXPECT_EQ(o.status, 1) << o.out;
  EXPECT_NE(o.out.find("0 passed, 1 failed, 0 unsupported, 2 not run (--fail-fast"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("      rerun: remat conform --engine-cmd '"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--problems layer_loss --policies as-written --keep"), std::string::npos)
      << o.out;

  const auto start = std::chrono::steady_clock::now();
  Output slow = ConformOn(EngineScript("hangs_long", "sleep 60"), "layer_loss", two,
                          {"--time-limit", "1"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(slow.status, 1) << slow.out;
  EXPECT_NE(slow.out.find("killed: the run's --time-limit"), std::string::npos) << slow.out;
  EXPECT_NE(slow.out.find("2 not run (the run's --time-limit of 1 s was reached)"),
            std::string::npos)
      << slow.out;
  EXPECT_EQ(Conform("true", {"--time-limit", "-1"}).status, 1);
}

}  // namespace
}  // namespace remat
