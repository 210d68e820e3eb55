#include "engines/api/philox.h"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engines/api/lane_blocks.h"

namespace remat {
namespace {

// The constants of the paper (and of Random123's philox.h): the rounds'
// multipliers and the key's increments.
constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;

}  // namespace

PhiloxWords Philox4x32(PhiloxWords c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

PhiloxWords RandomBlock(int32_t seed, int64_t op_key, int64_t block) {
  const uint64_t b = static_cast<uint64_t>(block);
  const uint64_t key = static_cast<uint64_t>(op_key);
  return Philox4x32({static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32),
                     static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)},
                    {static_cast<uint32_t>(seed), 0});
}

namespace {

#if defined(__x86_64__)
// Eight blocks in AVX2 registers, one per 32-bit lane: lane j of c[w] is
// word w of block j.
struct Lanes8 {
  __m256i c[4];
};

// The eight blocks from block `first`, before the rounds.
__attribute__((target("avx2"), always_inline)) inline Lanes8 Counters8(int64_t first,
                                                                        uint64_t key) {
  alignas(32) uint32_t lo[8], hi[8];
  for (int j = 0; j < 8; ++j) {
    const uint64_t b = static_cast<uint64_t>(first + j);
    lo[j] = static_cast<uint32_t>(b);
    hi[j] = static_cast<uint32_t>(b >> 32);
  }
  return {{_mm256_load_si256(reinterpret_cast<const __m256i*>(lo)),
           _mm256_load_si256(reinterpret_cast<const __m256i*>(hi)),
           _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key))),
           _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key >> 32)))}};
}

// One Philox round on eight blocks under the round's key words k0, k1.
__attribute__((target("avx2"), always_inline)) inline void Round8(Lanes8& s, __m256i k0,
                                                                    __m256i k1) {
  const __m256i mul0 = _mm256_set1_epi32(static_cast<int>(kMul0));
  const __m256i mul1 = _mm256_set1_epi32(static_cast<int>(kMul1));
  // 32 x 32 -> 64-bit products of the even lanes, then of the odd lanes
  // moved down; each lane's low and high words put back in place.
  const __m256i e0 = _mm256_mul_epu32(s.c[0], mul0);
  const __m256i o0 = _mm256_mul_epu32(_mm256_srli_epi64(s.c[0], 32), mul0);
  const __m256i e1 = _mm256_mul_epu32(s.c[2], mul1);
  const __m256i o1 = _mm256_mul_epu32(_mm256_srli_epi64(s.c[2], 32), mul1);
  const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
  const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
  const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
  const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
  s.c[0] = _mm256_xor_si256(_mm256_xor_si256(hi1, s.c[1]), k0);
  s.c[1] = lo1;
  s.c[2] = _mm256_xor_si256(_mm256_xor_si256(hi0, s.c[3]), k1);
  s.c[3] = lo0;
}

// The eight blocks' words, block by block, at `words`: a 4 x 8 transpose
// in registers (words within a block's pair of 128-bit halves, then the
// halves), four stores.
__attribute__((target("avx2"), always_inline)) inline void Store8(const Lanes8& s,
                                                                    uint32_t* words) {
  const __m256i t0 = _mm256_unpacklo_epi32(s.c[0], s.c[1]);  // b0 b1 | b4 b5: words 0, 1
  const __m256i t1 = _mm256_unpackhi_epi32(s.c[0], s.c[1]);  // b2 b3 | b6 b7
  const __m256i t2 = _mm256_unpacklo_epi32(s.c[2], s.c[3]);  // b0 b1 | b4 b5: words 2, 3
  const __m256i t3 = _mm256_unpackhi_epi32(s.c[2], s.c[3]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2);  // b0 | b4
  const __m256i u1 = _mm256_unpackhi_epi64(t0, t2);  // b1 | b5
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3);  // b2 | b6
  const __m256i u3 = _mm256_unpackhi_epi64(t1, t3);  // b3 | b7
  __m256i* out = reinterpret_cast<__m256i*>(words);
  _mm256_storeu_si256(out, _mm256_permute2x128_si256(u0, u1, 0x20));      // b0 b1
  _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(u2, u3, 0x20));  // b2 b3
  _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(u0, u1, 0x31));  // b4 b5
  _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(u2, u3, 0x31));  // b6 b7
}

