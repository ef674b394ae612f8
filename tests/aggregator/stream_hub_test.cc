// Streams through the real write path: an Engine on a real RocksDB directory publishing to its
// StreamHub, standing queries matched by the hub's thread, catch-up from the change log.
#include "aggregator/stream_hub.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "aggregator/engine.h"
#include "indexer/query/plan.h"
#include "indexer/query/searcher.h"
#include "tests/testing/corpus.h"
#include "tests/testing/wake_signal.h"

namespace tweetsearch::aggregator {
namespace {

constexpr int64_t kNow = 1767225600000;  // 2026-01-01

NewTweet Tweet(TweetId id, std::string text, std::string user = "ana", uint32_t likes = 0) {
  NewTweet t;
  t.id = id;
  t.user_id = 1;
  t.user_name = std::move(user);
  t.text = std::move(text);
  t.created_at_ms = kNow + static_cast<int64_t>(id);
  t.lang = "en";
  t.likes = likes;
  return t;
}

// What a stream delivered, as "+id" (tweet) and "-id" (delete), in order, with the ids.
struct Received {
  std::vector<std::string> events;
  std::vector<uint64_t> ids;
};

// Reads `s` until `done` holds for what it received, waking on its signal (never sleeping a
// fixed time); fails after 60 s.
class Reader {
 public:
  explicit Reader(Subscription& s) : s_(s) { s_.OnReady(wake_.Callback()); }

  absl::Status ReadUntil(const std::function<bool(const Received&)>& done, size_t max = 100) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done(got_)) {
      absl::StatusOr<Subscription::Batch> b = s_.Next(max);
      if (!b.ok()) return b.status();
      for (const StreamEvent& e : b->events) {
        got_.events.push_back((e.kind == StreamEvent::Kind::kTweet ? "+" : "-") +
                              std::to_string(e.tweet->id));
        got_.ids.push_back(e.sequence);
      }
      if (!b->events.empty() || b->more) continue;
      if (!wake_.Wait(deadline)) return absl::DeadlineExceededError("no event within 60 s");
    }
    return absl::OkStatus();
  }
  absl::Status ReadCount(size_t n) {
    return ReadUntil([n](const Received& r) { return r.events.size() >= n; });
  }
  const Received& got() const { return got_; }

 private:
  Subscription& s_;
  Received got_;
  testing::WakeSignal wake_;
};

