#include "limiter/limiter.h"

#include <algorithm>
#include <array>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "common/strings.h"
#include "limiter/rule_match.h"

namespace tweetsearch::limiter {
namespace {

constexpr size_t kShards = 64;

struct Entry {
  uint64_t fingerprint = 0;
  std::vector<State> states;
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

class MemoryLimiter final : public Limiter {
 public:
  MemoryLimiter(const LimiterOptions& options, const Clock& clock, Rules rules)
      : options_(options), clock_(clock), max_keys_(std::max<size_t>(1, options.max_keys)) {
    SetRules(std::move(rules));
  }

  // The hot path: no allocation once warm (bucket keys are built in per-thread buffers, the
  // rules are a plain pointer), one or two shard locks.
  Verdict Check(const CheckRequest& request) override {
    checks_.fetch_add(1, std::memory_order_relaxed);
    const Rules& rules = rules_.current();
    thread_local std::array<std::string, 2> key_buffers;
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, key_buffers, buckets);
    Verdict v;
    if (n == 0) return v;
    const int64_t now = clock_.NowUnixMillis();

    // Lock the shards involved in shard order (no deadlock); dry-run every limit, then commit
    // only if every enforced limit admits.
    size_t first = buckets[0].hash % kShards;
    size_t second = n == 2 ? buckets[1].hash % kShards : first;
    if (second < first) std::swap(first, second);
    shards_[first].mu.lock();
    if (second != first) shards_[second].mu.lock();

    std::array<Entry*, 2> entries{};
    std::array<uint32_t, 2> shadow_admitted{};  // bit j: shadow limit j admitted the dry run
    bool allowed = true;
    for (size_t i = 0; i < n; ++i) {
      entries[i] = Find(buckets[i], now);
      const RuleSet& set = *buckets[i].set;
      for (size_t j = 0; j < set.limits.size(); ++j) {
        const RuleLimit& r = set.limits[j];
        const uint64_t cost = r.per_request ? 1 : std::max<uint64_t>(1, request.units);
        const Decision d = Decide(r.limit, entries[i]->states[j], now, cost, /*commit=*/false);
        if (r.limit.shadow && d.allowed) shadow_admitted[i] |= 1u << j;
        if (Fold(r, d, &v)) allowed = false;
      }
    }
    if (allowed) {
      for (size_t i = 0; i < n; ++i) {
        const RuleSet& set = *buckets[i].set;
        for (size_t j = 0; j < set.limits.size(); ++j) {
          const RuleLimit& r = set.limits[j];
          if (r.limit.shadow && !(shadow_admitted[i] & (1u << j))) continue;
          const uint64_t cost = r.per_request ? 1 : std::max<uint64_t>(1, request.units);
          Decide(r.limit, entries[i]->states[j], now, cost, /*commit=*/true);
        }
        entries[i]->last_ms = now;
      }
    } else {
      v.delay_ms = 0;
    }
    Trim(shards_[first], now);
    if (second != first) Trim(shards_[second], now);
    if (second != first) shards_[second].mu.unlock();
    shards_[first].mu.unlock();

    v.policy = JoinedPolicy(buckets, n);
    if (!allowed) refused_.fetch_add(1, std::memory_order_relaxed);
    if (!v.shadow_exceeded.empty()) shadow_.fetch_add(1, std::memory_order_relaxed);
    return v;
  }

  absl::Status Reload() override {
    return rules_.Reload(options_.rules_path, [this](Rules rules) { SetRules(std::move(rules)); });
  }

  void SetRules(Rules rules) override { rules_.Set(std::move(rules)); }

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
      e->fingerprint = fingerprint;
      e->idle_ms = b.set->max_window_ms;
      e->states.clear();
      for (const RuleLimit& r : b.set->limits) e->states.push_back(NewState(r.limit.algorithm));
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
      shard.Unlink(victim);
      shard.map.erase(*victim->key);
      keys_.fetch_sub(1, std::memory_order_relaxed);
      if (over) evicted_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const LimiterOptions options_;
  const Clock& clock_;
  const size_t max_keys_;
  std::atomic<size_t> keys_{0};  // states kept, over all shards
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
  return std::unique_ptr<Limiter>(new MemoryLimiter(options, clock, std::move(rules)));
}

std::unique_ptr<Limiter> Limiter::CreateWithRules(Rules rules, const LimiterOptions& options,
                                                  const Clock& clock) {
  return std::make_unique<MemoryLimiter>(options, clock, std::move(rules));
}

}  // namespace tweetsearch::limiter
