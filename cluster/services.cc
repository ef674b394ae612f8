#include "cluster/services.h"

#include "absl/synchronization/mutex.h"
#include "cluster/convert.h"
#include "common/strings.h"

namespace tweetsearch::cluster {
namespace {

using internal::v1::Builder;
using internal::v1::Index;
using internal::v1::Storage;
namespace ipb = internal::v1;

constexpr size_t kDefaultReadMax = 4096;
constexpr uint32_t kMaxWaitMs = 10'000;
constexpr size_t kSnapshotChunk = 65536;  // ids per SnapshotIds message

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

class StorageService final : public Storage::Service {
 public:
  explicit StorageService(storage::StorageNode& node) : node_(node) {}

  grpc::Status Write(grpc::ServerContext*, const ipb::WriteRequest* request,
                     ipb::WriteResponse* response) override {
    storage::WriteOp op;
    op.retry = request->retry();
    op.puts.reserve(request->puts_size());
    for (const v1::Tweet& t : request->puts()) op.puts.push_back(FromProto(t));
    if (request->delete_id() != 0) op.delete_id = request->delete_id();
    if (request->likes_id() != 0) {
      op.likes =
          storage::LikesChange{request->likes_id(), request->likes_value(), request->likes_add()};
    }
    absl::StatusOr<storage::WriteResult> result = node_.Write(std::move(op));
    if (!result.ok()) return ToGrpc(result.status());
    for (const absl::Status& s : result->outcomes) {
      ipb::Outcome* o = response->add_outcomes();
      o->set_code(static_cast<int>(s.code()));
      o->set_message(std::string(s.message()));
    }
    response->set_likes(result->likes);
    response->set_last_sequence(result->last_sequence);
    return grpc::Status::OK;
  }

  grpc::Status Replicate(grpc::ServerContext*, const ipb::ReplicateRequest* request,
                         ipb::ReplicateResponse* response) override {
    std::vector<storage::ReplicatedChange> changes;
    changes.reserve(request->changes_size());
    for (const ipb::Change& c : request->changes()) {
      absl::StatusOr<storage::ReplicatedChange> change = FromProto(c);
      if (!change.ok()) return ToGrpc(change.status());
      changes.push_back(*std::move(change));
    }
    absl::StatusOr<uint64_t> last =
        node_.Replicate(request->epoch(), request->primary(), changes, request->synced_through());
    if (!last.ok()) return ToGrpc(last.status());
    response->set_last_sequence(*last);
    return grpc::Status::OK;
  }

  grpc::Status Install(grpc::ServerContext*, const ipb::InstallRequest* request,
                       ipb::ReplicateResponse* response) override {
    storage::InstallChunk chunk;
    chunk.sequence = request->sequence();
    chunk.begin = request->begin();
    chunk.tweets.reserve(request->tweets_size());
    for (const v1::Tweet& t : request->tweets()) chunk.tweets.push_back(FromProto(t));
    if (request->has_finish()) {
      absl::StatusOr<storage::ReplicatedChange> finish = FromProto(request->finish());
      if (!finish.ok()) return ToGrpc(finish.status());
      chunk.finish = *std::move(finish);
    }
    absl::StatusOr<uint64_t> last = node_.Install(request->epoch(), request->primary(), chunk);
    if (!last.ok()) return ToGrpc(last.status());
    response->set_last_sequence(*last);
    return grpc::Status::OK;
  }

  grpc::Status SnapshotIds(grpc::ServerContext* context, const ipb::SnapshotIdsRequest* request,
                           grpc::ServerWriter<ipb::SnapshotIdsChunk>* writer) override {
    absl::StatusOr<std::unique_ptr<storage::StoreSnapshot>> snapshot =
        node_.SnapshotFor(request->reader());
    if (!snapshot.ok()) return ToGrpc(snapshot.status());
    ipb::SnapshotIdsChunk chunk;
    chunk.set_sequence((*snapshot)->last().change.sequence);
    for (;;) {
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
      absl::StatusOr<std::vector<storage::StoredTweet>> next = (*snapshot)->Next(kSnapshotChunk);
      if (!next.ok()) return ToGrpc(next.status());
      chunk.clear_ids();
      for (const storage::StoredTweet& t : *next) chunk.add_ids(t.id);
      chunk.set_done(next->size() < kSnapshotChunk);
      if (!writer->Write(chunk)) return grpc::Status::CANCELLED;
      if (chunk.done()) return grpc::Status::OK;
    }
  }

