// The Redis backend against a real redis-server on loopback.
#include "limiter/redis_limiter.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <barrier>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "common/strings.h"
#include "limiter/redis_script.h"
#include "tests/testing/corpus.h"
#include "tests/testing/redis_server.h"

namespace tweetsearch::limiter {
namespace {

constexpr Algorithm kAll[] = {
    Algorithm::kTokenBucket, Algorithm::kLeakyBucketMeter, Algorithm::kLeakyBucketQueue,
    Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
    Algorithm::kGcra};

Rules TwoLimits(Algorithm a, uint64_t limit, int64_t window_ms, FailMode fail = FailMode::kShare) {
  Rules rules;
  RuleSet set;
  RuleLimit fast;
  fast.limit = {"fast", a, limit, window_ms, a == Algorithm::kLeakyBucketQueue ? 300 : 0, false};
  fast.fail = fail;
  RuleLimit slow;
  slow.limit = {"slow", Algorithm::kSlidingWindowCounter, limit * 3, window_ms * 10, 0, false};
  RuleLimit watch;
  watch.limit = {"watch", Algorithm::kFixedWindow, limit / 2 + 1, window_ms, 0, true};
  set.limits = {fast, slow, watch};
  set.max_window_ms = window_ms * 10;
  rules.tiers["free"]["search"] = set;
  return rules;
}

// A plain connection, for the tests that talk to Redis beside the limiter.
struct RawRedis {
  explicit RawRedis(int port) : c(redisConnect("127.0.0.1", port)) {}
  ~RawRedis() { redisFree(c); }
  // Runs a command; its reply's integer elements (or its integer).
  std::vector<int64_t> Run(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lengths.data()));
    std::vector<int64_t> out;
    if (reply == nullptr) return out;
    if (reply->type == REDIS_REPLY_INTEGER) out.push_back(reply->integer);
    for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; ++i) {
      if (reply->element[i]->type == REDIS_REPLY_INTEGER) out.push_back(reply->element[i]->integer);
    }
    freeReplyObject(reply);
    return out;
  }
  // How many times Redis has run a script by its digest (EVALSHA).
  int64_t ScriptsRun() {
    auto* reply = static_cast<redisReply*>(redisCommand(c, "INFO commandstats"));
    int64_t calls = 0;
    if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
      const std::string_view text(reply->str, reply->len);
      const size_t at = text.find("cmdstat_evalsha:calls=");
      if (at != std::string_view::npos) calls = std::atoll(text.data() + at + 22);
    }
    if (reply != nullptr) freeReplyObject(reply);
    return calls;
  }
  redisContext* c;
};

// One search limit for tier "free".
Rules OneLimit(std::string name, Algorithm a, uint64_t limit, int64_t window_ms) {
  Rules rules;
  RuleSet set;
  RuleLimit r;
  r.limit = {
      std::move(name), a, limit, window_ms, a == Algorithm::kLeakyBucketQueue ? 200 : 0, false};
  set.limits = {r};
  set.max_window_ms = StateLifetimeMs(r.limit);
  rules.tiers["free"]["search"] = set;
  return rules;
}

// The parts of a decision both backends must give alike for any rules: admitted or not, by
// which limit, what is left, when to retry, how long to wait.
void ExpectSameDecision(const Verdict& m, const Verdict& r, Algorithm a, int step) {
  ASSERT_EQ(m.allowed, r.allowed) << AlgorithmName(a) << " step " << step;
  ASSERT_EQ(m.limited_by, r.limited_by) << AlgorithmName(a) << " step " << step;
  ASSERT_EQ(m.remaining, r.remaining) << AlgorithmName(a) << " step " << step;
  ASSERT_EQ(m.retry_after_ms, r.retry_after_ms) << AlgorithmName(a) << " step " << step;
  ASSERT_EQ(m.delay_ms, r.delay_ms) << AlgorithmName(a) << " step " << step;
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
      ASSERT_NO_FATAL_FAILURE(ExpectSameDecision(m, r, a, i));
      ASSERT_EQ(m.shadow_exceeded, r.shadow_exceeded) << AlgorithmName(a) << " step " << i;
    }
    EXPECT_TRUE(redis->Stats().redis_up);
    EXPECT_EQ(redis->Stats().local_fallbacks, 0u);
  }
}

