#include "engines/onednn/onednn_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/lane_math.h"
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

// A call of `op` through its checked entry point.
Tensor CallEntryPoint(Kernels& k, KernelOp op, const std::vector<Tensor>& x, const KernelAttrs& at,
                      const Shape& broadcast_to) {
  if (op >= KernelOp::kFirstTableKernel) {  // no entry point of its own
    std::vector<const Tensor*> operands;
    for (const Tensor& t : x) operands.push_back(&t);
    return k.Call(op, operands, at);
  }
  switch (op) {
    case KernelOp::kMatMul: return k.MatMul(x[0], at.transpose_a, x[1], at.transpose_b);
    case KernelOp::kRelu: return k.Relu(x[0]);
    case KernelOp::kReluBackward: return k.ReluBackward(x[0], x[1]);
    case KernelOp::kSin: return k.Sin(x[0]);
    case KernelOp::kCos: return k.Cos(x[0]);
    case KernelOp::kSinBackward: return k.SinBackward(x[0], x[1]);
    case KernelOp::kCosBackward: return k.CosBackward(x[0], x[1]);
    case KernelOp::kSquare: return k.Square(x[0]);
    case KernelOp::kSquareBackward: return k.SquareBackward(x[0], x[1]);
    case KernelOp::kAdd: return k.Add(x[0], x[1]);
    case KernelOp::kMul: return k.Mul(x[0], x[1]);
    case KernelOp::kSum: return k.Sum(x[0]);
    case KernelOp::kBroadcast: return k.Broadcast(x[0], broadcast_to);
    case KernelOp::kSoftmax: return k.Softmax(x[0]);
    case KernelOp::kSoftmaxBackward: return k.SoftmaxBackward(x[0], x[1]);
    case KernelOp::kLayerNorm: return k.LayerNorm(x[0], x[1], x[2]);
    case KernelOp::kLayerNormBackward: return k.LayerNormBackward(x[0], x[1], x[2]);
    case KernelOp::kLayerNormGammaGrad: return k.LayerNormGammaGrad(x[0], x[1]);
    case KernelOp::kSumLeading: return k.SumLeading(x[0]);
    case KernelOp::kGelu: return k.Gelu(x[0]);
    case KernelOp::kGeluBackward: return k.GeluBackward(x[0], x[1]);
    case KernelOp::kScale: return k.Scale(x[0], at.scalar);
    case KernelOp::kTranspose: return k.Transpose(x[0]);
    case KernelOp::kSplitHeads: return k.SplitHeads(x[0], at.int_a, at.int_b);
    case KernelOp::kMergeHeads: return k.MergeHeads(x[0], at.int_a);
    case KernelOp::kBiasAdd: return k.BiasAdd(x[0], x[1]);
    case KernelOp::kFirstTableKernel: break;
  }
  return Tensor();
}

// RunInto (a compiled engine's call: no checks, the output made by the
// caller) gives the entry point's bits for every kernel, counts the call
// and allocates nothing but the kernel's own scratchpad.
TEST(OneDnnKernelsTest, RunIntoGivesTheEntryPointsBits) {
  std::mt19937 rng(11);
  const Shape x({6, 8}), c({8});
  struct Case {
    KernelOp op;
    std::vector<Shape> shapes;
    KernelAttrs attrs;
  };
  KernelAttrs transposed;
  transposed.transpose_a = true;
  transposed.transpose_b = true;
  KernelAttrs scale;
  scale.scalar = 0.37;
  KernelAttrs split;
  split.int_a = 2;
  split.int_b = 2;
  KernelAttrs merge;
  merge.int_a = 2;
  const std::vector<Case> cases = {
      {KernelOp::kMatMul, {x, Shape({8, 5})}, {}},
      {KernelOp::kMatMul, {Shape({8, 6}), Shape({5, 8})}, transposed},
      {KernelOp::kRelu, {x}, {}},
      {KernelOp::kReluBackward, {x, x}, {}},
      {KernelOp::kSin, {x}, {}},
      {KernelOp::kCos, {x}, {}},
      {KernelOp::kSinBackward, {x, x}, {}},
      {KernelOp::kCosBackward, {x, x}, {}},
      {KernelOp::kSquare, {x}, {}},
      {KernelOp::kSquareBackward, {x, x}, {}},
      {KernelOp::kAdd, {x, x}, {}},
      {KernelOp::kMul, {x, x}, {}},
      {KernelOp::kSum, {x}, {}},
      {KernelOp::kBroadcast, {Shape()}, {}},
      {KernelOp::kSoftmax, {x}, {}},
      {KernelOp::kSoftmaxBackward, {x, x}, {}},
      {KernelOp::kLayerNorm, {x, c, c}, {}},
      {KernelOp::kLayerNormBackward, {x, c, x}, {}},
      {KernelOp::kLayerNormGammaGrad, {x, x}, {}},
      {KernelOp::kSumLeading, {x}, {}},
      {KernelOp::kGelu, {x}, {}},
      {KernelOp::kGeluBackward, {x, x}, {}},
      {KernelOp::kScale, {x}, scale},
      {KernelOp::kTranspose, {x}, {}},
      {KernelOp::kSplitHeads, {x}, split},
      {KernelOp::kMergeHeads, {Shape({4, 3, 4})}, merge},
      {KernelOp::kBiasAdd, {x, c}, {}},
  };
  // The table's kernels: elementwise ones on operands of one shape (a
  // kernel whose shape rule rejects that is skipped here; its op's
  // completeness test runs it).
  std::vector<Case> table_cases;
  for (KernelOp op : TableKernels()) {
    table_cases.push_back({op, std::vector<Shape>(KernelArity(op), x), {}});
  }
  std::vector<bool> covered(static_cast<int>(KernelOp::kBiasAdd) + 1, false);
  OneDnnKernels onednn;
  auto tracker = std::make_shared<MemoryTracker>();
  onednn.Bind(tracker);
  std::vector<Case> all = cases;
  all.insert(all.end(), table_cases.begin(), table_cases.end());
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& test = all[i];
    const bool generic = i >= cases.size();  // from table_cases
    SCOPED_TRACE(StrCat("kernel ", TableKernel(test.op).name));
    if (!generic) covered[static_cast<int>(test.op)] = true;
    ASSERT_EQ(KernelArity(test.op), static_cast<int>(test.shapes.size()));
    std::vector<Tensor> operands;
    std::vector<const Tensor*> pointers;
    for (const Shape& s : test.shapes) operands.push_back(Random(s, rng));
    for (const Tensor& t : operands) pointers.push_back(&t);
    Tensor want;
    try {
      want = CallEntryPoint(onednn, test.op, operands, test.attrs, x);
    } catch (const Error&) {
      if (generic) continue;  // not elementwise: see above
      throw;
    }
    Tensor out = Tensor::Uninitialized(DType::kF32, want.shape(), nullptr);
    std::memset(out.raw(), 0xff, static_cast<size_t>(out.bytes()));
    onednn.reset_flops();
    onednn.reset_kernel_seconds();
    const int64_t live = tracker->live_bytes();
    onednn.RunInto(test.op, pointers, test.attrs, out);
    EXPECT_TRUE(BitwiseEqual(out, want));
    EXPECT_EQ(onednn.kernel_calls(), 1);
    // The one call, under its kernel's name, with all the time.
    const KernelTimes times = onednn.kernel_times();
    ASSERT_EQ(times.size(), 1u);
    EXPECT_EQ(times.begin()->first, TableKernel(test.op).name);
    EXPECT_EQ(times.begin()->second.calls, 1);
    EXPECT_DOUBLE_EQ(times.begin()->second.seconds, onednn.kernel_seconds());
    EXPECT_EQ(onednn.flops(), 0);  // a compiled plan counts them
    EXPECT_EQ(tracker->live_bytes(), live);
  }
  for (size_t op = 0; op < covered.size(); ++op) EXPECT_TRUE(covered[op]) << "kernel " << op;
}

