// LocalLimiter: the in-process limiter as the Redis backend's stand-in while Redis is
// unreachable (docs/limiter.md, "When Redis is unreachable").
//
// It is an ordinary in-process limiter (limiter.h) with two more duties:
// - Mirror: after each Redis answer, the request's local states are set to what that answer
//   says is left, cut to this front door's share, so that a front door that loses Redis goes
//   on from where Redis was instead of from an empty state (which let a second limit's worth
//   through).
// - Debts: the units it admits on its own are remembered per limit until the next Redis call
//   for that limit carries them (TakeDebts), so that Redis counts them too once it is back.
//
// The `limits` spans below list the request's limits in the order MatchRules gives them (the
// first bucket's, then the second's), as the Redis script's arguments do.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_LIMITER_LOCAL_LIMITER_H_
#define TWEETSEARCH_LIMITER_LOCAL_LIMITER_H_

#include <cstdint>
#include <memory>
#include <span>

#include "limiter/limiter.h"

namespace tweetsearch::limiter {

class LocalLimiter : public Limiter {
 public:
  // Check, deciding at `now_ms` (the caller's reading of the clock) rather than reading it.
  virtual Verdict CheckAt(const CheckRequest& request, int64_t now_ms) = 0;
  // Sets every limit's state for `request` as if `remaining[i]` units of its own limit were
  // left at `now_ms` (the local limit of a `fail: share` limit is already its share: see
  // ShareRules). Does nothing when the rules have changed under the caller (a count differs).
  virtual void Mirror(const CheckRequest& request, std::span<const uint64_t> remaining,
                      uint64_t front_doors, int64_t now_ms) = 0;
  // Moves the units admitted locally for `request`'s limits, not yet carried to Redis, into
  // `debts` (one per limit; zero where none). False when nothing is owed.
  virtual bool TakeDebts(const CheckRequest& request, std::span<uint64_t> debts) = 0;
  // Gives debts back after the Redis call that was to carry them failed.
  virtual void ReturnDebts(const CheckRequest& request, std::span<const uint64_t> debts) = 0;
};

std::unique_ptr<LocalLimiter> CreateLocalLimiter(Rules rules, const LimiterOptions& options,
                                                 const Clock& clock);

// The rules a front door decides by on its own when it is one of `front_doors`: each
// `fail: share` limit of L becomes L / front_doors, rounded down (at least 1; a limit smaller
// than the number of front doors refuses while Redis is unreachable instead, see
// RefusesWithoutRedis). Algorithms and windows are unchanged.
Rules ShareRules(const Rules& rules, uint64_t front_doors);

// Whether `limit` refuses every request while Redis is unreachable: `fail: closed`, or a share
// too small to admit one unit.
bool RefusesWithoutRedis(const RuleLimit& limit, uint64_t front_doors);

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_LOCAL_LIMITER_H_
