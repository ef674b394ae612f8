// Small pieces both Redis clients of the limiter use (redis_limiter.cc, stream_slots.cc): owned
// hiredis replies, socket timeouts, and a random name for this front door. Internal to
// limiter/.
#ifndef TWEETSEARCH_LIMITER_REDIS_UTIL_H_
#define TWEETSEARCH_LIMITER_REDIS_UTIL_H_

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "common/strings.h"

namespace tweetsearch::limiter {

struct RedisReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

// A duration in microseconds as hiredis's timeouts take it.
inline timeval Micros(int64_t us) {
  return timeval{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
}

// A name for this front door among those sharing a Redis.
inline std::string RandomId() {
  std::random_device device;
  return StrCat(device(), device());
}

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_REDIS_UTIL_H_
