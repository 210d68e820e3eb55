// remat compare: the changes it flags between two runs' outputs, and the
// platforms' differences it warns of first. The rest of the command line:
// remat_cli_test.cc.
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

TEST(RematCliTest, CompareWarnsFirstAboutPlatforms) {
  const std::string dir = TempDir("compare_platforms");
  std::filesystem::create_directories(dir);
  PlatformInfo avx512;
  avx512.cpu_model = "Some CPU";
  avx512.cpus = 2;
  avx512.onednn_version = "oneDNN 2.6.3 (cpu runtime: OpenMP)";
  avx512.onednn_isa = "avx512_core";
  avx512.matmul_impl = "brg:avx512_core";
  avx512.omp_threads = 2;
  PlatformInfo avx2 = avx512;
  avx2.onednn_isa = "avx2";
  avx2.isa_cap = "AVX2";
  avx2.matmul_impl = "gemm:jit";
  auto write = [&](const std::string& file, const nlohmann::json& machine) {
    nlohmann::json j = {{"date", "d"},
                        {"rows", {{{"name", "row0"}, {"real_time_ms", 10.0}},
                                  {{"name", "row1"}, {"real_time_ms", 20.0}}}}};
    if (!machine.is_null()) j["machine"] = machine;
    std::ofstream(dir + "/" + file) << j.dump();
    return dir + "/" + file;
  };
  const std::string a = write("a.json", PlatformToJson(avx512));
  const std::string b = write("b.json", PlatformToJson(avx2));
  const std::string a_again = write("a_again.json", PlatformToJson(avx512));
  nlohmann::json old_machine = {{"cpu", "Some CPU"}, {"cores", 2}, {"onednn", "oneDNN 2.6.3"}};
  const std::string old = write("old.json", old_machine);
  const std::string none = write("none.json", nullptr);

  Output differ = Remat({"compare", a, b});
  ASSERT_EQ(differ.status, 0) << differ.err;
  EXPECT_EQ(FirstLine(differ.out),
            "warning: A and B ran on different platforms (ISA avx512_core vs avx2; matmul "
            "brg:avx512_core vs gemm:jit): their times and scratchpad bytes are not comparable")
      << differ.out;
  EXPECT_NE(differ.out.find("2 rows compared"), std::string::npos) << differ.out;

  Output same = Remat({"compare", a, a_again});
  ASSERT_EQ(same.status, 0) << same.err;
  EXPECT_EQ(same.out.find("warning"), std::string::npos) << same.out;

  Output unknown = Remat({"compare", a, old});
  ASSERT_EQ(unknown.status, 0) << unknown.err;
  EXPECT_EQ(FirstLine(unknown.out).rfind("warning: the platform of B (" + old + ") is unknown", 0),
            0)
      << unknown.out;
  for (const char* missing : {"cpus", "onednn_isa", "isa_cap", "matmul_impl", "omp_threads"}) {
    EXPECT_NE(FirstLine(unknown.out).find(missing), std::string::npos) << missing;
  }
  EXPECT_EQ(unknown.out.find("different platforms"), std::string::npos) << unknown.out;

  Output neither = Remat({"compare", none, a});
  ASSERT_EQ(neither.status, 0) << neither.err;
  EXPECT_EQ(FirstLine(neither.out),
            "warning: the platform of A (" + none +
                ") is unknown (it has no \"machine\": recorded before remat-bench wrote them): "
                "its times and scratchpad bytes may not be comparable with B's")
      << neither.out;
}

}  // namespace
}  // namespace remat
