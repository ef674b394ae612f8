#include "cluster/cluster_usage.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <openssl/sha.h>

#include <algorithm>
#include <map>

#include "common/strings.h"
#include "net/grpc.h"
#include "proto/cluster.grpc.pb.h"
#include "storage/convert.h"
#include "storage/write_records.h"
#include "usage/usage_table.h"

namespace tweetsearch::cluster {
namespace {

namespace ipb = internal::v1;

// What a share of a batch asks, as its record's fingerprint: SHA-256 of its deterministic
// encoding (a retry sends the same share, so it hashes alike).
std::string FingerprintOf(const ipb::WriteRequest& share) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    share.SerializeToCodedStream(&out);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

}  // namespace

ClusterUsageStore::ClusterUsageStore(ClusterBackend& backend, ClusterView& view, const Clock& clock,
                                     std::chrono::milliseconds read_timeout)
    : backend_(backend), view_(view), clock_(clock), read_timeout_(read_timeout) {}

absl::Status ClusterUsageStore::Add(const std::vector<usage::Increment>& increments,
                                    std::string_view batch_id) {
  const uint32_t partitions = static_cast<uint32_t>(view_.topology().storage.size());
  std::map<uint32_t, ipb::WriteRequest> shares;
  for (const usage::Increment& inc : increments) {
    usage::ToProto(inc, shares[StoragePartitionOfKey(inc.key_id, partitions)].add_usage());
  }
  absl::Status first_error;
  for (auto& [p, share] : shares) {
    storage::WriteRecord record;
    record.fingerprint = FingerprintOf(share);
    record.created_at_ms = clock_.NowUnixMillis();
    share.set_request_key(StrCat("usage/", batch_id, "/", p));
    storage::ToProto(record, share.mutable_record());
    absl::StatusOr<ipb::WriteResponse> answer = backend_.WriteToPrimary(p, std::move(share));
    absl::Status s = answer.status();
    if (s.ok() && answer->replayed()) {
      s = storage::CheckSameRequest(storage::FromProto(answer->record()), record.fingerprint);
    }
    if (!s.ok() && first_error.ok()) {
      first_error = absl::Status(s.code(), StrCat("usage counts for storage partition ", p,
                                                  " not written: ", s.message()));
    }
  }
  return first_error;
}

template <typename Ask>
absl::Status ClusterUsageStore::AskReplicas(uint32_t p, Ask ask) const {
  absl::Status last = absl::UnavailableError(StrCat("storage partition ", p, " has no replica"));
  for (uint32_t r : backend_.StorageReplicasPrimaryFirst(p)) {
    grpc::ClientContext context;
    context.set_deadline(net::Deadline(read_timeout_));
    const grpc::Status s = ask(view_.storage(p, r), context);
    if (s.ok()) return absl::OkStatus();
    last = net::FromGrpc(s);
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) return last;
  }
  return absl::Status(last.code(),
                      StrCat("usage of storage partition ", p, " unreadable: ", last.message()));
}

absl::StatusOr<std::vector<usage::Point>> ClusterUsageStore::Query(std::string_view key_id,
                                                                   usage::Resolution resolution,
                                                                   int64_t from_s, int64_t to_s,
                                                                   size_t max_points) const {
  ipb::UsageQueryRequest request;
  request.set_key_id(std::string(key_id));
  request.set_resolution(static_cast<uint32_t>(resolution));
  request.set_from_s(from_s);
  request.set_to_s(to_s);
  request.set_max_points(static_cast<uint32_t>(std::min<size_t>(max_points, UINT32_MAX)));
  const uint32_t partitions = static_cast<uint32_t>(view_.topology().storage.size());
  ipb::UsageQueryResponse response;
  absl::Status s = AskReplicas(StoragePartitionOfKey(key_id, partitions),
                               [&](ipb::Storage::Stub& stub, grpc::ClientContext& context) {
                                 response.Clear();
                                 return stub.QueryUsage(&context, request, &response);
                               });
  if (!s.ok()) return s;
  std::vector<usage::Point> points;
  points.reserve(response.points_size());
  for (const ipb::UsagePoint& p : response.points()) {
    points.push_back(usage::Point{p.start_s(), usage::FromProto(p.counters())});
  }
  return points;
}

absl::StatusOr<std::vector<std::string>> ClusterUsageStore::Keys() const {
  std::vector<std::string> keys;
  for (uint32_t p = 0; p < view_.topology().storage.size(); ++p) {
    ipb::UsageKeysResponse response;
    absl::Status s = AskReplicas(p, [&](ipb::Storage::Stub& stub, grpc::ClientContext& context) {
      response.Clear();
      return stub.UsageKeys(&context, ipb::UsageKeysRequest(), &response);
    });
    if (!s.ok()) return s;
    keys.insert(keys.end(), response.key_ids().begin(), response.key_ids().end());
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

absl::StatusOr<uint64_t> ClusterUsageStore::StoredBuckets(usage::Resolution) const {
  return absl::UnimplementedError("in a cluster each storage replica keeps its own buckets");
}

}  // namespace tweetsearch::cluster
