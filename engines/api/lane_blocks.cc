#include "engines/api/lane_blocks.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "engines/api/lane_math.h"

namespace remat {
namespace lane_blocks {
namespace {

// One loop per formula, inlined into a function per ISA: V's lanes at a
// time (V a vector of the ISA's register width, lane_math.h), the tail one
// lane at a time by the same template. Elementwise, so in-place use is
// safe: each chunk is loaded before it is stored.
template <typename V, typename F>
__attribute__((always_inline)) inline void Unary(const float* x, float* out, int64_t n, F f) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V v;
    std::memcpy(&v, x + i, sizeof v);
    const V y = f(v);
    std::memcpy(out + i, &y, sizeof y);
  }
  for (; i < n; ++i) out[i] = f(x[i]);
}
template <typename V, typename F>
__attribute__((always_inline)) inline void Binary(const float* x, const float* dy, float* out,
                                                  int64_t n, F f) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V v, g;
    std::memcpy(&v, x + i, sizeof v);
    std::memcpy(&g, dy + i, sizeof g);
    const V y = f(v, g);
    std::memcpy(out + i, &y, sizeof y);
  }
  for (; i < n; ++i) out[i] = f(x[i], dy[i]);
}

// Whether every |x[i]| is at most `most` (a NaN is not): the largest of the
// magnitudes' bits (a NaN's are above every number's), V's lanes at a time.
template <typename V>
__attribute__((always_inline)) inline bool AllWithin(const float* x, int64_t n, float most) {
  using U = typename lane_math::LaneInts<V>::U;
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  const uint32_t limit = std::bit_cast<uint32_t>(most);
  U widest = U{} & 0u;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    U b;
    std::memcpy(&b, x + i, sizeof b);
    b &= 0x7fffffffu;
    widest = widest > b ? widest : b;
  }
  uint32_t most_bits = 0;
  for (int64_t k = 0; k < kLanes; ++k) most_bits = std::max<uint32_t>(most_bits, widest[k]);
  for (; i < n; ++i) most_bits = std::max(most_bits, std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu);
  return most_bits <= limit;
}

// sin and cos: W's lanes where the whole block is in their range (the
// common case), else every element by the scalar function that falls back
// to libm outside it; the two agree bit for bit inside it.
template <typename V, typename W, typename Lanes, typename Scalar>
__attribute__((always_inline)) inline void UnarySinCos(const float* x, float* out, int64_t n,
                                                       Lanes lanes, Scalar scalar) {
  if (AllWithin<V>(x, n, lane_math::kSinCosLanesMax)) return Unary<W>(x, out, n, lanes);
  for (int64_t i = 0; i < n; ++i) out[i] = scalar(x[i]);
}
template <typename V, typename W, typename Lanes, typename Scalar>
__attribute__((always_inline)) inline void BinarySinCos(const float* x, const float* dy,
                                                        float* out, int64_t n, Lanes lanes,
                                                        Scalar scalar) {
  if (AllWithin<V>(x, n, lane_math::kSinCosLanesMax)) return Binary<W>(x, dy, out, n, lanes);
  for (int64_t i = 0; i < n; ++i) out[i] = scalar(x[i], dy[i]);
}

// A sum in ExpShiftedSum's order (lane_blocks.h) with V's lanes: kRegs
// registers of partial sums, register r's lane l the partial r * kLanes +
// l; lanes(at) gives the terms at..at + kLanes - 1 as a V, one(at) the
// term at in the tail.
template <typename V, typename Lanes, typename One>
__attribute__((always_inline)) inline float InPartialSums(int64_t n, Lanes lanes, One one) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  constexpr int64_t kRegs = kExpSumPartials / kLanes;
  static_assert(kRegs * kLanes == kExpSumPartials);
  V acc[kRegs];
  for (V& a : acc) a = lane_math::Splat<V>(0.0f);
  int64_t i = 0;
  for (; i + kExpSumPartials <= n; i += kExpSumPartials) {
    for (int64_t r = 0; r < kRegs; ++r) acc[r] += lanes(i + r * kLanes);
  }
  float sum = 0.0f;
  for (int64_t r = 0; r < kRegs; ++r) {
    for (int64_t l = 0; l < kLanes; ++l) sum += acc[r][l];
  }
  for (; i < n; ++i) sum += one(i);
  return sum;
}

