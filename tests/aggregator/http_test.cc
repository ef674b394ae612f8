// The whole one-process service over real loopback sockets: HTTP/JSON through Beast and the
// same calls through gRPC.
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/time/clock.h"
#include "aggregator/api_keys.h"
#include "aggregator/daemon.h"
#include "aggregator/tweet_json.h"
#include "common/file_util.h"
#include "net/http_client.h"
#include "proto/cluster.pb.h"
#include "proto/reflection_v1.pb.h"
#include "proto/tweetsearch.grpc.pb.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::aggregator {
namespace {

using net::HttpClient;
using net::HttpReply;
using net::UrlEncode;

using nlohmann::json;

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonConfig config;
    config.data_dir = dir_.path();
    config.http.port = 0;
    config.http.max_body_bytes = 64 * 1024;
    config.http.io_threads = 2;
    config.http.worker_threads = 2;
    config.grpc_port = 0;
    config.sample = sample_;
    config.demo_key_scopes = {"search", "ingest"};  // these tests write with it
    config.engine.store.block_cache_bytes = 8 << 20;
    auto daemon = Daemon::Start(config);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    client_ = std::make_unique<HttpClient>("127.0.0.1", std::to_string(daemon_->http_port()));
  }

  HttpReply Call(std::string_view method, const std::string& target, std::string_view body = {},
                 std::string_view key = {}) {
    auto reply = client_->Send(method, target, body, "application/json", key);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : HttpReply{};
  }

  json Search(const std::string& params, int expect_status = 200) {
    HttpReply r = Call("GET", "/v1/search?api_dev_key=" + std::string(kDemoKey) + "&" + params);
    EXPECT_EQ(r.status, expect_status) << r.body;
    return json::parse(r.body, nullptr, false);
  }

  static std::string ErrorCode(const HttpReply& r) {
    json body = json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.contains("error")) return "(not an error body) " + r.body;
    return body["error"]["code"].get<std::string>();
  }

  uint32_t sample_ = 500;  // synthetic tweets loaded at start
  testing::TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<HttpClient> client_;
};

