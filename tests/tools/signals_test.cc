// Signals to the real tweetsearchd: SIGHUP reloads the quota rules (a broken file is rejected
// and logged, the previous rules stay); SIGTERM stops it cleanly.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "aggregator/api_keys.h"
#include "common/file_util.h"
#include "net/http_client.h"
#include "tests/testing/corpus.h"
#include "tests/testing/process.h"

namespace tweetsearch {
namespace {

std::string Rules(int limit) {
  return "tiers: {demo: {search: [{name: demo_hourly, limit: " + std::to_string(limit) +
         ", window: 1h, algorithm: fixed_window}]}}\n";
}

TEST(SignalsTest, SighupReloadsQuotaRulesAndKeepsThemWhenTheFileIsBroken) {
  testing::TempDir dir;
  const std::string limits = dir.path() + "/limits.yaml";
  const std::string log = dir.path() + "/daemon.log";
  ASSERT_TRUE(WriteFileAtomically(limits, Rules(2)).ok());
  // The daemon also checks the file every second: whichever of that and the signal comes
  // first reloads, with the same outcome.
  testing::TweetsearchdProcess daemon(TWEETSEARCHD_PATH, dir.path() + "/data", log,
                                      {"--limits", limits});
  ASSERT_TRUE(daemon.up()) << ReadFile(log).value_or("");
  net::HttpClient client("127.0.0.1", daemon.port());
  auto search = [&] {
    auto r = client.Send("GET", "/v1/search?q=anything", {}, "", aggregator::kDemoKey);
    return r.ok() ? r->status : -1;
  };
  EXPECT_EQ(search(), 200);
  EXPECT_EQ(search(), 200);
  EXPECT_EQ(search(), 429);

  ASSERT_TRUE(WriteFileAtomically(limits, "tiers: [broken").ok());
  daemon.process().Signal(SIGHUP);
  std::string text;
  for (int i = 0; i < 500 && text.find("quota rules rejected") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    text = ReadFile(log).value_or("");
  }
  EXPECT_NE(text.find("quota rules rejected"), std::string::npos) << text;
  EXPECT_EQ(search(), 429);  // still the old rules

  ASSERT_TRUE(WriteFileAtomically(limits, Rules(10)).ok());
  daemon.process().Signal(SIGHUP);
  int status = 429;
  for (int i = 0; i < 500 && status == 429; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    status = search();
  }
  EXPECT_EQ(status, 200);

  daemon.process().Signal(SIGTERM);
  EXPECT_EQ(daemon.process().Wait(std::chrono::seconds(60)), 0) << ReadFile(log).value_or("");
}

}  // namespace
}  // namespace tweetsearch
