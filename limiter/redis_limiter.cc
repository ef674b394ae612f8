#include "limiter/redis_limiter.h"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/strings.h"
#include "limiter/local_limiter.h"
#include "limiter/redis_script.h"
#include "limiter/redis_util.h"
#include "limiter/rule_match.h"
#include "limiter/wake_word.h"

namespace tweetsearch::limiter {
namespace {

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Connection = std::unique_ptr<redisContext, ContextDeleter>;

using Reply = RedisReply;

// What a caller sends: a check for the decide script (its keys, and its part of the
// arguments; the lane's leader joins the checks of a batch into one script call), or any other
// command, sent as it is (`raw`).
struct Command {
  std::vector<std::string> keys, args;
  std::vector<std::string> raw;
};

// Network waits (timeouts, deadlines, the registration period) are real time, as the socket
// timeouts are; quotas are decided by the injected Clock.
int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Registers a front door in the set of live ones (scored by Redis's clock, so the front doors'
// clocks need not agree), drops those silent for ARGV[2] ms, and answers how many are left.
constexpr char kRegisterScript[] = R"lua(
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], ms, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return redis.call('ZCARD', KEYS[1])
)lua";

// The moment front doors back from an outage stop settling, on their clocks (Unix ms): the
// first sets it (ARGV[1], kept ARGV[2] ms), the others read it.
constexpr char kSettleScript[] = R"lua(
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]), 'NX')
return {tonumber(redis.call('GET', KEYS[1]) or ARGV[1])}
)lua";

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

// Refusals Redis answered, kept until their retry time. A limit that refuses a request of one
// unit refuses every request of its bucket until then, whatever other front doors do (they can
// only add to what it counts, and a larger request is refused sooner), so a client hammering a
// key at its limit is answered here without a round trip, as Redis would answer it: its retry
// and reset times count down. Kept only for checks of one enforced limit and one unit (their
// verdict is that limit's alone); cleared when the rules change. Bounded: a shard that fills up
// drops its lapsed refusals, and all of them if none has lapsed.
class RefusalCache {
 public:
  struct Refusal {
    int64_t until_ms = 0;     // the request may pass from then on (now + retry_after)
    int64_t reset_at_ms = 0;  // the limit is fully available again then
  };

  std::optional<Refusal> Find(const BucketId& id, int64_t now) {
    Shard& shard = shards_[id.hi % kShards];
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.refusals.find(id);
    if (it == shard.refusals.end()) return std::nullopt;
    // Lapsed, or the clock went back past the answer: Redis decides again.
    if (now >= it->second.refusal.until_ms || now < it->second.noted_ms) {
      shard.refusals.erase(it);
      return std::nullopt;
    }
    return it->second.refusal;
  }

  // Which rules a refusal was answered under: a refusal noted under rules Clear() has dropped
  // since is not kept.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  void Note(const BucketId& id, Refusal refusal, int64_t now, uint64_t epoch) {
    Shard& shard = shards_[id.hi % kShards];
    std::lock_guard<std::mutex> lock(shard.mu);
    if (epoch != epoch_.load(std::memory_order_acquire)) return;
    if (shard.refusals.size() >= kMaxPerShard) {
      absl::erase_if(shard.refusals,
                     [now](const auto& e) { return now >= e.second.refusal.until_ms; });
      if (shard.refusals.size() >= kMaxPerShard) shard.refusals.clear();
    }
    shard.refusals.insert_or_assign(id, Kept{refusal, now});
  }

  void Clear() {
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    for (Shard& shard : shards_) {
      std::lock_guard<std::mutex> lock(shard.mu);
      shard.refusals.clear();
    }
  }

  uint64_t answered() const { return answered_.load(std::memory_order_relaxed); }
  void CountAnswer() { answered_.fetch_add(1, std::memory_order_relaxed); }

 private:
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxPerShard = 4096;
  struct Kept {
    Refusal refusal;
    int64_t noted_ms = 0;  // when Redis answered it
  };
  struct Shard {
    std::mutex mu;  // std::mutex: ThreadSanitizer sees its ordering (see limiter.cc)
    absl::flat_hash_map<BucketId, Kept, BucketIdHash> refusals ABSL_GUARDED_BY(mu);
  };
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> answered_{0};
};

