// A stream over several change logs (a cluster front door's, one per storage partition): two
// Engines on real RocksDB directories stand for two partitions, each with its own hub.
#include "aggregator/stream_feed.h"

#include <gtest/gtest.h>

#include "aggregator/engine.h"
#include "indexer/query/plan.h"
#include "tests/testing/corpus.h"
#include "tests/testing/wake_signal.h"

namespace tweetsearch::aggregator {
namespace {

constexpr int64_t kFeedStart = 1767225600000;  // 2026-01-01

TEST(StreamEventIdTest, IsOneDecimalSequencePerLogJoinedByDashes) {
  const uint64_t one[] = {812};
  EXPECT_EQ(StreamEventId(one), "812");
  const uint64_t three[] = {812, 0, 18446744073709551615u};
  EXPECT_EQ(StreamEventId(three), "812-0-18446744073709551615");
  absl::StatusOr<StreamPosition> back = ParseStreamEventId("812-0-18446744073709551615", 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, (StreamPosition{812, 0, 18446744073709551615u}));
  EXPECT_EQ(*ParseStreamEventId("7", 1), StreamPosition{7});
}

TEST(StreamEventIdTest, RefusesTextThatIsNotAPositionOfThisServer) {
  for (std::string_view bad :
       {"", "-", "1-", "-1", "1--2", "1-2-3", "1", "1-+2", "1- 2", " 1-2", "1-2 ", "1-0x2", "a-b",
        "1-18446744073709551616", "1-000000000000000000001"}) {
    absl::StatusOr<StreamPosition> p = ParseStreamEventId(bad, 2);
    EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << "'" << bad << "': " << p.status();
  }
  EXPECT_TRUE(absl::IsInvalidArgument(ParseStreamEventId(std::string(5000, '1'), 2).status()));
  EXPECT_TRUE(ParseStreamEventId("00-1", 2).ok());  // leading zeros are still a number
}

// Reads a feed until it holds `n` events, waking on its signal (never a fixed sleep).
class FeedReader {
 public:
  explicit FeedReader(StreamFeed& feed) : feed_(feed) { feed_.OnReady(wake_.Callback()); }
  absl::Status ReadCount(size_t n, size_t max = 3) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (events.size() < n) {
      absl::StatusOr<StreamFeed::Batch> b = feed_.Next(max);
      if (!b.ok()) return b.status();
      for (FeedEvent& e : b->events) events.push_back(std::move(e));
      if (!b->events.empty() || b->more) continue;
      if (!wake_.Wait(deadline)) return absl::DeadlineExceededError("no event within 60 s");
    }
    return absl::OkStatus();
  }
  std::vector<FeedEvent> events;

 private:
  StreamFeed& feed_;
  testing::WakeSignal wake_;
};

class StreamFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int p = 0; p < 2; ++p) {
      EngineOptions o;
      o.data_dir = dir_.path() + "/p" + std::to_string(p);
      o.store.block_cache_bytes = 8 << 20;
      auto e = Engine::Open(o, clock_);
      ASSERT_TRUE(e.ok()) << e.status();
      engines_.push_back(*std::move(e));
      hubs_.push_back(engines_.back()->streams());
    }
  }
  std::unique_ptr<StreamFeed> Open(std::optional<StreamPosition> resume = std::nullopt) {
    absl::StatusOr<query::Plan> plan = query::PlanQuery("cats", engines_[0]->analyzer());
    EXPECT_TRUE(plan.ok());
    absl::StatusOr<std::unique_ptr<StreamFeed>> feed = StreamFeed::Open(hubs_, *plan, resume);
    EXPECT_TRUE(feed.ok()) << feed.status();
    return feed.ok() ? *std::move(feed) : nullptr;
  }
  // Tweet `id` into partition `p`, matching "cats" when `match`.
  void Put(int p, TweetId id, bool match = true) {
    NewTweet t;
    t.id = id;
    t.user_id = 1;
    t.user_name = "ana";
    t.text = match ? "cats again" : "dogs again";
    t.created_at_ms = kFeedStart + static_cast<int64_t>(id);
    t.lang = "en";
    std::vector<NewTweet> batch;
    batch.push_back(std::move(t));
    ASSERT_TRUE(engines_[p]->Ingest(std::move(batch))[0].status.ok());
  }

  testing::TempDir dir_;
  ManualClock clock_{kFeedStart};
  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<StreamHub*> hubs_;
};

