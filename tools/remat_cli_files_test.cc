// What the remat command line reads from files and text: program files
// (remat program's text run back), input directories, and a case's one
// line (--case, harness/case_text.h). The rest of the command line:
// remat_cli_test.cc.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engines/api/npy.h"
#include "engines/api/registry.h"
#include "problems/problem.h"
#include "tools/remat_cli.h"
#include "tools/remat_cli_test_util.h"

namespace remat {
namespace {

std::string WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

// remat program prints a problem as text; remat run --program reads it back
// and computes the same bits as --problem, on generated and on given inputs.
TEST(RematCliTest, ProgramFilesRunLikeTheirProblems) {
  const std::string dir = TempDir("program_file");
  const std::vector<std::string> problem = {"--problem", "layer_loss", "--param", "d=8",
                                            "--param", "N=4"};
  std::vector<std::string> print = {"program", "--policy", "dots_saveable"};
  print.insert(print.end(), problem.begin(), problem.end());
  Output text = Remat(print);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out.rfind("# layer_loss N=4 d=8 --policy dots_saveable\nprogram layer_loss(", 0),
            0u) << text.out;
  const std::string file = WriteFile(dir + "/layer_loss.remat", text.out);
  // remat program --program prints a file back as it read it.
  Output again = Remat({"program", "--program", file});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.out.substr(again.out.find('\n')), text.out.substr(text.out.find('\n')));

  for (const char* engine : {"eager", "recompute"}) {
    std::vector<std::string> from_problem = {"run", "--engine", engine, "--dump", dir + "/a",
                                             "--policy", "dots_saveable"};
    from_problem.insert(from_problem.end(), problem.begin(), problem.end());
    ASSERT_EQ(Remat(from_problem).status, 0);
    // On the problem's inputs (its dump, read back), the file computes the
    // problem's bits; --wrt selects as for problems (the problem's are w*).
    Output o = Remat({"run", "--engine", engine, "--program", file, "--inputs", dir + "/a",
                      "--dump", dir + "/b", "--wrt", "w*"});
    ASSERT_EQ(o.status, 0) << o.err;
    for (const char* f : {"loss.npy", "grad_w1.npy", "grad_w2.npy", "grad_w3.npy"}) {
      EXPECT_TRUE(BitwiseEqual(ReadNpy(dir + "/a/" + f), ReadNpy(dir + "/b/" + f))) << f;
    }
    EXPECT_FALSE(std::filesystem::exists(dir + "/b/grad_x.npy"));
  }
  // Without --inputs, inputs are drawn from the seed (uniform in [-1, 1), as
  // problems' are by default): the same seed gives the same bits, another
  // seed others; the gradients default to every input.
  Output c = Remat({"run", "--program", file, "--dump", dir + "/c", "--seed", "3"});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("grad x"), std::string::npos) << c.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/c/grad_x.npy"));
  ASSERT_EQ(Remat({"run", "--program", file, "--dump", dir + "/d", "--seed", "3"}).status, 0);
  ASSERT_EQ(Remat({"run", "--program", file, "--dump", dir + "/e", "--seed", "4"}).status, 0);
  EXPECT_TRUE(BitwiseEqual(ReadNpy(dir + "/c/grad_w1.npy"), ReadNpy(dir + "/d/grad_w1.npy")));
  EXPECT_FALSE(BitwiseEqual(ReadNpy(dir + "/c/w1.npy"), ReadNpy(dir + "/e/w1.npy")));
  // residuals and schedule take files too, with --policy and --schedule.
  Output residuals = Remat({"residuals", "--program", file, "--policy", "nothing_saveable"});
  ASSERT_EQ(residuals.status, 0) << residuals.err;
  EXPECT_NE(residuals.out.find("# layer_loss on recompute"), std::string::npos) << residuals.out;
  Output schedule = Remat({"schedule", "--program", file});
  ASSERT_EQ(schedule.status, 0) << schedule.err;
  EXPECT_NE(schedule.out.find("backward computation:"), std::string::npos) << schedule.out;
  // A program file has no size parameters.
  Output param = Remat({"run", "--program", file, "--param", "d=4"});
  EXPECT_EQ(param.status, 1);
  EXPECT_NE(param.err.find("has no parameter 'd'; it takes none"), std::string::npos)
      << param.err;
}

