// Hostile traffic against the real one-process service over loopback sockets: every ambiguous
// framing is refused with 400 and the connection closed (nothing smuggled in a body runs),
// foreign Host headers and form-encoded writes are refused, numbers out of range are 400, the
// public demo key only searches, and keys are revoked only by a whole prefix, never the last
// admin key.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "aggregator/api_keys.h"
#include "aggregator/daemon.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::aggregator {
namespace {

using net::HttpClient;
using net::HttpReply;

using nlohmann::json;

// A new connection to the server on loopback, with a 5 s read timeout; -1 if it fails.
int Connect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// Reads until the server closes the connection (or 5 s pass), then closes it.
std::string ReadUntilClosed(int fd) {
  std::string reply;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) reply.append(buffer, n);
  if (n < 0) reply += "\n<no close within 5 s>";
  close(fd);
  return reply;
}

// Sends `bytes` on a new connection and reads until the server closes it (or 5 s pass).
std::string RawExchange(uint16_t port, const std::string& bytes) {
  const int fd = Connect(port);
  EXPECT_GE(fd, 0);
  if (fd < 0) return "";
  if (!SendAll(fd, bytes)) {
    close(fd);
    return "";
  }
  return ReadUntilClosed(fd);
}

// How many HTTP responses a raw reply holds (each has one Server line).
int Responses(const std::string& reply) {
  int n = 0;
  for (size_t at = reply.find("\r\nServer: tweetsearch\r\n"); at != std::string::npos;
       at = reply.find("\r\nServer: tweetsearch\r\n", at + 1)) {
    ++n;
  }
  return n;
}

class HostileHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonConfig config;
    config.data_dir = dir_.path();
    config.http.port = 0;
    config.http.max_body_bytes = 4 << 20;
    config.grpc_port = -1;
    config.sample = 50;
    config.engine.store.block_cache_bytes = 8 << 20;
    auto daemon = Daemon::Start(config);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    port_ = daemon_->http_port();
    client_ = std::make_unique<HttpClient>("127.0.0.1", std::to_string(port_));
    // A tweet for smuggled deletes to aim at.
    auto made = client_->Send("POST", "/v1/tweets", R"({"id": "77", "text": "target tweet"})",
                              "application/json", daemon_->admin_key());
    ASSERT_TRUE(made.ok() && made->status == 200) << (made.ok() ? made->body : "");
  }

  int Status(std::string_view method, const std::string& target, std::string_view body = {},
             std::string_view key = {}, std::string_view type = "application/json") {
    auto reply = client_->Send(method, target, body, type, key);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? reply->status : -1;
  }
  bool TweetExists() { return Status("GET", "/v1/tweets/77", {}, kDemoKey) == 200; }

  testing::TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  uint16_t port_ = 0;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(HostileHttpTest, AmbiguousFramingIs400AndClosesAndNothingSmuggledRuns) {
  const std::string admin = daemon_->admin_key();
  const std::string smuggled =
      StrCat("DELETE /v1/tweets/77 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: ", admin,
             "\r\nContent-Length: 0\r\n\r\n");
  const std::string head =
      StrCat("POST /v1/tweets HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: ", admin,
             "\r\nContent-Type: application/json\r\n");
  struct Shape {
    std::string name, headers, body;
    int status;
  };
  const std::string chunked_body = StrCat("0\r\n\r\n", smuggled);
  const std::vector<Shape> shapes = {
      {"xchunked", "Transfer-Encoding: xchunked\r\n", smuggled, 400},
      {"gzip alone", "Transfer-Encoding: gzip\r\n", smuggled, 400},
      {"identity", "Transfer-Encoding: identity\r\n", smuggled, 400},
      {"chunked, identity", "Transfer-Encoding: chunked, identity\r\n", smuggled, 400},
      {"chunked twice in one line", "Transfer-Encoding: chunked, chunked\r\n", chunked_body, 400},
      {"chunked twice in two lines", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
       chunked_body, 400},
      {"chunked then identity lines",
       "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", smuggled, 400},
      {"empty coding", "Transfer-Encoding: ,chunked\r\n", chunked_body, 400},
      {"trailing comma", "Transfer-Encoding: chunked,\r\n", chunked_body, 400},
      {"gzip, chunked (unsupported)", "Transfer-Encoding: gzip, chunked\r\n", chunked_body, 501},
      {"unknown coding before chunked", "Transfer-Encoding: foo, chunked\r\n", chunked_body, 400},
      {"space before the colon", "Transfer-Encoding : chunked\r\n", chunked_body, 400},
      {"CL and TE",
       StrCat("Content-Length: ", chunked_body.size(), "\r\nTransfer-Encoding: chunked\r\n"),
       chunked_body, 400},
      {"two different Content-Lengths", "Content-Length: 0\r\nContent-Length: 5\r\n", smuggled,
       400},
      {"signed Content-Length", "Content-Length: +0\r\n", smuggled, 400},
      {"negative Content-Length", "Content-Length: -1\r\n", smuggled, 400},
      {"hex Content-Length", "Content-Length: 0x0\r\n", smuggled, 400},
      {"bad chunk size", "Transfer-Encoding: chunked\r\n", StrCat("zz\r\n\r\n", smuggled), 400},
      {"two Hosts", "Host: 127.0.0.1\r\n", smuggled, 400},
  };
  for (const Shape& shape : shapes) {
    const std::string reply = RawExchange(port_, head + shape.headers + "\r\n" + shape.body);
    EXPECT_TRUE(reply.starts_with(StrCat("HTTP/1.1 ", shape.status))) << shape.name << ":\n"
                                                                      << reply;
    EXPECT_EQ(Responses(reply), 1) << shape.name << " (a second answer: the body ran):\n" << reply;
    EXPECT_EQ(reply.find("<no close"), std::string::npos)
        << shape.name << " left the connection open";
    ASSERT_TRUE(TweetExists()) << shape.name << " smuggled a delete through";
  }

  // HTTP/1.0 with Transfer-Encoding, and HTTP/1.1 without Host.
  for (const std::string& request :
       {StrCat("POST /v1/tweets HTTP/1.0\r\nX-Api-Key: ", admin,
               "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", smuggled),
        StrCat("DELETE /v1/tweets/77 HTTP/1.1\r\nX-Api-Key: ", admin, "\r\n\r\n")}) {
    const std::string reply = RawExchange(port_, request);
    EXPECT_TRUE(reply.starts_with("HTTP/1.")) << reply;
    EXPECT_NE(reply.find(" 400 "), std::string::npos) << reply;
    EXPECT_EQ(Responses(reply), 1) << reply;
    ASSERT_TRUE(TweetExists());
  }

  // The one well-framed shape: chunked, and the request after it on the same connection is a
  // request of its own (answered separately, as pipelining allows).
  const std::string reply = RawExchange(
      port_, StrCat(head,
                    "Transfer-Encoding: chunked\r\n\r\n1e\r\n{\"text\": \"chunked tweet "
                    "#ok\"}\n\r\n0\r\n\r\n",
                    "GET /v1/search?q=%23ok HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: ", admin,
                    "\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200")) << reply;
  EXPECT_EQ(Responses(reply), 2) << reply;
  EXPECT_NE(reply.find("chunked tweet #ok"), std::string::npos) << reply;

  auto metrics = client_->Send("GET", "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("tweetsearch_http_requests_refused_total{check=\"framing\"}"),
            std::string::npos);
}

