// The Redis backend against a real redis-server on loopback.
#include "limiter/redis_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "common/strings.h"
#include "tests/testing/corpus.h"
#include "tests/testing/redis_server.h"

namespace tweetsearch::limiter {
namespace {

constexpr Algorithm kAll[] = {
    Algorithm::kTokenBucket, Algorithm::kLeakyBucketMeter, Algorithm::kLeakyBucketQueue,
    Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
    Algorithm::kGcra};

Rules TwoLimits(Algorithm a, uint64_t limit, int64_t window_ms, bool fail_closed = false) {
  Rules rules;
  RuleSet set;
  RuleLimit fast;
  fast.limit = {"fast", a, limit, window_ms, a == Algorithm::kLeakyBucketQueue ? 300 : 0, false};
  fast.fail_closed = fail_closed;
  RuleLimit slow;
  slow.limit = {"slow", Algorithm::kSlidingWindowCounter, limit * 3, window_ms * 10, 0, false};
  RuleLimit watch;
  watch.limit = {"watch", Algorithm::kFixedWindow, limit / 2 + 1, window_ms, 0, true};
  set.limits = {fast, slow, watch};
  set.max_window_ms = window_ms * 10;
  rules.tiers["free"]["search"] = set;
  return rules;
}

class RedisLimiterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_unique<testing::RedisServer>(dir_.path());
    ASSERT_TRUE(redis_->Start()) << "redis-server did not start";
    options_.port = redis_->port();
    options_.command_timeout_ms = 500;  // sanitizer builds are slow
  }
  testing::TempDir dir_;
  std::unique_ptr<testing::RedisServer> redis_;
  RedisOptions options_;
};

// Redis's Lua and the in-process C++ give the same decision, remaining count and retry time
// for every algorithm, on a random trace with several limits per request.
TEST_F(RedisLimiterTest, DecidesExactlyAsTheInProcessLimiter) {
  for (Algorithm a : kAll) {
    ManualClock clock(1'767'225'600'000);
    auto memory = Limiter::CreateWithRules(TwoLimits(a, 10, 1000), {}, clock);
    RedisOptions o = options_;
    o.key_prefix = std::string("eq:") + std::string(AlgorithmName(a)) + ":";
    auto redis = CreateRedisLimiterWithRules(TwoLimits(a, 10, 1000), {}, o, clock);
    std::mt19937_64 rng(static_cast<uint64_t>(a) + 1);
    for (int i = 0; i < 600; ++i) {
      clock.AdvanceMillis(static_cast<int64_t>(rng() % 4 == 0 ? rng() % 400 : 0));
      const std::string key = "ts_" + std::to_string(rng() % 3);
      const uint64_t units = 1 + rng() % 3;
      const Verdict m = memory->Check({key, "free", "search", "", units, {}});
      const Verdict r = redis->Check({key, "free", "search", "", units, {}});
      ASSERT_EQ(m.allowed, r.allowed) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.limited_by, r.limited_by) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.remaining, r.remaining) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.retry_after_ms, r.retry_after_ms) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.delay_ms, r.delay_ms) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.shadow_exceeded, r.shadow_exceeded) << AlgorithmName(a) << " step " << i;
    }
    EXPECT_TRUE(redis->Stats().redis_up);
    EXPECT_EQ(redis->Stats().local_fallbacks, 0u);
  }
}

