#include "indexer/query/searcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tweetsearch::query {
namespace {

using index::IndexDoc;

class SearcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    index::IndexOptions options;
    options.segment_max_docs = 3;
    index_ = *index::Index::Create(options);
  }
  void Add(TweetId id, std::string text, uint32_t likes = 0, int64_t created = 0) {
    ASSERT_TRUE(index_->Add(IndexDoc{id, 1, "u", std::move(text), created, "en", likes}).ok());
  }
  SearchResult Run(std::string_view q, SearchOptions options) {
    absl::StatusOr<Plan> plan = PlanQuery(q, index_->analyzer());
    EXPECT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<SearchResult> r = Search(*index_->Snapshot(), *plan, options);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }
  static std::vector<TweetId> Ids(const SearchResult& r) {
    std::vector<TweetId> ids;
    for (const Hit& h : r.hits) ids.push_back(h.id);
    return ids;
  }
  std::unique_ptr<index::Index> index_;
};

TEST_F(SearcherTest, ThreeSortModes) {
  Add(1, "red apple", 50);
  Add(2, "red red apple", 5);
  Add(3, "green apple", 500);
  Add(4, "red", 0);
  SearchOptions o;
  EXPECT_EQ(Ids(Run("apple", o)), (std::vector<TweetId>{3, 2, 1}));
  o.sort = SortMode::kMostLiked;
  EXPECT_EQ(Ids(Run("apple", o)), (std::vector<TweetId>{3, 1, 2}));
  o.sort = SortMode::kBestMatch;
  o.scoring.popularity_weight = 0;
  o.scoring.recency_weight = 0;
  // "red" twice outscores "red" once, despite the longer tweet (BM25 with k1=1.2, b=0.75).
  SearchResult best = Run("red apple", o);
  EXPECT_EQ(Ids(best), (std::vector<TweetId>{2, 1}));
  EXPECT_GT(best.hits[0].score, best.hits[1].score);
  o.scoring.popularity_weight = 100;  // popularity can dominate when weighted so
  EXPECT_EQ(Ids(Run("red apple", o)), (std::vector<TweetId>{1, 2}));
}

TEST_F(SearcherTest, PhrasesNeedAdjacentWordsInOrder) {
  Add(1, "new york city");
  Add(2, "york new");
  Add(3, "new shiny york");
  SearchOptions o;
  EXPECT_EQ(Ids(Run("\"new york\"", o)), (std::vector<TweetId>{1}));
  EXPECT_EQ(Ids(Run("new york", o)), (std::vector<TweetId>{3, 2, 1}));
  EXPECT_EQ(Ids(Run("new york -\"new york\"", o)), (std::vector<TweetId>{3, 2}));
}

// A host typed in a query without its scheme finds the links to it, and the hosts written so.
TEST_F(SearcherTest, AHostWithoutASchemeFindsItsLinks) {
  Add(1, "read https://site2.example.com/p/1");
  Add(2, "or just site2.example.com");
  Add(3, "site2 and example.com apart");
  Add(4, "https://site3.example.com/p/1");
  SearchOptions o;
  EXPECT_EQ(Ids(Run("site2.example.com", o)), (std::vector<TweetId>{2, 1}));
  EXPECT_EQ(Ids(Run("https://site2.example.com", o)), (std::vector<TweetId>{2, 1}));
  EXPECT_EQ(Ids(Run("example.com -site2.example.com", o)), (std::vector<TweetId>{3}));
}

TEST_F(SearcherTest, PagesNeitherRepeatNorSkipWhileTweetsArrive) {
  for (TweetId id = 1; id <= 10; ++id) Add(id, "news");
  SearchOptions o;
  o.limit = 4;
  SearchResult page1 = Run("news", o);
  EXPECT_EQ(Ids(page1), (std::vector<TweetId>{10, 9, 8, 7}));
  o.watermark = page1.hits[0].id;  // the newest id visible when page 1 was served
  Add(11, "news");
  Add(12, "news");
  o.after = page1.hits.back().key;
  SearchResult page2 = Run("news", o);
  EXPECT_EQ(Ids(page2), (std::vector<TweetId>{6, 5, 4, 3}));
  o.after = page2.hits.back().key;
  SearchResult page3 = Run("news", o);
  EXPECT_EQ(Ids(page3), (std::vector<TweetId>{2, 1}));
  EXPECT_EQ(page3.total_hits, 10u);  // every match under the watermark, on every page
  // A fresh first page sees the new tweets.
  EXPECT_EQ(Ids(Run("news", SearchOptions{})).front(), 12u);
}

