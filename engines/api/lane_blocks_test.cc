#include "engines/api/lane_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "engines/api/lane_math.h"

namespace remat {
namespace {

using lane_blocks::LaneIsa;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kLeastSubnormal = 1.401298464324817e-45;  // 2^-149
constexpr double kLeastNormal = 1.1754943508222875e-38;    // 2^-126

// Every 65537th bit pattern (65,536 floats of every exponent and sign, NaNs
// included), and values where exp's branches and ranges meet.
std::vector<float> Inputs() {
  std::vector<float> out;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65537) {
    out.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  }
  // clang-format off
  const float edges[] = {
      0.0f, -0.0f, 1.0f, -1.0f, 0.34657359f, -0.34657359f, 88.72f, 88.7228f, 88.73f, 89.0f,
      89.5f, -87.33f, -87.34f, -100.0f, -103.97f, -104.0f, -104.5f, 1e-30f, -1e-30f, 1e-45f,
      kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
      std::numeric_limits<float>::lowest()};
  // clang-format on
  out.insert(out.end(), std::begin(edges), std::end(edges));
  return out;
}

// The bits, every NaN as one: where two NaNs meet in a product, which one
// comes out (its sign and payload) is the compiler's operand order's, not
// the formula's (lane_math.h).
uint32_t Bits(float v) { return std::isnan(v) ? 0x7fc00000u : std::bit_cast<uint32_t>(v); }

// Within 0.99 ulp where e^x is a normal float; within a unit of the least
// subnormal below; +inf above; NaN for NaN.
TEST(LaneMathTest, ExpF32IsWithinOneUlpOfTheExactValue) {
  double worst_ulp = 0;
  for (float x : Inputs()) {
    const float y = lane_math::ExpF32(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(y)) << x;
      continue;
    }
    const double e = std::exp(static_cast<double>(x));
    if (e > std::numeric_limits<float>::max()) {
      EXPECT_EQ(y, kInf) << std::hexfloat << x;
    } else if (e < kLeastNormal) {
      EXPECT_LE(std::fabs(y - e), kLeastSubnormal) << std::hexfloat << x << " -> " << y;
    } else {
      const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(e)) - 23);
      const double err = std::fabs(y - e) / ulp;
      worst_ulp = std::max(worst_ulp, err);
      EXPECT_LE(err, 0.99) << std::hexfloat << x << " -> " << y << " against " << e;
    }
  }
  EXPECT_GT(worst_ulp, 0);  // the stride reached rounded values
  EXPECT_EQ(lane_math::ExpF32(0.0f), 1.0f);
  EXPECT_EQ(lane_math::ExpF32(-0.0f), 1.0f);
  EXPECT_EQ(lane_math::ExpF32(-kInf), 0.0f);
  EXPECT_EQ(lane_math::ExpF32(kInf), kInf);
}

// Each path the CPU has gives the scalar formula's bits (any NaN for a
// NaN), at every length
// (whole vectors and every tail), out of place and in place.
TEST(LaneBlocksTest, EveryPathGivesTheScalarBits) {
  const std::vector<float> x = Inputs();
  std::vector<float> dy(x.size());
  for (size_t i = 0; i < x.size(); ++i) dy[i] = x[(i * 7919) % x.size()];
  const int64_t n = static_cast<int64_t>(x.size());
  ASSERT_FALSE(lane_blocks::AvailableLaneIsas().empty());
  EXPECT_EQ(lane_blocks::AvailableLaneIsas().front(), LaneIsa::kBaseline);
  for (LaneIsa isa : lane_blocks::AvailableLaneIsas()) {
    SCOPED_TRACE(lane_blocks::LaneIsaName(isa));
    for (int64_t len :
         {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{33}, n}) {
      std::vector<float> e(static_cast<size_t>(len)), s(e.size()), b(e.size());
      lane_blocks::Exp(isa, x.data(), e.data(), len);
      lane_blocks::Silu(isa, x.data(), s.data(), len);
      lane_blocks::SiluBackward(isa, x.data(), dy.data(), b.data(), len);
      for (int64_t i = 0; i < len; ++i) {
        const size_t k = static_cast<size_t>(i);
        ASSERT_EQ(Bits(e[k]), Bits(lane_math::ExpF32(x[k]))) << "exp of " << x[k] << " at " << i;
        ASSERT_EQ(Bits(s[k]), Bits(lane_math::Silu(x[k]))) << "silu of " << x[k] << " at " << i;
        ASSERT_EQ(Bits(b[k]), Bits(lane_math::SiluBackward(x[k], dy[k])))
            << "silu's backward of " << x[k] << ", " << dy[k] << " at " << i;
      }
    }
    std::vector<float> in_place = x;
    lane_blocks::Silu(isa, in_place.data(), in_place.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      ASSERT_EQ(Bits(in_place[k]), Bits(lane_math::Silu(x[k]))) << "in place, at " << i;
    }
  }
}

