#include "engines/onednn/kernel_traffic.h"

#include <memory>
#include <string>
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

KernelOp TableKernelNamed(const std::string& name) {
  for (KernelOp k : TableKernels()) {
    if (TableKernel(k).name == name) return k;
  }
  ADD_FAILURE() << "no table kernel " << name;
  return KernelOp::kMatMul;
}

TEST(KernelTrafficTest, TheContractionsAreTheMatMulAndTheConvolutions) {
  for (const char* name : {"matmul", "conv2d", "conv2d_bias", "conv2d_backward_data",
                           "conv2d_backward_weights"}) {
    EXPECT_TRUE(IsContraction(name)) << name;
    EXPECT_TRUE(IsContraction(TableKernelNamed(name))) << name;
  }
  for (const char* name : {"add", "conv2d_bias_grad", "max_pool2d", "softmax", "gelu"}) {
    EXPECT_FALSE(IsContraction(name)) << name;
  }
}

// KeepCalls::kContractionSites keeps each contraction's shapes and where
// its operands' and output's elements were, in order (a view's where its
// elements start; an output given, where it was written), no copies and
// nothing of the other kernels; a dry run's none.
TEST(KernelTrafficTest, KeepsEachContractionsSiteInOrder) {
  OneDnnKernels kernels;
  Tensor a = Tensor::Zeros(DType::kF32, Shape({3, 5}));
  Tensor b = Tensor::Zeros(DType::kF32, Shape({5, 7}));
  Tensor g = Tensor::Zeros(DType::kF32, Shape({3, 7}));
  Tensor stacked = Tensor::Zeros(DType::kF32, Shape({2, 5, 7}));
  Tensor x = Tensor::Zeros(DType::kF32, Shape({1, 2, 6, 6}));
  Tensor w = Tensor::Zeros(DType::kF32, Shape({4, 2, 3, 3}));
  KernelAttrs conv;
  conv.int_a = 1;  // stride
  conv.int_b = 1;  // padding
  kernels.MatMul(a, false, b, false);  // before the recorder
  KernelTrafficRecorder recorder(KernelTrafficRecorder::KeepCalls::kContractionSites);
  const Tensor first = kernels.MatMul(a, false, b, false);
  kernels.Call(KernelOp::kAdd, {&a, &a});  // not a contraction
  kernels.MatMulInto(stacked.Slice(0).View(0, Shape({3, 5})), g, false, b, true);
  kernels.MatMul(a, false, stacked.Slice(1), false);
  const Tensor y = kernels.Call(TableKernelNamed("conv2d"), {&x, &w}, conv);
  EXPECT_TRUE(recorder.calls().empty());
  const std::vector<KernelCallSite>& sites = recorder.sites();
  ASSERT_EQ(sites.size(), 4u);
  EXPECT_EQ(sites[0].op, KernelOp::kMatMul);
  EXPECT_EQ(sites[0].operand_shapes, (std::vector<Shape>{Shape({3, 5}), Shape({5, 7})}));
  EXPECT_EQ(sites[0].operand_data, (std::vector<const void*>{a.raw(), b.raw()}));
  EXPECT_EQ(sites[0].out_data, first.raw());
  EXPECT_EQ(sites[0].out_shape, Shape({3, 7}));
  EXPECT_TRUE(sites[1].attrs.transpose_b);
  EXPECT_EQ(sites[1].out_data, stacked.raw());
  EXPECT_EQ(sites[2].operand_data[1], static_cast<const char*>(stacked.raw()) + 5 * 7 * sizeof(float));
  EXPECT_EQ(sites[3].op, TableKernelNamed("conv2d"));
  EXPECT_EQ(sites[3].operand_shapes[1], Shape({4, 2, 3, 3}));
  EXPECT_EQ(sites[3].out_shape, Shape({1, 4, 6, 6}));
  EXPECT_EQ(sites[3].out_data, y.raw());
  EXPECT_EQ(sites[3].attrs.int_b, 1);
  EXPECT_EQ(recorder.traffic().at("add").calls, 1);

  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_dry_run(true);
  OneDnnKernels planning;
  planning.Bind(tracker);
  Tensor p = Tensor::Zeros(DType::kF32, Shape({2, 4, 8}), tracker, Category::kInputs);
  Tensor q = Tensor::Zeros(DType::kF32, Shape({2, 8, 4}), tracker, Category::kInputs);
  planning.MatMul(p, false, q, false);
  EXPECT_EQ(recorder.sites().size(), 4u);
}

}  // namespace
}  // namespace remat
