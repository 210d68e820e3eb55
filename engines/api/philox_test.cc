#include "engines/api/philox.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace remat {
namespace {

// Random123's published known-answer vectors for Philox4x32-10 (its
// tests/kat_vectors; TensorFlow's and cuRAND's tests use the same).
TEST(PhiloxTest, KnownAnswers) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (PhiloxWords{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxWords{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxWords{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// Element i's bits are word i % 4 of block i / 4, and seed, key and index
// each change them.
TEST(PhiloxTest, BitsArePureFunctionsOfSeedKeyAndIndex) {
  for (int64_t i : {0, 1, 5, 1000003}) {
    EXPECT_EQ(RandomBits(3, 9, i), RandomBlock(3, 9, i / 4)[i % 4]);
    EXPECT_EQ(RandomBits(3, 9, i), RandomBits(3, 9, i));
    EXPECT_NE(RandomBits(3, 9, i), RandomBits(4, 9, i));
    EXPECT_NE(RandomBits(3, 9, i), RandomBits(3, 10, i));
    EXPECT_NE(RandomBits(3, 9, i), RandomBits(3, 9, i + 1));
  }
  // Keys past 32 bits and indices past 2^32 elements reach the counter.
  EXPECT_NE(RandomBits(3, int64_t{1} << 32, 0), RandomBits(3, 0, 0));
  EXPECT_NE(RandomBits(3, 0, int64_t{4} << 32), RandomBits(3, 0, 0));
}

// The batch is the blocks one by one, at every offset and length (the
// vector paths' steps of 16 and 32 blocks, their remainders in steps of 8,
// and the tail), past 2^32 blocks, and for
// keys and seeds of every sign.
TEST(PhiloxTest, RandomBlocksAreRandomBlockInOrder) {
  for (int64_t first : {int64_t{0}, int64_t{5}, (int64_t{1} << 32) - 3}) {
    for (int64_t count : {0, 1, 7, 8, 9, 16, 31, 32, 33, 47, 48, 64, 65, 100}) {
      for (auto [seed, key] : {std::pair<int32_t, int64_t>{3, 9}, {-7, int64_t{-1}},
                               {0, int64_t{1} << 40}}) {
        std::vector<uint32_t> words(static_cast<size_t>(4 * count) + 1, 0xdeadbeef);
        RandomBlocks(seed, key, first, count, words.data());
        for (int64_t i = 0; i < count; ++i) {
          const PhiloxWords want = RandomBlock(seed, key, first + i);
          for (int w = 0; w < 4; ++w) {
            ASSERT_EQ(words[static_cast<size_t>(4 * i + w)], want[w])
                << "first " << first << " count " << count << " block " << i << " word " << w;
          }
        }
        EXPECT_EQ(words.back(), 0xdeadbeef) << "wrote past its count";
      }
    }
  }
}

// The share kept is 1 - p to within sampling noise (n = 2^20: standard
// deviation under 0.0005).
TEST(PhiloxTest, DropThresholdKeepsOneMinusP) {
  for (double p : {0.0, 0.1, 0.5, 0.9}) {
    const uint32_t t = DropThreshold(p);
    int64_t kept = 0;
    const int64_t n = int64_t{1} << 20;
    for (int64_t i = 0; i < n; ++i) kept += RandomBits(11, 2, i) >= t;
    EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.003) << "p=" << p;
  }
  EXPECT_EQ(DropThreshold(0), 0u);  // p = 0 keeps every element
}

}  // namespace
}  // namespace remat
