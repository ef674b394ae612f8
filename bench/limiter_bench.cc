// limiter_bench: the cost of one in-process quota decision, and memory per active key.
//
//   build/release/bench/limiter_bench                  # Google Benchmark timings, then memory
//   build/release/bench/limiter_bench --benchmark_filter=OneKey
//   build/release/bench/limiter_bench --benchmark_filter='ManyKeys/3/1|FlatMapFloor/1000000/1'
//                    # 1M keys with each key's text in the cache, as a request's is (AskAhead)
//   build/release/bench/limiter_bench --redis=6379 --threads=8 --lanes=2   # Redis decisions/s
//   build/release/bench/limiter_bench --redis=6379 --hot-key=10000   # one key held at its limit
//   build/release/bench/limiter_bench --redis=6379 --memory   # Redis memory per key and algorithm
//   build/release/bench/limiter_bench --redis=6379 --textbook # beside textbook Lua scripts
//   build/release/bench/limiter_bench --redis=6379 --textbook --only=gcra  # one algorithm
//   build/release/bench/limiter_bench --redis=6379 --textbook --hot-key=500  # the same, one key
//   build/release/bench/limiter_bench --redis=6379 --script-cost  # Redis time per check
//   build/release/bench/limiter_bench --redis=6379 --freeze-pid=PID  # two front doors while the
//                                                 # redis-server of PID is frozen (SIGSTOP)
//   valgrind --tool=callgrind build/release/bench/limiter_bench --checks=100000 [--keys=N]
//                    # a fixed workload to count instructions on (minus a run of --checks=0)
//
// Decisions go through the whole Limiter (rule lookup, shard lock, state update, headers'
// figures), as the front door calls it, with a ManualClock advancing 1 ms per call.
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "limiter/limiter.h"
#include "limiter/redis_limiter.h"
#include "limiter/redis_script.h"

namespace ts = tweetsearch;
using ts::limiter::Algorithm;

namespace {

constexpr Algorithm kAll[] = {Algorithm::kTokenBucket,          Algorithm::kLeakyBucketMeter,
                              Algorithm::kFixedWindow,          Algorithm::kSlidingWindowLog,
                              Algorithm::kSlidingWindowCounter, Algorithm::kGcra};

// One search limit of `limit` per `window` with `algorithm`, for tier "free".
ts::limiter::Rules OneLimit(Algorithm algorithm, uint64_t limit, int64_t window_ms) {
  ts::limiter::Rules rules;
  ts::limiter::RuleLimit r;
  r.limit = {"bench", algorithm, limit, window_ms, 0, false};
  ts::limiter::RuleSet set;
  set.limits.push_back(r);
  set.max_window_ms = window_ms;
  rules.tiers["free"]["search"] = set;
  return rules;
}

std::vector<std::string> Keys(size_t n) {
  std::vector<std::string> keys;
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) keys.push_back("ts_" + std::to_string(i * 2654435761u));
  return keys;
}

void BM_OneKey(benchmark::State& state) {
  static ts::ManualClock clock(1'767'225'600'000);
  static std::unique_ptr<ts::limiter::Limiter> limiter;
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  if (state.thread_index() == 0) {
    limiter =
        ts::limiter::Limiter::CreateWithRules(OneLimit(algorithm, 1'000'000, 1000), {}, clock);
  }
  const std::string key = "ts_key" + std::to_string(state.thread_index());
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter->Check({key, "free", "search", "", 1, {}}));
  }
  state.SetLabel(std::string(ts::limiter::AlgorithmName(algorithm)));
}

// With `ahead`, the key's text is asked for two decisions before it is checked, as a request's
// key is in the cache when the front door checks it (it has just parsed it): then a decision
// over 1M keys waits on the limiter's own misses alone. (Without, each decision also waits for
// its key's text, which a loop without a lock overlaps with the previous lookups.)
void AskAhead(const std::vector<std::string>& keys, size_t i) {
  __builtin_prefetch(&keys[(i + 2 * 104729) % keys.size()]);
}

