// The cluster shape against real processes: etcd, 2 storage partitions x 2
// replicas, 2 index partitions x 2 replicas, two builders, two front doors,
// all tweetsearchd processes on loopback, killed and frozen with real signals;
// tweetctl run as a process for rebuilds and status. Each test says what it
// did and what it checked.
#include <gtest/gtest.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "cluster/topology.h"
#include "common/file_util.h"
#include "common/strings.h"
#include "net/grpc.h"
#include "net/http_client.h"
#include "net/sse_client.h"
#include "proto/cluster.grpc.pb.h"
#include "tests/testing/corpus.h"
#include "tests/testing/local_cluster.h"
#include "tests/testing/network_lab.h"
#include "tests/testing/process.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/wait.h"

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

Page Search(net::HttpClient& client, const std::string& query, const std::string& sort,
            const std::string& token = "", int limit = 7, bool allow_partial = false) {
  std::string target =
      StrCat("/v1/search?api_dev_key=", kKey, "&search_terms=", net::UrlEncode(query),
             "&sort=", sort, "&maximum_results_to_return=", limit);
  if (!token.empty()) target += "&page_token=" + net::UrlEncode(token);
  if (allow_partial) target += "&allow_partial=true";
  Page page;
  absl::StatusOr<net::HttpReply> reply = client.Send("GET", target);
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
std::vector<std::string> AllPages(net::HttpClient& first, net::HttpClient& second,
                                  const std::string& query, const std::string& sort,
                                  int page_size = 7) {
  std::vector<std::string> ids;
  std::string token;
  for (int page = 0; page < 1000; ++page) {
    Page p = Search(page % 2 == 0 ? first : second, query, sort, token, page_size);
    EXPECT_EQ(p.status, 200) << query << " page " << page << ": " << p.body.dump();
    if (p.status != 200) break;
    ids.insert(ids.end(), p.ids.begin(), p.ids.end());
    if (p.next.empty()) break;
    token = p.next;
  }
  return ids;
}

// The daily counts of `query` over the months TweetLines stamps.
json Counts(net::HttpClient& client, const std::string& query, const std::string& more = "") {
  absl::StatusOr<net::HttpReply> reply = client.Send(
      "GET", StrCat("/v1/counts?api_dev_key=", kKey, "&granularity=day&since=2026-01-01T00:00:00Z",
                    "&until=2026-10-01T00:00:00Z&search_terms=", net::UrlEncode(query), more));
  if (!reply.ok()) return json{{"error", reply.status().ToString()}};
  return json::parse(reply->body, nullptr, false);
}

int Ingest(net::HttpClient& client, const std::string& lines, json* answer = nullptr) {
  absl::StatusOr<net::HttpReply> reply =
      client.Send("POST", StrCat("/v1/tweets?api_dev_key=", kKey), lines, "application/x-ndjson");
  if (!reply.ok()) return 0;
  if (answer != nullptr) *answer = json::parse(reply->body, nullptr, false);
  return reply->status;
}

// The value of one sample of a front door's /metrics (NaN when absent).
double Metric(net::HttpClient& door, const std::string& sample) {
  absl::StatusOr<net::HttpReply> reply = door.Send("GET", "/metrics");
  if (!reply.ok() || reply->status != 200) return std::nan("");
  const std::string prefix = sample + " ";
  for (absl::string_view line : absl::StrSplit(reply->body, '\n')) {
    if (!absl::StartsWith(line, prefix)) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(prefix.size()), &value)) return value;
  }
  return std::nan("");
}

// The ids an ingest answer says were accepted.
std::vector<std::string> Acknowledged(const json& answer) {
  std::vector<std::string> ids;
  for (const json& r : answer["results"]) {
    if (r.value("status", "") == "accepted") ids.push_back(r["tweet_id"].get<std::string>());
  }
  return ids;
}

using testing::WaitUntil;

// The lines of TweetLines(first_id, count), by the storage partition of their tweet (of two).
std::array<std::vector<std::string>, 2> LinesByPartition(uint64_t first_id, int count) {
  std::array<std::vector<std::string>, 2> out;
  for (absl::string_view line :
       absl::StrSplit(TweetLines(first_id, count), '\n', absl::SkipEmpty())) {
    const uint64_t id = std::stoull(json::parse(line)["id"].get<std::string>());
    out[cluster::StoragePartitionOf(id, 2)].push_back(StrCat(line, "\n"));
  }
  return out;
}

class ClusterTest : public ::testing::Test {
 protected:
  // Tests that need another cluster shape change the options here.
  virtual void Configure(testing::LocalClusterOptions&) {}

  void SetUp() override {
    testing::LocalClusterOptions options;
    options.tweetsearchd = TWEETSEARCHD_PATH;
    options.dir = dir_.path() + "/cluster";
    Configure(options);
    if (HasFatalFailure() || IsSkipped()) return;
    cluster_ = std::make_unique<testing::LocalCluster>(options);
    ASSERT_TRUE(cluster_->Start()) << "the cluster did not start; logs in " << options.dir;
  }

  net::HttpClient Door(const std::string& name) {
    return net::HttpClient(cluster_->http_host(name), cluster_->http_port(name),
                           std::chrono::seconds(60));
  }

  // Runs tweetctl with `args` (and the cluster's topology); its exit code and output.
  std::pair<int, std::string> Tweetctl(std::vector<std::string> args) {
    const std::string log = dir_.path() + StrCat("/tweetctl", ++tweetctl_runs_, ".log");
    std::vector<std::string> argv = {TWEETCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--topology", cluster_->topology_path()});
    std::optional<int> code = testing::RunCommand(argv, log, std::chrono::minutes(5));
    return {code.value_or(-1), ReadFile(log).value_or("")};
  }

  // What `tweetctl status --json` reports for `node` (an empty object when absent).
  json TweetctlStatusOf(const std::string& node) {
    auto [code, out] = Tweetctl({"status", "--json"});
    json j = json::parse(out, nullptr, false);
    if (j.is_discarded()) return json::object();
    for (const json& p : j["processes"]) {
      if (p["node"] == node) return p;
    }
    return json::object();
  }

  // The state tweetctl status reports for `node`.
  std::string StateOf(const std::string& node) {
    return TweetctlStatusOf(node).value("state", std::string());
  }

  bool WaitForState(const std::string& node, const std::string& state,
                    std::chrono::seconds timeout = std::chrono::seconds(60)) {
    // "serving, leader" is serving
    return WaitUntil([&] { return StateOf(node).starts_with(state); }, timeout,
                     std::chrono::milliseconds(300));
  }

  // Every acknowledged id is readable through a1 and found exactly once by a
  // search matching every test tweet.
  void ExpectEachExactlyOnce(const std::vector<std::string>& acked, int page_size = 7) {
    net::HttpClient a0 = Door("a0"), a1 = Door("a1");
    size_t missing = 0;
    for (const std::string& id : acked) {
      absl::StatusOr<net::HttpReply> r =
          a1.Send("GET", StrCat("/v1/tweets/", id, "?api_dev_key=", kKey));
      if (!r.ok() || r->status != 200) ++missing;
    }
    EXPECT_EQ(missing, 0u) << "of " << acked.size() << " acknowledged tweets";
    std::vector<std::string> all = AllPages(a0, a1, kEveryWord, "newest", page_size);
    std::set<std::string> unique(all.begin(), all.end());
    EXPECT_EQ(unique.size(), all.size()) << "a tweet is found twice";
    EXPECT_EQ(unique, std::set<std::string>(acked.begin(), acked.end()));
  }

  // SIGKILLs the primary of storage partition p; the replica that takes over
  // within 20 s ("" if none).
  std::string KillPrimaryAndWaitForTheNext(int p) {
    const std::string killed = cluster_->StoragePrimary(p);
    cluster_->Signal(killed, SIGKILL);
    std::string next;
    const bool taken_over = WaitUntil(
        [&] {
          next = cluster_->StoragePrimary(p);
          return !next.empty() && next != killed;
        },
        std::chrono::seconds(20), std::chrono::milliseconds(200));
    return taken_over ? next : "";
  }

  // Threads searching "love" until Stop(), counting searches and those that
  // failed or did not find `expected` tweets (each a test failure).
  struct SearchLoad {
    std::atomic<bool> stop{false};
    std::atomic<int> searches{0}, failures{0};
    std::vector<std::thread> threads;
    void Stop() {
      stop = true;
      for (std::thread& t : threads) t.join();
      threads.clear();
    }
    ~SearchLoad() { Stop(); }
  };
  // Starts `threads` threads of `load`, through `doors` in turn.
  void StartSearching(SearchLoad& load, int threads, const std::vector<std::string>& doors,
                      uint64_t expected) {
    for (int t = 0; t < threads; ++t) {
      load.threads.emplace_back([this, &load, door = doors[t % doors.size()], expected] {
        net::HttpClient c = Door(door);
        while (!load.stop) {
          Page p = Search(c, "love", "newest");
          load.searches++;
          if (p.status != 200 || p.total != expected) {
            load.failures++;
            ADD_FAILURE() << "status " << p.status << ", total " << p.total << " of " << expected
                          << ": " << p.body.dump();
          }
        }
      });
    }
  }

  // Until `door` answers a search (its view of the serving replicas refreshes
  // twice a second).
  void WaitUntilSearches(net::HttpClient& door) {
    if (!WaitUntil([&] { return Search(door, "love", "newest").status == 200; })) {
      ADD_FAILURE() << "the front door does not answer searches";
    }
  }

  // Until both front doors answer a search (their view of the serving
  // replicas refreshes twice a second).
  void WaitUntilBothDoorsSearch() {
    net::HttpClient a0 = Door("a0"), a1 = Door("a1");
    if (!WaitUntil([&] {
          return Search(a0, "love", "newest").status == 200 &&
                 Search(a1, "love", "newest").status == 200;
        })) {
      ADD_FAILURE() << "the front doors do not answer searches";
    }
  }

  // The admin key front door `door` made on its first start.
  std::string AdminKeyOf(const std::string& door) {
    return ReadFile(StrCat(cluster_->dir(), "/", door, "/admin.key")).value_or("");
  }
  // The HTTP status of a search for "love" with `key` through `door`.
  int SearchStatus(net::HttpClient& door, const std::string& key) {
    auto r = door.Send("GET", "/v1/search?search_terms=love", {}, "", key);
    return r.ok() ? r->status : -1;
  }
  // Whether `door` lists a key whose prefix is `prefix` (asked with its own admin key).
  bool Lists(const std::string& door, const std::string& prefix) {
    net::HttpClient c = Door(door);
    auto r = c.Send("GET", "/v1/admin/keys", {}, "", AdminKeyOf(door));
    if (!r.ok() || r->status != 200) return false;
    for (const json& k : json::parse(r->body, nullptr, false).value("keys", json::array())) {
      if (k.value("prefix", "") == prefix) return true;
    }
    return false;
  }

  static constexpr const char* kEveryWord =
      "love OR hate OR good OR morning OR rain OR coffee OR #monday OR @ana OR music OR the OR "
      "sun OR work OR happy OR sad";
  int tweetctl_runs_ = 0;

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
  // never above it when it is a lower bound; each query's daily counts from
  // either front door are the one process's.
  testing::TweetsearchdProcess single(TWEETSEARCHD_PATH, dir_.path() + "/single",
                                      dir_.path() + "/single.log");
  ASSERT_TRUE(single.up());
  net::HttpClient one("127.0.0.1", single.port());
  net::HttpClient a0 = Door("a0"), a1 = Door("a1");
  const std::string lines = TweetLines(1'000'000, 3000);
  ASSERT_EQ(Ingest(a0, lines), 200);
  ASSERT_EQ(Ingest(one, lines), 200);
  for (const std::string sort : {"newest", "most_liked", "best_match"}) {
    for (const std::string& q : kQueries) {
      const std::vector<std::string> expected = AllPages(one, one, q, sort);
      const std::vector<std::string> got = AllPages(a0, a1, q, sort);
      EXPECT_EQ(got, expected) << q << " sorted by " << sort;
      EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), got.size()) << q;
      // Page 1 again (best match: scored with the statistics a0 kept, nothing having changed).
      const Page first = Search(a0, q, sort);
      EXPECT_EQ(first.ids,
                std::vector<std::string>(expected.begin(),
                                         expected.begin() + std::min<size_t>(7, expected.size())))
          << q << " " << sort;
      if (first.body["total_is_exact"].get<bool>()) {
        EXPECT_EQ(first.total, got.size()) << q << " " << sort;
      } else {
        EXPECT_LE(first.total, got.size()) << q << " " << sort;
      }
    }
  }
  // Tweets that change every query's statistics, through the other front door: a0 may score
  // one search with the statistics it kept (that search's answers show it the partitions
  // changed; docs/cluster.md, "Searches"); after it, best match is again exactly the one
  // process's, page after page.
  const std::string more = TweetLines(2'000'000, 1500);
  ASSERT_EQ(Ingest(a1, more), 200);
  ASSERT_EQ(Ingest(one, more), 200);
  Search(a0, kQueries[0], "best_match");
  for (const std::string& q : kQueries) {
    EXPECT_EQ(AllPages(a0, a1, q, "best_match"), AllPages(one, one, q, "best_match")) << q;
  }
  // Counts over time: each partition counts its tweets, the front door sums them per bucket.
  for (const std::string& q : kQueries) {
    const json expected = Counts(one, q);
    ASSERT_TRUE(expected.contains("counts")) << expected.dump();
    EXPECT_GT(expected["total_tweet_count"].get<uint64_t>(), 0u) << q;
    for (net::HttpClient* door : {&a0, &a1}) {
      const json got = Counts(*door, q);
      EXPECT_EQ(got["counts"], expected["counts"]) << q;
      EXPECT_EQ(got["total_tweet_count"], expected["total_tweet_count"]) << q;
    }
  }
}

