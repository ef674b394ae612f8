// ClusterView: what a front door (or tweetctl) knows of the cluster: the
// topology, and from etcd, refreshed every `refresh` (and at once on
// Refresh()), which storage replica is primary and which index replicas are
// serving. Holds one gRPC stub per node.
//
// etcd keys (docs/cluster.md):
//   /ts/members/<role>/<node>        the node's address, on the node's lease
//   (index servers
//                                    only while serving)
//   /ts/storage/<p>/primary          "<node> <epoch>", on the primary's lease
//   /ts/storage/<p>/epoch            the last epoch handed out (no lease)
//   /ts/storage/<p>/stale/<node>     that replica lacks acknowledged writes:
//   never promote it
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_CLUSTER_CLUSTER_VIEW_H_
#define TWEETSEARCH_CLUSTER_CLUSTER_VIEW_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"
#include "cluster/topology.h"
#include "common/periodic.h"
#include "proto/cluster.grpc.pb.h"

namespace tweetsearch::cluster {

std::string MemberKey(Role role, const std::string& node);
std::string PrimaryKey(uint32_t storage_partition);
std::string EpochKey(uint32_t storage_partition);
std::string StaleKey(uint32_t storage_partition, const std::string& node);
// The builder that tweetctl rebuild reads ids from; only a serving builder
// holds it.
inline constexpr char kBuilderLeaderKey[] = "/ts/builder/leader";
// Progress of `tweetctl rebuild` of one index replica (JSON).
std::string RebuildKey(uint32_t index_partition, const std::string& node);
// "<node> <epoch>" and back.
std::string PrimaryValue(const std::string& node, uint64_t epoch);
bool ParsePrimaryValue(const std::string& value, std::string* node, uint64_t* epoch);

class ClusterView {
 public:
  ClusterView(Topology topology, absl::Duration refresh = absl::Milliseconds(500));
  ~ClusterView();

  const Topology& topology() const { return topology_; }
  // Re-reads etcd now (after a call found the picture out of date).
  void Refresh();

  // The replica number of storage partition `p`'s primary, if one is known.
  std::optional<uint32_t> StoragePrimary(uint32_t p) const;
  // The index replicas of partition `p` that are serving.
  std::vector<uint32_t> LiveIndexReplicas(uint32_t p) const;
  // Whether etcd answered the last refresh.
  bool etcd_up() const;

  internal::v1::Storage::Stub& storage(uint32_t p, uint32_t r) const { return *storage_[p][r]; }
  internal::v1::Index::Stub& index(uint32_t p, uint32_t r) const { return *index_[p][r]; }
  EtcdClient& etcd() { return etcd_; }

 private:
  const Topology topology_;
  EtcdClient etcd_;
  std::vector<std::vector<std::unique_ptr<internal::v1::Storage::Stub>>> storage_;
  std::vector<std::vector<std::unique_ptr<internal::v1::Index::Stub>>> index_;

  mutable absl::Mutex mu_;
  std::vector<std::optional<uint32_t>> primaries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<uint32_t>> live_index_ ABSL_GUARDED_BY(mu_);
  bool etcd_up_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex refresh_mu_;  // one refresh at a time
  std::unique_ptr<PeriodicTask> refresher_;
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_CLUSTER_VIEW_H_
