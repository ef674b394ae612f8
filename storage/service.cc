#include "storage/service.h"

#include <atomic>

#include "common/strings.h"
#include "net/grpc.h"
#include "proto/cluster.grpc.pb.h"
#include "storage/convert.h"
#include "storage/write_records.h"
#include "usage/usage_table.h"

namespace tweetsearch::storage {
namespace {

using internal::v1::Storage;
namespace ipb = internal::v1;

constexpr size_t kDefaultReadMax = 4096;
constexpr uint32_t kMaxWaitMs = 10'000;
constexpr size_t kSnapshotChunk = 65536;  // ids per SnapshotIds message
constexpr size_t kMaxUsagePoints = 10'000;

// A usage series' key id is printable ASCII, as the usage column family's layout needs.
absl::Status CheckUsageKeyId(std::string_view key_id) {
  if (key_id.empty() || key_id.size() > 256) {
    return absl::InvalidArgumentError("a usage key id has 1 to 256 characters");
  }
  for (char c : key_id) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError("a usage key id is printable ASCII");
    }
  }
  return absl::OkStatus();
}

class StorageService final : public Storage::Service {
 public:
  explicit StorageService(StorageNode& node) : node_(node) {}

  grpc::Status Write(grpc::ServerContext*, const ipb::WriteRequest* request,
                     ipb::WriteResponse* response) override {
    return net::Guarded("Storage.Write", [&]() -> grpc::Status {
      WriteOp op;
      op.retry = request->retry();
      op.puts.reserve(request->puts_size());
      for (const v1::Tweet& t : request->puts()) op.puts.push_back(FromProto(t));
      if (request->delete_id() != 0) op.delete_id = request->delete_id();
      if (request->likes_id() != 0) {
        op.likes = LikesChange{request->likes_id(), request->likes_value(), request->likes_add()};
      }
      if (!request->request_key().empty()) {
        op.request_key = request->request_key();
        op.record = FromProto(request->record());
      }
      if (request->usage_size() > 0 && (!op.puts.empty() || op.delete_id || op.likes)) {
        return net::ToGrpc(absl::InvalidArgumentError("usage counts are written alone"));
      }
      op.usage.reserve(request->usage_size());
      for (const v1::UsageIncrement& inc : request->usage()) {
        if (absl::Status s = CheckUsageKeyId(inc.key_id()); !s.ok()) return net::ToGrpc(s);
        op.usage.push_back(usage::FromProto(inc));
      }
      absl::StatusOr<WriteResult> result = node_.Write(std::move(op));
      if (!result.ok()) return net::ToGrpc(result.status());
      for (const absl::Status& s : result->outcomes) {
        ipb::Outcome* o = response->add_outcomes();
        o->set_code(static_cast<int>(s.code()));
        o->set_message(std::string(s.message()));
      }
      response->set_likes(result->likes);
      response->set_last_sequence(result->last_sequence);
      if (result->record.has_value()) ToProto(*result->record, response->mutable_record());
      response->set_replayed(result->replayed);
      return grpc::Status::OK;
    });
  }

  grpc::Status Replicate(grpc::ServerContext*, const ipb::ReplicateRequest* request,
                         ipb::ReplicateResponse* response) override {
    return net::Guarded("Storage.Replicate", [&]() -> grpc::Status {
      std::vector<ReplicatedChange> changes;
      changes.reserve(request->changes_size());
      for (const ipb::Change& c : request->changes()) {
        absl::StatusOr<ReplicatedChange> change = FromProto(c);
        if (!change.ok()) return net::ToGrpc(change.status());
        changes.push_back(*std::move(change));
      }
      absl::StatusOr<uint64_t> last =
          node_.Replicate(request->epoch(), request->primary(), changes, request->synced_through());
      if (!last.ok()) return net::ToGrpc(last.status());
      response->set_last_sequence(*last);
      return grpc::Status::OK;
    });
  }

