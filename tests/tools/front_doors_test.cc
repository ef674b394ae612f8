// Two real tweetsearchd front doors sharing quotas through one real redis-server: together they
// never admit more than a key's limit; when Redis dies mid-load they keep answering, and they
// return to it by themselves.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "common/file_util.h"
#include "net/http_client.h"
#include "tests/testing/corpus.h"
#include "tests/testing/process.h"
#include "tests/testing/redis_server.h"

namespace tweetsearch {
namespace {

constexpr int kKeys = 8;
constexpr int kLimit = 25;

std::string KeyName(int i) { return "partner-key-000" + std::to_string(i); }

class FrontDoorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_unique<testing::RedisServer>(dir_.path());
    ASSERT_TRUE(redis_->Start()) << "redis-server did not start";
    const std::string limits = dir_.path() + "/limits.yaml";
    ASSERT_TRUE(
        WriteFileAtomically(
            limits, "tiers:\n  partner:\n    search:\n      - {name: partner_hourly, limit: " +
                        std::to_string(kLimit) + ", window: 1h, algorithm: sliding_window_log}\n")
            .ok());
    for (int d = 0; d < 2; ++d) {
      const std::string data = dir_.path() + "/door" + std::to_string(d);
      doors_.push_back(std::make_unique<testing::TweetsearchdProcess>(
          TWEETSEARCHD_PATH, data, data + ".log",
          std::vector<std::string>{"--limits", limits, "--redis",
                                   "127.0.0.1:" + std::to_string(redis_->port())}));
      ASSERT_TRUE(doors_.back()->up()) << ReadFile(data + ".log").value_or("");
      // The same partner keys on both doors (each has its own key registry).
      net::HttpClient admin("127.0.0.1", doors_.back()->port());
      const std::string admin_key = ReadFile(data + "/admin.key").value_or("");
      for (int k = 0; k < kKeys; ++k) {
        auto r = admin.Send("POST", "/v1/admin/keys",
                            "{\"owner\":\"partner\",\"tier\":\"partner\",\"scopes\":[\"search\"],"
                            "\"key\":\"" +
                                KeyName(k) + "\"}",
                            "application/json", admin_key);
        ASSERT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : "unreachable");
      }
    }
  }

  int Search(net::HttpClient& client, int key) {
    auto r = client.Send("GET", "/v1/search?q=hello", {}, "", KeyName(key));
    return r.ok() ? r->status : -1;
  }

  std::string Metrics(int door) {
    net::HttpClient client("127.0.0.1", doors_[door]->port());
    auto r = client.Send("GET", "/metrics");
    return r.ok() ? r->body : "";
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::RedisServer> redis_;
  std::vector<std::unique_ptr<testing::TweetsearchdProcess>> doors_;
};

TEST_F(FrontDoorsTest, TogetherTheyNeverAdmitMoreThanTheLimit) {
  std::array<std::atomic<int>, kKeys> admitted{};
  std::atomic<int> other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      net::HttpClient client("127.0.0.1", doors_[t % 2]->port());
      for (int i = 0; i < 15 * kKeys; ++i) {
        const int key = (i + t) % kKeys;
        const int status = Search(client, key);
        if (status == 200) {
          ++admitted[key];
        } else if (status != 429) {
          ++other;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(admitted[k].load(), kLimit) << KeyName(k);
  EXPECT_EQ(other.load(), 0);
  std::cout << "[ checked  ] 2 front doors, 4 clients, " << kKeys << " keys × 60 requests: exactly "
            << kLimit << " admitted per key\n";
}

TEST_F(FrontDoorsTest, RedisOutageMidLoadKeepsThemServingAndTheyRecover) {
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      net::HttpClient client("127.0.0.1", doors_[t]->port());
      for (int i = 0; !stop.load(); ++i) {
        const int status = Search(client, i % kKeys);
        if (status == 200 || status == 429) {
          ++answered;
        } else {
          ++failed;
        }
      }
    });
  }
  auto wait_for = [&](int count) {
    for (int i = 0; i < 1000 && answered.load() < count; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  wait_for(100);
  redis_->Stop();
  const int before = answered.load();
  wait_for(before + 200);
  EXPECT_GE(answered.load(), before + 200) << "the doors stopped answering without Redis";
  const std::string log_path = dir_.path() + "/door0.log";
  auto wait_for_log = [&](std::string_view text) {
    for (int i = 0; i < 1000; ++i) {  // the daemon looks once a second
      if (ReadFile(log_path).value_or("").find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  EXPECT_TRUE(wait_for_log("Redis is unreachable"));
  std::string metrics = Metrics(0);
  EXPECT_NE(metrics.find("tweetsearch_ratelimit_redis_up 0"), std::string::npos);

  ASSERT_TRUE(redis_->Start());
  EXPECT_TRUE(wait_for_log("Redis is back"));
  metrics = Metrics(0);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_NE(metrics.find("tweetsearch_ratelimit_redis_up 1"), std::string::npos) << metrics;
  EXPECT_EQ(failed.load(), 0);
}

}  // namespace
}  // namespace tweetsearch
