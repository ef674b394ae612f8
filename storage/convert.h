// Conversions between the storage role's C++ types and their protos (proto/cluster.proto):
// the gRPC edge of storage, shared by its service and by the roles that call it.
#ifndef TWEETSEARCH_STORAGE_CONVERT_H_
#define TWEETSEARCH_STORAGE_CONVERT_H_

#include <optional>

#include "absl/status/statusor.h"
#include "proto/cluster.pb.h"
#include "storage/tweet_store.h"

namespace tweetsearch::storage {

void ToProto(const StoredTweet& t, v1::Tweet* out);
StoredTweet FromProto(const v1::Tweet& t);

// The change kinds as the log and the wire spell them; nullopt for a kind this code does not
// know. Defined with the store's log encoding (tweet_store.cc), which uses them too.
v1::ChangeRecord::Kind ChangeKindToProto(ChangeKind kind);
std::optional<ChangeKind> ChangeKindFromProto(v1::ChangeRecord::Kind kind);

void ToProto(const ReplicatedChange& c, internal::v1::Change* out);
// InvalidArgument for a change of an unknown kind.
absl::StatusOr<ReplicatedChange> FromProto(const internal::v1::Change& c);

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_CONVERT_H_