// The time and calls by kernel add up to the totals, and a reset clears
// both.
TEST(OneDnnKernelsTest, KernelTimesAddUpToTheTotals) {
  OneDnnKernels onednn;
  const Tensor x = Tensor::FromF32({2, 2}, {1.0f, -2.0f, 3.0f, -4.0f});
  onednn.reset_kernel_seconds();
  const Tensor y = onednn.Relu(x);
  const Tensor z = onednn.MatMul(y, false, x, true);
  const Tensor w = onednn.Add(z, z);
  const Tensor v = onednn.Add(w, z);
  const KernelTimes times = onednn.kernel_times();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times.at("relu").calls, 1);
  EXPECT_EQ(times.at("matmul").calls, 1);
  EXPECT_EQ(times.at("add").calls, 2);
  double seconds = 0;
  for (const auto& [name, t] : times) seconds += t.seconds;
  EXPECT_NEAR(seconds, onednn.kernel_seconds(), 1e-12);
  EXPECT_EQ(onednn.kernel_calls(), 4);
  onednn.reset_kernel_seconds();
  EXPECT_TRUE(onednn.kernel_times().empty());
  onednn.set_timing(false);  // calls counted, no time
  const Tensor u = onednn.Relu(x);
  ASSERT_EQ(onednn.kernel_times().size(), 1u);
  EXPECT_EQ(onednn.kernel_times().at("relu").calls, 1);
  EXPECT_EQ(onednn.kernel_times().at("relu").seconds, 0.0);
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

// Every pairing of `as` with `bs`, as two lists side by side.
std::pair<std::vector<float>, std::vector<float>> AllPairings(const std::vector<float>& as,
                                                              const std::vector<float>& bs) {
  std::pair<std::vector<float>, std::vector<float>> out;
  for (float a : as) {
    for (float b : bs) {
      out.first.push_back(a);
      out.second.push_back(b);
    }
  }
  return out;
}

// `values` over and over, n of them.
std::vector<float> Repeated(const std::vector<float>& values, int64_t n) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = values[i % values.size()];
  return out;
}

// The same f32 bits, but that any NaN matches any NaN.
void ExpectSameFloatBits(double got_value, double want_value) {
  const float o = static_cast<float>(got_value);
  const float w = static_cast<float>(want_value);
  EXPECT_EQ(std::isnan(o), std::isnan(w));
  if (!std::isnan(w)) {
    EXPECT_EQ(o, w);
    EXPECT_EQ(std::signbit(o), std::signbit(w));
  }
}

// The lengths the elementwise passes are checked at: whole cache lines of
// 16 only; lines and a tail of fewer than four; lines, one block of four
// after them and a tail; and enough elements (2^17 and one) for the lines to
// split between OpenMP's threads.
std::vector<int64_t> PassLengths(int64_t pairs) {
  return {pairs, pairs + 3, pairs + 7, 4 * pairs + 1, int64_t{1 << 17} + 1};
}

// relu and relu_backward on every pairing of relu's special inputs with
// special cotangents, at lengths that put each pairing in a vector block and
// in a tail, against the reference bit for bit: relu keeps x where x > 0 or
// x is NaN, else +0; relu_backward is dy where x > 0, else dy * 0 (-0 for a
// negative dy, NaN for an infinite or NaN one).
TEST(OneDnnKernelsTest, ReluAndItsBackwardOnSpecialValuesMatchTheReferenceBits) {
  OneDnnKernels onednn;
  ReferenceKernels reference;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto [x, g] = AllPairings({-1.0f, -0.0f, 0.0f, 1e-30f, 2.0f, inf, -inf, nan},
                                  {3.0f, -3.0f, 0.0f, -0.0f, inf, -inf, nan, 1e-30f});
  for (const int64_t n : PassLengths(static_cast<int64_t>(x.size()))) {
    const std::vector<float> xn = Repeated(x, n), gn = Repeated(g, n);
    const Tensor tx = Tensor::FromF32({n}, xn);
    const Tensor tg = Tensor::FromF32({n}, gn);
    const Tensor got = onednn.ReluBackward(tx, tg);
    const Tensor want = reference.ReluBackward(F64(tx), F64(tg));
    const Tensor got_relu = onednn.Relu(tx);
    const Tensor want_relu = reference.Relu(F64(tx));
    for (int64_t i = 0; i < n; ++i) {
      SCOPED_TRACE(StrCat("n=", n, " element ", i, ": x=", xn[i], " dy=", gn[i]));
      ExpectSameFloatBits(got.at(i), want.at(i));
      ExpectSameFloatBits(got_relu.at(i), want_relu.at(i));
    }
  }
}