// Units a front door admitted on its own while Redis was unreachable are charged by the script
// exactly as algorithm.h's Charge does: random traces of charges and decisions give the same
// decisions, remaining counts and retry times through Redis's Lua and through the C++.
TEST_F(RedisLimiterTest, ChargesOfUnitsAdmittedElsewhereAreAlikeInLuaAndCpp) {
  RawRedis raw(redis_->port());
  for (Algorithm a : kAll) {
    const Limit limit{"l", a, 10, 1000, a == Algorithm::kLeakyBucketQueue ? 300 : 0, false};
    std::map<int, State> states;
    std::mt19937_64 rng(static_cast<uint64_t>(a) + 101);
    int64_t now = 1'767'225'600'000;
    int charged = 0;
    for (int i = 0; i < 800; ++i) {
      now += static_cast<int64_t>(rng() % 3 == 0 ? rng() % 700 : 0);
      const int key = static_cast<int>(rng() % 2);
      const uint64_t cost = 1 + rng() % 3;
      const uint64_t debt = rng() % 4 == 0 ? rng() % 14 : 0;
      charged += debt > 0;
      auto [it, fresh] = states.try_emplace(key, NewState(a));
      Charge(limit, it->second, now, debt);
      // As the limiters do: a dry run decides, and an admitted request is then committed.
      const Decision d = Decide(limit, it->second, now, cost, /*commit=*/false);
      if (d.allowed) Decide(limit, it->second, now, cost);
      // One check: no deadline, one check, its now, one limit and the limit's seven.
      const std::vector<int64_t> r =
          raw.Run({"EVAL", kDecideScript, "1", StrCat("charge:", AlgorithmName(a), ":", key), "0",
                   "1", StrCat(now), "1", StrCat(static_cast<int>(a)), "10", "1000",
                   StrCat(limit.max_wait_ms), StrCat(cost), "0", StrCat(debt)});
      ASSERT_EQ(r.size(), 5u) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(d.allowed, r[0] == 1) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(static_cast<int64_t>(d.remaining), r[1]) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(d.retry_after_ms, r[2]) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(d.reset_ms, r[3]) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(d.delay_ms, r[4]) << AlgorithmName(a) << " step " << i;
    }
    EXPECT_GT(charged, 100) << AlgorithmName(a);
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

// A check of one limit and one unit that Redis refused is refused again without Redis until
// its retry time, with the verdict Redis would give: on random traces of one-limit rules, the
// answers equal the in-process backend's (retry, reset, remaining and all), many of them given
// without a script call. A raised limit is asked of Redis at once.
TEST_F(RedisLimiterTest, RefusalsAreAnsweredAgainAsRedisWouldUntilTheirRetryTime) {
  for (Algorithm a : kAll) {
    const Rules rules = OneLimit("l", a, 10, 1000);
    ManualClock clock(1'767'225'600'000);
    auto memory = Limiter::CreateWithRules(rules, {}, clock);
    RedisOptions o = options_;
    o.key_prefix = StrCat("again:", AlgorithmName(a), ":");
    o.register_interval_ms = 3'600'000;  // registering rides on calls: not during the trace
    auto redis = CreateRedisLimiterWithRules(rules, {}, o, clock);
    RawRedis raw(redis_->port());
    const int64_t scripts_before = raw.ScriptsRun();
    std::mt19937_64 rng(static_cast<uint64_t>(a) + 21);
    constexpr int kSteps = 1500;
    for (int i = 0; i < kSteps; ++i) {
      clock.AdvanceMillis(static_cast<int64_t>(rng() % 8 == 0 ? rng() % 700 : rng() % 3));
      const std::string key = "ts_" + std::to_string(rng() % 2);
      const Verdict m = memory->Check({key, "free", "search", "", 1, {}});
      const Verdict r = redis->Check({key, "free", "search", "", 1, {}});
      ASSERT_NO_FATAL_FAILURE(ExpectSameDecision(m, r, a, i));
      ASSERT_EQ(m.reset_ms, r.reset_ms) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.limit, r.limit) << AlgorithmName(a) << " step " << i;
      ASSERT_EQ(m.Policy(), r.Policy()) << AlgorithmName(a) << " step " << i;
    }
    const uint64_t again = redis->Stats().refused_again;
    EXPECT_GT(again, 200u) << AlgorithmName(a);
    // Every other check is one script call (and the first maybe two: NOSCRIPT, then loaded).
    const int64_t scripts = raw.ScriptsRun() - scripts_before;
    EXPECT_GE(scripts, static_cast<int64_t>(kSteps - again)) << AlgorithmName(a);
    EXPECT_LE(scripts, static_cast<int64_t>(kSteps - again) + 1) << AlgorithmName(a);

    // The limit raised: the next check goes to Redis, which admits it.
    Rules raised = OneLimit("l", a, 1000, 1000);
    redis->SetRules(raised);
    memory->SetRules(raised);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(redis->Check({"ts_" + std::to_string(i), "free", "search", "", 1, {}}).allowed,
                memory->Check({"ts_" + std::to_string(i), "free", "search", "", 1, {}}).allowed)
          << AlgorithmName(a);
    }
  }
}