TEST_F(ClusterTest, SearchesSurviveTheLossOfAnIndexReplicaAndReportALostPartition) {
  // Did: ingest 2,000 tweets; run searches from 4 threads on both front doors;
  // SIGKILL index replica i0a in the middle; then SIGKILL i0b too (partition 0
  // has no replica left). Checked: while one replica of each partition lives,
  // every search answers 200 with the full total; with partition 0 gone, a
  // search is a 503, and with allow_partial=true a 200 with partial: true
  // naming partition 0 and only tweets of partition 1; counts over time alike.
  net::HttpClient a0 = Door("a0");
  ASSERT_EQ(Ingest(a0, TweetLines(5'000'000, 2000)), 200);
  const uint64_t expected = Search(a0, "love", "newest").total;
  ASSERT_GT(expected, 0u);
  SearchLoad load;
  StartSearching(load, 4, {"a0", "a1"}, expected);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  cluster_->Signal("i0a", SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(4));  // past the lease: i0a leaves etcd
  load.Stop();
  EXPECT_EQ(load.failures.load(), 0) << "of " << load.searches.load() << " searches";
  EXPECT_GT(load.searches.load(), 20);

  cluster_->Signal("i0b", SIGKILL);
  Page refused = Search(a0, "love", "newest");
  EXPECT_EQ(refused.status, 503) << refused.body.dump();
  Page partial = Search(a0, "love", "newest", "", 100, /*allow_partial=*/true);
  ASSERT_EQ(partial.status, 200) << partial.body.dump();
  EXPECT_TRUE(partial.body["partial"].get<bool>());
  EXPECT_EQ(partial.body["missing_partitions"], json::array({0}));
  EXPECT_GT(partial.total, 0u);
  EXPECT_LT(partial.total, expected);
  // Counts over time follow the same rule.
  absl::StatusOr<net::HttpReply> counts =
      a0.Send("GET", StrCat("/v1/counts?api_dev_key=", kKey, "&search_terms=love&granularity=day",
                            "&since=2026-01-01T00:00:00Z&until=2026-10-01T00:00:00Z"));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->status, 503) << counts->body;
  const json partial_counts = Counts(a0, "love", "&allow_partial=true");
  EXPECT_TRUE(partial_counts["partial"].get<bool>()) << partial_counts.dump();
  EXPECT_EQ(partial_counts["missing_partitions"], json::array({0}));
  EXPECT_EQ(partial_counts["total_tweet_count"], partial.total);
}

