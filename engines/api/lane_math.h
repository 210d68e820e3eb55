// Elementwise formulas that a scalar loop and a vector loop both evaluate,
// written once: each is a fixed sequence of IEEE-754 operations (no libm
// call, no FMA: the build has -ffp-contract=off), so a lane of any width
// gives the bits the scalar formula gives, on every x86-64 CPU; a NaN
// result is a NaN, but where two NaNs meet in a product the compiler's
// operand order picks whose sign and payload come out, so those bits are
// not the formula's.
// engines/api/lane_blocks.h runs them over blocks of floats in AVX-512, AVX2
// or SSE2 lanes.
#ifndef REMAT_ENGINES_API_LANE_MATH_H_
#define REMAT_ENGINES_API_LANE_MATH_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace remat {
namespace lane_math {

// Lanes: float (one lane), or a GCC vector of the width of one register:
// Float4 (SSE2's xmm), Float8 (AVX2's ymm), Float16 (AVX-512's zmm), whose
// operations are the scalar ones lane by lane. A vector wider than the
// function's target registers is lowered piece by piece, some operations
// one element at a time (a 16-float vector ran 3.8 ns an element in AVX2
// code against 0.54 in AVX-512's), so each path uses its register's width.
// The formulas below are templates over the lane type, so that a block's
// vector loop and its scalar tail are one definition. Comparisons give a
// bool for float and a lane mask for a vector; `?:` selects either way.
typedef float Float4 __attribute__((vector_size(16)));
typedef float Float8 __attribute__((vector_size(32)));
typedef float Float16 __attribute__((vector_size(64)));
// Two floats (the low half of an xmm), for SSE2's two double lanes.
typedef float Float2 __attribute__((vector_size(8)));

// The integer lanes beside F's: 32-bit words, as many as F has floats.
template <typename F>
struct LaneInts {
  typedef uint32_t U __attribute__((vector_size(sizeof(F))));
  typedef int32_t I __attribute__((vector_size(sizeof(F))));
};
template <>
struct LaneInts<float> {
  using U = uint32_t;
  using I = int32_t;
};

// The double lanes beside F's: as many doubles as F has floats (Float8's
// are AVX-512's zmm of eight doubles), with their 64-bit words.
template <typename F>
struct WideLanes {
  typedef double D __attribute__((vector_size(2 * sizeof(F))));
  typedef uint64_t U __attribute__((vector_size(2 * sizeof(F))));
};
template <>
struct WideLanes<float> {
  using D = double;
  using U = uint64_t;
};

// v's lanes converted to To's type (each IEEE-754's conversion: exact to
// double, rounded to nearest to float).
template <typename To, typename From>
__attribute__((always_inline)) inline To ConvertLanes(From v) {
  if constexpr (std::is_arithmetic_v<From>) {
    return static_cast<To>(v);
  } else {
    return __builtin_convertvector(v, To);
  }
}

// c in every lane.
template <typename F, typename C>
F Splat(C c) {
  return F{} + c;
}

// e^x in float32 lanes, within 0.99 ulp of the exact value for every float
// whose e^x is normal (all 2^32 inputs checked against double's exp by
// hand, in scalar code and in SSE2, AVX2 and AVX-512 lanes, all with the
// same bits; lane_blocks_test checks a stride of them on every path the
// CPU has), and: NaN for NaN (its
// payload carried through the arithmetic), +inf for x >= 89 (e^x
// overflows above 88.72), 0 for x <= -104 (e^x is below half the least
// subnormal), subnormal results in between. No float-to-int conversion
// and no branch but the clamps and the select below -104.
//
// x = n ln2 + r with n = round(x / ln2) (to nearest even, by adding and
// subtracting 1.5 * 2^23; n is then t's low mantissa bits) and |r| <=
// ln2 / 2, ln2 in two parts (Cody and Waite: the first has 9 significant
// bits, so n times it is exact); e^r by Cephes's degree-6 minimax
// polynomial, 1 + r + r^2 P(r); 2^n as two normal powers of two, 2^h
// 2^(n-h), h = n/2, so that n down to -150 (a subnormal result) needs no
// special case.
template <typename F>
__attribute__((always_inline)) inline F ExpLanes(F x) {
  using U = typename LaneInts<F>::U;
  using I = typename LaneInts<F>::I;
  const F lo = Splat<F>(-104.0f), hi = Splat<F>(89.0f);
  // Below lo the result is +0 (as at lo): those lanes compute from 0
  // instead, all their arithmetic normal, and are replaced by +0 at the
  // end. Computed from lo, their last product was subnormal, which x86
  // CPUs finish in microcode: gpt's causal masks (-1e9) made its softmax
  // 45% slower than oneDNN's (engine_loop --problem=gpt, "alone, in cache").
  const auto below = x < lo;  // false for NaN, which stays NaN
  F xc = below ? Splat<F>(0.0f) : x;
  xc = xc > hi ? hi : xc;
  const F shifter = Splat<F>(12582912.0f);  // 1.5 * 2^23
  const F t = xc * 1.44269504088896341f + shifter;
  const F n = t - shifter;
  const F r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  F p = Splat<F>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F er = (p * (r * r) + r) + 1.0f;
  // n's bits: t's less the shifter's (exact for |n| < 2^22; any bits for a
  // NaN, whose er is NaN whatever they scale it by).
  const I ni = std::bit_cast<I>(std::bit_cast<U>(t) - std::bit_cast<U>(shifter));
  const I h = ni / 2;
  const F s1 = std::bit_cast<F>(std::bit_cast<U>(h + 127) << 23);
  const F s2 = std::bit_cast<F>(std::bit_cast<U>(ni - h + 127) << 23);
  const F e = (er * s1) * s2;
  return below ? Splat<F>(0.0f) : e;
}

inline float ExpF32(float x) { return ExpLanes(x); }

// The tables' exp: ExpLanes in float32 lanes (oneDNN's table), the C
// library's in float64 (the reference table, which float32's error is
// measured against).
template <typename T>
__attribute__((always_inline)) inline T Exp(T x) {
  if constexpr (std::is_same_v<T, double>) {
    return std::exp(x);
  } else {
    return ExpLanes(x);
  }
}

// silu(x) = x s, s = 1 / (1 + e^-x).
template <typename T>
__attribute__((always_inline)) inline T Silu(T x) {
  const T one = Splat<T>(1.0f);
  const T s = one / (one + Exp(-x));
  return x * s;
}

// silu's backward: dx = dy (s (1 + x (1 - s))), s as in Silu.
template <typename T>
__attribute__((always_inline)) inline T SiluBackward(T x, T dy) {
  const T one = Splat<T>(1.0f);
  const T s = one / (one + Exp(-x));
  return dy * (s * (one + x * (one - s)));
}

// sin(x) (quarter_turns 0) or cos(x) = sin(x + pi/2) (quarter_turns 1) for
// |x| <= kSinCosLanesMax, evaluated in double and rounded once to float:
// within 0.5 ulp and a few hundredths of one (all such floats checked
// against double's sin and cos by hand; lane_blocks_test checks a stride of
// them), so the float result is one rounding, as libm's sinf is. Outside
// that range (and for inf and NaN) the result is not sin's: Sin and Cos
// below take libm's there.
//
// x = n pi/2 + r with n = round(x 2/pi) (to nearest even, by adding and
// subtracting 1.5 * 2^52; n's low bits are then t's) and |r| <= pi/4 (a
// hair more where x 2/pi rounds), pi/2 in two parts (Cody and Waite: the
// first has 33 significant bits, so n times it is exact for |n| < 2^20,
// and x less it is exact), the error of r some 1e-26 |n| against at least
// 1e-10 of |r| where it is not 0; sin r and cos r by their Taylor series
// to r^9 and r^10 (the first term left out is below 2.5e-9 of the result
// for |r| <= pi/4), whichever n's quadrant asks for, with its sign.
inline constexpr float kSinCosLanesMax = 1048576.0f;  // 2^20

template <typename F>
__attribute__((always_inline)) inline F SinCosLanes(F x, uint64_t quarter_turns) {
  using D = typename WideLanes<F>::D;
  using U = typename WideLanes<F>::U;
  const D xd = ConvertLanes<D>(x);
  const D shifter = Splat<D>(6755399441055744.0);  // 1.5 * 2^52
  const D t = xd * 0.63661977236758134308 + shifter;
  const D n = t - shifter;
  const D r = (xd - n * 1.57079632673412561417) - n * 6.07710050650619224932e-11;
  const D z = r * r;
  D s = Splat<D>(1.0 / 362880);
  s = s * z + -1.0 / 5040;
  s = s * z + 1.0 / 120;
  s = s * z + -1.0 / 6;
  s = s * z + 1.0;
  const D sin_r = r * s;  // a product, so that sin(-0) is -0
  D c = Splat<D>(-1.0 / 3628800);
  c = c * z + 1.0 / 40320;
  c = c * z + -1.0 / 720;
  c = c * z + 1.0 / 24;
  c = c * z + -0.5;
  const D cos_r = 1.0 + z * c;
  const U q = std::bit_cast<U>(t) + quarter_turns;  // n + quarter_turns, mod 4
  D v = (q & 1) != 0 ? cos_r : sin_r;
  v = (q & 2) != 0 ? -v : v;
  return ConvertLanes<F>(v);
}

// In float lanes, for |x| <= kSinCosLanesMax only.
template <typename F>
__attribute__((always_inline)) inline F SinLanes(F x) {
  return SinCosLanes(x, 0);
}
template <typename F>
__attribute__((always_inline)) inline F CosLanes(F x) {
  return SinCosLanes(x, 1);
}
// sin's backward dx = dy cos(x), cos's dx = -(dy sin(x)): the float
// derivative, then one float product.
template <typename F>
__attribute__((always_inline)) inline F SinBackwardLanes(F x, F dy) {
  return dy * CosLanes(x);
}
template <typename F>
__attribute__((always_inline)) inline F CosBackwardLanes(F x, F dy) {
  return -(dy * SinLanes(x));
}

// Every float: the lanes' formula where |x| <= kSinCosLanesMax, libm's
// sinf and cosf elsewhere (huge arguments, inf, NaN), so an element's
// result depends on its value alone, not on the path that computed it.
inline bool InSinCosLanesRange(float x) { return std::fabs(x) <= kSinCosLanesMax; }
inline float Sin(float x) { return InSinCosLanesRange(x) ? SinLanes(x) : std::sin(x); }
inline float Cos(float x) { return InSinCosLanesRange(x) ? CosLanes(x) : std::cos(x); }
inline float SinBackward(float x, float dy) { return dy * Cos(x); }
inline float CosBackward(float x, float dy) { return -(dy * Sin(x)); }

}  // namespace lane_math
}  // namespace remat

#endif  // REMAT_ENGINES_API_LANE_MATH_H_