  grpc::Status ReadChanges(grpc::ServerContext*, const ipb::ReadChangesRequest* request,
                           ipb::ReadChangesResponse* response) override {
    const size_t max =
        request->max() == 0 ? kDefaultReadMax : std::min<size_t>(request->max(), 65536);
    absl::StatusOr<std::vector<storage::ReplicatedChange>> changes = node_.ReadChanges(
        request->after(), max, absl::Milliseconds(std::min(request->wait_ms(), kMaxWaitMs)),
        request->reader(), request->reader_keeps(),
        request->omit_tweets() ? storage::ChangeBodies::kOmit : storage::ChangeBodies::kInclude);
    if (!changes.ok()) return ToGrpc(changes.status());
    for (const storage::ReplicatedChange& c : *changes) ToProto(c, response->add_changes());
    response->set_last_sequence(node_.LastSequence());
    return grpc::Status::OK;
  }

  grpc::Status MultiGet(grpc::ServerContext*, const ipb::MultiGetRequest* request,
                        ipb::MultiGetResponse* response) override {
    std::vector<TweetId> ids(request->ids().begin(), request->ids().end());
    for (absl::StatusOr<storage::StoredTweet>& t : node_.MultiGet(ids)) {
      if (t.ok()) {
        ToProto(*t, response->add_tweets());
      } else if (!absl::IsNotFound(t.status())) {
        return ToGrpc(t.status());
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext*, const ipb::StatusRequest*,
                      ipb::StorageStatus* response) override {
    const storage::StorageNodeStatus s = node_.Status();
    response->set_node(node_.options().node);
    response->set_partition(node_.options().partition);
    response->set_role(s.role == storage::ReplicaRole::kPrimary ? "primary" : "secondary");
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
  }

 private:
  storage::StorageNode& node_;
};

query::SearchOptions ToOptions(const ipb::PartitionSearchRequest& r,
                               query::CollectionStats* stats) {
  query::SearchOptions o;
  o.sort = static_cast<query::SortMode>(r.sort());
  o.limit = r.limit();
  if (r.has_after()) o.after = query::SortKey{r.after_primary(), r.after_id()};
  o.watermark = r.watermark() == 0 ? kMaxTweetId : r.watermark();
  o.now_ms = r.now_ms();
  o.exact_total = r.exact_total();
  if (r.has_stats()) {
    *stats = FromProto(r.stats());
    o.stats = stats;
  }
  return o;
}

class IndexService final : public Index::Service {
 public:
  explicit IndexService(indexer::IndexNode& node) : node_(node) {}

  grpc::Status Search(grpc::ServerContext*, const ipb::PartitionSearchRequest* request,
                      ipb::PartitionSearchResponse* response) override {
    if (request->sort() < 0 || request->sort() > 2) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sort must be 0, 1 or 2");
    }
    query::CollectionStats stats;
    absl::StatusOr<indexer::PartitionResult> result =
        node_.Search(request->search_terms(), ToOptions(*request, &stats));
    if (!result.ok()) return ToGrpc(result.status());
    for (const query::Hit& h : result->result.hits) {
      ipb::PartitionHit* out = response->add_hits();
      out->set_id(h.id);
      out->set_score(h.score);
      out->set_likes(h.likes);
      out->set_created_at_ms(h.created_at_ms);
      out->set_primary(h.key.primary);
    }
    response->set_total_hits(result->result.total_hits);
    response->set_total_is_exact(result->result.total_is_exact);
    response->set_max_id(result->max_id);
    return grpc::Status::OK;
  }

  grpc::Status Stats(grpc::ServerContext*, const ipb::StatsRequest* request,
                     ipb::CollectionStats* response) override {
    absl::StatusOr<query::CollectionStats> stats = node_.Stats(request->search_terms());
    if (!stats.ok()) return ToGrpc(stats.status());
    ToProto(*stats, response);
    return grpc::Status::OK;
  }

  grpc::Status WaitApplied(grpc::ServerContext*, const ipb::WaitAppliedRequest* request,
                           ipb::WaitAppliedResponse* response) override {
    response->set_applied(
        node_.WaitApplied(request->storage_partition(), request->sequence(),
                          absl::Milliseconds(std::min(request->timeout_ms(), kMaxWaitMs))));
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext*, const ipb::StatusRequest*,
                      ipb::IndexStatus* response) override {
    const indexer::IndexNodeStatus s = node_.Status();
    response->set_node(node_.options().node);
    response->set_partition(node_.options().partition);
    response->set_rebuild_through(s.rebuild_through);
    response->set_state(std::string(indexer::IndexStateName(s.state)));
    response->set_documents(s.documents);
    response->set_memory_bytes(s.memory_bytes);
    response->set_mapped_bytes(s.mapped_bytes);
    response->set_damaged_segments(s.damaged_segments);
    for (uint64_t a : s.applied) response->add_applied(a);
    return grpc::Status::OK;
  }

  grpc::Status BeginRebuild(grpc::ServerContext*, const ipb::BeginRebuildRequest* request,
                            ipb::Empty*) override {
    return ToGrpc(node_.BeginRebuild(
        std::vector<uint64_t>(request->from_sequences().begin(), request->from_sequences().end())));
  }

  grpc::Status AddTweets(grpc::ServerContext*, const ipb::AddTweetsRequest* request,
                         ipb::AddTweetsResponse* response) override {
    std::vector<storage::StoredTweet> tweets;
    tweets.reserve(request->tweets_size());
    for (const v1::Tweet& t : request->tweets()) tweets.push_back(FromProto(t));
    if (absl::Status s = node_.AddTweets(tweets, request->through(), request->checkpoint());
        !s.ok())
      return ToGrpc(s);
    response->set_documents(node_.Status().documents);
    return grpc::Status::OK;
  }

  grpc::Status FinishRebuild(grpc::ServerContext*, const ipb::FinishRebuildRequest*,
                             ipb::Empty*) override {
    return ToGrpc(node_.FinishRebuild());
  }

 private:
  indexer::IndexNode& node_;
};

class BuilderService final : public Builder::Service {
 public:
  explicit BuilderService(indexer::BuilderNode& node) : node_(node) {}