// Sliding logs kept by earlier versions of the script (the set alone with its sequence beside
// it; or a hash of total and sequence, without the newest entry's time) are read as they were
// meant: the same answers as a log the script wrote itself, and an admission goes on from them.
TEST_F(RedisLimiterTest, SlidingLogsKeptByEarlierScriptsDecideAsTheirEntriesSay) {
  RawRedis raw(redis_->port());
  const int64_t now = 1'767'225'600'000;
  auto decide = [&](const std::string& key, uint64_t cost) {
    return raw.Run({"EVAL", kDecideScript, "1", key, "0", "1", StrCat(now), "1",
                    StrCat(static_cast<int>(Algorithm::kSlidingWindowLog)), "10", "1000", "0",
                    StrCat(cost), "0", "0"});
  };
  // Three entries of costs 2, 1 and 3 at now − 1200 (expired), now − 900 and now − 100, and
  // one of cost 2 at now − 500: 6 units count.
  auto write_entries = [&](const std::string& key) {
    raw.Run({"ZADD", key, StrCat(now - 1200), "1:2", StrCat(now - 900), "2:1", StrCat(now - 500),
             "3:2", StrCat(now - 100), "4:3"});
  };
  write_entries("oldest");
  raw.Run({"SET", "oldest:n", "4"});
  write_entries("older");
  raw.Run({"HSET", "older:h", "t", "8", "n", "4"});  // the expired entry still counted
  for (const std::string key : {"oldest", "older"}) {
    // 6 + 5 > 10: refused until the entry of now − 900 leaves (5 + 5 <= 10), in 100 ms; the
    // newest leaves in 900 ms.
    EXPECT_EQ(decide(key, 5), (std::vector<int64_t>{0, 4, 100, 900, 0})) << key;
    // Admitted: full again once this request's entry leaves, in 1000 ms.
    EXPECT_EQ(decide(key, 4), (std::vector<int64_t>{1, 0, 0, 1000, 0})) << key;
    EXPECT_EQ(decide(key, 1), (std::vector<int64_t>{0, 0, 100, 1000, 0})) << key;
    EXPECT_EQ(raw.Run({"ZCARD", key}), std::vector<int64_t>{4}) << key;  // the expired one went
    EXPECT_EQ(raw.Run({"HINCRBY", key + ":h", "n", "0"}), std::vector<int64_t>{5}) << key;
  }
}

