// Streams over real sockets: Server-Sent Events (GET /v1/stream) and the gRPC Stream call of a
// one-process server, with resume by Last-Event-ID and the stream quotas of the rules file.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "aggregator/api_keys.h"
#include "aggregator/daemon.h"
#include "common/file_util.h"
#include "net/http_client.h"
#include "net/sse_client.h"
#include "proto/tweetsearch.grpc.pb.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::aggregator {
namespace {

using net::HttpClient;
using net::HttpReply;
using net::SseClient;
using net::SseEvent;
using nlohmann::json;

class StreamHttpTest : public ::testing::Test {
 protected:
  void Start(std::string_view limits = {}) {
    DaemonConfig config;
    config.data_dir = dir_.path() + "/data";
    config.http.port = 0;
    config.grpc_port = 0;
    config.sample = 20;
    config.demo_key_scopes = {"search", "ingest"};
    config.engine.store.block_cache_bytes = 8 << 20;
    if (!limits.empty()) {
      config.limits_file = dir_.path() + "/limits.yaml";
      ASSERT_TRUE(WriteFileAtomically(config.limits_file, limits).ok());
    }
    auto daemon = Daemon::Start(config);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    port_ = std::to_string(daemon_->http_port());
    client_ = std::make_unique<HttpClient>("127.0.0.1", port_);
  }

  std::unique_ptr<SseClient> Open(const std::string& params, std::string_view last_id = {},
                                  HttpReply* refused = nullptr) {
    auto s = SseClient::Open("127.0.0.1", port_, "/v1/stream?" + params, kDemoKey, last_id,
                             std::chrono::seconds(30), refused);
    return s.ok() ? *std::move(s) : nullptr;
  }
  void Ingest(const std::string& lines) {
    auto r = client_->Send("POST", "/v1/tweets", lines, "application/json", kDemoKey);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
  }
  static std::string Line(int id, std::string_view text) {
    return "{\"id\":\"" + std::to_string(id) + "\",\"text\":\"" + std::string(text) + "\"}\n";
  }
  static SseEvent Next(SseClient& s) {
    absl::StatusOr<SseEvent> e = s.Next();
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : SseEvent{};
  }

  testing::TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  std::string port_;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(StreamHttpTest, ServerSentEventsPushNewMatchesDeletesAndResumeByLastEventId) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto stream = Open("q=wombat%20OR%20%23marsupial");
  ASSERT_NE(stream, nullptr);
  const SseEvent ready = Next(*stream);
  EXPECT_EQ(ready.event, "ready");
  EXPECT_EQ(json::parse(ready.data)["query"], "wombat OR #marsupial");
  EXPECT_FALSE(ready.id.empty());

  ASSERT_NO_FATAL_FAILURE(Ingest(Line(9001, "a wombat at dawn") + Line(9002, "nothing to see") +
                                 Line(9003, "so #marsupial")));
  const SseEvent first = Next(*stream);
  EXPECT_EQ(first.event, "tweet");
  json tweet = json::parse(first.data);
  EXPECT_EQ(tweet["tweet_id"], "9001");
  EXPECT_EQ(tweet["text"], "a wombat at dawn");
  EXPECT_FALSE(tweet.contains("score"));
  const SseEvent second = Next(*stream);
  EXPECT_EQ(json::parse(second.data)["tweet_id"], "9003");
  EXPECT_LT(std::stoull(first.id), std::stoull(second.id));
  EXPECT_LT(std::stoull(ready.id), std::stoull(first.id));

