#include "engines/onednn/onednn_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/tensor.h"
#include "engines/reference/reference_kernels.h"
#include "gtest/gtest.h"

namespace remat {
namespace {

constexpr double kF32Epsilon = 0x1p-24;  // unit roundoff of f32

// Uniform in [-1, 1), from a fixed seed.
Tensor Random(const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(shape.num_elements());
  for (float& v : values) v = dist(rng);
  return Tensor::FromF32(shape, values);
}

Tensor F64(const Tensor& t) { return Cast(t, DType::kF64); }

Tensor Abs(const Tensor& t) {
  Tensor out = Copy(t);
  for (int64_t i = 0; i < out.num_elements(); ++i) out.f64()[i] = std::fabs(out.f64()[i]);
  return out;
}

// The stored shape of a matmul operand that is logically (rows, cols).
Shape Stored(int64_t batch, int64_t rows, int64_t cols, bool transposed) {
  const int64_t r = transposed ? cols : rows;
  const int64_t c = transposed ? rows : cols;
  return batch > 0 ? Shape({batch, r, c}) : Shape({r, c});
}

// Checks oneDNN's f32 matmul against the f64 reference on the same f32
// inputs. Each output is a length-k dot product; a float sum of k products
// in any order is off by at most about k * u * sum_j |a_ij| |b_jk| (u =
// 2^-24), so the test allows
//   |got - ref| <= 4 * k * 2^-24 * sum_j |a_ij| |b_jk|,
// a factor of 4 for blocked accumulation orders and the final rounding.
void ExpectMatMulMatchesReference(int64_t batch, int64_t m, int64_t k, int64_t n, bool ta,
                                  bool tb, std::mt19937& rng) {
  SCOPED_TRACE(StrCat("batch=", batch, " m=", m, " k=", k, " n=", n, " ta=", ta, " tb=", tb));
  OneDnnKernels onednn;
  ReferenceKernels reference;
  const Tensor a = Random(Stored(batch, m, k, ta), rng);
  const Tensor b = Random(Stored(batch, k, n, tb), rng);
  const Tensor got = onednn.MatMul(a, ta, b, tb);
  const Tensor want = reference.MatMul(F64(a), ta, F64(b), tb);
  const Tensor magnitude = reference.MatMul(Abs(F64(a)), ta, Abs(F64(b)), tb);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double bound = 4.0 * k * kF32Epsilon * magnitude.at(i);
    ASSERT_LE(std::fabs(got.at(i) - want.at(i)), bound) << "element " << i;
  }
}

TEST(OneDnnKernelsTest, MatMulMatchesReference) {
  std::mt19937 rng(1);
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1, 1}, {7, 33, 1}, {33, 7, 64}, {64, 64, 64}, {1, 64, 7}, {33, 1, 33}, {5, 100, 3}};
  for (const auto& s : shapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) ExpectMatMulMatchesReference(0, s[0], s[1], s[2], ta, tb, rng);
    }
  }
}

TEST(OneDnnKernelsTest, BatchedMatMulMatchesReference) {
  std::mt19937 rng(2);
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1, 1, 1}, {3, 7, 33, 5}, {2, 64, 64, 64}, {4, 1, 7, 33}};
  for (const auto& s : shapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        ExpectMatMulMatchesReference(s[0], s[1], s[2], s[3], ta, tb, rng);
      }
    }
  }
}

// Add, mul, square, their backward rules and relu of f32 inputs round the
// exact result once, and the f64 result rounded to f32 is that same value
// (f64 has more than 2 * 24 + 2 bits), so they must agree exactly.
TEST(OneDnnKernelsTest, ElementwiseOpsMatchReferenceExactly) {
  std::mt19937 rng(3);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  for (const Shape& shape : {Shape({1}), Shape({7}), Shape({33, 5}), Shape({2, 3, 64})}) {
    SCOPED_TRACE(shape.ToString());
    const Tensor x = Random(shape, rng);
    const Tensor y = Random(shape, rng);
    const Tensor relu_x = onednn.Relu(x);
    const auto expect_exact = [&](const Tensor& got, const Tensor& want, const char* op) {
      ASSERT_EQ(got.shape(), want.shape()) << op;
      for (int64_t i = 0; i < got.num_elements(); ++i) {
        ASSERT_EQ(got.at(i), static_cast<double>(static_cast<float>(want.at(i))))
            << op << " element " << i;
      }
    };
    expect_exact(onednn.Add(x, y), reference.Add(F64(x), F64(y)), "add");
    expect_exact(onednn.Mul(x, y), reference.Mul(F64(x), F64(y)), "mul");
    expect_exact(onednn.Square(x), reference.Square(F64(x)), "square");
    expect_exact(onednn.SquareBackward(x, y), reference.SquareBackward(F64(x), F64(y)),
                 "square_backward");
    expect_exact(relu_x, reference.Relu(F64(x)), "relu");
    expect_exact(onednn.ReluBackward(relu_x, y), reference.ReluBackward(F64(relu_x), F64(y)),
                 "relu_backward");
  }
}

