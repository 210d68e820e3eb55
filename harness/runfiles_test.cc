#include "harness/runfiles.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

namespace remat {
namespace {

namespace fs = std::filesystem;

// Under `bazel test`: a real data dependency of this test is found.
TEST(RematBenchFileTest, FindsADataDependency) {
  const std::string found = RematBenchFile("problems/files/vit_tokens.remat");
  EXPECT_TRUE(fs::is_regular_file(found)) << found;
}

// A made-up layout of every place the contract names, with the environment
// and working directory restored afterwards.
class RematBenchFileLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = fs::path(tmp != nullptr ? tmp : fs::temp_directory_path().string()) / "runfiles_test";
    fs::remove_all(root_);
    saved_cwd_ = fs::current_path();
    for (const char* v : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
      const char* value = std::getenv(v);
      saved_[v] = value != nullptr ? std::optional<std::string>(value) : std::nullopt;
    }
    Touch("srcdir/remat_bench/dir/in_srcdir.txt");
    Touch("srcdir/remat_bench/dir/everywhere.txt");
    Touch("rundir/remat_bench/dir/in_rundir.txt");
    Touch("rundir/remat_bench/dir/everywhere.txt");
    Touch("main/dir/in_cwd.txt");
    Touch("main/dir/everywhere.txt");
    Touch("remat_bench/dir/beside_cwd.txt");
    setenv("TEST_SRCDIR", (root_ / "srcdir").c_str(), 1);
    setenv("RUNFILES_DIR", (root_ / "rundir").c_str(), 1);
    fs::current_path(root_ / "main");
  }
  void TearDown() override {
    fs::current_path(saved_cwd_);
    for (const auto& [v, value] : saved_) {
      if (value) {
        setenv(v.c_str(), value->c_str(), 1);
      } else {
        unsetenv(v.c_str());
      }
    }
    fs::remove_all(root_);
  }
  void Touch(const std::string& relative) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << relative;
  }
  std::string Under(const std::string& relative) const { return (root_ / relative).string(); }

  fs::path root_;
  fs::path saved_cwd_;
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(RematBenchFileLayoutTest, TriesTestSrcdirThenRunfilesDirThenCwdThenBeside) {
  EXPECT_EQ(RematBenchFile("dir/in_srcdir.txt"), Under("srcdir/remat_bench/dir/in_srcdir.txt"));
  EXPECT_EQ(RematBenchFile("dir/in_rundir.txt"), Under("rundir/remat_bench/dir/in_rundir.txt"));
  EXPECT_EQ(RematBenchFile("dir/in_cwd.txt"), "dir/in_cwd.txt");
  EXPECT_EQ(RematBenchFile("dir/beside_cwd.txt"), "../remat_bench/dir/beside_cwd.txt");
  // The runfiles root wins over the working directory: another workspace may
  // hold a file of the same relative path.
  EXPECT_EQ(RematBenchFile("dir/everywhere.txt"), Under("srcdir/remat_bench/dir/everywhere.txt"));
}

TEST_F(RematBenchFileLayoutTest, SkipsUnsetAndEmptyVariables) {
  unsetenv("TEST_SRCDIR");
  setenv("RUNFILES_DIR", "", 1);
  EXPECT_EQ(RematBenchFile("dir/in_srcdir.txt"), "dir/in_srcdir.txt");  // not found anywhere
  EXPECT_EQ(RematBenchFile("dir/everywhere.txt"), "dir/everywhere.txt");
  EXPECT_EQ(RematBenchFile("dir/beside_cwd.txt"), "../remat_bench/dir/beside_cwd.txt");
}

TEST_F(RematBenchFileLayoutTest, ReturnsThePathUnchangedWhenNothingExists) {
  EXPECT_EQ(RematBenchFile("dir/missing.txt"), "dir/missing.txt");
}

}  // namespace
}  // namespace remat
