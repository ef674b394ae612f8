#include "limiter/limiter.h"

#include <algorithm>
#include <array>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/synchronization/mutex.h"
#include "common/strings.h"

namespace tweetsearch::limiter {
namespace {

constexpr size_t kShards = 64;

// A fingerprint of a rule set's definitions: states are kept across reloads only when it is
// unchanged.
uint64_t Fingerprint(const RuleSet& set) {
  uint64_t h = 0x51ed270b;
  for (const RuleLimit& r : set.limits) {
    h = absl::HashOf(h, r.limit.name, static_cast<int>(r.limit.algorithm), r.limit.limit,
                     r.limit.window_ms, r.limit.max_wait_ms, r.per_request);
  }
  return h;
}

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
  mutable absl::Mutex mu;
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

// One rule set to apply to one bucket key.
struct Bucket {
  std::string key;
  const RuleSet* set;
  size_t shard;
};

class MemoryLimiter final : public Limiter {
 public:
  MemoryLimiter(const LimiterOptions& options, const Clock& clock, Rules rules)
      : options_(options), clock_(clock),
        per_shard_(std::max<size_t>(1, options.max_keys / kShards)) {
    SetRules(std::move(rules));
  }

  Verdict Check(const CheckRequest& request) override {
    checks_.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<const Rules> rules = rules_.load();
    std::vector<Bucket> buckets;
    Collect(*rules, request, &buckets);
    Verdict v;
    if (buckets.empty()) return v;
    const int64_t now = clock_.NowUnixMillis();

    // Lock every shard involved, in shard order (no deadlock), decide on copies of the states,
    // and commit only if every enforced limit admits.
    std::vector<size_t> order;
    for (const Bucket& b : buckets) order.push_back(b.shard);
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end()), order.end());
    for (size_t s : order) shards_[s].mu.Lock();

    std::vector<std::vector<State>> next(buckets.size());
    std::vector<Entry*> entries(buckets.size());
    bool allowed = true;
    uint64_t best_remaining = UINT64_MAX;
    for (size_t i = 0; i < buckets.size(); ++i) {
      entries[i] = Find(buckets[i], now);
      next[i] = entries[i]->states;
      const RuleSet& set = *buckets[i].set;
      for (size_t j = 0; j < set.limits.size(); ++j) {
        const RuleLimit& r = set.limits[j];
        const uint64_t cost = r.per_request ? 1 : std::max<uint64_t>(1, request.units);
        const Decision d = Decide(r.limit, next[i][j], now, cost);
        if (!r.limit.shadow) {  // shadow limits are not promised to clients
          StrAppend(&v.policy, v.policy.empty() ? "" : ", ", r.limit.limit, ";w=",
                    (r.limit.window_ms + 999) / 1000);
        }
        if (!d.allowed && r.limit.shadow) {
          v.shadow_exceeded.push_back(r.limit.name);
          next[i][j] = entries[i]->states[j];  // a shadow refusal changes nothing
          continue;
        }
        if (!d.allowed) {
          if (allowed || d.retry_after_ms > v.retry_after_ms) {
            v.limited_by = r.limit.name;
            v.retry_after_ms = d.retry_after_ms;
          }
          allowed = false;
        }
        v.delay_ms = std::max(v.delay_ms, d.delay_ms);
        if (!r.limit.shadow && (d.remaining < best_remaining || !v.has_quota)) {
          best_remaining = d.remaining;
          v.has_quota = true;
          v.limit = r.limit.limit;
          v.remaining = d.remaining;
          v.window_ms = r.limit.window_ms;
          v.reset_ms = d.reset_ms;
        }
      }
    }
    if (allowed) {
      for (size_t i = 0; i < buckets.size(); ++i) {
        entries[i]->states = std::move(next[i]);
        entries[i]->last_ms = now;
      }
    } else {
      v.allowed = false;
      v.delay_ms = 0;
    }
    for (size_t s : order) Trim(shards_[s], now);
    for (auto it = order.rbegin(); it != order.rend(); ++it) shards_[*it].mu.Unlock();
    if (!allowed) refused_.fetch_add(1, std::memory_order_relaxed);
    if (!v.shadow_exceeded.empty()) shadow_.fetch_add(1, std::memory_order_relaxed);
    return v;
  }