// range(1): 0, each key's text asked for as the check needs it; 1, asked for ahead (AskAhead);
// 2, ahead, and the clock moves 10 ms a check under a limit of 500 a minute: a key comes round
// every 10,000 s, long after its last request left the window (many clients each asking a
// little, as an anonymous per-IP limit sees).
void BM_ManyKeys(benchmark::State& state) {
  static ts::ManualClock clock(1'767'225'600'000);
  static std::unique_ptr<ts::limiter::Limiter> limiter;
  static std::vector<std::string> keys = Keys(1'000'000);
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  const bool ahead = state.range(1) != 0, moving = state.range(1) == 2;
  if (state.thread_index() == 0) {
    limiter = ts::limiter::Limiter::CreateWithRules(
        OneLimit(algorithm, 500, moving ? 60'000 : 3'600'000), {}, clock);
    for (const std::string& k : keys) limiter->Check({k, "free", "search", "", 1, {}});
  }
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    if (ahead) AskAhead(keys, i);
    if (moving) clock.AdvanceMillis(10);
    benchmark::DoNotOptimize(limiter->Check({keys[i % keys.size()], "free", "search", "", 1, {}}));
    i += 104729;  // a prime stride: every key, in an order the cache cannot predict
  }
  state.SetLabel(std::string(ts::limiter::AlgorithmName(algorithm)) +
                 (moving  ? ", each key once in a while"
                  : ahead ? ", key text in cache"
                          : ""));
}

// The floor a decision is held against: one lookup in a flat hash map by the key's text and an
// integer update — what any in-process limiter must do at least — on one key, and on 1M keys in
// the stride BM_ManyKeys uses.
void BM_FlatMapFloor(benchmark::State& state) {
  static std::vector<std::string> keys = Keys(1'000'000);
  const size_t n = static_cast<size_t>(state.range(0));
  const bool ahead = state.range(1) != 0;
  absl::flat_hash_map<std::string, int64_t> counters;
  for (size_t i = 0; i < n; ++i) counters[keys[i]] = 0;
  const std::vector<std::string> used(keys.begin(), keys.begin() + static_cast<long>(n));
  size_t i = 0;
  for (auto _ : state) {
    if (ahead) AskAhead(used, i);
    auto it = counters.find(absl::string_view(used[i % n]));
    benchmark::DoNotOptimize(++it->second);
    i += 104729;
  }
}
BENCHMARK(BM_FlatMapFloor)
    ->Args({1, 0})
    ->Args({1'000, 0})
    ->Args({1'000'000, 0})
    ->Args({1'000'000, 1});

void Args(benchmark::internal::Benchmark* b) {
  for (Algorithm a : kAll) b->Arg(static_cast<int>(a));
}
void ManyKeysArgs(benchmark::internal::Benchmark* b) {
  for (Algorithm a : kAll) {
    for (int ahead : {0, 1, 2}) b->Args({static_cast<int>(a), ahead});
  }
}

BENCHMARK(BM_OneKey)->Apply(Args)->Threads(1)->Threads(2);
BENCHMARK(BM_ManyKeys)->Apply(ManyKeysArgs)->Threads(1)->Threads(2);

// Heap bytes per key with every key at its quota of 500 requests in the hour (so a sliding
// log holds 500 entries), measured with mallinfo2 around building the states.
void MemoryPerKey() {
  std::cout << "\nmemory per active key at 500 requests/hour (heap bytes, whole limiter):\n";
  for (Algorithm a : kAll) {
    ts::ManualClock clock(1'767'225'600'000);
    const size_t n = a == Algorithm::kSlidingWindowLog ? 2'000 : 200'000;
    const std::vector<std::string> keys = Keys(n);
    // Bytes in use from the heap and in blocks mapped on their own (large tables).
    auto in_use = [] { return mallinfo2().uordblks + mallinfo2().hblkhd; };
    const size_t before = in_use();
    {
      auto limiter = ts::limiter::Limiter::CreateWithRules(OneLimit(a, 500, 3'600'000), {}, clock);
      const int requests = a == Algorithm::kSlidingWindowLog ? 500 : 3;
      for (int r = 0; r < requests; ++r) {
        for (const std::string& k : keys) limiter->Check({k, "free", "search", "", 1, {}});
        clock.AdvanceMillis(1000);
      }
      const size_t during = in_use();
      std::cout << "  " << ts::limiter::AlgorithmName(a) << ": " << (during - before) / n
                << " B/key (" << n << " keys)\n";
    }
  }
}

// A fixed workload, for counting a decision's instructions exactly (the timings above vary
// their iterations): `checks` fixed-window decisions over `keys` keys (all of them checked once
// first), in BM_ManyKeys's stride.
void FixedWorkload(uint64_t checks, size_t keys) {
  ts::ManualClock clock(1'767'225'600'000);
  const std::vector<std::string> names = Keys(keys);
  auto limiter = ts::limiter::Limiter::CreateWithRules(
      OneLimit(Algorithm::kFixedWindow, 1'000'000'000, 3'600'000), {}, clock);
  for (const std::string& k : names) limiter->Check({k, "free", "search", "", 1, {}});
  size_t i = 0;
  uint64_t allowed = 0;
  for (uint64_t c = 0; c < checks; ++c) {
    allowed += limiter->Check({names[i % keys], "free", "search", "", 1, {}}).allowed ? 1 : 0;
    i += 104729;
  }
  std::cout << allowed << " of " << checks << " checks allowed over " << keys << " keys\n";
}

}  // namespace

// Decisions per second through the Redis backend: `threads` callers sharing `lanes` pipelined
// connections, for `seconds`: over 10,000 keys with a sliding window counter of 1M a minute,
// or (`hot_limit` > 0) on one key held at its limit by a sliding window log of `hot_limit` an
// hour (the abusive client's case: nearly every call is refused).
void RedisThroughput(int port, int threads, int lanes, double seconds, uint64_t hot_limit) {
  ts::limiter::RedisOptions redis;
  redis.port = port;
  redis.pool_size = lanes;
  redis.command_timeout_ms = 1000;
  redis.key_prefix = hot_limit > 0 ? "bench-hot:" : "bench:";
  auto limiter = ts::limiter::CreateRedisLimiterWithRules(
      hot_limit > 0 ? OneLimit(Algorithm::kSlidingWindowLog, hot_limit, 3'600'000)
                    : OneLimit(Algorithm::kSlidingWindowCounter, 1'000'000, 60'000),
      {}, redis, ts::SystemClock());
  const std::vector<std::string> keys = hot_limit > 0 ? Keys(1) : Keys(10'000);
  std::atomic<uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      uint64_t n = 0;
      for (size_t i = static_cast<size_t>(t) * 977; !stop.load(std::memory_order_relaxed); ++n) {
        limiter->Check({keys[i++ % keys.size()], "free", "search", "", 1, {}});
      }
      done += n;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers) w.join();
  const auto stats = limiter->Stats();
  std::cout << "redis backend, " << (hot_limit > 0 ? "one key at its limit (sliding log), " : "")
            << threads << " threads, " << lanes
            << " lanes: " << static_cast<uint64_t>(done.load() / seconds) << " decisions/s ("
            << stats.redis_errors << " errors, " << stats.local_fallbacks << " local)\n";
}

// Two front doors (two Redis limiters on the same Redis) under paced load — 4 callers, one
// check every 2 ms each, on 8 keys of a limit of 50 a second (the keys are asked 10 times
// their rate) — while the redis-server of `pid` is frozen (SIGSTOP) for 0.1, 0.5 and 5 s, on
// the real clock. Afterwards every admission is replayed, in time order, through one
// in-process state of the same limit: "over" counts those it refuses (0: the two front doors
// together stayed within the limit's definition). The slowest decision is set against the
// 50 ms command timeout.
// The system clock, remembering per thread the first time it told after Arm(): a check's
// decision time (a Redis limiter reads the clock once, first, and decides by that reading).
class RecordingClock final : public ts::Clock {
 public:
  int64_t NowUnixMillis() const override {
    const int64_t now = ts::SystemClock().NowUnixMillis();
    if (first_ < 0) first_ = now;
    return now;
  }
  int64_t NowMonotonicMicros() const override { return ts::SystemClock().NowMonotonicMicros(); }
  static void Arm() { first_ = -1; }
  static int64_t first() { return first_; }

 private:
  static thread_local int64_t first_;
};
thread_local int64_t RecordingClock::first_ = -1;

void FrozenRedis(int port, pid_t pid) {
  using Clock = std::chrono::steady_clock;
  static RecordingClock clock;
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kGcra,
                      Algorithm::kTokenBucket}) {
    for (int64_t pause_ms : {100, 500, 5000}) {
      const ts::limiter::Rules rules = OneLimit(a, 50, 1000);
      ts::limiter::RedisOptions redis;
      redis.port = port;
      redis.key_prefix = "bench-freeze:" + std::to_string(static_cast<int>(a)) + ":" +
                         std::to_string(pause_ms) + ":";
      auto door_a = ts::limiter::CreateRedisLimiterWithRules(rules, {}, redis, clock);
      auto door_b = ts::limiter::CreateRedisLimiterWithRules(rules, {}, redis, clock);
      while (door_a->Stats().front_doors < 2 || door_b->Stats().front_doors < 2) {
        door_a->Check({"warm", "free", "search", "", 1, {}});
        door_b->Check({"warm", "free", "search", "", 1, {}});
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::mutex mu;
      std::vector<std::pair<int64_t, int>> admitted;  // (time decided, key)
      std::atomic<int64_t> slowest_us{0};
      std::atomic<uint64_t> decisions{0}, over_timeout{0};
      std::atomic<bool> stop{false};
      std::vector<std::thread> callers;
      for (int t = 0; t < 4; ++t) {
        callers.emplace_back([&, t] {
          ts::limiter::Limiter& door = t < 2 ? *door_a : *door_b;
          auto next = Clock::now();
          for (int i = t; !stop.load(); ++i) {
            next += std::chrono::milliseconds(2);
            std::this_thread::sleep_until(next);
            const int key = i % 8;
            const auto begin = Clock::now();
            RecordingClock::Arm();
            const bool ok =
                door.Check({"ts_" + std::to_string(key), "free", "search", "", 1, {}}).allowed;
            const int64_t us =
                std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - begin).count();
            int64_t seen = slowest_us.load();
            while (us > seen && !slowest_us.compare_exchange_weak(seen, us)) {
            }
            ++decisions;
            if (us > 50'000) ++over_timeout;
            if (ok) {
              std::lock_guard<std::mutex> lock(mu);
              admitted.emplace_back(RecordingClock::first(), key);
            }
          }
        });
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
      kill(pid, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      kill(pid, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      stop = true;
      for (auto& c : callers) c.join();

      std::sort(admitted.begin(), admitted.end());
      ts::ManualClock replay(admitted.empty() ? 0 : admitted.front().first);
      auto reference = ts::limiter::Limiter::CreateWithRules(rules, {}, replay);
      uint64_t over = 0;
      for (const auto& [time, key] : admitted) {
        replay.SetUnixMillis(time);
        over +=
            !reference->Check({"ts_" + std::to_string(key), "free", "search", "", 1, {}}).allowed;
      }
      const auto sa = door_a->Stats(), sb = door_b->Stats();
      std::cout << ts::limiter::AlgorithmName(a) << ", frozen " << pause_ms
                << " ms: " << decisions.load() << " decisions, " << admitted.size()
                << " admitted, over " << over << ", local "
                << sa.local_fallbacks + sb.local_fallbacks << ", slowest "
                << slowest_us.load() / 1000.0 << " ms, over 50 ms " << over_timeout.load() << "\n";
    }
  }
}

// Redis's used_memory, from INFO memory; with `flush`, after emptying it (FLUSHALL SYNC).
int64_t RedisUsedMemory(int port, bool flush = false) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err != 0) return -1;
  if (flush) freeReplyObject(redisCommand(c, "FLUSHALL SYNC"));
  auto* reply = static_cast<redisReply*>(redisCommand(c, "INFO memory"));
  int64_t used = -1;
  if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
    const std::string_view text(reply->str, reply->len);
    const size_t at = text.find("used_memory:");
    if (at != std::string_view::npos) used = std::atoll(text.data() + at + 12);
  }
  if (reply != nullptr) freeReplyObject(reply);
  redisFree(c);
  return used;
}

// Redis memory per key: 100,000 keys, each with one request under one limit of 500 an hour,
// per algorithm, in an emptied Redis (FLUSHALL: run it on a Redis of its own); used_memory
// before and after, over the keys (the key tables' growth included). A sliding log's state
// grows with its requests: one entry here.
void RedisMemoryPerKey(int port) {
  constexpr size_t kKeys = 100'000;
  const std::vector<std::string> keys = Keys(kKeys);
  std::cout << "redis memory per key, one request each (used_memory, " << kKeys << " keys):\n";
  for (Algorithm a : kAll) {
    ts::limiter::RedisOptions redis;
    redis.port = port;
    redis.key_prefix = "mem:" + std::to_string(static_cast<int>(a)) + ":";
    auto limiter = ts::limiter::CreateRedisLimiterWithRules(OneLimit(a, 500, 3'600'000), {}, redis,
                                                            ts::SystemClock());
    const int64_t before = RedisUsedMemory(port, /*flush=*/true);
    std::vector<std::thread> workers;
    for (int t = 0; t < 4; ++t) {
      workers.emplace_back([&, t] {
        for (size_t i = static_cast<size_t>(t); i < kKeys; i += 4) {
          limiter->Check({keys[i], "free", "search", "", 1, {}});
        }
      });
    }
    for (auto& w : workers) w.join();
    const int64_t after = RedisUsedMemory(port);
    std::cout << "  " << ts::limiter::AlgorithmName(a) << ": "
              << (after - before) / static_cast<int64_t>(kKeys) << " B/key\n";
  }
}

// Redis's own time running scripts so far (µs, EVAL and EVALSHA), from INFO commandstats.
int64_t ScriptMicros(int port) {
  redisContext* c = redisConnect("127.0.0.1", port);
  auto* reply = static_cast<redisReply*>(redisCommand(c, "INFO commandstats"));
  int64_t usec = 0;
  const std::string_view text(reply->str, reply->len);
  for (std::string_view name : {"cmdstat_evalsha:", "cmdstat_eval:"}) {
    const size_t at = text.find(name);
    if (at == std::string_view::npos) continue;
    const size_t u = text.find("usec=", at);
    usec += std::atoll(text.data() + u + 5);
  }
  freeReplyObject(reply);
  redisFree(c);
  return usec;
}

// Redis's own time per check of the decide script (redis_script.h), apart from the network and
// the callers: 200,000 checks, one limit of 500 an hour each, of fresh keys among 1M in calls
// of 1 and of 8 checks, then of 1,000 keys in turn (each checked 200 times) in calls of 8; 64
// calls pipelined at a time, on an emptied Redis per algorithm and column.
void ScriptCost(int port) {
  const std::vector<std::string> keys = Keys(1'000'000);
  redisContext* c = redisConnect("127.0.0.1", port);
  auto* loaded = static_cast<redisReply*>(redisCommand(
      c, "SCRIPT LOAD %b", ts::limiter::kDecideScript, sizeof(ts::limiter::kDecideScript) - 1));
  const std::string sha(loaded->str, loaded->len);
  freeReplyObject(loaded);
  constexpr size_t kChecks = 200'000;
  std::cout << "redis time per check of the decide script (µs; fresh keys in calls of 1 / 8 "
               "checks, 1,000 keys in calls of 8):\n";
  for (Algorithm a : kAll) {
    std::cout << "  " << ts::limiter::AlgorithmName(a) << ":";
    for (const auto& [batch, pool] :
         {std::pair<size_t, size_t>{1, keys.size()}, {8, keys.size()}, {8, 1'000}}) {
      RedisUsedMemory(port, /*flush=*/true);
      freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));
      const std::string now = std::to_string(ts::SystemClock().NowUnixMillis());
      const std::string algorithm = std::to_string(static_cast<int>(a));
      const std::string max_wait = a == Algorithm::kLeakyBucketQueue ? "200" : "0";
      const std::string count = std::to_string(batch);
      size_t next = 0;
      for (size_t call = 0; call < kChecks / batch; ++call) {
        std::vector<std::string> args = {"EVALSHA", sha, count};
        for (size_t i = 0; i < batch; ++i) args.push_back("cost:" + keys[next++ % pool]);
        args.insert(args.end(), {"0", count});
        for (size_t i = 0; i < batch; ++i) {
          args.insert(args.end(), {now, "1", algorithm, "500", "3600000", max_wait, "1", "0", "0"});
        }
        std::vector<const char*> argv;
        std::vector<size_t> lengths;
        for (const std::string& s : args) {
          argv.push_back(s.data());
          lengths.push_back(s.size());
        }
        redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data());
        if (call % 64 == 63 || call + 1 == kChecks / batch) {
          for (size_t r = 0; r <= call % 64; ++r) {
            void* reply = nullptr;
            if (redisGetReply(c, &reply) == REDIS_OK) freeReplyObject(reply);
          }
        }
      }
      std::cout << " " << static_cast<double>(ScriptMicros(port)) / kChecks;
    }
    std::cout << "\n";
  }
  redisFree(c);
}

// Textbook Redis + Lua limiters, one script per algorithm in the form most Redis-backed
// limiters take (written for this comparison): KEYS[1] the key, ARGV: now (ms), limit, window
// (ms); returns 1 (admitted) or 0.
struct Textbook {
  Algorithm algorithm;
  const char* script;
};
constexpr Textbook kTextbook[] = {
    {Algorithm::kFixedWindow, R"lua(
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
if n > tonumber(ARGV[2]) then return 0 end
return 1)lua"},
    {Algorithm::kSlidingWindowCounter, R"lua(
local now, L, W = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local start = now - now % W
local cur_key, prev_key = KEYS[1] .. ':' .. start, KEYS[1] .. ':' .. (start - W)
local prev = tonumber(redis.call('GET', prev_key) or '0')
local cur = tonumber(redis.call('GET', cur_key) or '0')
if prev * (W - (now - start)) / W + cur + 1 > L then return 0 end
redis.call('INCR', cur_key)
redis.call('PEXPIRE', cur_key, 2 * W)
return 1)lua"},
    {Algorithm::kTokenBucket, R"lua(
local now, L, W = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local st = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(st[1]) or L, tonumber(st[2]) or now
tokens = math.min(L, tokens + (now - ts) * L / W)
if tokens < 1 then return 0 end
redis.call('HSET', KEYS[1], 'tokens', tokens - 1, 'ts', now)
redis.call('PEXPIRE', KEYS[1], W)
return 1)lua"},
    {Algorithm::kGcra, R"lua(
local now, L, W = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local T = W / L
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
if tat + T - now > W then return 0 end
redis.call('SET', KEYS[1], tat + T, 'PX', math.ceil(tat + T - now))
return 1)lua"},
    {Algorithm::kSlidingWindowLog, R"lua(
local now, L, W = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - W)
if redis.call('ZCARD', KEYS[1]) >= L then return 0 end
redis.call('ZADD', KEYS[1], now, now .. ':' .. math.random())
redis.call('PEXPIRE', KEYS[1], W)
return 1)lua"},
};

// Redis decisions per second, over 1M keys under 500 an hour, per algorithm: the textbook
// script (8 callers, each on its own connection, one call at a time) and this limiter (8
// callers sharing its 2 lanes), one after the other on the same Redis, 5 s each; with the
// Redis time per decision from INFO commandstats.
void BesideTextbook(int port, std::string_view only) {
  constexpr int kThreads = 8;
  constexpr double kSeconds = 5;
  const std::vector<std::string> keys = Keys(1'000'000);
  auto redis_time_us = [port] { return ScriptMicros(port); };
  auto run = [&](const std::function<void(int, std::atomic<bool>&, uint64_t&)>& caller) {
    std::atomic<bool> stop{false};
    std::vector<uint64_t> done(kThreads);
    std::vector<std::thread> threads;
    const int64_t before = redis_time_us();
    for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { caller(t, stop, done[t]); });
    std::this_thread::sleep_for(std::chrono::duration<double>(kSeconds));
    stop = true;
    for (auto& t : threads) t.join();
    uint64_t n = 0;
    for (uint64_t d : done) n += d;
    return std::pair<double, double>(n / kSeconds,
                                     static_cast<double>(redis_time_us() - before) / n);
  };
  std::cout << "redis decisions/s over 1M keys, 500 an hour, 8 callers (Redis time per decision)"
            << ":\n";
  for (const Textbook& book : kTextbook) {
    if (!only.empty() && ts::limiter::AlgorithmName(book.algorithm) != only) continue;
    RedisUsedMemory(port, /*flush=*/true);
    const auto [book_rate, book_us] = run([&](int t, std::atomic<bool>& stop, uint64_t& done) {
      redisContext* c = redisConnect("127.0.0.1", port);
      size_t i = static_cast<size_t>(t) * 7919;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string now = std::to_string(ts::SystemClock().NowUnixMillis());
        auto* reply = static_cast<redisReply*>(
            redisCommand(c, "EVAL %s 1 book:%s %s 500 3600000", book.script,
                         keys[i % keys.size()].c_str(), now.c_str()));
        if (reply != nullptr) freeReplyObject(reply);
        i += 104729;
        ++done;
      }
      redisFree(c);
    });
    RedisUsedMemory(port, /*flush=*/true);
    ts::limiter::RedisOptions redis;
    redis.port = port;
    redis.command_timeout_ms = 1000;
    auto limiter = ts::limiter::CreateRedisLimiterWithRules(
        OneLimit(book.algorithm, 500, 3'600'000), {}, redis, ts::SystemClock());
    const auto [our_rate, our_us] = run([&](int t, std::atomic<bool>& stop, uint64_t& done) {
      size_t i = static_cast<size_t>(t) * 7919;
      while (!stop.load(std::memory_order_relaxed)) {
        limiter->Check({keys[i % keys.size()], "free", "search", "", 1, {}});
        i += 104729;
        ++done;
      }
    });
    std::cout << "  " << ts::limiter::AlgorithmName(book.algorithm) << ": textbook "
              << static_cast<uint64_t>(book_rate) << " (" << book_us << " µs), tweetsearch "
              << static_cast<uint64_t>(our_rate) << " (" << our_us << " µs), ratio "
              << our_rate / book_rate << "\n";
  }
}

