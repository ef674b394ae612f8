// The storage role's gRPC face (proto/cluster.proto, service Storage): the service a storage
// replica serves, and the clients the other roles reach it with: a primary's StoragePeer (its
// secondary) and a ChangeSource (the change log an index server or builder follows).
//
// Thread-safety: the service, the peer and the change source may be used from any thread.
#ifndef TWEETSEARCH_STORAGE_SERVICE_H_
#define TWEETSEARCH_STORAGE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "storage/change_tail.h"
#include "storage/storage_node.h"

namespace tweetsearch::storage {

// The Storage service over `node`, which must outlive it.
std::unique_ptr<grpc::Service> MakeStorageService(StorageNode& node);

// The storage peer of a primary: its secondary at `address` (HOST:PORT), each call bounded by
// `timeout` (an install chunk by ten times it).
std::unique_ptr<StoragePeer> MakeStoragePeer(const std::string& address,
                                             std::chrono::milliseconds timeout);

// Reads one storage partition's change log from whichever of its replicas answers (the one
// that answered last first), as `reader`; puts carry their tweets unless `bodies` is kOmit.
std::unique_ptr<ChangeSource> MakeChangeSource(std::vector<std::string> replicas,
                                               std::string reader, ChangeBodies bodies);

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_SERVICE_H_