  // The metrics count the open stream, its query and its events.
  const std::string metrics = client_->Send("GET", "/metrics")->body;
  EXPECT_NE(metrics.find("tweetsearch_streams_open 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tweetsearch_stream_standing_queries 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("tweetsearch_stream_events_total 2\n"), std::string::npos);

  // Gone for a while: a delete and a new match happen; the reconnection resumes after the last
  // event received, with nothing lost or repeated.
  stream.reset();
  ASSERT_EQ(client_->Send("DELETE", "/v1/tweets/9001", {}, "", kDemoKey)->status, 200);
  ASSERT_NO_FATAL_FAILURE(Ingest(Line(9004, "wombat again")));
  auto resumed = Open("q=wombat%20OR%20%23marsupial", second.id);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(json::parse(Next(*resumed).data)["resumed"], true);
  const SseEvent deleted = Next(*resumed);
  EXPECT_EQ(deleted.event, "delete");
  EXPECT_EQ(json::parse(deleted.data)["tweet_id"], "9001");
  const SseEvent again = Next(*resumed);
  EXPECT_EQ(again.event, "tweet");
  EXPECT_EQ(json::parse(again.data)["tweet_id"], "9004");
  // The same through the parameter (a first connection cannot set the header in a browser).
  auto by_param = Open("q=wombat&last_event_id=" + first.id);
  ASSERT_NE(by_param, nullptr);
  Next(*by_param);  // ready
  EXPECT_EQ(Next(*by_param).event, "delete");
  EXPECT_EQ(json::parse(Next(*by_param).data)["tweet_id"], "9004");

  // Refusals are plain JSON errors.
  for (auto [params, last_id, status] :
       {std::tuple{"", "", 400}, std::tuple{"q=wombat&colour=red", "", 400},
        std::tuple{"q=wombat", "not-an-id", 400}, std::tuple{"q=wombat", "99999999999", 400},
        std::tuple{"q=(((", "", 400}}) {
    HttpReply refused;
    EXPECT_EQ(Open(params, last_id, &refused), nullptr) << params;
    EXPECT_EQ(refused.status, status) << params << ": " << refused.body;
    EXPECT_TRUE(json::parse(refused.body, nullptr, false).contains("error")) << refused.body;
  }
  auto keyless = SseClient::Open("127.0.0.1", port_, "/v1/stream?q=wombat", "", "");
  EXPECT_FALSE(keyless.ok());
}

TEST_F(StreamHttpTest, TheGrpcStreamCarriesTheSameEventsAndResumeTokens) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TweetSearch::NewStub(channel);
  v1::StreamRequest request;
  request.set_api_dev_key(std::string(kDemoKey));
  request.set_search_terms("quokka");
  grpc::ClientContext context;
  auto reader = stub->Stream(&context, request);
  v1::StreamEvent ready;
  ASSERT_TRUE(reader->Read(&ready));
  EXPECT_EQ(ready.kind(), v1::StreamEvent::KIND_READY);
  ASSERT_NO_FATAL_FAILURE(Ingest(Line(7001, "quokka selfie") + Line(7002, "no match")));
  ASSERT_NO_FATAL_FAILURE(Ingest(Line(7003, "quokka smile")));
  v1::StreamEvent e;
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.kind(), v1::StreamEvent::KIND_TWEET);
  EXPECT_EQ(e.tweet().tweet_id(), "7001");
  EXPECT_EQ(e.tweet().text(), "quokka selfie");
  const std::string first_id = e.id();
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.tweet().tweet_id(), "7003");
  context.TryCancel();
  (void)reader->Finish();

  // Resumed after the first event: the second again, then live.
  request.set_resume_after(first_id);
  grpc::ClientContext again_context;
  auto again = stub->Stream(&again_context, request);
  ASSERT_TRUE(again->Read(&e));
  EXPECT_EQ(e.kind(), v1::StreamEvent::KIND_READY);
  ASSERT_TRUE(again->Read(&e));
  EXPECT_EQ(e.tweet().tweet_id(), "7003");
  ASSERT_NO_FATAL_FAILURE(Ingest(Line(7004, "last quokka")));
  ASSERT_TRUE(again->Read(&e));
  EXPECT_EQ(e.tweet().tweet_id(), "7004");
  again_context.TryCancel();
  (void)again->Finish();

  request.set_resume_after("x");
  grpc::ClientContext bad_context;
  auto bad = stub->Stream(&bad_context, request);
  EXPECT_FALSE(bad->Read(&e));
  EXPECT_EQ(bad->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

constexpr std::string_view kStreamLimits = R"(
tiers:
  demo:
    search: [{name: demo_search, limit: 1000, window: 1h}]
    ingest: [{name: demo_ingest, limit: 1000, window: 1h}]
    stream: [{name: demo_stream_events, limit: 3, window: 1h, algorithm: fixed_window}]
    max_streams: 2
)";

TEST_F(StreamHttpTest, AKeyHoldsItsMaxStreamsAndAStreamEndsWhenItsEventQuotaRunsOut) {
  ASSERT_NO_FATAL_FAILURE(Start(kStreamLimits));
  auto a = Open("q=numbat");
  auto b = Open("q=numbat");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  HttpReply refused;
  EXPECT_EQ(Open("q=numbat", {}, &refused), nullptr);
  EXPECT_EQ(refused.status, 429);
  EXPECT_NE(refused.body.find("max_streams"), std::string::npos) << refused.body;
  // Closing one frees its slot once the server sees the connection go.
  a.reset();
  std::unique_ptr<SseClient> c;
  for (int i = 0; i < 2000 && c == nullptr; ++i) {
    c = Open("q=kangaroo", {}, &refused);  // matches nothing below: no event to charge
    if (c == nullptr) {
      ASSERT_EQ(refused.status, 429) << refused.body;
    }
  }
  ASSERT_NE(c, nullptr);

  EXPECT_EQ(Next(*b).event, "ready");
  for (int id = 1; id <= 3; ++id) {
    ASSERT_NO_FATAL_FAILURE(Ingest(Line(8000 + id, "numbat")));
    EXPECT_EQ(json::parse(Next(*b).data)["tweet_id"], std::to_string(8000 + id));
  }
  ASSERT_NO_FATAL_FAILURE(Ingest(Line(8004, "numbat")));
  const SseEvent end = Next(*b);
  EXPECT_EQ(end.event, "end");
  json error = json::parse(end.data)["error"];
  EXPECT_EQ(error["code"], "resource_exhausted");
  EXPECT_NE(error["message"].get<std::string>().find("demo_stream_events"), std::string::npos);
  EXPECT_FALSE(b->Next().ok());  // and the server closed it
}

}  // namespace
}  // namespace tweetsearch::aggregator
