#include "limiter/limiter.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "common/strings.h"
#include "limiter/local_limiter.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::limiter {
namespace {

constexpr std::string_view kRules = R"(
default_tier: free
tiers:
  free:
    search:
      - {name: per_second, limit: 3, window: 1s, algorithm: fixed_window}
      - {name: per_minute, limit: 5, window: 1m, algorithm: sliding_window_log}
    ingest:
      - {name: lines, limit: 100, window: 1m, algorithm: token_bucket}
      - {name: calls, limit: 3, window: 1m, cost: requests}
    all:
      - {name: watch, limit: 2, window: 1m, shadow: true}
  pro:
    search: [{name: pro_search, limit: 1000, window: 1s, algorithm: gcra}]
keys:
  ts_special:
    search: [{name: special, limit: 1, window: 1h}]
anonymous:
  all: [{name: per_ip, limit: 2, window: 1m}]
)";

class LimiterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rules = ParseRules(kRules);
    ASSERT_TRUE(rules.ok()) << rules.status();
    limiter_ = Limiter::CreateWithRules(*std::move(rules), {}, clock_);
  }
  Verdict Search(std::string_view key, std::string_view tier = "free") {
    return limiter_->Check({key, tier, "search", "10.0.0.1", 1, {}});
  }
  ManualClock clock_{1'767'225'600'000};
  std::unique_ptr<Limiter> limiter_;
};

TEST_F(LimiterTest, EveryLimitMustAdmitAndARefusalConsumesNothing) {
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Search("ts_alice").allowed) << i;
  Verdict v = Search("ts_alice");
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.limited_by, "per_second");
  EXPECT_GT(v.retry_after_ms, 0);
  EXPECT_LE(v.retry_after_ms, 1000);
  // The refused request did not count against per_minute: 2 more pass in the next second.
  clock_.AdvanceMillis(1000);
  EXPECT_TRUE(Search("ts_alice").allowed);
  v = Search("ts_alice");
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.remaining, 0u);  // per_minute is the most constraining now
  EXPECT_EQ(v.limit, 5u);
  EXPECT_EQ(v.Policy(), "3;w=1, 5;w=60");  // the shadow limit is not advertised
  v = Search("ts_alice");
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.limited_by, "per_minute");
  // Keys have quotas of their own.
  EXPECT_TRUE(Search("ts_bob").allowed);
}

TEST_F(LimiterTest, ShadowLimitsReportButNeverRefuse) {
  Verdict v;
  for (int i = 0; i < 3; ++i) v = Search("ts_carol");
  EXPECT_TRUE(v.allowed);
  ASSERT_EQ(v.shadow_exceeded.size(), 1u);
  EXPECT_EQ(v.shadow_exceeded[0], "watch");
  EXPECT_EQ(limiter_->Stats().shadow_exceeded, 1u);
}

TEST_F(LimiterTest, CostCountsUnitsOrRequests) {
  EXPECT_TRUE(limiter_->Check({"ts_dan", "free", "ingest", "", 60, {}}).allowed);
  Verdict v = limiter_->Check({"ts_dan", "free", "ingest", "", 60, {}});
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.limited_by, "lines");
  EXPECT_TRUE(limiter_->Check({"ts_dan", "free", "ingest", "", 40, {}}).allowed);
  EXPECT_FALSE(limiter_->Check({"ts_dan", "free", "ingest", "", 1, {}}).allowed);  // lines spent
  clock_.AdvanceMillis(60'000);
  EXPECT_TRUE(limiter_->Check({"ts_dan", "free", "ingest", "", 1, {}}).allowed);
  v = limiter_->Check({"ts_dan", "free", "ingest", "", 1, {}});
  // Two calls were admitted a minute ago; the sliding counter still weighs them fully.
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.limited_by, "calls");
}