// Idle gaps around one and two windows, where a backend may drop a state and where a sliding
// window counter's previous window stops weighing: the in-process backend, with its rules
// parsed as a rules file is, decides as Redis does. (Its sliding window counter states were
// dropped after one idle window while their previous window still weighed for another: 75 of
// 7,170 decisions differed on such a trace.)
TEST_F(RedisLimiterTest, IdleGapsOfOneToTwoWindowsDecideAlikeInBothBackends) {
  constexpr int64_t kGaps[] = {0, 0, 0, 1, 999, 1000, 1001, 1500, 1999, 2000, 2001, 2299, 2300};
  for (Algorithm a : kAll) {
    const std::string yaml =
        StrCat("tiers:\n  free:\n    search:\n      - {name: fast, limit: 10, window: 1s, ",
               "algorithm: ", AlgorithmName(a),
               a == Algorithm::kLeakyBucketQueue ? ", max_wait: 300ms" : "", "}\n");
    absl::StatusOr<Rules> rules = ParseRules(yaml);
    ASSERT_TRUE(rules.ok()) << rules.status();
    ManualClock clock(1'767'225'600'000);
    auto memory = Limiter::CreateWithRules(*rules, {}, clock);
    RedisOptions o = options_;
    o.key_prefix = StrCat("idle:", AlgorithmName(a), ":");
    auto redis = CreateRedisLimiterWithRules(*rules, {}, o, clock);
    std::mt19937_64 rng(static_cast<uint64_t>(a) + 11);
    int refused = 0;
    for (int i = 0; i < 1500; ++i) {
      // Bursts (no gap) fill the limit; the gaps land on and around the boundaries.
      clock.AdvanceMillis(rng() % 3 == 0 ? kGaps[rng() % std::size(kGaps)] : 0);
      const std::string key = "ts_" + std::to_string(rng() % 2);
      const uint64_t units = 1 + rng() % 3;
      const Verdict m = memory->Check({key, "free", "search", "", units, {}});
      const Verdict r = redis->Check({key, "free", "search", "", units, {}});
      ASSERT_EQ(m.allowed, r.allowed) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.remaining, r.remaining) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.retry_after_ms, r.retry_after_ms) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.delay_ms, r.delay_ms) << AlgorithmName(a) << " step " << i;
      refused += !m.allowed;
    }
    EXPECT_GT(refused, 100) << AlgorithmName(a) << ": the trace must reach the limit";
    EXPECT_EQ(redis->Stats().local_fallbacks, 0u);
  }
}

