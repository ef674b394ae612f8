// ClusterStatus: every process of a cluster as an operator sees it (tweetctl
// status): whether it holds its etcd membership, whether it answers, its state,
// and how many tweets it holds.
//
// Thread-safety: CollectStatus blocks its caller; it calls every process in
// parallel with a short deadline.
#ifndef TWEETSEARCH_CLUSTER_CLUSTER_STATUS_H_
#define TWEETSEARCH_CLUSTER_CLUSTER_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/topology.h"

namespace tweetsearch::cluster {

struct ProcessStatus {
  Role role = Role::kStorage;
  std::string node;
  int partition = -1;  // storage and index replicas
  std::string address;
  bool member = false;     // holds its etcd membership (index: only while serving)
  bool reachable = false;  // answered its Status call (aggregators: /readyz)
  std::string state;       // primary/secondary, serving/catching_up/..., leader, ready
  uint64_t tweets = 0;     // storage estimate, index documents, builder ids (estimate)
  std::string detail;      // epoch and sequences, rebuild progress, the error
  bool healthy = false;
};

struct ClusterStatus {
  std::vector<ProcessStatus> processes;  // in topology order
  // Partitions with no serving index replica, storage partitions with no
  // primary: the cluster cannot answer every search or write.
  std::vector<std::string> problems;
};

// Unavailable when etcd cannot be reached.
absl::StatusOr<ClusterStatus> CollectStatus(const Topology& topology);

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_CLUSTER_STATUS_H_