TEST_F(LimiterTest, OverridesTiersAndAnonymousClients) {
  EXPECT_TRUE(Search("ts_special").allowed);
  EXPECT_EQ(Search("ts_special").limited_by, "special");
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(Search("ts_erin", "pro").allowed);
  // An unknown tier falls back to default_tier.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Search("ts_fay", "gold").allowed);
  EXPECT_FALSE(Search("ts_fay", "gold").allowed);
  // Requests without a key: per client IP.
  EXPECT_TRUE(limiter_->Check({"", "", "search", "192.0.2.7", 1, {}}).allowed);
  EXPECT_TRUE(limiter_->Check({"", "", "ingest", "192.0.2.7", 1, {}}).allowed);
  Verdict v = limiter_->Check({"", "", "search", "192.0.2.7", 1, {}});
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.limited_by, "per_ip");
  EXPECT_TRUE(limiter_->Check({"", "", "search", "2001:db8::1", 1, {}}).allowed);
}

TEST_F(LimiterTest, MemoryIsBoundedAndIdleKeysExpire) {
  LimiterOptions options;
  options.max_keys = 64 * 10;  // 10 per shard
  auto limiter = Limiter::CreateWithRules(*ParseRules(kRules), options, clock_);
  for (int i = 0; i < 100'000; ++i) {
    limiter->Check({"", "", "search", "2001:db8::" + std::to_string(i), 1, {}});
  }
  EXPECT_LE(limiter->Stats().keys, options.max_keys + 64);
  EXPECT_GT(limiter->Stats().evicted, 90'000u);
  // Idle past their lifetime, states are dropped as their shard is used: two windows for the
  // anonymous limit, a sliding window counter of a minute (its previous minute weighs until
  // the current one ends). After 61 s they are kept; after 121 s they go.
  auto touch_every_shard = [&](std::string_view prefix) {
    for (int i = 0; i < 64 * 4; ++i) {
      limiter->Check({"", "", "search", StrCat(prefix, i), 1, {}});
    }
  };
  clock_.AdvanceMillis(61'000);
  touch_every_shard("fresh-a");
  EXPECT_EQ(limiter->Stats().keys, options.max_keys);
  clock_.AdvanceMillis(60'000);
  touch_every_shard("fresh-b");
  EXPECT_LE(limiter->Stats().keys, size_t{64 * 8 + 64});
}

// The bound is over all shards: at exactly max_keys distinct keys nothing is evicted (a bound
// per shard evicted thousands early, in the shards hashing gave more than their share), and
// one key more evicts one.
TEST_F(LimiterTest, TheKeyBoundHoldsOverAllShardsAndEvictsNothingEarly) {
  LimiterOptions options;
  options.max_keys = 20'000;
  auto limiter = Limiter::CreateWithRules(*ParseRules(kRules), options, clock_);
  for (size_t i = 0; i < options.max_keys; ++i) {
    ASSERT_TRUE(
        limiter->Check({"", "", "search", "2001:db8::" + std::to_string(i), 1, {}}).allowed);
  }
  EXPECT_EQ(limiter->Stats().keys, options.max_keys);
  EXPECT_EQ(limiter->Stats().evicted, 0u);
  for (size_t i = 0; i < options.max_keys; ++i) {  // every state kept: the second call counts
    ASSERT_TRUE(
        limiter->Check({"", "", "search", "2001:db8::" + std::to_string(i), 1, {}}).allowed);
  }
  EXPECT_FALSE(limiter->Check({"", "", "search", "2001:db8::7", 1, {}}).allowed);  // 2 per minute
  limiter->Check({"", "", "search", "2001:db8::one-more", 1, {}});
  EXPECT_EQ(limiter->Stats().keys, options.max_keys);
  EXPECT_EQ(limiter->Stats().evicted, 1u);
}

// Callers on several threads sharing keys (and so shards): each key admits exactly its limit,
// never more. Run under ThreadSanitizer by the test command.
TEST_F(LimiterTest, ConcurrentCallersOnSharedKeysAdmitExactlyTheLimit) {
  constexpr int kKeys = 20, kThreads = 4, kCallsPerThread = 500;
  std::array<std::atomic<int>, kKeys> admitted{};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCallsPerThread; ++i) {
        const int k = (i * 7 + t) % kKeys;
        // ts_special: one search an hour (a per-key override), the rest: 5 a minute (free).
        const std::string key = k == 0 ? "ts_special" : StrCat("ts_", k);
        if (limiter_->Check({key, "free", "search", "", 1, {}}).allowed) ++admitted[k];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted[0].load(), 1);
  for (int k = 1; k < kKeys; ++k) EXPECT_EQ(admitted[k].load(), 3) << "key " << k;  // 3 a second
  // Every check counted once (the counts are kept per shard), and every refusal.
  constexpr uint64_t kChecks = kThreads * kCallsPerThread;
  const LimiterStats stats = limiter_->Stats();
  EXPECT_EQ(stats.checks, kChecks);
  EXPECT_EQ(stats.refused, kChecks - 1 - 3 * (kKeys - 1));
  // A check no limit applies to is counted too.
  EXPECT_TRUE(limiter_->Check({"ts_x", "free", "unlisted", "", 1, {}}).allowed);
  EXPECT_EQ(limiter_->Stats().checks, kChecks + 1);
}

TEST(RulesTest, StreamEventsHaveLimitsOfTheirOwnAndKeysACapOnOpenStreams) {
  auto rules = ParseRules(R"(
default_tier: free
tiers:
  free:
    stream: [{name: events, limit: 10, window: 1m, algorithm: fixed_window}]
    all: [{name: requests, limit: 2, window: 1m}]
    max_streams: 2
  pro: {max_streams: 50}
  open: {}
keys:
  ts_vip: {max_streams: 7}
)");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(MaxStreams(*rules, "ts_any", "free"), 2u);
  EXPECT_EQ(MaxStreams(*rules, "ts_any", "pro"), 50u);
  EXPECT_EQ(MaxStreams(*rules, "ts_any", "gold"), 2u);  // an unknown tier: default_tier's
  EXPECT_EQ(MaxStreams(*rules, "ts_any", "open"), std::nullopt);
  EXPECT_EQ(MaxStreams(*rules, "ts_vip", "free"), 7u);
  ManualClock clock(1'767'225'600'000);
  auto limiter = Limiter::CreateWithRules(*std::move(rules), {}, clock);
  EXPECT_EQ(limiter->MaxStreams("ts_vip", "pro"), 7u);
  // Events count in events, and "all" (a count of requests) does not apply to them.
  EXPECT_TRUE(limiter->Check({"ts_a", "free", "stream", "", 6, {}}).allowed);
  EXPECT_TRUE(limiter->Check({"ts_a", "free", "stream", "", 4, {}}).allowed);
  Verdict v = limiter->Check({"ts_a", "free", "stream", "", 1, {}});
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.limited_by, "events");
  EXPECT_TRUE(limiter->Check({"ts_a", "free", "search", "", 1, {}}).allowed);  // "all" fresh

  auto message = [](std::string_view yaml) {
    return std::string(ParseRules(yaml).status().message());
  };
  EXPECT_NE(message("tiers: {free: {max_streams: -1}}").find("tiers.free.max_streams"),
            std::string::npos);
  EXPECT_NE(message("tiers: {free: {max_streams: [1]}}").find("whole number"), std::string::npos);
  EXPECT_NE(message("anonymous: {max_streams: 3}").find("need a key"), std::string::npos);
}

TEST(RulesTest, BrokenRulesSayWhereAndWhy) {
  auto message = [](std::string_view yaml) {
    auto r = ParseRules(yaml);
    EXPECT_FALSE(r.ok()) << yaml;
    return std::string(r.status().message());
  };
  EXPECT_NE(message("tiers: {free: {search: [{limit: 0, window: 1m}]}}")
                .find("tiers.free.search[0].limit"),
            std::string::npos);
  EXPECT_NE(message("tiers: {free: {search: [{limit: 5, window: 1fortnight}]}}").find("window"),
            std::string::npos);
  EXPECT_NE(message("tiers: {free: {serch: [{limit: 5}]}}").find("endpoint must be"),
            std::string::npos);
  EXPECT_NE(
      message("tiers: {free: {search: [{limit: 5, algorithm: magic}]}}").find("unknown algorithm"),
      std::string::npos);
  EXPECT_NE(message("tiers: {free: {search: [{limit: 5, colour: red}]}}").find("unknown field"),
            std::string::npos);
  EXPECT_NE(message("tiers: {free: {search: [{limit: 5, max_wait: 1s}]}}").find("max_wait"),
            std::string::npos);
  EXPECT_NE(message("tiers: {free: {search: [{limit: 5, fail: maybe}]}}").find("share, open"),
            std::string::npos);
  EXPECT_NE(message("tier: {}").find("unknown key"), std::string::npos);
  EXPECT_NE(message("default_tier: gold\ntiers: {free: {}}").find("default_tier"),
            std::string::npos);
  EXPECT_NE(message("tiers: {free: {search: [{name: a, limit: 1}, {name: a, limit: 2}]}}")
                .find("used twice"),
            std::string::npos);
  EXPECT_NE(message("tiers: [").find("not YAML"), std::string::npos);
  EXPECT_EQ(*ParseDuration("250ms"), 250);
  EXPECT_EQ(*ParseDuration("2h"), 7'200'000);
  EXPECT_EQ(*ParseDuration("30"), 30'000);
  EXPECT_FALSE(ParseDuration("-1s").ok());
  EXPECT_FALSE(ParseDuration("ms").ok());
}

// The Redis backend's stand-in: mirrored from Redis's answers, cut to a front door's share,
// and keeping what it admits as debts until Redis is told.
TEST(LocalLimiterTest, MirrorsAShareOfWhatRedisLeftAndOwesWhatItAdmits) {
  auto rules = ParseRules(
      "tiers:\n  free:\n    search:\n"
      "      - {name: shared, limit: 21, window: 1m, algorithm: sliding_window_log}\n"
      "      - {name: alone, limit: 30, window: 1m, algorithm: gcra, fail: open}\n"
      "      - {name: tiny, limit: 1, window: 1m, algorithm: fixed_window}\n"
      "      - {name: strict, limit: 50, window: 1m, fail: closed}\n");
  ASSERT_TRUE(rules.ok()) << rules.status();
  const std::vector<RuleLimit>& limits = rules->tiers.at("free").at("search").limits;
  EXPECT_FALSE(RefusesWithoutRedis(limits[0], 2));
  EXPECT_FALSE(RefusesWithoutRedis(limits[1], 2));
  EXPECT_TRUE(RefusesWithoutRedis(limits[2], 2));  // one unit cannot be shared by two
  EXPECT_FALSE(RefusesWithoutRedis(limits[2], 1));
  EXPECT_TRUE(RefusesWithoutRedis(limits[3], 1));
  const Rules shared = ShareRules(*rules, 2);
  const std::vector<RuleLimit>& cut = shared.tiers.at("free").at("search").limits;
  EXPECT_EQ(cut[0].limit.limit, 10u);  // 21 / 2, rounded down
  EXPECT_EQ(cut[1].limit.limit, 30u);  // fail: open keeps the whole limit
  EXPECT_EQ(cut[0].limit.window_ms, 60'000);

  // Without the two limits that refuse anyway: Redis said 9 of 21 and 12 of 30 were left.
  Rules decided = shared;
  decided.tiers["free"]["search"].limits.resize(2);
  ManualClock clock(1'767'225'600'000);
  auto local = CreateLocalLimiter(decided, {}, clock);
  const CheckRequest request{"ts_a", "free", "search", "", 1, {}};
  const uint64_t remaining[] = {9, 12};
  local->Mirror(request, remaining, 2, clock.NowUnixMillis());
  int admitted = 0;
  while (local->Check(request).allowed) ++admitted;
  EXPECT_EQ(admitted, 4);  // this front door's half of 9, rounded down

  std::vector<uint64_t> debts(2);
  EXPECT_TRUE(local->TakeDebts(request, debts));
  EXPECT_EQ(debts, (std::vector<uint64_t>{4, 4}));
  EXPECT_FALSE(local->TakeDebts(request, debts));  // taken: nothing more is owed
  EXPECT_EQ(debts, (std::vector<uint64_t>{0, 0}));
  const uint64_t back[] = {4, 4};
  local->ReturnDebts(request, back);  // the call that carried them failed
  EXPECT_TRUE(local->TakeDebts(request, debts));
  EXPECT_EQ(debts, (std::vector<uint64_t>{4, 4}));

  // A fail: open limit mirrors the whole remainder: 3 of 30 left admits 3.
  const uint64_t low[] = {21, 3};
  local->Mirror(request, low, 2, clock.NowUnixMillis());
  admitted = 0;
  while (local->Check(request).allowed) ++admitted;
  EXPECT_EQ(admitted, 3);
  // Once the window has passed, the share is half the limit again.
  clock.AdvanceMillis(60'001);
  admitted = 0;
  while (local->Check(request).allowed) ++admitted;
  EXPECT_EQ(admitted, 10);
}

// A check with one limit decides and commits in one step: a lone shadow limit that goes over
// admits the request but counts nothing, so nothing is owed to Redis for it; a single enforced
// limit owes what it admitted.
TEST(LocalLimiterTest, ALoneLimitOwesOnlyWhatItCounted) {
  auto rules = ParseRules(
      "tiers:\n  free:\n    search:\n"
      "      - {name: watch, limit: 2, window: 1m, algorithm: fixed_window, shadow: true}\n"
      "    ingest:\n"
      "      - {name: lines, limit: 3, window: 1m, algorithm: token_bucket}\n");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ManualClock clock(1'767'225'600'000);
  auto local = CreateLocalLimiter(*rules, {}, clock);
  const CheckRequest search{"ts_a", "free", "search", "", 1, {}};
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(local->Check(search).allowed) << i;
  std::vector<uint64_t> debts(1);
  EXPECT_TRUE(local->TakeDebts(search, debts));
  EXPECT_EQ(debts[0], 2u);  // the shadow limit counted 2 of the 5
  const CheckRequest ingest{"ts_a", "free", "ingest", "", 2, {}};
  EXPECT_TRUE(local->Check(ingest).allowed);
  EXPECT_FALSE(local->Check(ingest).allowed);  // 2 of 3 lines left 1
  EXPECT_TRUE(local->TakeDebts(ingest, debts));
  EXPECT_EQ(debts[0], 2u);
}

TEST(RulesTest, TheExampleFileParses) {
  auto rules = LoadRulesFile(std::string(TWEETSEARCH_SOURCE_DIR) + "/data/limits.example.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->tiers.at("free").at("search").limits.size(), 3u);
}

TEST(RulesTest, ReloadKeepsThePreviousRulesWhenTheFileIsBroken) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/limits.yaml";
  ASSERT_TRUE(
      WriteFileAtomically(path, "tiers: {free: {search: [{name: a, limit: 2, window: 1m}]}}").ok());
  ManualClock clock(1'000'000);
  LimiterOptions options;
  options.rules_path = path;
  auto limiter = Limiter::Create(options, clock);
  ASSERT_TRUE(limiter.ok());
  auto search = [&] { return (*limiter)->Check({"ts_k", "free", "search", "", 1, {}}); };
  EXPECT_TRUE(search().allowed);
  ASSERT_TRUE(WriteFileAtomically(path, "tiers: {free: {search: [{name: a, limit: oops}]}}").ok());
  absl::Status s = (*limiter)->Reload();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("limits.yaml"), std::string::npos);
  EXPECT_TRUE(search().allowed);  // the old rules, and the old state: 2 used
  EXPECT_FALSE(search().allowed);
  // A good file takes over; an unchanged limit keeps its state, a changed one starts afresh.
  ASSERT_TRUE(
      WriteFileAtomically(path, "tiers: {free: {search: [{name: a, limit: 3, window: 1m}]}}").ok());
  ASSERT_TRUE((*limiter)->Reload().ok());
  EXPECT_TRUE(search().allowed);
  EXPECT_EQ((*limiter)->Stats().reloads, 1u);
  EXPECT_EQ((*limiter)->Stats().reload_errors, 1u);
  EXPECT_FALSE(Limiter::Create({path + ".missing"}, clock).ok());
}

}  // namespace
}  // namespace tweetsearch::limiter