template <typename V>
__attribute__((always_inline)) inline float ExpShiftedSumOf(const float* x, float shift,
                                                            float* exps, int64_t n) {
  return InPartialSums<V>(
      n,
      [=](int64_t at) __attribute__((always_inline)) {
        V v;
        std::memcpy(&v, x + at, sizeof v);
        const V e = lane_math::ExpLanes(v - shift);
        if (exps != nullptr) std::memcpy(exps + at, &e, sizeof e);
        return e;
      },
      [=](int64_t at) __attribute__((always_inline)) {
        const float e = lane_math::ExpLanes(x[at] - shift);
        if (exps != nullptr) exps[at] = e;
        return e;
      });
}

// MaxNumber: kExpSumPartials partial maxima, each a lane (x > m ? x : m:
// a NaN compares false and is never taken), folded the same way.
template <typename V>
__attribute__((always_inline)) inline float MaxNumberOf(const float* x, int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(float);
  constexpr int64_t kRegs = kExpSumPartials / kLanes;
  static_assert(kRegs * kLanes == kExpSumPartials);
  const float lowest = -std::numeric_limits<float>::infinity();
  V acc[kRegs];
  for (V& m : acc) m = lane_math::Splat<V>(lowest);
  int64_t i = 0;
  for (; i + kExpSumPartials <= n; i += kExpSumPartials) {
    for (int64_t r = 0; r < kRegs; ++r) {
      V v;
      std::memcpy(&v, x + i + r * kLanes, sizeof v);
      acc[r] = v > acc[r] ? v : acc[r];
    }
  }
  float most = lowest;
  for (int64_t r = 0; r < kRegs; ++r) {
    for (int64_t l = 0; l < kLanes; ++l) most = acc[r][l] > most ? acc[r][l] : most;
  }
  for (; i < n; ++i) most = x[i] > most ? x[i] : most;
  return most;
}

