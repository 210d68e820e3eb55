#include "engines/reference/reference_kernels.h"

#include <cmath>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/tensor.h"
#include "gtest/gtest.h"

namespace remat {
namespace {

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = t.at(i);
  return v;
}

// A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]], A @ B = [[58,64],[139,154]].
const std::vector<double> kA = {1, 2, 3, 4, 5, 6};
const std::vector<double> kAT = {1, 4, 2, 5, 3, 6};  // A^T, stored (3,2)
const std::vector<double> kB = {7, 8, 9, 10, 11, 12};
const std::vector<double> kBT = {7, 9, 11, 8, 10, 12};  // B^T, stored (2,3)
const std::vector<double> kAB = {58, 64, 139, 154};

TEST(ReferenceKernelsTest, MatMulAllTransposes) {
  ReferenceKernels k;
  const Tensor a = Tensor::FromF64({2, 3}, kA);
  const Tensor at = Tensor::FromF64({3, 2}, kAT);
  const Tensor b = Tensor::FromF64({3, 2}, kB);
  const Tensor bt = Tensor::FromF64({2, 3}, kBT);
  EXPECT_EQ(Values(k.MatMul(a, false, b, false)), kAB);
  EXPECT_EQ(Values(k.MatMul(at, true, b, false)), kAB);
  EXPECT_EQ(Values(k.MatMul(a, false, bt, true)), kAB);
  EXPECT_EQ(Values(k.MatMul(at, true, bt, true)), kAB);
  EXPECT_EQ(k.MatMul(a, false, b, false).shape(), Shape({2, 2}));
  // (3,2) @ (2,3): the other order, a 3x3 result.
  EXPECT_EQ(Values(k.MatMul(b, false, a, false)),
            (std::vector<double>{39, 54, 69, 49, 68, 87, 59, 82, 105}));
}

TEST(ReferenceKernelsTest, BatchedMatMul) {
  ReferenceKernels k;
  std::vector<double> a2 = kA;
  for (double v : kA) a2.push_back(2 * v);  // batch 1 is 2A
  std::vector<double> bt2 = kBT;
  bt2.insert(bt2.end(), kBT.begin(), kBT.end());
  const Tensor out = k.MatMul(Tensor::FromF64({2, 2, 3}, a2), false,
                              Tensor::FromF64({2, 2, 3}, bt2), true);
  EXPECT_EQ(out.shape(), Shape({2, 2, 2}));
  EXPECT_EQ(Values(out), (std::vector<double>{58, 64, 139, 154, 116, 128, 278, 308}));
}

TEST(ReferenceKernelsTest, MatMulShapeMismatchNamesBothShapes) {
  ReferenceKernels k;
  try {
    k.MatMul(Tensor::FromF64({2, 3}, kA), false, Tensor::FromF64({2, 3}, kA), false);
    FAIL() << "expected remat::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2,3]"), std::string::npos) << e.what();
  }
}

TEST(ReferenceKernelsTest, ReluAndItsDerivative) {
  ReferenceKernels k;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor y = k.Relu(Tensor::FromF64({5}, {-2.0, -0.0, 0.0, 3.0, nan}));
  EXPECT_EQ(y.at(0), 0.0);
  EXPECT_FALSE(std::signbit(y.at(0)));  // +0.0, as max(x, 0) in JAX and PyTorch
  EXPECT_FALSE(std::signbit(y.at(1)));
  EXPECT_EQ(y.at(2), 0.0);
  EXPECT_EQ(y.at(3), 3.0);
  EXPECT_TRUE(std::isnan(y.at(4)));  // NaN propagates

  // relu'(0) = 0: dy is dropped where y == 0.
  const Tensor dx = k.ReluBackward(Tensor::FromF64({3}, {0.0, 2.0, 0.0}),
                                   Tensor::FromF64({3}, {5.0, 6.0, -7.0}));
  EXPECT_EQ(Values(dx), (std::vector<double>{0.0, 6.0, 0.0}));
}

TEST(ReferenceKernelsTest, SumAndBroadcast) {
  ReferenceKernels k;
  const Tensor s = k.Sum(Tensor::FromF64({2, 2}, {1, 2, 3, 4}));
  EXPECT_EQ(s.shape(), Shape());
  EXPECT_EQ(s.at(0), 10.0);
  EXPECT_EQ(k.Sum(Tensor::Zeros(DType::kF64, Shape({0, 4}))).at(0), 0.0);

  const Tensor b = k.Broadcast(Tensor::FromF64(Shape(), {2.5}), Shape({2, 3}));
  EXPECT_EQ(b.shape(), Shape({2, 3}));
  EXPECT_EQ(Values(b), std::vector<double>(6, 2.5));
  EXPECT_THROW(k.Broadcast(Tensor::FromF64({1}, {2.5}), Shape({2})), Error);
}