// One key held at its limit by a sliding log of `limit` an hour, 8 callers for 5 s: the textbook
// log script (each caller on its own connection) and this limiter (8 callers, 2 lanes), on an
// emptied Redis each: decisions per second, nearly all refusals.
void HotKeyBesideTextbook(int port, uint64_t limit) {
  constexpr int kThreads = 8;
  constexpr double kSeconds = 5;
  const Textbook& log = kTextbook[4];
  RedisUsedMemory(port, /*flush=*/true);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      redisContext* c = redisConnect("127.0.0.1", port);
      uint64_t n = 0;
      const std::string limit_text = std::to_string(limit);
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string now = std::to_string(ts::SystemClock().NowUnixMillis());
        auto* reply = static_cast<redisReply*>(redisCommand(
            c, "EVAL %s 1 book:hot %s %s 3600000", log.script, now.c_str(), limit_text.c_str()));
        if (reply != nullptr) freeReplyObject(reply);
        ++n;
      }
      done += n;
      redisFree(c);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(kSeconds));
  stop = true;
  for (auto& t : threads) t.join();
  std::cout << "one key at its limit, sliding log of " << limit << " an hour: textbook "
            << static_cast<uint64_t>(done.load() / kSeconds) << " decisions/s; ";
  RedisUsedMemory(port, /*flush=*/true);
  RedisThroughput(port, kThreads, 2, kSeconds, limit);
}