// SoftmaxRow (lane_blocks.h): one dispatch a row, and the division in V's
// lanes.
template <typename V>
__attribute__((always_inline)) inline void SoftmaxRowOf(const float* x, float* y, int64_t n) {
  const float m = MaxNumberOf<V>(x, n);
  const float s = ExpShiftedSumOf<V>(x, m, y, n);
  if (s != s) {
    std::fill(y, y + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  Unary<V>(y, y, n, [s](auto e) __attribute__((always_inline)) { return e / s; });
}

// DotSum's order (lane_blocks.h): each product rounded apart from its add
// (no contraction), summed as ExpShiftedSumOf's terms.
template <typename V>
__attribute__((always_inline)) inline float DotSumOf(const float* a, const float* b, int64_t n) {
  return InPartialSums<V>(
      n,
      [=](int64_t at) __attribute__((always_inline)) {
        V va, vb;
        std::memcpy(&va, a + at, sizeof va);
        std::memcpy(&vb, b + at, sizeof vb);
        return va * vb;
      },
      [=](int64_t at) __attribute__((always_inline)) { return a[at] * b[at]; });
}

// SoftmaxBackwardRow (lane_blocks.h).
template <typename V>
__attribute__((always_inline)) inline void SoftmaxBackwardRowOf(const float* y, const float* dy,
                                                                float* dx, int64_t n) {
  const float d = DotSumOf<V>(dy, y, n);
  Binary<V>(y, dy, dx, n, [d](auto yv, auto g) __attribute__((always_inline)) {
    return yv * (g - d);
  });
}

// clang-format off
#define REMAT_LANE_BLOCKS(suffix, attr, V, W)                                                  \
  attr void Exp##suffix(const float* x, float* out, int64_t n) {                              \
    Unary<V>(x, out, n, [](auto v) __attribute__((always_inline)) {                           \
      return lane_math::ExpLanes(v);                                                          \
    });                                                                                       \
  }                                                                                           \
  attr void Silu##suffix(const float* x, float* out, int64_t n) {                             \
    Unary<V>(x, out, n, [](auto v) __attribute__((always_inline)) {                           \
      return lane_math::Silu(v);                                                              \
    });                                                                                       \
  }                                                                                           \
  attr void SiluBackward##suffix(const float* x, const float* dy, float* out, int64_t n) {    \
    Binary<V>(x, dy, out, n, [](auto v, auto g) __attribute__((always_inline)) {              \
      return lane_math::SiluBackward(v, g);                                                   \
    });                                                                                       \
  }                                                                                           \
  attr float ExpShiftedSum##suffix(const float* x, float shift, float* exps, int64_t n) {      \
    return ExpShiftedSumOf<V>(x, shift, exps, n);                                             \
  }                                                                                           \
  attr float MaxNumber##suffix(const float* x, int64_t n) {                                   \
    return MaxNumberOf<V>(x, n);                                                              \
  }                                                                                           \
  attr void SoftmaxRow##suffix(const float* x, float* y, int64_t n) {                        \
    SoftmaxRowOf<V>(x, y, n);                                                                 \
  }                                                                                           \
  attr void SoftmaxBackwardRow##suffix(const float* y, const float* dy, float* dx,            \
                                       int64_t n) {                                           \
    SoftmaxBackwardRowOf<V>(y, dy, dx, n);                                                    \
  }                                                                                           \
  attr float DotSum##suffix(const float* a, const float* b, int64_t n) {                      \
    return DotSumOf<V>(a, b, n);                                                              \
  }                                                                                           \
  attr void Sin##suffix(const float* x, float* out, int64_t n) {                              \
    UnarySinCos<V, W>(x, out, n, [](auto v) __attribute__((always_inline)) {                  \
      return lane_math::SinLanes(v);                                                          \
    }, lane_math::Sin);                                                                       \
  }                                                                                           \
  attr void Cos##suffix(const float* x, float* out, int64_t n) {                              \
    UnarySinCos<V, W>(x, out, n, [](auto v) __attribute__((always_inline)) {                  \
      return lane_math::CosLanes(v);                                                          \
    }, lane_math::Cos);                                                                       \
  }                                                                                           \
  attr void SinBackward##suffix(const float* x, const float* dy, float* out, int64_t n) {     \
    BinarySinCos<V, W>(x, dy, out, n, [](auto v, auto g) __attribute__((always_inline)) {     \
      return lane_math::SinBackwardLanes(v, g);                                               \
    }, lane_math::SinBackward);                                                               \
  }                                                                                           \
  attr void CosBackward##suffix(const float* x, const float* dy, float* out, int64_t n) {     \
    BinarySinCos<V, W>(x, dy, out, n, [](auto v, auto g) __attribute__((always_inline)) {     \
      return lane_math::CosBackwardLanes(v, g);                                               \
    }, lane_math::CosBackward);                                                               \
  }
// clang-format on

// V: a register of floats; W: as many floats as a register holds doubles
// (sin and cos work in double lanes).
REMAT_LANE_BLOCKS(Baseline, , lane_math::Float4, lane_math::Float2)
REMAT_LANE_BLOCKS(Avx2, __attribute__((target("avx2"))), lane_math::Float8, lane_math::Float4)
REMAT_LANE_BLOCKS(Avx512, __attribute__((target("avx512f"))), lane_math::Float16,
                  lane_math::Float8)
#undef REMAT_LANE_BLOCKS

}  // namespace

