// Tests of --sweep=models' reading of an export (harness/bench_models.h):
// model.json's fields, and the errors that name the file and what is wrong.
// Exporting itself runs PyTorch: tools/model_time_test.py.

#include "harness/bench_models.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engines/api/error.h"

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

}  // namespace
}  // namespace remat::bench
