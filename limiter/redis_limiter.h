// RedisLimiter: the limiter with its state in Redis, so that several front doors share exact
// quotas.
//
// Checks are decided by one Lua script inside Redis (limiter/redis_script.h decides every
// limit of a check atomically). Checks are spread over `pool_size` connections ("lanes", each
// with connect and command timeouts); on a lane, the checks that arrive while one is in flight
// go out together as one call of the script (one EVALSHA deciding them one after the other),
// so Redis pays the script call once per batch. A lone check is one round trip.
//
// When Redis is unreachable or slow (an error, or no answer within one command timeout of the
// check), the front door keeps serving (docs/limiter.md, "When Redis is unreachable"): limits
// marked `fail: closed` refuse; the others are decided by a local limiter that went on from
// Redis's last answers, a `fail: share` limit (the default) within this front door's share of
// what was left (the front doors count themselves in Redis), a `fail: open` one as if this
// front door were alone. What it admits is carried to Redis by the next call for the same
// limits; a script that runs after its caller stopped waiting changes nothing, so no request
// is counted twice. The limiter retries Redis at most once per `retry_interval_ms`, and goes
// back to it by itself once it answers; the switch is logged by the caller through
// Stats().redis_up and counted in redis_errors / local_fallbacks.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_LIMITER_REDIS_LIMITER_H_
#define TWEETSEARCH_LIMITER_REDIS_LIMITER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "limiter/limiter.h"

namespace tweetsearch::limiter {

struct RedisOptions {
  std::string host = "127.0.0.1";  // Redis address
  int port = 6379;
  // Connections ("lanes"); concurrent checks on a lane are pipelined together. Default 2 (the
  // best of 1, 2, 4 and 16 on a 2-core machine, docs/benchmarks.md).
  int pool_size = 2;
  // Connect and per-command timeouts, ms. Default 200 and 50.
  int connect_timeout_ms = 200;
  int command_timeout_ms = 50;
  // After a failure, Redis is tried again at most this often, ms. Default 1000.
  int64_t retry_interval_ms = 1000;
  // Prefix of every key the limiter writes. Default "tsrl:".
  std::string key_prefix = "tsrl:";
  // How often a front door says it is alive in Redis (and learns how many share it), ms.
  // Default 1000; one silent for five periods is no longer counted.
  int64_t register_interval_ms = 1000;
};

// Loads the rules like Limiter::Create. Redis need not be up: checks fall back until it is.
absl::StatusOr<std::unique_ptr<Limiter>> CreateRedisLimiter(const LimiterOptions& options,
                                                            const RedisOptions& redis,
                                                            const Clock& clock);
// For tests: rules given directly.
std::unique_ptr<Limiter> CreateRedisLimiterWithRules(Rules rules, const LimiterOptions& options,
                                                     const RedisOptions& redis, const Clock& clock);

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_REDIS_LIMITER_H_
