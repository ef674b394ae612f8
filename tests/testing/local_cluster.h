// A real cluster for tests, every process on loopback: etcd (Debian's
// etcd-server), and tweetsearchd processes for S storage partitions x 2
// replicas (s<p>a, s<p>b), I index partitions x 2 replicas (i<p>a, i<p>b),
// builders (b0, b1) and two front doors (a0, a1), on free ports, with data
// under one directory. Every process it starts, it stops (SIGKILL in the
// destructor).
#ifndef TWEETSEARCH_TESTS_TESTING_LOCAL_CLUSTER_H_
#define TWEETSEARCH_TESTS_TESTING_LOCAL_CLUSTER_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/etcd_server.h"
#include "tests/testing/network_lab.h"
#include "tests/testing/process.h"

namespace tweetsearch::testing {

struct LocalClusterOptions {
  std::string tweetsearchd;  // the binary
  std::string dir;           // data, logs and the topology file go here
  int storage_partitions = 2;
  int index_partitions = 2;
  bool allow_single_replica = true;
  int lease_ttl_s = 3;
  int builders = 2;
  uint64_t max_log_changes = 0;              // 0: the topology's default
  uint32_t live_reader_window_s = 0;         // 0: the topology's default
  uint32_t write_retry_s = 0;                // 0: the topology's default
  std::string redis;                         // HOST:PORT, optional
  std::vector<std::string> aggregator_args;  // extra tweetsearchd flags for a0 and a1
  // Every process in a network namespace of its own (network_lab.h), so that tests can
  // partition the network; needs root. Else all on loopback.
  bool network_namespaces = false;
};

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  ~LocalCluster();

  // Starts etcd and every node; true once both front doors answer searches,
  // every index replica serves, every storage partition has a primary and a
  // builder leads, within two minutes.
  bool Start();
  // Sends `signal_number` to a node (SIGKILL, SIGSTOP, SIGCONT, SIGTERM), or to
  // etcd (SIGSTOP and SIGCONT only).
  void Signal(const std::string& node, int signal_number);
  // Starts a node again (after a kill).
  void Restart(const std::string& node);
  // SIGKILLs a node and deletes its data directory: a lost server.
  void Wipe(const std::string& node);
  // The front door's HTTP host and port ("a0" or "a1").
  std::string http_host(const std::string& aggregator) const;
  std::string http_port(const std::string& aggregator) const;
  // The namespaces, with network_namespaces (null otherwise): etcd's is "etcd".
  NetworkLab* lab() { return lab_.get(); }
  const std::string& etcd_endpoint() const { return etcd_endpoint_; }
  const std::string& topology_path() const { return topology_path_; }
  // The node holding storage partition p's primary role according to etcd (""
  // if none).
  std::string StoragePrimary(int partition) const;
  // Index nodes registered as serving.
  std::vector<std::string> ServingIndexNodes() const;
  // The builder holding the leader key ("" if none).
  std::string BuilderLeader() const;
  const std::string& dir() const { return options_.dir; }
  // A node's gRPC HOST:PORT.
  std::string grpc_address(const std::string& node) const;

 private:
  void StartNode(const std::string& node);
  std::string RoleOf(const std::string& node) const;

  // HOST:PORT for `node` to listen on: a free loopback port, or in its namespace.
  std::string Listen(const std::string& node, int lab_port);

  LocalClusterOptions options_;
  std::unique_ptr<NetworkLab> lab_;
  std::string topology_path_;
  std::string etcd_endpoint_;
  std::unique_ptr<EtcdServer> etcd_;
  std::map<std::string, std::string> http_addresses_;
  std::map<std::string, std::string> grpc_addresses_;
  std::vector<std::string> nodes_;
  std::map<std::string, std::unique_ptr<ChildProcess>> processes_;
};

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_LOCAL_CLUSTER_H_