// sin, cos and their backwards on each path: the scalar functions' bits,
// over inputs all in the lanes' range (the vector path), and over every
// magnitude (blocks with huge, infinite or NaN inputs, which go element by
// element to libm's where out of range), at every length, out of place and
// in place.
TEST(LaneBlocksTest, SinAndCosOnEveryPathGiveTheScalarBits) {
  const std::vector<float> all = Inputs();
  std::vector<float> in_range;
  for (float v : all) {
    if (lane_math::InSinCosLanesRange(v)) in_range.push_back(v);
  }
  ASSERT_GT(in_range.size(), all.size() / 2);
  const std::vector<float>* const sets[] = {&in_range, &all};
  for (const std::vector<float>* xs : sets) {
    const std::vector<float>& x = *xs;
    std::vector<float> dy(x.size());
    for (size_t i = 0; i < x.size(); ++i) dy[i] = x[(i * 7919) % x.size()];
    const int64_t n = static_cast<int64_t>(x.size());
    for (LaneIsa isa : lane_blocks::AvailableLaneIsas()) {
      SCOPED_TRACE(lane_blocks::LaneIsaName(isa));
      for (int64_t len : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, n}) {
        const size_t m = static_cast<size_t>(len);
        std::vector<float> s(m), c(m), sb(m), cb(m);
        lane_blocks::Sin(isa, x.data(), s.data(), len);
        lane_blocks::Cos(isa, x.data(), c.data(), len);
        lane_blocks::SinBackward(isa, x.data(), dy.data(), sb.data(), len);
        lane_blocks::CosBackward(isa, x.data(), dy.data(), cb.data(), len);
        for (size_t k = 0; k < m; ++k) {
          ASSERT_EQ(Bits(s[k]), Bits(lane_math::Sin(x[k]))) << "sin of " << x[k] << " at " << k;
          ASSERT_EQ(Bits(c[k]), Bits(lane_math::Cos(x[k]))) << "cos of " << x[k] << " at " << k;
          ASSERT_EQ(Bits(sb[k]), Bits(lane_math::SinBackward(x[k], dy[k])))
              << "sin's backward of " << x[k] << ", " << dy[k] << " at " << k;
          ASSERT_EQ(Bits(cb[k]), Bits(lane_math::CosBackward(x[k], dy[k])))
              << "cos's backward of " << x[k] << ", " << dy[k] << " at " << k;
        }
      }
      std::vector<float> in_place = x;
      lane_blocks::Sin(isa, in_place.data(), in_place.data(), n);
      for (size_t k = 0; k < x.size(); ++k) {
        ASSERT_EQ(Bits(in_place[k]), Bits(lane_math::Sin(x[k]))) << "in place, at " << k;
      }
    }
  }
}