  grpc::Status PartitionIds(grpc::ServerContext*, const ipb::PartitionIdsRequest* request,
                            ipb::PartitionIdsResponse* response) override {
    const size_t max = request->max() == 0 ? 65536 : std::min<size_t>(request->max(), 1 << 20);
    absl::StatusOr<indexer::IdPage> page =
        node_.PartitionIds(request->index_partition(), request->after(), max);
    if (!page.ok()) return ToGrpc(page.status());
    response->mutable_ids()->Add(page->ids.begin(), page->ids.end());
    response->set_done(page->done);
    return grpc::Status::OK;
  }

  grpc::Status PartitionCount(grpc::ServerContext*, const ipb::PartitionCountRequest* request,
                              ipb::PartitionCountResponse* response) override {
    absl::StatusOr<uint64_t> count = node_.PartitionCount(request->index_partition());
    if (!count.ok()) return ToGrpc(count.status());
    response->set_ids(*count);
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext*, const ipb::StatusRequest*,
                      ipb::BuilderStatus* response) override {
    const indexer::BuilderNodeStatus s = node_.Status();
    response->set_node(node_.options().node);
    for (uint64_t a : s.applied) response->add_applied(a);
    response->set_ids(s.ids_estimate);
    response->set_state(std::string(indexer::BuilderStateName(s.state)));
    response->set_resyncs(s.resyncs);
    return grpc::Status::OK;
  }

 private:
  indexer::BuilderNode& node_;
};

class GrpcStoragePeer final : public storage::StoragePeer {
 public:
  GrpcStoragePeer(const std::string& address, std::chrono::milliseconds timeout)
      : stub_(Storage::NewStub(Connect(address))), timeout_(timeout) {}

  absl::StatusOr<uint64_t> Replicate(uint64_t epoch, const std::string& primary,
                                     std::span<const storage::ReplicatedChange> changes,
                                     uint64_t synced_through) override {
    ipb::ReplicateRequest request;
    request.set_epoch(epoch);
    request.set_primary(primary);
    request.set_synced_through(synced_through);
    for (const storage::ReplicatedChange& c : changes) ToProto(c, request.add_changes());
    ipb::ReplicateResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline(timeout_));
    return Answer(stub_->Replicate(&context, request, &response), response);
  }

  absl::StatusOr<uint64_t> Install(uint64_t epoch, const std::string& primary,
                                   const storage::InstallChunk& chunk) override {
    ipb::InstallRequest request;
    request.set_epoch(epoch);
    request.set_primary(primary);
    request.set_sequence(chunk.sequence);
    request.set_begin(chunk.begin);
    for (const storage::StoredTweet& t : chunk.tweets) ToProto(t, request.add_tweets());
    if (chunk.finish.has_value()) ToProto(*chunk.finish, request.mutable_finish());
    ipb::ReplicateResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline(timeout_ * 10));  // a chunk is a large write
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
      return FromGrpc(s);
    }
    return absl::UnavailableError(StrCat("secondary: ", s.error_message()));
  }

  std::unique_ptr<Storage::Stub> stub_;
  const std::chrono::milliseconds timeout_;
};

