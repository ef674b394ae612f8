// Conversions between the cluster protos and the C++ types of the roles.
#ifndef TWEETSEARCH_CLUSTER_CONVERT_H_
#define TWEETSEARCH_CLUSTER_CONVERT_H_

#include <grpcpp/grpcpp.h>

#include <vector>

#include "absl/status/status.h"
#include "indexer/query/searcher.h"
#include "proto/cluster.pb.h"
#include "storage/tweet_store.h"

namespace tweetsearch::cluster {

void ToProto(const storage::StoredTweet& t, v1::Tweet* out);
storage::StoredTweet FromProto(const v1::Tweet& t);

void ToProto(const storage::ReplicatedChange& c, internal::v1::Change* out);
absl::StatusOr<storage::ReplicatedChange> FromProto(const internal::v1::Change& c);

void ToProto(const query::CollectionStats& s, internal::v1::CollectionStats* out);
query::CollectionStats FromProto(const internal::v1::CollectionStats& s);

// absl and gRPC share the canonical code numbers.
inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}
inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_CONVERT_H_
