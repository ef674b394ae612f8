#include "indexer/index/length_classes.h"

#include <gtest/gtest.h>

#include <random>

#include "indexer/index/sealed_segment.h"

namespace tweetsearch::index {
namespace {

TEST(LengthClassesTest, ClassesFollowTheirLeastLengths) {
  for (uint32_t length = 0; length < 300; ++length) {
    const int c = LengthClasses::ClassOf(length);
    ASSERT_GE(c, 0);
    ASSERT_LT(c, LengthClasses::kClasses);
    EXPECT_GE(length, LengthClasses::kLeast[c]) << length;
    if (c + 1 < LengthClasses::kClasses) {
      EXPECT_LT(length, LengthClasses::kLeast[c + 1]) << length;
    }
  }
  EXPECT_EQ(LengthClasses::ClassOf(0), 0);
  EXPECT_EQ(LengthClasses::ClassOf(5), 0);
  EXPECT_EQ(LengthClasses::ClassOf(6), 1);
  EXPECT_EQ(LengthClasses::ClassOf(9), 3);
  EXPECT_EQ(LengthClasses::ClassOf(15), 6);
  EXPECT_EQ(LengthClasses::ClassOf(65535), 7);
}

// Every row of a segment whose row count is not a multiple of 64, against its length, for
// every class: a row is in AtMost(w, c) exactly when its length's class is at most c, and no
// row past the segment's end ever is.
TEST(LengthClassesTest, AtMostHoldsExactlyTheRowsNoLongerThanTheClass) {
  std::mt19937 rng(11);
  SealedSegmentBuilder builder;
  constexpr uint32_t kDocs = 5000 + 37;
  std::vector<uint16_t> lengths;
  for (uint32_t i = 0; i < kDocs; ++i) {
    lengths.push_back(static_cast<uint16_t>(rng() % 4 == 0 ? rng() % 400 : rng() % 24));
    const DocId doc = builder.AddDoc({TweetId{kDocs - i}, 0, 1, 0, lengths.back(), 3});
    builder.AddPosting("kilo", doc, std::vector<uint32_t>{0});
  }
  auto segment = builder.Build();
  const LengthClasses classes(segment->columns(), kDocs);
  EXPECT_EQ(classes.rows(), kDocs);
  EXPECT_GE(classes.MemoryBytes(), kDocs / 64 * 3 * sizeof(uint64_t));
  const size_t words = (kDocs + 63) / 64;
  for (size_t w = 0; w <= words; ++w) {  // one word past the end too
    for (int c = -1; c < LengthClasses::kClasses; ++c) {
      uint64_t expected = 0;
      for (DocId d = static_cast<DocId>(w * 64); d < kDocs && d < (w + 1) * 64; ++d) {
        if (LengthClasses::ClassOf(lengths[d]) <= c) expected |= uint64_t{1} << (d % 64);
      }
      ASSERT_EQ(classes.AtMost(w, c), expected) << "word " << w << " class " << c;
    }
  }
}

TEST(LengthClassesTest, ASealedSegmentBuildsThemWithItsDerivedStructures) {
  SealedSegmentBuilder builder;
  for (uint32_t i = 0; i < 100; ++i) {
    const DocId doc = builder.AddDoc({TweetId{100 - i}, 0, 1, 0, static_cast<uint16_t>(i % 20), 0});
    builder.AddPosting("kilo", doc, std::vector<uint32_t>{0});
  }
  auto segment = builder.Build();
  segment->BuildDerived();
  const LengthClasses* classes = segment->length_classes();
  ASSERT_NE(classes, nullptr);
  EXPECT_EQ(classes->rows(), 100u);
  // Rows 0-5, 20-25, 40-45 and 60-63 of the first 64 are no longer than 5 tokens.
  uint64_t short_rows = 0;
  for (DocId d = 0; d < 64; ++d) {
    if (d % 20 <= 5) short_rows |= uint64_t{1} << d;
  }
  EXPECT_EQ(classes->AtMost(0, 0), short_rows);
}

}  // namespace
}  // namespace tweetsearch::index