// Sixteen blocks a step, as two groups of eight whose rounds interleave
// (four groups need more than AVX2's sixteen registers and ran slower).
// 65536 elements took 0.93 ns each with one group and the words stored one
// by one, 0.64 ns with the transposing store (one thread; scalar
// RandomBlock: 3.5 ns). The build targets baseline x86-64 (no -march), so
// these functions are compiled for AVX2 and chosen at run time. Only
// integer arithmetic: the bits are RandomBlock's whatever the ISA.
__attribute__((target("avx2"))) void RandomBlocksAvx2(int32_t seed, int64_t op_key,
                                                      int64_t first, int64_t count,
                                                      uint32_t* words) {
  const uint64_t key = static_cast<uint64_t>(op_key);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    Lanes8 a = Counters8(first + i, key), b = Counters8(first + i + 8, key);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = 0;
    for (int round = 0; round < 10; ++round) {
      const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0));
      const __m256i key1 = _mm256_set1_epi32(static_cast<int>(k1));
      Round8(a, key0, key1);
      Round8(b, key0, key1);
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    Store8(a, words + 4 * i);
    Store8(b, words + 4 * (i + 8));
  }
  for (; i + 8 <= count; i += 8) {
    Lanes8 a = Counters8(first + i, key);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = 0;
    for (int round = 0; round < 10; ++round) {
      Round8(a, _mm256_set1_epi32(static_cast<int>(k0)), _mm256_set1_epi32(static_cast<int>(k1)));
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    Store8(a, words + 4 * i);
  }
  for (; i < count; ++i) {
    const PhiloxWords b = RandomBlock(seed, op_key, first + i);
    for (int k = 0; k < 4; ++k) words[4 * i + k] = b[k];
  }
}

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_epi32() as the masked
// form's pass-through operand, which -Wmaybe-uninitialized reports at every
// inlined call; no lane of it is read (the mask is all ones). Clang (the
// fuzzers' build) has no such warning.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Sixteen blocks in AVX-512 registers, one per 32-bit lane, as Lanes8.
struct Lanes16 {
  __m512i c[4];
};

__attribute__((target("avx512f"), always_inline)) inline Lanes16 Counters16(int64_t first,
                                                                             uint64_t key) {
  alignas(64) uint32_t lo[16], hi[16];
  for (int j = 0; j < 16; ++j) {
    const uint64_t b = static_cast<uint64_t>(first + j);
    lo[j] = static_cast<uint32_t>(b);
    hi[j] = static_cast<uint32_t>(b >> 32);
  }
  return {{_mm512_load_si512(lo), _mm512_load_si512(hi),
           _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(key))),
           _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(key >> 32)))}};
}

// Round8's arithmetic on sixteen lanes (a mask selects the odd lanes).
__attribute__((target("avx512f"), always_inline)) inline void Round16(Lanes16& s, __m512i k0,
                                                                       __m512i k1) {
  const __m512i mul0 = _mm512_set1_epi32(static_cast<int>(kMul0));
  const __m512i mul1 = _mm512_set1_epi32(static_cast<int>(kMul1));
  const __mmask16 odd = 0xAAAA;
  const __m512i e0 = _mm512_mul_epu32(s.c[0], mul0);
  const __m512i o0 = _mm512_mul_epu32(_mm512_srli_epi64(s.c[0], 32), mul0);
  const __m512i e1 = _mm512_mul_epu32(s.c[2], mul1);
  const __m512i o1 = _mm512_mul_epu32(_mm512_srli_epi64(s.c[2], 32), mul1);
  const __m512i lo0 = _mm512_mask_blend_epi32(odd, e0, _mm512_slli_epi64(o0, 32));
  const __m512i hi0 = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(e0, 32), o0);
  const __m512i lo1 = _mm512_mask_blend_epi32(odd, e1, _mm512_slli_epi64(o1, 32));
  const __m512i hi1 = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(e1, 32), o1);
  s.c[0] = _mm512_xor_si512(_mm512_xor_si512(hi1, s.c[1]), k0);
  s.c[1] = lo1;
  s.c[2] = _mm512_xor_si512(_mm512_xor_si512(hi0, s.c[3]), k1);
  s.c[3] = lo0;
}