// sin and cos are f32 library calls (within an ulp or two); the tolerance is
// 2^-22 relative plus 1e-7 absolute against f64 on the same inputs.
TEST(OneDnnKernelsTest, SinCosMatchReferenceWithinTolerance) {
  std::mt19937 rng(4);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  const Tensor x = Random(Shape({33, 7}), rng);
  const Tensor dy = Random(Shape({33, 7}), rng);
  const auto expect_near = [](const Tensor& got, const Tensor& want, const char* op) {
    for (int64_t i = 0; i < got.num_elements(); ++i) {
      const double tolerance = 0x1p-22 * std::fabs(want.at(i)) + 1e-7;
      ASSERT_NEAR(got.at(i), want.at(i), tolerance) << op << " element " << i;
    }
  };
  expect_near(onednn.Sin(x), reference.Sin(F64(x)), "sin");
  expect_near(onednn.Cos(x), reference.Cos(F64(x)), "cos");
  expect_near(onednn.SinBackward(x, dy), reference.SinBackward(F64(x), F64(dy)), "sin_backward");
  expect_near(onednn.CosBackward(x, dy), reference.CosBackward(F64(x), F64(dy)), "cos_backward");
}

// A sum of n floats: |got - ref| <= 4 * n * 2^-24 * sum_i |x_i|, as for matmul.
TEST(OneDnnKernelsTest, SumMatchesReference) {
  std::mt19937 rng(5);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  for (const Shape& shape : {Shape({1}), Shape({2}), Shape({7, 33}), Shape({3, 64, 64})}) {
    SCOPED_TRACE(shape.ToString());
    const Tensor x = Random(shape, rng);
    const Tensor got = onednn.Sum(x);
    ASSERT_EQ(got.shape(), Shape());
    const double want = reference.Sum(F64(x)).at(0);
    const double magnitude = reference.Sum(Abs(F64(x))).at(0);
    EXPECT_LE(std::fabs(got.at(0) - want), 4.0 * x.num_elements() * kF32Epsilon * magnitude);
  }
}

TEST(OneDnnKernelsTest, BroadcastFills) {
  OneDnnKernels onednn;
  const Tensor out = onednn.Broadcast(Tensor::FromF32(Shape(), {2.5f}), Shape({2, 3}));
  ASSERT_EQ(out.shape(), Shape({2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.at(i), 2.5);
}

// The same call twice gives the same bits, from a cached primitive and from a
// fresh instance alike.
TEST(OneDnnKernelsTest, RepeatedCallsGiveIdenticalBits) {
  std::mt19937 rng(6);
  OneDnnKernels onednn;
  OneDnnKernels other;
  const Tensor a = Random(Shape({65, 130}), rng);
  const Tensor b = Random(Shape({65, 97}), rng);
  const Tensor first = onednn.MatMul(a, true, b, false);
  EXPECT_TRUE(BitwiseEqual(first, onednn.MatMul(a, true, b, false)));
  EXPECT_TRUE(BitwiseEqual(first, other.MatMul(a, true, b, false)));

  const Tensor x = Random(Shape({3, 100, 101}), rng);
  const Tensor sum = onednn.Sum(x);
  EXPECT_TRUE(BitwiseEqual(sum, onednn.Sum(x)));
  EXPECT_TRUE(BitwiseEqual(sum, other.Sum(x)));
}

TEST(OneDnnKernelsTest, ReluDerivativeAtZeroIsZero) {
  OneDnnKernels onednn;
  const Tensor y = onednn.Relu(Tensor::FromF32({4}, {0.0f, -1.0f, 2.0f, -0.0f}));
  const Tensor dx = onednn.ReluBackward(y, Tensor::FromF32({4}, {5.0f, 6.0f, 7.0f, 8.0f}));
  EXPECT_EQ(dx.at(0), 0.0);
  EXPECT_EQ(dx.at(1), 0.0);
  EXPECT_EQ(dx.at(2), 7.0);
  EXPECT_EQ(dx.at(3), 0.0);
}

TEST(OneDnnKernelsTest, ReluPropagatesNaN) {
  OneDnnKernels onednn;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 40 elements, so that both the vector body and the tail see NaN.
  std::vector<float> values(40, -1.0f);
  values[0] = nan;
  values[17] = nan;
  values[39] = nan;
  values[5] = 3.0f;
  const Tensor y = onednn.Relu(Tensor::FromF32({40}, values));
  for (int64_t i = 0; i < 40; ++i) {
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(y.at(i))) << i;
    } else if (values[i] > 0) {
      EXPECT_EQ(y.at(i), values[i]) << i;
    } else {
      EXPECT_EQ(y.at(i), 0.0) << i;
      EXPECT_FALSE(std::signbit(y.at(i))) << i;
    }
  }
}