TEST_F(SearcherTest, TotalsAreTheSameForEverySortAndPage) {
  for (TweetId id = 1; id <= 30; ++id) Add(id, id % 3 == 0 ? "word rare" : "word");
  ASSERT_TRUE(index_->Seal().ok());
  ASSERT_TRUE(index_->Compact().ok());  // one sealed segment: newest-first stops early
  for (SortMode sort : {SortMode::kNewest, SortMode::kBestMatch, SortMode::kMostLiked}) {
    SearchOptions o;
    o.sort = sort;
    o.limit = 5;
    SearchResult page1 = Run("word", o);
    EXPECT_TRUE(page1.total_is_exact);
    EXPECT_EQ(page1.total_hits, 30u);
    o.after = page1.hits.back().key;
    SearchResult page2 = Run("word", o);
    EXPECT_EQ(page2.total_hits, 30u);
    o.after.reset();
    EXPECT_EQ(Run("word rare", o).total_hits, 10u);
  }
  // Early termination still ran: the total no longer depends on it.
  SearchOptions newest;
  newest.limit = 5;
  EXPECT_TRUE(Run("word", newest).pruned);
}

TEST_F(SearcherTest, TotalsAreExactUpToTenThousandThenAtLeast) {
  const TweetId n = kTrackTotalHitsUpTo + 5;
  for (TweetId id = 1; id <= n; ++id) Add(id, id <= 10 ? "common rare" : "common");
  ASSERT_TRUE(index_->Seal().ok());
  Add(n + 1, "common");  // the active segment too
  ASSERT_TRUE(index_->Delete(3).ok());
  for (SortMode sort : {SortMode::kNewest, SortMode::kBestMatch, SortMode::kMostLiked}) {
    SearchOptions o;
    o.sort = sort;
    SearchResult capped = Run("common", o);
    EXPECT_FALSE(capped.total_is_exact);
    EXPECT_EQ(capped.total_hits, kTrackTotalHitsUpTo);
    SearchResult two_terms = Run("common OR nothing", o);
    EXPECT_FALSE(two_terms.total_is_exact);
    EXPECT_EQ(two_terms.total_hits, kTrackTotalHitsUpTo);
    SearchResult few = Run("common rare", o);
    EXPECT_TRUE(few.total_is_exact);
    EXPECT_EQ(few.total_hits, 9u);  // 10 less the deleted one
    o.exact_total = true;
    SearchResult exact = Run("common", o);
    EXPECT_TRUE(exact.total_is_exact);
    EXPECT_EQ(exact.total_hits, n);  // n + 1 less the deleted one
    // Under an older watermark the newest tweets do not count.
    o.watermark = 100;
    EXPECT_EQ(Run("common", o).total_hits, 99u);
  }
}

TEST_F(SearcherTest, CachedCountsFollowDeletesAndLikes) {
  // "a b" is an AND, counted over the segment's postings; a count cached by one search must
  // not survive a delete or a likes change that alters it.
  for (TweetId id = 1; id <= 40; ++id) Add(id, id % 2 == 0 ? "a b" : "a", id % 4 == 0 ? 10 : 0);
  ASSERT_TRUE(index_->Seal().ok());
  SearchOptions o;
  o.limit = 3;
  EXPECT_EQ(Run("a b", o).total_hits, 20u);
  EXPECT_EQ(Run("a b", o).total_hits, 20u);  // from the cache
  EXPECT_EQ(Run("a b min_faves:10", o).total_hits, 10u);
  ASSERT_TRUE(index_->Delete(2).ok());
  EXPECT_EQ(Run("a b", o).total_hits, 19u);
  o.after = Run("a b", o).hits.back().key;  // a later page counts the same
  EXPECT_EQ(Run("a b", o).total_hits, 19u);
  o.after.reset();
  ASSERT_TRUE(index_->SetLikes(6, 10).ok());
  EXPECT_EQ(Run("a b min_faves:10", o).total_hits, 11u);
  o.sort = SortMode::kMostLiked;
  EXPECT_EQ(Run("a b min_faves:10", o).total_hits, 11u);
}

