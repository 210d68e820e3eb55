#include "engines/api/philox.h"

#include <cmath>

namespace remat {

PhiloxWords Philox4x32(PhiloxWords c, std::array<uint32_t, 2> k) {
  // The constants of the paper (and of Random123's philox.h).
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
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

uint32_t RandomBits(int32_t seed, int64_t op_key, int64_t index) {
  return RandomBlock(seed, op_key, index / 4)[index % 4];
}

uint32_t DropThreshold(double p) {
  // floor(p * 2^32), exact in double for the p's a program states.
  return static_cast<uint32_t>(std::floor(std::ldexp(p, 32)));
}

}  // namespace remat