TEST_F(StreamFeedTest, MergesThePartitionsAndResumesEachAfterItsOwnPosition) {
  // Did: a stream over two partitions; 40 tweets, 30 of them matches, spread over both in an
  // irregular pattern; then for every event id it gave, a second stream resumed after that id
  // (as a client reconnecting to another front door would). Checked: the first stream delivers
  // each match once, each partition's in its order, with ids whose partition positions only
  // grow; every resumed stream delivers exactly the events that followed its id, no more and
  // no fewer.
  std::unique_ptr<StreamFeed> feed = Open();
  ASSERT_NE(feed, nullptr);
  EXPECT_EQ(feed->start_id(), "0-0");
  std::map<TweetId, int> partition_of;
  for (TweetId id = 1; id <= 40; ++id) {
    const int p = (id * 7 / 3) % 2;
    ASSERT_NO_FATAL_FAILURE(Put(p, id, id % 4 != 0));
    if (id % 4 != 0) partition_of[id] = p;
  }
  FeedReader r(*feed);
  ASSERT_TRUE(r.ReadCount(30).ok());
  EXPECT_EQ(r.events.size(), 30u);
  std::set<TweetId> seen;
  TweetId last_of[2] = {0, 0};
  StreamPosition previous = {0, 0};
  for (const FeedEvent& e : r.events) {
    EXPECT_TRUE(seen.insert(e.tweet->id).second) << "twice: " << e.tweet->id;
    const int p = partition_of.at(e.tweet->id);
    EXPECT_GT(e.tweet->id, last_of[p]) << "partition " << p << " out of order";
    last_of[p] = e.tweet->id;
    absl::StatusOr<StreamPosition> at = ParseStreamEventId(e.id, 2);
    ASSERT_TRUE(at.ok()) << e.id;
    EXPECT_GT((*at)[p], previous[p]) << e.id;
    EXPECT_EQ((*at)[1 - p], previous[1 - p]) << e.id;
    previous = *at;
  }
  // Markers: one more match in each partition per resume, so that each resumed stream has a
  // known end to read up to (and the next ones must see the earlier markers too).
  std::vector<TweetId> markers;
  for (size_t k = 0; k < r.events.size(); ++k) {
    std::unique_ptr<StreamFeed> resumed = Open(*ParseStreamEventId(r.events[k].id, 2));
    ASSERT_NE(resumed, nullptr);
    FeedReader rr(*resumed);
    for (TweetId id : {TweetId{1000 + 2 * k}, TweetId{1001 + 2 * k}}) {
      ASSERT_NO_FATAL_FAILURE(Put(static_cast<int>(id % 2), id));
      markers.push_back(id);
    }
    std::set<TweetId> want(markers.begin(), markers.end());
    for (size_t j = k + 1; j < r.events.size(); ++j) want.insert(r.events[j].tweet->id);
    ASSERT_TRUE(rr.ReadCount(want.size()).ok()) << "after event " << k;
    std::set<TweetId> got;
    for (const FeedEvent& e : rr.events) got.insert(e.tweet->id);
    EXPECT_EQ(got, want) << "after event " << k;
    EXPECT_EQ(rr.events.size(), want.size()) << "after event " << k;
  }
}

TEST_F(StreamFeedTest, AnIdOfAnotherShapeOrAheadOfALogIsRefused) {
  absl::StatusOr<query::Plan> plan = query::PlanQuery("cats", engines_[0]->analyzer());
  ASSERT_TRUE(plan.ok());
  ASSERT_NO_FATAL_FAILURE(Put(0, 1));
  // Partition 1 has written nothing: a position past its log is none this server gave.
  EXPECT_TRUE(
      absl::IsInvalidArgument(StreamFeed::Open(hubs_, *plan, StreamPosition{1, 5}).status()));
  EXPECT_TRUE(StreamFeed::Open(hubs_, *plan, StreamPosition{1, 0}).ok());
}

}  // namespace
}  // namespace tweetsearch::aggregator
