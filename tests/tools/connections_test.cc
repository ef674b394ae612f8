// File-descriptor starvation against the real tweetsearchd, started with a low open-file limit
// (`ulimit -n 200`, as a hard limit, so the daemon cannot raise it): idle connections beyond
// the cap close the longest-idle ones instead of locking everyone out, one client address is
// capped on its own, and with a cap set above the limit accept() errors back off instead of
// spinning. Every refusal shows in /metrics.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "aggregator/api_keys.h"
#include "common/file_util.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "tests/testing/corpus.h"
#include "tests/testing/process.h"

namespace tweetsearch {
namespace {

// A script that starts tweetsearchd under `ulimit -n <files>` (soft and hard).
std::string LimitedLauncher(const std::string& dir, int files) {
  const std::string path = dir + "/limited-tweetsearchd.sh";
  // Under UndefinedBehaviorSanitizer, its vptr check validates a vtable it has not seen before
  // through pipe(2), which fails once the daemon holds every descriptor it may: the check then
  // reports a valid object as invalid and aborts the daemon. That check is off for this daemon
  // only (every other test keeps it); harmless without the sanitizer.
  const std::string suppressions = dir + "/ubsan.supp";
  EXPECT_TRUE(WriteFileAtomically(suppressions, "vptr:*\n").ok());
  EXPECT_TRUE(WriteFileAtomically(
                  path, StrCat("#!/bin/sh\nulimit -n ", files, " || exit 3\n",
                               "UBSAN_OPTIONS=\"${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}suppressions=",
                               suppressions, "\"\nexport UBSAN_OPTIONS\nexec ", TWEETSEARCHD_PATH,
                               " \"$@\"\n"))
                  .ok());
  chmod(path.c_str(), 0755);
  return path;
}

// An open TCP connection to 127.0.0.1:port that sends nothing (-1 if connect failed).
int IdleConnection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A search from a fresh client, retried for up to 10 s while the server makes room.
int SearchStatus(const std::string& port) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    net::HttpClient client("127.0.0.1", port, std::chrono::seconds(2));
    auto r = client.Send("GET", "/v1/search?q=x", {}, "", aggregator::kDemoKey);
    if (r.ok() && r->status == 200) return 200;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// A series' value in /metrics (retried like SearchStatus); 0 when it cannot be read.
uint64_t Metric(const std::string& port, const std::string& series) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    net::HttpClient client("127.0.0.1", port, std::chrono::seconds(2));
    auto r = client.Send("GET", "/metrics");
    if (r.ok() && r->status == 200) {
      const size_t at = r->body.find("\n" + series + " ");
      return at == std::string::npos ? 0 : std::stoull(r->body.substr(at + series.size() + 2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

class ConnectionsTest : public ::testing::Test {
 protected:
  ~ConnectionsTest() override {
    for (int fd : idle_) close(fd);
  }
  // Opens `n` idle connections (stops at the first that fails to connect).
  void OpenIdle(int port, int n) {
    for (int i = 0; i < n; ++i) {
      const int fd = IdleConnection(port);
      if (fd < 0) break;
      idle_.push_back(fd);
    }
  }
  testing::TempDir dir_;
  std::vector<int> idle_;
};

TEST_F(ConnectionsTest, IdleConnectionsPastTheCapMakeRoomInsteadOfLockingEveryoneOut) {
  const std::string log = dir_.path() + "/daemon.log";
  testing::TweetsearchdProcess daemon(LimitedLauncher(dir_.path(), 200), dir_.path() + "/data", log,
                                      {"--max-connections-per-client", "1000"});
  ASSERT_TRUE(daemon.up()) << ReadFile(log).value_or("");
  const uint64_t cap = Metric(daemon.port(), "tweetsearch_http_connection_limit");
  EXPECT_EQ(cap, 136u);  // 200 less a reserve of 64 for storage files
  // Twice the cap in idle connections (more than the process has descriptors for).
  OpenIdle(std::stoi(daemon.port()), 300);
  EXPECT_EQ(SearchStatus(daemon.port()), 200) << ReadFile(log).value_or("");
  EXPECT_GT(Metric(daemon.port(), "tweetsearch_http_idle_connections_closed_total"), 100u);
  EXPECT_LE(Metric(daemon.port(), "tweetsearch_http_connections"), cap + 1);
  EXPECT_NE(ReadFile(log).value_or("").find("HTTP connections capped at 136"), std::string::npos);
}

TEST_F(ConnectionsTest, OneClientAddressIsCappedOnItsOwn) {
  const std::string log = dir_.path() + "/daemon.log";
  testing::TweetsearchdProcess daemon(TWEETSEARCHD_PATH, dir_.path() + "/data", log,
                                      {"--max-connections-per-client", "20"});
  ASSERT_TRUE(daemon.up()) << ReadFile(log).value_or("");
  OpenIdle(std::stoi(daemon.port()), 20);
  // The 21st connection from 127.0.0.1 is answered 503 and closed.
  net::HttpClient client("127.0.0.1", daemon.port());
  auto r = client.Send("GET", "/v1/search?q=x", {}, "", aggregator::kDemoKey);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(r->body.find("too many connections from this address"), std::string::npos);
  // Once the idle ones go, the address is served again.
  for (int fd : idle_) close(fd);
  idle_.clear();
  EXPECT_EQ(SearchStatus(daemon.port()), 200);
  EXPECT_GE(
      Metric(daemon.port(), "tweetsearch_http_connections_refused_total{reason=\"client_full\"}"),
      1u);
  EXPECT_NE(ReadFile(log).value_or("").find("the per-client cap"), std::string::npos);
}

TEST_F(ConnectionsTest, OutOfDescriptorsTheAcceptorBacksOffAndRecovers) {
  const std::string log = dir_.path() + "/daemon.log";
  // A cap the file limit cannot back: accept() itself runs out of descriptors.
  testing::TweetsearchdProcess daemon(
      LimitedLauncher(dir_.path(), 200), dir_.path() + "/data", log,
      {"--max-connections", "5000", "--max-connections-per-client", "5000"});
  ASSERT_TRUE(daemon.up()) << ReadFile(log).value_or("");
  OpenIdle(std::stoi(daemon.port()), 400);
  EXPECT_EQ(SearchStatus(daemon.port()), 200) << ReadFile(log).value_or("");
  EXPECT_GE(Metric(daemon.port(), "tweetsearch_http_accept_errors_total{error=\"no_descriptors\"}"),
            1u);
  const std::string text = ReadFile(log).value_or("");
  EXPECT_NE(text.find("pausing 50 ms"), std::string::npos) << text;
  // Logged at most once a second, not once per failed accept().
  size_t lines = 0;
  for (size_t at = text.find("pausing 50 ms"); at != std::string::npos;
       at = text.find("pausing 50 ms", at + 1)) {
    ++lines;
  }
  EXPECT_LT(lines, 30u);
}

}  // namespace
}  // namespace tweetsearch
