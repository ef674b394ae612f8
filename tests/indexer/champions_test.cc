#include "indexer/index/champions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "indexer/index/sealed_segment.h"
#include "indexer/query/scoring.h"
#include "tests/testing/pareto.h"

namespace tweetsearch::index {
namespace {

bool Beats(const ImpactPoint& q, const ImpactPoint& p) {
  return q.tf >= p.tf && q.length <= p.length && q.likes >= p.likes;
}

TEST(ChampionsTest, SkylineKeepsExactlyThePointsNothingBeats) {
  std::mt19937 rng(3);
  std::vector<ImpactPoint> points;
  for (int i = 0; i < 2000; ++i) {
    points.push_back({testing::ParetoLikes(rng), static_cast<uint16_t>(1 + rng() % 6),
                      static_cast<uint16_t>(1 + rng() % 40)});
  }
  const std::vector<ImpactPoint> sky = Skyline(points);
  ASSERT_FALSE(sky.empty());
  for (const ImpactPoint& p : points) {  // every point is covered by one kept
    EXPECT_TRUE(
        std::any_of(sky.begin(), sky.end(), [&](const ImpactPoint& q) { return Beats(q, p); }));
  }
  for (size_t i = 0; i < sky.size(); ++i) {  // and no kept point covers another
    for (size_t j = 0; j < sky.size(); ++j) {
      if (i != j) {
        EXPECT_FALSE(Beats(sky[j], sky[i])) << i << " " << j;
      }
    }
  }
}

// A list of `n` postings over `docs` tweets with random lengths, likes and frequencies.
struct List {
  std::vector<uint16_t> lengths;
  std::vector<uint32_t> likes;
  std::vector<DocId> docs;
  std::vector<uint32_t> tfs;
};
List RandomList(std::mt19937& rng, uint32_t num_docs, uint32_t n) {
  List l;
  for (uint32_t d = 0; d < num_docs; ++d) {
    l.lengths.push_back(static_cast<uint16_t>(1 + rng() % 300));  // past the 256 table
    l.likes.push_back(testing::ParetoLikes(rng));
  }
  std::vector<DocId> all(num_docs);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  l.docs.assign(all.begin(), all.begin() + n);
  std::sort(l.docs.begin(), l.docs.end());
  for (uint32_t i = 0; i < n; ++i) l.tfs.push_back(rng() % 5 ? 1 : 1 + rng() % 12);
  return l;
}

TEST(ChampionsTest, TheRestsSkylineBoundsEveryOtherPostingUnderAnyWeights) {
  std::mt19937 rng(5);
  const List l = RandomList(rng, 30000, 9000);
  const Champions c = SelectChampions(l.docs, l.tfs, l.lengths, l.likes, 20.0);
  ASSERT_EQ(c.docs.size(), c.tfs.size());
  ASSERT_GT(c.docs.size(), kMaxChampions / 2);
  ASSERT_LE(c.docs.size(), kMaxChampions);
  ASSERT_TRUE(std::is_sorted(c.docs.begin(), c.docs.end()));
  for (size_t i = 0; i < c.docs.size(); ++i) {
    const auto at = std::lower_bound(l.docs.begin(), l.docs.end(), c.docs[i]);
    ASSERT_TRUE(at != l.docs.end() && *at == c.docs[i]);
    EXPECT_EQ(c.tfs[i], l.tfs[static_cast<size_t>(at - l.docs.begin())]);
  }
  ASSERT_FALSE(c.rest.empty());
  // Under weights the choice never saw, the best remaining posting scores at most the best
  // point, and the best posting of all is a champion when the weights are the choice's.
  for (int trial = 0; trial < 50; ++trial) {
    query::ScoringParams p;
    p.k1 = 0.5 + (rng() % 100) / 50.0;
    p.b = (rng() % 100) / 100.0;
    p.popularity_weight = (rng() % 100) / 25.0;
    const double idf = 0.1 + (rng() % 100) / 10.0;
    const double avg = 5 + rng() % 50;
    auto score = [&](uint32_t tf, uint32_t length, uint32_t likes) {
      return idf * query::TfPart(p, tf, length, avg) +
             p.popularity_weight * query::Popularity(p, likes);
    };
    double rest = -1, best_point = -1;
    for (size_t i = 0; i < l.docs.size(); ++i) {
      if (std::binary_search(c.docs.begin(), c.docs.end(), l.docs[i])) continue;
      rest = std::max(rest, score(l.tfs[i], l.lengths[l.docs[i]], l.likes[l.docs[i]]));
    }
    for (const ImpactPoint& q : c.rest)
      best_point = std::max(best_point, score(q.tf, q.length, q.likes));
    EXPECT_LE(rest, best_point * (1 + 1e-12)) << "trial " << trial;
  }
}

TEST(ChampionsTest, ShortListsGetNoneAndAListOfOnlyChampionsHasNoRest) {
  std::mt19937 rng(7);
  const List few = RandomList(rng, 1000, 7);
  EXPECT_TRUE(SelectChampions(few.docs, few.tfs, few.lengths, few.likes, 10).docs.empty());
  // 64 postings: 8 champions, and whatever is left is bounded.
  const List some = RandomList(rng, 1000, 64);
  const Champions c = SelectChampions(some.docs, some.tfs, some.lengths, some.likes, 10);
  EXPECT_GE(c.docs.size(), 2u);
  EXPECT_EQ(c.rest.empty(), c.docs.size() == some.docs.size());
}

TEST(ChampionsTest, RecordsRoundTripAndDamagedOnesAreRejected) {
  std::mt19937 rng(11);
  const List l = RandomList(rng, 5000, 2001);  // an odd count of champions pads the tfs
  Champions c = SelectChampions(l.docs, l.tfs, l.lengths, l.likes, 12);
  if (c.docs.size() % 2 == 0) {
    c.docs.pop_back();
    c.tfs.pop_back();
    c.lengths.pop_back();
    c.bands.pop_back();
  }
  ASSERT_EQ(c.lengths.size(), c.docs.size());
  ASSERT_EQ(c.bands.size(), c.docs.size());
  std::string bytes;
  AppendChampions(c, &bytes);
  auto read = [&](const std::string& b, uint32_t num_docs, Champions* out) {
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    return ReadChampions(p, p + b.size(), num_docs, out);
  };
  Champions back;
  ASSERT_TRUE(read(bytes, 5000, &back));
  EXPECT_EQ(back.docs, c.docs);
  EXPECT_EQ(back.tfs, c.tfs);
  EXPECT_EQ(back.lengths, c.lengths);
  EXPECT_EQ(back.bands, c.bands);
  ASSERT_EQ(back.rest.size(), c.rest.size());
  for (size_t i = 0; i < c.rest.size(); ++i) {
    EXPECT_EQ(back.rest[i].likes, c.rest[i].likes);
    EXPECT_EQ(back.rest[i].tf, c.rest[i].tf);
    EXPECT_EQ(back.rest[i].length, c.rest[i].length);
  }
  EXPECT_FALSE(read(bytes.substr(0, bytes.size() - 1), 5000, &back));  // truncated
  EXPECT_FALSE(read(bytes, c.docs.back(), &back));                     // DocId out of range
  std::string unordered = bytes;
  std::swap_ranges(unordered.begin() + 8, unordered.begin() + 12, unordered.begin() + 12);
  EXPECT_FALSE(read(unordered, 5000, &back));  // DocIds not ascending
  std::string huge = bytes;
  huge[0] = '\xff';
  huge[1] = '\xff';
  EXPECT_FALSE(read(huge, 5000, &back));  // a count out of range
  std::string bad_band = bytes;
  const size_t bands_at = 8 + c.docs.size() * 4 + (c.docs.size() * 2 + 3) / 4 * 4 + c.docs.size();
  bad_band[bands_at] = static_cast<char>(kLikesBands);
  EXPECT_FALSE(read(bad_band, 5000, &back));  // a likes band out of range
  // A record written before the lengths and bands were kept reads without them.
  Champions old = c;
  old.lengths.clear();
  old.bands.clear();
  std::string old_bytes;
  AppendChampions(old, &old_bytes);
  EXPECT_EQ(old_bytes.size() + (c.docs.size() * 2 + 3) / 4 * 4, bytes.size());
  ASSERT_TRUE(read(old_bytes, 5000, &back));
  EXPECT_EQ(back.docs, c.docs);
  EXPECT_TRUE(back.lengths.empty());
  EXPECT_TRUE(back.bands.empty());
  EXPECT_EQ(back.rest.size(), c.rest.size());
}

TEST(ChampionsTest, SealedListsCarryTheirChampionsAndVerify) {
  std::mt19937 rng(13);
  SealedSegmentBuilder builder;
  const std::vector<uint32_t> zero = {0}, twice = {0, 3};
  for (uint32_t i = 0; i < 6000; ++i) {
    const uint32_t doc =
        builder.AddDoc({TweetId{i + 1}, 0, 1, 0, static_cast<uint16_t>(2 + rng() % 30),
                        testing::ParetoLikes(rng)});
    builder.AddPosting("common", doc, i % 3 == 0 ? twice : zero);
    if (i % 10 == 0) builder.AddPosting("rare", doc, zero);
  }
  auto segment = builder.Build();
  ASSERT_TRUE(segment->VerifyAll().ok());
  Champions c;
  auto common = segment->OpenTerm("common", segment->VisibleDocs());
  ASSERT_TRUE(common->champions(&c));
  EXPECT_EQ(c.docs.size(), std::min<size_t>(kMaxChampions, 6000 / 8));
  ASSERT_EQ(c.lengths.size(), c.docs.size());
  ASSERT_EQ(c.bands.size(), c.docs.size());
  for (size_t i = 0; i < c.docs.size(); ++i) {
    common->Advance(c.docs[i]);
    ASSERT_EQ(common->doc(), c.docs[i]);
    EXPECT_EQ(common->freq(), c.tfs[i]);
    EXPECT_EQ(c.lengths[i], segment->columns().length(c.docs[i]));
    EXPECT_EQ(c.bands[i], LikesBand(segment->columns().BaseLikes(c.docs[i])));
  }
  EXPECT_FALSE(segment->OpenTerm("rare", segment->VisibleDocs())->champions(&c));  // 600
}

}  // namespace
}  // namespace tweetsearch::index
