// LimiterGate: the quota limiter (limiter/) in the front door's AdmissionGate seat.
//
// Maps the front door's endpoints to the rules' (search and reads → "search", ingest and
// writes → "ingest", admin → "admin"), asks the limiter, and writes the answer's headers:
//   X-Ratelimit-Limit, X-Ratelimit-Remaining            (every answer a limit applied to)
//   RateLimit-Policy: 10;w=60, 500;w=3600               (IETF draft, the applied limits)
//   RateLimit: limit=10, remaining=3, reset=42          (IETF draft, the tightest limit)
//   X-Ratelimit-Retry-After, Retry-After (seconds)      (429 answers)
// A refusal is ResourceExhausted naming the limit. A leaky_bucket_queue limit's delay is
// served by sleeping on the calling thread (bounded by the rule's max_wait).
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_LIMITER_GATE_H_
#define TWEETSEARCH_AGGREGATOR_LIMITER_GATE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/front_door.h"
#include "limiter/limiter.h"
#include "limiter/stream_slots.h"

namespace tweetsearch::aggregator {

class LimiterGate final : public AdmissionGate {
 public:
  // `slots` (may be null): the count of open streams shared with the other front doors.
  explicit LimiterGate(std::unique_ptr<limiter::Limiter> limiter,
                       std::unique_ptr<limiter::StreamSlots> slots = nullptr);

  absl::Status Admit(const ApiKey* key, Endpoint endpoint, uint64_t cost,
                     CallContext* call) override;
  std::optional<uint32_t> MaxStreams(const ApiKey& key) override;
  absl::StatusOr<std::unique_ptr<StreamSlot>> TakeStreamSlot(const ApiKey& key,
                                                             uint32_t cap) override;

  limiter::Limiter& limiter() { return *limiter_; }
  // Appends the limiter's series (refusals by limit, shadow overruns, keys, reloads).
  void RenderMetrics(std::string* out) const;

 private:
  std::unique_ptr<limiter::Limiter> limiter_;
  std::unique_ptr<limiter::StreamSlots> slots_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, uint64_t> refused_by_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> shadow_by_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_LIMITER_GATE_H_
