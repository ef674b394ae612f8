#include "limiter/redis_limiter.h"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "common/strings.h"
#include "limiter/redis_script.h"
#include "limiter/rule_match.h"

namespace tweetsearch::limiter {
namespace {

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Connection = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

timeval Millis(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

// Redis names a script by the SHA-1 of its text; computing it here lets the first EVALSHA go
// out without a SCRIPT LOAD round trip (NOSCRIPT then loads it once).
std::string ScriptSha() {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(kDecideScript), sizeof(kDecideScript) - 1, digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : digest) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

class RedisLimiter final : public Limiter {
 public:
  RedisLimiter(const LimiterOptions& options, const RedisOptions& redis, const Clock& clock,
               Rules rules)
      : options_(options),
        redis_(redis),
        clock_(clock),
        local_(Limiter::CreateWithRules(rules, options, clock)) {
    for (int i = 0; i < std::max(1, redis.pool_size); ++i)
      lanes_.push_back(std::make_unique<Lane>());
    SetRules(std::move(rules));
  }

  Verdict Check(const CheckRequest& request) override {
    checks_.fetch_add(1, std::memory_order_relaxed);
    const Rules& rules = rules_.current();
    thread_local std::array<std::string, 2> key_buffers;
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, key_buffers, buckets);
    if (n == 0) return Verdict{};
    const int64_t now = clock_.NowUnixMillis();

    // EVALSHA sha <numkeys> keys... now (algorithm limit window max_wait cost shadow)...
    std::vector<std::string> args = {"EVALSHA", script_sha_, ""};
    std::vector<const RuleLimit*> limits;
    for (size_t i = 0; i < n; ++i) {
      for (const RuleLimit& r : buckets[i].set->limits) {
        args.push_back(StrCat(redis_.key_prefix, *buckets[i].key, "|", r.limit.name));
        limits.push_back(&r);
      }
    }
    args[2] = StrCat(limits.size());
    args.push_back(StrCat(now));
    for (const RuleLimit* r : limits) {
      const uint64_t cost = r->per_request ? 1 : std::max<uint64_t>(1, request.units);
      args.push_back(StrCat(static_cast<int>(r->limit.algorithm)));
      args.push_back(StrCat(r->limit.limit));
      args.push_back(StrCat(r->limit.window_ms));
      args.push_back(StrCat(r->limit.max_wait_ms));
      args.push_back(StrCat(cost));
      args.push_back(r->limit.shadow ? "1" : "0");
    }

    std::vector<int64_t> numbers;
    if (Evaluate(args, limits.size() * 5, &numbers)) {
      Verdict v;
      for (size_t k = 0; k < limits.size(); ++k) {
        Decision d;
        d.allowed = numbers[5 * k] == 1;
        d.remaining = static_cast<uint64_t>(std::max<int64_t>(0, numbers[5 * k + 1]));
        d.retry_after_ms = numbers[5 * k + 2];
        d.reset_ms = numbers[5 * k + 3];
        d.delay_ms = numbers[5 * k + 4];
        Fold(*limits[k], d, &v);
      }
      v.policy = JoinedPolicy(buckets, n);
      if (!v.allowed) v.delay_ms = 0;
      Count(v);
      return v;
    }

    // Redis is down or slow: fail closed where a limit says so, else decide locally.
    fallbacks_.fetch_add(1, std::memory_order_relaxed);
    for (const RuleLimit* r : limits) {
      if (r->fail_closed && !r->limit.shadow) {
        Verdict v;
        v.allowed = false;
        v.limited_by = StrCat(r->limit.name, " (quota store unavailable)");
        v.retry_after_ms = redis_.retry_interval_ms;
        Count(v);
        return v;
      }
    }
    Verdict v = local_->Check(request);
    Count(v);
    return v;
  }

  absl::Status Reload() override {
    return rules_.Reload(options_.rules_path, [this](Rules rules) { SetRules(std::move(rules)); });
  }

  void SetRules(Rules rules) override {
    local_->SetRules(rules);
    rules_.Set(std::move(rules));
  }

  LimiterStats Stats() const override {
    LimiterStats s = local_->Stats();
    s.checks = checks_.load(std::memory_order_relaxed);
    s.refused = refused_.load(std::memory_order_relaxed);
    s.shadow_exceeded = shadow_.load(std::memory_order_relaxed);
    s.reloads = rules_.reloads();
    s.reload_errors = rules_.reload_errors();
    s.uses_redis = true;
    s.redis_up = up_.load(std::memory_order_relaxed);
    s.redis_errors = errors_.load(std::memory_order_relaxed);
    s.local_fallbacks = fallbacks_.load(std::memory_order_relaxed);
    return s;
  }

  const std::string& rules_path() const override { return options_.rules_path; }

 private:
  void Count(const Verdict& v) {
    if (!v.allowed) refused_.fetch_add(1, std::memory_order_relaxed);
    if (!v.shadow_exceeded.empty()) shadow_.fetch_add(1, std::memory_order_relaxed);
  }

  // One caller's script call, waiting in a lane.
  struct Call {
    const std::vector<std::string>* args = nullptr;
    size_t expected = 0;
    std::vector<int64_t>* out = nullptr;
    bool probe = false;  // the one call trying a Redis that was down
    bool ok = false;
    bool done = false;
    std::condition_variable cv;
  };
  // A connection and the calls queued for it. The call at the head leads: it pipelines every
  // call queued behind it (up to kMaxBatch) — all requests written, then all replies read — and
  // wakes them; so concurrent checks share round trips, and a lone check is one round trip.
  struct Lane {
    std::mutex mu;  // std::mutex: ThreadSanitizer sees its ordering (see limiter.cc)
    std::deque<Call*> queue ABSL_GUARDED_BY(mu);
    Connection connection;    // touched only by the lane's current leader
    uint64_t generation = 0;  // failures_ when `connection` was made
  };
  static constexpr size_t kMaxBatch = 256;

  // Runs the script; true with `expected` integers in `*out`, false if Redis failed (then the
  // lane's connection is dropped and Redis is left alone for retry_interval_ms) or is known to
  // be down. While it is down, one caller at a time probes it, once the retry interval has
  // passed, and every other check is decided locally at once: no caller waits on a Redis known
  // to be failing, and none waits longer than one command timeout.
  bool Evaluate(const std::vector<std::string>& args, size_t expected, std::vector<int64_t>* out) {
    const int64_t now = clock_.NowUnixMillis();
    bool probe = false;
    if (!up_.load(std::memory_order_acquire)) {
      if (now < retry_at_.load(std::memory_order_acquire)) return false;
      bool idle = false;
      if (!probing_.compare_exchange_strong(idle, true, std::memory_order_acq_rel)) return false;
      probe = true;
    }
    // Whichever way the call ends, the next probe may follow it.
    absl::Cleanup end_probe = [&] {
      if (probe) probing_.store(false, std::memory_order_release);
    };
    Lane& lane = *lanes_[next_lane_.fetch_add(1, std::memory_order_relaxed) % lanes_.size()];
    Call call;
    call.args = &args;
    call.expected = expected;
    call.out = out;
    call.probe = probe;
    std::unique_lock<std::mutex> lock(lane.mu);
    lane.queue.push_back(&call);
    call.cv.wait(lock, [&] { return call.done || lane.queue.front() == &call; });
    if (call.done) return call.ok;
    std::vector<Call*> batch(
        lane.queue.begin(),
        lane.queue.begin() + static_cast<long>(std::min(lane.queue.size(), kMaxBatch)));
    lock.unlock();
    // Calls queued while Redis was up may find it down by their turn (an earlier batch failed):
    // then they are decided locally rather than each waiting out another timeout.
    const bool has_probe =
        std::any_of(batch.begin(), batch.end(), [](Call* c) { return c->probe; });
    if (has_probe || up_.load(std::memory_order_acquire)) RunBatch(lane, batch, now);
    lock.lock();
    for (Call* c : batch) {
      lane.queue.pop_front();
      c->done = true;
      if (c != &call) c->cv.notify_one();
    }
    if (!lane.queue.empty()) lane.queue.front()->cv.notify_one();
    return call.ok;
  }

  void RunBatch(Lane& lane, const std::vector<Call*>& batch, int64_t now) {
    // A failure on any lane means the other lanes' connections predate an outage too.
    const uint64_t generation = failures_.load(std::memory_order_acquire);
    if (lane.generation != generation) lane.connection.reset();
    if (lane.connection == nullptr) {
      lane.connection = Connect();
      lane.generation = generation;
    }
    redisContext* c = lane.connection.get();
    if (c == nullptr) return Fail(lane, now);
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    auto append = [&](const Call* call) {
      argv.clear();
      lengths.clear();
      for (const std::string& a : *call->args) {
        argv.push_back(a.data());
        lengths.push_back(a.size());
      }
      return redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(),
                                    lengths.data()) == REDIS_OK;
    };
    for (const Call* call : batch) {
      if (!append(call)) return Fail(lane, now);
    }
    std::vector<Call*> unloaded;  // NOSCRIPT: a restarted Redis lost the script
    for (Call* call : batch) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) return Fail(lane, now);
      Reply reply(static_cast<redisReply*>(raw));
      if (reply->type == REDIS_REPLY_ERROR &&
          std::string_view(reply->str, reply->len).starts_with("NOSCRIPT")) {
        unloaded.push_back(call);
        continue;
      }
      call->ok = Parse(reply.get(), call);
    }
    if (!unloaded.empty()) {
      Reply loaded(static_cast<redisReply*>(
          redisCommand(c, "SCRIPT LOAD %b", kDecideScript, sizeof(kDecideScript) - 1)));
      if (loaded == nullptr || loaded->type != REDIS_REPLY_STRING) return Fail(lane, now);
      for (Call* call : unloaded) {
        if (!append(call)) return Fail(lane, now);
        void* raw = nullptr;
        if (redisGetReply(c, &raw) != REDIS_OK) return Fail(lane, now);
        Reply reply(static_cast<redisReply*>(raw));
        call->ok = Parse(reply.get(), call);
      }
    }
    up_.store(true, std::memory_order_release);
  }

  static bool Parse(const redisReply* reply, Call* call) {
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != call->expected) {
      return false;
    }
    call->out->resize(call->expected);
    for (size_t i = 0; i < call->expected; ++i) {
      const redisReply* e = reply->element[i];
      if (e->type != REDIS_REPLY_INTEGER) return false;
      (*call->out)[i] = e->integer;
    }
    return true;
  }

  // The connection broke or Redis is unreachable: every call of the batch falls back.
  void Fail(Lane& lane, int64_t now) {
    lane.connection.reset();
    failures_.fetch_add(1, std::memory_order_acq_rel);
    errors_.fetch_add(1, std::memory_order_relaxed);
    up_.store(false, std::memory_order_release);
    retry_at_.store(now + redis_.retry_interval_ms, std::memory_order_release);
  }

  Connection Connect() {
    Connection c(redisConnectWithTimeout(redis_.host.c_str(), redis_.port,
                                         Millis(redis_.connect_timeout_ms)));
    if (c == nullptr || c->err != 0) return nullptr;
    if (redisSetTimeout(c.get(), Millis(redis_.command_timeout_ms)) != REDIS_OK) return nullptr;
    return c;
  }

  const LimiterOptions options_;
  const RedisOptions redis_;
  const Clock& clock_;
  const std::string script_sha_ = ScriptSha();
  std::unique_ptr<Limiter> local_;  // the fallback, with the same rules
  RulesHolder rules_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<size_t> next_lane_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<bool> up_{true};
  std::atomic<bool> probing_{false};  // a caller is probing a Redis that was down
  std::atomic<int64_t> retry_at_{0};
  std::atomic<uint64_t> checks_{0}, refused_{0}, shadow_{0}, errors_{0}, fallbacks_{0};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Limiter>> CreateRedisLimiter(const LimiterOptions& options,
                                                            const RedisOptions& redis,
                                                            const Clock& clock) {
  Rules rules;
  if (!options.rules_path.empty()) {
    absl::StatusOr<Rules> loaded = LoadRulesFile(options.rules_path);
    if (!loaded.ok()) return loaded.status();
    rules = *std::move(loaded);
  }
  return std::unique_ptr<Limiter>(new RedisLimiter(options, redis, clock, std::move(rules)));
}

std::unique_ptr<Limiter> CreateRedisLimiterWithRules(Rules rules, const LimiterOptions& options,
                                                     const RedisOptions& redis,
                                                     const Clock& clock) {
  return std::make_unique<RedisLimiter>(options, redis, clock, std::move(rules));
}

}  // namespace tweetsearch::limiter