// square, its backward, add, mul and broadcast (our own passes) on every
// pairing of special values, at the lengths above (lines, blocks and tails,
// and the threads' split), against the reference bit for bit: each is one
// IEEE operation on exact f64 inputs, so the reference's f64 result rounded
// to f32 is the f32 operation's (2x is exact: no input is near the largest
// float).
TEST(OneDnnKernelsTest, ElementwisePassesOnSpecialValuesMatchTheReferenceBits) {
  OneDnnKernels onednn;
  ReferenceKernels reference;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values = {-1.0f, -0.0f, 0.0f, 1e-30f, 3e-39f, 2.5f,
                                     1e20f, -7.0f, inf, -inf, nan, 0.1f};
  const auto [a, b] = AllPairings(values, values);
  for (const int64_t n : PassLengths(static_cast<int64_t>(a.size()))) {
    const std::vector<float> an = Repeated(a, n), bn = Repeated(b, n);
    const Tensor ta = Tensor::FromF32({n}, an);
    const Tensor tb = Tensor::FromF32({n}, bn);
    const Tensor a64 = F64(ta), b64 = F64(tb);
    const std::vector<std::pair<Tensor, Tensor>> cases = {
        {onednn.Square(ta), reference.Square(a64)},
        {onednn.SquareBackward(ta, tb), reference.SquareBackward(a64, b64)},
        {onednn.Add(ta, tb), reference.Add(a64, b64)},
        {onednn.Mul(ta, tb), reference.Mul(a64, b64)}};
    const char* names[] = {"square", "square_backward", "add", "mul"};
    for (size_t c = 0; c < cases.size(); ++c) {
      for (int64_t i = 0; i < n; ++i) {
        SCOPED_TRACE(StrCat(names[c], " n=", n, " element ", i, ": a=", an[i], " b=", bn[i]));
        ExpectSameFloatBits(cases[c].first.at(i), cases[c].second.at(i));
      }
    }
    for (float v : {-0.0f, nan, 2.5f}) {
      const Tensor got = onednn.Broadcast(Tensor::FromF32({}, {v}), Shape{n});
      for (int64_t i = 0; i < n; ++i) {
        SCOPED_TRACE(StrCat("broadcast n=", n, " element ", i, ": v=", v));
        ExpectSameFloatBits(got.at(i), v);
      }
    }
  }
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

// CallInto: the entry point's bits, in the elements given (here a slice of
// a stack, as a scan's stacked gradient), counted as the entry point's
// output would be but with no storage of its own, and counted as a call; a
// wrong output is an error naming what is wrong.
TEST(OneDnnKernelsTest, MatMulIntoWritesTheEntryPointsBitsWhereAsked) {
  std::mt19937 rng(9);
  const Tensor a = Random(Shape({6, 5}), rng);
  const Tensor b = Random(Shape({6, 7}), rng);
  OneDnnKernels onednn;
  const Tensor want = onednn.MatMul(a, true, b, false);
  Tensor stack = Tensor::Zeros(DType::kF32, Shape({3, 5, 7}));
  {
    const Tensor got = onednn.MatMulInto(stack.Slice(1), a, true, b, false);  // no tracker
    EXPECT_EQ(got.buffer(), stack.buffer());
    EXPECT_EQ(got.offset_bytes(), stack.Slice(1).offset_bytes());
  }
  auto tracker = std::make_shared<MemoryTracker>();
  onednn.Bind(tracker);
  onednn.reset_flops();
  onednn.reset_kernel_seconds();
  std::memset(stack.raw(), 0, static_cast<size_t>(stack.bytes()));
  {
    const Tensor got = onednn.MatMulInto(stack.Slice(1), a, true, b, false);
    EXPECT_EQ(got.raw(), stack.Slice(1).raw());
    EXPECT_EQ(got.shape(), Shape({5, 7}));
    EXPECT_EQ(tracker->live_bytes(), got.bytes()) << "counted as MatMul's output";
    EXPECT_EQ(tracker->storage_bytes(), tracker->high_water_bytes(Category::kScratchpad))
        << "no storage of its own: only oneDNN's scratchpad is new";
    EXPECT_EQ(onednn.flops(), 2 * 5 * 6 * 7);
    EXPECT_EQ(onednn.kernel_calls(), 1);
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), static_cast<size_t>(want.bytes())), 0);
  }
  EXPECT_EQ(tracker->live_bytes(), 0);
  EXPECT_EQ(std::memcmp(stack.Slice(1).raw(), want.raw(), static_cast<size_t>(want.bytes())), 0)
      << "the elements stay when the result goes";
  for (int64_t i = 0; i < 35; ++i) {
    EXPECT_EQ(stack.f32()[i], 0.0f) << "slice 0 untouched, at " << i;
    EXPECT_EQ(stack.f32()[70 + i], 0.0f) << "slice 2 untouched, at " << i;
  }
  onednn.Bind(nullptr);
  auto error_of = [&](const Tensor& out, const Tensor& x) -> std::string {
    try {
      onednn.MatMulInto(out, x, true, b, false);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(stack.Slice(0).Slice(0), a).find("the output given is f32[7]"),
            std::string::npos)
      << error_of(stack.Slice(0).Slice(0), a);
  EXPECT_NE(error_of(Tensor(), a).find("undefined"), std::string::npos);
  EXPECT_NE(error_of(Tensor::Zeros(DType::kF64, Shape({5, 7})), a).find("f64[5,7]"),
            std::string::npos)
      << error_of(Tensor::Zeros(DType::kF64, Shape({5, 7})), a);
  const Tensor square = Random(Shape({5, 5}), rng);
  const Tensor squares = Tensor::Zeros(DType::kF32, Shape({2, 5, 5}));
  try {
    onednn.MatMulInto(squares.Slice(1), squares.Slice(1), true, square, false);
    ADD_FAILURE() << "an output that is an operand was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shares elements with operand 0"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(onednn.MatMulInto(squares.Slice(0), squares.Slice(1), true, square, false));
  // With a tracker, a result is a buffer of its own over the slice's
  // elements: as an operand it still shares them with that slice.
  onednn.Bind(std::make_shared<MemoryTracker>());
  const Tensor written = onednn.MatMulInto(squares.Slice(1), square, true, square, false);
  EXPECT_NE(written.buffer(), squares.buffer());
  try {
    onednn.MatMulInto(squares.Slice(1), written, true, square, false);
    ADD_FAILURE() << "an output whose elements an operand of another buffer holds was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shares elements with operand 0"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(onednn.MatMulInto(squares.Slice(0), written, true, square, false));
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

// ---------------------------------------------------------------------------
// The transformer's kernels against the reference, on the same f32 inputs.

// Uniform in [-scale, scale).
Tensor RandomScaled(const Shape& shape, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(shape.num_elements());
  for (float& v : values) v = dist(rng);
  return Tensor::FromF32(shape, values);
}

double MaxAbs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) m = std::max(m, std::fabs(t.at(i)));
  return m;
}

// Per tensor: |got - want| <= bound * max|want| for every element.
void ExpectClose(const Tensor& got, const Tensor& want, double bound, const std::string& op) {
  ASSERT_EQ(got.shape(), want.shape()) << op;
  const double tolerance = bound * MaxAbs(want);
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    ASSERT_LE(std::fabs(got.at(i) - want.at(i)), tolerance)
        << op << " element " << i << ": " << got.at(i) << " vs " << want.at(i);
  }
}

