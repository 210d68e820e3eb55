// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011), the counter-based generator of cuRAND and of PyTorch's CUDA
// dropout: four 32-bit words that are a pure function of a 128-bit counter
// and a 64-bit key. Random ops (dropout) draw their bits from it as a
// function of (seed, the op's key, the element index), so recomputation
// reproduces the forward pass's bits (CONTRACT.md, randomness).
#ifndef REMAT_ENGINES_API_PHILOX_H_
#define REMAT_ENGINES_API_PHILOX_H_

#include <array>
#include <cstdint>

namespace remat {

using PhiloxWords = std::array<uint32_t, 4>;

// Ten rounds of Philox4x32 on `counter` under `key`.
PhiloxWords Philox4x32(PhiloxWords counter, std::array<uint32_t, 2> key);

// The 32 random bits of element `index` of random op `op_key` under `seed`:
// word index % 4 of Philox4x32(counter {index / 4 (low, high word),
// op_key (low, high word)}, key {seed, 0}).
uint32_t RandomBits(int32_t seed, int64_t op_key, int64_t index);
// The bits of elements 4 * block .. 4 * block + 3 at once (what kernels
// loop over; RandomBits is word index % 4 of block index / 4).
PhiloxWords RandomBlock(int32_t seed, int64_t op_key, int64_t block);
// Blocks first_block .. first_block + count - 1 at once: words[4 * i + w]
// is RandomBlock(seed, op_key, first_block + i)[w]. The same bits as
// RandomBlock on every CPU; eight blocks at a time in AVX2 registers where
// the CPU has AVX2 (a kernel's inner loop: dropout's masks).
void RandomBlocks(int32_t seed, int64_t op_key, int64_t first_block, int64_t count,
                  uint32_t* words);

// Dropout's rule on those bits: element kept when bits >= DropThreshold(p),
// that is with probability 1 - p (to within 2^-32). p in [0, 1).
uint32_t DropThreshold(double p);

}  // namespace remat

#endif  // REMAT_ENGINES_API_PHILOX_H_