// The last chunk of a chunked body may arrive in any pieces. Beast before 1.86 asserted it
// came at least five bytes at a time, so in a build with assertions (the sanitizer and fuzz
// builds) a client could stop the server with a valid request; common/boost_assert.cc lets
// that one assertion pass. Fed as a connection does: each new byte joins what is unparsed.
TEST(ChunkedFramingTest, AFinalChunkArrivingByteByByteIsParsed) {
  namespace http = boost::beast::http;
  const std::string head =
      "POST /v1/tweets HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string body : {"0\r\n\r\n", "2\r\nab\r\n0\r\n\r\n"}) {
    http::request_parser<http::string_body> parser;
    parser.eager(true);
    const std::string bytes = head + body;
    std::string pending;
    boost::beast::error_code ec;
    for (char c : bytes) {
      pending += c;
      const size_t used = parser.put(boost::asio::buffer(pending), ec);
      ASSERT_TRUE(!ec || ec == http::error::need_more) << ec.message();
      pending.erase(0, used);
    }
    EXPECT_TRUE(parser.is_done()) << body;
    EXPECT_EQ(parser.get().body(), body.size() > 5 ? "ab" : "");
  }
}

TEST_F(HostileHttpTest, AChunkedWriteSentInPiecesIsAnswered) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  const int one = 1;  // each piece its own segment
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const std::string body = R"({"id": "78", "text": "sent in pieces"})";
  const std::vector<std::string> pieces = {
      StrCat("POST /v1/tweets HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
             "X-Api-Key: ", daemon_->admin_key(),
             "\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"),
      StrCat(absl::StrFormat("%x", body.size()), "\r\n", body, "\r\n0\r\n"), "\r", "\n"};
  for (const std::string& piece : pieces) EXPECT_TRUE(SendAll(fd, piece));
  const std::string reply = ReadUntilClosed(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_EQ(Status("GET", "/v1/tweets/78", {}, kDemoKey), 200);
}