  grpc::Status Install(grpc::ServerContext*, const ipb::InstallRequest* request,
                       ipb::ReplicateResponse* response) override {
    return net::Guarded("Storage.Install", [&]() -> grpc::Status {
      InstallChunk chunk;
      chunk.sequence = request->sequence();
      chunk.begin = request->begin();
      chunk.tweets.reserve(request->tweets_size());
      for (const v1::Tweet& t : request->tweets()) chunk.tweets.push_back(FromProto(t));
      for (const ipb::Change& c : request->requests()) {
        absl::StatusOr<ReplicatedChange> r = FromProto(c);
        if (!r.ok()) return net::ToGrpc(r.status());
        if (!r->request.has_value()) return net::ToGrpc(absl::InvalidArgumentError("no record"));
        chunk.requests.push_back(*std::move(r->request));
      }
      for (const ipb::UsageBucket& b : request->usage()) {
        chunk.usage.push_back(StoredUsage{b.key(), b.value()});
      }
      if (request->has_finish()) {
        absl::StatusOr<ReplicatedChange> finish = FromProto(request->finish());
        if (!finish.ok()) return net::ToGrpc(finish.status());
        chunk.finish = *std::move(finish);
      }
      absl::StatusOr<uint64_t> last = node_.Install(request->epoch(), request->primary(), chunk);
      if (!last.ok()) return net::ToGrpc(last.status());
      response->set_last_sequence(*last);
      return grpc::Status::OK;
    });
  }

  grpc::Status SnapshotIds(grpc::ServerContext* context, const ipb::SnapshotIdsRequest* request,
                           grpc::ServerWriter<ipb::SnapshotIdsChunk>* writer) override {
    return net::Guarded("Storage.SnapshotIds", [&]() -> grpc::Status {
      absl::StatusOr<std::unique_ptr<StoreSnapshot>> snapshot =
          node_.SnapshotFor(request->reader());
      if (!snapshot.ok()) return net::ToGrpc(snapshot.status());
      ipb::SnapshotIdsChunk chunk;
      chunk.set_sequence((*snapshot)->last().change.sequence);
      for (;;) {
        if (context->IsCancelled()) return grpc::Status::CANCELLED;
        absl::StatusOr<std::vector<StoredTweet>> next = (*snapshot)->Next(kSnapshotChunk);
        if (!next.ok()) return net::ToGrpc(next.status());
        chunk.clear_ids();
        for (const StoredTweet& t : *next) chunk.add_ids(t.id);
        chunk.set_done(next->size() < kSnapshotChunk);
        if (!writer->Write(chunk)) return grpc::Status::CANCELLED;
        if (chunk.done()) return grpc::Status::OK;
      }
    });
  }

  grpc::Status ReadChanges(grpc::ServerContext*, const ipb::ReadChangesRequest* request,
                           ipb::ReadChangesResponse* response) override {
    return net::Guarded("Storage.ReadChanges", [&]() -> grpc::Status {
      const size_t max =
          request->max() == 0 ? kDefaultReadMax : std::min<size_t>(request->max(), 65536);
      absl::StatusOr<std::vector<ReplicatedChange>> changes = node_.ReadChanges(
          request->after(), max, absl::Milliseconds(std::min(request->wait_ms(), kMaxWaitMs)),
          request->reader(), request->reader_keeps(),
          request->omit_tweets() ? ChangeBodies::kOmit : ChangeBodies::kInclude);
      if (!changes.ok()) return net::ToGrpc(changes.status());
      for (const ReplicatedChange& c : *changes) ToProto(c, response->add_changes());
      response->set_last_sequence(node_.LastSequence());
      return grpc::Status::OK;
    });
  }

