#include "limiter/limiter.h"

#include <algorithm>
#include <array>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "common/strings.h"
#include "limiter/local_limiter.h"
#include "limiter/rule_match.h"

namespace tweetsearch::limiter {
namespace {

constexpr size_t kShards = 64;

// One limit's state, and the units admitted into it that Redis has not heard of (debts: kept
// only by the Redis backend's stand-in, see local_limiter.h).
struct Slot {
  State state;
  uint64_t debt = 0;
};

struct Entry {
  uint64_t fingerprint = 0;
  std::vector<Slot> slots;  // one per limit of the rule set
  int64_t last_ms = 0;
  int64_t idle_ms = 0;  // the rule set's longest window
  // LRU list through the entries (node_hash_map keeps their addresses stable).
  Entry* newer = nullptr;
  Entry* older = nullptr;
  const std::string* key = nullptr;
};

struct Shard {
  // std::mutex rather than absl::Mutex: ThreadSanitizer sees its ordering (Debian's Abseil is
  // not built with it), and the limiter's tests run under it.
  mutable std::mutex mu;
  absl::node_hash_map<std::string, Entry> map ABSL_GUARDED_BY(mu);
  Entry* newest ABSL_GUARDED_BY(mu) = nullptr;
  Entry* oldest ABSL_GUARDED_BY(mu) = nullptr;

  void Unlink(Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    (e->newer ? e->newer->older : newest) = e->older;
    (e->older ? e->older->newer : oldest) = e->newer;
    e->newer = e->older = nullptr;
  }
  void PushNewest(Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    e->older = newest;
    e->newer = nullptr;
    if (newest) newest->newer = e;
    newest = e;
    if (!oldest) oldest = e;
  }
};

// Locks the shards of a request's buckets, in shard order (no deadlock).
class ShardLocks {
 public:
  ShardLocks(std::array<Shard, kShards>& shards, const std::array<Bucket, 2>& buckets, size_t n)
      : shards_(shards) {
    first_ = buckets[0].hash % kShards;
    second_ = n == 2 ? buckets[1].hash % kShards : first_;
    if (second_ < first_) std::swap(first_, second_);
    shards_[first_].mu.lock();
    if (second_ != first_) shards_[second_].mu.lock();
  }
  ~ShardLocks() {
    if (second_ != first_) shards_[second_].mu.unlock();
    shards_[first_].mu.unlock();
  }
  ShardLocks(const ShardLocks&) = delete;
  ShardLocks& operator=(const ShardLocks&) = delete;
  Shard& first() { return shards_[first_]; }
  Shard* second() { return second_ != first_ ? &shards_[second_] : nullptr; }

 private:
  std::array<Shard, kShards>& shards_;
  size_t first_, second_;
};

size_t LimitCount(const std::array<Bucket, 2>& buckets, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += buckets[i].set->limits.size();
  return count;
}

class MemoryLimiter final : public LocalLimiter {
 public:
  MemoryLimiter(const LimiterOptions& options, const Clock& clock, Rules rules, bool track_debts)
      : options_(options),
        clock_(clock),
        max_keys_(std::max<size_t>(1, options.max_keys)),
        track_debts_(track_debts) {
    SetRules(std::move(rules));
  }

  // The hot path: no allocation once warm (bucket keys are built in per-thread buffers, the
  // rules are a plain pointer), one or two shard locks.
  Verdict Check(const CheckRequest& request) override {
    return CheckAt(request, clock_.NowUnixMillis());
  }

  Verdict CheckAt(const CheckRequest& request, int64_t now) override {
    checks_.fetch_add(1, std::memory_order_relaxed);
    const Rules& rules = rules_.current();
    thread_local std::array<std::string, 2> key_buffers;
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, key_buffers, buckets);
    Verdict v;
    if (n == 0) return v;

    // Dry-run every limit, then commit only if every enforced limit admits.
    bool allowed = true;
    {
      ShardLocks locks(shards_, buckets, n);
      std::array<Entry*, 2> entries{};
      std::array<uint32_t, 2> shadow_admitted{};  // bit j: shadow limit j admitted the dry run
      for (size_t i = 0; i < n; ++i) {
        entries[i] = Find(buckets[i], now);
        const RuleSet& set = *buckets[i].set;
        for (size_t j = 0; j < set.limits.size(); ++j) {
          const RuleLimit& r = set.limits[j];
          const Decision d = Decide(r.limit, entries[i]->slots[j].state, now, CostOf(r, request),
                                    /*commit=*/false);
          if (r.limit.shadow && d.allowed) shadow_admitted[i] |= 1u << j;
          if (Fold(r, d, &v)) allowed = false;
        }
      }
      if (allowed) {
        for (size_t i = 0; i < n; ++i)
          Commit(*buckets[i].set, shadow_admitted[i], request, now, *entries[i]);
      } else {
        v.delay_ms = 0;
      }
      Trim(locks.first(), now);
      if (Shard* second = locks.second()) Trim(*second, now);
    }