TEST(ReferenceKernelsTest, ElementwiseOps) {
  ReferenceKernels k;
  const Tensor x = Tensor::FromF64({3}, {-1.5, 0.0, 2.0});
  const Tensor dy = Tensor::FromF64({3}, {2.0, 3.0, -0.5});
  EXPECT_EQ(Values(k.Square(x)), (std::vector<double>{2.25, 0.0, 4.0}));
  EXPECT_EQ(Values(k.SquareBackward(x, dy)), (std::vector<double>{-6.0, 0.0, -2.0}));
  EXPECT_EQ(Values(k.Add(x, dy)), (std::vector<double>{0.5, 3.0, 1.5}));
  EXPECT_EQ(Values(k.Mul(x, dy)), (std::vector<double>{-3.0, 0.0, -1.0}));
}

TEST(ReferenceKernelsTest, SinCosAndTheirBackward) {
  ReferenceKernels k;
  const double half_pi = std::numbers::pi / 2;
  const Tensor x = Tensor::FromF64({2}, {0.0, half_pi});
  const Tensor dy = Tensor::FromF64({2}, {3.0, 2.0});
  EXPECT_EQ(Values(k.Sin(x)), (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(k.Cos(x).at(0), 1.0);
  EXPECT_NEAR(k.Cos(x).at(1), 0.0, 1e-15);

  const Tensor dsin = k.SinBackward(x, dy);  // dy * cos(x)
  EXPECT_EQ(dsin.at(0), 3.0);
  EXPECT_NEAR(dsin.at(1), 0.0, 1e-15);
  const Tensor dcos = k.CosBackward(x, dy);  // -(dy * sin(x))
  EXPECT_EQ(dcos.at(0), 0.0);
  EXPECT_TRUE(std::signbit(dcos.at(0)));  // -(3 * 0) is -0.0
  EXPECT_EQ(dcos.at(1), -2.0);
}

TEST(ReferenceKernelsTest, CountsFlops) {
  ReferenceKernels k;
  k.MatMul(Tensor::FromF64({2, 3}, kA), false, Tensor::FromF64({3, 2}, kB), false);
  EXPECT_EQ(k.flops(), 2 * 2 * 3 * 2);
  k.reset_flops();
  const Tensor x = Tensor::FromF64({3}, {1, 2, 3});
  k.Sin(x);
  EXPECT_EQ(k.flops(), 3);
  k.SinBackward(x, x);  // two per element
  EXPECT_EQ(k.flops(), 3 + 6);
}

TEST(ReferenceKernelsTest, OutputsAreCountedByTheBoundTracker) {
  ReferenceKernels k;
  auto tracker = std::make_shared<MemoryTracker>();
  k.Bind(tracker);
  {
    const Tensor out =
        k.MatMul(Tensor::FromF64({2, 3}, kA), false, Tensor::FromF64({3, 2}, kB), false);
    EXPECT_EQ(tracker->live_bytes(), out.bytes());
  }
  EXPECT_EQ(tracker->live_bytes(), 0);
  EXPECT_EQ(tracker->peak_bytes(), 4 * 8);
}

TEST(ReferenceKernelsTest, ZeroSizeTensors) {
  ReferenceKernels k;
  const Tensor e = Tensor::Zeros(DType::kF64, Shape({0, 4}));
  EXPECT_EQ(k.Relu(e).shape(), Shape({0, 4}));
  EXPECT_EQ(k.Add(e, e).num_elements(), 0);
  EXPECT_EQ(k.MatMul(e, false, Tensor::Zeros(DType::kF64, Shape({4, 3})), false).shape(),
            Shape({0, 3}));
  // k == 0: an empty sum, all zeros.
  const Tensor z = k.MatMul(Tensor::Zeros(DType::kF64, Shape({3, 0})), false,
                            Tensor::Zeros(DType::kF64, Shape({0, 2})), false);
  EXPECT_EQ(Values(z), std::vector<double>(6, 0.0));
}

TEST(ReferenceKernelsTest, RejectsF32Operands) {
  ReferenceKernels k;
  EXPECT_THROW(k.Relu(Tensor::FromF32({2}, {1.0f, 2.0f})), Error);
}

}  // namespace
}  // namespace remat