// Within 0.53 ulp of double's sin and cos where the lanes compute them (all
// such floats were checked by hand: 0.5293 at worst), libm's sinf and cosf
// beyond; zeros keep their sign.
TEST(LaneMathTest, SinAndCosAreWithinHalfAnUlpAndAFewHundredths) {
  double worst = 0;
  for (float x : Inputs()) {
    const float s = lane_math::Sin(x), c = lane_math::Cos(x);
    if (!lane_math::InSinCosLanesRange(x)) {
      EXPECT_EQ(Bits(s), Bits(std::sin(x))) << std::hexfloat << x;
      EXPECT_EQ(Bits(c), Bits(std::cos(x))) << std::hexfloat << x;
      continue;
    }
    for (const auto& [got, exact] : {std::pair<float, double>{s, std::sin(double{x})},
                                     std::pair<float, double>{c, std::cos(double{x})}}) {
      const double magnitude = std::max(std::fabs(exact), kLeastNormal);
      const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(magnitude)) - 23);
      const double err = std::fabs(got - exact) / ulp;
      worst = std::max(worst, err);
      ASSERT_LE(err, 0.53) << std::hexfloat << x << " -> " << got << " against " << exact;
    }
  }
  EXPECT_GT(worst, 0.4);  // the stride reached values that round
  EXPECT_EQ(Bits(lane_math::Sin(-0.0f)), Bits(-0.0f));
  EXPECT_EQ(Bits(lane_math::Sin(0.0f)), Bits(0.0f));
  EXPECT_EQ(lane_math::Cos(-0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(lane_math::Sin(kInf)));
  EXPECT_TRUE(std::isnan(lane_math::Cos(-kInf)));
  EXPECT_TRUE(std::isnan(lane_math::Sin(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(lane_math::Sin(1e-30f), 1e-30f);
  EXPECT_EQ(lane_math::Sin(-2.5f), -lane_math::Sin(2.5f));
  EXPECT_EQ(lane_math::SinBackward(1.0f, 2.0f), 2.0f * lane_math::Cos(1.0f));
  EXPECT_EQ(lane_math::CosBackward(1.0f, 2.0f), -(2.0f * lane_math::Sin(1.0f)));
}

// term(0) + ... + term(n - 1) in ExpShiftedSum's stated order (lane_blocks.h),
// one term at a time: kExpSumPartials partials, then the tail.
template <typename Term>
float InStatedOrder(int64_t n, Term term) {
  constexpr int64_t kP = lane_blocks::kExpSumPartials;
  float partial[kP] = {};
  const int64_t whole = n - n % kP;
  for (int64_t j = 0; j < whole; ++j) partial[j % kP] += term(j);
  float sum = 0.0f;
  for (float p : partial) sum += p;
  for (int64_t j = whole; j < n; ++j) sum += term(j);
  return sum;
}

// A row's exps and their sum: on each path, ExpF32's bits for each term
// and the sum in the stated order (restated here one lane at a time), at
// every length around the partials' count, with and without the terms
// written; the sum within float's reach of the exact one.
TEST(LaneBlocksTest, ExpShiftedSumKeepsItsOrderOnEveryPath) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 37.0f - 9.0f;
  const float shift = 17.5f;
  constexpr int64_t kP = lane_blocks::kExpSumPartials;
  for (LaneIsa isa : lane_blocks::AvailableLaneIsas()) {
    SCOPED_TRACE(lane_blocks::LaneIsaName(isa));
    for (int64_t n : {int64_t{0}, int64_t{1}, kP - 1, kP, kP + 1, 2 * kP + 3, int64_t{1000}}) {
      const float expected =
          InStatedOrder(n, [&](int64_t j) { return lane_math::ExpF32(x[j] - shift); });
      std::vector<float> exps(static_cast<size_t>(n), -1.0f);
      const float with = lane_blocks::ExpShiftedSum(isa, x.data(), shift, exps.data(), n);
      const float without = lane_blocks::ExpShiftedSum(isa, x.data(), shift, nullptr, n);
      EXPECT_EQ(Bits(with), Bits(expected)) << n;
      EXPECT_EQ(Bits(without), Bits(expected)) << n;
      double exact = 0;
      for (int64_t j = 0; j < n; ++j) {
        const size_t k = static_cast<size_t>(j);
        ASSERT_EQ(Bits(exps[k]), Bits(lane_math::ExpF32(x[k] - shift))) << j;
        exact += std::exp(static_cast<double>(x[k] - shift));
      }
      EXPECT_NEAR(with, exact, 1e-6 * exact) << n;
    }
  }
}

// The largest number: NaNs never chosen, -inf for none, on every path and
// at every length around the partials' count, with the largest anywhere.
TEST(LaneBlocksTest, MaxNumberSkipsNaNsOnEveryPath) {
  constexpr int64_t kP = lane_blocks::kExpSumPartials;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (LaneIsa isa : lane_blocks::AvailableLaneIsas()) {
    SCOPED_TRACE(lane_blocks::LaneIsaName(isa));
    EXPECT_EQ(lane_blocks::MaxNumber(isa, nullptr, 0), -inf);
    for (int64_t n : {int64_t{1}, kP - 1, kP, kP + 1, 2 * kP + 3, int64_t{100}}) {
      for (int64_t at = 0; at < n; ++at) {
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) x[j] = static_cast<float>((j * 37) % 11) - 20.0f;
        x[at] = 3.5f;
        if (n > 1) x[(at + 1) % n] = nan;
        EXPECT_EQ(lane_blocks::MaxNumber(isa, x.data(), n), 3.5f)
            << n << " " << at;
      }
      std::vector<float> none(static_cast<size_t>(n), nan);
      EXPECT_EQ(lane_blocks::MaxNumber(isa, none.data(), n), -inf) << n;
      none[n - 1] = inf;
      EXPECT_EQ(lane_blocks::MaxNumber(isa, none.data(), n), inf) << n;
    }
  }
}

// softmax's rows: on every path, the stated formula restated one element
// at a time (ExpF32, the partial sums' order, one division each), a NaN
// row for a NaN or +inf; the backward's likewise, in place over dy too.
TEST(LaneBlocksTest, SoftmaxRowsKeepTheirFormulaOnEveryPath) {
  constexpr int64_t kP = lane_blocks::kExpSumPartials;
  for (LaneIsa isa : lane_blocks::AvailableLaneIsas()) {
    SCOPED_TRACE(lane_blocks::LaneIsaName(isa));
    for (int64_t n : {int64_t{1}, kP - 1, kP, kP + 1, 2 * kP + 3, int64_t{64}, int64_t{100}}) {
      std::vector<float> x(static_cast<size_t>(n)), g(x.size());
      for (int64_t j = 0; j < n; ++j) {
        x[j] = static_cast<float>((j * 7919) % 61) / 7.0f - 4.0f;
        g[j] = static_cast<float>((j * 104729) % 53) / 11.0f - 2.0f;
      }
      if (n > 2) x[2] = -1e9f;  // a masked score: exactly 0
      float m = -std::numeric_limits<float>::infinity();
      for (float v : x) m = v > m ? v : m;
      const float s = InStatedOrder(n, [&](int64_t j) { return lane_math::ExpF32(x[j] - m); });
      std::vector<float> y(x.size());
      lane_blocks::SoftmaxRow(isa, x.data(), y.data(), n);
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(Bits(y[j]), Bits(lane_math::ExpF32(x[j] - m) / s)) << n << " " << j;
      }
      if (n > 2) {
        EXPECT_EQ(Bits(y[2]), Bits(0.0f));
      }
      const float d = lane_blocks::DotSum(isa, g.data(), y.data(), n);
      std::vector<float> dx(x.size());
      lane_blocks::SoftmaxBackwardRow(isa, y.data(), g.data(), dx.data(), n);
      lane_blocks::SoftmaxBackwardRow(isa, y.data(), g.data(), g.data(), n);  // dx = dy
      for (int64_t j = 0; j < n; ++j) {
        const float expected = y[j] * (static_cast<float>((j * 104729) % 53) / 11.0f - 2.0f - d);
        ASSERT_EQ(Bits(dx[j]), Bits(expected)) << n << " " << j;
        ASSERT_EQ(Bits(g[j]), Bits(expected)) << n << " " << j;
      }
      for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity()}) {
        std::vector<float> xb = x;
        xb[static_cast<size_t>(n / 2)] = bad;
        lane_blocks::SoftmaxRow(isa, xb.data(), y.data(), n);
        for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(std::isnan(y[j])) << n << " " << j;
      }
    }
  }
}

