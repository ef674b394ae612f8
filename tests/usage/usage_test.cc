#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/testing/corpus.h"
#include "usage/usage_recorder.h"
#include "usage/usage_store.h"

namespace tweetsearch::usage {
namespace {

constexpr int64_t kDayS = 86400;
// 2026-11-02 00:00:00 UTC, a Monday.
constexpr int64_t kT0 = 1793577600;

using ::tweetsearch::testing::TempDir;

Counters Served(uint64_t n) {
  Counters c;
  c.served = n;
  return c;
}

uint64_t SumServed(const std::vector<Point>& points) {
  uint64_t n = 0;
  for (const Point& p : points) n += p.counters.served;
  return n;
}

TEST(CountersTest, CountsOutcomesAndLimitsAndAddsUp) {
  Counters a;
  a.Count(Outcome::kServed);
  a.Count(Outcome::kServed);
  a.Count(Outcome::kLimited, "per-minute");
  a.Count(Outcome::kLimited, "daily");
  a.Count(Outcome::kLimited, "per-minute");
  a.Count(Outcome::kRejected);
  a.Count(Outcome::kFailed);
  EXPECT_EQ(a.served, 2u);
  EXPECT_EQ(a.limited, 3u);
  EXPECT_EQ(a.requests(), 7u);
  EXPECT_EQ(a.limited_by.at("per-minute"), 2u);
  EXPECT_EQ(a.limited_by.at("daily"), 1u);
  Counters b = a;
  b.Add(a);
  EXPECT_EQ(b.requests(), 14u);
  EXPECT_EQ(b.limited_by.at("per-minute"), 4u);

  EXPECT_EQ(OutcomeForHttpStatus(200), Outcome::kServed);
  EXPECT_EQ(OutcomeForHttpStatus(201), Outcome::kServed);
  EXPECT_EQ(OutcomeForHttpStatus(429), Outcome::kLimited);
  EXPECT_EQ(OutcomeForHttpStatus(400), Outcome::kRejected);
  EXPECT_EQ(OutcomeForHttpStatus(401), Outcome::kRejected);
  EXPECT_EQ(OutcomeForHttpStatus(413), Outcome::kRejected);
  EXPECT_EQ(OutcomeForHttpStatus(500), Outcome::kFailed);
  EXPECT_EQ(OutcomeForHttpStatus(503), Outcome::kFailed);
}

TEST(CountersTest, LatencyQuantilesFallInTheRightBuckets) {
  Counters c;
  EXPECT_EQ(c.SearchLatencyQuantileMs(0.5), 0);
  // 90 searches at 0.3 ms, 10 at 20 ms.
  for (int i = 0; i < 90; ++i) c.AddSearchLatency(300);
  for (int i = 0; i < 10; ++i) c.AddSearchLatency(20'000);
  EXPECT_EQ(c.searches, 100u);
  EXPECT_EQ(c.search_latency_us_sum, 90u * 300 + 10u * 20'000);
  // 300 µs lies in [256, 512); 20 ms in [16.384, 32.768) ms.
  EXPECT_GE(c.SearchLatencyQuantileMs(0.5), 0.256);
  EXPECT_LT(c.SearchLatencyQuantileMs(0.5), 0.512);
  EXPECT_GE(c.SearchLatencyQuantileMs(0.99), 16.384);
  EXPECT_LT(c.SearchLatencyQuantileMs(0.99), 32.768);
  // Below the first bound and past the last one.
  Counters edges;
  edges.AddSearchLatency(0);
  edges.AddSearchLatency(uint64_t{1} << 40);
  EXPECT_EQ(edges.search_latency[0], 1u);
  EXPECT_EQ(edges.search_latency[kLatencyBuckets - 1], 1u);
}

TEST(UsageStoreTest, EveryResolutionHoldsTheSumOfItsMinutes) {
  TempDir dir;
  ManualClock clock(kT0 * 1000 + 3 * 3600 * 1000);
  auto store = UsageStore::Open(dir.path(), clock);
  ASSERT_TRUE(store.ok()) << store.status();
  // One request a minute for the first 3 hours of the day, and a second key now and then.
  std::vector<Increment> batch;
  for (int m = 0; m < 180; ++m) batch.push_back({"k1", kT0 + m * 60, Served(1)});
  for (int m = 0; m < 180; m += 7) batch.push_back({"k2", kT0 + m * 60, Served(10)});
  ASSERT_TRUE((*store)->Add(batch, "b1").ok());
  // The same minute again: increments add up.
  ASSERT_TRUE((*store)->Add({{"k1", kT0, Served(4)}}, "b2").ok());

  auto minutes = (*store)->Query("k1", Resolution::kMinute, kT0, kT0 + 3 * 3600);
  ASSERT_TRUE(minutes.ok()) << minutes.status();
  ASSERT_EQ(minutes->size(), 180u);
  EXPECT_EQ((*minutes)[0].start_s, kT0);
  EXPECT_EQ((*minutes)[0].counters.served, 5u);
  EXPECT_EQ((*minutes)[1].counters.served, 1u);
  EXPECT_EQ((*minutes)[179].start_s, kT0 + 179 * 60);

  auto five = (*store)->Query("k1", Resolution::kFiveMinutes, kT0, kT0 + 3 * 3600);
  ASSERT_TRUE(five.ok());
  ASSERT_EQ(five->size(), 36u);
  EXPECT_EQ((*five)[0].counters.served, 9u);
  EXPECT_EQ((*five)[1].counters.served, 5u);
  auto hours = (*store)->Query("k1", Resolution::kHour, kT0, kT0 + 3 * 3600);
  ASSERT_TRUE(hours.ok());
  ASSERT_EQ(hours->size(), 3u);
  EXPECT_EQ((*hours)[0].counters.served, 64u);
  EXPECT_EQ((*hours)[2].counters.served, 60u);
  auto days = (*store)->Query("k1", Resolution::kDay, kT0 - kDayS, kT0 + kDayS);
  ASSERT_TRUE(days.ok());
  ASSERT_EQ(days->size(), 2u);
  EXPECT_EQ((*days)[0].counters.served, 0u);  // the day before: zero-filled
  EXPECT_EQ((*days)[1].counters.served, 184u);
  EXPECT_EQ(SumServed(*minutes), 184u);
  EXPECT_EQ(SumServed(*five), 184u);

  // k2 is its own series.
  auto k2 = (*store)->Query("k2", Resolution::kHour, kT0, kT0 + 3 * 3600);
  ASSERT_TRUE(k2.ok());
  EXPECT_EQ(SumServed(*k2), 260u);
  // A key id that is a prefix of another does not see its buckets.
  auto k = (*store)->Query("k", Resolution::kHour, kT0, kT0 + 3 * 3600);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(SumServed(*k), 0u);

  auto keys = (*store)->Keys();
  ASSERT_TRUE(keys.ok());
  EXPECT_THAT(*keys, ::testing::ElementsAre("k1", "k2"));

  // Ranges are rounded to bucket boundaries; bad ranges are refused.
  auto rounded = (*store)->Query("k1", Resolution::kHour, kT0 + 10, kT0 + 3600 + 1);
  ASSERT_TRUE(rounded.ok());
  EXPECT_EQ(rounded->size(), 2u);
  EXPECT_FALSE((*store)->Query("k1", Resolution::kHour, kT0 + 1, kT0).ok());
  EXPECT_FALSE((*store)->Query("k1", Resolution::kMinute, kT0 - 100 * kDayS, kT0).ok());
}

TEST(UsageStoreTest, FineBucketsExpireAndCoarseOnesStay) {
  TempDir dir;
  ManualClock clock(kT0 * 1000);
  auto opened = UsageStore::Open(dir.path(), clock);
  ASSERT_TRUE(opened.ok());
  UsageStore& store = **opened;
  std::vector<Increment> batch;
  for (int m = 0; m < 60; ++m) batch.push_back({"k", kT0 + m * 60, Served(2)});
  ASSERT_TRUE(store.Add(batch, "b1").ok());
  ASSERT_TRUE(store.ExpireNow().ok());
  EXPECT_EQ(*store.StoredBuckets(Resolution::kMinute), 60u);
  EXPECT_EQ(*store.StoredBuckets(Resolution::kFiveMinutes), 12u);
  EXPECT_EQ(*store.StoredBuckets(Resolution::kHour), 1u);
  EXPECT_EQ(*store.StoredBuckets(Resolution::kDay), 1u);

  auto served = [&](Resolution r) {
    auto points = store.Query("k", r, kT0, kT0 + 3600);
    EXPECT_TRUE(points.ok());
    return points.ok() ? SumServed(*points) : 0;
  };
  // A day and an hour later the minutes are gone — from queries at once, from disk after a
  // compaction — and the coarser buckets still hold the counts.
  clock.SetUnixMillis((kT0 + kDayS + 3600) * 1000);
  EXPECT_EQ(served(Resolution::kMinute), 0u);
  EXPECT_EQ(served(Resolution::kFiveMinutes), 120u);
  ASSERT_TRUE(store.ExpireNow().ok());
  EXPECT_EQ(*store.StoredBuckets(Resolution::kMinute), 0u);
  EXPECT_EQ(*store.StoredBuckets(Resolution::kFiveMinutes), 12u);

  clock.SetUnixMillis((kT0 + 8 * kDayS) * 1000);
  ASSERT_TRUE(store.ExpireNow().ok());
  EXPECT_EQ(*store.StoredBuckets(Resolution::kFiveMinutes), 0u);
  EXPECT_EQ(served(Resolution::kHour), 120u);

  clock.SetUnixMillis((kT0 + 31 * kDayS) * 1000);
  ASSERT_TRUE(store.ExpireNow().ok());
  EXPECT_EQ(*store.StoredBuckets(Resolution::kHour), 0u);
  EXPECT_EQ(*store.StoredBuckets(Resolution::kDay), 1u);
  EXPECT_EQ(served(Resolution::kHour), 0u);
  EXPECT_EQ(served(Resolution::kDay), 120u);
}

TEST(UsageStoreTest, CountsSurviveReopening) {
  TempDir dir;
  ManualClock clock(kT0 * 1000);
  {
    auto store = UsageStore::Open(dir.path(), clock);
    ASSERT_TRUE(store.ok());
    Counters c = Served(3);
    c.Count(Outcome::kLimited, "daily");
    c.AddSearchLatency(700);
    ASSERT_TRUE((*store)->Add({{"k", kT0, c}}, "b1").ok());
  }
  auto store = UsageStore::Open(dir.path(), clock);
  ASSERT_TRUE(store.ok());
  auto points = (*store)->Query("k", Resolution::kMinute, kT0, kT0 + 60);
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 1u);
  const Counters& c = (*points)[0].counters;
  EXPECT_EQ(c.served, 3u);
  EXPECT_EQ(c.limited, 1u);
  EXPECT_EQ(c.limited_by.at("daily"), 1u);
  EXPECT_EQ(c.searches, 1u);
  EXPECT_EQ(c.search_latency[4], 1u);  // 700 µs in [512, 1024)
}

TEST(UsageRecorderTest, TwoFrontDoorsOnOneStoreCountEveryRequestOnce) {
  TempDir dir;
  ManualClock clock(kT0 * 1000);
  auto store = UsageStore::Open(dir.path(), clock);
  ASSERT_TRUE(store.ok());
  // Two recorders (two front doors) flushing into one store while threads record and the
  // clock moves across minutes.
  UsageRecorder a(**store, clock, {.flush_interval_ms = 2});
  UsageRecorder b(**store, clock, {.flush_interval_ms = 3});
  a.Start();
  b.Start();
  constexpr int kThreads = 4, kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      UsageRecorder& r = t % 2 == 0 ? a : b;
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = "key" + std::to_string(i % 3);
        if (i % 10 == 0) {
          r.Record(key, Outcome::kLimited, i % 20 == 0 ? "per-minute" : "daily");
        } else {
          r.Record(key, Outcome::kServed, {}, 250);
        }
        if (t == 0 && i % 500 == 0) clock.AdvanceMillis(20'000);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  a.Stop();
  b.Stop();
  EXPECT_EQ(a.Stats().recorded + b.Stats().recorded, uint64_t{kThreads} * kPerThread);
  EXPECT_GT(a.Stats().flushes, 0u);

  const int64_t end = clock.NowUnixMillis() / 1000 + 60;
  uint64_t total = 0, limited = 0, per_minute = 0, searches = 0;
  for (std::string key : {"key0", "key1", "key2"}) {
    auto points = (*store)->Query(key, Resolution::kMinute, kT0, end);
    ASSERT_TRUE(points.ok());
    for (const Point& p : *points) {
      total += p.counters.requests();
      limited += p.counters.limited;
      searches += p.counters.searches;
      if (auto it = p.counters.limited_by.find("per-minute"); it != p.counters.limited_by.end()) {
        per_minute += it->second;
      }
    }
  }
  EXPECT_EQ(total, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(limited, uint64_t{kThreads} * kPerThread / 10);
  EXPECT_EQ(per_minute, uint64_t{kThreads} * kPerThread / 20);
  EXPECT_EQ(searches, uint64_t{kThreads} * kPerThread * 9 / 10);
  // The all-keys series is the sum, at every resolution.
  for (Resolution r : kResolutions) {
    auto all = (*store)->Query(kAllKeys, r, kT0, end);
    ASSERT_TRUE(all.ok());
    uint64_t n = 0;
    for (const Point& p : *all) n += p.counters.requests();
    EXPECT_EQ(n, uint64_t{kThreads} * kPerThread) << ResolutionName(r);
  }
}

// A store whose writes fail on demand: the recorder must keep the counts for the next flush.
class FlakyStore final : public UsageStore {
 public:
  explicit FlakyStore(UsageStore& real) : real_(real) {}
  bool fail = false;
  std::vector<std::string> batch_ids;  // of every Add, failed ones included
  absl::Status Add(const std::vector<Increment>& increments, std::string_view batch_id) override {
    batch_ids.emplace_back(batch_id);
    if (fail) return absl::UnavailableError("disk unplugged");
    return real_.Add(increments, batch_id);
  }
  absl::StatusOr<std::vector<Point>> Query(std::string_view key_id, Resolution r, int64_t from_s,
                                           int64_t to_s, size_t max_points) const override {
    return real_.Query(key_id, r, from_s, to_s, max_points);
  }
  absl::StatusOr<std::vector<std::string>> Keys() const override { return real_.Keys(); }
  absl::Status ExpireNow() override { return real_.ExpireNow(); }
  absl::StatusOr<uint64_t> StoredBuckets(Resolution r) const override {
    return real_.StoredBuckets(r);
  }

 private:
  UsageStore& real_;
};

// A failed batch is sent again as it was, under its id (a shared store may have written part
// of it), before the counts gathered since, which go in a batch of their own.
TEST(UsageRecorderTest, AFailedFlushKeepsTheCountsForTheNextOne) {
  TempDir dir;
  ManualClock clock(kT0 * 1000);
  auto real = UsageStore::Open(dir.path(), clock);
  ASSERT_TRUE(real.ok());
  FlakyStore store(**real);
  UsageRecorder recorder(store, clock);
  recorder.Record("k", Outcome::kServed);
  recorder.Record("k", Outcome::kLimited, "daily");
  store.fail = true;
  EXPECT_FALSE(recorder.Flush().ok());
  clock.AdvanceMillis(60'000);
  recorder.Record("k", Outcome::kServed);
  store.fail = false;
  ASSERT_TRUE(recorder.Flush().ok());
  EXPECT_EQ(recorder.Stats().flush_errors, 1u);
  ASSERT_EQ(store.batch_ids.size(), 3u);
  EXPECT_EQ(store.batch_ids[1], store.batch_ids[0]);
  EXPECT_NE(store.batch_ids[2], store.batch_ids[0]);
  auto points = (*real)->Query("k", Resolution::kMinute, kT0, kT0 + 120);
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 2u);
  EXPECT_EQ((*points)[0].counters.served, 1u);
  EXPECT_EQ((*points)[0].counters.limited_by.at("daily"), 1u);
  EXPECT_EQ((*points)[1].counters.served, 1u);
  auto all = (*real)->Query(kAllKeys, Resolution::kHour, kT0, kT0 + 120);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[0].counters.requests(), 3u);
  // Another recorder's ids are its own.
  UsageRecorder other(store, clock);
  other.Record("k", Outcome::kServed);
  ASSERT_TRUE(other.Flush().ok());
  ASSERT_EQ(store.batch_ids.size(), 4u);
  EXPECT_NE(store.batch_ids[3], store.batch_ids[0]);
  EXPECT_NE(store.batch_ids[3], store.batch_ids[2]);
}

}  // namespace
}  // namespace tweetsearch::usage
