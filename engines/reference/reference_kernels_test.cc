#include "engines/reference/reference_kernels.h"

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <utility>
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

// ---------------------------------------------------------------------------
// The transformer's kernels, on small hand-computed cases.

TEST(ReferenceKernelsTest, SoftmaxOverTheLastAxis) {
  ReferenceKernels k;
  // exp(0), exp(ln 2), exp(ln 3) over their sum: 1/6, 2/6, 3/6.
  const Tensor y = k.Softmax(Tensor::FromF64({2, 3}, {0.0, std::log(2.0), std::log(3.0),
                                                       1000.0, 1000.0, -INFINITY}));
  ASSERT_EQ(y.shape(), Shape({2, 3}));
  EXPECT_NEAR(y.at(0), 1.0 / 6, 1e-16);
  EXPECT_NEAR(y.at(1), 2.0 / 6, 1e-16);
  EXPECT_NEAR(y.at(2), 3.0 / 6, 1e-16);
  // Max-subtracted: no overflow at 1000; exp(-inf) is 0. Rows are separate.
  EXPECT_EQ(Values(y).at(3), 0.5);
  EXPECT_EQ(Values(y).at(4), 0.5);
  EXPECT_EQ(Values(y).at(5), 0.0);
  // A NaN makes its row NaN, and only its row.
  const Tensor n = k.Softmax(Tensor::FromF64({2, 2}, {1.0, NAN, 1.0, 1.0}));
  EXPECT_TRUE(std::isnan(n.at(0)));
  EXPECT_TRUE(std::isnan(n.at(1)));
  EXPECT_EQ(n.at(2), 0.5);
  // Rank 1 and rank 3.
  EXPECT_EQ(Values(k.Softmax(Tensor::FromF64({2}, {3.0, 3.0}))),
            (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(k.Softmax(Tensor::Zeros(DType::kF64, Shape({2, 3, 4}))).at(23), 0.25);
}

TEST(ReferenceKernelsTest, SoftmaxBackward) {
  ReferenceKernels k;
  // y = [1/4, 3/4], dy = [1, 3]: sum(dy y) = 5/2, dx = y (dy - 5/2).
  const Tensor dx = k.SoftmaxBackward(Tensor::FromF64({1, 2}, {0.25, 0.75}),
                                      Tensor::FromF64({1, 2}, {1.0, 3.0}));
  EXPECT_EQ(Values(dx), (std::vector<double>{-0.375, 0.375}));
}

TEST(ReferenceKernelsTest, LayerNormForward) {
  ReferenceKernels k;
  // Row [1, 2, 3, 4]: mean 5/2, biased variance 5/4. Row [5, 5, 5, 5]:
  // centred to 0, so y = beta exactly.
  const Tensor x = Tensor::FromF64({2, 4}, {1, 2, 3, 4, 5, 5, 5, 5});
  const Tensor gamma = Tensor::FromF64({4}, {1.0, 2.0, 1.0, -1.0});
  const Tensor beta = Tensor::FromF64({4}, {0.0, 0.0, 1.0, 0.5});
  const Tensor y = k.LayerNorm(x, gamma, beta);
  const double rstd = 1.0 / std::sqrt(1.25 + 1e-5);
  const std::vector<double> want = {-1.5 * rstd, -0.5 * rstd * 2, 0.5 * rstd + 1,
                                    -1.5 * rstd + 0.5, 0.0, 0.0, 1.0, 0.5};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y.at(i), want[i], 1e-15) << i;
  EXPECT_THROW(k.LayerNorm(x, Tensor::FromF64({3}, {1, 1, 1}), beta), Error);
}

TEST(ReferenceKernelsTest, LayerNormBackward) {
  ReferenceKernels k;
  // Rows [0, 2] (mean 1, variance 1, xhat = [-r, r], r = 1/sqrt(1 + eps)) and
  // [1, 1] (xhat = 0).
  const Tensor x = Tensor::FromF64({2, 2}, {0.0, 2.0, 1.0, 1.0});
  const Tensor gamma = Tensor::FromF64({2}, {1.0, 1.0});
  const Tensor dy = Tensor::FromF64({2, 2}, {1.0, 0.0, 2.0, 2.0});
  const double r = 1.0 / std::sqrt(1.0 + 1e-5);
  // Row 0: g = [1, 0], mean(g) = 1/2, mean(g xhat) = -r/2:
  // dx = r (g - 1/2 + xhat r/2) = r [1/2 - r^2/2, -1/2 + r^2/2], small
  // because of eps only. Row 1: g = [2, 2], dx = r_1 (g - 2) = 0.
  const Tensor dx = k.LayerNormBackward(x, gamma, dy);
  EXPECT_NEAR(dx.at(0), r * (0.5 - r * r / 2), 1e-17);
  EXPECT_NEAR(dx.at(1), -r * (0.5 - r * r / 2), 1e-17);
  EXPECT_GT(dx.at(0), 0.0);
  EXPECT_EQ(dx.at(2), 0.0);
  EXPECT_EQ(dx.at(3), 0.0);
  // dgamma = sum over rows of dy xhat = [-r, 0]; dbeta = sum of dy = [3, 2].
  const Tensor dgamma = k.LayerNormGammaGrad(x, dy);
  ASSERT_EQ(dgamma.shape(), Shape({2}));
  EXPECT_NEAR(dgamma.at(0), -r, 1e-16);
  EXPECT_EQ(dgamma.at(1), 0.0);
  EXPECT_EQ(Values(k.SumLeading(dy)), (std::vector<double>{3.0, 2.0}));
  // Rank 3 sums over both leading axes.
  EXPECT_EQ(Values(k.SumLeading(Tensor::FromF64({2, 1, 2}, {1, 2, 3, 4}))),
            (std::vector<double>{4.0, 6.0}));
}

TEST(ReferenceKernelsTest, BiasAddAddsTheBiasToEveryRow) {
  ReferenceKernels k;
  const Tensor x = Tensor::FromF64({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const Tensor b = Tensor::FromF64({3}, {0.5, -1, 100});
  const Tensor y = k.BiasAdd(x, b);
  ASSERT_EQ(y.shape(), Shape({2, 2, 3}));
  const std::vector<double> want = {1.5, 1, 103, 4.5, 4, 106, 7.5, 7, 109, 10.5, 10, 112};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(y.at(i), want[i]) << i;
  EXPECT_EQ(k.flops(), 12);
  EXPECT_THROW(k.BiasAdd(x, Tensor::FromF64({2}, {0, 0})), Error);
  EXPECT_THROW(k.BiasAdd(x, Tensor::FromF32({3}, {0, 0, 0})), Error);
}

TEST(ReferenceKernelsTest, GeluTanhForm) {
  ReferenceKernels k;
  // gelu(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)); gelu(x) - gelu(-x) = x.
  const Tensor y = k.Gelu(Tensor::FromF64({3}, {0.0, 1.0, -1.0}));
  EXPECT_EQ(y.at(0), 0.0);
  EXPECT_NEAR(y.at(1), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(y.at(2), 0.8411919906082768 - 1.0, 1e-15);
  // The backward rule is dy times the derivative: 1/2 at 0; elsewhere the
  // central difference of Gelu.
  const std::vector<double> xs = {0.0, -2.5, -0.7, 0.3, 1.9};
  const Tensor dx = k.GeluBackward(Tensor::FromF64({5}, xs), Tensor::FromF64({5}, {2, 1, 1, 1, 1}));
  EXPECT_EQ(dx.at(0), 1.0);
  for (int i = 1; i < 5; ++i) {
    const double h = 1e-6;
    const double fd = (k.Gelu(Tensor::FromF64({1}, {xs[i] + h})).at(0) -
                       k.Gelu(Tensor::FromF64({1}, {xs[i] - h})).at(0)) /
                      (2 * h);
    EXPECT_NEAR(dx.at(i), fd, 1e-8) << xs[i];
  }
}

TEST(ReferenceKernelsTest, ScaleTransposeAndHeads) {
  ReferenceKernels k;
  EXPECT_EQ(Values(k.Scale(Tensor::FromF64({3}, {1.0, -2.0, 0.5}), 0.25)),
            (std::vector<double>{0.25, -0.5, 0.125}));
  const Tensor t = k.Transpose(Tensor::FromF64({2, 3}, kA));
  EXPECT_EQ(t.shape(), Shape({3, 2}));
  EXPECT_EQ(Values(t), kAT);
  const Tensor t3 = k.Transpose(Tensor::FromF64({2, 1, 2}, {1, 2, 3, 4}));
  EXPECT_EQ(t3.shape(), Shape({2, 2, 1}));
  EXPECT_EQ(Values(t3), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_THROW(k.Transpose(Tensor::FromF64({2}, {1, 2})), Error);

  // x (B*S, D) = (4, 4), B = 2, S = 2, H = 2, Dh = 2, x[r][c] = 4r + c:
  // head (b, h) holds rows b*S.. and columns h*Dh...
  std::vector<double> x(16);
  for (int i = 0; i < 16; ++i) x[i] = i;
  const Tensor heads = k.SplitHeads(Tensor::FromF64({4, 4}, x), 2, 2);
  EXPECT_EQ(heads.shape(), Shape({4, 2, 2}));
  EXPECT_EQ(Values(heads),
            (std::vector<double>{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}));
  const Tensor merged = k.MergeHeads(heads, 2);
  EXPECT_EQ(merged.shape(), Shape({4, 4}));
  EXPECT_EQ(Values(merged), x);
  EXPECT_THROW(k.SplitHeads(Tensor::FromF64({4, 4}, x), 3, 2), Error);
  EXPECT_THROW(k.SplitHeads(Tensor::FromF64({4, 4}, x), 2, 3), Error);
  EXPECT_THROW(k.MergeHeads(heads, 3), Error);
}

TEST(ReferenceKernelsTest, CountsTransformerFlops) {
  ReferenceKernels k;
  const Tensor x = Tensor::Zeros(DType::kF64, Shape({2, 3}));  // 6 elements
  const Tensor c = Tensor::Zeros(DType::kF64, Shape({3}));
  const std::vector<std::pair<std::function<void()>, int64_t>> cases = {
      {[&] { k.Softmax(x); }, 5 * 6},
      {[&] { k.SoftmaxBackward(x, x); }, 4 * 6},
      {[&] { k.LayerNorm(x, c, c); }, 7 * 6},
      {[&] { k.LayerNormBackward(x, c, x); }, 13 * 6},
      {[&] { k.LayerNormGammaGrad(x, x); }, 7 * 6},
      {[&] { k.SumLeading(x); }, 6},
      {[&] { k.Gelu(x); }, 6},
      {[&] { k.GeluBackward(x, x); }, 2 * 6},
      {[&] { k.Scale(x, 2.0); }, 6},
      {[&] { k.Transpose(x); }, 0},
      {[&] { k.SplitHeads(x, 1, 3); }, 0},
      {[&] { k.MergeHeads(Tensor::Zeros(DType::kF64, Shape({2, 1, 3})), 1); }, 0},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    k.reset_flops();
    cases[i].first();
    EXPECT_EQ(k.flops(), cases[i].second) << "case " << i;
  }
}

TEST(ReferenceKernelsTest, TransformerKernelsOnZeroRows) {
  ReferenceKernels k;
  const Tensor e = Tensor::Zeros(DType::kF64, Shape({0, 3}));
  const Tensor c = Tensor::FromF64({3}, {1, 1, 1});
  EXPECT_EQ(k.Softmax(e).shape(), Shape({0, 3}));
  EXPECT_EQ(k.LayerNorm(e, c, c).shape(), Shape({0, 3}));
  EXPECT_EQ(Values(k.SumLeading(e)), std::vector<double>(3, 0.0));
  EXPECT_EQ(Values(k.LayerNormGammaGrad(e, e)), std::vector<double>(3, 0.0));
  EXPECT_EQ(k.Transpose(e).shape(), Shape({3, 0}));
  EXPECT_THROW(k.Softmax(Tensor::FromF64(Shape(), {1.0})), Error);
}

TEST(ReferenceKernelsTest, RejectsF32Operands) {
  ReferenceKernels k;
  EXPECT_THROW(k.Relu(Tensor::FromF32({2}, {1.0f, 2.0f})), Error);
}

}  // namespace
}  // namespace remat