// A dot product: on each path the stated order (restated here one lane at
// a time), at every length around the partials' count; within float's
// reach of the exact sum.
TEST(LaneBlocksTest, DotSumKeepsItsOrderOnEveryPath) {
  std::vector<float> a(1000), b(1000);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>((i * 7919) % 1000) / 37.0f - 13.0f;
    b[i] = static_cast<float>((i * 104729) % 997) / 101.0f - 4.0f;
  }
  constexpr int64_t kP = lane_blocks::kExpSumPartials;
  for (LaneIsa isa : lane_blocks::AvailableLaneIsas()) {
    SCOPED_TRACE(lane_blocks::LaneIsaName(isa));
    for (int64_t n : {int64_t{0}, int64_t{1}, kP - 1, kP, kP + 1, 2 * kP + 3, int64_t{1000}}) {
      const float expected = InStatedOrder(n, [&](int64_t j) {
        const float product = a[j] * b[j];
        return product;
      });
      const float got = lane_blocks::DotSum(isa, a.data(), b.data(), n);
      EXPECT_EQ(Bits(got), Bits(expected)) << n;
      double exact = 0, magnitude = 0;
      for (int64_t j = 0; j < n; ++j) {
        exact += static_cast<double>(a[j]) * b[j];
        magnitude += std::fabs(static_cast<double>(a[j]) * b[j]);
      }
      EXPECT_NEAR(got, exact, 1e-6 * magnitude + 1e-30) << n;
    }
  }
}

