#include "aggregator/grpc_service.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "aggregator/reflection.h"
#include "aggregator/tweet_json.h"
#include "common/strings.h"
#include "proto/tweetsearch.grpc.pb.h"

namespace tweetsearch::aggregator {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// The key from the request field, else the "x-api-key" metadata.
std::string KeyOf(const grpc::ServerContext* context, const std::string& field) {
  if (!field.empty()) return field;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("x-api-key");
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// The client's address from gRPC's peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000").
std::string PeerIp(const grpc::ServerContext* context) {
  std::string peer = context->peer();
  const size_t colon = peer.find(':');
  if (colon == std::string::npos) return peer;
  peer = peer.substr(colon + 1);
  if (!peer.empty() && peer[0] == '[') return peer.substr(1, peer.find(']') - 1);
  return peer.substr(0, peer.rfind(':'));
}

// Quota headers travel as initial metadata (lower-case names, as gRPC wants).
void SendHeaders(grpc::ServerContext* context, const CallContext& call) {
  for (const auto& [name, value] : call.headers) {
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    context->AddInitialMetadata(lower, value);
  }
}

void ToProto(const storage::StoredTweet& t, uint32_t likes, double score, v1::SearchResult* out) {
  out->set_tweet_id(StrCat(t.id));
  out->set_user_id(t.user_id);
  out->set_user_name(t.user_name);
  out->set_text(t.text);
  out->set_created_at(FormatRfc3339(t.created_at_ms));
  out->set_likes(likes);
  out->set_score(score);
}

class Service final : public v1::TweetSearch::Service {
 public:
  Service(FrontDoor& door, Metrics& metrics, usage::UsageRecorder* usage)
      : door_(door), metrics_(metrics), usage_(usage) {}

  grpc::Status Search(grpc::ServerContext* context, const v1::SearchRequest* request,
                      v1::SearchResponse* response) override {
    return Timed("search", context, [&](CallContext* call) {
      SearchRequest search;
      search.api_dev_key = KeyOf(context, request->api_dev_key());
      search.search_terms = request->search_terms();
      search.maximum_results_to_return = request->maximum_results_to_return();
      if (request->sort() < 0 || request->sort() > 2) {
        return absl::InvalidArgumentError("sort must be 0, 1 or 2");
      }
      search.sort = static_cast<query::SortMode>(request->sort());
      search.page_token = request->page_token();
      search.allow_partial = request->allow_partial();
      search.exact_total = request->exact_total();
      if (search.search_terms.empty())
        return absl::InvalidArgumentError("search_terms is required");
      absl::StatusOr<SearchResponse> result = door_.Search(search, call);
      if (!result.ok()) return result.status();
      for (const SearchHit& h : result->hits)
        ToProto(*h.tweet, h.hit.likes, h.hit.score, response->add_results());
      response->set_next_page_token(result->next_page_token);
      response->set_took_ms(result->took_ms);
      response->set_total_hits(result->total_hits);
      response->set_total_is_exact(result->total_is_exact);
      response->set_partial(result->partial());
      for (uint32_t p : result->missing_partitions) response->add_missing_partitions(p);
      return absl::OkStatus();
    });
  }

  grpc::Status Counts(grpc::ServerContext* context, const v1::CountsRequest* request,
                      v1::CountsResponse* response) override {
    return Timed("counts", context, [&](CallContext* call) {
      CountsRequest counts;
      counts.api_dev_key = KeyOf(context, request->api_dev_key());
      counts.search_terms = request->search_terms();
      if (counts.search_terms.empty()) {
        return absl::InvalidArgumentError("search_terms is required");
      }
      if (!request->granularity().empty()) {
        absl::StatusOr<Granularity> g = ParseGranularity(request->granularity());
        if (!g.ok()) return g.status();
        counts.granularity = *g;
      }
      for (auto [text, field] : {std::pair{&request->since(), &counts.since_ms},
                                 std::pair{&request->until(), &counts.until_ms}}) {
        if (text->empty()) continue;
        absl::StatusOr<int64_t> t = ParseRfc3339(*text);
        if (!t.ok()) return absl::InvalidArgumentError("since and until must be RFC 3339");
        *field = *t;
      }
      counts.allow_partial = request->allow_partial();
      absl::StatusOr<CountsResponse> result = door_.Counts(counts, call);
      if (!result.ok()) return result.status();
      for (uint32_t i = 0; i < result->buckets.count; ++i) {
        v1::CountBucket* bucket = response->add_counts();
        bucket->set_start(FormatRfc3339(result->buckets.start_of(i)));
        bucket->set_end(FormatRfc3339(result->buckets.start_of(i + 1)));
        bucket->set_tweet_count(result->counts[i]);
      }
      response->set_total_tweet_count(result->total);
      response->set_granularity(std::string(GranularityName(counts.granularity)));
      response->set_took_ms(result->took_ms);
      response->set_partial(!result->missing_partitions.empty());
      for (uint32_t p : result->missing_partitions) response->add_missing_partitions(p);
      return absl::OkStatus();
    });
  }

  grpc::Status Stream(grpc::ServerContext* context, const v1::StreamRequest* request,
                      grpc::ServerWriter<v1::StreamEvent>* writer) override {
    // Declared before the stream, whose wake callback uses them.
    absl::Mutex mu;
    bool woken = false;
    std::unique_ptr<LiveStream> live;
    grpc::Status opened = Timed("stream", context, [&](CallContext* call) {
      if (request->search_terms().empty()) {
        return absl::InvalidArgumentError("search_terms is required");
      }
      absl::StatusOr<std::unique_ptr<LiveStream>> s =
          door_.OpenStream(StreamRequest{KeyOf(context, request->api_dev_key()),
                                         request->search_terms(), request->resume_after()},
                           call);
      if (!s.ok()) return s.status();
      live = *std::move(s);
      return absl::OkStatus();
    });
    if (!opened.ok()) return opened;
    live->feed().OnReady([&] {
      absl::MutexLock lock(&mu);
      woken = true;
    });
    v1::StreamEvent ready;
    ready.set_kind(v1::StreamEvent::KIND_READY);
    ready.set_id(live->feed().start_id());
    if (!writer->Write(ready)) return grpc::Status::CANCELLED;
    if (const std::optional<std::string>& gap = live->feed().gap_after()) {
      v1::StreamEvent e;
      e.set_kind(v1::StreamEvent::KIND_GAP);
      e.set_id(*gap);
      if (!writer->Write(e)) return grpc::Status::CANCELLED;
    }
    return ToGrpc(Pump(context, *live, writer, mu, woken));
  }

  grpc::Status Ingest(grpc::ServerContext* context, const v1::IngestRequest* request,
                      v1::IngestResponse* response) override {
    return Timed("ingest", context, [&](CallContext* call) {
      call->idempotency_key = request->idempotency_key();
      std::vector<absl::StatusOr<NewTweet>> lines;
      lines.reserve(request->tweets_size());
      for (const v1::IngestTweet& in : request->tweets()) {
        NewTweet t;
        if (in.id() != 0) t.id = in.id();
        t.user_id = in.user_id();
        t.user_name = in.user_name();
        t.text = in.text();
        t.lang = in.lang();
        t.likes = in.likes();
        if (!in.created_at().empty()) {
          absl::StatusOr<int64_t> created = ParseRfc3339(in.created_at());
          if (!created.ok()) {
            lines.push_back(created.status());
            continue;
          }
          t.created_at_ms = *created;
        }
        lines.push_back(std::move(t));
      }
      absl::StatusOr<IngestResponse> result =
          door_.Ingest(KeyOf(context, request->api_dev_key()), std::move(lines), call);
      if (!result.ok()) return result.status();
      for (const IngestOutcome& o : result->outcomes) {
        v1::IngestResult* r = response->add_results();
        r->set_accepted(o.status.ok());
        if (o.status.ok()) {
          r->set_tweet_id(StrCat(o.id));
        } else {
          r->set_error(std::string(o.status.message()));
        }
      }
      response->set_accepted(result->accepted);
      response->set_rejected(result->rejected);
      return absl::OkStatus();
    });
  }

  grpc::Status GetTweet(grpc::ServerContext* context, const v1::GetTweetRequest* request,
                        v1::SearchResult* response) override {
    return Timed("get", context, [&](CallContext* call) {
      absl::StatusOr<storage::StoredTweet> t =
          door_.Get(KeyOf(context, request->api_dev_key()), request->id(), call);
      if (!t.ok()) return t.status();
      ToProto(*t, t->likes, 0, response);
      return absl::OkStatus();
    });
  }

  grpc::Status DeleteTweet(grpc::ServerContext* context, const v1::DeleteTweetRequest* request,
                           v1::DeleteTweetResponse*) override {
    return Timed("delete", context, [&](CallContext* call) {
      call->idempotency_key = request->idempotency_key();
      return door_.Delete(KeyOf(context, request->api_dev_key()), request->id(), call);
    });
  }

  grpc::Status Likes(grpc::ServerContext* context, const v1::LikesRequest* request,
                     v1::LikesResponse* response) override {
    return Timed("likes", context, [&](CallContext* call) {
      if (request->change_case() == v1::LikesRequest::CHANGE_NOT_SET) {
        return absl::InvalidArgumentError("give set or add");
      }
      const bool add = request->change_case() == v1::LikesRequest::kAdd;
      call->idempotency_key = request->idempotency_key();
      absl::StatusOr<uint32_t> likes =
          door_.Likes(KeyOf(context, request->api_dev_key()), request->id(),
                      add ? request->add() : int64_t{request->set()}, add, call);
      if (!likes.ok()) return likes.status();
      response->set_likes(*likes);
      return absl::OkStatus();
    });
  }

 private:
  // Runs `body` with the one catch-all of an RPC, sends the quota metadata, and records the
  // call in the metrics and the usage series.
  template <typename Body>
  grpc::Status Timed(std::string_view route, grpc::ServerContext* context, Body body) {
    const auto start = std::chrono::steady_clock::now();
    CallContext call;
    call.client_ip = PeerIp(context);
    absl::Status status;
    try {
      status = body(&call);
    } catch (const std::exception& e) {
      status = absl::InternalError(StrCat("internal error: ", e.what()));
    }
    SendHeaders(context, call);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    const int http_status = HttpStatusFor(status);
    metrics_.RecordRequest("grpc", route, http_status,
                           std::chrono::duration<double>(elapsed).count());
    RecordUsage(usage_, call, route == "search", http_status, elapsed);
    return ToGrpc(status);
  }

  // Writes a stream's events until the client cancels or the stream ends (its reason).
  static absl::Status Pump(grpc::ServerContext* context, LiveStream& live,
                           grpc::ServerWriter<v1::StreamEvent>* writer, absl::Mutex& mu,
                           bool& woken) {
    for (;;) {
      if (context->IsCancelled()) return absl::CancelledError("the client went away");
      absl::StatusOr<StreamFeed::Batch> batch = live.feed().Next(256);
      if (!batch.ok()) return batch.status();
      if (!batch->events.empty()) {
        if (absl::Status s = live.Charge(batch->events.size()); !s.ok()) return s;
        for (const FeedEvent& e : batch->events) {
          v1::StreamEvent out;
          out.set_id(e.id);
          if (e.kind == StreamEvent::Kind::kTweet) {
            out.set_kind(v1::StreamEvent::KIND_TWEET);
            ToProto(*e.tweet, e.tweet->likes, 0, out.mutable_tweet());
          } else {
            out.set_kind(v1::StreamEvent::KIND_DELETE);
            out.set_tweet_id(StrCat(e.tweet->id));
          }
          if (!writer->Write(out)) return absl::CancelledError("the client went away");
        }
      }
      if (!batch->events.empty() || batch->more) continue;
      // Nothing waiting: sleep until the hub wakes us, looking for a cancelled call each second.
      absl::MutexLock lock(&mu);
      auto ready = [&woken]() { return woken; };
      mu.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      woken = false;
    }
  }

  FrontDoor& door_;
  Metrics& metrics_;
  usage::UsageRecorder* const usage_;
};

class Server final : public GrpcServer {
 public:
  Server(std::unique_ptr<Service> service, std::unique_ptr<grpc::Service> reflection,
         std::unique_ptr<grpc::Server> server, uint16_t port)
      : service_(std::move(service)),
        reflection_(std::move(reflection)),
        server_(std::move(server)),
        port_(port) {}
  ~Server() override { Shutdown(std::chrono::milliseconds(5000)); }

  uint16_t port() const override { return port_; }
  void Shutdown(std::chrono::milliseconds grace) override {
    if (stopped_) return;
    stopped_ = true;
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_->Wait();
  }

 private:
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Service> reflection_;
  std::unique_ptr<grpc::Server> server_;  // after the services: it goes first
  uint16_t port_;
  bool stopped_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const std::string& address,
                                                              uint16_t port, FrontDoor& door,
                                                              Metrics& metrics,
                                                              usage::UsageRecorder* usage) {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto service = std::make_unique<Service>(door, metrics, usage);
  grpc::ServerBuilder builder;
  int bound = 0;
  const std::string host =
      address.find(':') != std::string::npos ? StrCat("[", address, "]") : address;
  builder.AddListeningPort(StrCat(host, ":", port), grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service.get());
  // v1alpha comes from gRPC's plugin; v1, which clients ask first, from us.
  std::unique_ptr<grpc::Service> reflection =
      MakeReflectionV1Service({v1::TweetSearch::service_full_name(), kReflectionV1Service,
                               "grpc.reflection.v1alpha.ServerReflection"});
  builder.RegisterService(reflection.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    return absl::UnavailableError(StrCat("cannot listen for gRPC on ", host, ":", port));
  }
  return std::unique_ptr<GrpcServer>(new Server(std::move(service), std::move(reflection),
                                                std::move(server), static_cast<uint16_t>(bound)));
}

}  // namespace tweetsearch::aggregator