class GrpcChangeSource final : public storage::ChangeSource {
 public:
  GrpcChangeSource(std::vector<std::string> replicas, std::string reader,
                   storage::ChangeBodies bodies)
      : reader_(std::move(reader)), bodies_(bodies) {
    for (const std::string& r : replicas) stubs_.push_back(Storage::NewStub(Connect(r)));
  }

  absl::StatusOr<std::vector<storage::ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                                     absl::Duration wait,
                                                                     uint64_t keeps) override {
    absl::Status last = absl::UnavailableError("no replica");
    absl::Status trimmed;
    for (size_t attempt = 0; attempt < stubs_.size(); ++attempt) {
      const size_t i = (current_ + attempt) % stubs_.size();
      ipb::ReadChangesRequest request;
      request.set_after(after);
      request.set_max(static_cast<uint32_t>(max));
      request.set_wait_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(wait)));
      request.set_reader(reader_);
      request.set_reader_keeps(keeps);
      request.set_omit_tweets(bodies_ == storage::ChangeBodies::kOmit);
      ipb::ReadChangesResponse response;
      grpc::ClientContext context;
      context.set_deadline(Deadline(std::chrono::milliseconds(absl::ToInt64Milliseconds(wait)) +
                                    std::chrono::seconds(5)));
      grpc::Status s = stubs_[i]->ReadChanges(&context, request, &response);
      if (s.ok()) {
        current_ = i;
        std::vector<storage::ReplicatedChange> out;
        out.reserve(response.changes_size());
        for (const ipb::Change& c : response.changes()) {
          absl::StatusOr<storage::ReplicatedChange> change = FromProto(c);
          if (!change.ok()) return change.status();
          out.push_back(*std::move(change));
        }
        return out;
      }
      // A trimmed log here may still reach back far enough on the other
      // replica (one that received a full copy starts its log at the copy).
      if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        trimmed = FromGrpc(s);
      } else {
        last = FromGrpc(s);
      }
    }
    return trimmed.ok() ? last : trimmed;
  }

  absl::StatusOr<uint64_t> SnapshotIds(
      const std::function<absl::Status(std::span<const TweetId>)>& ids) override {
    absl::Status last = absl::UnavailableError("no replica");
    for (size_t attempt = 0; attempt < stubs_.size(); ++attempt) {
      const size_t i = (current_ + attempt) % stubs_.size();
      ipb::SnapshotIdsRequest request;
      request.set_reader(reader_);
      grpc::ClientContext context;
      context.set_deadline(Deadline(std::chrono::hours(1)));
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
      last = s.ok() ? absl::UnavailableError("the snapshot ended early") : FromGrpc(s);
      // Ids of a cut-off snapshot were visited: the caller starts over, since
      // another replica's snapshot may be of another moment.
      if (any) return last;
    }
    return last;
  }

 private:
  const std::string reader_;
  const storage::ChangeBodies bodies_;
  std::vector<std::unique_ptr<Storage::Stub>> stubs_;
  size_t current_ = 0;  // Tail() calls from one thread
};

}  // namespace

std::unique_ptr<grpc::ClientContext> CallContext(std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(Deadline(timeout));
  return context;
}

std::shared_ptr<grpc::Channel> Connect(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<grpc::Service> MakeStorageService(storage::StorageNode& node) {
  return std::make_unique<StorageService>(node);
}

std::unique_ptr<grpc::Service> MakeIndexService(indexer::IndexNode& node) {
  return std::make_unique<IndexService>(node);
}

std::unique_ptr<grpc::Service> MakeBuilderService(indexer::BuilderNode& node) {
  return std::make_unique<BuilderService>(node);
}

std::unique_ptr<storage::StoragePeer> MakeStoragePeer(const std::string& address,
                                                      std::chrono::milliseconds timeout) {
  return std::make_unique<GrpcStoragePeer>(address, timeout);
}

std::unique_ptr<storage::ChangeSource> MakeChangeSource(std::vector<std::string> replicas,
                                                        std::string reader,
                                                        storage::ChangeBodies bodies) {
  return std::make_unique<GrpcChangeSource>(std::move(replicas), std::move(reader), bodies);
}

absl::StatusOr<RunningServer> StartServer(const std::string& address,
                                          const std::vector<grpc::Service*>& services) {
  RunningServer out;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &out.port);
  builder.SetMaxReceiveMessageSize(256 << 20);
  // One process per address: a second one started by mistake must fail, not share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* s : services) builder.RegisterService(s);
  out.server = builder.BuildAndStart();
  if (out.server == nullptr || out.port == 0) {
    return absl::UnavailableError(StrCat("cannot listen on ", address));
  }
  return out;
}

}  // namespace tweetsearch::cluster
