// Usage series: what a usage bucket is — its resolutions, how long each is kept, and the
// increments and points the usage stores take and give (usage/usage_store.h for one process,
// the storage role's "usage" column family in a cluster).
#ifndef TWEETSEARCH_USAGE_SERIES_H_
#define TWEETSEARCH_USAGE_SERIES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "usage/counters.h"

namespace tweetsearch::usage {

enum class Resolution : uint8_t { kMinute = 0, kFiveMinutes = 1, kHour = 2, kDay = 3 };
inline constexpr Resolution kResolutions[] = {Resolution::kMinute, Resolution::kFiveMinutes,
                                              Resolution::kHour, Resolution::kDay};

// Bucket width in seconds.
int64_t BucketSeconds(Resolution r);
// How long buckets of `r` are kept, seconds; 0 for ever.
int64_t RetentionSeconds(Resolution r);
// "1m", "5m", "1h", "1d".
std::string_view ResolutionName(Resolution r);
// Accepts the names above and "minute", "5min", "hour", "day". InvalidArgument otherwise.
absl::StatusOr<Resolution> ParseResolution(std::string_view text);

// The series of the requests made without a valid key.
inline constexpr std::string_view kAnonymousKey = "anonymous";
// The series of all keys together (written at flush time as the sum of the others).
inline constexpr std::string_view kAllKeys = "all";

// Counts to add to one key's minute bucket.
struct Increment {
  std::string key_id;
  int64_t minute_start_s = 0;  // Unix seconds, a multiple of 60
  Counters counters;
};

struct Point {
  int64_t start_s = 0;  // bucket start, Unix seconds
  Counters counters;
};

}  // namespace tweetsearch::usage

#endif  // TWEETSEARCH_USAGE_SERIES_H_
