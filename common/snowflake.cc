#include "common/snowflake.h"

#include <algorithm>

#include "common/strings.h"

namespace tweetsearch {

namespace {
constexpr int kTimeShift = kSnowflakeNodeBits + kSnowflakeSequenceBits;
constexpr uint32_t kMaxSequence = (1u << kSnowflakeSequenceBits) - 1;
}  // namespace

int64_t SnowflakeUnixMillis(TweetId id) {
  return static_cast<int64_t>(id >> kTimeShift) + kSnowflakeEpochMillis;
}

TweetId SnowflakeLowerBound(int64_t unix_millis) {
  if (unix_millis <= kSnowflakeEpochMillis) return 0;
  return static_cast<TweetId>(unix_millis - kSnowflakeEpochMillis) << kTimeShift;
}

absl::StatusOr<SnowflakeGenerator> SnowflakeGenerator::Create(uint32_t node_id,
                                                              const Clock& clock) {
  if (node_id >= (1u << kSnowflakeNodeBits)) {
    return absl::InvalidArgumentError(
        StrCat("snowflake node id ", node_id, " does not fit in ", kSnowflakeNodeBits, " bits"));
  }
  return SnowflakeGenerator(node_id, clock);
}

SnowflakeGenerator::SnowflakeGenerator(SnowflakeGenerator&& other) noexcept
    : node_id_(other.node_id_), clock_(other.clock_) {
  absl::MutexLock lock(&other.mu_);
  last_millis_ = other.last_millis_;
  sequence_ = other.sequence_;
}

TweetId SnowflakeGenerator::Next() {
  absl::MutexLock lock(&mu_);
  const int64_t now = std::max(clock_->NowUnixMillis() - kSnowflakeEpochMillis, int64_t{0});
  if (now > last_millis_) {
    last_millis_ = now;
    sequence_ = 0;
  } else if (sequence_ < kMaxSequence) {
    ++sequence_;  // same millisecond, or the clock stepped back: stay monotonic
  } else {
    ++last_millis_;  // sequence exhausted: borrow the next millisecond
    sequence_ = 0;
  }
  return (static_cast<TweetId>(last_millis_) << kTimeShift) |
         (static_cast<TweetId>(node_id_) << kSnowflakeSequenceBits) | sequence_;
}

}  // namespace tweetsearch