TEST(OneDnnKernelsTest, CountsMatMulFlops) {
  std::mt19937 rng(7);
  OneDnnKernels onednn;
  onednn.MatMul(Random(Shape({3, 5}), rng), false, Random(Shape({5, 7}), rng), false);
  EXPECT_EQ(onednn.flops(), 2 * 3 * 5 * 7);
  onednn.MatMul(Random(Shape({2, 3, 5}), rng), false, Random(Shape({2, 7, 5}), rng), true);
  EXPECT_EQ(onednn.flops(), 2 * 3 * 5 * 7 + 2 * 2 * 3 * 5 * 7);
  onednn.reset_flops();
  EXPECT_EQ(onednn.flops(), 0);
}

TEST(OneDnnKernelsTest, OutputAndScratchpadAreCounted) {
  std::mt19937 rng(8);
  const Tensor a = Random(Shape({64, 48}), rng);  // uncounted inputs
  const Tensor b = Random(Shape({48, 32}), rng);
  OneDnnKernels onednn;
  auto tracker = std::make_shared<MemoryTracker>();
  onednn.Bind(tracker);
  {
    const Tensor out = onednn.MatMul(a, false, b, false);
    EXPECT_EQ(tracker->live_bytes(), out.bytes());
    EXPECT_EQ(tracker->live_bytes(Category::kScratchpad), 0);  // released after the call
    EXPECT_GE(tracker->peak_bytes(), out.bytes());
    // The peak is the output plus whatever scratchpad oneDNN asked for.
    EXPECT_EQ(tracker->peak_bytes(),
              out.bytes() + tracker->peak_bytes(Category::kScratchpad));
  }
  EXPECT_EQ(tracker->live_bytes(), 0);
}

TEST(OneDnnKernelsTest, ZeroSizeTensors) {
  OneDnnKernels onednn;
  const Tensor e = Tensor::Zeros(DType::kF32, Shape({0, 4}));
  EXPECT_EQ(onednn.Relu(e).shape(), Shape({0, 4}));
  EXPECT_EQ(onednn.ReluBackward(e, e).shape(), Shape({0, 4}));
  EXPECT_EQ(onednn.Square(e).shape(), Shape({0, 4}));
  EXPECT_EQ(onednn.SquareBackward(e, e).shape(), Shape({0, 4}));
  EXPECT_EQ(onednn.Add(e, e).shape(), Shape({0, 4}));
  EXPECT_EQ(onednn.Mul(e, e).shape(), Shape({0, 4}));
  EXPECT_EQ(onednn.Sin(e).shape(), Shape({0, 4}));
  EXPECT_EQ(onednn.Sum(e).at(0), 0.0);
  EXPECT_EQ(onednn.Broadcast(Tensor::FromF32(Shape(), {1.0f}), Shape({0, 4})).num_elements(), 0);
  EXPECT_EQ(onednn.MatMul(e, false, Tensor::Zeros(DType::kF32, Shape({4, 3})), false).shape(),
            Shape({0, 3}));
  EXPECT_EQ(onednn.MatMul(Tensor::Zeros(DType::kF32, Shape({0, 2, 3})), false,
                          Tensor::Zeros(DType::kF32, Shape({0, 3, 2})), false)
                .shape(),
            Shape({0, 2, 2}));
  // k == 0: every output is an empty sum, 0.
  const Tensor z = onednn.MatMul(Tensor::Zeros(DType::kF32, Shape({0, 3})), true,
                                 Tensor::Zeros(DType::kF32, Shape({0, 2})), false);
  ASSERT_EQ(z.shape(), Shape({3, 2}));
  for (int64_t i = 0; i < z.num_elements(); ++i) EXPECT_EQ(z.at(i), 0.0);
}

TEST(OneDnnKernelsTest, RejectsF64Operands) {
  OneDnnKernels onednn;
  const Tensor x = Tensor::FromF64({2}, {1.0, 2.0});
  EXPECT_THROW(onednn.Relu(x), Error);
  EXPECT_THROW(onednn.Add(x, x), Error);
  EXPECT_THROW(onednn.MatMul(Tensor::FromF64({1, 1}, {1.0}), false,
                             Tensor::FromF64({1, 1}, {1.0}), false),
               Error);
}

TEST(OneDnnKernelsTest, MatMulShapeMismatchNamesBothShapes) {
  OneDnnKernels onednn;
  try {
    onednn.MatMul(Tensor::Zeros(DType::kF32, Shape({2, 3})), false,
                  Tensor::Zeros(DType::kF32, Shape({4, 5})), false);
    FAIL() << "expected remat::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[2,3]"), std::string::npos) << message;
    EXPECT_NE(message.find("[4,5]"), std::string::npos) << message;
  }
}

TEST(OneDnnKernelsTest, ReportsItsVersion) {
  const std::string version = OneDnnVersion();
  EXPECT_EQ(version.rfind("oneDNN 2.", 0), 0u) << version;
  EXPECT_NE(version.find("cpu runtime:"), std::string::npos) << version;
}

}  // namespace
}  // namespace remat