TEST(RematCliTest, ProgramFileErrorsNameFileLineAndColumn) {
  const std::string dir = TempDir("program_file_errors");
  const std::string file = WriteFile(
      dir + "/bad.remat",
      "program p(x: f32[2,3], w: f32[2,3]) {\n  %y = matmul(%x, %w)\n  %s = sum(%y)\n"
      "  return %s\n}\n");
  Output o = Remat({"run", "--program", file});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find(file + ":2:8: shape mismatch: matmul(f32[2,3], f32[2,3])"),
            std::string::npos) << o.err;
}

TEST(RematCliTest, InputsDirectoryMustMatchTheProgramsInputs) {
  const std::string dir = TempDir("program_inputs");
  const std::string file = WriteFile(
      dir + "/p.remat",
      "program p(x: f32[2,3], w: f32[3,2]) {\n  %y = matmul(%x, %w)\n  %s = sum(%y)\n"
      "  return %s\n}\n");
  const std::string inputs = dir + "/in";
  std::filesystem::create_directories(inputs);
  WriteNpy(inputs + "/x.npy", Tensor::Zeros(DType::kF32, Shape({2, 3})));
  Output missing = Remat({"run", "--program", file, "--inputs", inputs});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find(inputs + "/w.npy: missing: input w of p ([3,2])"), std::string::npos)
      << missing.err;
  WriteNpy(inputs + "/w.npy", Tensor::Zeros(DType::kF32, Shape({2, 3})));
  Output wrong = Remat({"run", "--program", file, "--inputs", inputs});
  EXPECT_EQ(wrong.status, 1);
  EXPECT_NE(wrong.err.find(inputs + "/w.npy: input w of p should be [3,2], the file holds "
                                    "f32[2,3]"),
            std::string::npos) << wrong.err;
  WriteNpy(inputs + "/w.npy", Tensor::Zeros(DType::kF32, Shape({3, 2})));
  WriteNpy(inputs + "/v.npy", Tensor::Zeros(DType::kF32, Shape({3, 2})));
  Output extra = Remat({"run", "--program", file, "--inputs", inputs});
  EXPECT_EQ(extra.status, 1);
  EXPECT_NE(extra.err.find(inputs + "/v.npy: no input of p is named v; its inputs: x, w"),
            std::string::npos) << extra.err;
  std::filesystem::remove(inputs + "/v.npy");
  // What --dump writes beside the inputs is not an extra input.
  WriteNpy(inputs + "/loss.npy", Tensor::Zeros(DType::kF32, Shape()));
  WriteNpy(inputs + "/grad_w.npy", Tensor::Zeros(DType::kF32, Shape({3, 2})));
  Output ok = Remat({"run", "--program", file, "--inputs", inputs, "--json"});
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out)["loss"].get<double>(), 0.0);
}


// The output lines a case decides (not the times).
std::string PeakAndFlops(const std::string& out) {
  std::istringstream in(out);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("peak ", 0) == 0 || line.rfind("flops", 0) == 0 || line.rfind("residuals", 0) == 0) {
      kept += line + "\n";
    }
  }
  return kept;
}

TEST(RematCliTest, CaseRunsTheCaseItsTextNames) {
  const Output by_case = Remat({"run", "--case",
                                "problem=layer_loss size=d=64,N=32 engine=recompute variant=nothing_saveable"});
  ASSERT_EQ(by_case.status, 0) << by_case.err;
  const Output by_flags = Remat({"run", "--problem", "layer_loss", "--param", "d=64", "--param", "N=32",
                                 "--engine", "recompute", "--policy", "nothing_saveable"});
  ASSERT_EQ(by_flags.status, 0) << by_flags.err;
  EXPECT_FALSE(PeakAndFlops(by_case.out).empty()) << by_case.out;
  EXPECT_EQ(PeakAndFlops(by_case.out), PeakAndFlops(by_flags.out));

  const Output schedule = Remat({"run", "--case", "problem=scan_stack size=L=8,d=16,N=8 engine=recompute "
                                                  "variant=schedule:sqrt"});
  EXPECT_EQ(schedule.status, 0) << schedule.err;
}

TEST(RematCliTest, CaseRefusesWhatDoesNotCombineOrParse) {
  Output o = Remat({"run", "--case", "problem=sin_chain engine=eager variant=as-written", "--problem", "sin_chain"});
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.err.find("--case holds the case"), std::string::npos) << o.err;
  o = Remat({"run", "--case", "problem=sin_chain engine=eager"});
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.err.find("no variant= word"), std::string::npos) << o.err;
  o = Remat({"run", "--case", "problem=sin_chain engine=recompute variant=budget-under-cap:0.5x"});
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.err.find("budget-under-cap"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace remat