void ExpectExact(const Tensor& got, const Tensor& want, const std::string& op) {
  ASSERT_EQ(got.shape(), want.shape()) << op;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    ASSERT_EQ(got.at(i), static_cast<double>(static_cast<float>(want.at(i))))
        << op << " element " << i;
  }
}

// Each softmax output and each layer-norm output is computed from a sum of C
// terms of the row (plus a few roundings per element): the tolerance is
// 4 (C + 8) 2^-24 of the tensor's largest value.
TEST(OneDnnKernelsTest, SoftmaxMatchesReference) {
  std::mt19937 rng(9);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  for (const Shape& shape : {Shape({1}), Shape({5, 3}), Shape({7, 33}), Shape({4, 16, 16}),
                             Shape({2, 3, 100})}) {
    SCOPED_TRACE(shape.ToString());
    const double c = static_cast<double>(shape.dim(shape.rank() - 1));
    const double bound = 4.0 * (c + 8) * kF32Epsilon;
    const Tensor x = RandomScaled(shape, rng, 8.0f);
    const Tensor dy = Random(shape, rng);
    const Tensor y = onednn.Softmax(x);
    ExpectClose(y, reference.Softmax(F64(x)), bound, "softmax");
    // The backward rule from the same (f32) y on both sides.
    ExpectClose(onednn.SoftmaxBackward(y, dy), reference.SoftmaxBackward(F64(y), F64(dy)),
                bound, "softmax_backward");
  }
}

TEST(OneDnnKernelsTest, SoftmaxHandComputedAndNaN) {
  OneDnnKernels onednn;
  const Tensor y = onednn.Softmax(Tensor::FromF32({2, 2}, {1000.0f, 1000.0f, 0.0f, -INFINITY}));
  EXPECT_EQ(y.at(0), 0.5);
  EXPECT_EQ(y.at(1), 0.5);
  EXPECT_EQ(y.at(2), 1.0);
  EXPECT_EQ(y.at(3), 0.0);
  // y = [1/4, 3/4], dy = [1, 3]: dx = y (dy - 5/2) = [-3/8, 3/8].
  const Tensor dx = onednn.SoftmaxBackward(Tensor::FromF32({1, 2}, {0.25f, 0.75f}),
                                           Tensor::FromF32({1, 2}, {1.0f, 3.0f}));
  EXPECT_EQ(dx.at(0), -0.375);
  EXPECT_EQ(dx.at(1), 0.375);
  // A NaN or +inf anywhere in a row (vector body or tail) makes the row NaN,
  // as the reference's (and JAX's) sum does; oneDNN alone leaves the other
  // elements 0. Other rows are untouched.
  std::vector<float> values(3 * 40, 0.5f);
  values[17] = NAN;
  values[40 + 39] = INFINITY;
  const Tensor n = onednn.Softmax(Tensor::FromF32({3, 40}, values));
  for (int64_t i = 0; i < 80; ++i) EXPECT_TRUE(std::isnan(n.at(i))) << i;
  for (int64_t i = 80; i < 120; ++i) EXPECT_EQ(n.at(i), 1.0f / 40) << i;
}

TEST(OneDnnKernelsTest, LayerNormMatchesReference) {
  std::mt19937 rng(10);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  for (const Shape& shape : {Shape({1}), Shape({5, 3}), Shape({7, 64}), Shape({2, 3, 100})}) {
    SCOPED_TRACE(shape.ToString());
    const int64_t c = shape.dim(shape.rank() - 1);
    const double bound = 4.0 * (static_cast<double>(c) + 8) * kF32Epsilon;
    // Rows with an offset, so the mean matters.
    const Tensor x = RandomScaled(shape, rng, 3.0f);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] += 2.0f;
    const Tensor gamma = RandomScaled(Shape({c}), rng, 1.5f);
    const Tensor beta = Random(Shape({c}), rng);
    const Tensor dy = Random(shape, rng);
    ExpectClose(onednn.LayerNorm(x, gamma, beta),
                reference.LayerNorm(F64(x), F64(gamma), F64(beta)), bound, "layer_norm");
    ExpectClose(onednn.LayerNormBackward(x, gamma, dy),
                reference.LayerNormBackward(F64(x), F64(gamma), F64(dy)), bound,
                "layer_norm_backward");
    // dgamma and dbeta also sum over the rows.
    const double rows = static_cast<double>(x.num_elements() / c);
    const double row_bound = bound + 4.0 * rows * kF32Epsilon;
    ExpectClose(onednn.LayerNormGammaGrad(x, dy), reference.LayerNormGammaGrad(F64(x), F64(dy)),
                row_bound, "layer_norm_gamma_grad");
    ExpectClose(onednn.SumLeading(dy), reference.SumLeading(F64(dy)), row_bound, "sum_leading");
  }
}