// The sixteen blocks' words, block by block: Store8's unpacks leave block
// 4q + r in 128-bit lane q of u_r; two rounds of lane shuffles put blocks
// 4q .. 4q + 3 in register q.
__attribute__((target("avx512f"), always_inline)) inline void Store16(const Lanes16& s,
                                                                       uint32_t* words) {
  const __m512i t0 = _mm512_unpacklo_epi32(s.c[0], s.c[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(s.c[0], s.c[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(s.c[2], s.c[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(s.c[2], s.c[3]);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2);  // blocks 0, 4, 8, 12
  const __m512i u1 = _mm512_unpackhi_epi64(t0, t2);  // 1, 5, 9, 13
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3);  // 2, 6, 10, 14
  const __m512i u3 = _mm512_unpackhi_epi64(t1, t3);  // 3, 7, 11, 15
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44);  // 0, 4, 1, 5
  const __m512i v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);  // 2, 6, 3, 7
  const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE);  // 8, 12, 9, 13
  const __m512i v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);  // 10, 14, 11, 15
  _mm512_storeu_si512(words, _mm512_shuffle_i32x4(v0, v1, 0x88));       // 0 1 2 3
  _mm512_storeu_si512(words + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));  // 4 5 6 7
  _mm512_storeu_si512(words + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));  // 8 9 10 11
  _mm512_storeu_si512(words + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));  // 12 13 14 15
}

// Thirty-two blocks a step, two groups of sixteen interleaved, then what is
// left on RandomBlocksAvx2's path (AVX-512F has AVX2 beneath it).
__attribute__((target("avx512f"))) void RandomBlocksAvx512(int32_t seed, int64_t op_key,
                                                           int64_t first, int64_t count,
                                                           uint32_t* words) {
  const uint64_t key = static_cast<uint64_t>(op_key);
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    Lanes16 a = Counters16(first + i, key), b = Counters16(first + i + 16, key);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = 0;
    for (int round = 0; round < 10; ++round) {
      const __m512i key0 = _mm512_set1_epi32(static_cast<int>(k0));
      const __m512i key1 = _mm512_set1_epi32(static_cast<int>(k1));
      Round16(a, key0, key1);
      Round16(b, key0, key1);
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    Store16(a, words + 4 * i);
    Store16(b, words + 4 * (i + 16));
  }
  RandomBlocksAvx2(seed, op_key, first + i, count - i, words + 4 * i);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

void RandomBlocks(int32_t seed, int64_t op_key, int64_t first_block, int64_t count,
                  uint32_t* words) {
#if defined(__x86_64__)
  // The widest path the lanes use (lane_blocks.h: the CPU's, under
  // ONEDNN_MAX_CPU_ISA's cap); only integer arithmetic, so every path gives
  // RandomBlock's bits.
  switch (lane_blocks::BestLaneIsa()) {
    case lane_blocks::LaneIsa::kAvx512:
      return RandomBlocksAvx512(seed, op_key, first_block, count, words);
    case lane_blocks::LaneIsa::kAvx2:
      return RandomBlocksAvx2(seed, op_key, first_block, count, words);
    case lane_blocks::LaneIsa::kBaseline:
      break;
  }
#endif
  for (int64_t i = 0; i < count; ++i) {
    const PhiloxWords b = RandomBlock(seed, op_key, first_block + i);
    for (int k = 0; k < 4; ++k) words[4 * i + k] = b[k];
  }
}

uint32_t RandomBits(int32_t seed, int64_t op_key, int64_t index) {
  return RandomBlock(seed, op_key, index / 4)[index % 4];
}

uint32_t DropThreshold(double p) {
  // floor(p * 2^32), exact in double for the p's a program states.
  return static_cast<uint32_t>(std::floor(std::ldexp(p, 32)));
}

}  // namespace remat