int main(int argc, char** argv) {
  // As in tweetsearchd: the lock-order graph is a debugging aid, not for production.
  if (std::getenv("KEEP_DEADLOCK_DETECTION") == nullptr) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  // --redis=PORT [--threads=N] [--lanes=N] [--hot-key=LIMIT]: only the Redis throughput, then
  // exit.
  int redis_port = 0, threads = 8, lanes = 2;
  uint64_t hot_limit = 0;
  pid_t freeze_pid = 0;
  bool memory = false, textbook = false, script_cost = false;
  std::string_view only;  // --only=ALGORITHM: the textbook comparison of one algorithm
  int64_t checks = -1;
  size_t keys = 1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.starts_with("--redis=")) redis_port = std::stoi(std::string(a.substr(8)));
    if (a.starts_with("--threads=")) threads = std::stoi(std::string(a.substr(10)));
    if (a.starts_with("--lanes=")) lanes = std::stoi(std::string(a.substr(8)));
    if (a.starts_with("--hot-key=")) hot_limit = std::stoull(std::string(a.substr(10)));
    if (a.starts_with("--freeze-pid=")) freeze_pid = std::stoi(std::string(a.substr(13)));
    if (a.starts_with("--checks=")) checks = std::stoll(std::string(a.substr(9)));
    if (a.starts_with("--keys=")) keys = std::max<size_t>(1, std::stoull(std::string(a.substr(7))));
    if (a == "--memory") memory = true;
    if (a == "--textbook") textbook = true;
    if (a.starts_with("--only=")) only = a.substr(7);
    if (a == "--script-cost") script_cost = true;
  }
  if (checks >= 0) {
    FixedWorkload(static_cast<uint64_t>(checks), keys);
    return 0;
  }
  if (redis_port != 0 && textbook && hot_limit > 0) {
    HotKeyBesideTextbook(redis_port, hot_limit);
    return 0;
  }
  if (redis_port != 0 && textbook) {
    BesideTextbook(redis_port, only);
    return 0;
  }
  if (redis_port != 0 && script_cost) {
    ScriptCost(redis_port);
    return 0;
  }
  if (redis_port != 0 && memory) {
    RedisMemoryPerKey(redis_port);
    return 0;
  }
  if (redis_port != 0 && freeze_pid != 0) {
    FrozenRedis(redis_port, freeze_pid);
    return 0;
  }
  if (redis_port != 0) {
    RedisThroughput(redis_port, threads, lanes, 5, hot_limit);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  MemoryPerKey();
  return 0;
}
