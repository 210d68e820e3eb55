#include "engines/onednn/matmul_calls.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engines/api/memory_tracker.h"
#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/platform.h"

namespace remat {
namespace {

// A dry run plans the matmul without running it, and an empty product runs
// no primitive: neither is recorded.
TEST(MatMulCallsTest, DryRunsAndEmptyProductsAreNotRecorded) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_dry_run(true);
  OneDnnKernels kernels;
  kernels.Bind(tracker);
  Tensor a = Tensor::Zeros(DType::kF32, Shape({2, 4, 8}), tracker, Category::kInputs);
  Tensor b = Tensor::Zeros(DType::kF32, Shape({2, 8, 4}), tracker, Category::kInputs);
  MatMulRecorder recorder;
  kernels.MatMul(a, false, b, false);
  EXPECT_TRUE(recorder.impls().empty());
  tracker->set_dry_run(false);
  OneDnnKernels plain;
  Tensor empty_k = Tensor::Zeros(DType::kF32, Shape({3, 0}));
  Tensor k_rows = Tensor::Zeros(DType::kF32, Shape({0, 2}));
  plain.MatMul(empty_k, false, k_rows, false);
  EXPECT_TRUE(recorder.impls().empty());
  Tensor x = Tensor::Zeros(DType::kF32, Shape({2, 4, 8}));
  Tensor y = Tensor::Zeros(DType::kF32, Shape({2, 8, 4}));
  plain.MatMul(x, false, y, false);
  EXPECT_EQ(recorder.impls().size(), 1u);
}

// A recorder sees the matmuls run while it lives, cached primitives
// included, and nothing from before it or after it; nested ones both see
// what runs inside the inner one.
TEST(MatMulCallsTest, ImplsAreTheMatMulsItsScopeRanCachedPrimitivesIncluded) {
  OneDnnKernels kernels;
  Tensor a = Tensor::Zeros(DType::kF32, Shape({3, 5}));
  Tensor b = Tensor::Zeros(DType::kF32, Shape({5, 7}));
  Tensor c = Tensor::Zeros(DType::kF32, Shape({7, 2}));
  kernels.MatMul(a, false, b, false);  // created and cached before any recorder
  const std::string ab = OneDnnMatMulImpl(3, 5, 7);
  {
    MatMulRecorder outer;
    EXPECT_TRUE(outer.impls().empty());
    kernels.MatMul(a, false, b, false);  // from the cache
    EXPECT_EQ(outer.impls(), std::vector<std::string>{ab});
    {
      MatMulRecorder inner;
      kernels.MatMul(b, false, c, false);
      EXPECT_EQ(inner.impls(), std::vector<std::string>{OneDnnMatMulImpl(5, 7, 2)});
    }
    std::vector<std::string> both = {ab, OneDnnMatMulImpl(5, 7, 2)};
    std::sort(both.begin(), both.end());
    both.erase(std::unique(both.begin(), both.end()), both.end());
    EXPECT_EQ(outer.impls(), both);
  }
  MatMulRecorder later;
  EXPECT_TRUE(later.impls().empty());
}

}  // namespace
}  // namespace remat
