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

// Every call in order, with its shapes, transposes and operands' data;
// nothing from before the recorder or after it; nested recorders both see
// what runs inside the inner one.
TEST(MatMulCallsTest, RecordsEveryCallInOrderWithItsOperands) {
  OneDnnKernels kernels;
  Tensor a = Tensor::Zeros(DType::kF32, Shape({3, 5}));
  Tensor b = Tensor::Zeros(DType::kF32, Shape({5, 7}));
  Tensor g = Tensor::Zeros(DType::kF32, Shape({3, 7}));
  Tensor stacked = Tensor::Zeros(DType::kF32, Shape({2, 5, 7}));
  kernels.MatMul(a, false, b, false);  // before the recorder
  std::vector<RecordedMatMul> calls;
  Tensor first;
  {
    MatMulRecorder recorder(MatMulRecorder::Detail::kCalls);
    first = kernels.MatMul(a, false, b, false);
    kernels.MatMulInto(stacked.Slice(0).View(0, Shape({3, 5})), g, false, b, true);  // dy w^T
    kernels.MatMul(a, true, g, false);  // x^T dy
    kernels.MatMul(a, false, stacked.Slice(1), false);
    {
      MatMulRecorder inner(MatMulRecorder::Detail::kCalls);
      kernels.MatMul(g, false, b, true);
      ASSERT_EQ(inner.calls().size(), 1u);
      EXPECT_EQ(inner.calls()[0].call.ToString(), "[3,7] x [5,7]^T");
    }
    calls = recorder.calls();
  }
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[0].call.ToString(), "[3,5] x [5,7]");
  EXPECT_EQ(calls[0].a_data, a.raw());
  EXPECT_EQ(calls[0].b_data, b.raw());
  EXPECT_EQ(calls[0].out_data, first.raw());
  EXPECT_EQ(calls[1].call.ToString(), "[3,7] x [5,7]^T");
  EXPECT_EQ(calls[1].a_data, g.raw());
  EXPECT_EQ(calls[1].b_data, b.raw());
  // An output given (MatMulInto) is where the matmul wrote.
  EXPECT_EQ(calls[1].out_data, stacked.raw());
  EXPECT_EQ(calls[2].call.ToString(), "[3,5]^T x [3,7]");
  EXPECT_TRUE(calls[2].call.transpose_a);
  EXPECT_FALSE(calls[2].call.transpose_b);
  // A view's data is where its elements start.
  EXPECT_EQ(calls[3].b_data, static_cast<const char*>(stacked.raw()) + 5 * 7 * sizeof(float));
  EXPECT_EQ(calls[4].call, calls[1].call);
  MatMulRecorder later(MatMulRecorder::Detail::kCalls);
  EXPECT_TRUE(later.calls().empty());
}

// A dry run plans the matmul without running it, and an empty product runs
// no primitive: neither is recorded.
TEST(MatMulCallsTest, DryRunsAndEmptyProductsAreNotRecorded) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_dry_run(true);
  OneDnnKernels kernels;
  kernels.Bind(tracker);
  Tensor a = Tensor::Zeros(DType::kF32, Shape({2, 4, 8}), tracker, Category::kInputs);
  Tensor b = Tensor::Zeros(DType::kF32, Shape({2, 8, 4}), tracker, Category::kInputs);
  MatMulRecorder recorder(MatMulRecorder::Detail::kCalls);
  kernels.MatMul(a, false, b, false);
  EXPECT_TRUE(recorder.calls().empty());
  tracker->set_dry_run(false);
  OneDnnKernels plain;
  Tensor empty_k = Tensor::Zeros(DType::kF32, Shape({3, 0}));
  Tensor k_rows = Tensor::Zeros(DType::kF32, Shape({0, 2}));
  plain.MatMul(empty_k, false, k_rows, false);
  EXPECT_TRUE(recorder.calls().empty());
  // Batched operands keep their leading axes.
  Tensor x = Tensor::Zeros(DType::kF32, Shape({2, 4, 8}));
  Tensor y = Tensor::Zeros(DType::kF32, Shape({2, 8, 4}));
  plain.MatMul(x, false, y, false);
  ASSERT_EQ(recorder.calls().size(), 1u);
  EXPECT_EQ(recorder.calls()[0].call.ToString(), "[2,4,8] x [2,8,4]");
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

// The default detail records impls alone: no call is copied.
TEST(MatMulCallsTest, ImplsAloneCopyNoCall) {
  OneDnnKernels kernels;
  Tensor a = Tensor::Zeros(DType::kF32, Shape({3, 5}));
  Tensor b = Tensor::Zeros(DType::kF32, Shape({5, 7}));
  MatMulRecorder impls;
  MatMulRecorder calls(MatMulRecorder::Detail::kCalls);
  kernels.MatMul(a, false, b, false);
  EXPECT_EQ(impls.impls(), std::vector<std::string>{OneDnnMatMulImpl(3, 5, 7)});
  EXPECT_TRUE(impls.calls().empty());
  ASSERT_EQ(calls.calls().size(), 1u);
  EXPECT_EQ(calls.calls()[0].impl, OneDnnMatMulImpl(3, 5, 7));
}

}  // namespace
}  // namespace remat
