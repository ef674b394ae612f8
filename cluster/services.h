// The gRPC faces of the cluster's roles (proto/cluster.proto): servers for a
// storage replica, an index replica and a builder, and the clients other roles
// use to reach them.
//
// Thread-safety: services and clients may be used from any thread.
#ifndef TWEETSEARCH_CLUSTER_SERVICES_H_
#define TWEETSEARCH_CLUSTER_SERVICES_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "indexer/builder/builder_node.h"
#include "indexer/server/index_node.h"
#include "proto/cluster.grpc.pb.h"
#include "storage/storage_node.h"

namespace tweetsearch::cluster {

std::unique_ptr<grpc::Service> MakeStorageService(storage::StorageNode& node);
std::unique_ptr<grpc::Service> MakeIndexService(indexer::IndexNode& node);
std::unique_ptr<grpc::Service> MakeBuilderService(indexer::BuilderNode& node);

// A channel to HOST:PORT (plaintext: the cluster talks on a private network).
std::shared_ptr<grpc::Channel> Connect(const std::string& address);

// A client context whose call must end within `timeout`.
std::unique_ptr<grpc::ClientContext> CallContext(std::chrono::milliseconds timeout);

// The storage peer of a primary, over gRPC.
std::unique_ptr<storage::StoragePeer> MakeStoragePeer(const std::string& address,
                                                      std::chrono::milliseconds timeout);

// Reads one storage partition's change log from whichever of its replicas
// answers (the one that answered last first), as `reader`; puts carry their
// tweets unless `bodies` is kOmit.
std::unique_ptr<storage::ChangeSource> MakeChangeSource(std::vector<std::string> replicas,
                                                        std::string reader,
                                                        storage::ChangeBodies bodies);

// A server on `address` (HOST:PORT; port 0 picks one) with `services`.
struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};
absl::StatusOr<RunningServer> StartServer(const std::string& address,
                                          const std::vector<grpc::Service*>& services);

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_SERVICES_H_