// The layer norm kernels take rows four at a time and split columns among
// threads, but each row's statistics and each column's sum over the rows are
// still taken in index order: their bits are those of one plain loop per row
// (and per column), here written out, on row counts that leave 0 to 7 rows
// over a block of loop_kernels::kRowBlock and on shapes past the parallel
// threshold.
TEST(OneDnnKernelsTest, LayerNormBitsAreThoseOfOneRowAtATime) {
  std::mt19937 rng(11);
  OneDnnKernels onednn;
  const float eps = static_cast<float>(Kernels::kLayerNormEps);
  for (const Shape& shape : {Shape({1, 5}), Shape({6, 3}), Shape({7, 64}), Shape({9, 5}),
                             Shape({15, 3}), Shape({17, 33}), Shape({129, 256}),
                             Shape({2, 65, 1024})}) {
    SCOPED_TRACE(shape.ToString());
    const int64_t c = shape.dim(shape.rank() - 1), rows = shape.num_elements() / c;
    const Tensor x = RandomScaled(shape, rng, 3.0f);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] += 2.0f;
    const Tensor gamma = RandomScaled(Shape({c}), rng, 1.5f);
    const Tensor beta = Random(Shape({c}), rng);
    const Tensor dy = Random(shape, rng);
    std::vector<float> mean(rows), rstd(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * c;
      float sum = 0.0f;
      for (int64_t j = 0; j < c; ++j) sum += xr[j];
      mean[r] = sum / static_cast<float>(c);
      float squares = 0.0f;
      for (int64_t j = 0; j < c; ++j) squares += (xr[j] - mean[r]) * (xr[j] - mean[r]);
      rstd[r] = 1.0f / std::sqrt(squares / static_cast<float>(c) + eps);
    }
    const Tensor y = onednn.LayerNorm(x, gamma, beta);
    const Tensor dx = onednn.LayerNormBackward(x, gamma, dy);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * c;
      const float* dyr = dy.f32() + r * c;
      float sum_g = 0.0f, sum_gx = 0.0f;
      for (int64_t j = 0; j < c; ++j) {
        const float gj = dyr[j] * gamma.f32()[j];
        sum_g += gj;
        sum_gx += gj * ((xr[j] - mean[r]) * rstd[r]);
      }
      for (int64_t j = 0; j < c; ++j) {
        const float xhat = (xr[j] - mean[r]) * rstd[r];
        ASSERT_EQ(y.f32()[r * c + j], xhat * gamma.f32()[j] + beta.f32()[j]) << r << "," << j;
        const float gj = dyr[j] * gamma.f32()[j];
        const float want = rstd[r] * (gj - sum_g / static_cast<float>(c) -
                                      xhat * (sum_gx / static_cast<float>(c)));
        ASSERT_EQ(dx.f32()[r * c + j], want) << r << "," << j;
      }
    }
    const Tensor dgamma = onednn.LayerNormGammaGrad(x, dy);
    const Tensor dbeta = onednn.SumLeading(dy);
    for (int64_t j = 0; j < c; ++j) {
      float g = 0.0f, b = 0.0f;
      for (int64_t r = 0; r < rows; ++r) {
        g += dy.f32()[r * c + j] * ((x.f32()[r * c + j] - mean[r]) * rstd[r]);
        b += dy.f32()[r * c + j];
      }
      ASSERT_EQ(dgamma.f32()[j], g) << j;
      ASSERT_EQ(dbeta.f32()[j], b) << j;
    }
  }
}

// bias_add is one f32 addition per element: exactly the f64 sum rounded to
// f32. Its backward's db is SumLeading (rules.cc), within the rows' roundings.
TEST(OneDnnKernelsTest, BiasAddMatchesReferenceExactly) {
  std::mt19937 rng(12);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  for (const Shape& shape : {Shape({1}), Shape({7}), Shape({33, 5}), Shape({2, 3, 64})}) {
    SCOPED_TRACE(shape.ToString());
    const int64_t c = shape.dim(shape.rank() - 1);
    const Tensor x = Random(shape, rng);
    const Tensor b = Random(Shape({c}), rng);
    const Tensor got = onednn.BiasAdd(x, b);
    const Tensor want = reference.BiasAdd(F64(x), F64(b));
    ASSERT_EQ(got.shape(), shape);
    for (int64_t i = 0; i < got.num_elements(); ++i) {
      ASSERT_EQ(got.at(i), static_cast<double>(static_cast<float>(want.at(i)))) << i;
      ASSERT_EQ(got.at(i), static_cast<double>(x.f32()[i] + b.f32()[i % c])) << i;
    }
  }
  const Tensor x = Tensor::FromF32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor y = onednn.BiasAdd(x, Tensor::FromF32({3}, {10, 20, 30}));
  const std::vector<double> want = {11, 22, 33, 14, 25, 36};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.at(i), want[i]) << i;
  EXPECT_EQ(onednn.flops(), 1 + 7 + 33 * 5 + 2 * 3 * 64 + 6);
  try {
    onednn.BiasAdd(x, Tensor::FromF32({2}, {0, 0}));
    FAIL() << "a bias of the wrong shape must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a bias of shape [3] (the last axis); got [2]"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(onednn.BiasAdd(Tensor::FromF32({}, {1}), Tensor::FromF32({}, {1})), Error);
  EXPECT_EQ(
      onednn.BiasAdd(Tensor::Zeros(DType::kF32, Shape({0, 3})), Tensor::FromF32({3}, {1, 1, 1}))
          .shape(),
      Shape({0, 3}));
}

