#include "indexer/index/lead_points.h"

#include <gtest/gtest.h>

#include <random>

#include "indexer/index/sealed_segment.h"

namespace tweetsearch::index {
namespace {

TEST(LeadPointsTest, APointHoldsTheBandAndALowerBoundOfTheLength) {
  uint32_t last = 0;
  for (uint32_t length = 0; length < 400; ++length) {
    for (const uint32_t likes : {0u, 1u, 7u, 1000u, 65535u, 4000000000u}) {
      const uint8_t point = PackLeadPoint(length, likes);
      EXPECT_EQ(LeadPointBand(point), LikesBand(likes)) << length << " " << likes;
      EXPECT_LE(LeadPointLength(point), length);
      EXPECT_GE(LeadPointLength(point), last);  // buckets never fall as lengths grow
      if (length < 8) {
        EXPECT_EQ(LeadPointLength(point), length);
      }
    }
    last = LeadPointLength(PackLeadPoint(length, 0));
  }
  EXPECT_EQ(LeadPointLength(PackLeadPoint(9, 0)), 8u);
  EXPECT_EQ(LeadPointLength(PackLeadPoint(23, 0)), 20u);
  EXPECT_EQ(LeadPointLength(PackLeadPoint(1000, 0)), 32u);
}

TEST(LeadPointsTest, WordsAreTheMiddlingOnesNotAmongThePairs) {
  // 2,000,000 rows: at least 2,000,000 / 1024 = 1953 postings; "a" is a pair word.
  const std::vector<std::pair<uint32_t, std::string>> doc_freqs = {
      {90000, "a"}, {1953, "b"}, {1952, "c"}, {20000, "d"}, {10, "e"}};
  const std::vector<std::string> pairs = {"a"};
  EXPECT_EQ(LeadWords(2000000, doc_freqs, pairs), (std::vector<std::string>{"b", "d"}));
  // Small segments: at least kLeadPointsMinPostings.
  EXPECT_EQ(LeadWords(5000, {{{1023, "x"}, {1024, "y"}}}, {}), (std::vector<std::string>{"y"}));
}

// Every posting's point, in list order, against the columns the tweets were written with;
// a word not asked for has none.
TEST(LeadPointsTest, EachPostingsPointIsItsTweetsLengthAndBand) {
  std::mt19937 rng(7);
  SealedSegmentBuilder builder;
  constexpr uint32_t kDocs = 30000;
  std::vector<uint16_t> lengths;
  std::vector<uint32_t> likes;
  std::vector<DocId> holding;  // the DocIds holding "kilo", ascending
  for (uint32_t i = 0; i < kDocs; ++i) {
    lengths.push_back(static_cast<uint16_t>(rng() % 60));
    likes.push_back(rng() % 4 == 0 ? rng() % 100000 : rng() % 5);
    const DocId doc = builder.AddDoc({TweetId{kDocs - i}, 0, 1, 0, lengths.back(), likes.back()});
    const std::vector<uint32_t> at = {0};
    if (rng() % 7 == 0) {
      builder.AddPosting("kilo", doc, at);
      holding.push_back(doc);
    }
    if (rng() % 9 == 0) builder.AddPosting("lima", doc, at);
  }
  auto segment = builder.Build();
  const std::vector<std::string> words = {"kilo"};
  const auto points = BuildLeadPoints(*segment, segment->VisibleDocs(), words);
  ASSERT_NE(points, nullptr);
  EXPECT_TRUE(points->Of("lima").empty());
  const std::span<const uint8_t> kilo = points->Of("kilo");
  ASSERT_EQ(kilo.size(), holding.size());
  for (size_t i = 0; i < holding.size(); ++i) {
    const DocId d = holding[i];
    ASSERT_EQ(kilo[i], PackLeadPoint(lengths[d], likes[d])) << i;
  }
  EXPECT_GE(points->MemoryBytes(), holding.size());
}

}  // namespace
}  // namespace tweetsearch::index
