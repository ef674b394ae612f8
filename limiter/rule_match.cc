#include "limiter/rule_match.h"

// Inlined: the hash of a short id is a few dozen instructions, and compiled in place it is
// specialised for the lengths ids have, where the library's entry point goes through a call and
// a dispatch on the length.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "common/strings.h"

namespace tweetsearch::limiter {

namespace {

// The rule sets a request's (key prefix, tier, endpoint, with a key or not) selects: the same
// for every request of a client, so each thread remembers its last selection per rules version
// and skips the map lookups when the next request asks the same.
struct Selection {
  uint64_t version = 0;
  bool anonymous = false;
  std::string prefix, tier, endpoint;
  size_t n = 0;
  std::array<const RuleSet*, 2> sets{};
};

void Select(const Rules& rules, const CheckRequest& r, bool anonymous, Selection& s) {
  s.n = 0;
  for (std::string_view endpoint : {r.endpoint, std::string_view("all")}) {
    // "all" counts requests; a stream's events are not requests.
    if (endpoint == "all" && r.endpoint == "stream") continue;
    const RuleSet* set = nullptr;
    if (anonymous) {
      if (auto it = rules.anonymous.find(endpoint); it != rules.anonymous.end()) set = &it->second;
    } else {
      if (auto k = rules.keys.find(r.key_prefix); k != rules.keys.end()) {
        if (auto e = k->second.find(endpoint); e != k->second.end()) set = &e->second;
      }
      if (set == nullptr) {
        auto tier = rules.tiers.find(r.tier);
        if (tier == rules.tiers.end()) tier = rules.tiers.find(rules.default_tier);
        if (tier != rules.tiers.end()) {
          if (auto e = tier->second.find(endpoint); e != tier->second.end()) set = &e->second;
        }
      }
    }
    if (set != nullptr && !set->limits.empty()) s.sets[s.n++] = set;
  }
  s.version = rules.version;
  s.anonymous = anonymous;
  s.prefix.assign(r.key_prefix);
  s.tier.assign(r.tier);
  s.endpoint.assign(r.endpoint);
}

// Whether two short texts (an endpoint, a tier, a key prefix) are equal, compared in place with
// overlapping word loads: a call to memcmp cost more than these few bytes.
inline bool SameText(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char* p = a.data();
  const char* q = b.data();
  auto differ = [](const char* x, const char* y, auto word) {
    decltype(word) u, v;
    std::memcpy(&u, x, sizeof(u));
    std::memcpy(&v, y, sizeof(v));
    return u != v;
  };
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (differ(p + i, q + i, uint64_t{})) return false;
    }
    return !differ(p + n - 8, q + n - 8, uint64_t{});
  }
  if (n >= 4) return !differ(p, q, uint32_t{}) && !differ(p + n - 4, q + n - 4, uint32_t{});
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != q[i]) return false;
  }
  return true;
}

// A number for each distinct hash of a rule set's definitions, from 1, the same for equal
// hashes: four bytes where the hash takes eight (the in-process backend's entries keep it beside
// their first state, in one cache line). One per definition the process has seen: rules are
// reloaded rarely.
uint32_t DefinitionNumber(uint64_t hash) {
  static std::mutex mu;
  static auto* numbers = new absl::flat_hash_map<uint64_t, uint32_t>;  // kept until exit
  std::lock_guard<std::mutex> lock(mu);
  return numbers->try_emplace(hash, static_cast<uint32_t>(numbers->size() + 1)).first->second;
}

}  // namespace

size_t MatchRules(const Rules& rules, const CheckRequest& r, std::array<std::string, 2>* keys,
                  std::array<Bucket, 2>& out) {
  // Quota state belongs to the key's id; the prefix only selects overrides. (Prefixes are
  // short and may be shared by several keys.)
  const std::string_view id = r.key_id.empty() ? r.key_prefix : r.key_id;
  const bool anonymous = id.empty();
  thread_local Selection last;
  // Rules no limiter took (version 0) are selected afresh every time, never remembered. (Not a
  // std::optional on the stack: zeroing one cost a decision on one key a sixth of its time.)
  thread_local Selection unremembered;
  Selection* s = &last;
  if (rules.version == 0) {
    s = &unremembered;
    Select(rules, r, anonymous, *s);
  } else if (last.version != rules.version || last.anonymous != anonymous ||
             !SameText(last.endpoint, r.endpoint) || !SameText(last.tier, r.tier) ||
             // The prefix selects only per-key overrides: without any, it changes nothing.
             (!rules.keys.empty() && !SameText(last.prefix, r.key_prefix))) {
    Select(rules, r, anonymous, last);
  }
  // Every key of a tier has its own quota: buckets are named by the key (or the client's IP).
  const std::string_view name = anonymous ? r.client_ip : id;
  for (size_t i = 0; i < s->n; ++i) {
    const RuleSet& set = *s->sets[i];
    const std::string* text = nullptr;
    if (keys != nullptr) {
      std::string& key = (*keys)[i];
      key.clear();
      if (set.kind == 'a') {
        StrAppend(&key, "a|", set.endpoint, "|", name);
      } else if (set.kind == 'k') {
        StrAppend(&key, "k|", name, "|", set.endpoint);
      } else {
        StrAppend(&key, "t|", set.owner, "|", name, "|", set.endpoint);
      }
      text = &key;
    }
    // One pass of a 128-bit hash, seeded by the rule set's place.
    const XXH128_hash_t h = XXH3_128bits_withSeed(name.data(), name.size(), set.seed);
    // Never the id of no bucket (an empty place of a table: entry_table.h).
    out[i] = {text, &set, BucketId{h.high64, h.low64 | (h.high64 == 0 && h.low64 == 0)}};
  }
  return s->n;
}

