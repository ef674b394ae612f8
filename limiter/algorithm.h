// Rate-limit algorithms: pure decisions over a small per-key state.
//
// Every algorithm answers the same question — may a request of `cost` units pass now, under
// "at most `limit` units per `window`"? — with its own trade-off between memory, accuracy and
// burst behaviour (docs/limiter.md compares them). Decide() is a pure function of (limit, state,
// now, cost): it mutates the state only when the request is admitted, so callers can evaluate
// several limits and commit only if all of them admit. Time is Unix milliseconds from the
// caller's Clock; no algorithm reads a clock.
//
// Thread-safety: none; callers serialize access to a state (the backends lock per key).
#ifndef TWEETSEARCH_LIMITER_ALGORITHM_H_
#define TWEETSEARCH_LIMITER_ALGORITHM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace tweetsearch::limiter {

enum class Algorithm {
  kTokenBucket,           // bucket of `limit` tokens refilled at limit/window; bursts up to limit
  kLeakyBucketMeter,      // water level leaks at limit/window; a request adds cost if it fits
  kLeakyBucketQueue,      // admits at a fixed rate, making requests wait up to max_wait
  kFixedWindow,           // counter per aligned window; resets at the window boundary
  kSlidingWindowLog,      // timestamps of admitted units; exact over every rolling window
  kSlidingWindowCounter,  // current + weighted previous window counter; approximates the log
  kGcra,                  // generic cell rate algorithm: one timestamp (TAT) per key
};

std::string_view AlgorithmName(Algorithm algorithm);
absl::StatusOr<Algorithm> ParseAlgorithm(std::string_view name);

struct Limit {
  std::string name;  // reported in 429 answers and metrics, e.g. "search_per_minute"
  Algorithm algorithm = Algorithm::kSlidingWindowCounter;
  uint64_t limit = 0;          // units per window, at least 1
  int64_t window_ms = 60'000;  // at least 1
  int64_t max_wait_ms = 0;     // kLeakyBucketQueue: the longest a request may be delayed
  bool shadow = false;         // count and report, never block
};

struct Decision {
  bool allowed = false;
  uint64_t remaining = 0;      // units that could still pass now (after this request)
  int64_t retry_after_ms = 0;  // when denied: until a request of this cost could pass
  int64_t reset_ms = 0;        // until the limit is fully available again
  int64_t delay_ms = 0;        // kLeakyBucketQueue: how long the admitted request must wait
};

// Per-key states, one type per family of algorithms.
struct BucketState {  // token bucket (tokens), leaky meter (level), in unit·milliseconds
  int64_t amount = 0;
  int64_t updated_ms = 0;
  bool started = false;
};
struct WindowState {  // fixed window, sliding window counter
  int64_t window_start_ms = 0;
  uint64_t current = 0;
  uint64_t previous = 0;
};
// A sliding window log: one entry per admitted request. A log of one entry keeps it inline (its
// time in `single_ms`, its cost in `total`); from the second entry on, the entries lie behind
// one pointer. So every algorithm's state fits in 24 bytes, an in-process entry holds its states
// inline (limiter.cc), and a key with one request in its window — most keys, where many clients
// each ask a little — costs no allocation and no second cache miss. A copy copies the entries.
struct LogState {
  struct Log {
    std::vector<std::pair<int64_t, uint32_t>> entries;  // (time, cost), oldest first
    size_t head = 0;                                    // entries before head are expired
  };
  std::unique_ptr<Log> log;
  uint64_t total = 0;     // cost of entries[head..], or of the inline entry
  int64_t single_ms = 0;  // without `log`, and a total: the inline entry's time

  LogState() = default;
  LogState(const LogState& other)
      : log(other.log ? std::make_unique<Log>(*other.log) : nullptr),
        total(other.total),
        single_ms(other.single_ms) {}
  LogState& operator=(const LogState& other) {
    if (this != &other) *this = LogState(other);
    return *this;
  }
  LogState(LogState&&) noexcept = default;
  LogState& operator=(LogState&&) noexcept = default;
};
struct TatState {  // GCRA, leaky bucket queue: theoretical arrival time, Unix microseconds
  int64_t tat_us = 0;
};
using State = std::variant<BucketState, WindowState, LogState, TatState>;

// A fresh state for `algorithm`.
State NewState(Algorithm algorithm);

// How long a state of `limit` may sit unchanged before it decides exactly as a fresh one: one
// window for most algorithms; two for a sliding window counter (the previous window's count
// weighs until the current window ends); a window and the longest wait for a leaky bucket
// queue (its next slot may lie max_wait ahead). A backend may drop a state idle this long; the
// Redis script's expiry times are the same.
int64_t StateLifetimeMs(const Limit& limit);

// Decides one request. With `commit` false it is a dry run: the decision is the same, and the
// state is left as a refusal would leave it (callers checking several limits dry-run them all,
// then commit only if all admit). Requires: `state` came from NewState(limit.algorithm),
// limit.limit >= 1, limit.window_ms >= 1, cost >= 1. A request whose cost exceeds the limit is
// never admitted.
Decision Decide(const Limit& limit, State& state, int64_t now_ms, uint64_t cost,
                bool commit = true);

// Counts `units` already admitted elsewhere (by a front door deciding on its own while Redis
// was unreachable) as if admitted now, whether or not they fit: the state ends where the
// admissions would have left it, but never beyond the fullest state the algorithm reaches by
// itself (a bucket holds no fewer than 0 tokens, a window no more than the limit, a TAT no
// further ahead than a window, plus max_wait for a queue), so every state lifetime above still
// holds; a log takes every unit (its entries expire one by one: cut units would be missing
// once older entries expired). A state so cut is still at least as full as the admissions
// replayed through it one by one would leave it. The Redis script charges with the same
// arithmetic.
void Charge(const Limit& limit, State& state, int64_t now_ms, uint64_t units);

// Bytes of memory a state holds (for the memory-per-key benchmark and the backend's bound).
size_t StateBytes(const State& state);

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_ALGORITHM_H_
