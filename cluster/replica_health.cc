#include "cluster/replica_health.h"

#include <algorithm>
#include <cmath>

namespace tweetsearch::cluster {
namespace {

constexpr int64_t kHedge = 1000;  // one hedge, in the budget's thousandths

}  // namespace

ReplicaHealth::ReplicaHealth(const std::vector<uint32_t>& replicas,
                             const ReplicaHealthOptions& options, const Clock& clock)
    : options_(options),
      hedge_earned_(std::llround(options.hedge_share * kHedge)),
      hedge_reserve_(std::llround(options.hedge_burst * kHedge)),
      clock_(clock),
      parts_(replicas.size()) {
  for (size_t p = 0; p < replicas.size(); ++p) {
    parts_[p].replicas.resize(replicas[p]);
    parts_[p].hedge_delay_us = options_.max_hedge.count();
    parts_[p].hedge_budget = hedge_reserve_;
  }
}

bool ReplicaHealth::EjectedLocked(const Replica& replica, int64_t now_us) {
  return replica.ejected_until_us > now_us;
}

void ReplicaHealth::Order(uint32_t p, std::vector<uint32_t>* replicas) const {
  const int64_t now_us = clock_.NowMonotonicMicros();
  std::lock_guard lock(mu_);
  if (p >= parts_.size()) return;
  const Partition& part = parts_[p];
  std::stable_partition(replicas->begin(), replicas->end(), [&](uint32_t r) {
    return r >= part.replicas.size() || !EjectedLocked(part.replicas[r], now_us);
  });
}

std::chrono::microseconds ReplicaHealth::HedgeDelay(uint32_t p) const {
  std::lock_guard lock(mu_);
  if (p >= parts_.size()) return options_.max_hedge;
  return std::chrono::microseconds(parts_[p].hedge_delay_us);
}

void ReplicaHealth::UpdateHedgeDelayLocked(Partition& part) {
  if (part.samples < options_.min_samples) return;
  const size_t n = std::min<uint64_t>(part.samples, kWindow);
  std::array<int64_t, kWindow> sorted;
  std::copy_n(part.latencies_us.begin(), n, sorted.begin());
  const size_t rank = std::min(
      n - 1, static_cast<size_t>(std::ceil(options_.hedge_quantile * static_cast<double>(n))) - 1);
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<ptrdiff_t>(rank),
                   sorted.begin() + static_cast<ptrdiff_t>(n));
  part.hedge_delay_us =
      std::clamp(sorted[rank], options_.min_hedge.count(), options_.max_hedge.count());
}

void ReplicaHealth::Answered(uint32_t p, uint32_t r, std::chrono::microseconds latency) {
  const int64_t now_us = clock_.NowMonotonicMicros();
  std::lock_guard lock(mu_);
  if (p >= parts_.size() || r >= parts_[p].replicas.size()) return;
  Partition& part = parts_[p];
  Replica& replica = part.replicas[r];
  replica.bad_in_a_row = 0;
  replica.ejections_in_a_row = 0;
  replica.answered_us = now_us;
  part.hedge_budget = std::min(hedge_reserve_, part.hedge_budget + hedge_earned_);
  part.latencies_us[part.samples % kWindow] = std::max<int64_t>(0, latency.count());
  ++part.samples;
  // The quantile is refreshed every 16 answers: a sort of 256 values per call would cost more
  // than the hedge saves.
  if (part.samples % 16 == 0 || part.samples == options_.min_samples) UpdateHedgeDelayLocked(part);
}

void ReplicaHealth::BadLocked(Replica& replica) {
  const int64_t now_us = clock_.NowMonotonicMicros();
  if (EjectedLocked(replica, now_us)) return;  // calls sent before it was ejected
  if (++replica.bad_in_a_row < options_.consecutive_to_eject) return;
  // Ejected: for base << (ejections without an answer between), capped.
  const int64_t base_us = options_.base_ejection.count() * 1000;
  const int64_t max_us = options_.max_ejection.count() * 1000;
  const uint32_t shift = std::min<uint32_t>(replica.ejections_in_a_row, 20);
  replica.ejected_until_us = now_us + std::min(max_us, base_us << shift);
  ++replica.ejections_in_a_row;
  ++replica.ejections;
  // Once back, one more bad call ejects it again (it has not answered since).
  replica.bad_in_a_row = options_.consecutive_to_eject - 1;
}

void ReplicaHealth::Failed(uint32_t p, uint32_t r) {
  std::lock_guard lock(mu_);
  if (p >= parts_.size() || r >= parts_[p].replicas.size()) return;
  BadLocked(parts_[p].replicas[r]);
}

void ReplicaHealth::Overtaken(uint32_t p, uint32_t r) { Failed(p, r); }

bool ReplicaHealth::TakeHedge(uint32_t p, uint32_t r) {
  std::lock_guard lock(mu_);
  if (p >= parts_.size() || r >= parts_[p].replicas.size()) return false;
  Partition& part = parts_[p];
  if (part.hedge_budget < kHedge) {
    ++part.replicas[r].hedges_refused;
    return false;
  }
  part.hedge_budget -= kHedge;
  return true;
}

void ReplicaHealth::Hedged(uint32_t p, uint32_t r) {
  std::lock_guard lock(mu_);
  if (p >= parts_.size() || r >= parts_[p].replicas.size()) return;
  ++parts_[p].replicas[r].hedges;
}

bool ReplicaHealth::Ejected(uint32_t p, uint32_t r) const {
  const int64_t now_us = clock_.NowMonotonicMicros();
  std::lock_guard lock(mu_);
  if (p >= parts_.size() || r >= parts_[p].replicas.size()) return false;
  return EjectedLocked(parts_[p].replicas[r], now_us);
}

bool ReplicaHealth::AnsweredWithin(uint32_t p, uint32_t r, std::chrono::microseconds window) const {
  const int64_t now_us = clock_.NowMonotonicMicros();
  std::lock_guard lock(mu_);
  if (p >= parts_.size() || r >= parts_[p].replicas.size()) return false;
  const int64_t answered = parts_[p].replicas[r].answered_us;
  return answered != INT64_MIN && now_us - answered <= window.count();
}

std::vector<ReplicaRecord> ReplicaHealth::Records() const {
  const int64_t now_us = clock_.NowMonotonicMicros();
  std::lock_guard lock(mu_);
  std::vector<ReplicaRecord> out;
  for (uint32_t p = 0; p < parts_.size(); ++p) {
    for (uint32_t r = 0; r < parts_[p].replicas.size(); ++r) {
      const Replica& replica = parts_[p].replicas[r];
      out.push_back(ReplicaRecord{p, r, EjectedLocked(replica, now_us), replica.ejections,
                                  replica.hedges, replica.hedges_refused});
    }
  }
  return out;
}

std::vector<std::chrono::microseconds> ReplicaHealth::HedgeDelays() const {
  std::lock_guard lock(mu_);
  std::vector<std::chrono::microseconds> out;
  for (const Partition& part : parts_) out.emplace_back(part.hedge_delay_us);
  return out;
}

}  // namespace tweetsearch::cluster