TEST_F(HostileHttpTest, ForeignHostsAndFormEncodedWritesAreRefused) {
  const std::string admin = daemon_->admin_key();
  auto with_host = [&](std::string_view host) {
    return RawExchange(port_, StrCat("GET /v1/tweets/77 HTTP/1.1\r\nHost: ", host,
                                     "\r\nX-Api-Key: ", admin, "\r\nConnection: close\r\n\r\n"));
  };
  EXPECT_TRUE(with_host("127.0.0.1").starts_with("HTTP/1.1 200"));
  EXPECT_TRUE(with_host(StrCat("localhost:", port_)).starts_with("HTTP/1.1 200"));
  EXPECT_TRUE(with_host("LOCALHOST").starts_with("HTTP/1.1 200"));
  EXPECT_TRUE(with_host("[::1]:8080").starts_with("HTTP/1.1 200"));
  // A DNS-rebinding page: its own name, pointing at 127.0.0.1.
  const std::string rebound = with_host("attacker.example:8080");
  EXPECT_TRUE(rebound.starts_with("HTTP/1.1 403")) << rebound;
  EXPECT_NE(rebound.find("attacker.example"), std::string::npos);
  EXPECT_TRUE(with_host("localhost.attacker.example").starts_with("HTTP/1.1 403"));
  EXPECT_TRUE(with_host("127.0.0.1:99999").starts_with("HTTP/1.1 403"));
  EXPECT_TRUE(with_host("").starts_with("HTTP/1.1 403"));

  // A cross-site form can send text/plain, urlencoded or multipart, with the key in the URL.
  const std::string target = StrCat("/v1/tweets/77/likes?add=5&api_dev_key=", admin);
  for (std::string_view type :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""}) {
    const std::string reply =
        RawExchange(port_, StrCat("POST ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                                  type.empty() ? "" : StrCat("Content-Type: ", type, "\r\n"),
                                  "Content-Length: 0\r\n\r\n"));
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 415")) << type << ":\n" << reply;
  }
  auto get = client_->Send("GET", "/v1/tweets/77", {}, "", admin);
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(json::parse(get->body)["likes"], 0);  // none of them counted
  EXPECT_EQ(Status("POST", target, {}, {}, "application/json; charset=utf-8"), 200);
  EXPECT_EQ(Status("POST", target, {}, admin, "text/plain"), 200);  // a key header: not a form
}

