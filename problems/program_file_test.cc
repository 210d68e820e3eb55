#include "problems/program_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/npy.h"
#include "problems/problem.h"

namespace remat {
namespace {

// A token model's program: ids (i32) into a table (f32).
constexpr char kProgram[] =
    "program tokens(table: f32[5,2], ids: i32[3]) {\n"
    "  %e: f32[3,2] = embedding(%table, %ids)\n"
    "  %s: f32[] = sum(%e)\n"
    "  return %s\n"
    "}\n";

std::filesystem::path WriteProgram(const std::string& dir_name) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / dir_name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "program.txt") << kProgram;
  return dir;
}

TEST(ProgramFileTest, IntegerInputsAreReadFromBesideTheFile) {
  const std::filesystem::path dir = WriteProgram("beside");
  WriteNpy((dir / "ids.npy").string(), Tensor::FromI32({3}, {4, 0, 2}));
  // A float input's file is not read: floats are drawn.
  WriteNpy((dir / "table.npy").string(), Tensor::FromF32({5, 2}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  const auto problem = ProgramFileProblem::Read((dir / "program.txt").string());
  const Program program = problem->Build({});
  const std::vector<Tensor> inputs = MakeInputs(*problem, program, {}, /*seed=*/1);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[1].i32()[0], 4);
  EXPECT_EQ(inputs[1].i32()[1], 0);
  EXPECT_EQ(inputs[1].i32()[2], 2);
  bool any_nonzero = false;
  for (int64_t i = 0; i < inputs[0].num_elements(); ++i) any_nonzero |= inputs[0].f32()[i] != 0.0f;
  EXPECT_TRUE(any_nonzero) << "the float input was read from its file, not drawn";
}

TEST(ProgramFileTest, WithoutAFileIntegerInputsAreDrawn) {
  const std::filesystem::path dir = WriteProgram("drawn");
  const auto problem = ProgramFileProblem::Read((dir / "program.txt").string());
  const std::vector<Tensor> inputs = MakeInputs(*problem, problem->Build({}), {}, 1);
  EXPECT_EQ(inputs[1].shape(), Shape({3}));
}

TEST(ProgramFileTest, AFileOfAnotherShapeIsAnErrorNamingTheInput) {
  const std::filesystem::path dir = WriteProgram("shape");
  WriteNpy((dir / "ids.npy").string(), Tensor::FromI32({2}, {1, 1}));
  const auto problem = ProgramFileProblem::Read((dir / "program.txt").string());
  try {
    MakeInputs(*problem, problem->Build({}), {}, 1);
    FAIL() << "a 2-element ids.npy for i32[3] was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fixed input ids is i32[2], the program takes i32[3]"),
              std::string::npos)
        << e.what();
  }
}

TEST(ProgramFileTest, DataInputsAreNotInTheDefaultWrt) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "data";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "program.txt") << "program p(w: f32[2,2], x: f32[3,2] data, y: f32[3,2]) {\n"
                                        "  %a: f32[3,2] = matmul(%x, %w)\n"
                                        "  %b: f32[3,2] = sub(%a, %y)\n"
                                        "  %c: f32[] = sum(%b)\n"
                                        "  return %c\n"
                                        "}\n";
  const auto problem = ProgramFileProblem::Read((dir / "program.txt").string());
  EXPECT_EQ(problem->wrt(), (std::vector<std::string>{"w", "y"}));
}

}  // namespace
}  // namespace remat
