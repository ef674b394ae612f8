// Membership: one process's etcd lease, kept alive, and the keys it holds with
// it.
//
// Keys put through Put() vanish when the lease expires (the process died or was
// frozen past its TTL), which is how the cluster learns that a process is gone.
// If the lease is lost while the process lives on (etcd unreachable too long,
// or a SIGSTOP), a new lease is granted, the keys are put again, and
// generation() changes: roles tied to the old lease (a storage primary) must
// treat it as lost.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_CLUSTER_MEMBERSHIP_H_
#define TWEETSEARCH_CLUSTER_MEMBERSHIP_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cluster/etcd_client.h"
#include "common/clock.h"
#include "common/periodic.h"

namespace tweetsearch::cluster {

class Membership {
 public:
  // Grants a lease of `ttl_s` seconds and keeps it alive (every ttl/4, on real
  // time). Holds() measures on `clock`'s monotonic time, which must outlive it.
  static absl::StatusOr<std::unique_ptr<Membership>> Start(std::vector<std::string> etcd,
                                                           int64_t ttl_s,
                                                           const Clock& clock = SystemClock());
  // Revokes the lease: its keys vanish at once.
  ~Membership();

  // Puts `key` with the lease (again after a lease is replaced). Empty value:
  // removes it.
  absl::Status Put(const std::string& key, const std::string& value);
  absl::Status Remove(const std::string& key);

  // True while the current lease is certainly alive: its last renewal, plus the
  // TTL, minus a second of margin, is still ahead.
  bool Holds() const;
  // True once etcd has answered that the current lease expired (until a new one is granted,
  // which changes generation()). A lease that is not held but not known lost lapsed while
  // etcd did not answer.
  bool LeaseKnownLost() const;
  int64_t lease() const;
  uint64_t generation() const;
  EtcdClient& etcd() { return *etcd_; }

 private:
  Membership(std::vector<std::string> etcd, int64_t ttl_s, const Clock& clock);
  void Renew();

  const int64_t ttl_s_;
  const Clock& clock_;
  std::unique_ptr<EtcdClient> etcd_;
  mutable absl::Mutex mu_;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t renewed_us_ ABSL_GUARDED_BY(mu_) = 0;  // when the last renewal was asked for
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::string> keys_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PeriodicTask> keepalive_;
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_MEMBERSHIP_H_
