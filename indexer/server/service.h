// The index server's gRPC face (proto/cluster.proto, service Index): searches of one index
// partition, its collection statistics, and the rebuild calls; with the conversions of the
// statistics the front door's cluster backend shares.
//
// Thread-safety: the service may be called from any thread.
#ifndef TWEETSEARCH_INDEXER_SERVER_SERVICE_H_
#define TWEETSEARCH_INDEXER_SERVER_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <memory>

#include "indexer/query/searcher.h"
#include "indexer/server/index_node.h"
#include "proto/cluster.pb.h"

namespace tweetsearch::indexer {

// The Index service over `node`, which must outlive it.
std::unique_ptr<grpc::Service> MakeIndexService(IndexNode& node);

void ToProto(const query::CollectionStats& s, internal::v1::CollectionStats* out);
query::CollectionStats FromProto(const internal::v1::CollectionStats& s);

}  // namespace tweetsearch::indexer

#endif  // TWEETSEARCH_INDEXER_SERVER_SERVICE_H_