// ONEDNN_MAX_CPU_ISA caps our lanes as it caps oneDNN's kernels.
TEST(LaneBlocksTest, TheIsaCapCapsTheLanes) {
  const std::vector<LaneIsa> all = {LaneIsa::kBaseline, LaneIsa::kAvx2, LaneIsa::kAvx512};
  EXPECT_EQ(lane_blocks::CappedLaneIsa(all, nullptr), LaneIsa::kAvx512);
  EXPECT_EQ(lane_blocks::CappedLaneIsa(all, ""), LaneIsa::kAvx512);
  EXPECT_EQ(lane_blocks::CappedLaneIsa(all, "ALL"), LaneIsa::kAvx512);
  EXPECT_EQ(lane_blocks::CappedLaneIsa(all, "avx512_core_amx"), LaneIsa::kAvx512);
  EXPECT_EQ(lane_blocks::CappedLaneIsa(all, "AVX2"), LaneIsa::kAvx2);
  EXPECT_EQ(lane_blocks::CappedLaneIsa(all, "avx2_vnni"), LaneIsa::kAvx2);
  EXPECT_EQ(lane_blocks::CappedLaneIsa(all, "SSE41"), LaneIsa::kBaseline);
  EXPECT_EQ(lane_blocks::CappedLaneIsa(all, "AVX"), LaneIsa::kBaseline);
  // A CPU without AVX-512, uncapped or capped above what it has.
  const std::vector<LaneIsa> avx2 = {LaneIsa::kBaseline, LaneIsa::kAvx2};
  EXPECT_EQ(lane_blocks::CappedLaneIsa(avx2, nullptr), LaneIsa::kAvx2);
  EXPECT_EQ(lane_blocks::CappedLaneIsa(avx2, "AVX512_CORE"), LaneIsa::kAvx2);
  EXPECT_EQ(lane_blocks::CappedLaneIsa({LaneIsa::kBaseline}, "AVX2"), LaneIsa::kBaseline);
  // What the kernels use is one of the CPU's paths.
  const std::vector<LaneIsa> here = lane_blocks::AvailableLaneIsas();
  EXPECT_NE(std::find(here.begin(), here.end(), lane_blocks::BestLaneIsa()), here.end());
}

// The formulas are silu's: x / (1 + e^-x) and its derivative, to float's
// precision where they are well conditioned.
TEST(LaneMathTest, SiluAndItsBackwardAreSilus) {
  for (float x : {-20.0f, -3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 4.0f, 30.0f}) {
    const double xd = x, s = 1 / (1 + std::exp(-xd));
    EXPECT_NEAR(lane_math::Silu(x), xd * s, 4e-7 * std::max(1.0, std::fabs(xd * s))) << x;
    const double d = s * (1 + xd * (1 - s));
    EXPECT_NEAR(lane_math::SiluBackward(x, 2.0f), 2 * d, 8e-7 * std::max(1.0, std::fabs(d))) << x;
  }
  EXPECT_EQ(lane_math::Silu(kInf), kInf);
  EXPECT_TRUE(std::isnan(lane_math::Silu(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace remat
