// ClusterNode: one process of a cluster, in the role the topology gives its
// node name (`tweetsearchd --topology F --role R --node N`).
//
//   storage     a StorageNode on <data>, its gRPC service, an etcd lease, and
//               the election: it takes the partition's primary role when no
//               primary holds it (and it is not marked stale), keeps it while
//               its lease lives, and steps down when it lapses.
//   index       an IndexNode on <data> tailing every storage partition, its
//               gRPC service, and a member key in etcd only while it is
//               serving (so front doors search it only then).
//   builder     a BuilderNode on <data> tailing every storage partition, its
//               gRPC service, and the builder leader key while it serves and
//               no other builder holds it.
//   aggregator  the front door (HTTP and gRPC, keys, quotas, usage on <data>)
//               over a ClusterBackend.
//
// Thread-safety: Start/Stop from one controlling thread.
#ifndef TWEETSEARCH_CLUSTER_NODE_H_
#define TWEETSEARCH_CLUSTER_NODE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "aggregator/daemon.h"
#include "cluster/topology.h"

namespace tweetsearch::cluster {

class ClusterNode {
 public:
  // `base` supplies what the topology does not (log level, quota rules, thread
  // counts); its data_dir, when set, overrides the topology's.
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Start(const Topology& topology, Role role,
                                                            const std::string& node,
                                                            const aggregator::DaemonConfig& base);
  virtual ~ClusterNode() = default;
  virtual absl::Status Stop() = 0;
  virtual absl::Status ReloadLimits() { return absl::OkStatus(); }
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_NODE_H_
