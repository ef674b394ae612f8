#include "aggregator/engine.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "aggregator/idempotency.h"
#include "common/synthetic.h"
#include "indexer/query/plan.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::aggregator {
namespace {

constexpr int64_t kNow = 1767225600000;  // 2026-01-01

NewTweet Tweet(std::optional<TweetId> id, std::string text, uint32_t likes = 0) {
  NewTweet t;
  t.id = id;
  t.user_id = 1;
  t.user_name = "ana";
  t.text = std::move(text);
  t.lang = "en";
  t.likes = likes;
  return t;
}

class EngineTest : public ::testing::Test {
 protected:
  EngineOptions Options() {
    EngineOptions o;
    o.data_dir = dir_.path();
    o.index.segment_max_docs = 64;  // many segments even in small tests
    o.store.block_cache_bytes = 8 << 20;
    return o;
  }

  std::unique_ptr<Engine> Open(EngineOptions o) {
    auto engine = Engine::Open(o, clock_);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  // Every match of `q` (ids in sort order), with the total.
  std::vector<TweetId> All(const Engine& e, std::string_view q,
                           query::SortMode sort = query::SortMode::kNewest) {
    auto plan = query::PlanQuery(q, e.analyzer());
    EXPECT_TRUE(plan.ok()) << plan.status();
    query::SearchOptions o;
    o.sort = sort;
    o.limit = query::kMaxLimit;
    o.exact_total = true;
    o.now_ms = kNow;
    uint64_t total = 0;
    bool exact = false;
    auto hits = e.Search(*plan, o, &total, &exact);
    EXPECT_TRUE(hits.ok());
    std::vector<TweetId> ids;
    for (const SearchHit& h : *hits) ids.push_back(h.hit.id);
    return ids;
  }

  testing::TempDir dir_;
  ManualClock clock_{kNow};
};

TEST_F(EngineTest, IngestIsSearchableWhenItReturnsAndRejectsOnlyBadLines) {
  auto e = Open(Options());
  std::vector<NewTweet> batch;
  batch.push_back(Tweet(std::nullopt, "first brave tweet"));
  batch.push_back(Tweet(100, "second brave tweet"));
  batch.push_back(Tweet(100, "same id again"));         // duplicate within the call
  batch.push_back(Tweet(101, ""));                      // missing text
  batch.push_back(Tweet(102, std::string(5000, 'a')));  // over the size limit
  batch.push_back(Tweet(103, "bad \xc3 utf8"));         // invalid UTF-8
  NewTweet bad_lang = Tweet(104, "a tweet");
  bad_lang.lang = "en us";
  batch.push_back(bad_lang);
  batch.push_back(Tweet(105, "third brave tweet"));
  std::vector<IngestOutcome> out = e->Ingest(batch);
  ASSERT_EQ(out.size(), 8u);
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_GT(out[0].id, 105u);  // a snowflake id of "now"
  EXPECT_TRUE(out[1].status.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(out[2].status));
  EXPECT_EQ(out[3].status.message(), "missing text");
  EXPECT_NE(out[4].status.message().find("over the limit"), std::string::npos);
  EXPECT_NE(out[5].status.message().find("UTF-8"), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(out[6].status));
  EXPECT_TRUE(out[7].status.ok());
  EXPECT_EQ(All(*e, "brave"), (std::vector<TweetId>{out[0].id, 105, 100}));
  EXPECT_EQ(e->Get(100)->text, "second brave tweet");
  EXPECT_EQ(e->Get(out[0].id)->created_at_ms, SnowflakeUnixMillis(out[0].id));

  // A later call with a stored id is a duplicate too.
  std::vector<IngestOutcome> again = e->Ingest({Tweet(105, "brave copy")});
  EXPECT_TRUE(absl::IsAlreadyExists(again[0].status));
  EXPECT_EQ(e->Get(105)->text, "third brave tweet");
}

TEST_F(EngineTest, DeleteAndLikesTakeEffectAtOnce) {
  auto e = Open(Options());
  e->Ingest({Tweet(1, "cat one", 5), Tweet(2, "cat two", 1), Tweet(3, "cat three", 3)});
  EXPECT_EQ(All(*e, "cat", query::SortMode::kMostLiked), (std::vector<TweetId>{1, 3, 2}));
  EXPECT_EQ(*e->Likes(2, 10, /*add=*/false), 10u);
  EXPECT_EQ(*e->Likes(3, 4, /*add=*/true), 7u);
  EXPECT_EQ(All(*e, "cat", query::SortMode::kMostLiked), (std::vector<TweetId>{2, 3, 1}));
  EXPECT_EQ(*e->Likes(1, -100, /*add=*/true), 0u);                // clamped
  EXPECT_EQ(*e->Likes(1, UINT32_MAX, /*add=*/true), UINT32_MAX);  // clamped
  EXPECT_TRUE(absl::IsInvalidArgument(e->Likes(1, int64_t{1} << 40, true).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(e->Likes(1, INT64_MAX, true).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(e->Likes(1, INT64_MIN, true).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(e->Likes(1, -1, false).status()));
  EXPECT_EQ(e->Get(3)->likes, 7u);

  ASSERT_TRUE(e->Delete(2).ok());
  EXPECT_TRUE(absl::IsNotFound(e->Delete(2)));
  EXPECT_TRUE(absl::IsNotFound(e->Get(2).status()));
  EXPECT_TRUE(absl::IsNotFound(e->Likes(2, 1, true).status()));
  EXPECT_EQ(All(*e, "cat"), (std::vector<TweetId>{3, 1}));
  // A deleted id may be used again, and search shows the new body (not a cached old one).
  EXPECT_TRUE(e->Ingest({Tweet(2, "cat reborn")})[0].status.ok());
  EXPECT_EQ(All(*e, "reborn"), (std::vector<TweetId>{2}));
  auto plan = query::PlanQuery("cat", e->analyzer());
  uint64_t total = 0;
  bool exact = false;
  query::SearchOptions options;
  options.now_ms = kNow;
  auto hits = e->Search(*plan, options, &total, &exact);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 3u);
  EXPECT_EQ((*hits)[0].tweet->text, "cat three");
  EXPECT_EQ((*hits)[0].hit.likes, 7u);
  EXPECT_EQ((*hits)[1].tweet->text, "cat reborn");
}

// The state after a crash (no final checkpoint) equals the state before it: saved segments
// plus the replayed change log.
TEST_F(EngineTest, RestartReplaysChangesAfterTheLastCheckpoint) {
  EngineOptions o = Options();
  o.checkpoint_every = 300;  // several checkpoints during the test
  o.checkpoint_on_close = false;
  SyntheticTweetGenerator gen;
  const std::vector<std::string> queries = {gen.Word(0), gen.Word(3) + " " + gen.Word(5),
                                            gen.Word(1) + " OR " + gen.Word(40),
                                            "\"" + gen.Word(2) + " " + gen.Word(0) + "\""};
  std::vector<std::vector<TweetId>> before;
  {
    auto e = Open(o);
    for (int round = 0; round < 10; ++round) {
      std::vector<NewTweet> batch;
      for (int i = 0; i < 97; ++i) {
        SyntheticTweet s = gen.Next();
        batch.push_back(Tweet(s.id, s.text, s.likes));
      }
      for (const auto& out : e->Ingest(batch)) ASSERT_TRUE(out.status.ok());
      ASSERT_TRUE(e->Delete(batch[round].id.value()).ok());
      ASSERT_TRUE(e->Likes(batch[round + 1].id.value(), 1000 + round, false).ok());
    }
    EXPECT_GT(e->Stats().checkpoint_change, 0u);
    EXPECT_LT(e->Stats().checkpoint_change, e->Stats().last_change);
    for (const std::string& q : queries) {
      before.push_back(All(*e, q, query::SortMode::kNewest));
      before.push_back(All(*e, q, query::SortMode::kMostLiked));
    }
  }
  auto e = Open(o);
  size_t k = 0;
  for (const std::string& q : queries) {
    EXPECT_EQ(All(*e, q, query::SortMode::kNewest), before[k++]) << q;
    EXPECT_EQ(All(*e, q, query::SortMode::kMostLiked), before[k++]) << q;
  }
  EXPECT_FALSE(before[0].empty());

  // And with the saved index gone, everything is re-indexed from storage.
  e.reset();
  std::filesystem::remove_all(dir_.path() + "/index");
  e = Open(o);
  k = 0;
  for (const std::string& q : queries) {
    EXPECT_EQ(All(*e, q, query::SortMode::kNewest), before[k++]) << q;
    EXPECT_EQ(All(*e, q, query::SortMode::kMostLiked), before[k++]) << q;
  }
}

TEST_F(EngineTest, ConcurrentIngestCallsAreAllWrittenOnce) {
  auto e = Open(Options());
  constexpr int kThreads = 4, kCalls = 25, kPerCall = 20;
  std::vector<std::vector<TweetId>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int c = 0; c < kCalls; ++c) {
        std::vector<NewTweet> batch;
        for (int i = 0; i < kPerCall; ++i) batch.push_back(Tweet(std::nullopt, "shared word"));
        for (const auto& out : e->Ingest(batch)) {
          EXPECT_TRUE(out.status.ok());
          ids[t].push_back(out.id);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  absl::flat_hash_set<TweetId> unique;
  for (const auto& v : ids) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), size_t{kThreads * kCalls * kPerCall});
  EXPECT_EQ(All(*e, "shared").size(), std::min<size_t>(unique.size(), query::kMaxLimit));
  EXPECT_EQ(e->Stats().tweets_ingested, unique.size());
  EXPECT_LE(e->Stats().write_groups, uint64_t{kThreads * kCalls});
}

// Idempotency keys in one process: a retry gets the first answer and changes nothing, also
// after a restart (with the change log replayed); another request under the key is refused;
// after a day the key is free again.
TEST_F(EngineTest, ARetryWithTheSameIdempotencyKeyGetsTheFirstAnswerAndChangesNothing) {
  EngineOptions o = Options();
  o.checkpoint_on_close = false;  // the restart replays the log, records included
  auto e = Open(o);
  ASSERT_TRUE(e->Ingest({Tweet(500, "liked tweet", 10)})[0].status.ok());

  WriteOnce add = MakeWriteOnce("k1", "like-1", LikesFingerprint(500, 5, true));
  absl::StatusOr<uint32_t> likes = e->Likes(500, 5, true, &add);
  ASSERT_TRUE(likes.ok()) << likes.status();
  EXPECT_EQ(*likes, 15u);
  EXPECT_FALSE(add.replayed);
  const uint64_t last_change = e->Stats().last_change;
  WriteOnce again = MakeWriteOnce("k1", "like-1", LikesFingerprint(500, 5, true));
  likes = e->Likes(500, 5, true, &again);
  ASSERT_TRUE(likes.ok());
  EXPECT_EQ(*likes, 15u);
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(e->Stats().last_change, last_change) << "a replay writes nothing";
  EXPECT_EQ(e->Get(500)->likes, 15u);

  // The same key for another request, and the same client key under another API key.
  WriteOnce other = MakeWriteOnce("k1", "like-1", LikesFingerprint(500, 6, true));
  EXPECT_TRUE(absl::IsFailedPrecondition(e->Likes(500, 6, true, &other).status()));
  WriteOnce elsewhere = MakeWriteOnce("k2", "like-1", LikesFingerprint(500, 5, true));
  EXPECT_EQ(*e->Likes(500, 5, true, &elsewhere), 20u);

  // Ingest without ids: a retry gets the same ids, and nothing is stored twice.
  std::vector<NewTweet> batch = {Tweet(std::nullopt, "idempotent zebra one"),
                                 Tweet(std::nullopt, "idempotent zebra two"), Tweet(500, "dup")};
  auto fingerprint = [&] {
    std::vector<absl::StatusOr<NewTweet>> lines(batch.begin(), batch.end());
    return IngestFingerprint(lines);
  };
  WriteOnce ingest = MakeWriteOnce("k1", "batch-1", fingerprint());
  std::vector<IngestOutcome> first = e->Ingest(batch, &ingest);
  ASSERT_EQ(first.size(), 3u);
  ASSERT_TRUE(first[0].status.ok() && first[1].status.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(first[2].status));
  EXPECT_FALSE(ingest.replayed);
  WriteOnce ingest_again = MakeWriteOnce("k1", "batch-1", fingerprint());
  std::vector<IngestOutcome> second = e->Ingest(batch, &ingest_again);
  EXPECT_TRUE(ingest_again.replayed);
  ASSERT_EQ(second.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(second[i].id, first[i].id);
    EXPECT_EQ(second[i].status, first[i].status);
  }
  EXPECT_EQ(All(*e, "zebra").size(), 2u);
  std::vector<NewTweet> changed = batch;
  changed[1].text = "idempotent zebra changed";
  std::vector<absl::StatusOr<NewTweet>> changed_lines(changed.begin(), changed.end());
  WriteOnce reused = MakeWriteOnce("k1", "batch-1", IngestFingerprint(changed_lines));
  e->Ingest(changed, &reused);
  EXPECT_TRUE(absl::IsFailedPrecondition(reused.status));
  EXPECT_EQ(All(*e, "zebra").size(), 2u);

  // A delete of a tweet not stored is a final answer too.
  WriteOnce gone = MakeWriteOnce("k1", "delete-9", DeleteFingerprint(9));
  EXPECT_TRUE(absl::IsNotFound(e->Delete(9, &gone)));
  ASSERT_TRUE(e->Ingest({Tweet(9, "now stored")})[0].status.ok());
  WriteOnce gone_again = MakeWriteOnce("k1", "delete-9", DeleteFingerprint(9));
  EXPECT_TRUE(absl::IsNotFound(e->Delete(9, &gone_again)));
  EXPECT_TRUE(gone_again.replayed);
  EXPECT_TRUE(e->Get(9).ok());

  // A restart keeps the records.
  e.reset();
  e = Open(o);
  WriteOnce after_restart = MakeWriteOnce("k1", "like-1", LikesFingerprint(500, 5, true));
  EXPECT_EQ(*e->Likes(500, 5, true, &after_restart), 15u);
  EXPECT_TRUE(after_restart.replayed);
  EXPECT_EQ(e->Get(500)->likes, 20u);

  // A day later the key is forgotten: the same request is a new one.
  clock_.AdvanceMillis(24 * 3600 * 1000);
  WriteOnce next_day = MakeWriteOnce("k1", "like-1", LikesFingerprint(500, 5, true));
  EXPECT_EQ(*e->Likes(500, 5, true, &next_day), 25u);
  EXPECT_FALSE(next_day.replayed);
}

// Attempts of one idempotent write at the same moment: one of them writes, the others replay.
TEST_F(EngineTest, ConcurrentAttemptsOfOneIdempotentWriteCountOnce) {
  auto e = Open(Options());
  ASSERT_TRUE(e->Ingest({Tweet(7, "raced tweet", 0)})[0].status.ok());
  constexpr int kThreads = 8;
  std::vector<WriteOnce> attempts;
  for (int t = 0; t < kThreads; ++t) {
    attempts.push_back(MakeWriteOnce("k", "race", LikesFingerprint(7, 3, true)));
  }
  std::vector<uint32_t> answers(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { answers[t] = e->Likes(7, 3, true, &attempts[t]).value_or(0); });
  }
  for (std::thread& t : threads) t.join();
  int written = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(answers[t], 3u);
    if (!attempts[t].replayed) ++written;
  }
  EXPECT_EQ(written, 1);
  EXPECT_EQ(e->Get(7)->likes, 3u);
}

TEST(TweetCacheTest, EvictsLeastRecentlyUsedAndNeverCachesAcrossAnInvalidation) {
  TweetCache cache(16 * 4096);  // about 4 KiB a shard
  auto make = [](TweetId id) {
    auto t = std::make_shared<storage::StoredTweet>();
    t->id = id;
    t->text = std::string(200, 'x');
    return t;
  };
  cache.PutIfUnchanged(make(1), cache.epoch());
  for (TweetId id = 2; id <= 2000; ++id) {
    cache.PutIfUnchanged(make(id), cache.epoch());
    if (id % 7 == 0) {
      EXPECT_NE(cache.Get(1), nullptr);  // kept hot: survives by second chance
    }
  }
  EXPECT_LE(cache.bytes(), size_t{16 * 4096});
  EXPECT_NE(cache.Get(2000), nullptr);
  EXPECT_EQ(cache.Get(2), nullptr);  // cold and old: evicted

  const uint64_t before = cache.epoch();
  cache.Invalidate(2000);
  EXPECT_EQ(cache.Get(2000), nullptr);
  cache.PutIfUnchanged(make(5000), before);  // read before the invalidation: refused
  EXPECT_EQ(cache.Get(5000), nullptr);
  cache.PutIfUnchanged(make(5000), cache.epoch());
  ASSERT_NE(cache.Get(5000), nullptr);
  EXPECT_EQ(cache.Get(5000)->text, std::string(200, 'x'));
}

}  // namespace
}  // namespace tweetsearch::aggregator
