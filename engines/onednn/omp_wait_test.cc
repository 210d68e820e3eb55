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

// A user's setting stands: no re-run (this test would otherwise restart).
TEST(OpenMpWaitTest, AUsersSettingIsKept) {
  setenv("OMP_WAIT_POLICY", "active", 1);
  unsetenv("GOMP_SPINCOUNT");
  char name[] = "omp_wait_test";
  char* argv[] = {name, nullptr};
  UseShortOpenMpSpin(argv);
  EXPECT_EQ(std::getenv("GOMP_SPINCOUNT"), nullptr);
  EXPECT_EQ(OpenMpWait(), "OMP_WAIT_POLICY=active");
}

TEST(OpenMpWaitTest, ThePlatformLineSaysHowThreadsWait) {
  setenv("OMP_WAIT_POLICY", "passive", 1);
  const PlatformInfo& p = DescribePlatform();
  EXPECT_NE(FormatPlatform(p).find("OpenMP wait: " + p.omp_wait), std::string::npos)
      << FormatPlatform(p);
  EXPECT_FALSE(p.omp_wait.empty());
}

}  // namespace
}  // namespace remat
