// The cluster shape against real processes: etcd, 2 storage partitions x 2
// replicas, 2 index partitions x 2 replicas, two front doors, all tweetsearchd
// processes on loopback, killed with real signals. Each test says what it did
// and what it checked.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "aggregator/http/http_client.h"
#include "common/strings.h"
#include "tests/testing/corpus.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/process.h"

namespace tweetsearch {
namespace {

using nlohmann::json;
constexpr const char* kKey = "demo-key-0123456789";
constexpr const char* kWords[] = {"love", "hate",  "good", "morning", "rain", "coffee", "#monday",
                                  "@ana", "music", "the",  "sun",     "work", "happy",  "sad"};

// Deterministic tweets with explicit ids, times and likes (so both shapes hold
// the same data).
std::string TweetLines(uint64_t first_id, int count) {
  std::string body;
  for (int i = 0; i < count; ++i) {
    const uint64_t id = first_id + static_cast<uint64_t>(i) * 7919;
    std::string text;
    for (int w = 0; w < 4 + static_cast<int>(id % 5); ++w) {
      text += StrCat(w == 0 ? "" : " ", kWords[(id / (w + 1) + w * 3) % std::size(kWords)]);
    }
    body += json{{"id", std::to_string(id)},
                 {"user_id", id % 97},
                 {"user_name", StrCat("user", id % 97)},
                 {"text", text},
                 {"created_at", StrCat("2026-0", 1 + id % 9, "-1", id % 10, "T10:00:00Z")},
                 {"likes", id % 50}}
                .dump();
    body += '\n';
  }
  return body;
}

struct Page {
  int status = 0;
  std::vector<std::string> ids;
  std::string next;
  uint64_t total = 0;
  json body;
};

Page Search(aggregator::HttpClient& client, const std::string& query, const std::string& sort,
            const std::string& token = "", int limit = 7, bool allow_partial = false) {
  std::string target =
      StrCat("/v1/search?api_dev_key=", kKey, "&search_terms=", aggregator::UrlEncode(query),
             "&sort=", sort, "&maximum_results_to_return=", limit);
  if (!token.empty()) target += "&page_token=" + aggregator::UrlEncode(token);
  if (allow_partial) target += "&allow_partial=true";
  Page page;
  absl::StatusOr<aggregator::HttpReply> reply = client.Send("GET", target);
  if (!reply.ok()) return page;
  page.status = reply->status;
  page.body = json::parse(reply->body, nullptr, false);
  if (reply->status != 200) return page;
  for (const json& r : page.body["results"]) page.ids.push_back(r["tweet_id"].get<std::string>());
  if (page.body["next_page_token"].is_string()) page.next = page.body["next_page_token"];
  page.total = page.body["total_hits"].get<uint64_t>();
  return page;
}

// Every page of a query, following the tokens; alternating between two clients
// when given.
std::vector<std::string> AllPages(aggregator::HttpClient& first, aggregator::HttpClient& second,
                                  const std::string& query, const std::string& sort) {
  std::vector<std::string> ids;
  std::string token;
  for (int page = 0; page < 1000; ++page) {
    Page p = Search(page % 2 == 0 ? first : second, query, sort, token);
    EXPECT_EQ(p.status, 200) << query << " page " << page << ": " << p.body.dump();
    if (p.status != 200) break;
    ids.insert(ids.end(), p.ids.begin(), p.ids.end());
    if (p.next.empty()) break;
    token = p.next;
  }
  return ids;
}

int Ingest(aggregator::HttpClient& client, const std::string& lines, json* answer = nullptr) {
  absl::StatusOr<aggregator::HttpReply> reply =
      client.Send("POST", StrCat("/v1/tweets?api_dev_key=", kKey), lines, "application/x-ndjson");
  if (!reply.ok()) return 0;
  if (answer != nullptr) *answer = json::parse(reply->body, nullptr, false);
  return reply->status;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::LocalClusterOptions options;
    options.tweetsearchd = TWEETSEARCHD_PATH;
    options.dir = dir_.path() + "/cluster";
    cluster_ = std::make_unique<testing::LocalCluster>(options);
    ASSERT_TRUE(cluster_->Start()) << "the cluster did not start; logs in " << options.dir;
  }

  aggregator::HttpClient Door(const std::string& name) {
    return aggregator::HttpClient("127.0.0.1", cluster_->http_port(name), std::chrono::seconds(60));
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::LocalCluster> cluster_;
};

const std::vector<std::string> kQueries = {
    "love", "good morning", "love OR hate", "coffee -rain", "#monday", "\"good morning\"", "the"};

TEST_F(ClusterTest, AnswersLikeOneProcessPageByPageAcrossBothFrontDoors) {
  // Did: ingest the same 3,000 tweets into the cluster (through a0) and into a
  // one-process tweetsearchd; page through 7 queries in all three sort modes, 7
  // results a page, the cluster alternating front doors page by page (one
  // door's page token used at the other). Checked: the cluster returns exactly
  // the one process's ids in the same order, page after page, with no repeats;
  // page 1's total_hits is the number of results when it says it is exact, and
  // never above it when it is a lower bound.
  testing::TweetsearchdProcess single(TWEETSEARCHD_PATH, dir_.path() + "/single",
                                      dir_.path() + "/single.log");
  ASSERT_TRUE(single.up());
  aggregator::HttpClient one("127.0.0.1", single.port());
  aggregator::HttpClient a0 = Door("a0"), a1 = Door("a1");
  const std::string lines = TweetLines(1'000'000, 3000);
  ASSERT_EQ(Ingest(a0, lines), 200);
  ASSERT_EQ(Ingest(one, lines), 200);
  for (const std::string sort : {"newest", "most_liked", "best_match"}) {
    for (const std::string& q : kQueries) {
      const std::vector<std::string> expected = AllPages(one, one, q, sort);
      const std::vector<std::string> got = AllPages(a0, a1, q, sort);
      EXPECT_EQ(got, expected) << q << " sorted by " << sort;
      EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), got.size()) << q;
      const Page first = Search(a0, q, sort);
      if (first.body["total_is_exact"].get<bool>()) {
        EXPECT_EQ(first.total, got.size()) << q << " " << sort;
      } else {
        EXPECT_LE(first.total, got.size()) << q << " " << sort;
      }
    }
  }
}