TEST_F(ClusterTest, AFrozenIndexReplicaIsEjectedAndTakenBackOnceItAnswers) {
  // Did: ingest 2,000 tweets; 100 searches through a0 (its replicas' latencies
  // learnt); SIGSTOP index replica i0a and search from 2 threads through a0
  // until a0's /metrics says i0a is ejected; SIGCONT i0a, wait until it serves
  // and its ejection is over, then 40 more searches. Checked: every search
  // answered 200 with the full total (the calls stuck at i0a were hedged to
  // i0b), i0a was hedged away from and ejected while frozen; after it woke it
  // was taken back (ejected at most once more, while it caught up).
  net::HttpClient a0 = Door("a0");
  ASSERT_EQ(Ingest(a0, TweetLines(6'000'000, 2000)), 200);
  const uint64_t expected = Search(a0, "love", "newest").total;
  ASSERT_GT(expected, 0u);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(Search(a0, "love", "newest").status, 200);
  const std::string i0a = R"(role="index",partition="0",node="i0a")";
  const std::string ejected = "tweetsearch_replica_ejected{" + i0a + "}";
  const std::string ejections = "tweetsearch_replica_ejections_total{" + i0a + "}";
  ASSERT_EQ(Metric(a0, ejected), 0);
  ASSERT_EQ(Metric(a0, ejections), 0);

  SearchLoad load;
  cluster_->Signal("i0a", SIGSTOP);
  StartSearching(load, 2, {"a0"}, expected);
  bool seen_ejected = false;
  for (int i = 0; i < 200 && !seen_ejected; ++i) {
    seen_ejected = Metric(a0, ejected) == 1;
    if (!seen_ejected) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  load.Stop();
  cluster_->Signal("i0a", SIGCONT);
  EXPECT_TRUE(seen_ejected) << "i0a was not ejected while frozen";
  EXPECT_EQ(load.failures.load(), 0) << "of " << load.searches.load() << " searches";
  EXPECT_GE(Metric(a0, "tweetsearch_replica_hedges_total{" + i0a + "}"), 1);
  const double ejections_frozen = Metric(a0, ejections);
  EXPECT_GE(ejections_frozen, 1);

  ASSERT_TRUE(WaitForState("i0a", "serving"));
  for (int i = 0; i < 600 && Metric(a0, ejected) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(Metric(a0, ejected), 0) << "i0a's ejection did not end";
  // The ejection may still have been doubled by calls that reached i0a between
  // its ejections, before it woke: count from here.
  const double ejections_awake = Metric(a0, ejections);
  for (int i = 0; i < 40; ++i) {
    Page p = Search(a0, "love", "newest");
    EXPECT_EQ(p.status, 200);
    EXPECT_EQ(p.total, expected);
  }
  // A replica just woken can lag its partner's p95 for a moment (it catches up on the
  // changes it missed) and be ejected once more, for a second: that is the rule at work. What
  // must not happen is that it stays out: with searches going on, it is taken back.
  EXPECT_TRUE(WaitUntil([&] {
    EXPECT_EQ(Search(a0, "love", "newest").total, expected);
    return Metric(a0, ejected) == 0;
  })) << "i0a stayed ejected after it woke";
  EXPECT_LE(Metric(a0, ejections) - ejections_awake, 1) << "i0a was ejected again and again";
}

TEST_F(ClusterTest, RebuildingTheLastServingReplicaOfAPartitionNeedsConsent) {
  // Did: ingest 500 tweets; tweetctl rebuild of serving i0a without --force,
  // then SIGKILL i0b and rebuild i0a with --force, then with --force
  // --yes-take-offline. Checked: the first two are refused (exit 4) saying
  // why, and i0a keeps serving every search meanwhile; the third says the
  // partition is offline during the rebuild, ends with i0a serving, and
  // searches find what they found before.
  net::HttpClient a0 = Door("a0");
  ASSERT_EQ(Ingest(a0, TweetLines(8'000'000, 500)), 200);
  const std::vector<std::string> before = AllPages(a0, a0, "love", "newest");
  ASSERT_FALSE(before.empty());
  const std::vector<std::string> rebuild_i0a = {"rebuild", "--index-partition", "0", "--replica",
                                                "a"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = rebuild_i0a;
    args.insert(args.end(), extra.begin(), extra.end());
    return Tweetctl(args);
  };
  auto [unforced, unforced_out] = with({});
  EXPECT_EQ(unforced, 4) << unforced_out;
  EXPECT_TRUE(absl::StrContains(unforced_out, "add --force")) << unforced_out;

  cluster_->Signal("i0b", SIGKILL);
  auto [forced, forced_out] = with({"--force"});
  EXPECT_EQ(forced, 4) << forced_out;
  EXPECT_TRUE(absl::StrContains(forced_out, "only serving replica of index partition 0"))
      << forced_out;
  EXPECT_TRUE(absl::StrContains(forced_out, "--yes-take-offline")) << forced_out;
  EXPECT_EQ(StateOf("i0a"), "serving");
  EXPECT_EQ(AllPages(a0, a0, "love", "newest"), before);

  auto [taken, taken_out] = with({"--force", "--yes-take-offline"});
  EXPECT_EQ(taken, 0) << taken_out;
  EXPECT_TRUE(absl::StrContains(taken_out, "the partition is offline")) << taken_out;
  EXPECT_TRUE(absl::StrContains(taken_out, "is rebuilt, caught up and serving")) << taken_out;
  EXPECT_EQ(StateOf("i0a"), "serving");
  WaitUntilSearches(a0);
  EXPECT_EQ(AllPages(a0, a0, "love", "newest"), before);
}

TEST_F(ClusterTest, BehindTheLoadBalancerALostFrontDoorIsNoError) {
  // Did: start HAProxy with the shipped configuration (data/haproxy-cluster.cfg)
  // in front of a0 and a1; ingest 1,000 tweets through it; search and read a
  // tweet from 4 threads through it; SIGKILL a0 once 100 searches were
  // answered, and go on until 400 more were. Checked: every search and read
  // through the one address answered 200 with the full total.
  if (!std::filesystem::exists("/usr/sbin/haproxy")) {
    GTEST_SKIP() << "HAProxy is not installed (scripts/install-deps.sh installs it)";
  }
  const int port = testing::FreeLoopbackPort();
  std::string config = ReadFile(TWEETSEARCH_SOURCE_DIR "/data/haproxy-cluster.cfg").value_or("");
  ASSERT_FALSE(config.empty());
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"@BIND@", StrCat("127.0.0.1:", port)},
           {"@A0@", StrCat("127.0.0.1:", cluster_->http_port("a0"))},
           {"@A1@", StrCat("127.0.0.1:", cluster_->http_port("a1"))}}) {
    config = absl::StrReplaceAll(config, {{from, to}});
  }
  const std::string config_path = dir_.path() + "/haproxy.cfg";
  ASSERT_TRUE(WriteFileAtomically(config_path, config).ok());
  testing::ChildProcess haproxy({"/usr/sbin/haproxy", "-db", "-f", config_path},
                                dir_.path() + "/haproxy.log");
  net::HttpClient lb("127.0.0.1", std::to_string(port), std::chrono::seconds(60));
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = Search(lb, "love", "newest").status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(up) << ReadFile(dir_.path() + "/haproxy.log").value_or("");
  json ingested;
  ASSERT_EQ(Ingest(lb, TweetLines(9'000'000, 1000), &ingested), 200);
  const std::string one_id = ingested["results"][0]["tweet_id"];
  const uint64_t expected = Search(lb, "love", "newest").total;
  ASSERT_GT(expected, 0u);

  std::atomic<bool> stop{false};
  std::atomic<int> searches{0}, failures{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&] {
      net::HttpClient c("127.0.0.1", std::to_string(port), std::chrono::seconds(60));
      while (!stop) {
        Page p = Search(c, "love", "newest");
        absl::StatusOr<net::HttpReply> read =
            c.Send("GET", StrCat("/v1/tweets/", one_id, "?api_dev_key=", kKey));
        searches++;
        if (p.status != 200 || p.total != expected || !read.ok() || read->status != 200) {
          failures++;
          ADD_FAILURE() << "search " << p.status << " (total " << p.total << " of " << expected
                        << "), read " << (read.ok() ? read->status : 0);
        }
      }
    });
  }
  auto wait_for = [&](int n) {
    for (int i = 0; i < 3000 && searches.load() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  wait_for(100);
  cluster_->Signal("a0", SIGKILL);
  const int at_kill = searches.load();
  wait_for(at_kill + 400);
  stop = true;
  for (std::thread& t : load) t.join();
  EXPECT_GE(searches.load(), at_kill + 400);
  EXPECT_EQ(failures.load(), 0) << "of " << searches.load() << " searches and reads";
}

TEST_F(ClusterTest, SearchesStayCompleteThroughAnEtcdOutageLongerThanTheLeases) {
  // Did: ingest 2,000 tweets; search from 2 threads through a0 and 2 through
  // a1; freeze etcd (SIGSTOP) for twice the lease TTL, so every lease lapses;
  // wake it, and go on for about half as long again. Checked: every search
  // answered 200
  // with the full total, while etcd was frozen and after it came back with no
  // lease alive (the front doors keep asking the index replicas that keep
  // answering); then every index replica is listed as serving again.
  net::HttpClient a0 = Door("a0");
  ASSERT_EQ(Ingest(a0, TweetLines(10'000'000, 2000)), 200);
  const uint64_t expected = Search(a0, "love", "newest").total;
  ASSERT_GT(expected, 0u);
  SearchLoad load;
  StartSearching(load, 4, {"a0", "a1"}, expected);
  std::atomic<int>& searches = load.searches;
  const int before = searches.load();
  cluster_->Signal("etcd", SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(6));  // the outage: twice the 3 s lease
  const int during = searches.load() - before;
  cluster_->Signal("etcd", SIGCONT);
  // Back, etcd expires the lapsed leases (the members vanish) and the processes
  // put their keys back on new ones: search on for about as long as half the
  // outage (by the rate seen during it), which spans that.
  const int back = searches.load();
  for (int i = 0; i < 3000 && searches.load() < back + during / 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  load.Stop();
  EXPECT_GT(during, 20);
  EXPECT_GE(searches.load(), back + during / 2);
  EXPECT_EQ(load.failures.load(), 0) << "of " << searches.load() << " searches";
  for (int i = 0; i < 300 && cluster_->ServingIndexNodes().size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(cluster_->ServingIndexNodes().size(), 4u) << "the index replicas did not come back";
}

TEST_F(ClusterTest, WritesAreAcknowledgedThroughAnEtcdOutageLongerThanTheLeases) {
  // Did: ingest batches of 20 tweets in a loop through a0 and through a1; freeze etcd for
  // twice the lease TTL; wake it and write on for about as many batches again as half the
  // outage saw. Checked: every batch was acknowledged in full, during the outage (the
  // primaries, whose leases etcd no longer renews, write on with their secondaries) and after
  // it (when etcd expires their leases they step down and the partitions elect again: the
  // front door's retry covers the change); batches went on being acknowledged once every lease
  // had lapsed; every acknowledged tweet is found exactly once.
  // The slowest batch of each phase is printed.
  struct Writer {
    std::vector<std::string> acked;
    int batches = 0;
    int failures = 0;
    double slowest_ms[2] = {0, 0};  // while etcd is frozen, and after
  };
  std::atomic<bool> stop{false};
  std::atomic<int> phase{0};  // 0 before the freeze, 1 frozen, 2 after
  std::atomic<int> batches{0};
  Writer writers[2];
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      net::HttpClient door = Door(w == 0 ? "a0" : "a1");
      Writer& me = writers[w];
      for (int batch = 0; !stop; ++batch) {
        const int in_phase = phase.load();
        const auto start = std::chrono::steady_clock::now();
        json answer;
        const int status =
            Ingest(door, TweetLines(20'000'000 + w * 5'000'000 + batch * 1000, 20), &answer);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (in_phase > 0) me.slowest_ms[in_phase - 1] = std::max(me.slowest_ms[in_phase - 1], ms);
        ++me.batches;
        batches++;
        if (status != 200 || answer.value("accepted", 0) != 20) {
          ++me.failures;
          ADD_FAILURE() << "phase " << in_phase << ", status " << status << ": " << answer.dump();
        }
        for (const std::string& id : Acknowledged(answer)) me.acked.push_back(id);
      }
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return batches.load() >= 10; }));
  phase = 1;
  const int before = batches.load();
  cluster_->Signal("etcd", SIGSTOP);
  // The outage: twice the 3 s lease. Every lease counts as lapsed 2 s after its last renewal
  // (the TTL less a second), at most 2.75 s into the outage: the second half of it is spent
  // without any held lease.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const int lapsed = batches.load();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const int during = batches.load() - before;
  const int without_leases = batches.load() - lapsed;
  phase = 2;
  cluster_->Signal("etcd", SIGCONT);
  const int back = batches.load();
  EXPECT_TRUE(WaitUntil([&] { return batches.load() >= back + std::max(10, during / 2); },
                        std::chrono::seconds(60)));
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_GE(without_leases, 5) << "writes stalled once the leases lapsed";
  std::vector<std::string> acked;
  for (const Writer& w : writers) {
    EXPECT_EQ(w.failures, 0);
    acked.insert(acked.end(), w.acked.begin(), w.acked.end());
    std::printf("writer: %d batches; slowest while etcd was frozen %.0f ms, after %.0f ms\n",
                w.batches, w.slowest_ms[0], w.slowest_ms[1]);
  }
  std::printf("%d batches while etcd was frozen, %d of them once no lease was held\n", during,
              without_leases);
  ExpectEachExactlyOnce(acked, /*page_size=*/100);
}

TEST_F(ClusterTest, AKeyCreatedOrRevokedOnOneFrontDoorTakesEffectOnTheOther) {
  // Did: create a key on a0, search with it through a1; revoke it on a1, search with it
  // through a0; make a key with an Idempotency-Key on a0 and send the request again to a1;
  // freeze etcd and create another. Checked: a1 accepts the key and a0 refuses it once revoked,
  // each within the wait (the times are printed); each front door's admin key works on the
  // other; the retry answers the key the first attempt made; while etcd is frozen the keys in
  // force still work and a new key is a 503.
  net::HttpClient a0 = Door("a0"), a1 = Door("a1");
  auto created =
      a0.Send("POST", "/v1/admin/keys", R"({"owner":"ana","tier":"free","scopes":["search"]})",
              "application/json", AdminKeyOf("a0"));
  ASSERT_TRUE(created.ok() && created->status == 201) << (created.ok() ? created->body : "");
  const std::string key = json::parse(created->body).value("key", "");
  ASSERT_FALSE(key.empty()) << created->body;
  EXPECT_EQ(SearchStatus(a0, key), 200);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return SearchStatus(a1, key) == 200; }, std::chrono::seconds(10),
                        std::chrono::milliseconds(10)))
      << "a1 never accepted the key made on a0";
  const auto accepted = std::chrono::steady_clock::now() - start;

  // a0's admin key is a key of the cluster, so a1 accepts it too.
  auto listed = a1.Send("GET", "/v1/admin/keys", {}, "", AdminKeyOf("a0"));
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->status, 200) << listed->body;

  auto revoked =
      a1.Send("DELETE", StrCat("/v1/admin/keys/", key.substr(0, 10)), {}, "", AdminKeyOf("a1"));
  ASSERT_TRUE(revoked.ok());
  ASSERT_EQ(revoked->status, 200) << revoked->body;
  EXPECT_EQ(SearchStatus(a1, key), 401);
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return SearchStatus(a0, key) == 401; }, std::chrono::seconds(10),
                        std::chrono::milliseconds(10)))
      << "a0 kept accepting the key revoked on a1";
  const auto refused = std::chrono::steady_clock::now() - start;
  std::printf(
      "a key took effect on the other front door after %.0f ms; its revocation after "
      "%.0f ms\n",
      std::chrono::duration<double, std::milli>(accepted).count(),
      std::chrono::duration<double, std::milli>(refused).count());

  // A key made with an Idempotency-Key, its answer lost, and the request sent again to the
  // other front door at once: the same key, made once.
  const std::string body = R"({"owner":"cy","tier":"free","scopes":["search"]})";
  auto first = a0.Send("POST", "/v1/admin/keys", body, "application/json", AdminKeyOf("a0"),
                       {{"Idempotency-Key", "make-cy"}});
  auto retried = a1.Send("POST", "/v1/admin/keys", body, "application/json", AdminKeyOf("a0"),
                         {{"Idempotency-Key", "make-cy"}});
  ASSERT_TRUE(first.ok() && retried.ok());
  ASSERT_EQ(first->status, 201) << first->body;
  EXPECT_EQ(retried->status, 201) << retried->body;
  EXPECT_EQ(retried->body, first->body);
  EXPECT_EQ(retried->headers["idempotent-replayed"], "true");

  cluster_->Signal("etcd", SIGSTOP);
  EXPECT_EQ(SearchStatus(a1, kKey), 200);  // the demo key, read before the freeze
  auto during =
      a0.Send("POST", "/v1/admin/keys", R"({"owner":"bo","tier":"free","scopes":["search"]})",
              "application/json", AdminKeyOf("a0"));
  cluster_->Signal("etcd", SIGCONT);
  ASSERT_TRUE(during.ok());
  EXPECT_EQ(during->status, 503) << during->body;
}