TEST(OneDnnKernelsTest, LayerNormHandComputed) {
  OneDnnKernels onednn;
  // Row [1, 2, 3, 4]: mean 5/2, biased variance 5/4; row [5, 5, 5, 5]: beta.
  const Tensor x = Tensor::FromF32({2, 4}, {1, 2, 3, 4, 5, 5, 5, 5});
  const Tensor gamma = Tensor::FromF32({4}, {1.0f, 2.0f, 1.0f, -1.0f});
  const Tensor beta = Tensor::FromF32({4}, {0.0f, 0.0f, 1.0f, 0.5f});
  const Tensor y = onednn.LayerNorm(x, gamma, beta);
  const double r = 1.0 / std::sqrt(1.25 + 1e-5);
  const std::vector<double> want = {-1.5 * r, -r, 0.5 * r + 1, -1.5 * r + 0.5, 0, 0, 1, 0.5};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y.at(i), want[i], 4e-7) << i;
  EXPECT_EQ(onednn.SumLeading(x).at(0), 6.0);
  EXPECT_EQ(onednn.LayerNormGammaGrad(x, Tensor::Zeros(DType::kF32, Shape({2, 4}))).at(3), 0.0);
  EXPECT_THROW(onednn.LayerNorm(x, beta, Tensor::FromF32({2}, {0, 0})), Error);
}

// gelu is oneDNN's eltwise_gelu_tanh (its own tanh). In the negative tail
// 1 + tanh(u) cancels, so f32 keeps an absolute, not a relative, accuracy
// there: the tolerance is 16 ulps of |x| + |want| (and of (1 + |x|) |dy|
// for the derivative, whose terms grow with x).
TEST(OneDnnKernelsTest, GeluMatchesReference) {
  std::mt19937 rng(11);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  const Tensor x = RandomScaled(Shape({33, 17}), rng, 6.0f);
  const Tensor dy = Random(Shape({33, 17}), rng);
  const Tensor y = onednn.Gelu(x);
  const Tensor want = reference.Gelu(F64(x));
  const Tensor dx = onednn.GeluBackward(x, dy);
  const Tensor want_dx = reference.GeluBackward(F64(x), F64(dy));
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    EXPECT_NEAR(y.at(i), want.at(i),
                16 * kF32Epsilon * (std::fabs(x.at(i)) + std::fabs(want.at(i))))
        << "gelu of " << x.at(i);
    EXPECT_NEAR(dx.at(i), want_dx.at(i),
                16 * kF32Epsilon * (1 + std::fabs(x.at(i))) * std::fabs(dy.at(i)))
        << "gelu_backward at " << x.at(i);
  }
  EXPECT_EQ(onednn.Gelu(Tensor::FromF32({1}, {0.0f})).at(0), 0.0);
  EXPECT_NEAR(onednn.Gelu(Tensor::FromF32({1}, {1.0f})).at(0), 0.8411919906082768, 2e-7);
}

// c * x rounds once: exact where c is a float (0.125), within an ulp of the
// f64 product otherwise (oneDNN multiplies by float(c)).
TEST(OneDnnKernelsTest, ScaleMatchesReference) {
  std::mt19937 rng(12);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  const Tensor x = Random(Shape({7, 9}), rng);
  ExpectExact(onednn.Scale(x, 0.125), reference.Scale(F64(x), 0.125), "scale by 1/8");
  ExpectExact(onednn.Scale(x, -3.0), reference.Scale(F64(x), -3.0), "scale by -3");
  ExpectClose(onednn.Scale(x, 0.1), reference.Scale(F64(x), 0.1), 2 * kF32Epsilon, "scale by 0.1");
  // Two constants, two cached primitives.
  EXPECT_EQ(onednn.Scale(Tensor::FromF32({1}, {2.0f}), 0.5).at(0), 1.0);
  EXPECT_EQ(onednn.Scale(Tensor::FromF32({1}, {2.0f}), 0.25).at(0), 0.5);
}

TEST(OneDnnKernelsTest, CopiesMatchReferenceExactly) {
  std::mt19937 rng(13);
  OneDnnKernels onednn;
  ReferenceKernels reference;
  const Tensor x2 = Random(Shape({6, 8}), rng);
  const Tensor x3 = Random(Shape({3, 5, 7}), rng);
  ExpectExact(onednn.Transpose(x2), reference.Transpose(F64(x2)), "transpose rank 2");
  ExpectExact(onednn.Transpose(x3), reference.Transpose(F64(x3)), "transpose rank 3");
  // Whole tiles and partial ones on both axes, and sizes the threads split.
  for (const Shape& s : {Shape({16, 32}), Shape({37, 45}), Shape({3, 130, 67}),
                         Shape({2, 200, 90}), Shape({129, 512}), Shape({16, 64, 32})}) {
    const Tensor t = Random(s, rng);
    ExpectExact(onednn.Transpose(t), reference.Transpose(F64(t)), "transpose " + s.ToString());
  }
  // B = 2, S = 3, H = 4, Dh = 2.
  const Tensor heads = onednn.SplitHeads(x2, 2, 4);
  EXPECT_EQ(heads.shape(), Shape({8, 3, 2}));
  ExpectExact(heads, reference.SplitHeads(F64(x2), 2, 4), "split_heads");
  ExpectExact(onednn.MergeHeads(heads, 2), reference.MergeHeads(F64(heads), 2), "merge_heads");
  EXPECT_TRUE(BitwiseEqual(onednn.MergeHeads(heads, 2), x2));
  EXPECT_THROW(onednn.SplitHeads(x2, 4, 4), Error);
}

TEST(OneDnnKernelsTest, TransformerKernelsRepeatBitForBit) {
  std::mt19937 rng(14);
  OneDnnKernels onednn;
  OneDnnKernels other;
  const Tensor x = RandomScaled(Shape({32, 64, 64}), rng, 4.0f);
  const Tensor dy = Random(Shape({32, 64, 64}), rng);
  const Tensor gamma = Random(Shape({64}), rng);
  const Tensor y = onednn.Softmax(x);
  EXPECT_TRUE(BitwiseEqual(y, onednn.Softmax(x)));
  EXPECT_TRUE(BitwiseEqual(y, other.Softmax(x)));
  const Tensor dx = onednn.SoftmaxBackward(y, dy);
  EXPECT_TRUE(BitwiseEqual(dx, other.SoftmaxBackward(y, dy)));
  EXPECT_TRUE(BitwiseEqual(onednn.Gelu(x), other.Gelu(x)));
  EXPECT_TRUE(BitwiseEqual(onednn.GeluBackward(x, dy), other.GeluBackward(x, dy)));
  EXPECT_TRUE(BitwiseEqual(onednn.LayerNormGammaGrad(x, dy), other.LayerNormGammaGrad(x, dy)));
  EXPECT_TRUE(
      BitwiseEqual(onednn.LayerNormBackward(x, gamma, dy), other.LayerNormBackward(x, gamma, dy)));
}