    v.policy = JoinedPolicy(buckets, n);
    if (!allowed) refused_.fetch_add(1, std::memory_order_relaxed);
    if (!v.shadow_exceeded.empty()) shadow_.fetch_add(1, std::memory_order_relaxed);
    return v;
  }

  absl::Status Reload() override {
    return rules_.Reload(options_.rules_path, [this](Rules rules) { SetRules(std::move(rules)); });
  }

  void SetRules(Rules rules) override { rules_.Set(std::move(rules)); }

  void Mirror(const CheckRequest& request, std::span<const uint64_t> remaining,
              uint64_t front_doors, int64_t now_ms) override {
    const Rules& rules = rules_.current();
    thread_local std::array<std::string, 2> key_buffers;
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, key_buffers, buckets);
    if (n == 0 || LimitCount(buckets, n) != remaining.size()) return;
    ShardLocks locks(shards_, buckets, n);
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      Entry* e = Find(buckets[i], now_ms);
      for (size_t j = 0; j < e->slots.size(); ++j, ++k) {
        const RuleLimit& r = buckets[i].set->limits[j];
        const uint64_t share = r.fail == FailMode::kShare
                                   ? remaining[k] / std::max<uint64_t>(1, front_doors)
                                   : remaining[k];
        e->slots[j].state = NewState(r.limit.algorithm);
        Charge(r.limit, e->slots[j].state, now_ms, r.limit.limit - std::min(r.limit.limit, share));
      }
      e->last_ms = now_ms;
    }
  }

  bool TakeDebts(const CheckRequest& request, std::span<uint64_t> debts) override {
    std::fill(debts.begin(), debts.end(), 0);
    if (owed_.load(std::memory_order_acquire) == 0) return false;
    return MoveDebts(request, debts, /*take=*/true);
  }

  void ReturnDebts(const CheckRequest& request, std::span<const uint64_t> debts) override {
    std::vector<uint64_t> copy(debts.begin(), debts.end());
    MoveDebts(request, copy, /*take=*/false);
  }

  LimiterStats Stats() const override {
    LimiterStats s;
    s.checks = checks_.load(std::memory_order_relaxed);
    s.refused = refused_.load(std::memory_order_relaxed);
    s.shadow_exceeded = shadow_.load(std::memory_order_relaxed);
    s.evicted = evicted_.load(std::memory_order_relaxed);
    s.reloads = rules_.reloads();
    s.reload_errors = rules_.reload_errors();
    for (const Shard& shard : shards_) {
      std::lock_guard<std::mutex> lock(shard.mu);
      s.keys += shard.map.size();
    }
    return s;
  }

  const std::string& rules_path() const override { return options_.rules_path; }

 private:
  // The bucket's entry, created (or reset, after a rule change or a long idle) as needed.
  Entry* Find(const Bucket& b, int64_t now) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Shard& shard = shards_[b.hash % kShards];
    const uint64_t fingerprint = b.set->fingerprint;
    auto it = shard.map.find(absl::string_view(*b.key));
    const bool inserted = it == shard.map.end();
    if (inserted) {
      it = shard.map.try_emplace(*b.key).first;
      keys_.fetch_add(1, std::memory_order_relaxed);
    }
    Entry* e = &it->second;
    if (inserted) {
      e->key = &it->first;
    } else {
      shard.Unlink(e);
    }
    if (inserted || e->fingerprint != fingerprint || now - e->last_ms > e->idle_ms) {
      // Debts outlive a change of the rules (a front door's share changes with the number of
      // front doors), not an idle lifetime (then they no longer matter).
      const bool keep_debts =
          !inserted && now - e->last_ms <= e->idle_ms && e->slots.size() == b.set->limits.size();
      std::vector<uint64_t> debts;
      if (keep_debts) {
        for (const Slot& slot : e->slots) debts.push_back(slot.debt);
      } else {
        Forget(*e);
      }
      e->fingerprint = fingerprint;
      e->idle_ms = b.set->max_window_ms;
      e->slots.clear();
      for (size_t j = 0; j < b.set->limits.size(); ++j) {
        e->slots.push_back({NewState(b.set->limits[j].limit.algorithm), keep_debts ? debts[j] : 0});
      }
      e->last_ms = now;
    }
    shard.PushNewest(e);
    return e;
  }

  // Drops the shard's expired states from its old end, then, while more than max_keys states
  // are kept in all, the shard's least recently used ones: the bound holds over all shards (a
  // per-shard share would evict early in the shards hashing gives more than their share), and
  // the state dropped is the least recently used of its shard, an approximation of the least
  // recently used of all. The newest entry (this request's) always stays.
  void Trim(Shard& shard, int64_t now) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    while (shard.oldest != nullptr && shard.oldest != shard.newest) {
      const bool over = keys_.load(std::memory_order_relaxed) > max_keys_;
      if (!over && now - shard.oldest->last_ms <= shard.oldest->idle_ms) break;
      Entry* victim = shard.oldest;
      Forget(*victim);
      shard.Unlink(victim);
      shard.map.erase(*victim->key);
      keys_.fetch_sub(1, std::memory_order_relaxed);
      if (over) evicted_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  static uint64_t CostOf(const RuleLimit& r, const CheckRequest& request) {
    return r.per_request ? 1 : std::max<uint64_t>(1, request.units);
  }

  // Commits an admitted request into its entry's states (shadow limits only where their dry
  // run admitted), noting the units as owed to Redis when debts are kept.
  void Commit(const RuleSet& set, uint32_t shadow_admitted, const CheckRequest& request,
              int64_t now, Entry& e) {
    for (size_t j = 0; j < set.limits.size(); ++j) {
      const RuleLimit& r = set.limits[j];
      if (r.limit.shadow && !(shadow_admitted & (1u << j))) continue;
      const uint64_t cost = CostOf(r, request);
      Decide(r.limit, e.slots[j].state, now, cost, /*commit=*/true);
      if (track_debts_) {
        e.slots[j].debt += cost;
        owed_.fetch_add(cost, std::memory_order_release);
      }
    }
    e.last_ms = now;
  }

  // An entry's states are dropped: its debts no longer matter (they have expired with it).
  void Forget(Entry& e) {
    for (Slot& slot : e.slots) {
      owed_.fetch_sub(slot.debt, std::memory_order_release);
      slot.debt = 0;
    }
  }

  // Takes the request's debts into `debts`, or adds `debts` back to them.
  bool MoveDebts(const CheckRequest& request, std::span<uint64_t> debts, bool take) {
    const Rules& rules = rules_.current();
    thread_local std::array<std::string, 2> key_buffers;
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, key_buffers, buckets);
    if (n == 0 || LimitCount(buckets, n) != debts.size()) return false;
    const int64_t now = clock_.NowUnixMillis();
    ShardLocks locks(shards_, buckets, n);
    bool any = false;
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      Entry* e = Find(buckets[i], now);
      for (size_t j = 0; j < e->slots.size(); ++j, ++k) {
        uint64_t& debt = e->slots[j].debt;
        if (take) {
          debts[k] = debt;
          owed_.fetch_sub(debt, std::memory_order_release);
          debt = 0;
        } else {
          debt += debts[k];
          owed_.fetch_add(debts[k], std::memory_order_release);
        }
        any |= debts[k] > 0;
      }
    }
    return any;
  }

  const LimiterOptions options_;
  const Clock& clock_;
  const size_t max_keys_;
  const bool track_debts_;
  std::atomic<uint64_t> owed_{0};  // units owed to Redis over all entries
  std::atomic<size_t> keys_{0};    // states kept, over all shards
  RulesHolder rules_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> checks_{0}, refused_{0}, shadow_{0}, evicted_{0};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Limiter>> Limiter::Create(const LimiterOptions& options,
                                                         const Clock& clock) {
  Rules rules;
  if (!options.rules_path.empty()) {
    absl::StatusOr<Rules> loaded = LoadRulesFile(options.rules_path);
    if (!loaded.ok()) return loaded.status();
    rules = *std::move(loaded);
  }
  return std::unique_ptr<Limiter>(new MemoryLimiter(options, clock, std::move(rules), false));
}

