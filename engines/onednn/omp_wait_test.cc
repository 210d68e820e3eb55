#include "engines/onednn/omp_wait.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "engines/onednn/platform.h"

namespace remat {
namespace {

TEST(OpenMpWaitTest, NamesTheSettingsInEffect) {
  unsetenv("OMP_WAIT_POLICY");
  unsetenv("GOMP_SPINCOUNT");
  EXPECT_EQ(OpenMpWait(), "libgomp's default spin");
  setenv("GOMP_SPINCOUNT", kShortOpenMpSpin, 1);
  EXPECT_EQ(OpenMpWait(), "GOMP_SPINCOUNT=20000");
  setenv("OMP_WAIT_POLICY", "passive", 1);
  EXPECT_EQ(OpenMpWait(), "OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT=20000");
}

// A user's settings stand: no re-run (this test would otherwise restart).
TEST(OpenMpWaitTest, AUsersSettingsAreKept) {
  setenv("OMP_WAIT_POLICY", "active", 1);
  unsetenv("GOMP_SPINCOUNT");
  setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0", 1);
  char name[] = "omp_wait_test";
  char* argv[] = {name, nullptr};
  UseMeasurementSettings(argv);
  EXPECT_EQ(std::getenv("GOMP_SPINCOUNT"), nullptr);
  EXPECT_EQ(OpenMpWait(), "OMP_WAIT_POLICY=active");
  EXPECT_EQ(MallocSetting(), "GLIBC_TUNABLES=glibc.malloc.hugetlb=0");
}

TEST(OpenMpWaitTest, NamesTheMallocSetting) {
  unsetenv("GLIBC_TUNABLES");
  EXPECT_EQ(MallocSetting(), "glibc's default");
  setenv("GLIBC_TUNABLES", kHugePageMalloc, 1);
  EXPECT_EQ(MallocSetting(), "GLIBC_TUNABLES=glibc.malloc.hugetlb=1");
}

TEST(OpenMpWaitTest, ThePlatformLineSaysHowThreadsWait) {
  setenv("OMP_WAIT_POLICY", "passive", 1);
  const PlatformInfo& p = DescribePlatform();
  EXPECT_NE(FormatPlatform(p).find("OpenMP wait: " + p.omp_wait), std::string::npos)
      << FormatPlatform(p);
  EXPECT_NE(FormatPlatform(p).find("malloc: " + p.malloc_setting), std::string::npos)
      << FormatPlatform(p);
  EXPECT_FALSE(p.omp_wait.empty());
}

}  // namespace
}  // namespace remat
