#include "cluster/membership.h"

namespace tweetsearch::cluster {

Membership::Membership(std::vector<std::string> etcd, int64_t ttl_s, const Clock& clock)
    : ttl_s_(ttl_s),
      clock_(clock),
      etcd_(std::make_unique<EtcdClient>(std::move(etcd), std::chrono::milliseconds(ttl_s * 250))) {
}

absl::StatusOr<std::unique_ptr<Membership>> Membership::Start(std::vector<std::string> etcd,
                                                              int64_t ttl_s, const Clock& clock) {
  std::unique_ptr<Membership> m(new Membership(std::move(etcd), ttl_s, clock));
  const int64_t asked = clock.NowMonotonicMicros();
  absl::StatusOr<int64_t> lease = m->etcd_->GrantLease(ttl_s);
  if (!lease.ok()) return lease.status();
  {
    absl::MutexLock lock(&m->mu_);
    m->lease_ = *lease;
    m->generation_ = 1;
    m->renewed_us_ = asked;
  }
  m->keepalive_ = std::make_unique<PeriodicTask>(
      absl::Milliseconds(std::max<int64_t>(250, ttl_s * 250)), [m = m.get()] { m->Renew(); });
  return m;
}

Membership::~Membership() {
  keepalive_.reset();
  absl::MutexLock lock(&mu_);
  if (lease_ != 0) (void)etcd_->Revoke(lease_);  // best effort: else it expires by itself
}

void Membership::Renew() {
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
  }
  // The renewal counts from when it was asked for, not answered: the lease may
  // have been extended at any moment in between.
  const int64_t asked = clock_.NowMonotonicMicros();
  absl::Status s = etcd_->KeepAlive(lease);
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    if (lease_ == lease) renewed_us_ = asked;
    return;
  }
  if (!absl::IsNotFound(s)) return;  // etcd unreachable: Holds() runs out by itself
  // The lease expired while this process lived: take a new one and put the keys
  // back.
  {
    absl::MutexLock lock(&mu_);
    if (lease_ == lease) lost_ = true;
  }
  absl::StatusOr<int64_t> fresh = etcd_->GrantLease(ttl_s_);
  if (!fresh.ok()) return;
  std::map<std::string, std::string> keys;
  {
    absl::MutexLock lock(&mu_);
    lease_ = *fresh;
    lost_ = false;
    ++generation_;
    renewed_us_ = asked;
    keys = keys_;
  }
  for (const auto& [key, value] : keys) (void)etcd_->Put(key, value, *fresh);
}

absl::Status Membership::Put(const std::string& key, const std::string& value) {
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    keys_[key] = value;
    lease = lease_;
  }
  return etcd_->Put(key, value, lease);
}

absl::Status Membership::Remove(const std::string& key) {
  {
    absl::MutexLock lock(&mu_);
    keys_.erase(key);
  }
  return etcd_->Delete(key);
}

bool Membership::Holds() const {
  absl::MutexLock lock(&mu_);
  return clock_.NowMonotonicMicros() < renewed_us_ + (ttl_s_ - 1) * 1'000'000;
}

bool Membership::LeaseKnownLost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

int64_t Membership::lease() const {
  absl::MutexLock lock(&mu_);
  return lease_;
}

uint64_t Membership::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

}  // namespace tweetsearch::cluster
