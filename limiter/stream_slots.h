// StreamSlots: the streams each key holds open (the rules' max_streams), counted across every
// front door that shares a Redis (docs/limiter.md, "Streams").
//
// A slot is a member of the sorted set <prefix>streams:<key id>, scored by the moment its lease
// ends on Redis's clock. Taking one drops the lapsed members and adds this one only while
// fewer than the cap remain, in one script, so front doors opening streams of one key at once
// cannot pass the cap together. A front door renews the leases of its slots every third of a
// lease and removes a slot when its stream closes; the slots of a front door that dies lapse
// within one lease.
//
// When Redis does not answer, Take() says so (Unavailable) and the caller falls back on its own
// count; a slot taken then is not in Redis. Redis is tried again at most once per
// retry_interval_ms, so that a Redis that is down does not add a timeout to every stream opened.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_LIMITER_STREAM_SLOTS_H_
#define TWEETSEARCH_LIMITER_STREAM_SLOTS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"
#include "limiter/redis_limiter.h"

struct redisContext;

namespace tweetsearch::limiter {

class StreamSlots {
 public:
  // `lease`: how long a slot outlives its front door's last renewal.
  StreamSlots(const RedisOptions& redis, std::chrono::milliseconds lease);
  // Stops renewing; the slots still held lapse within a lease (streams give theirs back as they
  // close, before this).
  ~StreamSlots();
  StreamSlots(const StreamSlots&) = delete;
  StreamSlots& operator=(const StreamSlots&) = delete;

  // Takes one of `cap` slots of `key` (a key id): the slot's name, to give back. ResourceExhausted
  // when the key holds `cap` already, on every front door together; Unavailable when Redis did
  // not answer.
  absl::StatusOr<std::string> Take(std::string_view key, uint32_t cap);
  // Gives a slot back (best effort: a slot Redis does not hear of lapses).
  void Give(std::string_view key, const std::string& slot);

  // Slots this front door holds, all keys together, and the rounds that renewed them all
  // (for tests).
  size_t held() const;
  uint64_t renewals() const { return renewals_.load(std::memory_order_relaxed); }

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  // The connection, made if there is none and Redis may be tried; null if Redis is unreachable.
  // Requires mu_.
  redisContext* Connected();
  void Failed();  // requires mu_
  void RenewLoop();
  void RenewAll();

  const RedisOptions redis_;
  const std::chrono::milliseconds lease_;
  const std::string front_door_;  // a random name, the prefix of this front door's slots

  mutable std::mutex mu_;
  std::unique_ptr<redisContext, ContextDeleter> connection_;  // guarded by mu_, as below
  std::chrono::steady_clock::time_point retry_at_;
  uint64_t next_slot_ = 0;
  std::map<std::string, std::set<std::string>, std::less<>> held_;  // key → its slots here
  bool stop_ = false;
  std::condition_variable cv_;
  std::atomic<uint64_t> renewals_{0};
  std::thread renewer_;  // last: started once the rest is ready
};

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_STREAM_SLOTS_H_