TEST(OneDnnKernelsTest, TransformerKernelsOnZeroElements) {
  OneDnnKernels onednn;
  const Tensor e = Tensor::Zeros(DType::kF32, Shape({0, 3}));
  const Tensor c = Tensor::FromF32({3}, {1, 1, 1});
  EXPECT_EQ(onednn.Softmax(e).shape(), Shape({0, 3}));
  EXPECT_EQ(onednn.SoftmaxBackward(e, e).shape(), Shape({0, 3}));
  EXPECT_EQ(onednn.Gelu(e).shape(), Shape({0, 3}));
  EXPECT_EQ(onednn.GeluBackward(e, e).shape(), Shape({0, 3}));
  EXPECT_EQ(onednn.Scale(e, 2.0).shape(), Shape({0, 3}));
  EXPECT_EQ(onednn.LayerNorm(e, c, c).shape(), Shape({0, 3}));
  EXPECT_EQ(onednn.LayerNormBackward(e, c, e).shape(), Shape({0, 3}));
  for (const Tensor& t : {onednn.SumLeading(e), onednn.LayerNormGammaGrad(e, e)}) {
    ASSERT_EQ(t.shape(), Shape({3}));
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(t.at(i), 0.0);
  }
  EXPECT_EQ(onednn.Transpose(e).shape(), Shape({3, 0}));
  EXPECT_EQ(onednn.Softmax(Tensor::Zeros(DType::kF32, Shape({2, 0}))).shape(), Shape({2, 0}));
}