class RedisLimiter final : public Limiter {
 public:
  RedisLimiter(const LimiterOptions& options, const RedisOptions& redis, const Clock& clock,
               Rules rules)
      : options_(options),
        redis_(redis),
        clock_(clock),
        local_(CreateLocalLimiter(rules, options, clock)) {
    for (int i = 0; i < std::max(1, redis.pool_size); ++i)
      lanes_.push_back(std::make_unique<Lane>());
    SetRules(std::move(rules));
    flusher_ = std::thread([this] { FlushLoop(); });
  }

  ~RedisLimiter() override {
    {
      std::lock_guard<std::mutex> lock(owed_mu_);
      stopping_ = true;
    }
    owed_cv_.notify_all();
    flusher_.join();
  }

  Verdict Check(const CheckRequest& request) override {
    checks_.fetch_add(1, std::memory_order_relaxed);
    const Rules& rules = rules_.current();
    thread_local std::array<std::string, 2> key_buffers;
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, &key_buffers, buckets);
    if (n == 0) return Verdict{};
    const int64_t now = clock_.NowUnixMillis();
    const std::vector<const RuleLimit*> limits = LimitsOf(buckets, n);
    if (!up_.load(std::memory_order_acquire) ||
        now < settle_until_.load(std::memory_order_acquire)) {
      return Degraded(request, buckets, n, limits, now);
    }

    // A check of one enforced limit and one unit that Redis refused lately is refused again
    // (unless this front door is due to register: that rides on a call to Redis).
    const bool one_unit = n == 1 && limits.size() == 1 && !limits[0]->limit.shadow &&
                          (limits[0]->per_request || request.units <= 1);
    if (one_unit && SteadyMicros() < next_register_us_.load(std::memory_order_acquire)) {
      if (std::optional<RefusalCache::Refusal> r = refusals_.Find(buckets[0].id, now)) {
        return RefusedAgain(*limits[0], *r, buckets, now);
      }
    }
    const uint64_t epoch = refusals_.epoch();

