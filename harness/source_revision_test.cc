#include "harness/source_revision.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace remat {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the test's scratch space (a name with a space and
// a quote: the path reaches git through a shell).
fs::path FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(tmp ? tmp : fs::temp_directory_path().string()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

int Git(const fs::path& dir, const std::string& args) {
  return std::system(("git -C \"" + dir.string() + "\" -c user.name=t -c user.email=t@t " + args +
                      " >/dev/null 2>&1")
                         .c_str());
}

void Write(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

TEST(SourceRevision, ACheckoutGivesItsCommitAndWhetherTrackedFilesChanged) {
  if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no git here";
  const fs::path dir = FreshDir("a checkout's 'dir'");
  ASSERT_EQ(Git(dir, "init -q"), 0);
  Write(dir / "a.txt", "one\n");
  ASSERT_EQ(Git(dir, "add a.txt"), 0);
  ASSERT_EQ(Git(dir, "commit -q -m one"), 0);

  SourceRevision clean = ReadSourceRevision(dir.string());
  EXPECT_EQ(clean.error, "");
  ASSERT_EQ(clean.commit.size(), 40u) << clean.commit;
  EXPECT_FALSE(clean.modified);
  EXPECT_EQ(DescribeSourceRevision(clean), clean.commit + " (tree as committed)");

  // An untracked file (a results file the run itself wrote) is not a change
  // to the source.
  Write(dir / "new.json", "{}\n");
  EXPECT_FALSE(ReadSourceRevision(dir.string()).modified);

  Write(dir / "a.txt", "two\n");
  SourceRevision edited = ReadSourceRevision(dir.string());
  EXPECT_EQ(edited.commit, clean.commit);
  EXPECT_TRUE(edited.modified);
  EXPECT_EQ(DescribeSourceRevision(edited), clean.commit + " (tracked files modified)");

  ASSERT_EQ(Git(dir, "commit -q -a -m two"), 0);
  SourceRevision next = ReadSourceRevision(dir.string());
  EXPECT_NE(next.commit, clean.commit);
  EXPECT_FALSE(next.modified);
}

TEST(SourceRevision, ADirectoryOutsideACheckoutIsNotRecordedWithTheReason) {
  const fs::path dir = FreshDir("plain");
  // GIT_CEILING_DIRECTORIES keeps git from finding a checkout above the
  // scratch directory (the test may run inside one).
  setenv("GIT_CEILING_DIRECTORIES", dir.parent_path().string().c_str(), 1);
  SourceRevision revision = ReadSourceRevision(dir.string());
  unsetenv("GIT_CEILING_DIRECTORIES");
  EXPECT_EQ(revision.commit, "");
  EXPECT_NE(revision.error.find(dir.string()), std::string::npos) << revision.error;
  EXPECT_EQ(DescribeSourceRevision(revision).rfind("not recorded: ", 0), 0u);
}

}  // namespace
}  // namespace remat
