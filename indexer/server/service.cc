#include "indexer/server/service.h"

#include <algorithm>

#include "net/grpc.h"
#include "proto/cluster.grpc.pb.h"
#include "storage/convert.h"

namespace tweetsearch::indexer {
namespace {

using internal::v1::Index;
namespace ipb = internal::v1;

constexpr uint32_t kMaxWaitMs = 10'000;

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

// SearchMany takes newest-first searches only: short and bounded (they stop at the limit),
// they run on gRPC's thread that read the call, which saves a thread hand-off per call. Ranked
// searches (tens of milliseconds) would hold gRPC's few threads; they come one to a call, by
// Search, on gRPC's synchronous server threads, as do statistics (docs/cluster.md).
class IndexService final : public Index::WithCallbackMethod_SearchMany<Index::Service> {
 public:
  explicit IndexService(IndexNode& node) : node_(node) {}

  grpc::Status Search(grpc::ServerContext*, const ipb::PartitionSearchRequest* request,
                      ipb::PartitionSearchResponse* response) override {
    return SearchNow(*request, response);
  }

  grpc::ServerUnaryReactor* SearchMany(grpc::CallbackServerContext* ctx,
                                       const ipb::PartitionSearchBatch* request,
                                       ipb::PartitionSearchAnswers* response) override {
    for (const ipb::PartitionSearchRequest& r : request->searches()) {
      ipb::PartitionSearchAnswer* answer = response->add_answers();
      const grpc::Status s =
          r.sort() == 0 ? SearchNow(r, answer->mutable_response())
                        : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                       "SearchMany takes newest-first searches (sort 0) only");
      answer->set_code(s.error_code());
      if (!s.ok()) {
        answer->set_message(s.error_message());
        answer->clear_response();
      }
    }
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::Status SearchNow(const ipb::PartitionSearchRequest& request,
                         ipb::PartitionSearchResponse* response) {
    return net::Guarded("Index.Search", [&]() -> grpc::Status {
      if (request.sort() < 0 || request.sort() > 2) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sort must be 0, 1 or 2");
      }
      query::CollectionStats stats;
      absl::StatusOr<PartitionResult> result =
          node_.Search(request.search_terms(), ToOptions(request, &stats));
      if (!result.ok()) return net::ToGrpc(result.status());
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
      response->set_generation(node_.Generation());
      return grpc::Status::OK;
    });
  }

  grpc::Status Counts(grpc::ServerContext*, const ipb::PartitionCountsRequest* request,
                      ipb::PartitionCountsResponse* response) override {
    return net::Guarded("Index.Counts", [&]() -> grpc::Status {
      const query::TimeBuckets buckets{request->start_ms(), request->width_ms(), request->count()};
      absl::StatusOr<std::vector<uint64_t>> counts = node_.Counts(request->search_terms(), buckets);
      if (!counts.ok()) return net::ToGrpc(counts.status());
      response->mutable_counts()->Assign(counts->begin(), counts->end());
      return grpc::Status::OK;
    });
  }

  grpc::Status Stats(grpc::ServerContext*, const ipb::StatsRequest* request,
                     ipb::CollectionStats* response) override {
    return net::Guarded("Index.Stats", [&]() -> grpc::Status {
      const uint64_t generation = node_.Generation();
      absl::StatusOr<query::CollectionStats> stats = node_.Stats(request->search_terms());
      if (!stats.ok()) return net::ToGrpc(stats.status());
      ToProto(*stats, response);
      response->set_generation(generation);
      return grpc::Status::OK;
    });
  }

  grpc::Status WaitApplied(grpc::ServerContext*, const ipb::WaitAppliedRequest* request,
                           ipb::WaitAppliedResponse* response) override {
    return net::Guarded("Index.WaitApplied", [&]() -> grpc::Status {
      response->set_applied(
          node_.WaitApplied(request->storage_partition(), request->sequence(),
                            absl::Milliseconds(std::min(request->timeout_ms(), kMaxWaitMs))));
      return grpc::Status::OK;
    });
  }

  grpc::Status Status(grpc::ServerContext*, const ipb::StatusRequest*,
                      ipb::IndexStatus* response) override {
    return net::Guarded("Index.Status", [&]() -> grpc::Status {
      const IndexNodeStatus s = node_.Status();
      response->set_node(node_.options().node);
      response->set_partition(node_.options().partition);
      response->set_rebuild_through(s.rebuild_through);
      response->set_state(std::string(IndexStateName(s.state)));
      response->set_documents(s.documents);
      response->set_memory_bytes(s.memory_bytes);
      response->set_mapped_bytes(s.mapped_bytes);
      response->set_damaged_segments(s.damaged_segments);
      for (uint64_t a : s.applied) response->add_applied(a);
      return grpc::Status::OK;
    });
  }

  grpc::Status BeginRebuild(grpc::ServerContext*, const ipb::BeginRebuildRequest* request,
                            ipb::Empty*) override {
    return net::Guarded("Index.BeginRebuild", [&]() -> grpc::Status {
      return net::ToGrpc(node_.BeginRebuild(std::vector<uint64_t>(
          request->from_sequences().begin(), request->from_sequences().end())));
    });
  }

  grpc::Status AddTweets(grpc::ServerContext*, const ipb::AddTweetsRequest* request,
                         ipb::AddTweetsResponse* response) override {
    return net::Guarded("Index.AddTweets", [&]() -> grpc::Status {
      std::vector<storage::StoredTweet> tweets;
      tweets.reserve(request->tweets_size());
      for (const v1::Tweet& t : request->tweets()) tweets.push_back(storage::FromProto(t));
      if (absl::Status s = node_.AddTweets(tweets, request->through(), request->checkpoint());
          !s.ok())
        return net::ToGrpc(s);
      response->set_documents(node_.Status().documents);
      return grpc::Status::OK;
    });
  }

  grpc::Status FinishRebuild(grpc::ServerContext*, const ipb::FinishRebuildRequest*,
                             ipb::Empty*) override {
    return net::Guarded("Index.FinishRebuild",
                        [&]() -> grpc::Status { return net::ToGrpc(node_.FinishRebuild()); });
  }

 private:
  IndexNode& node_;
};

}  // namespace

void ToProto(const query::CollectionStats& s, internal::v1::CollectionStats* out) {
  out->set_num_docs(s.num_docs);
  out->set_total_length(static_cast<double>(s.total_length));
  for (const auto& [term, df] : s.doc_freq) {
    internal::v1::TermStat* t = out->add_terms();
    t->set_term(term);
    t->set_doc_freq(df);
  }
}

query::CollectionStats FromProto(const internal::v1::CollectionStats& s) {
  query::CollectionStats out;
  for (const internal::v1::TermStat& t : s.terms()) out.doc_freq[t.term()] = t.doc_freq();
  query::CollectionStats total;
  out.num_docs = s.num_docs();
  out.total_length = static_cast<uint64_t>(s.total_length());
  query::AddStats(out, &total);  // sets avg_length the one way it is computed
  return total;
}

std::unique_ptr<grpc::Service> MakeIndexService(IndexNode& node) {
  return std::make_unique<IndexService>(node);
}

}  // namespace tweetsearch::indexer
