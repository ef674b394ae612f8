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

}  // namespace
}  // namespace tweetsearch::index