TEST_F(ClusterTest, SearchesSurviveTheLossOfAnIndexReplicaAndReportALostPartition) {
  // Did: ingest 2,000 tweets; run searches from 4 threads on both front doors;
  // SIGKILL index replica i0a in the middle; then SIGKILL i0b too (partition 0
  // has no replica left). Checked: while one replica of each partition lives,
  // every search answers 200 with the full total; with partition 0 gone, a
  // search is a 503, and with allow_partial=true a 200 with partial: true
  // naming partition 0 and only tweets of partition 1.
  aggregator::HttpClient a0 = Door("a0");
  ASSERT_EQ(Ingest(a0, TweetLines(5'000'000, 2000)), 200);
  const uint64_t expected = Search(a0, "love", "newest").total;
  ASSERT_GT(expected, 0u);
  std::atomic<bool> stop{false};
  std::atomic<int> searches{0}, failures{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, t] {
      aggregator::HttpClient c = Door(t % 2 == 0 ? "a0" : "a1");
      while (!stop) {
        Page p = Search(c, "love", "newest");
        searches++;
        if (p.status != 200 || p.total != expected) {
          failures++;
          ADD_FAILURE() << "status " << p.status << ", total " << p.total << " of " << expected
                        << ": " << p.body.dump();
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  cluster_->Signal("i0a", SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(4));  // past the lease: i0a leaves etcd
  stop = true;
  for (std::thread& t : load) t.join();
  EXPECT_EQ(failures.load(), 0) << "of " << searches.load() << " searches";
  EXPECT_GT(searches.load(), 20);

  cluster_->Signal("i0b", SIGKILL);
  Page refused = Search(a0, "love", "newest");
  EXPECT_EQ(refused.status, 503) << refused.body.dump();
  Page partial = Search(a0, "love", "newest", "", 100, /*allow_partial=*/true);
  ASSERT_EQ(partial.status, 200) << partial.body.dump();
  EXPECT_TRUE(partial.body["partial"].get<bool>());
  EXPECT_EQ(partial.body["missing_partitions"], json::array({0}));
  EXPECT_GT(partial.total, 0u);
  EXPECT_LT(partial.total, expected);
}

TEST_F(ClusterTest, KillingAStoragePrimaryDuringIngestLosesNoAcknowledgedTweet) {
  // Did: ingest batches of 100 tweets through a0 without pause; after 10
  // batches SIGKILL the primary of storage partition 0; keep ingesting 30 more
  // batches; restart the killed replica, let it catch up, then SIGKILL the
  // primary that took over, so the restarted replica must serve partition 0
  // alone. Checked: a new primary takes over with a higher epoch; ingest goes
  // on (every batch is acknowledged, none rejected); after both failovers every
  // acknowledged tweet is still readable and searchable, exactly once.
  aggregator::HttpClient a0 = Door("a0");
  const std::string first_primary = cluster_->StoragePrimary(0);
  ASSERT_FALSE(first_primary.empty());
  std::vector<std::string> acked;
  for (int batch = 0; batch < 40; ++batch) {
    if (batch == 10) cluster_->Signal(first_primary, SIGKILL);
    json answer;
    ASSERT_EQ(Ingest(a0, TweetLines(9'000'000 + batch * 100'000, 100), &answer), 200) << batch;
    EXPECT_EQ(answer["accepted"], 100) << "batch " << batch << ": " << answer.dump();
    for (const json& r : answer["results"]) {
      if (r.value("status", "") == "accepted") acked.push_back(r["tweet_id"].get<std::string>());
    }
  }
  const std::string second_primary = cluster_->StoragePrimary(0);
  EXPECT_FALSE(second_primary.empty());
  EXPECT_NE(second_primary, first_primary);

  cluster_->Restart(first_primary);
  std::this_thread::sleep_for(std::chrono::seconds(5));  // rejoins as secondary, catches up
  cluster_->Signal(second_primary, SIGKILL);
  std::string third;
  for (int i = 0; i < 100 && (third.empty() || third == second_primary); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    third = cluster_->StoragePrimary(0);
  }
  EXPECT_EQ(third, first_primary) << "the caught-up replica should take over";

  aggregator::HttpClient a1 = Door("a1");
  size_t missing = 0;
  for (const std::string& id : acked) {
    absl::StatusOr<aggregator::HttpReply> r =
        a1.Send("GET", StrCat("/v1/tweets/", id, "?api_dev_key=", kKey));
    if (!r.ok() || r->status != 200) ++missing;
  }
  EXPECT_EQ(missing, 0u) << "of " << acked.size() << " acknowledged tweets";
  // Searchable exactly once: every page of a query matching all of them.
  std::vector<std::string> all = AllPages(a0, a1,
                                          "love OR hate OR good OR morning OR rain OR "
                                          "coffee OR #monday OR @ana OR music OR the OR sun OR "
                                          "work OR happy OR sad",
                                          "newest");
  std::set<std::string> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size());
  EXPECT_EQ(unique.size(), acked.size());
}

}  // namespace
}  // namespace tweetsearch