// With more matches than the 10,000 counted exactly by default.
class HttpTotalsTest : public HttpTest {
 protected:
  HttpTotalsTest() { sample_ = 12'000; }
};

TEST_F(HttpTotalsTest, TotalsAreExactUpToTenThousandTheSameForEverySortAndPage) {
  // About 95% of the sample is English: more than 10,000 matches.
  json exact = Search("q=lang:en&exact_total=true");
  ASSERT_TRUE(exact["total_is_exact"].get<bool>());
  const uint64_t n = exact["total_hits"];
  ASSERT_GT(n, 10'000u);
  ASSERT_LE(n, 12'000u);
  // A rarer language: fewer than 10,000, exact without asking.
  const json rare = Search("q=lang:es");
  ASSERT_TRUE(rare["total_is_exact"].get<bool>());
  const uint64_t rare_n = rare["total_hits"];
  ASSERT_GT(rare_n, 20u);
  for (const char* sort : {"newest", "best_match", "most_liked"}) {
    const std::string s = std::string("&sort=") + sort;
    json capped = Search("q=lang:en" + s);
    EXPECT_FALSE(capped["total_is_exact"].get<bool>()) << sort;
    EXPECT_EQ(capped["total_hits"], 10'000) << sort;
    EXPECT_EQ(Search("q=lang:en&exact_total=1" + s)["total_hits"], n) << sort;
    json page1 = Search("q=lang:es&maximum_results_to_return=7" + s);
    EXPECT_EQ(page1["total_hits"], rare_n) << sort;
    json page2 = Search("q=lang:es&maximum_results_to_return=7" + s +
                        "&page_token=" + page1["next_page_token"].get<std::string>());
    EXPECT_EQ(page2["total_hits"], rare_n) << sort;
    EXPECT_TRUE(page2["total_is_exact"].get<bool>()) << sort;
  }
  json bad = Search("q=lang:en&exact_total=maybe", 400);
  EXPECT_EQ(bad["error"]["code"], "invalid_argument");

  // gRPC: the same rule and the same counts.
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TweetSearch::NewStub(channel);
  for (bool ask_exact : {false, true}) {
    grpc::ClientContext context;
    v1::SearchRequest request;
    request.set_api_dev_key(std::string(kDemoKey));
    request.set_search_terms("lang:en");
    request.set_sort(v1::SORT_MOST_LIKED);
    request.set_exact_total(ask_exact);
    v1::SearchResponse response;
    ASSERT_TRUE(stub->Search(&context, request, &response).ok());
    EXPECT_EQ(response.total_is_exact(), ask_exact);
    EXPECT_EQ(response.total_hits(), ask_exact ? n : 10'000u);
  }
}

TEST_F(HttpTest, IngestSearchGetLikesDelete) {
  EXPECT_EQ(Call("GET", "/healthz").status, 200);
  EXPECT_EQ(Call("GET", "/readyz").status, 200);

  const std::string body =
      "{\"id\":\"9007199254740993\",\"text\":\"zebra crossing at noon\",\"user_name\":\"ana\","
      "\"created_at\":\"2026-02-03T04:05:06Z\",\"likes\":4}\n"
      "{not json}\n"
      "\n"
      "{\"text\":\"zebra stripes\",\"user\":{\"screen_name\":\"bo\",\"id_str\":\"77\"}}\n"
      "{\"id\":\"9007199254740993\",\"text\":\"zebra again\"}\n"
      "{\"user_name\":\"no text\"}\n";
  HttpReply ingest = Call("POST", "/v1/tweets?api_dev_key=" + std::string(kDemoKey), body);
  ASSERT_EQ(ingest.status, 200) << ingest.body;
  json result = json::parse(ingest.body);
  EXPECT_EQ(result["accepted"], 2);
  EXPECT_EQ(result["rejected"], 3);
  ASSERT_EQ(result["results"].size(), 5u);
  EXPECT_EQ(result["results"][0]["tweet_id"], "9007199254740993");  // above 2^53: a string
  EXPECT_EQ(result["results"][1]["line"], 2);
  EXPECT_EQ(result["results"][1]["code"], "invalid_argument");
  EXPECT_EQ(result["results"][2]["line"], 4);  // the blank line 3 is skipped, not counted
  EXPECT_EQ(result["results"][3]["error"], "duplicate id 9007199254740993");
  EXPECT_EQ(result["results"][4]["error"], "missing text");
  const std::string generated = result["results"][2]["tweet_id"];

  // Read-your-writes: searchable as soon as the ingest call returned.
  json found = Search("search_terms=zebra&sort=newest");
  ASSERT_EQ(found["results"].size(), 2u) << found;
  EXPECT_EQ(found["results"][0]["tweet_id"], generated);
  EXPECT_EQ(found["results"][0]["user_name"], "bo");
  EXPECT_EQ(found["results"][0]["user_id"], "77");
  EXPECT_EQ(found["results"][1]["created_at"], "2026-02-03T04:05:06Z");
  EXPECT_EQ(found["total_hits"], 2);
  EXPECT_TRUE(found["next_page_token"].is_null());
  EXPECT_TRUE(found.contains("took_ms"));

  HttpReply got = Call("GET", "/v1/tweets/9007199254740993", {}, kDemoKey);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(json::parse(got.body)["text"], "zebra crossing at noon");

  // Likes drive sort 2 at once.
  json liked = Search("q=zebra&sort=most_liked");
  EXPECT_EQ(liked["results"][0]["tweet_id"], "9007199254740993");
  HttpReply likes = Call("POST", "/v1/tweets/" + generated + "/likes", R"({"set": 50})", kDemoKey);
  ASSERT_EQ(likes.status, 200) << likes.body;
  EXPECT_EQ(json::parse(likes.body)["likes"], 50);
  EXPECT_EQ(Call("POST", "/v1/tweets/" + generated + "/likes?add=-5", {}, kDemoKey).status, 200);
  liked = Search("q=zebra&sort=2");
  EXPECT_EQ(liked["results"][0]["tweet_id"], generated);
  EXPECT_EQ(liked["results"][0]["likes"], 45);
  EXPECT_EQ(Call("POST", "/v1/tweets/" + generated + "/likes", R"({"set": 1, "add": 1})", kDemoKey)
                .status,
            400);

  ASSERT_EQ(Call("DELETE", "/v1/tweets/" + generated, {}, kDemoKey).status, 200);
  EXPECT_EQ(Call("GET", "/v1/tweets/" + generated, {}, kDemoKey).status, 404);
  EXPECT_EQ(Call("DELETE", "/v1/tweets/" + generated, {}, kDemoKey).status, 404);
  EXPECT_EQ(Search("q=zebra")["results"].size(), 1u);
}

TEST_F(HttpTest, HighlightsCutTheTextAtTheMatchedWords) {
  const std::string body =
      "{\"text\":\"Quokkas &amp; QUOKKA pics: https://www.quokka.org/a #quokka, not wombats\","
      "\"user_name\":\"quokkafan\"}\n";
  ASSERT_EQ(Call("POST", "/v1/tweets?api_dev_key=" + std::string(kDemoKey), body).status, 200);
  json found =
      Search("q=" + UrlEncode("(quokka OR quokkas OR quokka.org) \"not\" -wombat from:quokkafan") +
             "&highlight=true");
  ASSERT_EQ(found["results"].size(), 1u) << found;
  // Matched: the words and the URL (by its host); not "QUOKKA"'s hashtag form, the excluded
  // word or the author filter. Plain and matched pieces alternate and join to the text.
  EXPECT_EQ(found["results"][0]["highlighted_text"],
            json::parse(R"(["", "Quokkas", " &amp; ", "QUOKKA", " pics: ",
                            "https://www.quokka.org/a", " #quokka, ", "not", " wombats"])"));
  std::string joined;
  for (const json& piece : found["results"][0]["highlighted_text"])
    joined += piece.get<std::string>();
  EXPECT_EQ(joined, found["results"][0]["text"]);
  // Without the parameter the field is absent; a bad value is a 400.
  EXPECT_FALSE(Search("q=quokka")["results"][0].contains("highlighted_text"));
  Search("q=quokka&highlight=maybe", 400);
}

TEST_F(HttpTest, PagesThroughHttp) {
  // The sample corpus has many tweets with its commonest word; walk them 7 at a time.
  json first = Search("q=the&maximum_results_to_return=7&sort=best_match");
  ASSERT_EQ(first["results"].size(), 7u);
  std::set<std::string> seen;
  json page = first;
  int pages = 0;
  while (true) {
    for (const json& r : page["results"]) EXPECT_TRUE(seen.insert(r["tweet_id"]).second);
    if (page["next_page_token"].is_null() || ++pages == 5) break;
    page = Search("q=the&maximum_results_to_return=7&sort=best_match&page_token=" +
                  page["next_page_token"].get<std::string>());
  }
  EXPECT_EQ(seen.size(), 35u);
  std::string token = first["next_page_token"];
  token[5] = token[5] == 'a' ? 'b' : 'a';
  json bad = Search("q=the&maximum_results_to_return=7&sort=best_match&page_token=" + token, 400);
  EXPECT_EQ(bad["error"]["code"], "invalid_argument");
}

TEST_F(HttpTest, BadRequestsGetClearErrorsAndTheServerStaysUp) {
  EXPECT_EQ(ErrorCode(Call("GET", "/v1/search?search_terms=x")), "unauthenticated");
  EXPECT_EQ(Call("GET", "/v1/search?search_terms=x&api_dev_key=nope-nope-nope").status, 401);
  EXPECT_EQ(Call("GET", "/v1/admin/keys", {}, kDemoKey).status, 403);
  EXPECT_EQ(Search("q=%28a", 400)["error"]["message"], "unbalanced '(' at byte 0");
  EXPECT_EQ(Search("q=a&sort=sideways", 400)["error"]["code"], "invalid_argument");
  EXPECT_EQ(Search("q=a&maximum_results_to_return=101", 400)["error"]["code"], "invalid_argument");
  EXPECT_EQ(Search("q=a&maximum_results_to_return=0", 400)["error"]["code"], "invalid_argument");
  EXPECT_EQ(Search("", 400)["error"]["message"], "search_terms is required");
  EXPECT_EQ(Search("q=%ZZ", 400)["error"]["code"], "invalid_argument");
  EXPECT_EQ(Search("q=%ff%fe", 400)["error"]["code"], "invalid_argument");  // not UTF-8
  EXPECT_EQ(Search("q=" + std::string(3000, 'a'), 400)["error"]["code"], "invalid_argument");
  // A misspelt parameter is refused, not ignored: the answer names it and the right ones.
  EXPECT_EQ(Search("q=a&maximum_results_to_retrun=5", 400)["error"]["message"],
            "unknown parameter 'maximum_results_to_retrun'; this endpoint takes search_terms, q, "
            "maximum_results_to_return, limit, sort, page_token, highlight, allow_partial, "
            "exact_total, api_dev_key");
  EXPECT_EQ(Call("GET", "/v1/tweets/12?verbose=1", {}, kDemoKey).body,
            "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"unknown parameter "
            "'verbose'; this endpoint takes api_dev_key\"}}");
  EXPECT_EQ(Call("GET", "/v1/nothing").status, 404);
  EXPECT_EQ(Call("PUT", "/v1/search?q=a").status, 405);
  EXPECT_EQ(Call("GET", "/v1/tweets/12abc", {}, kDemoKey).status, 400);
  EXPECT_EQ(Call("POST", "/v1/tweets", "", kDemoKey).status, 400);

  // Over the body limit: 413, and the connection is closed (the client reconnects).
  HttpReply big = Call("POST", "/v1/tweets", std::string(100 * 1024, 'x'), kDemoKey);
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(ErrorCode(big), "resource_exhausted");

  // Garbage instead of HTTP on a raw socket: 400, then the server goes on serving.
  {
    namespace net = boost::asio;
    net::io_context ioc;
    net::ip::tcp::socket socket(ioc);
    socket.connect({net::ip::make_address("127.0.0.1"), daemon_->http_port()});
    net::write(socket, net::buffer(std::string("NOT HTTP AT ALL\r\n\r\n")));
    std::string reply(4096, '\0');
    boost::system::error_code ec;
    const size_t n = socket.read_some(net::buffer(reply), ec);
    EXPECT_TRUE(std::string_view(reply.data(), n).starts_with("HTTP/1.1 400"))
        << reply.substr(0, n);
  }
  EXPECT_EQ(Search("q=the")["results"].size(), 20u);

  HttpReply metrics = Call("GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find(
                "tweetsearch_requests_total{transport=\"http\",route=\"search\",code=\"400\"}"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("tweetsearch_request_duration_seconds_bucket{transport=\"http\","
                              "route=\"search\",le=\"+Inf\"}"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("tweetsearch_index_documents 500"), std::string::npos);
}

TEST_F(HttpTest, CountsOverTimeThroughHttpAndGrpc) {
  std::string body;
  int id = 5000;
  for (const char* created :
       {"2026-03-01T10:05:00Z", "2026-03-01T10:20:00Z", "2026-03-01T11:59:59.999Z",
        "2026-03-02T00:00:00Z", "2026-03-01T12:30:00Z", "2026-02-28T23:59:59Z"}) {
    body += "{\"id\":\"" + std::to_string(++id) +
            "\",\"text\":\"numbat spotted\",\"created_at\":\"" + created + "\"}\n";
  }
  body +=
      "{\"id\":\"6000\",\"text\":\"numbat far away\",\"created_at\":\"2026-03-01T10:30:00Z\"}\n";
  body += "{\"id\":\"6001\",\"text\":\"quoll spotted\",\"created_at\":\"2026-03-01T10:30:00Z\"}\n";
  const std::string key = "api_dev_key=" + std::string(kDemoKey);
  ASSERT_EQ(Call("POST", "/v1/tweets?" + key, body).status, 200);
  ASSERT_EQ(Call("DELETE", "/v1/tweets/5005?" + key).status, 200);  // 12:30 is deleted

  auto counts = [&](const std::string& params, int expect_status = 200) {
    HttpReply r = Call("GET", "/v1/counts?" + key + "&" + params);
    EXPECT_EQ(r.status, expect_status) << params << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  };
  json hours =
      counts("q=numbat&granularity=hour&since=2026-03-01T10:00:00Z&until=2026-03-01T13:00:00Z");
  ASSERT_EQ(hours["counts"].size(), 3u) << hours;
  EXPECT_EQ(hours["counts"][0], (json{{"start", "2026-03-01T10:00:00Z"},
                                      {"end", "2026-03-01T11:00:00Z"},
                                      {"tweet_count", 3}}));
  EXPECT_EQ(hours["counts"][1]["tweet_count"], 1);  // 11:59:59.999
  EXPECT_EQ(hours["counts"][2]["tweet_count"], 0);  // 12:30 was deleted
  EXPECT_EQ(hours["total_tweet_count"], 4);
  EXPECT_EQ(hours["granularity"], "hour");
  EXPECT_FALSE(hours["partial"].get<bool>());
  // The query language applies: an exclusion, and since: inside the range.
  EXPECT_EQ(counts("q=numbat%20-far&granularity=hour&since=2026-03-01T10:00:00Z&until="
                   "2026-03-01T11:00:00Z")["total_tweet_count"],
            2);
  // Unaligned ends widen to whole buckets: 10:30 to 11:10 is 10:00 to 12:00.
  json widened =
      counts("q=numbat&granularity=hour&since=2026-03-01T10:30:00Z&until=2026-03-01T11:10:00Z");
  EXPECT_EQ(widened["since"], "2026-03-01T10:00:00Z");
  EXPECT_EQ(widened["until"], "2026-03-01T12:00:00Z");
  EXPECT_EQ(widened["total_tweet_count"], 4);
  json days =
      counts("q=numbat&granularity=day&since=2026-02-28T00:00:00Z&until=2026-03-03T00:00:00Z");
  ASSERT_EQ(days["counts"].size(), 3u);
  std::vector<uint64_t> per_day;
  for (const json& b : days["counts"]) per_day.push_back(b["tweet_count"]);
  EXPECT_EQ(per_day, (std::vector<uint64_t>{1, 4, 1}));
  EXPECT_EQ(counts("q=numbat&granularity=minute&since=2026-03-01T10:00:00Z&until="
                   "2026-03-01T10:30:00Z")["counts"]
                .size(),
            30u);
  // Milliseconds count: a range inside one second still widens to its minute.
  EXPECT_EQ(counts("q=numbat&granularity=minute&since=2026-03-01T10:05:00.500Z&until="
                   "2026-03-01T10:05:00.600Z")["total_tweet_count"],
            1);
  // Times back from now: the last two days in days (widened: 2 or 3 buckets, the last one
  // holding now).
  const json recent = counts("q=numbat&granularity=day&since=-2d&until=now");
  ASSERT_TRUE(recent["counts"].is_array()) << recent;
  EXPECT_GE(recent["counts"].size(), 2u);
  EXPECT_LE(recent["counts"].size(), 3u);
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  EXPECT_GT(*ParseRfc3339(recent["until"].get<std::string>()), now_ms - 60'000);
  EXPECT_LE(*ParseRfc3339(recent["until"].get<std::string>()), now_ms + 86'400'000);
  // By default: hours, the last 7 days up to now (widened: 168 or 169 buckets).
  const size_t default_buckets = counts("q=numbat")["counts"].size();
  EXPECT_TRUE(default_buckets == 168 || default_buckets == 169) << default_buckets;

  // Bad parameters get clear errors.
  for (const auto& [params, says] : std::vector<std::pair<std::string, std::string>>{
           {"q=numbat&granularity=week", "granularity must be minute, hour or day"},
           {"q=numbat&since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z",
            "since must be before until"},
           {"q=numbat&granularity=minute&since=2026-01-01T00:00:00Z&until=2026-03-01T00:00:00Z",
            "at most 20160"},
           {"q=numbat&since=yesterday", "'since' must be RFC 3339"},
           {"q=numbat&until=999999999999", "'until' must be RFC 3339"},
           {"q=numbat&since=-99999999d", "since must lie from 1970 to 9999"},
           {"granularity=hour", "search_terms is required"},
           {"q=(((", "unbalanced '(' at byte 2"},
           {"q=numbat&allow_partial=perhaps", "allow_partial must be true or false"}}) {
    json error = counts(params, 400);
    EXPECT_EQ(error["error"]["code"], "invalid_argument") << params;
    EXPECT_NE(error["error"]["message"].get<std::string>().find(says), std::string::npos)
        << params << ": " << error;
  }
  EXPECT_EQ(Call("GET", "/v1/counts?q=numbat").status, 401);

  // gRPC: the same counts.
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TweetSearch::NewStub(channel);
  grpc::ClientContext context;
  v1::CountsRequest request;
  request.set_api_dev_key(std::string(kDemoKey));
  request.set_search_terms("numbat");
  request.set_since("2026-03-01T10:00:00Z");
  request.set_until("2026-03-01T13:00:00Z");
  v1::CountsResponse response;
  ASSERT_TRUE(stub->Counts(&context, request, &response).ok());
  ASSERT_EQ(response.counts_size(), 3);
  EXPECT_EQ(response.counts(0).start(), "2026-03-01T10:00:00Z");
  EXPECT_EQ(response.counts(0).tweet_count(), 3u);
  EXPECT_EQ(response.total_tweet_count(), 4u);
  EXPECT_EQ(response.granularity(), "hour");
  grpc::ClientContext bad_context;
  request.set_granularity("fortnight");
  EXPECT_EQ(stub->Counts(&bad_context, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(HttpTest, AdminKeysLifecycle) {
  const std::string admin = daemon_->admin_key();
  HttpReply made = Call("POST", "/v1/admin/keys",
                        R"({"owner":"carol","tier":"pro","scopes":["search"]})", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string key = json::parse(made.body)["key"];
  EXPECT_EQ(Call("GET", "/v1/search?q=the&api_dev_key=" + key).status, 200);
  EXPECT_EQ(Call("POST", "/v1/tweets", R"({"text":"x"})", key).status, 403);
  HttpReply list = Call("GET", "/v1/admin/keys", {}, admin);
  EXPECT_NE(list.body.find("carol"), std::string::npos);
  EXPECT_EQ(list.body.find(key), std::string::npos);  // listings never show whole keys
  EXPECT_EQ(Call("DELETE", "/v1/admin/keys/" + key.substr(0, 10), {}, admin).status, 200);
  EXPECT_EQ(Call("GET", "/v1/search?q=the&api_dev_key=" + key).status, 401);
  EXPECT_EQ(Call("POST", "/v1/admin/keys", R"({"owner":"d","scopes":["root"]})", admin).status,
            400);
}

// Key administration retried with an Idempotency-Key: one key made, however often the request
// is sent, and a revocation retried after its answer was lost is answered as done.
TEST_F(HttpTest, AdminKeyWritesRetriedWithAnIdempotencyKeyHappenOnce) {
  const std::string admin = daemon_->admin_key();
  using Headers = std::vector<std::pair<std::string, std::string>>;
  auto send = [&](std::string_view method, std::string_view target, std::string_view body,
                  Headers headers) {
    auto reply = client_->Send(method, target, body, "application/json", admin, headers);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : HttpReply{};
  };
  const std::string dora = R"({"owner":"dora","tier":"pro","scopes":["search"]})";
  HttpReply made = send("POST", "/v1/admin/keys", dora, {{"Idempotency-Key", "make-dora"}});
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.headers.count("idempotent-replayed"), 0u);
  HttpReply again = send("POST", "/v1/admin/keys", dora, {{"Idempotency-Key", "make-dora"}});
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.headers["idempotent-replayed"], "true");
  EXPECT_EQ(again.body, made.body) << "the same key";
  const std::string key = json::parse(made.body)["key"];
  EXPECT_EQ(Call("GET", "/v1/search?q=the&api_dev_key=" + key).status, 200);
  const std::string listed = Call("GET", "/v1/admin/keys", {}, admin).body;
  EXPECT_EQ(listed.find("\"dora\""), listed.rfind("\"dora\"")) << "one key made: " << listed;
  HttpReply other =
      send("POST", "/v1/admin/keys", R"({"owner":"eve","tier":"pro","scopes":["search"]})",
           {{"Idempotency-Key", "make-dora"}});
  EXPECT_EQ(other.status, 400) << other.body;
  EXPECT_EQ(ErrorCode(other), "failed_precondition");
  HttpReply another = send("POST", "/v1/admin/keys", dora, {{"Idempotency-Key", "make-dora-2"}});
  ASSERT_EQ(another.status, 201);
  EXPECT_NE(json::parse(another.body)["key"], key) << "another request, another key";

  // A key chosen by the operator: sent again with its Idempotency-Key it is the first answer;
  // without one, a key that exists is refused as before.
  const std::string chosen = R"({"owner":"fay","scopes":["search"],"key":"fay-key-0123456789"})";
  EXPECT_EQ(send("POST", "/v1/admin/keys", chosen, {{"Idempotency-Key", "make-fay"}}).status, 201);
  HttpReply chosen_again =
      send("POST", "/v1/admin/keys", chosen, {{"Idempotency-Key", "make-fay"}});
  EXPECT_EQ(chosen_again.status, 201) << chosen_again.body;
  EXPECT_EQ(chosen_again.headers["idempotent-replayed"], "true");
  EXPECT_EQ(send("POST", "/v1/admin/keys", chosen, {}).status, 409);

  const std::string revoke = "/v1/admin/keys/" + key.substr(0, 10);
  HttpReply revoked = send("DELETE", revoke, {}, {{"Idempotency-Key", "revoke-dora"}});
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(revoked.headers.count("idempotent-replayed"), 0u);
  HttpReply revoked_again = send("DELETE", revoke, {}, {{"Idempotency-Key", "revoke-dora"}});
  EXPECT_EQ(revoked_again.status, 200) << revoked_again.body;
  EXPECT_EQ(revoked_again.headers["idempotent-replayed"], "true");
  EXPECT_EQ(revoked_again.body, revoked.body);
  EXPECT_EQ(send("DELETE", revoke, {}, {}).status, 404) << "without a key, as before";
  EXPECT_EQ(Call("GET", "/v1/search?q=the&api_dev_key=" + key).status, 401);
  EXPECT_EQ(send("DELETE", "/v1/admin/keys/ts_nokey00", {}, {{"Idempotency-Key", "r-2"}}).status,
            404)
      << "no key by that name was ever made";
  HttpReply bad = send("POST", "/v1/admin/keys", dora, {{"Idempotency-Key", "tab\there"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(ErrorCode(bad), "invalid_argument");
}

TEST_F(HttpTest, GrpcServesTheSameCalls) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TweetSearch::NewStub(channel);
  {
    grpc::ClientContext context;
    context.AddMetadata("x-api-key", std::string(kDemoKey));
    v1::IngestRequest request;
    v1::IngestTweet* t = request.add_tweets();
    t->set_text("grpc okapi sighting");
    t->set_user_name("gina");
    request.add_tweets()->set_text("");
    v1::IngestResponse response;
    ASSERT_TRUE(stub->Ingest(&context, request, &response).ok());
    EXPECT_EQ(response.accepted(), 1u);
    EXPECT_EQ(response.rejected(), 1u);
    EXPECT_EQ(response.results(1).error(), "missing text");
  }
  {
    grpc::ClientContext context;
    v1::SearchRequest request;
    request.set_api_dev_key(std::string(kDemoKey));
    request.set_search_terms("okapi");
    v1::SearchResponse response;
    ASSERT_TRUE(stub->Search(&context, request, &response).ok());
    ASSERT_EQ(response.results_size(), 1);
    EXPECT_EQ(response.results(0).user_name(), "gina");
  }
  {
    grpc::ClientContext context;
    v1::SearchRequest request;
    request.set_search_terms("okapi");
    v1::SearchResponse response;
    EXPECT_EQ(stub->Search(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    v1::SearchRequest request;
    request.set_api_dev_key(std::string(kDemoKey));
    request.set_search_terms("((okapi");
    v1::SearchResponse response;
    EXPECT_EQ(stub->Search(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
}

// Idempotency keys over HTTP and gRPC: a retried write gets the first answer, marked replayed,
// and changes nothing; a key reused for another request, a bad key and two keys are refused.
TEST_F(HttpTest, RetriesWithAnIdempotencyKeyGetTheFirstAnswerAndChangeNothing) {
  auto send = [&](std::string_view target, std::string_view body,
                  std::vector<std::pair<std::string, std::string>> headers) {
    auto reply = client_->Send("POST", target, body, "application/json", kDemoKey, headers);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : HttpReply{};
  };
  using Headers = std::vector<std::pair<std::string, std::string>>;
  const std::string batch = "{\"text\": \"quagga one\"}\n{\"text\": \"quagga two\"}\n";
  HttpReply first = send("/v1/tweets", batch, Headers{{"Idempotency-Key", "batch-1"}});
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.headers.count("idempotent-replayed"), 0u);
  HttpReply again = send("/v1/tweets", batch, Headers{{"Idempotency-Key", "batch-1"}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.headers["idempotent-replayed"], "true");
  EXPECT_EQ(again.body, first.body) << "the same ids, the same report";
  EXPECT_EQ(Search("q=quagga")["total_hits"], 2);
  HttpReply other =
      send("/v1/tweets", "{\"text\": \"quagga three\"}\n", Headers{{"Idempotency-Key", "batch-1"}});
  EXPECT_EQ(other.status, 400);
  EXPECT_EQ(ErrorCode(other), "failed_precondition");

  const std::string id = json::parse(first.body)["results"][0]["tweet_id"];
  const std::string likes = "/v1/tweets/" + id + "/likes";
  HttpReply liked = send(likes, R"({"add": 3})", Headers{{"Idempotency-Key", "like-1"}});
  ASSERT_EQ(liked.status, 200) << liked.body;
  HttpReply liked_again = send(likes, R"({"add": 3})", Headers{{"Idempotency-Key", "like-1"}});
  EXPECT_EQ(liked_again.body, liked.body);
  EXPECT_EQ(liked_again.headers["idempotent-replayed"], "true");
  EXPECT_EQ(json::parse(Call("GET", "/v1/tweets/" + id, {}, kDemoKey).body)["likes"], 3);
  EXPECT_EQ(ErrorCode(send(likes, R"({"add": 4})", Headers{{"Idempotency-Key", "like-1"}})),
            "failed_precondition");

  for (const Headers& bad : {Headers{{"Idempotency-Key", std::string(256, 'k')}},
                             Headers{{"Idempotency-Key", "tab\there"}},
                             Headers{{"Idempotency-Key", "a"}, {"Idempotency-Key", "b"}}}) {
    HttpReply r = send(likes, R"({"add": 1})", bad);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(ErrorCode(r), "invalid_argument");
  }
  EXPECT_EQ(json::parse(Call("GET", "/v1/tweets/" + id, {}, kDemoKey).body)["likes"], 3);

  // gRPC: the same key field on a likes change; the replay is marked in the metadata.
  auto stub = v1::TweetSearch::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(daemon_->grpc_port()), grpc::InsecureChannelCredentials()));
  v1::LikesRequest request;
  request.set_api_dev_key(std::string(kDemoKey));
  request.set_id(std::stoull(id));
  request.set_add(10);
  request.set_idempotency_key("grpc-like-1");
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext context;
    v1::LikesResponse response;
    ASSERT_TRUE(stub->Likes(&context, request, &response).ok());
    EXPECT_EQ(response.likes(), 13u);
    EXPECT_EQ(context.GetServerInitialMetadata().count("idempotent-replayed"),
              attempt == 0 ? 0u : 1u);
  }
  request.set_add(11);
  grpc::ClientContext context;
  v1::LikesResponse response;
  EXPECT_EQ(stub->Likes(&context, request, &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  request.set_idempotency_key("bad\nkey");
  grpc::ClientContext bad_context;
  EXPECT_EQ(stub->Likes(&bad_context, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// One request on a reflection stream of `service` (v1 or v1alpha), sent and answered as raw
// bytes: the two versions' messages are the same on the wire.
std::string AskReflection(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                          const std::string& request_bytes) {
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  auto call = generic.PrepareCall(&context, "/" + service + "/ServerReflectionInfo", &cq);
  auto step = [&](intptr_t tag) {
    void* got = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&got, &ok));
    EXPECT_EQ(got, reinterpret_cast<void*>(tag));
    return ok;
  };
  std::string bytes;
  call->StartCall(reinterpret_cast<void*>(1));
  if (step(1)) {
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request(&slice, 1);
    call->Write(request, reinterpret_cast<void*>(2));
    EXPECT_TRUE(step(2));
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(3));
    std::vector<grpc::Slice> slices;
    if (step(3) && response.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    call->WritesDone(reinterpret_cast<void*>(4));
    step(4);
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  return bytes;
}

TEST_F(HttpTest, GrpcReflectionAnswersV1AsGrpcsOwnV1alphaDoes) {
  // Did: the same reflection requests to gRPC's v1alpha service and to our v1 one. Checked:
  // both list the same services, ours among them; files by name (one with an import, which
  // comes along) and by symbol come back as the same bytes, and names not found as NOT_FOUND
  // from both; v1 describes the Search call.
  namespace rpb = grpc::reflection::v1;
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto both = [&](const rpb::ServerReflectionRequest& request) {
    const std::string bytes = request.SerializeAsString();
    std::pair<rpb::ServerReflectionResponse, std::string> v1, alpha;
    v1.second = AskReflection(channel, "grpc.reflection.v1.ServerReflection", bytes);
    alpha.second = AskReflection(channel, "grpc.reflection.v1alpha.ServerReflection", bytes);
    EXPECT_TRUE(v1.first.ParseFromString(v1.second));
    EXPECT_TRUE(alpha.first.ParseFromString(alpha.second));
    return std::pair(v1, alpha);
  };
  rpb::ServerReflectionRequest list;
  list.set_list_services("");
  auto [v1_list, alpha_list] = both(list);
  auto names = [](const rpb::ServerReflectionResponse& r) {
    std::set<std::string> out;
    for (const rpb::ServiceResponse& s : r.list_services_response().service()) out.insert(s.name());
    return out;
  };
  EXPECT_EQ(names(v1_list.first), names(alpha_list.first));
  EXPECT_EQ(
      names(v1_list.first),
      (std::set<std::string>{"tweetsearch.v1.TweetSearch", "grpc.reflection.v1.ServerReflection",
                             "grpc.reflection.v1alpha.ServerReflection"}));

  std::vector<rpb::ServerReflectionRequest> requests(6);
  requests[0].set_file_containing_symbol("tweetsearch.v1.TweetSearch");
  requests[1].set_file_containing_symbol("tweetsearch.v1.TweetSearch.Search");
  requests[2].set_file_by_filename("tweetsearch.proto");
  requests[3].set_file_containing_symbol("no.such.Symbol");
  requests[4].set_file_by_filename("no_such.proto");
  // cluster.proto imports tweetsearch.proto. The one-process server does not use it: touching
  // one of its messages links it into this binary's descriptor pool.
  ASSERT_NE(internal::v1::Change::descriptor(), nullptr);
  requests[5].set_file_by_filename("cluster.proto");
  for (const rpb::ServerReflectionRequest& r : requests) {
    auto [v1, alpha] = both(r);
    EXPECT_FALSE(v1.second.empty()) << r.DebugString();
    if (r.file_by_filename().starts_with("no") || r.file_containing_symbol().starts_with("no")) {
      EXPECT_EQ(v1.first.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
      EXPECT_EQ(alpha.first.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
      continue;
    }
    EXPECT_EQ(v1.second, alpha.second) << r.DebugString();
  }
  auto [with_import, unused_alpha] = both(requests[5]);
  EXPECT_EQ(with_import.first.file_descriptor_response().file_descriptor_proto_size(), 2);
  auto [symbol, unused] = both(requests[1]);
  ASSERT_GE(symbol.first.file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(
      file.ParseFromString(symbol.first.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "tweetsearch.proto");
  ASSERT_EQ(file.service_size(), 1);
  bool search = false;
  for (const auto& m : file.service(0).method()) search = search || m.name() == "Search";
  EXPECT_TRUE(search);
}

}  // namespace
}  // namespace tweetsearch::aggregator

namespace tweetsearch::aggregator {
namespace {

using net::HttpClient;
using net::HttpReply;
using net::UrlEncode;

// A start that fails half way (its HTTP port is taken) reports why and cleans up.
TEST(DaemonStartTest, ABusyPortIsAnErrorNotACrash) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  testing::TempDir dir;
  DaemonConfig config;
  config.data_dir = dir.path();
  config.http.port = taken.local_endpoint().port();
  config.grpc_port = -1;
  config.sample = 10;
  config.engine.store.block_cache_bytes = 8 << 20;
  auto daemon = Daemon::Start(config);
  ASSERT_FALSE(daemon.ok());
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kUnavailable) << daemon.status();
  // The data directory is left usable: the next start on a free port works.
  config.http.port = 0;
  auto again = Daemon::Start(config);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->Stop().ok());
}

TEST(DaemonConfigTest, ReadsTheExampleAndRejectsUnknownKeysAndBadValues) {
  DaemonConfig config;
  ASSERT_TRUE(LoadDaemonConfigFile(
                  std::string(TWEETSEARCH_SOURCE_DIR) + "/data/tweetsearchd.example.yaml", &config)
                  .ok());
  EXPECT_EQ(config.data_dir, "/var/lib/tweetsearch");
  EXPECT_EQ(config.http.port, 8080);
  EXPECT_EQ(config.grpc_port, 9090);
  EXPECT_EQ(config.engine.store.block_cache_bytes, size_t{256} << 20);
  EXPECT_TRUE(config.engine.store.sync_writes);
  EXPECT_EQ(config.demo_key_scopes, std::vector<std::string>{"search"});
  EXPECT_TRUE(config.http.allowed_hosts.empty());
  EXPECT_EQ(config.http.max_connections_per_client, 256u);

  testing::TempDir dir;
  auto load = [&](const std::string& text) {
    const std::string path = dir.path() + "/c.yaml";
    EXPECT_TRUE(WriteFileAtomically(path, text).ok());
    DaemonConfig c;
    return LoadDaemonConfigFile(path, &c);
  };
  EXPECT_NE(load("htp_port: 80\n").message().find("unknown key 'htp_port'"), std::string::npos);
  EXPECT_NE(load("http_port: eighty\n").message().find("http_port"), std::string::npos);
  EXPECT_NE(load("http_port: 70000\n").message().find("out of range"), std::string::npos);
  EXPECT_FALSE(load("[1, 2]\n").ok());
  EXPECT_FALSE(load("a: [unclosed\n").ok());
  EXPECT_FALSE(load("? [complex, key]\n: 1\n").ok());
  EXPECT_TRUE(load("").ok());
}

}  // namespace
}  // namespace tweetsearch::aggregator

namespace tweetsearch::aggregator {
namespace {

using net::HttpClient;
using net::HttpReply;
using net::UrlEncode;

constexpr std::string_view kLimits = R"(
tiers:
  demo:
    search:
      - {name: demo_search_burst, limit: 3, window: 1h, algorithm: fixed_window}
      - {name: demo_search_watch, limit: 2, window: 1h, shadow: true}
    ingest:
      - {name: demo_ingest_lines, limit: 4, window: 1h, algorithm: token_bucket}
anonymous:
  all:
    - {name: anonymous_per_ip, limit: 2, window: 1h, algorithm: sliding_window_log}
)";

class QuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    limits_ = dir_.path() + "/limits.yaml";
    ASSERT_TRUE(WriteFileAtomically(limits_, kLimits).ok());
    DaemonConfig config;
    config.data_dir = dir_.path() + "/data";
    config.http.port = 0;
    config.grpc_port = -1;
    config.sample = 50;
    config.limits_file = limits_;
    config.limits_poll_ms = 20;
    config.demo_key_scopes = {"search", "ingest"};
    config.engine.store.block_cache_bytes = 8 << 20;
    config.usage_flush_ms = 20;
    config_ = config;
    StartDaemon();
  }
  void StartDaemon() {
    auto daemon = Daemon::Start(config_);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    client_ = std::make_unique<HttpClient>("127.0.0.1", std::to_string(daemon_->http_port()));
  }
  HttpReply Get(const std::string& target, std::string_view key = kDemoKey) {
    auto r = client_->Send("GET", target, {}, "", key);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : HttpReply{};
  }
  testing::TempDir dir_;
  std::string limits_;
  DaemonConfig config_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(QuotaTest, AnswersCarryTheQuotaAndRefusalsAre429WithRetryTimes) {
  for (int i = 0; i < 3; ++i) {
    HttpReply r = Get("/v1/search?q=the");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.headers["x-ratelimit-limit"], "3");
    EXPECT_EQ(r.headers["x-ratelimit-remaining"], std::to_string(2 - i));
    EXPECT_EQ(r.headers["ratelimit-policy"], "3;w=3600");
    EXPECT_EQ(r.headers["ratelimit"].rfind("limit=3, remaining=" + std::to_string(2 - i), 0), 0u)
        << r.headers["ratelimit"];
  }
  HttpReply refused = Get("/v1/search?q=the");
  EXPECT_EQ(refused.status, 429);
  nlohmann::json body = nlohmann::json::parse(refused.body);
  EXPECT_EQ(body["error"]["code"], "resource_exhausted");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("demo_search_burst"),
            std::string::npos);
  EXPECT_FALSE(refused.headers["retry-after"].empty());
  EXPECT_EQ(refused.headers["retry-after"], refused.headers["x-ratelimit-retry-after"]);
  EXPECT_GT(std::stoi(refused.headers["retry-after"]), 0);
  EXPECT_EQ(refused.headers["x-ratelimit-remaining"], "0");

  // A bulk ingest costs one unit per line.
  auto ingest = [&](int lines) {
    std::string body;
    for (int i = 0; i < lines; ++i) body += "{\"text\":\"quota line\"}\n";
    auto r = client_->Send("POST", "/v1/tweets", body, "application/x-ndjson", kDemoKey);
    return r.ok() ? r->status : -1;
  };
  EXPECT_EQ(ingest(3), 200);
  EXPECT_EQ(ingest(2), 429);  // 3 + 2 > 4 lines
  EXPECT_EQ(ingest(1), 200);

  // Without a key: 401, until this address has used its anonymous quota.
  EXPECT_EQ(Get("/v1/search?q=the", "").status, 401);
  EXPECT_EQ(Get("/v1/search?q=the", "wrong-key-guess").status, 401);
  EXPECT_EQ(Get("/v1/search?q=the", "another-guess-xx").status, 429);

  HttpReply metrics = Get("/metrics", "");
  EXPECT_NE(metrics.body.find("tweetsearch_ratelimit_refused_total{limit=\"demo_search_burst\"} 1"),
            std::string::npos);
  EXPECT_NE(
      metrics.body.find("tweetsearch_ratelimit_shadow_exceeded_total{limit=\"demo_search_watch\"}"),
      std::string::npos);
}

// Polls `target` (with `key`) until `done(body)` holds; the last body either way.
json PollJson(HttpClient& client, const std::string& target, std::string_view key,
              const std::function<bool(const json&)>& done) {
  json body;
  for (int attempt = 0; attempt < 500; ++attempt) {
    auto r = client.Send("GET", target, {}, "", key);
    if (r.ok() && r->status == 200) {
      body = json::parse(r->body);
      if (done(body)) return body;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return body;
}

TEST_F(QuotaTest, UsageCountsEveryOutcomePerKeyAndSurvivesARestart) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Get("/v1/search?q=the").status, 200);
  EXPECT_EQ(Get("/v1/search?q=the").status, 429);          // demo_search_burst
  EXPECT_EQ(Get("/v1/search?q=the&limit=0").status, 400);  // bad input, still ours
  EXPECT_EQ(
      client_
          ->Send("POST", "/v1/tweets", "{\"text\":\"a\"}\n{\"text\":\"b\"}\n{\"text\":\"c\"}\n",
                 "application/x-ndjson", kDemoKey)
          ->status,
      200);
  EXPECT_EQ(client_
                ->Send("POST", "/v1/tweets", "{\"text\":\"d\"}\n{\"text\":\"e\"}\n",
                       "application/x-ndjson", kDemoKey)
                ->status,
            429);                                                      // demo_ingest_lines
  EXPECT_EQ(Get("/v1/search?q=the", "not-a-key-at-all").status, 401);  // anonymous

  // The demo key reads its own series (this read is counted too, as served).
  const json own = PollJson(*client_, "/v1/usage?from=-1h", kDemoKey, [](const json& b) {
    return b["totals"]["limited"] == 2 && b["totals"]["rejected"] == 1;
  });
  ASSERT_FALSE(own.is_null());
  EXPECT_EQ(own["resolution"], "1m");
  EXPECT_EQ(own["bucket_seconds"], 60);
  EXPECT_EQ(own["totals"]["limited"], 2);
  EXPECT_EQ(own["totals"]["limited_by"]["demo_search_burst"], 1);
  EXPECT_EQ(own["totals"]["limited_by"]["demo_ingest_lines"], 1);
  EXPECT_EQ(own["totals"]["rejected"], 1);
  EXPECT_EQ(own["totals"]["failed"], 0);
  EXPECT_EQ(own["totals"]["searches"], 3);
  EXPECT_GE(own["totals"]["served"].get<int>(), 4);
  EXPECT_GT(own["totals"]["search_latency_ms"]["p99"].get<double>(), 0);
  EXPECT_GE(own["points"].size(), 60u);
  EXPECT_EQ(own["key"].get<std::string>().size(), 16u);

  // Only admin keys read other series.
  EXPECT_EQ(Get("/v1/usage?api_dev_key=" + std::string(kDemoKey) + "&key=all", "").status, 403);
  const std::string admin = daemon_->admin_key();
  const json anonymous = PollJson(*client_, "/v1/usage?key=anonymous", admin,
                                  [](const json& b) { return b["totals"]["rejected"] == 1; });
  EXPECT_EQ(anonymous["totals"]["rejected"], 1);
  const json by_prefix = PollJson(*client_, "/v1/usage?key=demo-key-0", admin,
                                  [](const json& b) { return b["totals"]["limited"] == 2; });
  EXPECT_EQ(by_prefix["key"], own["key"]);
  // Rejected across keys: the 400 and the 403 of the demo key, the 401 without a key.
  const json all = PollJson(*client_, "/v1/usage?key=all&from=-2h", admin, [&](const json& b) {
    return b["totals"]["limited"] == 2 && b["totals"]["rejected"] == 3;
  });
  EXPECT_EQ(all["totals"]["rejected"], 3);
  // Week-long ranges come in hours, a year in days, unless asked otherwise.
  EXPECT_EQ(PollJson(*client_, "/v1/usage?key=all&from=-7d", admin,
                     [](const json&) { return true; })["resolution"],
            "1h");
  EXPECT_EQ(PollJson(*client_, "/v1/usage?key=all&from=-365d", admin,
                     [](const json&) { return true; })["resolution"],
            "1d");
  EXPECT_EQ(PollJson(*client_, "/v1/usage?key=all&from=-6h&resolution=5m", admin,
                     [](const json&) { return true; })["points"]
                .size(),
            73u);

  // Bad requests say what is wrong.
  for (const char* bad :
       {"/v1/usage?key=all&resolution=7m", "/v1/usage?key=all&from=yesterday",
        "/v1/usage?key=all&from=-1h&to=-2h", "/v1/usage?key=all&from=-3d&resolution=1m",
        "/v1/usage?key=all&from=0&resolution=1m"}) {
    HttpReply r = Get(bad, admin);
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
    EXPECT_NE(r.body.find("message"), std::string::npos);
  }
  EXPECT_EQ(Get("/v1/usage?key=ffffffffffffffff", admin).status, 404);
  EXPECT_EQ(Get("/v1/usage", "").status, 401);

  // Counts are on disk: a restart keeps them.
  ASSERT_TRUE(daemon_->Stop().ok());
  daemon_.reset();
  StartDaemon();
  const json after = PollJson(*client_, "/v1/usage?key=demo-key-0", admin,
                              [](const json& b) { return b["totals"]["limited"] == 2; });
  EXPECT_EQ(after["totals"]["limited_by"]["demo_search_burst"], 1);
  EXPECT_EQ(after["totals"]["searches"], 3);
}

TEST_F(QuotaTest, RulesReloadWhenTheFileChangesAndABrokenFileChangesNothing) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Get("/v1/search?q=the").status, 200);
  ASSERT_EQ(Get("/v1/search?q=the").status, 429);
  // A broken file: rejected, the old rules stay (still refused).
  ASSERT_TRUE(WriteFileAtomically(limits_, "tiers: {demo: {search: [{limit: -1}]}}").ok());
  for (int i = 0; i < 200 && daemon_->ReloadLimits().ok(); ++i) {
  }
  EXPECT_EQ(Get("/v1/search?q=the").status, 429);
  // A good file with a larger limit: picked up without a restart.
  std::string bigger(kLimits);
  bigger.replace(bigger.find("limit: 3,"), 9, "limit: 9,");
  ASSERT_TRUE(WriteFileAtomically(limits_, bigger).ok());
  int status = 0;
  for (int i = 0; i < 500 && status != 200; ++i) {  // the watcher polls every 20 ms
    status = Get("/v1/search?q=the").status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200);
}

}  // namespace
}  // namespace tweetsearch::aggregator
