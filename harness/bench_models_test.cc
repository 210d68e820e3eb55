// Tests of --sweep=models' reading of an export (harness/bench_models.h):
// model.json's fields, and the errors that name the file and what is wrong.
// Exporting itself runs PyTorch: tools/model_time_test.py.

#include "harness/bench_models.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engines/api/error.h"
#include "harness/bench_plan.h"

namespace remat::bench {
namespace {

std::string ExportDir(const std::string& name, const std::string& model_json) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::filesystem::create_directories(dir);
  if (!model_json.empty()) std::ofstream(dir + "/model.json") << model_json;
  return dir;
}

TEST(BenchModels, ReadsWhatTheExporterWrites) {
  const std::string dir = ExportDir(
      "gpt2", R"({"model": "gpt2", "batch": 1, "tokens": 1024, "parameters": 124439808,
                  "sources": "0123456789abcdef", "export_seconds": 30.3})");
  const ModelExport m = ReadModelExport("gpt2", dir);
  EXPECT_EQ(m.batch, 1);
  EXPECT_EQ(m.tokens, 1024);
  EXPECT_EQ(m.parameters, 124439808);
  EXPECT_EQ(m.program(), dir + "/program.txt");
  EXPECT_EQ(m.Label(), "gpt2@1x1024");
}

TEST(BenchModels, ABadExportIsAnErrorNamingTheFile) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "model.json: cannot read the export's model.json"},
      {"{", "model.json: not JSON"},
      {R"({"model": "gpt2", "batch": 1, "parameters": 5})", "model.json: no \"tokens\""},
      {R"({"model": "nanogpt", "batch": 1, "tokens": 2, "parameters": 5})",
       "model.json: the export of model nanogpt, not gpt2"},
  };
  int i = 0;
  for (const auto& [json, message] : bad) {
    const std::string dir = ExportDir("bad" + std::to_string(i++), json);
    try {
      ReadModelExport("gpt2", dir);
      ADD_FAILURE() << "accepted: " << json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(dir + "/" + message), std::string::npos) << e.what();
    }
  }
}

// Each row of a model gets eager's FLOPs over its time and the ceiling (the
// bound's time plus its stream floor) over its time; the bound row, a
// failed row, a control's twin of another model and a model without a
// bound row are left as they are.
TEST(BenchModels, RowsGetTheirUsefulRateAndShareOfTheCeiling) {
  ModelExport gpt2{"gpt2", "/m/gpt2", 1, 1024, 124};
  ModelExport resnet{"resnet50", "/m/resnet50", 16, 224, 25};
  const std::string p = gpt2.program(), q = resnet.program();
  nlohmann::json run = {
      {"rows",
       {{{"program_file", p}, {"matmul_bound", true}, {"real_time_ms", 2000.0}, {"stream_floor_ms", 1000.0}},
        {{"program_file", p}, {"engine", "eager"}, {"real_time_ms", 4000.0}, {"flops_forward", 2e11},
         {"flops_backward", 4e11}},
        {{"program_file", p}, {"engine", "eager"}, {"control", true}, {"real_time_ms", 4100.0},
         {"flops_forward", 1.0}, {"flops_backward", 1.0}},
        {{"program_file", p}, {"engine", "recompute"}, {"real_time_ms", 5000.0}, {"flops_forward", 3e11}},
        {{"program_file", p}, {"engine", "torch"}, {"peer", true}, {"real_time_ms", 3000.0}},
        {{"program_file", p}, {"engine", "jax"}, {"peer", true}, {"error", "exit 1"}},
        {{"program_file", q}, {"engine", "eager"}, {"real_time_ms", 100.0}, {"flops_forward", 1e9}}}}};
  AnnotateModelRows({gpt2, resnet}, &run);
  const nlohmann::json& rows = run["rows"];
  EXPECT_FALSE(rows[0].contains("of_ceiling"));  // the bound itself
  EXPECT_DOUBLE_EQ(rows[1]["useful_gflops"].get<double>(), 150.0);
  EXPECT_DOUBLE_EQ(rows[1]["of_ceiling"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(rows[2]["useful_gflops"].get<double>(), 6e11 / 4100e6);  // eager's, not its own
  EXPECT_DOUBLE_EQ(rows[3]["useful_gflops"].get<double>(), 120.0);
  EXPECT_DOUBLE_EQ(rows[3]["of_ceiling"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(rows[4]["useful_gflops"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(rows[4]["of_ceiling"].get<double>(), 1.0);
  EXPECT_FALSE(rows[5].contains("useful_gflops"));
  EXPECT_DOUBLE_EQ(rows[6]["useful_gflops"].get<double>(), 10.0);
  EXPECT_FALSE(rows[6].contains("of_ceiling"));  // resnet50 has no bound row here
}

// The search's answer for every place the limit can fall, and few calls:
// doubling, then bisecting.
TEST(BenchModels, LargestFittingFindsTheLastBatchThatFitsInFewCalls) {
  for (int64_t fit_up_to : {0, 1, 2, 3, 7, 8, 9, 100, 255, 256, 300}) {
    int calls = 0;
    const int64_t got = LargestFitting(
        [&](int64_t b) {
          ++calls;
          EXPECT_GE(b, 1);
          EXPECT_LE(b, kMaxFitBatch);
          return b <= fit_up_to;
        },
        kMaxFitBatch);
    EXPECT_EQ(got, std::min<int64_t>(fit_up_to, kMaxFitBatch)) << fit_up_to;
    EXPECT_LE(calls, 18) << fit_up_to;
  }
  EXPECT_EQ(LargestFitting([](int64_t b) { return b <= 9; }, 10), 9);
  EXPECT_EQ(LargestFitting([](int64_t) { return true; }, 10), 10);
}

}  // namespace
}  // namespace remat::bench