  absl::Status Reload() override {
    if (options_.rules_path.empty()) return absl::OkStatus();
    absl::StatusOr<Rules> rules = LoadRulesFile(options_.rules_path);
    if (!rules.ok()) {
      reload_errors_.fetch_add(1, std::memory_order_relaxed);
      return rules.status();
    }
    SetRules(*std::move(rules));
    reloads_.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  void SetRules(Rules rules) override {
    rules_.store(std::make_shared<const Rules>(std::move(rules)));
  }

  LimiterStats Stats() const override {
    LimiterStats s;
    s.checks = checks_.load(std::memory_order_relaxed);
    s.refused = refused_.load(std::memory_order_relaxed);
    s.shadow_exceeded = shadow_.load(std::memory_order_relaxed);
    s.evicted = evicted_.load(std::memory_order_relaxed);
    s.reloads = reloads_.load(std::memory_order_relaxed);
    s.reload_errors = reload_errors_.load(std::memory_order_relaxed);
    for (const Shard& shard : shards_) {
      absl::MutexLock lock(&shard.mu);
      s.keys += shard.map.size();
    }
    return s;
  }

  const std::string& rules_path() const override { return options_.rules_path; }

 private:
  // The rule sets that apply to `r`, with their bucket keys.
  void Collect(const Rules& rules, const CheckRequest& r, std::vector<Bucket>* out) const {
    auto add = [&](const std::string& key, const RuleSet& set) {
      if (set.limits.empty()) return;
      out->push_back({key, &set, absl::HashOf(key) % kShards});
    };
    for (std::string_view endpoint : {r.endpoint, std::string_view("all")}) {
      if (r.key_prefix.empty()) {
        auto it = rules.anonymous.find(std::string(endpoint));
        if (it != rules.anonymous.end()) add(StrCat("a|", endpoint, "|", r.client_ip), it->second);
        continue;
      }
      // A per-key override for this endpoint wins over the tier.
      if (auto k = rules.keys.find(std::string(r.key_prefix)); k != rules.keys.end()) {
        if (auto e = k->second.find(std::string(endpoint)); e != k->second.end()) {
          add(StrCat("k|", r.key_prefix, "|", endpoint), e->second);
          continue;
        }
      }
      auto tier = rules.tiers.find(std::string(r.tier));
      if (tier == rules.tiers.end()) tier = rules.tiers.find(rules.default_tier);
      if (tier == rules.tiers.end()) continue;
      if (auto e = tier->second.find(std::string(endpoint)); e != tier->second.end()) {
        // Keyed by the key, not the tier: every key of a tier has its own quota.
        add(StrCat("t|", tier->first, "|", r.key_prefix, "|", endpoint), e->second);
      }
    }
  }

  // The bucket's entry, created (or reset, after a rule change or a long idle) as needed.
  Entry* Find(const Bucket& b, int64_t now) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Shard& shard = shards_[b.shard];
    const uint64_t fingerprint = Fingerprint(*b.set);
    auto [it, inserted] = shard.map.try_emplace(b.key);
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

  // Drops expired states from the old end, then the least recently used beyond the bound; the
  // newest entry (this request's) always stays.
  void Trim(Shard& shard, int64_t now) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    while (shard.oldest != nullptr && shard.oldest != shard.newest &&
           (shard.map.size() > per_shard_ || now - shard.oldest->last_ms > shard.oldest->idle_ms)) {
      Entry* victim = shard.oldest;
      const bool over = shard.map.size() > per_shard_;
      shard.Unlink(victim);
      shard.map.erase(*victim->key);
      if (over) evicted_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  const LimiterOptions options_;
  const Clock& clock_;
  const size_t per_shard_;
  std::atomic<std::shared_ptr<const Rules>> rules_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> checks_{0}, refused_{0}, shadow_{0}, evicted_{0}, reloads_{0},
      reload_errors_{0};
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