// Window states get their expiry once per window, when the window's state is first written:
// a fixed window's at the window's end, a sliding counter's when both of its windows have slid
// out (a second later each); later admissions in the same window leave it running.
TEST_F(RedisLimiterTest, WindowStatesExpireOnceTheirWindowsCountNoMore) {
  RawRedis raw(redis_->port());
  const int64_t start = 1'767'225'600'000;  // a multiple of the window
  auto decide = [&](Algorithm a, int64_t now) {
    return raw.Run({"EVAL", kDecideScript, "1", StrCat("ttl:", AlgorithmName(a)), "0", "1",
                    StrCat(now), "1", StrCat(static_cast<int>(a)), "10", "10000", "0", "1", "0",
                    "0"});
  };
  auto pttl = [&](Algorithm a) { return raw.Run({"PTTL", StrCat("ttl:", AlgorithmName(a))})[0]; };
  for (const auto& [a, expiry] : {std::pair{Algorithm::kFixedWindow, int64_t{10'000 + 1'000}},
                                  std::pair{Algorithm::kSlidingWindowCounter, int64_t{21'000}}}) {
    ASSERT_EQ(decide(a, start + 4'000)[0], 1) << AlgorithmName(a);
    const int64_t first = pttl(a);
    EXPECT_LE(first, expiry - 4'000) << AlgorithmName(a);
    EXPECT_GT(first, expiry - 4'000 - 1'000) << AlgorithmName(a);
    ASSERT_EQ(decide(a, start + 9'000)[0], 1) << AlgorithmName(a);
    EXPECT_LE(pttl(a), first) << AlgorithmName(a) << ": the same window's expiry, not moved on";
    ASSERT_EQ(decide(a, start + 12'000)[0], 1) << AlgorithmName(a);  // the next window
    // The new window's: 2 s later than the first's (it started 10 s later, asked 8 s later).
    EXPECT_GT(pttl(a), first + 1'000) << AlgorithmName(a) << ": a new window's expiry";
  }
}

// Two front doors (two limiters, as two processes would have) under concurrent load on the
// same keys never admit more than the limit together.
TEST_F(RedisLimiterTest, TwoFrontDoorsShareExactQuotas) {
  ManualClock clock(1'767'225'600'000);
  const Rules rules = OneLimit("hourly", Algorithm::kSlidingWindowLog, 40, 3'600'000);
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

// Redis down: limits are decided locally (from Redis's last answer), fail-closed ones refuse; when
// Redis comes back, the limiter returns to it by itself.
TEST_F(RedisLimiterTest, SurvivesAnOutageAndRecovers) {
  ManualClock clock(1'767'225'600'000);
  Rules rules = TwoLimits(Algorithm::kGcra, 5, 60'000);
  Rules closed = TwoLimits(Algorithm::kGcra, 5, 60'000, FailMode::kClosed);
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
  // Within the retry interval the limiter stays local; after it, one check probes Redis
  // (which lost its scripts and data: the script is loaded again) and carries what was
  // admitted locally; then it settles, still deciding locally for a retry interval (and two
  // timeouts) while other front doors carry theirs, and then it uses Redis again.
  clock.AdvanceMillis(1001);
  EXPECT_TRUE(limiter->Check({"ts_d", "free", "search", "", 1, {}}).allowed);
  EXPECT_TRUE(limiter->Stats().redis_up);
  EXPECT_FALSE(limiter->Check({"ts_b", "strict", "search", "", 1, {}}).allowed);  // settling
  const uint64_t fallbacks = limiter->Stats().local_fallbacks;
  clock.AdvanceMillis(o.retry_interval_ms + 2 * o.command_timeout_ms);
  EXPECT_TRUE(limiter->Check({"ts_b", "strict", "search", "", 1, {}}).allowed);
  EXPECT_EQ(limiter->Stats().local_fallbacks, fallbacks);
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

// A check whose script reaches a frozen Redis only after the check stopped waiting is decided
// locally, and the script, run once Redis thaws, changes nothing: the request counts once.
// (Before, it counted in Redis and locally, and the local admission was charged to nobody.)
TEST_F(RedisLimiterTest, AScriptThatRunsAfterItsCallerGaveUpCountsNothing) {
  ManualClock clock(1'767'225'600'000);
  const Rules rules = OneLimit("fixed", Algorithm::kFixedWindow, 10, 60'000);
  RedisOptions o = options_;
  o.command_timeout_ms = 200;
  o.pool_size = 1;  // the frozen call goes out on the connection the first one made
  auto limiter = CreateRedisLimiterWithRules(rules, {}, o, clock);
  const CheckRequest request{"ts_a", "free", "search", "", 1, {}};
  RawRedis raw(redis_->port());
  ASSERT_EQ(limiter->Check(request).remaining, 9u);
  const int64_t scripts_before = raw.ScriptsRun();

  redis_->Pause();
  const Verdict local = limiter->Check(request);  // times out; decided locally
  EXPECT_TRUE(local.allowed);
  EXPECT_EQ(local.remaining, 8u);  // went on from Redis's last answer
  EXPECT_FALSE(limiter->Stats().redis_up);
  redis_->Resume();
  // The frozen script runs now, late (each look is a round trip to Redis).
  for (int i = 0; i < 200'000 && raw.ScriptsRun() < scripts_before + 1; ++i) {
  }
  ASSERT_EQ(raw.ScriptsRun(), scripts_before + 1);

  clock.AdvanceMillis(o.retry_interval_ms + 1);
  const Verdict probe = limiter->Check(request);  // carries the local admission; settles
  EXPECT_TRUE(limiter->Stats().redis_up);
  EXPECT_TRUE(probe.allowed);
  EXPECT_EQ(probe.remaining, 7u);
  clock.AdvanceMillis(o.retry_interval_ms + 2 * o.command_timeout_ms);
  const Verdict back = limiter->Check(request);  // decided by Redis again
  EXPECT_TRUE(back.allowed);
  EXPECT_EQ(back.remaining, 6u);  // four requests admitted, each counted once
  // The late one, the probe, the carrying of the probe's own local admission, the last.
  EXPECT_EQ(raw.ScriptsRun(), scripts_before + 4);
}

// Two front doors under paced concurrent load on two keys while Redis freezes (SIGSTOP) for
// 0.1, 0.5 and 5 s of the limiters' clock, for every algorithm: the requests the two admitted
// together, replayed in time order through one in-process state of the same limit, all pass,
// so together they never exceed the limit's own definition (at most L in any rolling window
// for the sliding log). Each decides within its share while Redis is frozen, and what they
// admitted is charged to Redis once it is back. (Before, each front door went on from an
// empty state while Redis was unreachable and then Redis's own count resumed: two front
// doors could let three limits' worth through in one window.)
TEST_F(RedisLimiterTest, AFrozenRedisNeverLetsTwoFrontDoorsExceedTheLimitTogether) {
  constexpr int64_t kStepMs = 10;
  for (Algorithm a : kAll) {
    for (int64_t pause_ms : {100, 500, 5000}) {
      SCOPED_TRACE(StrCat(AlgorithmName(a), ", Redis frozen for ", pause_ms, " ms"));
      const Rules rules = OneLimit("l", a, 20, 1000);
      ManualClock clock(1'767'225'600'000);
      RedisOptions o = options_;
      o.key_prefix = StrCat("frozen:", AlgorithmName(a), ":", pause_ms, ":");
      // The fixture's timeout (500 ms): a call that timed out on a loaded machine while Redis
      // answered would cut one front door off alone, which is not this test's case (see
      // docs/limiter.md: it admits its share on top).
      o.register_interval_ms = 20;
      auto door_a = CreateRedisLimiterWithRules(rules, {}, o, clock);
      auto door_b = CreateRedisLimiterWithRules(rules, {}, o, clock);
      // Both front doors count each other before the load starts (registering rides on calls
      // to Redis: a key of its own per call, never refused, so none is answered locally).
      for (int i = 0;
           i < 2000 && (door_a->Stats().front_doors < 2 || door_b->Stats().front_doors < 2); ++i) {
        door_a->Check({StrCat("warm", i), "free", "search", "", 1, {}});
        door_b->Check({StrCat("warm", i), "free", "search", "", 1, {}});
        std::this_thread::yield();
      }
      ASSERT_EQ(door_a->Stats().front_doors, 2u);
      ASSERT_EQ(door_b->Stats().front_doors, 2u);

      // Four callers, two per front door; each step every caller checks one of the two keys
      // (each key is asked five times its rate).
      std::mutex mu;
      std::vector<std::pair<int64_t, int>> admitted;  // (time, key)
      const int64_t start = clock.NowUnixMillis();
      const int64_t freeze_at = start + 1000, thaw_at = freeze_at + pause_ms;
      const int64_t end = thaw_at + 2000;
      std::atomic<bool> running{true};
      std::barrier step(5);
      std::vector<std::thread> callers;
      for (int t = 0; t < 4; ++t) {
        callers.emplace_back([&, t] {
          Limiter& door = t < 2 ? *door_a : *door_b;
          for (int64_t i = 0;; ++i) {
            step.arrive_and_wait();
            if (!running.load()) return;
            const int key = static_cast<int>((i + t) % 2);
            const int64_t now = clock.NowUnixMillis();
            if (door.Check({StrCat("ts_", key), "free", "search", "", 1, {}}).allowed) {
              std::lock_guard<std::mutex> lock(mu);
              admitted.emplace_back(now, key);
            }
            step.arrive_and_wait();
          }
        });
      }
      for (int64_t now = start; now < end; now += kStepMs) {
        if (now == freeze_at) redis_->Pause();
        if (now == thaw_at) redis_->Resume();
        clock.SetUnixMillis(now);
        step.arrive_and_wait();  // the callers check
        step.arrive_and_wait();  // all have decided
      }
      running = false;
      step.arrive_and_wait();
      for (auto& c : callers) c.join();

      EXPECT_GT(door_a->Stats().local_fallbacks + door_b->Stats().local_fallbacks, 0u);
      EXPECT_TRUE(door_a->Stats().redis_up && door_b->Stats().redis_up);
      std::sort(admitted.begin(), admitted.end());
      ManualClock replay_clock(start);
      auto reference = Limiter::CreateWithRules(rules, {}, replay_clock);
      size_t over = 0;
      for (const auto& [time, key] : admitted) {
        replay_clock.SetUnixMillis(time);
        over += !reference->Check({StrCat("ts_", key), "free", "search", "", 1, {}}).allowed;
      }
      EXPECT_EQ(over, 0u) << "of " << admitted.size() << " admitted";
      // The front doors did not simply refuse: they admitted most of what the limit allows.
      const int64_t seconds = (end - start) / 1000;
      EXPECT_GT(admitted.size(), static_cast<size_t>(2 * 20 * seconds / 2));
    }
  }
}

}  // namespace
}  // namespace tweetsearch::limiter
