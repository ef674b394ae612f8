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
  EXPECT_EQ(page3.total_hits, 2u);
  // A fresh first page sees the new tweets.
  EXPECT_EQ(Ids(Run("news", SearchOptions{})).front(), 12u);
}

TEST_F(SearcherTest, TotalsAreExactOrMarkedAsLowerBounds) {
  for (TweetId id = 1; id <= 30; ++id) Add(id, "word");
  ASSERT_TRUE(index_->Seal().ok());
  ASSERT_TRUE(index_->Compact().ok());  // one sealed segment: newest-first stops early
  SearchOptions o;
  o.limit = 5;
  SearchResult early = Run("word", o);
  EXPECT_FALSE(early.total_is_exact);
  EXPECT_GE(early.total_hits, 5u);
  o.exact_total = true;
  SearchResult exact = Run("word", o);
  EXPECT_TRUE(exact.total_is_exact);
  EXPECT_EQ(exact.total_hits, 30u);
  EXPECT_EQ(Ids(exact), Ids(early));
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
