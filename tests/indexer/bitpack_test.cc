#include "indexer/index/bitpack.h"

#include <gtest/gtest.h>

#include <random>

namespace tweetsearch::index {
namespace {

TEST(BitpackTest, RoundTripsEveryWidth) {
  std::mt19937 rng(1);
  for (uint8_t bits = 0; bits <= 32; ++bits) {
    for (size_t n : {1u, 7u, 128u, 129u}) {
      std::vector<uint32_t> values(n);
      for (uint32_t& v : values) {
        v = bits == 0 ? 0 : static_cast<uint32_t>(rng() & ((uint64_t{1} << bits) - 1));
      }
      ASSERT_LE(BitsNeeded(values), bits);
      std::string packed;
      PackBits(values, bits, &packed);
      ASSERT_EQ(packed.size(), PackedBytes(n, bits));
      std::vector<uint32_t> out(n, 99);
      ASSERT_EQ(UnpackBits(reinterpret_cast<const uint8_t*>(packed.data()), n, bits, out.data()),
                packed.size());
      ASSERT_EQ(out, values) << "bits=" << int(bits) << " n=" << n;
      packed.append(kUnpackPadding, '\xFF');  // padding content must not leak into values
      std::vector<uint32_t> fast(n, 99);
      ASSERT_EQ(UnpackBitsFast(reinterpret_cast<const uint8_t*>(packed.data()), n, bits,
                               fast.data()),
                PackedBytes(n, bits));
      ASSERT_EQ(fast, values) << "fast, bits=" << int(bits) << " n=" << n;
    }
  }
}

TEST(BitpackTest, GapsToValuesMatchesTheScalarDefinition) {
  std::mt19937 rng(2);
  for (size_t n : {0u, 1u, 3u, 4u, 5u, 127u, 128u}) {
    for (uint32_t start : {0u, 1u, 1000u}) {
      std::vector<uint32_t> gaps(n);
      for (uint32_t& g : gaps) g = rng() % 50;
      std::vector<uint32_t> expected(n);
      uint32_t next = start;
      for (size_t i = 0; i < n; ++i) {
        expected[i] = next + gaps[i];
        next = expected[i] + 1;
      }
      GapsToValues(gaps.data(), n, start);
      EXPECT_EQ(gaps, expected) << "n=" << n << " start=" << start;
    }
  }
}

}  // namespace
}  // namespace tweetsearch::index
