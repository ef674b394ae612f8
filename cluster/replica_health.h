// ReplicaHealth: what a front door has seen of the replicas it reads from, and
// what follows from it (docs/cluster.md, "Slow and frozen replicas"):
//
//   - the hedge delay of a partition: the 95th percentile of its last answered
//     calls' latencies, clamped to [min_hedge, max_hedge];
//   - the hedge budget of a partition: hedges may add at most `hedge_share` of
//     its answered calls, beyond a reserve of `hedge_burst` (a token bucket, as
//     gRPC's retry throttling and Finagle's backup-request budget). When every
//     replica is merely slow (an overloaded machine), a hedge is one more search
//     on a busy server; a frozen replica needs only the few hedges that eject it.
//     A call refused its hedge is hedged later, at four times the delay (the
//     front door's FanOut), so a frozen replica's calls still get answered;
//   - ejection: a replica whose last `consecutive_to_eject` calls all failed or
//     were overtaken (still running when another replica answered the same
//     request) is put last in the order for `base_ejection`, doubled with each
//     ejection that follows without an answer in between, up to `max_ejection`.
//
// Decides by the injected Clock's monotonic time. Thread-safety: every method
// may be called from any thread.
#ifndef TWEETSEARCH_CLUSTER_REPLICA_HEALTH_H_
#define TWEETSEARCH_CLUSTER_REPLICA_HEALTH_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/clock.h"

namespace tweetsearch::cluster {

struct ReplicaHealthOptions {
  std::chrono::microseconds min_hedge{2000};
  std::chrono::microseconds max_hedge{100000};  // also the delay before enough calls were seen
  double hedge_quantile = 0.95;
  uint32_t min_samples = 32;  // answered calls before the quantile is trusted
  double hedge_share = 0.05;  // hedges earned per answered call
  double hedge_burst = 10;    // hedges held in reserve, and at most
  uint32_t consecutive_to_eject = 5;
  std::chrono::milliseconds base_ejection{1000};
  std::chrono::milliseconds max_ejection{30000};
};

// One replica's record, for /metrics.
struct ReplicaRecord {
  uint32_t partition = 0;
  uint32_t replica = 0;
  bool ejected = false;
  uint64_t ejections = 0;       // since start
  uint64_t hedges = 0;          // calls to it that were hedged to another replica
  uint64_t hedges_refused = 0;  // calls to it past the hedge delay, not hedged: over budget
};

class ReplicaHealth {
 public:
  // `replicas[p]` is the number of replicas of partition p.
  ReplicaHealth(const std::vector<uint32_t>& replicas, const ReplicaHealthOptions& options,
                const Clock& clock);

  // Moves the ejected replicas of partition p behind the others, keeping the
  // order of each group.
  void Order(uint32_t p, std::vector<uint32_t>* replicas) const;
  // How long a call to partition p may run before it is hedged.
  std::chrono::microseconds HedgeDelay(uint32_t p) const;

  // A call to replica r of partition p answered after `latency`.
  void Answered(uint32_t p, uint32_t r, std::chrono::microseconds latency);
  // A call failed (not for the request's own fault, not cancelled by us).
  void Failed(uint32_t p, uint32_t r);
  // A call was still running when another replica answered the same request.
  void Overtaken(uint32_t p, uint32_t r);
  // Whether a call to replica r of partition p that ran past the hedge delay may be hedged:
  // true takes one hedge from the partition's budget; false counts the refusal.
  bool TakeHedge(uint32_t p, uint32_t r);
  // A call to replica r was hedged because it ran past the hedge delay.
  void Hedged(uint32_t p, uint32_t r);

  bool Ejected(uint32_t p, uint32_t r) const;
  // Whether replica r of partition p answered a call within `window`.
  bool AnsweredWithin(uint32_t p, uint32_t r, std::chrono::microseconds window) const;
  std::vector<ReplicaRecord> Records() const;
  // The current hedge delay of every partition.
  std::vector<std::chrono::microseconds> HedgeDelays() const;

 private:
  static constexpr size_t kWindow = 256;
  struct Replica {
    uint32_t bad_in_a_row = 0;
    uint32_t ejections_in_a_row = 0;  // since its last answer
    int64_t ejected_until_us = 0;
    int64_t answered_us = INT64_MIN;  // its last answer
    uint64_t ejections = 0;
    uint64_t hedges = 0;
    uint64_t hedges_refused = 0;
  };
  struct Partition {
    std::vector<Replica> replicas;
    std::array<int64_t, kWindow> latencies_us{};
    uint64_t samples = 0;
    int64_t hedge_delay_us = 0;
    int64_t hedge_budget = 0;  // the hedges left, in thousandths (sums of them stay exact)
  };

  // With mu_ held.
  void BadLocked(Replica& replica);
  static bool EjectedLocked(const Replica& replica, int64_t now_us);
  void UpdateHedgeDelayLocked(Partition& part);

  const ReplicaHealthOptions options_;
  const int64_t hedge_earned_;  // thousandths of a hedge per answered call
  const int64_t hedge_reserve_;
  const Clock& clock_;
  mutable std::mutex mu_;         // a std::mutex: visible to ThreadSanitizer
  std::vector<Partition> parts_;  // guarded by mu_
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_REPLICA_HEALTH_H_