// Two front doors (two limiters, as two processes would have) under concurrent load on the
// same keys never admit more than the limit together.
TEST_F(RedisLimiterTest, TwoFrontDoorsShareExactQuotas) {
  ManualClock clock(1'767'225'600'000);
  Rules rules;
  RuleSet set;
  RuleLimit hourly;
  hourly.limit = {"hourly", Algorithm::kSlidingWindowLog, 40, 3'600'000, 0, false};
  set.limits = {hourly};
  set.max_window_ms = 3'600'000;
  rules.tiers["free"]["search"] = set;
  auto door_a = CreateRedisLimiterWithRules(rules, {}, options_, clock);
  auto door_b = CreateRedisLimiterWithRules(rules, {}, options_, clock);
  constexpr int kKeys = 20;
  std::array<std::atomic<int>, kKeys> admitted{};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Limiter& door = t % 2 ? *door_a : *door_b;
      for (int i = 0; i < 200; ++i) {
        const int k = (i * 7 + t) % kKeys;
        if (door.Check({"ts_" + std::to_string(k), "free", "search", "", 1, {}}).allowed)
          ++admitted[k];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(admitted[k].load(), 40) << "key " << k;
  EXPECT_EQ(door_a->Stats().local_fallbacks + door_b->Stats().local_fallbacks, 0u);
}

// Redis down: fail-open limits are decided locally, fail-closed ones refuse; when Redis comes
// back, the limiter returns to it by itself.
TEST_F(RedisLimiterTest, SurvivesAnOutageAndRecovers) {
  ManualClock clock(1'767'225'600'000);
  Rules rules = TwoLimits(Algorithm::kGcra, 5, 60'000);
  Rules closed = TwoLimits(Algorithm::kGcra, 5, 60'000, /*fail_closed=*/true);
  closed.tiers["strict"] = closed.tiers["free"];
  rules.tiers["strict"] = closed.tiers["strict"];
  RedisOptions o = options_;
  o.retry_interval_ms = 1000;
  auto limiter = CreateRedisLimiterWithRules(rules, {}, o, clock);
  EXPECT_TRUE(limiter->Check({"ts_a", "free", "search", "", 1, {}}).allowed);
  EXPECT_TRUE(limiter->Stats().redis_up);

  redis_->Stop();
  Verdict open = limiter->Check({"ts_a", "free", "search", "", 1, {}});
  EXPECT_TRUE(open.allowed);  // local limits: a fresh local state
  EXPECT_FALSE(limiter->Stats().redis_up);
  Verdict strict = limiter->Check({"ts_b", "strict", "search", "", 1, {}});
  EXPECT_FALSE(strict.allowed);
  EXPECT_NE(strict.limited_by.find("quota store unavailable"), std::string::npos);
  for (int i = 0; i < 10; ++i) limiter->Check({"ts_c", "free", "search", "", 1, {}});
  EXPECT_FALSE(limiter->Check({"ts_c", "free", "search", "", 1, {}}).allowed);  // local limits hold
  EXPECT_GE(limiter->Stats().local_fallbacks, 12u);

  ASSERT_TRUE(redis_->Start());
  // Within the retry interval the limiter stays local; after it, it uses Redis again (which
  // lost its scripts and data: the script is loaded again).
  clock.AdvanceMillis(1001);
  EXPECT_TRUE(limiter->Check({"ts_d", "free", "search", "", 1, {}}).allowed);
  EXPECT_TRUE(limiter->Stats().redis_up);
  EXPECT_TRUE(limiter->Check({"ts_b", "strict", "search", "", 1, {}}).allowed);
}

// A frozen Redis (SIGSTOP: connections open, nothing answers). The checks in flight when it
// froze wait out one command timeout on each lane; every check after that is decided locally
// at once, including the ones queued behind a failing call; once the retry interval has passed,
// exactly one caller probes Redis while the others stay local; and when it answers again the
// limiter uses it again. (Before, each caller queued behind a failing call tried Redis again
// and waited out its own timeout.)
TEST_F(RedisLimiterTest, AFrozenRedisIsProbedByOneCallerWhileTheOthersDecideLocally) {
  ManualClock clock(1'767'225'600'000);
  auto limiter = CreateRedisLimiterWithRules(TwoLimits(Algorithm::kFixedWindow, 100'000, 60'000),
                                             {}, options_, clock);
  ASSERT_TRUE(limiter->Check({"ts_a", "free", "search", "", 1, {}}).allowed);
  ASSERT_TRUE(limiter->Stats().redis_up);
  const uint64_t errors_before = limiter->Stats().redis_errors;

  auto hammer = [&] {  // 8 callers, 25 checks each, all answered (local limits admit them)
    std::atomic<int> admitted{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 8; ++t) {
      callers.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) {
          admitted +=
              limiter->Check({"ts_" + std::to_string(t), "free", "search", "", 1, {}}).allowed;
        }
      });
    }
    for (auto& c : callers) c.join();
    return admitted.load();
  };
  redis_->Pause();
  EXPECT_EQ(hammer(), 200);
  const uint64_t failed_in_flight = limiter->Stats().redis_errors - errors_before;
  EXPECT_GE(failed_in_flight, 1u);
  EXPECT_LE(failed_in_flight, static_cast<uint64_t>(options_.pool_size));  // one per lane
  EXPECT_FALSE(limiter->Stats().redis_up);

  clock.AdvanceMillis(options_.retry_interval_ms + 1);
  EXPECT_EQ(hammer(), 200);
  EXPECT_EQ(limiter->Stats().redis_errors - errors_before, failed_in_flight + 1);  // one probe

  redis_->Resume();
  clock.AdvanceMillis(options_.retry_interval_ms + 1);
  EXPECT_TRUE(limiter->Check({"ts_b", "free", "search", "", 1, {}}).allowed);
  EXPECT_TRUE(limiter->Stats().redis_up);
  EXPECT_EQ(hammer(), 200);
  EXPECT_EQ(limiter->Stats().redis_errors - errors_before, failed_in_flight + 1);
}

}  // namespace
}  // namespace tweetsearch::limiter
