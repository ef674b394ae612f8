#include "limiter/rule_match.h"

#include <mutex>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "common/strings.h"

namespace tweetsearch::limiter {

size_t MatchRules(const Rules& rules, const CheckRequest& r, std::array<std::string, 2>& keys,
                  std::array<Bucket, 2>& out) {
  size_t n = 0;
  auto add = [&](const RuleSet& set, auto&&... parts) {
    if (set.limits.empty()) return;
    std::string& key = keys[n];
    key.clear();
    (key.append(parts), ...);
    out[n++] = {&key, &set, absl::HashOf(absl::string_view(key))};
  };
  // Quota state belongs to the key's id; the prefix only selects overrides. (Prefixes are
  // short and may be shared by several keys.)
  const std::string_view id = r.key_id.empty() ? r.key_prefix : r.key_id;
  for (std::string_view endpoint : {r.endpoint, std::string_view("all")}) {
    if (id.empty()) {
      auto it = rules.anonymous.find(endpoint);
      if (it != rules.anonymous.end()) add(it->second, "a|", endpoint, "|", r.client_ip);
      continue;
    }
    if (auto k = rules.keys.find(r.key_prefix); k != rules.keys.end()) {
      if (auto e = k->second.find(endpoint); e != k->second.end()) {
        add(e->second, "k|", id, "|", endpoint);
        continue;
      }
    }
    auto tier = rules.tiers.find(r.tier);
    if (tier == rules.tiers.end()) tier = rules.tiers.find(rules.default_tier);
    if (tier == rules.tiers.end()) continue;
    if (auto e = tier->second.find(endpoint); e != tier->second.end()) {
      // Keyed by the key, not the tier: every key of a tier has its own quota.
      add(e->second, "t|", tier->first, "|", id, "|", endpoint);
    }
  }
  return n;
}

std::string JoinedPolicy(const std::array<Bucket, 2>& buckets, size_t n) {
  std::string policy = n > 0 ? buckets[0].set->policy : std::string();
  if (n == 2 && !buckets[1].set->policy.empty()) {
    if (!policy.empty()) policy += ", ";
    policy += buckets[1].set->policy;
  }
  return policy;
}

void PrepareRules(Rules& rules) {
  auto prepare = [](RuleSet& set) {
    set.policy.clear();
    uint64_t h = 0x51ed270b;
    for (const RuleLimit& r : set.limits) {
      h = absl::HashOf(h, r.limit.name, static_cast<int>(r.limit.algorithm), r.limit.limit,
                       r.limit.window_ms, r.limit.max_wait_ms, r.per_request, r.limit.shadow);
      if (r.limit.shadow) continue;  // shadow limits are not promised to clients
      StrAppend(&set.policy, set.policy.empty() ? "" : ", ", r.limit.limit,
                ";w=", (r.limit.window_ms + 999) / 1000);
    }
    set.fingerprint = h;
  };
  for (auto& [tier, endpoints] : rules.tiers) {
    for (auto& [endpoint, set] : endpoints) prepare(set);
  }
  for (auto& [key, endpoints] : rules.keys) {
    for (auto& [endpoint, set] : endpoints) prepare(set);
  }
  for (auto& [endpoint, set] : rules.anonymous) prepare(set);
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
  PrepareRules(rules);
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
