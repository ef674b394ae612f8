// Shared by the limiter's backends: which rule sets apply to a request, under which bucket keys,
// and how a set of decisions becomes a Verdict.
#ifndef TWEETSEARCH_LIMITER_RULE_MATCH_H_
#define TWEETSEARCH_LIMITER_RULE_MATCH_H_

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "limiter/limiter.h"
#include "limiter/rules.h"

namespace tweetsearch::limiter {

// A bucket's name in process: 128 bits of hash of its rule set's place and the key's id (or
// the client's IP), so that no key text is built or compared on the hot path. (Two buckets
// collide with probability about n² / 2^129: never, for any number of keys that fits in memory.)
struct BucketId {
  uint64_t hi = 0, lo = 0;  // never both 0 (MatchRules): that is no bucket's id
  bool operator==(const BucketId&) const = default;
};
struct BucketIdHash {
  size_t operator()(const BucketId& id) const { return id.lo; }
};

// One rule set to apply under one bucket key.
struct Bucket {
  const std::string* key = nullptr;  // its text, in the caller's buffers (when asked for)
  const RuleSet* set = nullptr;
  BucketId id;
};

// The rule sets that apply to `request` (at most two: the endpoint's and "all"), with their
// bucket ids and — when `keys` is given — their keys' text written into `*keys`: a per-key
// override (by prefix), else the key's tier (or default_tier), else — without a key — the
// anonymous limits per client IP. Buckets of a key are named by its id (or its prefix when no
// id is given). Returns how many.
size_t MatchRules(const Rules& rules, const CheckRequest& request, std::array<std::string, 2>* keys,
                  std::array<Bucket, 2>& out);

// The limits of the first `n` buckets' rule sets, in order (the first bucket's, then the
// second's): the order of a check's limits everywhere (Redis script arguments, debts, mirror).
std::vector<const RuleLimit*> LimitsOf(const std::array<Bucket, 2>& buckets, size_t n);

// Calls `visit(set, kind, owner, endpoint)` for every rule set: kind "t" (owner: the tier), "k"
// (owner: the key prefix) or "a" (anonymous, no owner).
void ForEachRuleSet(Rules& rules,
                    const std::function<void(RuleSet&, std::string_view, std::string_view,
                                             std::string_view)>& visit);

// Points `v->policy_parts` at the RateLimit-Policy texts of the first `n` buckets' rule sets.
void SetPolicy(const std::array<Bucket, 2>& buckets, size_t n, Verdict* v);

// Fills every rule set's policy text and fingerprint.
void PrepareRules(Rules& rules);

// Folds one limit's (dry-run) decision into `v`: refusal, delay, shadow overrun, and the
// tightest enforced limit for the headers. Returns whether an enforced limit refused.
bool Fold(const RuleLimit& r, const Decision& d, Verdict* v);

// The current rules of a limiter, swapped by pointer: readers pay one atomic load. Every
// version stays alive until the holder goes (a check in flight may hold one; reloads are rare).
class RulesHolder {
 public:
  const Rules& current() const { return *current_.load(std::memory_order_acquire); }
  // Prepares (PrepareRules) and publishes `rules`.
  void Set(Rules rules);
  // Re-reads `path` (nothing to do when empty) and hands the rules to `set`; on error the
  // current rules stay and the error is returned. Counts both outcomes.
  absl::Status Reload(const std::string& path, const std::function<void(Rules)>& set);
  uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }
  uint64_t reload_errors() const { return reload_errors_.load(std::memory_order_relaxed); }

 private:
  std::atomic<const Rules*> current_{nullptr};
  std::mutex mu_;  // std::mutex: ThreadSanitizer sees its ordering (see limiter.cc)
  std::vector<std::unique_ptr<const Rules>> versions_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> reloads_{0}, reload_errors_{0};
};

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_RULE_MATCH_H_