std::unique_ptr<Limiter> Limiter::CreateWithRules(Rules rules, const LimiterOptions& options,
                                                  const Clock& clock) {
  return std::make_unique<MemoryLimiter>(options, clock, std::move(rules), false);
}

std::unique_ptr<LocalLimiter> CreateLocalLimiter(Rules rules, const LimiterOptions& options,
                                                 const Clock& clock) {
  return std::make_unique<MemoryLimiter>(options, clock, std::move(rules), true);
}

bool RefusesWithoutRedis(const RuleLimit& limit, uint64_t front_doors) {
  if (limit.limit.shadow) return false;
  return limit.fail == FailMode::kClosed ||
         (limit.fail == FailMode::kShare && limit.limit.limit < front_doors);
}

Rules ShareRules(const Rules& rules, uint64_t front_doors) {
  Rules shared = rules;
  auto cut = [front_doors](RuleSet& set) {
    for (RuleLimit& r : set.limits) {
      if (r.fail == FailMode::kShare) {
        r.limit.limit = std::max<uint64_t>(1, r.limit.limit / std::max<uint64_t>(1, front_doors));
      }
    }
  };
  for (auto& [tier, endpoints] : shared.tiers) {
    for (auto& [endpoint, set] : endpoints) cut(set);
  }
  for (auto& [key, endpoints] : shared.keys) {
    for (auto& [endpoint, set] : endpoints) cut(set);
  }
  for (auto& [endpoint, set] : shared.anonymous) cut(set);
  return shared;
}

}  // namespace tweetsearch::limiter
