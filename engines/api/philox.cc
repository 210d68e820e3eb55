#include "engines/api/philox.h"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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
// Eight blocks a step, one per 32-bit lane: lane j of c0..c3 is word 0..3
// of block first + j. The build targets baseline x86-64 (no -march), so
// this one function is compiled for AVX2 and chosen at run time. Only
// integer arithmetic: the bits are RandomBlock's whatever the ISA.
__attribute__((target("avx2"))) void RandomBlocksAvx2(int32_t seed, int64_t op_key,
                                                      int64_t first, int64_t count,
                                                      uint32_t* words) {
  const __m256i mul0 = _mm256_set1_epi32(static_cast<int>(kMul0));
  const __m256i mul1 = _mm256_set1_epi32(static_cast<int>(kMul1));
  const uint64_t key = static_cast<uint64_t>(op_key);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    alignas(32) uint32_t lo[8], hi[8];
    for (int j = 0; j < 8; ++j) {
      const uint64_t b = static_cast<uint64_t>(first + i + j);
      lo[j] = static_cast<uint32_t>(b);
      hi[j] = static_cast<uint32_t>(b >> 32);
    }
    __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
    __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
    __m256i c2 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key)));
    __m256i c3 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(key >> 32)));
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = 0;
    for (int round = 0; round < 10; ++round) {
      // 32 x 32 -> 64-bit products of the even lanes, then of the odd
      // lanes moved down; each lane's low and high words put back in place.
      const __m256i e0 = _mm256_mul_epu32(c0, mul0);
      const __m256i o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), mul0);
      const __m256i e1 = _mm256_mul_epu32(c2, mul1);
      const __m256i o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), mul1);
      const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
      const __m256i n0 = _mm256_xor_si256(
          _mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
      const __m256i n2 = _mm256_xor_si256(
          _mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
      c0 = n0;
      c1 = lo1;
      c2 = n2;
      c3 = lo0;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    alignas(32) uint32_t w[4][8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[0]), c0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[1]), c1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[2]), c2);
    _mm256_store_si256(reinterpret_cast<__m256i*>(w[3]), c3);
    for (int j = 0; j < 8; ++j) {
      for (int k = 0; k < 4; ++k) words[4 * (i + j) + k] = w[k][j];
    }
  }
  for (; i < count; ++i) {
    const PhiloxWords b = RandomBlock(seed, op_key, first + i);
    for (int k = 0; k < 4; ++k) words[4 * i + k] = b[k];
  }
}
#endif

}  // namespace

void RandomBlocks(int32_t seed, int64_t op_key, int64_t first_block, int64_t count,
                  uint32_t* words) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) {
    RandomBlocksAvx2(seed, op_key, first_block, count, words);
    return;
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