class StreamHubTest : public ::testing::Test {
 protected:
  EngineOptions Options() {
    EngineOptions o;
    o.data_dir = dir_.path();
    o.index.segment_max_docs = 256;
    o.store.block_cache_bytes = 8 << 20;
    return o;
  }
  void Open(EngineOptions o) {
    auto e = Engine::Open(o, clock_);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
  }
  std::unique_ptr<Subscription> Subscribe(std::string_view q,
                                          std::optional<uint64_t> resume = std::nullopt) {
    auto plan = query::PlanQuery(q, engine_->analyzer());
    EXPECT_TRUE(plan.ok()) << plan.status();
    auto s = engine_->streams()->Subscribe(*std::move(plan), resume);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  void Ingest(std::vector<NewTweet> tweets) {
    for (const IngestOutcome& o : engine_->Ingest(std::move(tweets))) {
      ASSERT_TRUE(o.status.ok()) << o.status;
    }
  }

  testing::TempDir dir_;
  ManualClock clock_{kNow};
  std::unique_ptr<Engine> engine_;
};

TEST_F(StreamHubTest, PushesEachNewMatchOnceInOrderAndTheDeletesOfMatches) {
  ASSERT_NO_FATAL_FAILURE(Open(Options()));
  ASSERT_NO_FATAL_FAILURE(Ingest({Tweet(1, "cats before the stream")}));
  auto s = Subscribe("(cats OR from:bob) -dogs");
  ASSERT_NE(s, nullptr);
  ASSERT_NO_FATAL_FAILURE(Ingest({Tweet(10, "cats are great"), Tweet(11, "nothing here"),
                                  Tweet(12, "cats and dogs"), Tweet(13, "hello", "bob")}));
  ASSERT_NO_FATAL_FAILURE(Ingest({Tweet(14, "more #cats and CATS")}));
  ASSERT_TRUE(engine_->Likes(10, 5, false).ok());  // likes changes are not events
  ASSERT_TRUE(engine_->Delete(11).ok());           // not a match: no event
  ASSERT_TRUE(engine_->Delete(10).ok());
  ASSERT_TRUE(engine_->Delete(1).ok());  // a match, ingested before the stream started
  ASSERT_NO_FATAL_FAILURE(Ingest({Tweet(15, "last cats")}));
  Reader r(*s);
  ASSERT_TRUE(r.ReadUntil([](const Received& got) {
                 return !got.events.empty() && got.events.back() == "+15";
               }).ok());
  EXPECT_EQ(r.got().events, (std::vector<std::string>{"+10", "+13", "+14", "-10", "-1", "+15"}));
  EXPECT_TRUE(std::is_sorted(r.got().ids.begin(), r.got().ids.end()));
  EXPECT_GT(r.got().ids.front(), s->start());
  const StreamHubStats stats = engine_->streams()->Stats();
  EXPECT_EQ(stats.open_streams, 1u);
  s->Close();
  EXPECT_EQ(engine_->streams()->Stats().open_streams, 0u);
  EXPECT_EQ(engine_->streams()->Stats().standing_queries, 0u);
}

// A client that reconnects after any event id gets exactly the events after it, read from the
// change log and then live, while writers go on.
TEST_F(StreamHubTest, ResumingAfterAnyIdLosesAndRepeatsNothingWhileWritersGoOn) {
  ASSERT_NO_FATAL_FAILURE(Open(Options()));
  auto first = Subscribe("cats");
  ASSERT_NE(first, nullptr);
  const uint64_t origin = first->start();
  std::atomic<bool> stop = false;
  std::thread writer([&] {
    for (TweetId id = 100; id < 1600 && !stop; id += 5) {
      std::vector<NewTweet> batch;
      for (TweetId j = id; j < id + 5; ++j) {
        batch.push_back(Tweet(j, j % 3 == 0 ? "no match" : "cats " + std::to_string(j)));
      }
      engine_->Ingest(std::move(batch));
    }
  });
  Reader all(*first);
  ASSERT_TRUE(all.ReadCount(1000).ok());
  writer.join();
  ASSERT_TRUE(all.ReadCount(1000).ok());
  const Received everything = all.got();  // 1,000 of the 1,500 tweets match

  for (size_t cut : {size_t{0}, size_t{1}, size_t{377}, size_t{999}}) {
    const uint64_t after = cut == 0 ? origin : everything.ids[cut - 1];
    auto again = Subscribe("cats", after);
    ASSERT_NE(again, nullptr);
    EXPECT_FALSE(again->gap_after().has_value());
    Reader r(*again);
    ASSERT_TRUE(r.ReadCount(1000 - cut).ok()) << "cut " << cut;
    EXPECT_EQ(r.got().events,
              std::vector<std::string>(everything.events.begin() + cut, everything.events.end()))
        << "cut " << cut;
  }
  stop = true;
}

TEST_F(StreamHubTest, ResumingWhileWritesContinueJoinsTheLiveFeedWithoutGapOrDuplicate) {
  ASSERT_NO_FATAL_FAILURE(Open(Options()));
  auto live = Subscribe("cats");
  const uint64_t origin = live->start();
  ASSERT_NO_FATAL_FAILURE(Ingest({Tweet(1, "cats one"), Tweet(2, "cats two")}));
  std::thread writer([&] {
    for (TweetId id = 10; id < 2010; ++id) engine_->Ingest({Tweet(id, "cats again")});
  });
  // Resumed from the start while the writer runs: it reads the log, then joins the live feed.
  auto resumed = Subscribe("cats", origin);
  Reader r(*resumed), l(*live);
  ASSERT_TRUE(r.ReadCount(2002).ok());
  writer.join();
  ASSERT_TRUE(l.ReadCount(2002).ok());
  EXPECT_EQ(r.got().events, l.got().events);
  EXPECT_EQ(r.got().ids, l.got().ids);
}

TEST_F(StreamHubTest, ASlowReaderAndAMatcherFarBehindCatchUpFromTheLog) {
  EngineOptions o = Options();
  o.stream_options.max_queued_events = 7;
  o.stream_options.max_backlog_changes = 40;
  o.stream_options.log_read_batch = 13;
  ASSERT_NO_FATAL_FAILURE(Open(o));
  auto s = Subscribe("cats");
  std::vector<std::string> want;
  for (TweetId id = 1; id <= 600; id += 30) {
    std::vector<NewTweet> batch;  // 30 tweets: under the backlog bound, over the queue
    for (TweetId j = id; j < id + 30; ++j) {
      batch.push_back(Tweet(j, j % 2 ? "cats" : "dogs"));
      if (j % 2) want.push_back("+" + std::to_string(j));
    }
    ASSERT_NO_FATAL_FAILURE(Ingest(std::move(batch)));
  }
  std::vector<NewTweet> big;  // over the backlog bound in one write
  for (TweetId j = 1000; j < 1100; ++j) {
    big.push_back(Tweet(j, "cats"));
    want.push_back("+" + std::to_string(j));
  }
  ASSERT_NO_FATAL_FAILURE(Ingest(std::move(big)));
  Reader r(*s);
  ASSERT_TRUE(r.ReadCount(want.size()).ok());
  EXPECT_EQ(r.got().events, want);
  EXPECT_GT(engine_->streams()->Stats().catch_ups, 0u);
}

TEST_F(StreamHubTest, ResumePointsOutsideTheLogAreAGapOrRefused) {
  EngineOptions o = Options();
  o.change_retention_ms = 60'000;
  ASSERT_NO_FATAL_FAILURE(Open(o));
  ASSERT_NO_FATAL_FAILURE(Ingest({Tweet(1, "cats old")}));
  ASSERT_TRUE(engine_->Checkpoint().ok());
  // Younger than the retention: a checkpoint keeps it.
  auto kept = Subscribe("cats", 0);
  ASSERT_NE(kept, nullptr);
  EXPECT_FALSE(kept->gap_after().has_value());
  Reader k(*kept);
  ASSERT_TRUE(k.ReadCount(1).ok());
  EXPECT_EQ(k.got().events, std::vector<std::string>{"+1"});

  clock_.AdvanceMillis(120'000);
  ASSERT_NO_FATAL_FAILURE(Ingest({Tweet(2, "cats new")}));
  ASSERT_TRUE(engine_->Checkpoint().ok());  // change 1 is older than the retention now
  auto late = Subscribe("cats", 0);
  ASSERT_NE(late, nullptr);
  ASSERT_TRUE(late->gap_after().has_value());
  EXPECT_EQ(*late->gap_after(), 0u);
  Reader r(*late);
  ASSERT_TRUE(r.ReadCount(1).ok());
  EXPECT_EQ(r.got().events, std::vector<std::string>{"+2"});

  auto plan = query::PlanQuery("cats", engine_->analyzer());
  EXPECT_TRUE(absl::IsInvalidArgument(engine_->streams()->Subscribe(*plan, 1'000'000).status()));
}

// Many standing queries at once: each stream gets exactly the tweets the searcher finds for
// its query among those written after it started, and a tweet is tested against few queries.
TEST_F(StreamHubTest, ManyStandingQueriesEachGetExactlyTheirMatches) {
  ASSERT_NO_FATAL_FAILURE(Open(Options()));
  const std::vector<std::string> words = {"red",  "green", "blue", "cats",  "dogs", "tea",
                                          "rain", "sun",   "moon", "#news", "@ann", "code"};
  std::mt19937_64 rng(3);
  auto word = [&] { return words[rng() % words.size()]; };
  // Background tweets first, so that document frequencies rank the words.
  std::vector<NewTweet> before;
  for (TweetId id = 1; id <= 500; ++id) before.push_back(Tweet(id, word() + " " + word()));
  ASSERT_NO_FATAL_FAILURE(Ingest(std::move(before)));
  std::vector<std::string> queries;
  for (int i = 0; i < 400; ++i) {
    switch (i % 4) {
      case 0:
        queries.push_back(word() + " " + word());
        break;
      case 1:
        queries.push_back(word() + " OR " + word());
        break;
      case 2:
        queries.push_back("\"" + word() + " " + word() + "\"");
        break;
      default:
        queries.push_back(word() + " -" + word() + " from:" + (i % 8 ? "ana" : "bob"));
    }
  }
  std::vector<std::unique_ptr<Subscription>> subs;
  for (const std::string& q : queries) subs.push_back(Subscribe(q));
  for (TweetId id = 1000; id < 3000; id += 100) {
    std::vector<NewTweet> batch;
    for (TweetId j = id; j < id + 100; ++j) {
      batch.push_back(Tweet(j, word() + " " + word() + " " + word(), j % 3 ? "ana" : "bob"));
    }
    ASSERT_NO_FATAL_FAILURE(Ingest(std::move(batch)));
  }
  size_t total = 0;
  for (size_t i = 0; i < queries.size(); ++i) {
    auto plan = query::PlanQuery(queries[i], engine_->analyzer());
    query::SearchOptions o;
    o.limit = query::kMaxLimit;
    uint64_t hits_total = 0;
    bool exact = false;
    auto hits = engine_->Search(*plan, o, &hits_total, &exact);
    ASSERT_TRUE(hits.ok());
    std::vector<std::string> want;
    for (auto it = hits->rbegin(); it != hits->rend(); ++it) {
      if (it->hit.id >= 1000) want.push_back("+" + std::to_string(it->hit.id));
    }
    Reader r(*subs[i]);
    ASSERT_TRUE(r.ReadUntil([&](const Received& got) {
                   return got.events.size() >= want.size() &&
                          engine_->streams()->Stats().position >= engine_->Stats().last_change;
                 }).ok());
    ASSERT_EQ(r.got().events, want) << queries[i];
    total += want.size();
  }
  EXPECT_GT(total, 2000u);
  // Filed by their anchor terms, the queries are tested far less often than every query
  // against every tweet.
  const StreamHubStats stats = engine_->streams()->Stats();
  EXPECT_EQ(stats.tweets_matched, 2000u);
  EXPECT_LT(stats.query_tests, 2000u * queries.size() / 3);
  EXPECT_LT(stats.standing_queries, queries.size());  // identical queries share
}

}  // namespace
}  // namespace tweetsearch::aggregator