const char* LaneIsaName(LaneIsa isa) {
  switch (isa) {
    case LaneIsa::kBaseline:
      return "baseline";
    case LaneIsa::kAvx2:
      return "avx2";
    case LaneIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::vector<LaneIsa> AvailableLaneIsas() {
  std::vector<LaneIsa> out = {LaneIsa::kBaseline};
  if (__builtin_cpu_supports("avx2")) out.push_back(LaneIsa::kAvx2);
  if (__builtin_cpu_supports("avx512f")) out.push_back(LaneIsa::kAvx512);
  return out;
}

LaneIsa CappedLaneIsa(const std::vector<LaneIsa>& available, const char* cap) {
  LaneIsa most = LaneIsa::kAvx512;
  if (cap != nullptr) {
    std::string name(cap);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "sse41" || name == "avx") {
      most = LaneIsa::kBaseline;
    } else if (name.rfind("avx2", 0) == 0) {
      most = LaneIsa::kAvx2;
    }
  }
  LaneIsa best = LaneIsa::kBaseline;
  for (LaneIsa isa : available) {
    if (static_cast<int>(isa) <= static_cast<int>(most)) best = std::max(best, isa);
  }
  return best;
}

LaneIsa BestLaneIsa() {
  static const LaneIsa best = [] {
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (cap == nullptr) cap = std::getenv("DNNL_MAX_CPU_ISA");  // oneDNN's older name
    return CappedLaneIsa(AvailableLaneIsas(), cap);
  }();
  return best;
}

#define REMAT_LANE_DISPATCH(name, ...)    \
  switch (isa) {                          \
    case LaneIsa::kAvx512:                \
      return name##Avx512(__VA_ARGS__);   \
    case LaneIsa::kAvx2:                  \
      return name##Avx2(__VA_ARGS__);     \
    case LaneIsa::kBaseline:              \
      return name##Baseline(__VA_ARGS__); \
  }

void Exp(LaneIsa isa, const float* x, float* out, int64_t n) { REMAT_LANE_DISPATCH(Exp, x, out, n) }
void Silu(LaneIsa isa, const float* x, float* out, int64_t n) {
  REMAT_LANE_DISPATCH(Silu, x, out, n)
}
void SiluBackward(LaneIsa isa, const float* x, const float* dy, float* out, int64_t n) {
  REMAT_LANE_DISPATCH(SiluBackward, x, dy, out, n)
}
float ExpShiftedSum(LaneIsa isa, const float* x, float shift, float* exps, int64_t n) {
  REMAT_LANE_DISPATCH(ExpShiftedSum, x, shift, exps, n)
  return 0.0f;  // not reached: every LaneIsa is a case
}
float MaxNumber(LaneIsa isa, const float* x, int64_t n) {
  REMAT_LANE_DISPATCH(MaxNumber, x, n)
  return 0.0f;  // not reached: every LaneIsa is a case
}
void SoftmaxRow(LaneIsa isa, const float* x, float* y, int64_t n) {
  REMAT_LANE_DISPATCH(SoftmaxRow, x, y, n)
}
void SoftmaxBackwardRow(LaneIsa isa, const float* y, const float* dy, float* dx, int64_t n) {
  REMAT_LANE_DISPATCH(SoftmaxBackwardRow, y, dy, dx, n)
}
float DotSum(LaneIsa isa, const float* a, const float* b, int64_t n) {
  REMAT_LANE_DISPATCH(DotSum, a, b, n)
  return 0.0f;  // not reached: every LaneIsa is a case
}
void Sin(LaneIsa isa, const float* x, float* out, int64_t n) { REMAT_LANE_DISPATCH(Sin, x, out, n) }
void Cos(LaneIsa isa, const float* x, float* out, int64_t n) { REMAT_LANE_DISPATCH(Cos, x, out, n) }
void SinBackward(LaneIsa isa, const float* x, const float* dy, float* out, int64_t n) {
  REMAT_LANE_DISPATCH(SinBackward, x, dy, out, n)
}
void CosBackward(LaneIsa isa, const float* x, const float* dy, float* out, int64_t n) {
  REMAT_LANE_DISPATCH(CosBackward, x, dy, out, n)
}
#undef REMAT_LANE_DISPATCH

}  // namespace lane_blocks
}  // namespace remat
