// Snowflake id generator: 41 bits of milliseconds since kSnowflakeEpochMillis, 10 bits of node,
// 12 bits of sequence (4096 ids per millisecond per node). Ids from one generator strictly
// increase, even if the wall clock steps back (the generator then keeps using its last
// millisecond and borrows from the future when the sequence runs out).
//
// Thread-safety: Next() may be called from any thread.
#ifndef TWEETSEARCH_COMMON_SNOWFLAKE_H_
#define TWEETSEARCH_COMMON_SNOWFLAKE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/ids.h"

namespace tweetsearch {

// 2010-11-04T01:42:54.657Z, the epoch Twitter chose, so that our ids sort with real ones.
inline constexpr int64_t kSnowflakeEpochMillis = 1288834974657;
inline constexpr int kSnowflakeNodeBits = 10;
inline constexpr int kSnowflakeSequenceBits = 12;

// The creation time (Unix milliseconds) encoded in a snowflake id.
int64_t SnowflakeUnixMillis(TweetId id);
// The smallest snowflake id that can be made at `unix_millis` (useful for time range filters).
TweetId SnowflakeLowerBound(int64_t unix_millis);

class SnowflakeGenerator {
 public:
  // Returns InvalidArgument if node_id does not fit in 10 bits. `clock` must outlive the
  // generator.
  static absl::StatusOr<SnowflakeGenerator> Create(uint32_t node_id, const Clock& clock);

  SnowflakeGenerator(SnowflakeGenerator&& other) noexcept;

  TweetId Next();

 private:
  SnowflakeGenerator(uint32_t node_id, const Clock& clock) : node_id_(node_id), clock_(&clock) {}

  const uint32_t node_id_;
  const Clock* clock_;
  absl::Mutex mu_;
  int64_t last_millis_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_SNOWFLAKE_H_
