// Topology: every process of a cluster, read from a YAML file (docs/cluster.md
// shows one), and the partition of a tweet.
//
//   etcd: [127.0.0.1:2379]
//   redis: 127.0.0.1:6379
//   storage_partitions:
//     - replicas: [{node: s0a, grpc: 127.0.0.1:7100, data: /var/lib/ts/s0a},
//     {node: s0b, ...}]
//   index_partitions:
//     - replicas: [{node: i0a, grpc: 127.0.0.1:7200, data: ...}, {node: i0b,
//     ...}]
//   builders: [{node: b0, grpc: 127.0.0.1:7300, data: ...}]
//   aggregators: [{node: a0, http: 127.0.0.1:8080, grpc: 127.0.0.1:9090, data:
//   ...}]
//
// Thread-safety: a Topology is a value; read it from any thread.
#ifndef TWEETSEARCH_CLUSTER_TOPOLOGY_H_
#define TWEETSEARCH_CLUSTER_TOPOLOGY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ids.h"

namespace tweetsearch::cluster {

enum class Role { kStorage, kIndex, kBuilder, kAggregator };
std::string_view RoleName(Role role);
// "storage", "index", "builder", "aggregator". InvalidArgument otherwise.
absl::StatusOr<Role> ParseRole(std::string_view name);

struct NodeSpec {
  std::string node;  // unique name in the cluster
  std::string grpc;  // HOST:PORT of its gRPC service
  std::string http;  // HOST:PORT, aggregators only
  std::string data;  // its data directory
};

struct Partition {
  std::vector<NodeSpec> replicas;  // one or two
};

struct Topology {
  std::vector<std::string> etcd;  // HOST:PORT of etcd's client URL, one or more
  std::string redis;              // HOST:PORT; empty: quotas in each front door's memory
  std::vector<Partition> storage;
  std::vector<Partition> index;
  std::vector<NodeSpec> builders;
  std::vector<NodeSpec> aggregators;
  // Storage primaries may acknowledge alone while their secondary is down
  // (counted in metrics). Default false: a write then fails until the secondary
  // is back or removed.
  bool allow_single_replica = false;
  // Seconds an etcd lease lives without a keep-alive (membership, primary
  // role). Default 5.
  int64_t lease_ttl_s = 5;
  // Change-log entries a storage replica keeps at most, even when a reader
  // (an index server or builder that is down) still needs older ones: that
  // reader then needs a rebuild. Default 50M.
  uint64_t max_log_changes = 50'000'000;
  // A log reader heard from within this many seconds is live: the cap never
  // trims past its position.
  uint32_t live_reader_window_s = 30;
  // Seconds a front door keeps retrying a write whose storage partition has no
  // primary that answers (a failover takes about lease_ttl_s). Default 20.
  uint32_t write_retry_s = 20;
  // Milliseconds a front door may score best match with collection statistics it collected
  // before, while no partition is seen to change (cluster/stats_cache.h); 0: collected for
  // every search. Default 10000.
  uint32_t stats_ttl_ms = 10000;

  // Where `node` sits: its role, partition (storage and index) and replica
  // number.
  struct Place {
    Role role = Role::kAggregator;
    uint32_t partition = 0;
    uint32_t replica = 0;
    const NodeSpec* spec = nullptr;
  };
  std::optional<Place> Find(std::string_view node) const;
};

// Reads and checks a topology file: at least one storage and one index
// partition, one or two replicas each, at least one aggregator, unique node
// names, HOST:PORT addresses. InvalidArgument naming the offending entry
// otherwise.
absl::StatusOr<Topology> LoadTopology(const std::string& path);
absl::StatusOr<Topology> ParseTopology(std::string_view yaml);

// The storage partition of a tweet: xxh64 of its id as 8 big-endian bytes, seed
// 0, mod count.
uint32_t StoragePartitionOf(TweetId id, uint32_t count);
// The index partition of a tweet: the same hash with seed 1, so the two counts
// are independent.
uint32_t IndexPartitionOf(TweetId id, uint32_t count);
// The storage partition that keeps what is filed under `key` rather than a tweet id (an
// idempotent ingest's record, an API key's usage series): FNV-1a of the key, placed as an id.
uint32_t StoragePartitionOfKey(std::string_view key, uint32_t count);

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_TOPOLOGY_H_
