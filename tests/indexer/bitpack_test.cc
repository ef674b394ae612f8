#include "indexer/index/bitpack.h"

#include <gtest/gtest.h>

#include <algorithm>
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
      ASSERT_EQ(
          UnpackBitsFast(reinterpret_cast<const uint8_t*>(packed.data()), n, bits, fast.data()),
          PackedBytes(n, bits));
      ASSERT_EQ(fast, values) << "fast, bits=" << int(bits) << " n=" << n;
    }
  }
}

// The fast unpacker (eight values at a time where the machine has SSSE3 and SSE4.1) against
// the reference one, for every width and every count up to past two full blocks: the groups
// of eight, the scalar rest, and the last groups whose 16-byte loads would end past the
// padding. The buffer is exactly the packed bytes and the padding, on the heap, so that a read
// past it fails under AddressSanitizer; the padding's bits are all set, so that one leaking
// into a value fails the comparison.
TEST(BitpackTest, FastUnpackingEqualsTheReferenceForEveryWidthAndCount) {
  std::mt19937 rng(7);
  for (uint8_t bits = 0; bits <= 32; ++bits) {
    const uint64_t limit = bits == 0 ? 0 : (uint64_t{1} << bits) - 1;
    for (size_t n = 0; n <= 260; ++n) {
      std::vector<uint32_t> values(n);
      for (size_t i = 0; i < n; ++i) {
        // The largest value now and then: every bit of the width is exercised.
        values[i] =
            i % 5 == 0 ? static_cast<uint32_t>(limit) : static_cast<uint32_t>(rng() & limit);
      }
      std::string packed;
      PackBits(values, bits, &packed);
      std::vector<uint8_t> buffer(packed.size() + kUnpackPadding, 0xFF);
      std::copy(packed.begin(), packed.end(), buffer.begin());
      std::vector<uint32_t> reference(n + 1, 99), fast(n + 1, 99);
      UnpackBits(buffer.data(), n, bits, reference.data());
      ASSERT_EQ(UnpackBitsFast(buffer.data(), n, bits, fast.data()), PackedBytes(n, bits));
      ASSERT_EQ(fast, reference) << "bits=" << int(bits) << " n=" << n;
      ASSERT_EQ(fast[n], 99u) << "wrote past n, bits=" << int(bits) << " n=" << n;
      ASSERT_TRUE(std::equal(values.begin(), values.end(), fast.begin()));
    }
  }
}

TEST(BitpackTest, PForRoundTripsAndIsSmallerWithOutliers) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    const size_t n = 1 + rng() % 300;
    std::vector<uint32_t> values(n);
    for (uint32_t& v : values) {
      v = rng() % 8;                                   // mostly small
      if (rng() % 20 == 0) v = rng() >> (rng() % 32);  // a few outliers of any size
    }
    std::string packed;
    const uint8_t descriptor = PackPFor(values, &packed);
    EXPECT_LE(packed.size(), PackedBytes(n, BitsNeeded(values)) + 2);
    const size_t size = packed.size();
    packed.append(kUnpackPadding, '\0');
    std::vector<uint32_t> out(n), checked(n);
    ASSERT_EQ(
        UnpackPFor(reinterpret_cast<const uint8_t*>(packed.data()), n, descriptor, out.data()),
        size);
    ASSERT_EQ(out, values);
    for (size_t i = 0; i < n; ++i) {  // one value at a time, as a cursor reads a frequency
      ASSERT_EQ(PForAt(reinterpret_cast<const uint8_t*>(packed.data()), n, descriptor, i),
                values[i])
          << "i=" << i << " n=" << n;
    }
    size_t consumed = 0;
    const auto* begin = reinterpret_cast<const uint8_t*>(packed.data());
    ASSERT_TRUE(UnpackPForChecked(begin, begin + size, n, descriptor, checked.data(), &consumed));
    ASSERT_EQ(consumed, size);
    ASSERT_EQ(checked, values);
    if (size > 0) {  // one byte short is caught, not read past
      EXPECT_FALSE(
          UnpackPForChecked(begin, begin + size - 1, n, descriptor, checked.data(), &consumed));
    }
  }
  // One outlier among small gaps: exceptions beat widening every value.
  std::vector<uint32_t> gaps(128, 1);
  gaps[77] = 1 << 20;
  std::string pfor;
  EXPECT_NE(PackPFor(gaps, &pfor) & kPForExceptions, 0);
  EXPECT_LT(pfor.size(), PackedBytes(128, 21) / 4);
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