  grpc::Status MultiGet(grpc::ServerContext*, const ipb::MultiGetRequest* request,
                        ipb::MultiGetResponse* response) override {
    return net::Guarded("Storage.MultiGet", [&]() -> grpc::Status {
      std::vector<TweetId> ids(request->ids().begin(), request->ids().end());
      for (absl::StatusOr<StoredTweet>& t : node_.MultiGet(ids)) {
        if (t.ok()) {
          ToProto(*t, response->add_tweets());
        } else if (!absl::IsNotFound(t.status())) {
          return net::ToGrpc(t.status());
        }
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status QueryUsage(grpc::ServerContext*, const ipb::UsageQueryRequest* request,
                          ipb::UsageQueryResponse* response) override {
    return net::Guarded("Storage.QueryUsage", [&]() -> grpc::Status {
      if (absl::Status s = CheckUsageKeyId(request->key_id()); !s.ok()) return net::ToGrpc(s);
      if (request->resolution() > static_cast<uint32_t>(usage::Resolution::kDay)) {
        return net::ToGrpc(absl::InvalidArgumentError("unknown resolution"));
      }
      absl::StatusOr<std::vector<usage::Point>> points = node_.QueryUsage(
          request->key_id(), static_cast<usage::Resolution>(request->resolution()),
          request->from_s(), request->to_s(),
          std::min<size_t>(request->max_points() == 0 ? kMaxUsagePoints : request->max_points(),
                           kMaxUsagePoints));
      if (!points.ok()) return net::ToGrpc(points.status());
      for (const usage::Point& p : *points) {
        ipb::UsagePoint* out = response->add_points();
        out->set_start_s(p.start_s);
        usage::ToProto(p.counters, out->mutable_counters());
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status UsageKeys(grpc::ServerContext*, const ipb::UsageKeysRequest*,
                         ipb::UsageKeysResponse* response) override {
    return net::Guarded("Storage.UsageKeys", [&]() -> grpc::Status {
      absl::StatusOr<std::vector<std::string>> keys = node_.UsageKeys();
      if (!keys.ok()) return net::ToGrpc(keys.status());
      for (std::string& k : *keys) response->add_key_ids(std::move(k));
      return grpc::Status::OK;
    });
  }

  grpc::Status Status(grpc::ServerContext*, const ipb::StatusRequest*,
                      ipb::StorageStatus* response) override {
    return net::Guarded("Storage.Status", [&]() -> grpc::Status {
      const StorageNodeStatus s = node_.Status();
      response->set_node(node_.options().node);
      response->set_partition(node_.options().partition);
      response->set_role(s.role == ReplicaRole::kPrimary ? "primary" : "secondary");
      response->set_epoch(s.epoch);
      response->set_last_sequence(s.last_sequence);
      response->set_tweets_estimate(s.tweets_estimate);
      response->set_single_replica_writes(s.single_replica_writes);
      response->set_peer_in_sync(s.peer_in_sync);
      response->set_installing(s.installing);
      response->set_copies_sent(s.copies_sent);
      response->set_tweets_copied(s.tweets_copied);
      response->set_first_sequence(s.first_sequence);
      return grpc::Status::OK;
    });
  }

 private:
  StorageNode& node_;
};

class GrpcStoragePeer final : public StoragePeer {
 public:
  GrpcStoragePeer(const std::string& address, std::chrono::milliseconds timeout)
      : stub_(Storage::NewStub(net::Connect(address))), timeout_(timeout) {}

  absl::StatusOr<uint64_t> Replicate(uint64_t epoch, const std::string& primary,
                                     std::span<const ReplicatedChange> changes,
                                     uint64_t synced_through) override {
    ipb::ReplicateRequest request;
    request.set_epoch(epoch);
    request.set_primary(primary);
    request.set_synced_through(synced_through);
    for (const ReplicatedChange& c : changes) ToProto(c, request.add_changes());
    ipb::ReplicateResponse response;
    grpc::ClientContext context;
    context.set_deadline(net::Deadline(timeout_));
    return Answer(stub_->Replicate(&context, request, &response), response);
  }

  absl::StatusOr<uint64_t> Install(uint64_t epoch, const std::string& primary,
                                   const InstallChunk& chunk) override {
    ipb::InstallRequest request;
    request.set_epoch(epoch);
    request.set_primary(primary);
    request.set_sequence(chunk.sequence);
    request.set_begin(chunk.begin);
    for (const StoredTweet& t : chunk.tweets) ToProto(t, request.add_tweets());
    for (const StoredRequest& r : chunk.requests) {
      ToProto(ReplicatedChange{Change{0, ChangeKind::kRequest, 0, 0}, std::nullopt, r, {}},
              request.add_requests());
    }
    for (const StoredUsage& b : chunk.usage) {
      ipb::UsageBucket* out = request.add_usage();
      out->set_key(b.key);
      out->set_value(b.value);
    }
    if (chunk.finish.has_value()) ToProto(*chunk.finish, request.mutable_finish());
    ipb::ReplicateResponse response;
    grpc::ClientContext context;
    context.set_deadline(net::Deadline(timeout_ * 10));  // a chunk is a large write
    return Answer(stub_->Install(&context, request, &response), response);
  }

 private:
  // Only a refusal (FailedPrecondition) or an interrupted copy (Aborted) keeps
  // its code; every other failure is "unreachable".
  static absl::StatusOr<uint64_t> Answer(const grpc::Status& s,
                                         const ipb::ReplicateResponse& response) {
    if (s.ok()) return response.last_sequence();
    if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        s.error_code() == grpc::StatusCode::ABORTED) {
      return net::FromGrpc(s);
    }
    return absl::UnavailableError(StrCat("secondary: ", s.error_message()));
  }

  std::unique_ptr<Storage::Stub> stub_;
  const std::chrono::milliseconds timeout_;
};

class GrpcChangeSource final : public ChangeSource {
 public:
  GrpcChangeSource(std::vector<std::string> replicas, std::string reader, ChangeBodies bodies)
      : reader_(std::move(reader)), bodies_(bodies) {
    for (const std::string& r : replicas) stubs_.push_back(Storage::NewStub(net::Connect(r)));
  }

  absl::StatusOr<std::vector<ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                            absl::Duration wait,
                                                            uint64_t keeps) override {
    absl::Status last = absl::UnavailableError("no replica");
    absl::Status trimmed;
    const size_t first = current_.load(std::memory_order_relaxed);
    for (size_t attempt = 0; attempt < stubs_.size(); ++attempt) {
      const size_t i = (first + attempt) % stubs_.size();
      ipb::ReadChangesRequest request;
      request.set_after(after);
      request.set_max(static_cast<uint32_t>(max));
      request.set_wait_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(wait)));
      request.set_reader(reader_);
      request.set_reader_keeps(keeps);
      request.set_omit_tweets(bodies_ == ChangeBodies::kOmit);
      ipb::ReadChangesResponse response;
      grpc::ClientContext context;
      context.set_deadline(net::Deadline(
          std::chrono::milliseconds(absl::ToInt64Milliseconds(wait)) + std::chrono::seconds(5)));
      grpc::Status s = stubs_[i]->ReadChanges(&context, request, &response);
      if (s.ok()) {
        current_ = i;
        std::vector<ReplicatedChange> out;
        out.reserve(response.changes_size());
        for (const ipb::Change& c : response.changes()) {
          absl::StatusOr<ReplicatedChange> change = FromProto(c);
          if (!change.ok()) return change.status();
          out.push_back(*std::move(change));
        }
        return out;
      }
      // A trimmed log here may still reach back far enough on the other
      // replica (one that received a full copy starts its log at the copy).
      if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        trimmed = net::FromGrpc(s);
      } else {
        last = net::FromGrpc(s);
      }
    }
    return trimmed.ok() ? last : trimmed;
  }

  absl::StatusOr<uint64_t> SnapshotIds(
      const std::function<absl::Status(std::span<const TweetId>)>& ids) override {
    absl::Status last = absl::UnavailableError("no replica");
    const size_t first = current_.load(std::memory_order_relaxed);
    for (size_t attempt = 0; attempt < stubs_.size(); ++attempt) {
      const size_t i = (first + attempt) % stubs_.size();
      ipb::SnapshotIdsRequest request;
      request.set_reader(reader_);
      grpc::ClientContext context;
      context.set_deadline(net::Deadline(std::chrono::hours(1)));
      std::unique_ptr<grpc::ClientReader<ipb::SnapshotIdsChunk>> stream =
          stubs_[i]->SnapshotIds(&context, request);
      ipb::SnapshotIdsChunk chunk;
      uint64_t sequence = 0;
      bool done = false, any = false;
      absl::Status visited;
      while (visited.ok() && stream->Read(&chunk)) {
        any = true;
        sequence = chunk.sequence();
        std::vector<TweetId> batch(chunk.ids().begin(), chunk.ids().end());
        visited = ids(batch);
        done = chunk.done();
      }
      if (!visited.ok()) {
        context.TryCancel();
        (void)stream->Finish();
        return visited;
      }
      grpc::Status s = stream->Finish();
      if (s.ok() && done) {
        current_ = i;
        return sequence;
      }
      last = s.ok() ? absl::UnavailableError("the snapshot ended early") : net::FromGrpc(s);
      // Ids of a cut-off snapshot were visited: the caller starts over, since
      // another replica's snapshot may be of another moment.
      if (any) return last;
    }
    return last;
  }

 private:
  const std::string reader_;
  const ChangeBodies bodies_;
  std::vector<std::unique_ptr<Storage::Stub>> stubs_;
  std::atomic<size_t> current_{0};  // the replica that answered last
};

}  // namespace

std::unique_ptr<grpc::Service> MakeStorageService(StorageNode& node) {
  return std::make_unique<StorageService>(node);
}

std::unique_ptr<StoragePeer> MakeStoragePeer(const std::string& address,
                                             std::chrono::milliseconds timeout) {
  return std::make_unique<GrpcStoragePeer>(address, timeout);
}

std::unique_ptr<ChangeSource> MakeChangeSource(std::vector<std::string> replicas,
                                               std::string reader, ChangeBodies bodies) {
  return std::make_unique<GrpcChangeSource>(std::move(replicas), std::move(reader), bodies);
}

}  // namespace tweetsearch::storage