TEST(OneDnnKernelsTest, SoftmaxScratchpadIsCounted) {
  std::mt19937 rng(15);
  const Tensor x = Random(Shape({16, 128}), rng);
  OneDnnKernels onednn;
  auto tracker = std::make_shared<MemoryTracker>();
  onednn.Bind(tracker);
  {
    const Tensor y = onednn.Softmax(x);
    EXPECT_EQ(tracker->live_bytes(), y.bytes());
    EXPECT_EQ(tracker->peak_bytes(), y.bytes() + tracker->peak_bytes(Category::kScratchpad));
  }
  EXPECT_EQ(tracker->live_bytes(), 0);
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

KernelOp TableKernelNamed(const std::string& name) {
  for (KernelOp op : TableKernels()) {
    if (TableKernel(op).name == name) return op;
  }
  ADD_FAILURE() << "no table kernel " << name;
  return KernelOp::kFirstTableKernel;
}

// The loop kernels split their rows (or elements, or runs) between OpenMP's
// threads at loop_kernels::ParallelMinElements() and above: each still gives
// the bits of its contract's serial walk, written out here, on shapes below
// and above the split, with odd extents so that the threads' shares differ.
TEST(OneDnnKernelsTest, LoopKernelsSplitBetweenThreadsKeepTheSerialBits) {
  std::mt19937 rng(31);
  OneDnnKernels onednn;
  for (const int64_t rows : {int64_t{3}, int64_t{9}, int64_t{15}, int64_t{517}}) {
    SCOPED_TRACE(StrCat(rows, " rows"));
    const int64_t c = 67;
    const Tensor x = Random(Shape({rows, c}), rng);
    const Tensor dy = Random(Shape({rows, c}), rng);
    const Tensor gamma = Random(Shape({c}), rng);
    const int64_t n = rows * c;
    // silu and its backward, element by element.
    const Tensor silu = onednn.Call(TableKernelNamed("silu"), {&x});
    const Tensor silu_bwd = onednn.Call(TableKernelNamed("silu_backward"), {&x, &dy});
    for (int64_t i = 0; i < n; ++i) {
      const float a = x.f32()[i];
      // The float32 table's exp (lane_math.h), the rest as written.
      const float s = 1.0f / (1.0f + lane_math::ExpF32(-a));
      ASSERT_EQ(silu.f32()[i], a * s) << "silu at " << i;
      ASSERT_EQ(silu_bwd.f32()[i], dy.f32()[i] * (s * (1.0f + a * (1.0f - s))))
          << "silu_backward at " << i;
    }
    // rms_norm's gamma gradient: every column's rows summed in order.
    const double eps = 1e-6;
    const Tensor dgamma =
        onednn.Call(TableKernelNamed("rms_norm_gamma_grad"), {&x, &dy}, {.scalar = eps});
    // Row r's 1 / sqrt(mean of squares + eps), the squares summed in order.
    auto rstd = [&](int64_t r) {
      const float* xr = x.f32() + r * c;
      float ss = 0;
      for (int64_t j = 0; j < c; ++j) ss += xr[j] * xr[j];
      return 1.0f / std::sqrt(ss / static_cast<float>(c) + static_cast<float>(eps));
    };
    std::vector<float> want(static_cast<size_t>(c), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * c;
      for (int64_t j = 0; j < c; ++j) want[j] += dy.f32()[r * c + j] * (xr[j] * rstd(r));
    }
    for (int64_t j = 0; j < c; ++j) ASSERT_EQ(dgamma.f32()[j], want[j]) << "column " << j;
    // rms_norm, row by row.
    const Tensor norm = onednn.Call(TableKernelNamed("rms_norm"), {&x, &gamma}, {.scalar = eps});
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * c;
      for (int64_t j = 0; j < c; ++j) {
        ASSERT_EQ(norm.f32()[r * c + j], (xr[j] * rstd(r)) * gamma.f32()[j]) << "row " << r;
      }
    }
    // rms_norm's backward, row by row: m = (sum_j g_j xhat_j) / C in order.
    const Tensor norm_bwd =
        onednn.Call(TableKernelNamed("rms_norm_backward"), {&x, &gamma, &dy}, {.scalar = eps});
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.f32() + r * c;
      const float* dyr = dy.f32() + r * c;
      const float rs = rstd(r);
      float sum = 0;
      for (int64_t j = 0; j < c; ++j) sum += (dyr[j] * gamma.f32()[j]) * (xr[j] * rs);
      const float m = sum / static_cast<float>(c);
      for (int64_t j = 0; j < c; ++j) {
        ASSERT_EQ(norm_bwd.f32()[r * c + j], rs * (dyr[j] * gamma.f32()[j] - (xr[j] * rs) * m))
            << "rms_norm_backward row " << r;
      }
    }
    // reshape: the elements in order.
    const Tensor flat = onednn.Call(TableKernelNamed("reshape"), {&x}, {.shape = Shape({n})});
    EXPECT_EQ(std::memcmp(flat.raw(), x.raw(), static_cast<size_t>(n) * sizeof(float)), 0);
  }
  // permute: every permutation of a rank-3 and a rank-4 tensor (with and
  // without trailing axes in place), each element where the index walk puts it.
  for (const Shape& shape : {Shape({5, 3, 7}), Shape({37, 31, 41}), Shape({3, 5, 7, 11})}) {
    const Tensor x = Random(shape, rng);
    const int r = shape.rank();
    std::vector<int64_t> perm(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) perm[i] = i;
    do {
      SCOPED_TRACE(StrCat("permute ", shape.ToString(), " by ", perm[0], perm[1], perm[2],
                          r > 3 ? std::to_string(perm[3]) : std::string()));
      const Tensor y = onednn.Call(TableKernelNamed("permute"), {&x}, {.perm = perm});
      std::vector<int64_t> in_stride(static_cast<size_t>(r), 1);
      for (int i = r - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * shape.dim(i + 1);
      std::vector<int64_t> index(static_cast<size_t>(r), 0);
      for (int64_t o = 0; o < y.num_elements(); ++o) {
        int64_t from = 0;
        for (int i = 0; i < r; ++i) from += index[i] * in_stride[static_cast<size_t>(perm[i])];
        ASSERT_EQ(y.f32()[o], x.f32()[from]) << "output element " << o;
        for (int i = r - 1; i >= 0; --i) {
          if (++index[i] < y.shape().dim(i)) break;
          index[i] = 0;
        }
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

// Every loop kernel that splits its work between OpenMP's threads gives the
// same bits on one thread as on three, on operands large enough to split
// (loop_kernels::ParallelMinElements()) with extents that split unevenly.
TEST(OneDnnKernelsTest, LoopKernelsGiveTheSameBitsOnOneThreadAsOnThree) {
  std::mt19937 rng(37);
  struct Case {
    std::string kernel;
    std::vector<Tensor> operands;
    KernelAttrs attrs;
  };
  const Shape image({6, 21, 19, 17});  // N, C, H, W: 40698 elements
  const Shape pooled({6, 21, 10, 9});  // max_pool2d k=3, stride 2, padding 1
  const Shape rows({613, 67});
  const Tensor x = Random(image, rng), dx = Random(image, rng);
  const Tensor c = Random(Shape({21}), rng), c2 = Random(Shape({21}), rng);
  const Tensor r = Random(rows, rng), dr = Random(rows, rng), g = Random(Shape({67}), rng);
  std::vector<int32_t> ids(613), targets(613), mask(613 * 67);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 7919) % 101);
    targets[i] = static_cast<int32_t>((i * 31) % 67);
  }
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 0 ? 1 : 0;
  const KernelAttrs pool{.int_a = 3, .int_b = 2, .int_c = 1};
  const std::vector<Case> cases = {
      {"silu", {r}, {}},
      {"silu_backward", {r, dr}, {}},
      {"gelu_erf", {r}, {}},
      {"gelu_erf_backward", {r, dr}, {}},
      {"rms_norm", {r, g}, {.scalar = 1e-6}},
      {"rms_norm_backward", {r, g, dr}, {.scalar = 1e-6}},
      {"rms_norm_gamma_grad", {r, dr}, {.scalar = 1e-6}},
      {"log_softmax", {r}, {}},
      {"log_softmax_backward", {r, dr}, {}},
      {"top_k_softmax", {r}, {.int_a = 2}},
      {"top_k_softmax_backward", {r, dr}, {}},
      {"masked_fill", {r, Tensor::FromI32(rows, mask)}, {.scalar = -1}},
      {"cross_entropy", {r, Tensor::FromI32(Shape({613}), targets)}, {}},
      {"gather_rows", {Random(Shape({101, 67}), rng), Tensor::FromI32(Shape({613}), ids)}, {}},
      {"reshape", {x}, {.shape = Shape({6 * 21, 19 * 17})}},
      {"permute", {x}, {.perm = {2, 0, 3, 1}}},
      {"permute", {x}, {.perm = {1, 0, 2, 3}}},
      {"batch_norm", {x, c, c2}, {.scalar = 1e-5}},
      {"batch_norm_backward", {x, c, dx}, {.scalar = 1e-5}},
      {"batch_norm_gamma_grad", {x, dx}, {.scalar = 1e-5}},
      {"channel_sum", {dx}, {}},
      {"max_pool2d", {x}, pool},
      {"max_pool2d_backward", {x, Random(pooled, rng)}, pool},
      {"global_avg_pool", {x}, {}},
      {"global_avg_pool_backward", {Random(Shape({6, 21}), rng)}, {.shape = image}},
  };
  OneDnnKernels onednn;
  const int threads = omp_get_max_threads();
  for (const Case& test : cases) {
    SCOPED_TRACE(test.kernel);
    std::vector<const Tensor*> operands;
    for (const Tensor& t : test.operands) operands.push_back(&t);
    omp_set_num_threads(3);
    const Tensor split = onednn.Call(TableKernelNamed(test.kernel), operands, test.attrs);
    omp_set_num_threads(1);
    const Tensor one = onednn.Call(TableKernelNamed(test.kernel), operands, test.attrs);
    omp_set_num_threads(threads);
    EXPECT_TRUE(BitwiseEqual(split, one));
  }
}

}  // namespace
}  // namespace remat
