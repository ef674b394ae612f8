// Shared by the limiter's backends: which rule sets apply to a request, under which bucket keys,
// and how a set of decisions becomes a Verdict.
#ifndef TWEETSEARCH_LIMITER_RULE_MATCH_H_
#define TWEETSEARCH_LIMITER_RULE_MATCH_H_

#include <array>
#include <string>

#include "limiter/limiter.h"
#include "limiter/rules.h"

namespace tweetsearch::limiter {

// One rule set to apply under one bucket key.
struct Bucket {
  const std::string* key = nullptr;  // points into the caller's buffers
  const RuleSet* set = nullptr;
  size_t hash = 0;                   // of the key
};

// The rule sets that apply to `request` (at most two: the endpoint's and "all"), with their
// bucket keys written into `keys`: a per-key override (by prefix), else the key's tier (or
// default_tier), else — without a key — the anonymous limits per client IP. Buckets of a key are
// named by its id (or its prefix when no id is given). Returns how many.
size_t MatchRules(const Rules& rules, const CheckRequest& request,
                  std::array<std::string, 2>& keys, std::array<Bucket, 2>& out);

// Fills every rule set's policy text and fingerprint.
void PrepareRules(Rules& rules);

// Folds one limit's (dry-run) decision into `v`: refusal, delay, shadow overrun, and the
// tightest enforced limit for the headers. Returns whether an enforced limit refused.
bool Fold(const RuleLimit& r, const Decision& d, Verdict* v);

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_RULE_MATCH_H_