TEST_F(HostileHttpTest, TheDemoKeyOnlySearchesUnlessWidened) {
  EXPECT_EQ(Status("GET", "/v1/search?q=target", {}, kDemoKey), 200);
  EXPECT_EQ(Status("POST", "/v1/tweets", R"({"text":"x"})", kDemoKey), 403);
  EXPECT_EQ(Status("DELETE", "/v1/tweets/77", {}, kDemoKey), 403);
  EXPECT_EQ(Status("POST", "/v1/tweets/77/likes", R"({"add":1})", kDemoKey), 403);
  // Widened by the operator: takes effect at the next start on the same data directory.
  daemon_.reset();
  DaemonConfig config;
  config.data_dir = dir_.path();
  config.http.port = 0;
  config.grpc_port = -1;
  config.demo_key_scopes = {"search", "ingest"};
  auto daemon = Daemon::Start(config);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  HttpClient client("127.0.0.1", std::to_string((*daemon)->http_port()));
  auto r = client.Send("POST", "/v1/tweets", R"({"text":"x"})", "application/json", kDemoKey);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(HostileHttpTest, NumbersOutOfRangeOrNotPlainDecimalAre400) {
  const std::string admin = daemon_->admin_key();
  auto likes = [&](const std::string& body) {
    return Status("POST", "/v1/tweets/77/likes", body, admin);
  };
  auto current = [&] {
    auto r = client_->Send("GET", "/v1/tweets/77", {}, "", admin);
    return r.ok() ? json::parse(r->body)["likes"].get<int64_t>() : -1;
  };
  EXPECT_EQ(likes(R"({"set": 10})"), 200);
  for (const char* bad : {R"({"add": 18446744073709551615})", R"({"add": 9223372036854775808})",
                          R"({"add": 9223372036854775807})", R"({"add": -9223372036854775808})",
                          R"({"add": 4294967296})", R"({"set": -1})", R"({"set": 4294967296})",
                          R"({"add": 1.5})", R"({"add": "1"})", R"({"add": 1e3})"}) {
    EXPECT_EQ(likes(bad), 400) << bad;
    EXPECT_EQ(current(), 10) << bad;
  }
  EXPECT_EQ(likes(R"({"add": 4294967295})"), 200);
  EXPECT_EQ(current(), 4294967295);  // clamped at 2^32-1
  EXPECT_EQ(likes(R"({"add": -4294967295})"), 200);
  EXPECT_EQ(current(), 0);  // clamped at 0

  const std::string search = StrCat("/v1/search?api_dev_key=", admin, "&q=target&limit=");
  EXPECT_EQ(Status("GET", search + "5"), 200);
  for (const char* bad : {"%205", "+5", "5%20", "0x5", "-5", "5.0", "", "99999999999999999999"}) {
    EXPECT_EQ(Status("GET", search + bad), 400) << bad;
  }
  for (const char* bad : {"%2012", "+12", "12%20", "-12", "18446744073709551616", "0x4d"}) {
    EXPECT_EQ(Status("GET", StrCat("/v1/tweets/", bad), {}, admin), 400) << bad;
  }
  EXPECT_EQ(Status("POST", StrCat("/v1/tweets/77/likes?add=%201"), {}, admin), 400);
  EXPECT_EQ(Status("POST", StrCat("/v1/tweets/77/likes?add=+1"), {}, admin), 400);
  // Too many lines in one call: refused before any is parsed (413), and nothing is stored.
  std::string many;
  for (size_t i = 0; i <= kMaxIngestTweets; ++i) many += "{\"text\": \"flood\"}\n";
  auto flood = client_->Send("POST", "/v1/tweets", many, "application/x-ndjson", admin);
  ASSERT_TRUE(flood.ok());
  EXPECT_EQ(flood->status, 413) << flood->body.substr(0, 200);
  EXPECT_NE(flood->body.find("at most 100000 tweets"), std::string::npos);
  auto flooded = client_->Send("GET", "/v1/search?q=flood", {}, "", admin);
  ASSERT_TRUE(flooded.ok());
  EXPECT_EQ(json::parse(flooded->body)["total_hits"], 0);

  // Times out of range are rejected per line; the good line is taken.
  auto times = client_->Send("POST", "/v1/tweets",
                             "{\"text\": \"a\", \"created_at\": -1}\n"
                             "{\"text\": \"b\", \"created_at\": 9223372036854775807}\n"
                             "{\"text\": \"c\", \"created_at\": \"99999-01-01T00:00:00Z\"}\n"
                             "{\"text\": \"d\", \"created_at\": 1700000000000}\n",
                             "application/x-ndjson", admin);
  ASSERT_TRUE(times.ok());
  EXPECT_EQ(json::parse(times->body)["accepted"], 1) << times->body;
  EXPECT_EQ(json::parse(times->body)["rejected"], 3) << times->body;

  const std::string usage = StrCat("/v1/usage?api_dev_key=", admin, "&from=");
  EXPECT_EQ(Status("GET", usage + "-24h"), 200);
  for (const char* bad : {"-%2024h", "-+24h", "%201700000000", "+1700000000", "-99999999999d"}) {
    EXPECT_EQ(Status("GET", usage + bad), 400) << bad;
  }
}

TEST_F(HostileHttpTest, KeysAreRevokedByAWholePrefixAndNeverTheLastAdmin) {
  const std::string admin = daemon_->admin_key();
  auto made = client_->Send("POST", "/v1/admin/keys", R"({"owner":"eve","scopes":["search"]})",
                            "application/json", admin);
  ASSERT_TRUE(made.ok() && made->status == 201);
  const std::string key = json::parse(made->body)["key"];
  for (size_t n : {1, 3, 9}) {
    EXPECT_EQ(Status("DELETE", "/v1/admin/keys/" + key.substr(0, n), {}, admin), 400) << n;
  }
  EXPECT_EQ(Status("GET", "/v1/search?q=x&api_dev_key=" + key), 200);  // still valid
  EXPECT_EQ(Status("DELETE", "/v1/admin/keys/" + key.substr(0, 10), {}, admin), 200);
  EXPECT_EQ(Status("GET", "/v1/search?q=x&api_dev_key=" + key), 401);

  // The only admin key cannot be revoked; once a second exists, either can.
  EXPECT_EQ(Status("DELETE", "/v1/admin/keys/" + admin.substr(0, 10), {}, admin), 400);
  EXPECT_EQ(Status("GET", "/v1/admin/keys", {}, admin), 200);
  auto second =
      client_->Send("POST", "/v1/admin/keys", R"({"owner":"ops","scopes":["admin","search"]})",
                    "application/json", admin);
  ASSERT_TRUE(second.ok() && second->status == 201);
  const std::string other = json::parse(second->body)["key"];
  EXPECT_EQ(Status("DELETE", "/v1/admin/keys/" + admin.substr(0, 10), {}, other), 200);
  EXPECT_EQ(Status("GET", "/v1/admin/keys", {}, admin), 401);
  EXPECT_EQ(Status("DELETE", "/v1/admin/keys/" + other.substr(0, 10), {}, other), 400);
}

}  // namespace
}  // namespace tweetsearch::aggregator