// Front doors that flush their usage counts often, so that the series fill within the test.
class SharedUsageTest : public ClusterTest {
 protected:
  void Configure(testing::LocalClusterOptions& options) override {
    options.aggregator_args = {"--usage-flush-ms", "200"};
  }

  // The requests and served counts of the last hour in the series of key `prefix`, as `door`
  // shows them to `admin_key`; {-1, -1} when it does not answer.
  std::pair<int64_t, int64_t> UsageOf(const std::string& door, const std::string& prefix,
                                      const std::string& admin_key) {
    net::HttpClient c = Door(door);
    auto r = c.Send("GET", StrCat("/v1/usage?from=-1h&key=", prefix), {}, "", admin_key);
    if (!r.ok() || r->status != 200) return {-1, -1};
    json totals = json::parse(r->body, nullptr, false).value("totals", json::object());
    return {totals.value("requests", int64_t{-1}), totals.value("served", int64_t{-1})};
  }

  // Sends `n` searches with `key` through `door`; how many were answered 200.
  int SearchTimes(const std::string& door, const std::string& key, int n) {
    net::HttpClient c = Door(door);
    int served = 0;
    for (int i = 0; i < n; ++i) served += SearchStatus(c, key) == 200 ? 1 : 0;
    return served;
  }

  // Until both front doors show `want` requests, all served, for key `prefix`.
  bool BothDoorsShow(const std::string& prefix, const std::string& admin_key, int64_t want) {
    std::pair<int64_t, int64_t> a0, a1;
    const bool shown = WaitUntil(
        [&] {
          a0 = UsageOf("a0", prefix, admin_key);
          a1 = UsageOf("a1", prefix, admin_key);
          return a0 == std::pair{want, want} && a1 == std::pair{want, want};
        },
        std::chrono::seconds(30), std::chrono::milliseconds(100));
    if (!shown) {
      ADD_FAILURE() << "want " << want << " requests; a0 shows " << a0.first << " (" << a0.second
                    << " served), a1 " << a1.first << " (" << a1.second << ")";
    }
    return shown;
  }
};

TEST_F(SharedUsageTest, BothFrontDoorsCountIntoOneSeriesThatOutlivesAFrontDoorAndAFailover) {
  // Did: make a key on a0; search with it 30 times through a0 and 20 through a1; SIGKILL the
  // storage primary that keeps the key's series and search 10 more times through a1; wipe a0's
  // data directory and start it again. Checked: each time, both front doors show the key's
  // series with every request counted exactly once, from both doors.
  const std::string admin = AdminKeyOf("a1");
  net::HttpClient a0 = Door("a0");
  auto created =
      a0.Send("POST", "/v1/admin/keys", R"({"owner":"ana","tier":"free","scopes":["search"]})",
              "application/json", AdminKeyOf("a0"));
  ASSERT_TRUE(created.ok() && created->status == 201) << (created.ok() ? created->body : "");
  const std::string key = json::parse(created->body).value("key", "");
  const std::string prefix = key.substr(0, 10);
  ASSERT_TRUE(WaitUntil([&] { return Lists("a1", prefix); }, std::chrono::seconds(10)));

  EXPECT_EQ(SearchTimes("a0", key, 30), 30);
  EXPECT_EQ(SearchTimes("a1", key, 20), 20);
  ASSERT_TRUE(BothDoorsShow(prefix, admin, 50));

  // The key's series lives in one storage partition; its primary dies.
  std::string key_id;
  auto listed = Door("a1").Send("GET", "/v1/admin/keys", {}, "", admin);
  ASSERT_TRUE(listed.ok());
  for (const json& k : json::parse(listed->body).value("keys", json::array())) {
    if (k.value("prefix", "") == prefix) key_id = k.value("id", "");
  }
  ASSERT_FALSE(key_id.empty()) << listed->body;
  const int home = static_cast<int>(cluster::StoragePartitionOfKey(key_id, 2));
  ASSERT_FALSE(KillPrimaryAndWaitForTheNext(home).empty());
  EXPECT_EQ(SearchTimes("a1", key, 10), 10);
  ASSERT_TRUE(BothDoorsShow(prefix, admin, 60));

  // A front door keeps no usage of its own: one started on an empty disk shows it all.
  cluster_->Wipe("a0");
  cluster_->Restart("a0");
  net::HttpClient fresh = Door("a0");
  WaitUntilSearches(fresh);
  ASSERT_TRUE(BothDoorsShow(prefix, admin, 60));
}

// A client of GET /v1/stream as a browser's EventSource is: it reads events, and when the
// stream ends or the connection breaks it connects again with the last id it received, to
// whichever front door it is told.
class StreamClient {
 public:
  StreamClient(testing::LocalCluster& cluster, std::string query)
      : cluster_(cluster), query_(std::move(query)) {}
  // Connects to `door`, after the last event received (if any); the ready event's id.
  std::string Connect(const std::string& door) {
    door_ = door;
    if (s_ != nullptr) s_->Close();
    s_.reset();
    absl::StatusOr<std::unique_ptr<net::SseClient>> s = net::SseClient::Open(
        "127.0.0.1", cluster_.http_port(door), "/v1/stream?search_terms=" + net::UrlEncode(query_),
        kKey, last_id_, std::chrono::seconds(20));
    if (!s.ok()) return "";
    s_ = *std::move(s);
    absl::StatusOr<net::SseEvent> ready = s_->Next();
    if (!ready.ok() || ready->event != "ready") return "";
    if (last_id_.empty()) last_id_ = ready->id;
    return ready->id;
  }
  // Reads until `done`; reconnects (at most 20 times in all) when the stream ends. False after
  // two minutes.
  bool ReadUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      absl::StatusOr<net::SseEvent> e =
          s_ == nullptr ? absl::UnavailableError("not connected") : s_->Next();
      if (!e.ok() || e->event == "end") {
        if (++reconnects > 20) return false;
        Connect(door_);
        continue;
      }
      if (e->event != "tweet" && e->event != "delete") continue;
      last_id_ = e->id;
      json data = json::parse(e->data, nullptr, false);
      if (e->event == "tweet") {
        ++tweets[data.value("tweet_id", std::string())];
      } else {
        ++deletes[data.value("tweet_id", std::string())];
      }
    }
    return true;
  }
  void Close() {
    if (s_ != nullptr) s_->Close();
  }
  const std::string& last_id() const { return last_id_; }

  std::map<std::string, int> tweets, deletes;  // events per tweet id
  int reconnects = 0;

 private:
  testing::LocalCluster& cluster_;
  const std::string query_;
  std::string door_, last_id_;
  std::unique_ptr<net::SseClient> s_;
};

