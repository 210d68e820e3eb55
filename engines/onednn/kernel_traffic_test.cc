#include "engines/onednn/kernel_traffic.h"

#include <memory>

#include <gtest/gtest.h>

#include "engines/api/kernels.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace {

// Each call adds its operands' bytes (read) and its output's (written) to
// its kernel's entry; calls before the recorder or after it are not
// counted; a nested recorder's calls count in both.
TEST(KernelTrafficTest, CountsEachCallsOperandsAndOutputByKernel) {
  OneDnnKernels kernels;
  Tensor a = Tensor::Zeros(DType::kF32, Shape({3, 5}));
  Tensor b = Tensor::Zeros(DType::kF32, Shape({5, 7}));
  kernels.Call(KernelOp::kAdd, {&a, &a});  // before the recorder
  KernelTrafficByName outer_traffic;
  {
    KernelTrafficRecorder outer;
    kernels.MatMul(a, false, b, false);
    kernels.Call(KernelOp::kAdd, {&a, &a});
    {
      KernelTrafficRecorder inner;
      kernels.Call(KernelOp::kAdd, {&b, &b});
      ASSERT_EQ(inner.traffic().size(), 1u);
      EXPECT_EQ(inner.traffic().at("add"), (KernelTraffic{1, 2 * 35 * 4, 35 * 4}));
    }
    outer_traffic = outer.traffic();
  }
  kernels.Call(KernelOp::kAdd, {&a, &a});  // after it
  ASSERT_EQ(outer_traffic.size(), 2u);
  EXPECT_EQ(outer_traffic.at("matmul"), (KernelTraffic{1, (15 + 35) * 4, 21 * 4}));
  EXPECT_EQ(outer_traffic.at("add"), (KernelTraffic{2, (2 * 15 + 2 * 35) * 4, (15 + 35) * 4}));
  EXPECT_EQ(outer_traffic.at("add").bytes(), (3 * 15 + 3 * 35) * 4);
}

// A view counts its own elements, not its buffer's.
TEST(KernelTrafficTest, AViewCountsItsOwnElements) {
  OneDnnKernels kernels;
  Tensor stacked = Tensor::Zeros(DType::kF32, Shape({4, 8}));
  Tensor row = stacked.Slice(2);
  KernelTrafficRecorder recorder;
  kernels.Call(KernelOp::kAdd, {&row, &row});
  EXPECT_EQ(recorder.traffic().at("add"), (KernelTraffic{1, 2 * 8 * 4, 8 * 4}));
}

// A dry run moves no data: nothing is counted.
TEST(KernelTrafficTest, DryRunsAreNotCounted) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_dry_run(true);
  OneDnnKernels kernels;
  kernels.Bind(tracker);
  Tensor a = Tensor::Zeros(DType::kF32, Shape({2, 4, 8}), tracker, Category::kInputs);
  Tensor b = Tensor::Zeros(DType::kF32, Shape({2, 8, 4}), tracker, Category::kInputs);
  KernelTrafficRecorder recorder;
  kernels.MatMul(a, false, b, false);
  kernels.Call(KernelOp::kAdd, {&a, &a});
  EXPECT_TRUE(recorder.traffic().empty());
}

}  // namespace
}  // namespace remat
