// Limiter: decides, before any work, whether a front-door request fits its quotas.
//
// A request names its key (by prefix) and tier, its endpoint, its client IP and its cost in
// units (1, or the lines of a bulk ingest). The rules (rules.h) give the limits that apply:
// those of the endpoint and those of "all", from a per-key override or else the key's tier,
// or the anonymous limits per client IP for requests without a valid key. Every limit must
// admit; a request refused by one limit consumes nothing from the others. Shadow limits are
// evaluated and reported but never refuse.
//
// State lives in process memory (the embedded default): 64 shards, each with its own lock and
// table of entries (entry_table.h), so there is no global lock; idle keys expire (a state idle
// for its lifetime, StateLifetimeMs, is as good as new) and at most `max_keys` states are kept
// in all (beyond it a new key evicts a state of its shard not used lately, by a clock hand;
// never the request's own), so a flood of distinct keys (IPv6 addresses) cannot exhaust
// memory.
//
// Rules are reloaded without a restart (Reload(), driven by the caller on SIGHUP or a file
// change); a broken file is rejected with its message and the previous rules stay in force.
// States survive a reload when their limits did not change.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_LIMITER_LIMITER_H_
#define TWEETSEARCH_LIMITER_LIMITER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "limiter/rules.h"

namespace tweetsearch::limiter {

struct LimiterOptions {
  // The YAML rules file; empty means no limits. Default empty.
  std::string rules_path;
  // Most per-key states kept in memory; beyond it states not used lately are dropped (their
  // keys start afresh). Default 1,000,000.
  size_t max_keys = 1'000'000;
};

struct CheckRequest {
  std::string_view key_prefix;  // the key's public prefix (per-key overrides name it); empty
                                // with an empty key_id: anonymous
  std::string_view tier;
  std::string_view endpoint;  // "search", "ingest", "admin" or "stream" (units: events)
  std::string_view client_ip;
  uint64_t units = 1;
  std::string_view key_id;  // the key's unique id, naming its quota state (default: prefix)
};

struct Verdict {
  bool allowed = true;
  std::string limited_by;      // the refusing limit's name (empty when allowed)
  int64_t retry_after_ms = 0;  // when refused
  int64_t delay_ms = 0;        // admitted by a leaky_bucket_queue limit: wait this long first
  // The most constraining limit (least remaining), for the answer's headers. has_quota is
  // false when no limit applied.
  bool has_quota = false;
  uint64_t limit = 0;
  uint64_t remaining = 0;
  int64_t reset_ms = 0;
  // Every applied limit as "limit;w=seconds", in up to two parts (the endpoint's rule set and
  // that of "all"), each pointing into the rules, which the limiter keeps while it lives.
  // Policy() joins them, comma-separated: the decision itself builds no text.
  std::array<std::string_view, 2> policy_parts;
  std::vector<std::string> shadow_exceeded;  // shadow limits this request went over

  std::string Policy() const;
};

struct LimiterStats {
  uint64_t checks = 0, refused = 0, shadow_exceeded = 0, evicted = 0;
  uint64_t reloads = 0, reload_errors = 0;
  size_t keys = 0;  // states in process memory
  // Redis backend only.
  bool uses_redis = false;
  bool redis_up = false;
  uint64_t redis_errors = 0;     // failed or timed-out round trips
  uint64_t local_fallbacks = 0;  // checks decided locally because Redis was down
  uint64_t refused_again = 0;    // checks refused without Redis: it refused them lately
  uint64_t front_doors = 1;      // front doors sharing Redis, as last counted
};

class Limiter {
 public:
  // Loads the rules (InvalidArgument for a broken file). `clock` must outlive the limiter.
  static absl::StatusOr<std::unique_ptr<Limiter>> Create(const LimiterOptions& options,
                                                         const Clock& clock);
  // For tests and embedding: rules given directly (no file to reload).
  static std::unique_ptr<Limiter> CreateWithRules(Rules rules, const LimiterOptions& options,
                                                  const Clock& clock);
  virtual ~Limiter() = default;

  virtual Verdict Check(const CheckRequest& request) = 0;
  // Re-reads the rules file. On error the current rules stay and the error is returned.
  virtual absl::Status Reload() = 0;
  // Replaces the rules (the same as a reload from a file).
  virtual void SetRules(Rules rules) = 0;
  virtual LimiterStats Stats() const = 0;
  virtual const std::string& rules_path() const = 0;
  // The most streams the key may hold open (rules.h, MaxStreams); none: no cap.
  virtual std::optional<uint32_t> MaxStreams(std::string_view key_prefix,
                                             std::string_view tier) const = 0;
};

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_LIMITER_H_