TEST_F(ClusterTest, AStreamFollowsEveryStoragePartitionAndResumesOnTheOtherFrontDoor) {
  // Did: open a stream on a0 for a query every test tweet matches; ingest 5 batches of 100
  // through a1; read half of them from the stream; SIGKILL a0 (the stream's front door) and
  // ingest 5 more batches; resume the stream on a1 with the last event id received; read on;
  // then SIGKILL the primary of storage partition 0 and ingest 5 more batches through the
  // failover; delete one tweet. Checked: the first ready id holds one position per storage
  // partition; every acknowledged tweet is pushed exactly once across both front doors and
  // the failover, nothing else is pushed, and the delete is pushed too.
  StreamClient stream(*cluster_, kEveryWord);
  const std::string start = stream.Connect("a0");
  ASSERT_FALSE(start.empty()) << "the stream did not open on a0";
  EXPECT_EQ(std::count(start.begin(), start.end(), '-'), 1) << start;
  net::HttpClient a1 = Door("a1");
  std::vector<std::string> acked;
  auto ingest = [&](int first_batch) {
    for (int batch = first_batch; batch < first_batch + 5; ++batch) {
      json answer;
      ASSERT_EQ(Ingest(a1, TweetLines(7'000'000 + batch * 100'000, 100), &answer), 200) << batch;
      std::vector<std::string> ids = Acknowledged(answer);
      EXPECT_EQ(ids.size(), 100u) << answer.dump();
      acked.insert(acked.end(), ids.begin(), ids.end());
    }
  };
  ASSERT_NO_FATAL_FAILURE(ingest(0));
  ASSERT_TRUE(stream.ReadUntil([&] { return stream.tweets.size() >= 250; }));
  stream.Close();
  cluster_->Signal("a0", SIGKILL);
  ASSERT_NO_FATAL_FAILURE(ingest(5));
  ASSERT_FALSE(stream.Connect("a1").empty()) << "the stream did not resume on a1";
  ASSERT_TRUE(stream.ReadUntil([&] { return stream.tweets.size() >= acked.size(); }));
  ASSERT_FALSE(KillPrimaryAndWaitForTheNext(0).empty());
  ASSERT_NO_FATAL_FAILURE(ingest(10));
  ASSERT_TRUE(stream.ReadUntil([&] { return stream.tweets.size() >= acked.size(); }))
      << stream.tweets.size() << " of " << acked.size();
  auto deleted = a1.Send("DELETE", StrCat("/v1/tweets/", acked[123]), {}, "", kKey);
  ASSERT_TRUE(deleted.ok() && deleted->status == 200);
  ASSERT_TRUE(stream.ReadUntil([&] { return !stream.deletes.empty(); }));

  std::map<std::string, int> want;
  for (const std::string& id : acked) want[id] = 1;
  EXPECT_EQ(stream.tweets, want) << "each acknowledged tweet once, and nothing else";
  EXPECT_EQ(stream.deletes, (std::map<std::string, int>{{acked[123], 1}}));
  std::cout << "stream reconnects beyond the planned one: " << stream.reconnects << "\n";
}

TEST_F(ClusterTest, KillingAStoragePrimaryDuringIngestLosesNoAcknowledgedTweet) {
  // Did: ingest batches of 100 tweets through a0 without pause; after 10
  // batches SIGKILL the primary of storage partition 0; keep ingesting 30 more
  // batches; restart the killed replica, let it catch up, then SIGKILL the
  // primary that took over, so the restarted replica must serve partition 0
  // alone. Checked: a new primary takes over with a higher epoch; ingest goes
  // on (every batch is acknowledged, none rejected); after both failovers every
  // acknowledged tweet is still readable and searchable, exactly once.
  net::HttpClient a0 = Door("a0");
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
  EXPECT_EQ(KillPrimaryAndWaitForTheNext(0), first_primary)
      << "the caught-up replica should take over";

  ExpectEachExactlyOnce(acked);
}

// Idempotency keys through failovers. A client whose answers were lost sends an ingest and a
// likes change again, with their keys, through the other front door, after the storage primary
// of the liked tweet's partition was SIGKILLed, and again after the other partition's primary
// was: every retry gets the first answer (the same ids, the same count) and nothing is stored
// or counted twice. The ingest's record lives in one of the two partitions, so both rounds
// cover a failover of the partition that keeps it.
TEST_F(ClusterTest, WritesRetriedWithTheirIdempotencyKeysAcrossFailoversCountOnce) {
  net::HttpClient a0 = Door("a0"), a1 = Door("a1");
  auto post = [](net::HttpClient& door, const std::string& target, const std::string& body,
                 const std::string& key) {
    auto reply = door.Send("POST", StrCat(target, "?api_dev_key=", kKey), body, "application/json",
                           {}, {{"Idempotency-Key", key}});
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : net::HttpReply{};
  };
  std::string batch;
  for (int i = 0; i < 8; ++i) batch += json{{"text", StrCat("quagga herd ", i)}}.dump() + "\n";
  const net::HttpReply ingested = post(a0, "/v1/tweets", batch, "batch-1");
  ASSERT_EQ(ingested.status, 200) << ingested.body;
  ASSERT_EQ(json::parse(ingested.body)["accepted"], 8) << ingested.body;
  const std::string id = json::parse(ingested.body)["results"][0]["tweet_id"];
  const std::string likes = StrCat("/v1/tweets/", id, "/likes");
  const net::HttpReply liked = post(a0, likes, R"({"add": 5})", "like-1");
  ASSERT_EQ(liked.status, 200) << liked.body;

  const int home = static_cast<int>(cluster::StoragePartitionOf(std::stoull(id), 2));
  std::string killed;
  for (const int p : {home, 1 - home}) {
    if (!killed.empty()) {
      // The replica killed in the first round comes back and catches up first, so that the
      // second round's partition keeps a replica.
      cluster_->Restart(killed);
      ASSERT_TRUE(WaitUntil(
          [&] {
            return Metric(a0, StrCat("tweetsearch_storage_secondary_in_sync{partition=\"", 1 - p,
                                     "\"}")) == 1;
          },
          std::chrono::seconds(60), std::chrono::milliseconds(250)))
          << "the restarted replica never caught up";
    }
    killed = cluster_->StoragePrimary(p);
    ASSERT_FALSE(KillPrimaryAndWaitForTheNext(p).empty()) << "partition " << p;
    const net::HttpReply liked_again = post(a1, likes, R"({"add": 5})", "like-1");
    EXPECT_EQ(liked_again.status, 200) << liked_again.body;
    EXPECT_EQ(liked_again.body, liked.body) << "after a failover of partition " << p;
    EXPECT_EQ(liked_again.headers.at("idempotent-replayed"), "true");
    const net::HttpReply ingested_again = post(a1, "/v1/tweets", batch, "batch-1");
    EXPECT_EQ(ingested_again.status, 200) << ingested_again.body;
    EXPECT_EQ(ingested_again.body, ingested.body) << "after a failover of partition " << p;
  }
  auto tweet = a1.Send("GET", StrCat("/v1/tweets/", id, "?api_dev_key=", kKey));
  ASSERT_TRUE(tweet.ok() && tweet->status == 200);
  EXPECT_EQ(json::parse(tweet->body)["likes"], 5);
  EXPECT_EQ(Search(a1, "quagga", "newest").total, 8u) << "each tweet stored once";
  // A new key is a new request.
  EXPECT_EQ(json::parse(post(a1, likes, R"({"add": 5})", "like-2").body)["likes"], 10);
}

TEST_F(ClusterTest, AFrozenPrimaryIsFencedOffAndLosesNothing) {
  // Did: ingest 10 batches of 100; SIGSTOP the primary of storage partition 0
  // and keep ingesting (the writes wait while its lease runs out and the
  // secondary takes over); SIGCONT the old primary after 20 more batches, at
  // once send it a write of its own over gRPC, then ingest 10 more batches.
  // Checked: a different replica became primary with a higher epoch; every
  // batch was acknowledged in full; the resumed old primary refused the write
  // (FAILED_PRECONDITION: it knows its term is over), and that tweet is stored
  // nowhere; every acknowledged tweet is readable and found exactly once.
  net::HttpClient a0 = Door("a0");
  const std::string frozen = cluster_->StoragePrimary(0);
  ASSERT_FALSE(frozen.empty());
  std::vector<std::string> acked;
  auto ingest = [&](int batch) {
    json answer;
    ASSERT_EQ(Ingest(a0, TweetLines(20'000'000 + batch * 100'000, 100), &answer), 200) << batch;
    EXPECT_EQ(answer["accepted"], 100) << "batch " << batch << ": " << answer.dump();
    for (std::string& id : Acknowledged(answer)) acked.push_back(std::move(id));
  };
  for (int batch = 0; batch < 10; ++batch) ingest(batch);
  cluster_->Signal(frozen, SIGSTOP);
  for (int batch = 10; batch < 30; ++batch) ingest(batch);
  const std::string successor = cluster_->StoragePrimary(0);
  EXPECT_FALSE(successor.empty());
  EXPECT_NE(successor, frozen);

  cluster_->Signal(frozen, SIGCONT);
  auto stub = internal::v1::Storage::NewStub(net::Connect(cluster_->grpc_address(frozen)));
  internal::v1::WriteRequest write;
  v1::Tweet* stale = write.add_puts();
  stale->set_id(29'999'999'999);
  stale->set_user_id(1);
  stale->set_user_name("stale");
  stale->set_text("written by a primary whose term is over");
  stale->set_created_at_ms(1'700'000'000'000);
  internal::v1::WriteResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status refused = stub->Write(&context, write, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << "the old primary answered: " << refused.error_message();
  for (int batch = 30; batch < 40; ++batch) ingest(batch);
  EXPECT_EQ(cluster_->StoragePrimary(0), successor);
  absl::StatusOr<net::HttpReply> lookup =
      a0.Send("GET", StrCat("/v1/tweets/29999999999?api_dev_key=", kKey));
  ASSERT_TRUE(lookup.ok());
  EXPECT_EQ(lookup->status, 404) << "the refused write was stored: " << lookup->body;
  ExpectEachExactlyOnce(acked);
}

class StorageOutageTest : public ClusterTest {
 protected:
  void Configure(testing::LocalClusterOptions& options) override { options.write_retry_s = 2; }
};

TEST_F(StorageOutageTest, AnIngestThatStoresNothingForWantOfStorageIsA503WithRetryAfter) {
  // Did: SIGKILL both replicas of storage partition 0 (the front doors retry a
  // write for 2 s here); ingest 20 tweets that all belong to partition 0, then
  // 40 tweets of both partitions; start tweetctl ingest of 20 more of
  // partition 0, and restart both replicas once it says it will retry.
  // Checked: the first answer is a 503 with Retry-After whose report rejects
  // every line `unavailable`; the second is a 200 accepting exactly the lines
  // of partition 1, and those are readable; tweetctl stores its 20 and exits 0.
  const std::array<std::vector<std::string>, 2> of_partition = LinesByPartition(7'000'000, 200);
  ASSERT_GE(of_partition[0].size(), 40u);
  ASSERT_GE(of_partition[1].size(), 20u);
  cluster_->Signal("s0a", SIGKILL);
  cluster_->Signal("s0b", SIGKILL);

  net::HttpClient a0 = Door("a0");
  std::string only_p0;
  for (int i = 0; i < 20; ++i) only_p0 += of_partition[0][i];
  absl::StatusOr<net::HttpReply> refused =
      a0.Send("POST", StrCat("/v1/tweets?api_dev_key=", kKey), only_p0, "application/x-ndjson");
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_EQ(refused->headers["retry-after"], "5");
  const json report = json::parse(refused->body, nullptr, false);
  EXPECT_EQ(report["error"]["code"], "unavailable") << refused->body;
  EXPECT_EQ(report["accepted"], 0);
  ASSERT_EQ(report["results"].size(), 20u);
  for (const json& r : report["results"]) EXPECT_EQ(r["code"], "unavailable") << r.dump();

  std::string mixed;
  for (int i = 20; i < 40; ++i) mixed += of_partition[0][i];
  for (int i = 0; i < 20; ++i) mixed += of_partition[1][i];
  json answer;
  ASSERT_EQ(Ingest(a0, mixed, &answer), 200) << answer.dump();
  EXPECT_EQ(answer["accepted"], 20);
  EXPECT_EQ(answer["rejected"], 20);
  for (const json& r : answer["results"]) {
    const bool of_p1 = r["line"].get<int>() > 20;
    EXPECT_EQ(r["status"], of_p1 ? "accepted" : "rejected") << r.dump();
    if (!of_p1) continue;
    absl::StatusOr<net::HttpReply> read = a0.Send(
        "GET", StrCat("/v1/tweets/", r["tweet_id"].get<std::string>(), "?api_dev_key=", kKey));
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->status, 200) << read->body;
  }

  // tweetctl ingest sends a batch answered 503 again after its Retry-After: the
  // partition's replicas restarted meanwhile, the batch is stored.
  std::string later;
  for (int i = 40; i < 60; ++i) later += of_partition[0][i];
  const std::string file = dir_.path() + "/later.jsonl", log = dir_.path() + "/tweetctl-later.log";
  ASSERT_TRUE(WriteFileAtomically(file, later).ok());
  testing::ChildProcess tweetctl(
      {TWEETCTL_PATH, "--server", StrCat("http://127.0.0.1:", cluster_->http_port("a0")), "ingest",
       file},
      log);
  bool retrying = false;
  for (int i = 0; i < 300 && !retrying; ++i) {
    retrying = absl::StrContains(ReadFile(log).value_or(""), "sending the batch again");
    if (!retrying) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(retrying) << ReadFile(log).value_or("");
  cluster_->Restart("s0a");
  cluster_->Restart("s0b");
  EXPECT_EQ(tweetctl.Wait(std::chrono::seconds(60)), 0) << ReadFile(log).value_or("");
  EXPECT_TRUE(absl::StrContains(ReadFile(log).value_or(""), "accepted 20, rejected 0"))
      << ReadFile(log).value_or("");
}

// Front doors retry a write for a minute here, so that an answer given without waiting for
// that retry is told apart from one given after it.
class StrandedWriteTest : public ClusterTest {
 protected:
  void Configure(testing::LocalClusterOptions& options) override { options.write_retry_s = 60; }
};

TEST_F(StrandedWriteTest, AWriteNoReplicaMayTakeWhileEtcdIsAwayIsA503AtOnce) {
  // Did: SIGSTOP the secondary of storage partition 0 and write to the partition, so that its
  // primary writes alone and the secondary falls out of sync; freeze etcd; write to partition
  // 0 until a write is refused, and once to partition 1; wake etcd and the secondary.
  // Checked: while etcd is away, partition 0's primary (its lease not renewed, its secondary
  // behind) refuses, and the front door answers that write 503 with Retry-After without
  // retrying it for write_retry_s (the time is printed); partition 1, whose secondary is in
  // sync, acknowledges; once both are back, partition 0 takes writes again.
  const std::array<std::vector<std::string>, 2> of_partition = LinesByPartition(8'000'000, 400);
  ASSERT_GE(of_partition[0].size(), 100u);
  net::HttpClient a0 = Door("a0");
  size_t next = 0;
  auto write = [&](int p) {
    absl::StatusOr<net::HttpReply> r = a0.Send("POST", StrCat("/v1/tweets?api_dev_key=", kKey),
                                               of_partition[p][next++], "application/x-ndjson");
    return r.ok() ? *r : net::HttpReply{};
  };
  const std::string primary = cluster_->StoragePrimary(0);
  ASSERT_FALSE(primary.empty());
  const std::string secondary = primary == "s0a" ? "s0b" : "s0a";
  cluster_->Signal(secondary, SIGSTOP);
  ASSERT_EQ(write(0).status, 200) << "the primary should write alone";

  cluster_->Signal("etcd", SIGSTOP);
  net::HttpReply refused;
  double refused_ms = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto start = std::chrono::steady_clock::now();
        refused = write(0);
        refused_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        return refused.status != 200;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(100)))
      << "partition 0 kept taking writes with etcd away and its secondary behind";
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.headers["retry-after"], "5");
  EXPECT_LT(refused_ms, 30'000) << "the front door retried the write for write_retry_s";
  std::printf("a write partition 0 could not take was answered 503 after %.0f ms\n", refused_ms);
  const net::HttpReply other = write(1);
  EXPECT_EQ(other.status, 200) << other.body;

  cluster_->Signal("etcd", SIGCONT);
  cluster_->Signal(secondary, SIGCONT);
  EXPECT_TRUE(WaitUntil([&] { return write(0).status == 200; }, std::chrono::seconds(60),
                        std::chrono::milliseconds(250)))
      << "partition 0 takes no writes after etcd and its secondary came back";
}

class RebuildTest : public ClusterTest {
 protected:
  // Storage keeps only the last 1,000 changes per partition (of about 1,600),
  // so index replicas that lose their data cannot replay the logs from the
  // start: they need a rebuild. A reader heard from within the last 3 s holds
  // the log at its position whatever the cap; a lost one stops counting after
  // 3 s.
  void Configure(testing::LocalClusterOptions& options) override {
    options.max_log_changes = 1000;
    options.live_reader_window_s = 3;
  }
};

TEST_F(RebuildTest, LosingBothReplicasOfAPartitionThenRebuildingRestoresIdenticalResults) {
  // Did: ingest 3,000 tweets in 30 batches, delete 50, change the likes of 50; record
  // every page of 7 queries in 3 sort modes; SIGKILL both replicas of index
  // partition 0 and delete their data; restart them empty. Rebuild i0a with
  // tweetctl in two runs: the first stops after 600 tweets (saved), i0a is
  // SIGKILLed and restarted, and the second run resumes; then rebuild i0b in
  // one run; ingest 100 more tweets after the rebuilds. Checked: with the
  // partition lost, searches are 503 (partial with allow_partial); the empty
  // replicas report needs_rebuild (the trimmed logs cannot refill them); the
  // restarted i0a is still rebuilding and the second run says it resumes;
  // after the rebuild every page of every query is identical to before (best
  // match: the same tweets, see below), from either rebuilt replica alone; tweets ingested
  // afterwards are found; tweetctl status reports every process healthy.
  net::HttpClient a0 = Door("a0"), a1 = Door("a1");
  std::vector<std::string> ids;
  for (int batch = 0; batch < 30; ++batch) {
    json answer;
    ASSERT_EQ(Ingest(a0, TweetLines(40'000'000 + batch * 100 * 7919, 100), &answer), 200);
    for (std::string& id : Acknowledged(answer)) ids.push_back(std::move(id));
  }
  ASSERT_EQ(ids.size(), 3000u);
  for (int i = 0; i < 50; ++i) {
    auto d = a0.Send("DELETE", StrCat("/v1/tweets/", ids[i * 7], "?api_dev_key=", kKey));
    ASSERT_TRUE(d.ok() && d->status == 200);
    auto l = a0.Send("POST", StrCat("/v1/tweets/", ids[i * 11 + 1], "/likes?api_dev_key=", kKey),
                     StrCat("{\"set\":", 1000 + i, "}"));
    ASSERT_TRUE(l.ok() && l->status == 200) << (l.ok() ? l->body : "");
  }
  std::map<std::string, std::vector<std::string>> before;
  for (const std::string sort : {"newest", "most_liked", "best_match"}) {
    for (const std::string& q : kQueries) before[q + " / " + sort] = AllPages(a0, a1, q, sort);
  }
  // Newest and most liked: the same ids in the same order. Best match: the
  // same ids; the order may differ slightly, because the original replicas'
  // BM25 statistics still count the 50 deleted tweets (a delete is a tombstone
  // until segments merge) while a rebuilt replica never saw them.
  auto expect_same_as_before = [&](const std::string& when) {
    for (const std::string sort : {"newest", "most_liked", "best_match"}) {
      for (const std::string& q : kQueries) {
        std::vector<std::string> now = AllPages(a0, a1, q, sort);
        std::vector<std::string> then = before[q + " / " + sort];
        std::string lost;
        for (const std::string& id : then) {
          if (std::find(now.begin(), now.end(), id) == now.end()) lost += " " + id;
        }
        if (sort == "best_match") {
          std::sort(now.begin(), now.end());
          std::sort(then.begin(), then.end());
        }
        EXPECT_EQ(now, then) << q << " / " << sort << " " << when << ": " << now.size()
                             << " results, " << then.size() << " before; lost:" << lost;
      }
    }
  };

  cluster_->Wipe("i0a");
  cluster_->Wipe("i0b");
  Page lost;
  for (int i = 0; i < 50 && lost.status != 503; ++i) {
    lost = Search(a0, "love", "newest");  // until the front door's view drops them
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(lost.status, 503) << lost.body.dump();
  Page partial = Search(a0, "love", "newest", "", 100, /*allow_partial=*/true);
  EXPECT_EQ(partial.status, 200);
  EXPECT_EQ(partial.body["missing_partitions"], json::array({0}));

  cluster_->Restart("i0a");
  cluster_->Restart("i0b");
  EXPECT_TRUE(WaitForState("i0a", "needs_rebuild")) << StateOf("i0a");
  EXPECT_TRUE(WaitForState("i0b", "needs_rebuild")) << StateOf("i0b");

  auto [first_code, first_out] = Tweetctl({"rebuild", "--index-partition", "0", "--replica", "a",
                                           "--batch", "100", "--stop-after", "600"});
  ASSERT_EQ(first_code, 0) << first_out;
  EXPECT_NE(first_out.find("stopped as asked"), std::string::npos) << first_out;
  cluster_->Signal("i0a", SIGKILL);
  cluster_->Restart("i0a");
  EXPECT_TRUE(WaitForState("i0a", "rebuilding")) << StateOf("i0a");
  auto [second_code, second_out] =
      Tweetctl({"rebuild", "--index-partition", "0", "--replica", "a", "--batch", "100"});
  ASSERT_EQ(second_code, 0) << second_out;
  const std::string status_after = Tweetctl({"status"}).second;
  std::cout << "[ tweetctl ] " << first_out << second_out << status_after;
  EXPECT_NE(second_out.find("resuming i0a"), std::string::npos) << second_out;
  EXPECT_NE(second_out.find("i0a is rebuilt, caught up and serving"), std::string::npos);
  // "serving" means joined: front doors already see i0a as a member.
  EXPECT_TRUE(TweetctlStatusOf("i0a").value("healthy", false)) << status_after;
  WaitUntilBothDoorsSearch();
  expect_same_as_before("after rebuilding i0a (the only replica of partition 0)");

  auto [third_code, third_out] = Tweetctl({"rebuild", "--index-partition", "0", "--replica", "b"});
  ASSERT_EQ(third_code, 0) << third_out;
  cluster_->Signal("i0a", SIGKILL);  // now i0b alone answers for partition 0
  WaitUntilBothDoorsSearch();
  expect_same_as_before("from the rebuilt i0b alone");
  cluster_->Restart("i0a");

  json more;
  ASSERT_EQ(Ingest(a0, TweetLines(60'000'000, 100), &more), 200);
  EXPECT_EQ(more["accepted"], 100);
  const std::vector<std::string> after = AllPages(a0, a1, kEveryWord, "newest");
  EXPECT_EQ(after.size(), 3000u - 50u + 100u);
  EXPECT_TRUE(WaitForState("i0a", "serving"));
  auto [status_code, status_out] = Tweetctl({"status"});
  EXPECT_EQ(status_code, 0) << status_out;
  EXPECT_NE(status_out.find("every process is healthy"), std::string::npos) << status_out;
}

template <typename Stub, typename Response>
Response StatusOf(testing::LocalCluster& cluster, const std::string& node) {
  auto stub = Stub::NewStub(net::Connect(cluster.grpc_address(node)));
  Response response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  internal::v1::StatusRequest request;
  EXPECT_TRUE(stub->Status(&context, request, &response).ok()) << node;
  return response;
}

TEST_F(RebuildTest, AStorageReplicaAndABuilderOnReplacedDisksAreCopiedBackInFull) {
  // Did: ingest 5 batches of 100; SIGKILL the secondary of storage partition 0
  // and builder b1 and delete their data (replaced disks); ingest 30 more
  // batches, so that storage partition 0 writes alone and its log (capped at
  // 1,000 changes) no longer reaches back to the start; restart both, empty;
  // then SIGKILL the primary of partition 0. Checked: /metrics at a0 shows
  // partition 0's single-replica writes and its secondary out of sync, and
  // partition 1 in sync with none; after the restart the primary sends a full
  // copy (its Status counts it), the secondary counts as in sync again in
  // /metrics, b1 resyncs from storage snapshots, serves, and lists exactly the
  // ids b0 lists for each index partition; the copied replica takes over from
  // the killed primary, and every acknowledged tweet is readable and found
  // exactly once.
  net::HttpClient a0 = Door("a0");
  std::vector<std::string> acked;
  auto ingest = [&](int batch) {
    json answer;
    ASSERT_EQ(Ingest(a0, TweetLines(60'000'000 + batch * 100 * 7919, 100), &answer), 200);
    EXPECT_EQ(answer["accepted"], 100) << "batch " << batch << ": " << answer.dump();
    for (std::string& id : Acknowledged(answer)) acked.push_back(std::move(id));
  };
  for (int batch = 0; batch < 5; ++batch) ingest(batch);
  const std::string primary = cluster_->StoragePrimary(0);
  ASSERT_FALSE(primary.empty());
  const std::string secondary = primary == "s0a" ? "s0b" : "s0a";
  EXPECT_EQ(Metric(a0, "tweetsearch_storage_secondary_in_sync{partition=\"0\"}"), 1);
  cluster_->Wipe(secondary);
  cluster_->Wipe("b1");
  for (int batch = 5; batch < 35; ++batch) ingest(batch);
  // Once the lost readers' positions no longer count (3 s), the cap trims.
  uint64_t first = 0;
  for (int i = 0; i < 100 && first <= 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    first = StatusOf<internal::v1::Storage, internal::v1::StorageStatus>(*cluster_, primary)
                .first_sequence();
  }
  ASSERT_GT(first, 1u) << "the log of storage partition 0 was never trimmed";
  EXPECT_GT(Metric(a0, "tweetsearch_storage_single_replica_writes_total{partition=\"0\"}"), 0);
  EXPECT_EQ(Metric(a0, "tweetsearch_storage_secondary_in_sync{partition=\"0\"}"), 0);
  EXPECT_EQ(Metric(a0, "tweetsearch_storage_has_primary{partition=\"0\"}"), 1);
  EXPECT_EQ(Metric(a0, "tweetsearch_storage_single_replica_writes_total{partition=\"1\"}"), 0);
  EXPECT_EQ(Metric(a0, "tweetsearch_storage_secondary_in_sync{partition=\"1\"}"), 1);

  cluster_->Restart(secondary);
  cluster_->Restart("b1");
  bool in_sync = false;
  for (int i = 0; i < 240 && !in_sync; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    in_sync = Metric(a0, "tweetsearch_storage_secondary_in_sync{partition=\"0\"}") == 1;
  }
  ASSERT_TRUE(in_sync) << "the restarted secondary never caught up";
  const auto storage_status =
      StatusOf<internal::v1::Storage, internal::v1::StorageStatus>(*cluster_, primary);
  EXPECT_GE(storage_status.copies_sent(), 1u) << "caught up without a full copy";
  EXPECT_GT(storage_status.tweets_copied(), 1000u);
  ASSERT_TRUE(WaitForState("b1", "serving", std::chrono::seconds(120)))
      << ReadFile(cluster_->dir() + "/b1.log").value_or("");
  const auto builder_status =
      StatusOf<internal::v1::Builder, internal::v1::BuilderStatus>(*cluster_, "b1");
  EXPECT_GE(builder_status.resyncs(), 1u) << "b1 caught up without a resync";
  for (uint32_t p = 0; p < 2; ++p) {
    auto count = [&](const std::string& builder) {
      auto stub = internal::v1::Builder::NewStub(net::Connect(cluster_->grpc_address(builder)));
      internal::v1::PartitionCountRequest request;
      request.set_index_partition(p);
      internal::v1::PartitionCountResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      EXPECT_TRUE(stub->PartitionCount(&context, request, &response).ok());
      return response.ids();
    };
    EXPECT_EQ(count("b1"), count("b0")) << "index partition " << p;
  }

  EXPECT_EQ(KillPrimaryAndWaitForTheNext(0), secondary) << "the copied replica should take over";
  ExpectEachExactlyOnce(acked);
}

class FrontDoorQuotaTest : public ClusterTest {
 protected:
  static constexpr int kLimit = 30;
  void Configure(testing::LocalClusterOptions& options) override {
    redis_ = std::make_unique<testing::RedisServer>(dir_.path());
    ASSERT_TRUE(redis_->Start()) << "redis-server did not start";
    options.redis = StrCat("127.0.0.1:", redis_->port());
    const std::string limits = dir_.path() + "/limits.yaml";
    ASSERT_TRUE(WriteFileAtomically(limits, StrCat("tiers:\n  partner:\n    search:\n"
                                                   "      - {name: partner_hourly, limit: ",
                                                   kLimit,
                                                   ", window: 1h, algorithm: sliding_window_log}\n"
                                                   "  streamer:\n    max_streams: 2\n"))
                    .ok());
    options.aggregator_args = {"--limits", limits};
  }
  // Creates `key` of `tier` on a0 and waits until a1 knows it (front doors share keys).
  void MakeKey(const std::string& tier, const std::string& key) {
    net::HttpClient admin = Door("a0");
    auto r = admin.Send("POST", "/v1/admin/keys",
                        StrCat("{\"owner\":\"", tier, "\",\"tier\":\"", tier,
                               "\",\"scopes\":[\"search\"],\"key\":\"", key, "\"}"),
                        "application/json", AdminKeyOf("a0"));
    ASSERT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : "unreachable");
    ASSERT_TRUE(WaitUntil([&] { return Lists("a1", key.substr(0, 10)); }));
  }
  // Opens a stream with the streamer key on `door`: the client, or null with the refusal's
  // status in `*status`.
  std::unique_ptr<net::SseClient> StreamerStream(const std::string& door, int* status) {
    net::HttpReply refused;
    auto s = net::SseClient::Open("127.0.0.1", cluster_->http_port(door), "/v1/stream?q=love",
                                  kStreamer, "", std::chrono::seconds(30), &refused);
    *status = s.ok() ? 200 : refused.status;
    return s.ok() ? *std::move(s) : nullptr;
  }
  static constexpr const char* kPartner = "partner-key-0001";
  static constexpr const char* kStreamer = "streamer-key-0001";
  std::unique_ptr<testing::RedisServer> redis_;
};

TEST_F(FrontDoorQuotaTest, AKeysMaxStreamsHoldsForBothFrontDoorsTogether) {
  // Did: a key allowed 2 open streams (max_streams), quotas in a real Redis; one
  // stream opened on each front door, then a third asked of each; the stream on a1 closed;
  // then a0, holding 2 streams, SIGKILLed. Checked: the third is a 429 on both front doors
  // (each holds only one stream itself); once a1's stream closed, a0 may open one again; the
  // dead a0's slots lapse (within the 15 s lease) and a1 may then open 2.
  ASSERT_NO_FATAL_FAILURE(MakeKey("streamer", kStreamer));
  int status = 0;
  std::unique_ptr<net::SseClient> on_a0 = StreamerStream("a0", &status);
  ASSERT_EQ(status, 200);
  std::unique_ptr<net::SseClient> on_a1 = StreamerStream("a1", &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(StreamerStream("a0", &status), nullptr);
  EXPECT_EQ(status, 429);
  EXPECT_EQ(StreamerStream("a1", &status), nullptr);
  EXPECT_EQ(status, 429);

  on_a1->Close();
  std::unique_ptr<net::SseClient> second_on_a0;
  ASSERT_TRUE(WaitUntil([&] { return (second_on_a0 = StreamerStream("a0", &status)) != nullptr; }))
      << "the slot of the closed stream was not given back; last status " << status;
  cluster_->Signal("a0", SIGKILL);
  std::vector<std::unique_ptr<net::SseClient>> on_a1_again;
  ASSERT_TRUE(WaitUntil(
      [&] {
        if (auto s = StreamerStream("a1", &status)) on_a1_again.push_back(std::move(s));
        return on_a1_again.size() == 2;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(500)))
      << "the dead front door's slots did not lapse; last status " << status;
}

TEST_F(FrontDoorQuotaTest, KillingAFrontDoorKeepsTheOtherServingAndQuotasExact) {
  // Did: quotas in a real Redis, a partner key limited to 30 searches an hour,
  // created on a0 and seen by a1; 10 searches through each door; SIGKILL a1
  // while a client searches through a0 with the demo key; then 30 more
  // partner searches through a0. Checked: the demo-key client saw no failure
  // while a1 died; the partner key got exactly 30 searches in all: 20 before
  // the kill (10 per door) and 10 of the 30 afterwards, the other 20 refused
  // with 429, so the surviving door counted what the dead one had admitted.
  const std::string partner = kPartner;
  ASSERT_NO_FATAL_FAILURE(MakeKey("partner", partner));  // on a0; a1 shares a0's keys
  auto search = [&](net::HttpClient& c) { return SearchStatus(c, partner); };
  net::HttpClient a0 = Door("a0"), a1 = Door("a1");
  int admitted = 0;
  for (int i = 0; i < 10; ++i) {
    admitted += search(a0) == 200;
    admitted += search(a1) == 200;
  }
  EXPECT_EQ(admitted, 20);

  std::atomic<bool> stop{false};
  std::atomic<int> served{0}, failed{0};
  std::thread load([&] {
    net::HttpClient c = Door("a0");
    while (!stop) {
      (Search(c, "love", "newest").status == 200 ? served : failed)++;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cluster_->Signal("a1", SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  int later_admitted = 0, later_refused = 0;
  for (int i = 0; i < 30; ++i) {
    const int status = search(a0);
    later_admitted += status == 200;
    later_refused += status == 429;
  }
  stop = true;
  load.join();
  EXPECT_EQ(failed.load(), 0) << "of " << served.load() + failed.load() << " searches on a0";
  EXPECT_GT(served.load(), 0);
  EXPECT_EQ(later_admitted, kLimit - 20);
  EXPECT_EQ(later_refused, 30 - (kLimit - 20));
}

// ---- Network partitions (Jepsen-style), every process in a network namespace of its own ----

class PartitionTest : public ClusterTest {
 protected:
  void Configure(testing::LocalClusterOptions& options) override {
    if (absl::Status s = testing::NetworkLab::Available(); !s.ok()) {
      GTEST_SKIP() << "skipped: " << s.message();
    }
    options.network_namespaces = true;
  }

  // Every id a storage replica holds (its snapshot's listing).
  std::set<uint64_t> StoredIds(const std::string& node) {
    auto stub = internal::v1::Storage::NewStub(net::Connect(cluster_->grpc_address(node)));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    internal::v1::SnapshotIdsRequest request;
    auto reader = stub->SnapshotIds(&context, request);
    std::set<uint64_t> ids;
    internal::v1::SnapshotIdsChunk chunk;
    while (reader->Read(&chunk)) ids.insert(chunk.ids().begin(), chunk.ids().end());
    EXPECT_TRUE(reader->Finish().ok()) << node;
    return ids;
  }

  // Until storage partition p has a primary and its secondary is in sync, in a0's view.
  bool WaitUntilReplicated(int p) {
    net::HttpClient a0 = Door("a0");
    return WaitUntil(
        [&] {
          return !cluster_->StoragePrimary(p).empty() &&
                 Metric(a0, StrCat("tweetsearch_storage_secondary_in_sync{partition=\"", p,
                                   "\"}")) == 1;
        },
        std::chrono::seconds(90), std::chrono::milliseconds(250));
  }
};

// The client side of the run: writers of tweet batches and of likes, each operation sent with
// an idempotency key and sent again (through the other front door) until it is answered, as a
// careful client does. Every operation is then acknowledged exactly once.
struct PartitionWorkload {
  explicit PartitionWorkload(testing::LocalCluster& c) : cluster(c) {}

  testing::LocalCluster& cluster;
  std::vector<uint64_t> liked;  // tweets the likes writer adds to, in turn
  std::atomic<bool> stop{false};
  absl::Mutex mu;
  std::vector<std::string> acked ABSL_GUARDED_BY(mu);
  std::map<uint64_t, int> likes_acked ABSL_GUARDED_BY(mu);
  std::atomic<int> operations{0}, retries{0};
  std::vector<std::thread> threads;

  // Sends one operation until a 200 answers it; a failure after two minutes.
  net::HttpReply Until200(int first_door, const std::string& target, const std::string& body,
                          const std::string& key) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    for (int attempt = 0;; ++attempt) {
      if (std::chrono::steady_clock::now() > give_up) {
        ADD_FAILURE() << "never answered: " << target << " " << key;
        return net::HttpReply{};
      }
      const std::string door = (first_door + attempt) % 2 == 0 ? "a0" : "a1";
      net::HttpClient client(cluster.http_host(door), cluster.http_port(door),
                             std::chrono::seconds(8));
      auto reply = client.Send("POST", StrCat(target, "?api_dev_key=", kKey), body,
                               "application/json", {}, {{"Idempotency-Key", key}});
      if (reply.ok() && reply->status == 200) return *reply;
      // No pause before the next try: a failed try took its time already (a timeout, or a
      // front door's own retries before its 503), and the next goes to the other front door.
      retries++;
    }
  }

  void Start() {
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([this, w] {
        for (int batch = 0; !stop; ++batch) {
          const net::HttpReply r =
              Until200(w, "/v1/tweets", TweetLines(40'000'000 + w * 5'000'000 + batch * 1000, 10),
                       StrCat("w", w, "-", batch));
          const json answer = json::parse(r.body, nullptr, false);
          EXPECT_EQ(answer.value("accepted", 0), 10) << r.body;
          absl::MutexLock lock(&mu);
          for (std::string& id : Acknowledged(answer)) acked.push_back(std::move(id));
          operations++;
        }
      });
    }
    threads.emplace_back([this] {
      for (int op = 0; !stop; ++op) {
        const uint64_t id = liked[op % liked.size()];
        Until200(op, StrCat("/v1/tweets/", id, "/likes"), R"({"add": 1})", StrCat("like-", op));
        absl::MutexLock lock(&mu);
        ++likes_acked[id];
        operations++;
      }
    });
  }
  void Stop() {
    stop = true;
    for (std::thread& t : threads) t.join();
    threads.clear();
  }
  ~PartitionWorkload() { Stop(); }
};

TEST_F(PartitionTest, AcknowledgedWritesSurvivePartitionsOfPrimariesSecondariesDoorsAndIndexes) {
  // Did: while two writers ingest batches of 10 tweets and a third adds likes one at a time
  // (each operation with an idempotency key, sent again through the other front door until
  // answered), partition the network, one fault at a time, each held until the cluster has
  // worked around it and the workload has had 10 more operations acknowledged, then healed:
  //   1. the storage primary of partition 0 isolated (cut from everyone), until the other
  //      replica holds the role;
  //   2. the storage primary of partition 1 cut off from etcd and from its secondary, until the
  //      secondary holds the role;
  //   3. the secondary of partition 0 isolated, until the primary counts it out of sync;
  //   4. front door a1 isolated (checked unreachable), until a client sent an operation again
  //      through a0;
  //   5. index replica i0a isolated, until etcd no longer lists it as serving.
  // After each, wait until the partitions have primaries with secondaries in sync again.
  // Checked, as Jepsen's set and counter checks: every acknowledged tweet is stored and found
  // exactly once; each liked tweet's likes equal its acknowledged adds; both replicas of each
  // storage partition hold the same tweets (no primary acknowledged what the other lacks);
  // searches through both front doors answer at the end.
  net::HttpClient a0 = Door("a0");
  json seeded;
  ASSERT_EQ(Ingest(a0, TweetLines(39'000'000, 4), &seeded), 200);
  PartitionWorkload load(*cluster_);
  std::map<uint64_t, int> likes_before;
  for (const std::string& id : Acknowledged(seeded)) {
    load.liked.push_back(std::stoull(id));
    likes_before[std::stoull(id)] = static_cast<int>((std::stoull(id)) % 50);
  }
  ASSERT_EQ(load.liked.size(), 4u);
  load.Start();
  auto run_for = [&](int operations) {
    const int until = load.operations.load() + operations;
    return WaitUntil([&] { return load.operations.load() >= until; }, std::chrono::seconds(90),
                     std::chrono::milliseconds(50));
  };
  ASSERT_TRUE(run_for(20)) << "no writes before the faults";
  testing::NetworkLab& lab = *cluster_->lab();
  // Holds a fault until `worked_around` (the cluster's answer to it) and 10 more operations,
  // then heals it.
  auto hold = [&](const std::string& fault, const std::function<bool()>& worked_around) {
    ASSERT_TRUE(lab.ok()) << fault << ": see netns.log";
    EXPECT_TRUE(WaitUntil(worked_around, std::chrono::seconds(60), std::chrono::milliseconds(250)))
        << fault << ": not worked around";
    EXPECT_TRUE(run_for(10)) << fault << ": the workload stalled";
    lab.Heal();
  };

  const std::string primary0 = cluster_->StoragePrimary(0);
  ASSERT_FALSE(primary0.empty());
  lab.Isolate(primary0);
  hold("isolated " + primary0, [&] {
    const std::string now = cluster_->StoragePrimary(0);
    return !now.empty() && now != primary0;
  });
  ASSERT_TRUE(WaitUntilReplicated(0)) << "after isolating " << primary0;

  const std::string primary1 = cluster_->StoragePrimary(1);
  ASSERT_FALSE(primary1.empty());
  const std::string peer1 = primary1.back() == 'a' ? "s1b" : "s1a";
  lab.Cut(primary1, "etcd");
  lab.Cut(primary1, peer1);
  hold(primary1 + " cut off from etcd and " + peer1,
       [&] { return cluster_->StoragePrimary(1) == peer1; });
  ASSERT_TRUE(WaitUntilReplicated(1)) << "after cutting " << primary1 << " off";

  const std::string secondary0 = cluster_->StoragePrimary(0).back() == 'a' ? "s0b" : "s0a";
  lab.Isolate(secondary0);
  hold("isolated " + secondary0,
       [&] { return Metric(a0, "tweetsearch_storage_secondary_in_sync{partition=\"0\"}") == 0; });
  ASSERT_TRUE(WaitUntilReplicated(0));

  lab.Isolate("a1");
  net::HttpClient a1(cluster_->http_host("a1"), cluster_->http_port("a1"), std::chrono::seconds(1));
  EXPECT_FALSE(a1.Send("GET", "/readyz").ok()) << "the isolated front door still answers";
  // Worked around once a client gave up on a1 and sent its operation again through a0.
  const int retries_before = load.retries.load();
  hold("isolated a1", [&] { return load.retries.load() > retries_before; });

  lab.Isolate("i0a");
  hold("isolated i0a", [&] { return cluster_->ServingIndexNodes().size() == 3; });
  ASSERT_TRUE(WaitUntil([&] { return cluster_->ServingIndexNodes().size() == 4; },
                        std::chrono::seconds(60), std::chrono::milliseconds(250)));
  load.Stop();
  std::printf("%d operations acknowledged, %d sends repeated\n", load.operations.load(),
              load.retries.load());

  std::vector<std::string> acked;
  std::map<uint64_t, int> likes_acked;
  {
    absl::MutexLock lock(&load.mu);
    acked = load.acked;
    likes_acked = load.likes_acked;
  }
  WaitUntilBothDoorsSearch();
  for (const uint64_t id : load.liked) acked.push_back(StrCat(id));
  ExpectEachExactlyOnce(acked, /*page_size=*/100);
  for (const uint64_t id : load.liked) {
    auto r = a0.Send("GET", StrCat("/v1/tweets/", id, "?api_dev_key=", kKey));
    ASSERT_TRUE(r.ok() && r->status == 200);
    EXPECT_EQ(json::parse(r->body)["likes"], likes_before[id] + likes_acked[id]) << id;
  }
  for (int p = 0; p < 2; ++p) {
    ASSERT_TRUE(WaitUntilReplicated(p));
    EXPECT_EQ(StoredIds(StrCat("s", p, "a")), StoredIds(StrCat("s", p, "b"))) << "partition " << p;
  }
}

}  // namespace
}  // namespace tweetsearch
