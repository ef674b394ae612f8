// Rules: which limits apply to a request, read from a YAML file in the spirit of Lyft's
// ratelimit (docs/limiter.md has the format and an example: data/limits.example.yaml).
//
//   tiers:                       # by the API key's tier
//     free:
//       search:                  # endpoint: search, ingest, admin, or all (every endpoint)
//         - {name: search_per_minute, limit: 10, window: 1m, algorithm: sliding_window_counter}
//         - {name: search_per_hour, limit: 500, window: 1h}
//         - {name: search_per_day, limit: 5000, window: 1d, algorithm: fixed_window}
//       ingest:
//         - {name: lines_per_hour, limit: 100000, window: 1h, cost: units}
//       stream:                  # events pushed to streams (GET /v1/stream), in events
//         - {name: stream_events_per_minute, limit: 600, window: 1m}
//       max_streams: 2           # streams open at once per key (no cap when absent)
//   keys:                        # per-key overrides, by key prefix; replace the tier's
//     ts_1e962ab:                #   limits for the endpoints they name
//       search: [{limit: 100, window: 1s, algorithm: gcra}]
//   anonymous:                   # per client IP, for requests without a valid key
//     all: [{name: anonymous_per_minute, limit: 60, window: 1m}]
//   default_tier: free           # for keys whose tier has no entry
//
// "all" applies to every endpoint but "stream" (its units are events, not requests).
// A limit: name (default "<tier>_<endpoint>_<n>"), limit (>= 1), window ("500ms", "1s", "1m",
// "1h", "1d", or seconds), algorithm (default sliding_window_counter), cost ("units": the
// request's own cost, such as the lines of a bulk ingest, default; or "requests": 1 per
// request), max_wait (leaky_bucket_queue only), shadow (count and report, never block), fail
// (what a front door does while Redis is unreachable: "share", default: decide locally within
// its share of what Redis last said was left, so that the front doors together stay within
// the limit; "open": decide locally as if it were the only front door; "closed": refuse).
#ifndef TWEETSEARCH_LIMITER_RULES_H_
#define TWEETSEARCH_LIMITER_RULES_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "limiter/algorithm.h"

namespace tweetsearch::limiter {

// With the Redis backend unreachable (docs/limiter.md, "When Redis is unreachable").
enum class FailMode {
  kShare,   // decide locally within this front door's share of what is left
  kOpen,    // decide locally as if this front door were the only one
  kClosed,  // refuse
};

struct RuleLimit {
  Limit limit;
  bool per_request = false;  // cost 1 per request instead of the request's units
  FailMode fail = FailMode::kShare;
};

// The limits of one (tier or key, endpoint); evaluated together, all must admit.
struct RuleSet {
  std::vector<RuleLimit> limits;  // at most kMaxLimitsPerSet
  int64_t max_window_ms = 0;      // state idle this long is as good as new (StateLifetimeMs)
  // Filled by the limiter when it takes the rules: "limit;w=seconds" of each enforced limit,
  // and a fingerprint of the definitions (states survive reloads that keep it): a small number,
  // the same for equal definitions in the process, never 0.
  std::string policy;
  uint32_t fingerprint = 0;
  uint64_t seed = 0;  // of its place (tier or key prefix, and endpoint): names its buckets
  char kind = 't';    // its place: 't' a tier's, 'k' a key prefix's, 'a' anonymous
  std::string owner;  // the tier's name (for 't')
  std::string endpoint;
};

inline constexpr size_t kMaxLimitsPerSet = 16;

// Maps with transparent comparison, so that lookups by string_view need no allocation.
template <typename V>
using NameMap = std::map<std::string, V, std::less<>>;

struct Rules {
  NameMap<NameMap<RuleSet>> tiers;  // tier → endpoint → limits
  NameMap<NameMap<RuleSet>> keys;   // key prefix → endpoint → limits
  NameMap<RuleSet> anonymous;       // endpoint → limits
  // Most streams open at once per key ("max_streams: N" beside a tier's or key's endpoints);
  // none listed: no cap.
  NameMap<uint32_t> tier_max_streams;
  NameMap<uint32_t> key_max_streams;
  std::string default_tier;
  uint64_t version = 0;  // set by the limiter when it takes them: unique in the process
};

// Parses and validates rules. InvalidArgument naming the place of the first problem
// ("tiers.free.search[1].window: ...").
absl::StatusOr<Rules> ParseRules(std::string_view yaml);
absl::StatusOr<Rules> LoadRulesFile(const std::string& path);

// The most streams a key may hold open: its override's max_streams, else its tier's (or the
// default tier's); none: no cap.
std::optional<uint32_t> MaxStreams(const Rules& rules, std::string_view key_prefix,
                                   std::string_view tier);

// "500ms", "2s", "1m", "1h", "1d" or a number of seconds, to milliseconds.
absl::StatusOr<int64_t> ParseDuration(std::string_view text);

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_RULES_H_