TEST(CountCacheTest, KeepsTheNewestEntriesOfTheirGeneration) {
  index::CountCache cache;
  cache.Put("q", 7, {12, true});
  ASSERT_TRUE(cache.Get("q", 7).has_value());
  EXPECT_EQ(cache.Get("q", 7)->matches, 12u);
  EXPECT_FALSE(cache.Get("q", 8).has_value());  // the rows changed since
  EXPECT_FALSE(cache.Get("other", 7).has_value());
  for (size_t i = 0; i < index::CountCache::kMaxEntries; ++i) {
    cache.Put("k" + std::to_string(i), 1, {i, false});
  }
  EXPECT_FALSE(cache.Get("q", 7).has_value());  // the oldest went
  EXPECT_EQ(cache.Get("k1", 1)->matches, 1u);
  EXPECT_FALSE(cache.Get("k1", 1)->complete);
}

TEST(CapTotalTest, CapsSumsAndPartsThatWereCapped) {
  uint64_t total = 9'000;
  bool exact = true;
  CapTotal(false, &total, &exact);
  EXPECT_EQ(total, 9'000u);
  EXPECT_TRUE(exact);
  total = 12'000;
  CapTotal(false, &total, &exact);
  EXPECT_EQ(total, kTrackTotalHitsUpTo);
  EXPECT_FALSE(exact);
  total = kTrackTotalHitsUpTo + 7;  // a capped partition's 10,000 and another's 7
  exact = false;
  CapTotal(false, &total, &exact);
  EXPECT_EQ(total, kTrackTotalHitsUpTo);
  EXPECT_FALSE(exact);
  total = 50;  // "at least 50" (a damaged segment was not counted) stays so
  CapTotal(false, &total, &exact);
  EXPECT_EQ(total, 50u);
  EXPECT_FALSE(exact);
  total = 12'000;
  exact = true;
  CapTotal(true, &total, &exact);
  EXPECT_EQ(total, 12'000u);
  EXPECT_TRUE(exact);
}

TEST_F(SearcherTest, ExtremeTimesAndLikesScoreWithoutOverflow) {
  Add(1, "edge", 0, std::numeric_limits<int64_t>::min());
  Add(2, "edge", UINT32_MAX, std::numeric_limits<int64_t>::max());
  SearchOptions o;
  o.sort = SortMode::kBestMatch;
  o.now_ms = std::numeric_limits<int64_t>::min();
  SearchResult r = Run("edge", o);
  ASSERT_EQ(r.hits.size(), 2u);
  EXPECT_EQ(r.hits[0].id, 2u);  // most liked and newest
  for (const Hit& h : r.hits) EXPECT_TRUE(std::isfinite(h.score));
  o.now_ms = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Run("edge", o).hits.size(), 2u);
}

TEST_F(SearcherTest, DateFiltersAndLimits) {
  const int64_t day = 86400000;
  Add(1, "x", 0, 1238976000000);            // 2009-04-06
  Add(2, "x", 0, 1238976000000 + day);      // 2009-04-07
  Add(3, "x", 0, 1238976000000 + 2 * day);  // 2009-04-08
  EXPECT_EQ(Ids(Run("x since:2009-04-07 until:2009-04-08", {})), (std::vector<TweetId>{2}));
  absl::StatusOr<Plan> plan = PlanQuery("x", index_->analyzer());
  SearchOptions o;
  o.limit = 0;
  EXPECT_EQ(Search(*index_->Snapshot(), *plan, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.limit = kMaxLimit + 1;
  EXPECT_FALSE(Search(*index_->Snapshot(), *plan, o).ok());
}

}  // namespace
}  // namespace tweetsearch::query
