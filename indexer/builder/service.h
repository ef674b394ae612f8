// The Index-Builder's gRPC face (proto/cluster.proto, service Builder): the tweet ids of an
// index partition, their count, and the builder's status, for rebuilds.
//
// Thread-safety: the service may be called from any thread.
#ifndef TWEETSEARCH_INDEXER_BUILDER_SERVICE_H_
#define TWEETSEARCH_INDEXER_BUILDER_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <memory>

#include "indexer/builder/builder_node.h"

namespace tweetsearch::indexer {

// The Builder service over `node`, which must outlive it.
std::unique_ptr<grpc::Service> MakeBuilderService(BuilderNode& node);

}  // namespace tweetsearch::indexer

#endif  // TWEETSEARCH_INDEXER_BUILDER_SERVICE_H_