    std::vector<uint64_t> debts(limits.size());
    local_->TakeDebts(request, debts);
    Command command = ScriptCommand(request, buckets, n, limits, debts, now, false);
    std::vector<int64_t> numbers;
    if (!Evaluate(&command, limits.size() * 5, &numbers, /*probe=*/false, now)) {
      local_->ReturnDebts(request, debts);
      return Degraded(request, buckets, n, limits, now);
    }
    Verdict v;
    std::vector<uint64_t> remaining(limits.size());
    for (size_t k = 0; k < limits.size(); ++k) {
      Decision d;
      d.allowed = numbers[5 * k] == 1;
      d.remaining = static_cast<uint64_t>(std::max<int64_t>(0, numbers[5 * k + 1]));
      d.retry_after_ms = numbers[5 * k + 2];
      d.reset_ms = numbers[5 * k + 3];
      d.delay_ms = numbers[5 * k + 4];
      remaining[k] = d.remaining;
      Fold(*limits[k], d, &v);
    }
    local_->Mirror(request, remaining, front_doors_.load(std::memory_order_acquire), now);
    SetPolicy(buckets, n, &v);
    if (!v.allowed) v.delay_ms = 0;
    if (one_unit && !v.allowed && v.remaining == 0 && v.retry_after_ms > 0) {
      refusals_.Note(buckets[0].id, {now + v.retry_after_ms, now + v.reset_ms}, now, epoch);
    }
    Count(v);
    return v;
  }

  absl::Status Reload() override {
    return rules_.Reload(options_.rules_path, [this](Rules rules) { SetRules(std::move(rules)); });
  }

  void SetRules(Rules rules) override {
    std::lock_guard<std::mutex> lock(rules_mu_);
    local_->SetRules(ShareRules(rules, front_doors_.load(std::memory_order_acquire)));
    rules_.Set(std::move(rules));
    refusals_.Clear();  // a limit may have been raised
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
    s.refused_again = refusals_.answered();
    s.front_doors = front_doors_.load(std::memory_order_relaxed);
    return s;
  }

  const std::string& rules_path() const override { return options_.rules_path; }
  std::optional<uint32_t> MaxStreams(std::string_view key_prefix,
                                     std::string_view tier) const override {
    return limiter::MaxStreams(rules_.current(), key_prefix, tier);
  }

 private:
  // The verdict Redis would give a check refused lately (RefusalCache): refused by its one
  // limit, nothing left, its retry and reset times counted down to `now`.
  Verdict RefusedAgain(const RuleLimit& r, const RefusalCache::Refusal& refusal,
                       const std::array<Bucket, 2>& buckets, int64_t now) {
    Verdict v;
    v.allowed = false;
    v.limited_by = r.limit.name;
    v.retry_after_ms = refusal.until_ms - now;
    v.has_quota = true;
    v.limit = r.limit.limit;
    v.remaining = 0;
    v.reset_ms = std::max<int64_t>(0, refusal.reset_at_ms - now);
    SetPolicy(buckets, 1, &v);
    refusals_.CountAnswer();
    Count(v);
    return v;
  }

  // A check for the decide script (redis_script.h): its limits' keys, and its part of the
  // arguments (now, the number of limits, seven per limit). With `charge_only`, every cost is
  // 0: the script charges the debts and decides nothing.
  Command ScriptCommand(const CheckRequest& request, const std::array<Bucket, 2>& buckets, size_t n,
                        const std::vector<const RuleLimit*>& limits,
                        const std::vector<uint64_t>& debts, int64_t now, bool charge_only) const {
    Command command;
    for (size_t i = 0; i < n; ++i) {
      for (const RuleLimit& r : buckets[i].set->limits) {
        command.keys.push_back(StrCat(redis_.key_prefix, *buckets[i].key, "|", r.limit.name));
      }
    }
    std::vector<std::string>& args = command.args;
    args.push_back(StrCat(now));
    args.push_back(StrCat(limits.size()));
    for (size_t k = 0; k < limits.size(); ++k) {
      const RuleLimit& r = *limits[k];
      const uint64_t cost = r.per_request ? 1 : std::max<uint64_t>(1, request.units);
      args.push_back(StrCat(static_cast<int>(r.limit.algorithm)));
      args.push_back(StrCat(r.limit.limit));
      args.push_back(StrCat(r.limit.window_ms));
      args.push_back(StrCat(r.limit.max_wait_ms));
      args.push_back(charge_only ? "0" : StrCat(cost));
      args.push_back(r.limit.shadow ? "1" : "0");
      args.push_back(StrCat(debts[k]));
    }
    return command;
  }

  // Redis is unreachable, slow, or back only lately (settling): limits that may not go on
  // without it refuse; the others are decided by the local limiter, within this front door's
  // share. What it admits is owed to Redis: carried at once while Redis answers (settling),
  // else by the flusher once it is back. Once per retry interval, while Redis is down, one
  // caller probes it by carrying its own request's debts (deciding nothing there: another front
  // door's debts may not be in Redis yet).
  Verdict Degraded(const CheckRequest& request, const std::array<Bucket, 2>& buckets, size_t n,
                   const std::vector<const RuleLimit*>& limits, int64_t now) {
    bool idle = false;
    if (!up_.load(std::memory_order_acquire) && now >= retry_at_.load(std::memory_order_acquire) &&
        probing_.compare_exchange_strong(idle, true, std::memory_order_acq_rel)) {
      absl::Cleanup end_probe = [&] { probing_.store(false, std::memory_order_release); };
      // Settling starts before the probe can find Redis up: no other caller may take Redis's
      // word in between.
      settle_until_.store(now + SettleMs(), std::memory_order_release);
      if (Carry(request, buckets, n, limits, /*probe=*/true, now)) {
        settle_until_.store(SharedSettle(now), std::memory_order_release);
        owed_cv_.notify_all();
      }
    }
    fallbacks_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t front_doors = front_doors_.load(std::memory_order_acquire);
    for (const RuleLimit* r : limits) {
      if (RefusesWithoutRedis(*r, front_doors)) {
        Verdict v;
        v.allowed = false;
        v.limited_by = StrCat(r->limit.name, " (quota store unavailable)");
        v.retry_after_ms = redis_.retry_interval_ms;
        Count(v);
        return v;
      }
    }
    Verdict v = local_->CheckAt(request, now);
    Count(v);
    if (v.allowed && !(up_.load(std::memory_order_acquire) &&
                       Carry(request, buckets, n, limits, /*probe=*/false, now))) {
      Owe(request);
    }
    return v;
  }

  // How long front doors back from an outage of Redis go on deciding locally while carrying
  // what they admit. Every front door that lost Redis probes it within a retry interval of its
  // return and carries its debts as it does; they all settle until the same moment on their
  // clocks, which the first to return sets in Redis (if one went back to Redis's decisions
  // while another still decided locally, Redis would not know what the other admits
  // meanwhile). Front doors' clocks are assumed to agree to a few ms (NTP).
  int64_t SettleMs() const { return redis_.retry_interval_ms + 2 * redis_.command_timeout_ms; }
  // The moment to settle until.
  int64_t SharedSettle(int64_t now) {
    const int64_t own = now + SettleMs();
    Command command;
    command.raw = {"EVAL",      kSettleScript,     "1", StrCat(redis_.key_prefix, "settle"),
                   StrCat(own), StrCat(SettleMs())};
    std::vector<int64_t> until;
    if (!Evaluate(&command, 1, &until, /*probe=*/false, now)) return own;
    // Another front door's moment, unless it makes no sense on this clock.
    return until[0] >= now && until[0] <= own ? until[0] : own;
  }

  // Carries the request's debts to Redis (a script call that charges and decides nothing), as
  // admitted at `now`: when they were decided, or later (never earlier: an entry of a log would
  // expire too soon). False if Redis did not take them (they stay owed).
  bool Carry(const CheckRequest& request, const std::array<Bucket, 2>& buckets, size_t n,
             const std::vector<const RuleLimit*>& limits, bool probe, int64_t now) {
    std::vector<uint64_t> debts(limits.size());
    if (!local_->TakeDebts(request, debts) && !probe) return true;
    Command command = ScriptCommand(request, buckets, n, limits, debts, now, true);
    std::vector<int64_t> numbers;
    if (Evaluate(&command, limits.size() * 5, &numbers, probe, now)) {
      return true;
    }
    local_->ReturnDebts(request, debts);
    return false;
  }

  // A request with debts, kept to be carried by the flusher: its fields joined by '\0'.
  void Owe(const CheckRequest& r) {
    std::string owed = StrCat(r.key_prefix, std::string_view("\0", 1), r.tier,
                              std::string_view("\0", 1), r.endpoint, std::string_view("\0", 1),
                              r.client_ip, std::string_view("\0", 1), r.key_id);
    std::lock_guard<std::mutex> lock(owed_mu_);
    if (owed_.size() < options_.max_keys) owed_.insert(std::move(owed));
  }

  // The flusher: once Redis answers again, carries the debts of every request that owes some,
  // so that other front doors' decisions see them even if no request for those limits comes
  // to this front door again.
  void FlushLoop() {
    std::unique_lock<std::mutex> lock(owed_mu_);
    while (true) {
      owed_cv_.wait(lock, [&] {
        return stopping_ || (!owed_.empty() && up_.load(std::memory_order_acquire));
      });
      if (stopping_) return;
      absl::flat_hash_set<std::string> batch;
      batch.swap(owed_);
      lock.unlock();
      for (auto it = batch.begin(); it != batch.end(); ++it) {
        if (!CarryOwed(*it)) {  // Redis is gone again: keep the rest for next time
          lock.lock();
          owed_.insert(it, batch.end());
          lock.unlock();
          break;
        }
      }
      lock.lock();
    }
  }

  bool CarryOwed(std::string_view owed) {
    std::array<std::string_view, 5> f;
    for (size_t i = 0; i < 4; ++i) {
      const size_t end = owed.find('\0');
      f[i] = owed.substr(0, end);
      owed.remove_prefix(end + 1);
    }
    f[4] = owed;
    const CheckRequest request{f[0], f[1], f[2], f[3], 1, f[4]};
    const Rules& rules = rules_.current();
    thread_local std::array<std::string, 2> key_buffers;
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, &key_buffers, buckets);
    const std::vector<const RuleLimit*> limits = LimitsOf(buckets, n);
    return n == 0 || Carry(request, buckets, n, limits, /*probe=*/false, clock_.NowUnixMillis());
  }

  void Count(const Verdict& v) {
    if (!v.allowed) refused_.fetch_add(1, std::memory_order_relaxed);
    if (!v.shadow_exceeded.empty()) shadow_.fetch_add(1, std::memory_order_relaxed);
  }

  // One caller's call, waiting in a lane. Its turn says whether it waits, leads its lane, or
  // has its answer (set under the lane's mutex, woken after it: wake_word.h).
  enum Turn : uint32_t { kWaiting = 0, kLead = 1, kDone = 2 };
  struct Call {
    const Command* command = nullptr;
    size_t expected = 0;
    std::vector<int64_t>* out = nullptr;
    int64_t deadline_us = 0;  // steady clock: the caller decides without Redis after it
    bool probe = false;       // the one call trying a Redis that was down
    bool taken = false;       // in a batch being sent (under the lane's mutex)
    bool ok = false;
    WakeWord turn{kWaiting};
  };
  // A connection and the calls queued for it. The call at the head leads: it pipelines every
  // call queued behind it (up to kMaxBatch) — all requests written, then all replies read — and
  // wakes them; so concurrent checks share round trips, and a lone check is one round trip.
  struct Lane {
    std::mutex mu;  // std::mutex: ThreadSanitizer sees its ordering (see limiter.cc)
    std::deque<Call*> queue ABSL_GUARDED_BY(mu);
    Connection connection;        // touched only by the lane's current leader
    uint64_t generation = 0;      // failures_ when `connection` was made
    int64_t offset_us = 0;        // Redis's clock (Unix µs) minus the steady clock, at connect
    int64_t read_timeout_us = 0;  // as last set on `connection` (SetReadTimeout)
  };
  static constexpr size_t kMaxBatch = 256;

  // Runs the script; true with `expected` integers in `*out`, false if Redis failed (then the
  // lane's connection is dropped and Redis is left alone for retry_interval_ms), is known to be
  // down (unless this call is the probe), or did not answer within one command timeout of the
  // call: no caller waits on a Redis known to be failing, and none waits longer than one
  // command timeout.
  bool Evaluate(const Command* command, size_t expected, std::vector<int64_t>* out, bool probe,
                int64_t now) {
    if (!probe && !up_.load(std::memory_order_acquire)) return false;
    Lane& lane = *lanes_[next_lane_.fetch_add(1, std::memory_order_relaxed) % lanes_.size()];
    Call call;
    call.command = command;
    call.expected = expected;
    call.out = out;
    call.probe = probe;
    call.deadline_us = SteadyMicros() + int64_t{redis_.command_timeout_ms} * 1000;
    std::unique_lock<std::mutex> lock(lane.mu);
    lane.queue.push_back(&call);
    if (lane.queue.front() != &call) {
      lock.unlock();
      const uint32_t turn = WaitForTurn(lane, call);
      if (turn != kLead) return turn == kDone && call.ok;
      lock.lock();
    }
    std::vector<Call*> batch;
    for (Call* c : lane.queue) {
      if (batch.size() == kMaxBatch) break;
      c->taken = true;
      batch.push_back(c);
    }
    lock.unlock();
    // Calls queued while Redis was up may find it down by their turn (an earlier batch failed):
    // then they are decided locally rather than each waiting out another timeout.
    const bool has_probe =
        std::any_of(batch.begin(), batch.end(), [](Call* c) { return c->probe; });
    if (has_probe || up_.load(std::memory_order_acquire)) RunBatch(lane, batch, now);
    std::vector<std::atomic<uint32_t>*> wake;
    wake.reserve(batch.size());
    lock.lock();
    for (Call* c : batch) {
      lane.queue.pop_front();  // the batch is the queue's head: taken calls never leave it
      if (c == &call) continue;
      c->turn.Set(kDone);
      wake.push_back(c->turn.address());
    }
    if (!lane.queue.empty()) {
      lane.queue.front()->turn.Set(kLead);
      wake.push_back(lane.queue.front()->turn.address());
    }
    lock.unlock();
    for (std::atomic<uint32_t>* w : wake) WakeWord::Wake(w);
    return call.ok;
  }

  // Waits until `call` leads its lane or a leader has run it, and says which (kLead, kDone).
  // kWaiting if its deadline passed first while it was still only queued: it leaves the queue,
  // to be decided locally.
  static uint32_t WaitForTurn(Lane& lane, Call& call) {
    const auto deadline =
        std::chrono::steady_clock::time_point(std::chrono::microseconds(call.deadline_us));
    uint32_t turn = call.turn.WaitWhile(kWaiting, deadline);
    if (turn != kWaiting) return turn;
    std::unique_lock<std::mutex> lock(lane.mu);
    turn = call.turn.load();
    if (turn != kWaiting) return turn;
    if (call.taken) {  // a leader is running it, within its own (earlier) deadline
      lock.unlock();
      return call.turn.WaitWhile(kWaiting);
    }
    // Never the head (the head leads): its leaving hands the lead to no one.
    lane.queue.erase(std::find(lane.queue.begin(), lane.queue.end(), &call));
    return kWaiting;
  }

  void RunBatch(Lane& lane, const std::vector<Call*>& batch, int64_t now) {
    // Reading gives up a tenth of a timeout early: waking up and deciding locally then still
    // fits in the timeout (the socket's timer is coarse).
    int64_t deadline_us = batch.front()->deadline_us;
    for (const Call* call : batch) deadline_us = std::min(deadline_us, call->deadline_us);
    deadline_us -= int64_t{redis_.command_timeout_ms} * 100;
    // The script must have run this long before the deadline for its answer to be read in
    // time; one that runs later changes nothing (see redis_script.h).
    const int64_t margin_us = int64_t{redis_.command_timeout_ms} * 1000 / 5;
    if (SteadyMicros() >= deadline_us - margin_us) return;  // waited out its turn: decide locally

    // A failure on any lane means the other lanes' connections predate an outage too.
    const uint64_t generation = failures_.load(std::memory_order_acquire);
    if (lane.generation != generation) lane.connection.reset();
    if (lane.connection == nullptr) {
      lane.connection = Connect(deadline_us, &lane.offset_us);
      lane.generation = generation;
      lane.read_timeout_us = 0;  // Connect's own: set again
    }
    redisContext* c = lane.connection.get();
    if (c == nullptr || !SetReadTimeout(lane, deadline_us) || !RegisterIfDue(c)) {
      return Fail(lane, now);
    }
    // The checks go out as one call of the decide script; other commands alone, after it.
    std::vector<Call*> checks, others;
    for (Call* call : batch) (call->command->raw.empty() ? checks : others).push_back(call);
    std::vector<std::string_view> decide;
    const std::string deadline = StrCat(deadline_us - margin_us + lane.offset_us);
    std::string key_count, check_count;
    if (!checks.empty()) {
      size_t keys = 0;
      for (const Call* call : checks) keys += call->command->keys.size();
      key_count = StrCat(keys);
      check_count = StrCat(checks.size());
      decide = {"EVALSHA", script_sha_, key_count};
      for (const Call* call : checks) {
        for (const std::string& k : call->command->keys) decide.push_back(k);
      }
      decide.push_back(deadline);
      decide.push_back(check_count);
      for (const Call* call : checks) {
        for (const std::string& a : call->command->args) decide.push_back(a);
      }
    }
    if (!checks.empty() && !Send(c, decide)) return Fail(lane, now);
    for (const Call* call : others) {
      if (!Send(c, {call->command->raw.begin(), call->command->raw.end()})) return Fail(lane, now);
    }
    Reply reply;
    if (!checks.empty() && (reply = Receive(c)) == nullptr) return Fail(lane, now);
    for (Call* call : others) {
      Reply other = Receive(c);
      if (other == nullptr) return Fail(lane, now);
      call->ok = Parse(other.get(), 0, call);
    }
    if (!checks.empty()) {
      if (reply->type == REDIS_REPLY_ERROR &&
          std::string_view(reply->str, reply->len).starts_with("NOSCRIPT")) {
        // A restarted Redis lost the script: load it, and send the checks again.
        Reply loaded(static_cast<redisReply*>(
            redisCommand(c, "SCRIPT LOAD %b", kDecideScript, sizeof(kDecideScript) - 1)));
        if (loaded == nullptr || loaded->type != REDIS_REPLY_STRING || !Send(c, decide) ||
            (reply = Receive(c)) == nullptr) {
          return Fail(lane, now);
        }
      }
      if (!Split(reply.get(), checks)) return Fail(lane, now);
    }
    up_.store(true, std::memory_order_release);
  }

  // Makes the lane's reads give up by `deadline_us`, no more than a sixteenth of a command
  // timeout sooner. The timeout is cut to that step and set only when it changes: in steady
  // traffic every batch has about the same time left, and setting it per batch (both directions,
  // as redisSetTimeout does) was as many system calls as the batches' reads and writes together.
  // Writes keep the timeout set at connect: a lane sends a batch only once the last one's reply
  // is in, so its socket buffer never fills.
  bool SetReadTimeout(Lane& lane, int64_t deadline_us) const {
    const int64_t step = std::max<int64_t>(1, int64_t{redis_.command_timeout_ms} * 1000 / 16);
    const int64_t left = deadline_us - SteadyMicros();
    const int64_t timeout = left >= step ? left / step * step : std::max<int64_t>(1, left);
    if (timeout == lane.read_timeout_us) return true;
    const timeval tv = Micros(timeout);
    if (setsockopt(lane.connection->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
      return false;
    }
    lane.read_timeout_us = timeout;
    return true;
  }

  static bool Send(redisContext* c, const std::vector<std::string_view>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    return redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data()) ==
           REDIS_OK;
  }

  static Reply Receive(redisContext* c) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK) return nullptr;
    return Reply(static_cast<redisReply*>(raw));
  }

  // Hands the decide script's reply to its checks, in order. False if the script ran after its
  // deadline (Redis is too slow: it changed nothing); a reply of another shape (an error) fails
  // the checks alone.
  static bool Split(const redisReply* reply, const std::vector<Call*>& checks) {
    const bool late = reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
                      reply->element[0]->type == REDIS_REPLY_INTEGER &&
                      reply->element[0]->integer == -1;
    if (late) return false;
    size_t total = 0;
    for (const Call* call : checks) total += call->expected;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != total) return true;
    size_t at = 0;
    for (Call* call : checks) {
      call->ok = Parse(reply, at, call);
      at += call->expected;
    }
    return true;
  }

  // The call's integers: `expected` of them from `reply`'s element `at`.
  static bool Parse(const redisReply* reply, size_t at, Call* call) {
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < at + call->expected) return false;
    call->out->resize(call->expected);
    for (size_t i = 0; i < call->expected; ++i) {
      const redisReply* e = reply->element[at + i];
      if (e->type != REDIS_REPLY_INTEGER) return false;
      (*call->out)[i] = e->integer;
    }
    return true;
  }

  // Once per registration period, this front door says it is alive and learns how many front
  // doors share Redis; their number cuts each one's share while Redis is unreachable. False if
  // Redis did not answer.
  bool RegisterIfDue(redisContext* c) {
    const int64_t now_us = SteadyMicros();
    int64_t due = next_register_us_.load(std::memory_order_acquire);
    if (now_us < due) return true;
    const int64_t period_us = redis_.register_interval_ms * 1000;
    if (!next_register_us_.compare_exchange_strong(due, now_us + period_us)) return true;
    const std::string key = StrCat(redis_.key_prefix, "front_doors");
    Reply reply(static_cast<redisReply*>(
        redisCommand(c, "EVAL %s 1 %s %s %lld", kRegisterScript, key.c_str(), id_.c_str(),
                     static_cast<long long>(5 * redis_.register_interval_ms))));
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
      next_register_us_.store(0, std::memory_order_release);
      return false;
    }
    // More front doors count at once; fewer only once five registrations in a row have said
    // so: after Redis was unreachable, the others may not have registered again yet, and a
    // count too low would give this front door too large a share.
    const uint64_t count = static_cast<uint64_t>(std::max<long long>(1, reply->integer));
    const uint64_t current = front_doors_.load(std::memory_order_acquire);
    if (count >= current) {
      fewer_in_a_row_ = 0;
    } else if (++fewer_in_a_row_ < 5) {
      return true;
    }
    if (count != current) {
      std::lock_guard<std::mutex> lock(rules_mu_);
      front_doors_.store(count, std::memory_order_release);
      local_->SetRules(ShareRules(rules_.current(), count));
    }
    return true;
  }

  // The connection broke, Redis is unreachable or too slow: every call of the batch falls back.
  void Fail(Lane& lane, int64_t now) {
    lane.connection.reset();
    failures_.fetch_add(1, std::memory_order_acq_rel);
    errors_.fetch_add(1, std::memory_order_relaxed);
    up_.store(false, std::memory_order_release);
    retry_at_.store(now + redis_.retry_interval_ms, std::memory_order_release);
  }

  // Connects, and measures Redis's clock against the steady clock (to within half a round
  // trip) for the scripts' deadlines; all before `deadline_us`, and within the connect timeout.
  Connection Connect(int64_t deadline_us, int64_t* offset_us) {
    const int64_t left_us = deadline_us - SteadyMicros();
    if (left_us <= 0) return nullptr;
    Connection c(redisConnectWithTimeout(
        redis_.host.c_str(), redis_.port,
        Micros(std::min(left_us, int64_t{redis_.connect_timeout_ms} * 1000))));
    if (c == nullptr || c->err != 0) return nullptr;
    if (redisSetTimeout(c.get(), Micros(std::max<int64_t>(1, deadline_us - SteadyMicros()))) !=
        REDIS_OK) {
      return nullptr;
    }
    const int64_t before = SteadyMicros();
    Reply time(static_cast<redisReply*>(redisCommand(c.get(), "TIME")));
    const int64_t after = SteadyMicros();
    if (time == nullptr || time->type != REDIS_REPLY_ARRAY || time->elements != 2) return nullptr;
    const int64_t redis_us =
        std::stoll(std::string(time->element[0]->str, time->element[0]->len)) * 1'000'000 +
        std::stoll(std::string(time->element[1]->str, time->element[1]->len));
    *offset_us = redis_us - (before + after) / 2;
    return c;
  }

  const LimiterOptions options_;
  const RedisOptions redis_;
  const Clock& clock_;
  const std::string script_sha_ = ScriptSha();
  const std::string id_ = RandomId();    // this front door, in the registry
  std::unique_ptr<LocalLimiter> local_;  // the stand-in, with this front door's share
  std::mutex rules_mu_;                  // orders SetRules with re-sharing
  RulesHolder rules_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<size_t> next_lane_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<bool> up_{true};
  std::atomic<bool> probing_{false};  // a caller is probing a Redis that was down
  std::atomic<int64_t> retry_at_{0};
  std::atomic<int64_t> settle_until_{0};  // Redis is back: decide locally until then
  std::atomic<uint64_t> front_doors_{1};  // live front doors, as last registered
  std::atomic<int64_t> next_register_us_{0};
  int fewer_in_a_row_ = 0;  // registrations that counted fewer front doors; by the registrant
  std::atomic<uint64_t> checks_{0}, refused_{0}, shadow_{0}, errors_{0}, fallbacks_{0};
  RefusalCache refusals_;
  std::mutex owed_mu_;
  std::condition_variable owed_cv_;
  absl::flat_hash_set<std::string> owed_ ABSL_GUARDED_BY(owed_mu_);  // requests with debts
  bool stopping_ ABSL_GUARDED_BY(owed_mu_) = false;
  std::thread flusher_;  // last: started once everything above is ready
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
