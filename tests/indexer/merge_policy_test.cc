#include "indexer/index/merge_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace tweetsearch::index {
namespace {

MergePolicyOptions Options() {
  MergePolicyOptions o;
  o.merge_factor = 4;
  o.floor_docs = 100;
  o.max_segment_docs = 2000;
  return o;
}

std::vector<SegmentSize> Live(std::initializer_list<uint64_t> docs) {
  std::vector<SegmentSize> out;
  for (uint64_t d : docs) out.push_back({d, 0});
  return out;
}

TEST(MergePolicyTest, TiersGrowByTheMergeFactor) {
  const MergePolicyOptions o = Options();
  EXPECT_EQ(MergeTier(0, o), 0u);
  EXPECT_EQ(MergeTier(399, o), 0u);
  EXPECT_EQ(MergeTier(400, o), 1u);
  EXPECT_EQ(MergeTier(1599, o), 1u);
  EXPECT_EQ(MergeTier(1600, o), 2u);
}

TEST(MergePolicyTest, MergesTheOldestRunOfNeighboursOfOneTier) {
  const MergePolicyOptions o = Options();
  EXPECT_FALSE(PickMerge(Live({100, 100, 100}), o).has_value());
  std::optional<MergeChoice> c = PickMerge(Live({100, 100, 100, 100, 100}), o);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->begin, 0u);
  EXPECT_EQ(c->end, 4u);
  // A larger segment first: the run of small ones after it.
  c = PickMerge(Live({400, 100, 100, 100, 100}), o);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->begin, 1u);
  EXPECT_EQ(c->end, 5u);
  // Same tier but not neighbours: no merge (time order is kept).
  EXPECT_FALSE(PickMerge(Live({100, 100, 400, 100, 100}), o).has_value());
  // Four of tier 1 become one of tier 2.
  c = PickMerge(Live({400, 400, 400, 400, 100}), o);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->end, 4u);
}

TEST(MergePolicyTest, NeverMakesASegmentOverTheCap) {
  const MergePolicyOptions o = Options();
  EXPECT_FALSE(PickMerge(Live({1600, 1600, 1600, 1600}), o).has_value());
}

TEST(MergePolicyTest, RewritesTheSegmentWithTheMostDeletesPastTheLimit) {
  const MergePolicyOptions o = Options();
  std::vector<SegmentSize> s = {{1000, 100}, {1000, 300}, {1000, 250}};
  std::optional<MergeChoice> c = PickMerge(s, o);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->begin, 1u);
  EXPECT_EQ(c->end, 2u);
  s[1].deleted = 150;
  s[2].deleted = 150;
  EXPECT_FALSE(PickMerge(s, o).has_value());
}

TEST(MergePolicyTest, SegmentCountStaysLogarithmic) {
  // Simulate a long ingest: seal 100-doc segments, apply the policy until it rests.
  const MergePolicyOptions o = Options();
  std::vector<SegmentSize> segments;
  size_t most = 0;
  uint64_t written = 0;
  for (int seal = 0; seal < 2000; ++seal) {
    segments.push_back({100, 0});
    written += 100;
    while (std::optional<MergeChoice> c = PickMerge(segments, o)) {
      uint64_t docs = 0;
      for (size_t i = c->begin; i < c->end; ++i) docs += segments[i].docs - segments[i].deleted;
      written += docs;
      segments.erase(segments.begin() + c->begin, segments.begin() + c->end);
      segments.insert(segments.begin() + c->begin, SegmentSize{docs, 0});
    }
    most = std::max(most, segments.size());
  }
  // 200,000 docs: up to three per tier below the cap (tiers 0-2), plus capped segments of
  // 1,600 (four tier-2 segments would pass the cap of 2,000, so they stay).
  EXPECT_LE(most, 3u * 3u + 200'000u / 1600u + 1u);
  // Each document is written once per tier it passes: seal + 2 merges = 3.
  EXPECT_LE(written, 200'000u * 3u);
}

}  // namespace
}  // namespace tweetsearch::index