void SetPolicy(const std::array<Bucket, 2>& buckets, size_t n, Verdict* v) {
  for (size_t i = 0; i < n; ++i) v->policy_parts[i] = buckets[i].set->policy;
}

std::string Verdict::Policy() const {
  std::string policy(policy_parts[0]);
  if (!policy_parts[1].empty()) {
    if (!policy.empty()) policy += ", ";
    policy += policy_parts[1];
  }
  return policy;
}

void PrepareRules(Rules& rules) {
  auto prepare = [](RuleSet& set, std::string_view kind, std::string_view name,
                    std::string_view endpoint) {
    set.seed = absl::HashOf(absl::string_view(kind.data(), kind.size()),
                            absl::string_view(name.data(), name.size()),
                            absl::string_view(endpoint.data(), endpoint.size()));
    set.kind = kind[0];
    set.owner = name;
    set.endpoint = endpoint;
    set.policy.clear();
    uint64_t h = 0x51ed270b;
    for (const RuleLimit& r : set.limits) {
      h = absl::HashOf(h, r.limit.name, static_cast<int>(r.limit.algorithm), r.limit.limit,
                       r.limit.window_ms, r.limit.max_wait_ms, r.per_request, r.limit.shadow);
      if (r.limit.shadow) continue;  // shadow limits are not promised to clients
      StrAppend(&set.policy, set.policy.empty() ? "" : ", ", r.limit.limit,
                ";w=", (r.limit.window_ms + 999) / 1000);
    }
    set.fingerprint = DefinitionNumber(h);
  };
  ForEachRuleSet(rules, prepare);
}

void ForEachRuleSet(Rules& rules,
                    const std::function<void(RuleSet&, std::string_view, std::string_view,
                                             std::string_view)>& visit) {
  for (auto& [tier, endpoints] : rules.tiers) {
    for (auto& [endpoint, set] : endpoints) visit(set, "t", tier, endpoint);
  }
  for (auto& [key, endpoints] : rules.keys) {
    for (auto& [endpoint, set] : endpoints) visit(set, "k", key, endpoint);
  }
  for (auto& [endpoint, set] : rules.anonymous) visit(set, "a", "", endpoint);
}

std::vector<const RuleLimit*> LimitsOf(const std::array<Bucket, 2>& buckets, size_t n) {
  std::vector<const RuleLimit*> limits;
  for (size_t i = 0; i < n; ++i) {
    for (const RuleLimit& r : buckets[i].set->limits) limits.push_back(&r);
  }
  return limits;
}

bool Fold(const RuleLimit& r, const Decision& d, Verdict* v) {
  if (r.limit.shadow) {
    if (!d.allowed) v->shadow_exceeded.push_back(r.limit.name);
    return false;
  }
  const bool refused = !d.allowed;
  if (refused && (v->allowed || d.retry_after_ms > v->retry_after_ms)) {
    v->limited_by = r.limit.name;
    v->retry_after_ms = d.retry_after_ms;
  }
  if (refused) v->allowed = false;
  v->delay_ms = std::max(v->delay_ms, d.delay_ms);
  if (!v->has_quota || d.remaining < v->remaining) {
    v->has_quota = true;
    v->limit = r.limit.limit;
    v->remaining = d.remaining;
    v->reset_ms = d.reset_ms;
  }
  return refused;
}

void RulesHolder::Set(Rules rules) {
  static std::atomic<uint64_t> versions{0};
  PrepareRules(rules);
  rules.version = versions.fetch_add(1, std::memory_order_relaxed) + 1;
  auto owned = std::make_unique<const Rules>(std::move(rules));
  std::lock_guard<std::mutex> lock(mu_);
  current_.store(owned.get(), std::memory_order_release);
  versions_.push_back(std::move(owned));
}

absl::Status RulesHolder::Reload(const std::string& path, const std::function<void(Rules)>& set) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<Rules> rules = LoadRulesFile(path);
  if (!rules.ok()) {
    reload_errors_.fetch_add(1, std::memory_order_relaxed);
    return rules.status();
  }
  set(*std::move(rules));
  reloads_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace tweetsearch::limiter
