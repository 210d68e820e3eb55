#include "engines/onednn/kernel_traffic.h"

#include <memory>
#include <vector>

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

// Without KeepCalls::kYes no call is kept; with it, every call in order,
// with its operands and attributes, so that running it again gives its
// output; an enclosing recorder that keeps calls keeps a nested one's too.
TEST(KernelTrafficTest, KeepsCallsToRunAgain) {
  OneDnnKernels kernels;
  Tensor a = Tensor::FromF32(Shape({2, 3}), {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::FromF32(Shape({2, 3}), {0.5f, -1, 2, 0, 3, -4});
  KernelTrafficRecorder keeping(KernelTrafficRecorder::KeepCalls::kYes);
  Tensor product, scaled;
  {
    KernelTrafficRecorder counting;
    product = kernels.MatMul(a, false, b, true);
    EXPECT_TRUE(counting.calls().empty());
  }
  scaled = kernels.Scale(a, 0.25);
  ASSERT_EQ(keeping.calls().size(), 2u);
  const KernelCall& matmul = keeping.calls()[0];
  EXPECT_EQ(matmul.op, KernelOp::kMatMul);
  ASSERT_EQ(matmul.operands.size(), 2u);
  EXPECT_TRUE(BitwiseEqual(matmul.operands[1], b));
  EXPECT_NE(matmul.operands[1].buffer(), b.buffer());  // a copy
  EXPECT_TRUE(matmul.attrs.transpose_b);
  EXPECT_EQ(keeping.calls()[1].op, KernelOp::kScale);
  EXPECT_EQ(keeping.calls()[1].attrs.scalar, 0.25);
  for (size_t i = 0; i < 2; ++i) {
    const KernelCall& call = keeping.calls()[i];
    std::vector<const Tensor*> operands;
    for (const Tensor& t : call.operands) operands.push_back(&t);
    const Tensor again = kernels.Call(call.op, operands, call.attrs);
    const Tensor& first = i == 0 ? product : scaled;
    ASSERT_EQ(again.shape(), first.shape());
    for (int64_t k = 0; k < first.num_elements(); ++k) {
      EXPECT_EQ(again.f32()[k], first.f32()[k]) << "call " << i << ", element " << k;
    }
  }
}

}  // namespace
}  // namespace remat
