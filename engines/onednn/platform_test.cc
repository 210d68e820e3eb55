#include "engines/onednn/platform.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace {

TEST(PlatformTest, DescribesTheMachineAndOneDnnsDispatch) {
  const PlatformInfo& p = DescribePlatform();
  std::printf("platform: %s\n", FormatPlatform(p).c_str());
  EXPECT_FALSE(p.cpu_model.empty());
  EXPECT_GE(p.cpus, 1);
  EXPECT_NE(p.onednn_version.find("oneDNN 2."), std::string::npos) << p.onednn_version;
  EXPECT_FALSE(p.onednn_isa.empty());
  EXPECT_FALSE(p.matmul_impl.empty());
  EXPECT_GE(p.omp_threads, 1);
  const std::string line = FormatPlatform(p);
  EXPECT_NE(line.find(p.onednn_isa), std::string::npos) << line;
  EXPECT_NE(line.find(p.matmul_impl), std::string::npos) << line;
}

// The cap in ONEDNN_MAX_CPU_ISA is what oneDNN dispatches to (or below it,
// when the CPU lacks it): .ci/run runs the suite under AVX2, where no
// avx512 kernel may appear.
TEST(PlatformTest, TheIsaCapIsHonoured) {
  const PlatformInfo& p = DescribePlatform();
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  EXPECT_EQ(p.isa_cap, cap == nullptr ? "" : cap);
  if (p.isa_cap == "AVX2" || p.isa_cap == "SSE41") {
    EXPECT_EQ(p.onednn_isa.find("avx512"), std::string::npos) << p.onednn_isa;
    EXPECT_EQ(p.matmul_impl.find("avx512"), std::string::npos) << p.matmul_impl;
  }
  // .ci/run's one-thread pass relies on --test_env reaching OpenMP.
  if (const char* threads = std::getenv("OMP_NUM_THREADS")) {
    EXPECT_EQ(p.omp_threads, std::atoi(threads));
  }
  if (p.isa_cap == "SSE41") {
    EXPECT_EQ(p.onednn_isa, "sse41");
  }
}

TEST(PlatformTest, RecordsTheMatMulsKernelsCreate) {
  OneDnnKernels kernels;
  Tensor a = Tensor::Zeros(DType::kF32, Shape({3, 5}));
  Tensor b = Tensor::Zeros(DType::kF32, Shape({5, 7}));
  kernels.MatMul(a, false, b, false);
  const std::vector<std::string> seen = OneDnnMatMulImplsSeen();
  EXPECT_FALSE(seen.empty());
  EXPECT_NE(std::find(seen.begin(), seen.end(), OneDnnMatMulImpl(3, 5, 7)), seen.end());
}

TEST(PlatformTest, DifferencesNameWhatDiffers) {
  PlatformInfo a;
  a.cpu_model = "X";
  a.onednn_isa = "avx512_core";
  a.matmul_impl = "brg:avx512_core";
  a.omp_threads = 2;
  PlatformInfo b = a;
  EXPECT_TRUE(PlatformDifferences(a, b).empty());
  b.onednn_isa = "avx2";
  b.matmul_impl = "gemm:jit";
  const std::vector<std::string> d = PlatformDifferences(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "ISA avx512_core vs avx2");
  EXPECT_EQ(d[1], "matmul brg:avx512_core vs gemm:jit");
}

}  // namespace
}  // namespace remat
