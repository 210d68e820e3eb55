#include "tools/remat_cli.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "harness/conformance.h"
#include "engines/schedule/schedule.h"
#include "tools/npy.h"

namespace remat {
namespace {

struct Output {
  int status;
  std::string out;
  std::string err;
};

Output Remat(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int status = RunRemat(args, out, err);
  return {status, out.str(), err.str()};
}

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

TEST(RematCliTest, ListShowsProblemsEnginesAndPolicies) {
  Output o = Remat({"list"});
  EXPECT_EQ(o.status, 0) << o.err;
  for (const char* word : {"layer_loss", "scan_stack", "dot_policy", "sin_chain", "sin_recursive",
                           "--param L=N", "eager", "reference", "dots_saveable"}) {
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
    for (const char* word : {"loss", "grad", "peak", "residuals", "flops", "time"}) {
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
  EXPECT_NE(p.out.find("scan[length=3]"), std::string::npos) << p.out;
}

TEST(RematCliTest, SchedulesApplyToAChainOfBlocks) {
  // mlp_chain is a loop of checkpointed blocks (no scan): --schedule groups
  // them into a chain and reverses it, the memory prediction holding.
  Output p = Remat({"program", "--problem", "mlp_chain", "--param", "L=5", "--schedule",
                    "revolve:2"});
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.out.find("chain[blocks=5, schedule=revolve:2]"), std::string::npos) << p.out;
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

TEST(RematCliTest, CompareFlagsChangesBeyondTheNoise) {
  const std::string dir = TempDir("compare");
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& file, const std::vector<double>& ms) {
    std::ofstream f(dir + "/" + file);
    f << "{\"date\": \"d\", \"rows\": [";
    for (size_t i = 0; i < ms.size(); ++i) {
      f << (i ? "," : "") << "{\"name\": \"row" << i << "\", \"real_time_ms\": " << ms[i] << "}";
    }
    f << "]}";
  };
  // Rows 0-5 move by about 1% (noise); row 6 is twice as slow.
  write("a.json", {10, 20, 30, 40, 50, 60, 70});
  write("b.json", {10.1, 19.9, 30.2, 39.8, 50.3, 60.1, 140});
  Output o = Remat({"compare", dir + "/a.json", dir + "/b.json"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("1 beyond the noise"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("slower"), std::string::npos) << o.out;
  Output bad = Remat({"compare", dir + "/a.json", dir + "/missing.json"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("missing.json"), std::string::npos) << bad.err;
}

TEST(RematCliTest, ParseBytes) {
  EXPECT_EQ(ParseBytes("1000"), 1000);
  EXPECT_EQ(ParseBytes("256MiB"), 256ll << 20);
  EXPECT_EQ(ParseBytes("1.5GiB"), 3ll << 29);
  EXPECT_EQ(ParseBytes("2GB"), 2000000000ll);
  EXPECT_THROW(ParseBytes("-1"), Error);
  EXPECT_THROW(ParseBytes("MiB"), Error);
}

}  // namespace
}  // namespace remat
