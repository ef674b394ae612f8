#include "aggregator/front_door.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/container/flat_hash_set.h"
#include "aggregator/engine.h"
#include "aggregator/http/api_handler.h"
#include "aggregator/metrics.h"
#include "common/file_util.h"
#include "common/synthetic.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::aggregator {
namespace {

constexpr int64_t kDoorNow = 1767225600000;
constexpr std::string_view kKey = "test-key-search-ingest";
constexpr std::string_view kSearchOnly = "reader-key-search-only";

class FrontDoorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions o;
    o.data_dir = dir_.path() + "/data";
    o.index.segment_max_docs = 128;
    o.store.block_cache_bytes = 8 << 20;
    engine_ = *Engine::Open(o, clock_);
    keys_ = *KeyRegistry::Open(dir_.path() + "/keys");
    ASSERT_TRUE(
        keys_->Register(kKey, "t", "free", uint8_t(Scope::kSearch) | uint8_t(Scope::kIngest)).ok());
    ASSERT_TRUE(keys_->Register(kSearchOnly, "t", "free", uint8_t(Scope::kSearch)).ok());
    door_ = std::make_unique<FrontDoor>(*engine_, *keys_, PageTokenCodec(std::string(32, 's')));
  }

  // Ingests `n` synthetic tweets with ids after every id so far.
  void IngestSynthetic(int n) {
    std::vector<absl::StatusOr<NewTweet>> lines;
    for (int i = 0; i < n; ++i) {
      SyntheticTweet s = gen_.Next();
      NewTweet t;
      t.id = s.id;
      t.text = s.text;
      t.likes = s.likes;
      t.created_at_ms = s.created_at_ms;
      lines.push_back(std::move(t));
    }
    auto r = door_->Ingest(kKey, std::move(lines));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->rejected, 0u);
  }

  testing::TempDir dir_;
  ManualClock clock_{kDoorNow};
  SyntheticTweetGenerator gen_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<KeyRegistry> keys_;
  std::unique_ptr<FrontDoor> door_;
};

// Pages neither repeat nor skip while tweets keep arriving: the union of all pages is exactly
// the set of matches when page 1 was served, in sort order.
TEST_F(FrontDoorTest, PagesNeitherRepeatNorSkipWhileTweetsArrive) {
  IngestSynthetic(2000);
  const std::string q = gen_.Word(0) + " OR " + gen_.Word(1);
  for (query::SortMode sort :
       {query::SortMode::kNewest, query::SortMode::kBestMatch, query::SortMode::kMostLiked}) {
    SearchRequest all{std::string(kKey), q, kMaxResults, sort, ""};
    // The reference: the same query served in one go, paged by 100 without interference.
    std::vector<TweetId> expected;
    for (SearchRequest r = all;;) {
      auto page = door_->Search(r);
      ASSERT_TRUE(page.ok()) << page.status();
      for (const auto& h : page->hits) expected.push_back(h.hit.id);
      if (page->next_page_token.empty()) break;
      r.page_token = page->next_page_token;
    }
    ASSERT_GT(expected.size(), 200u);

    std::vector<TweetId> paged;
    SearchRequest r{std::string(kKey), q, 37, sort, ""};
    for (int pages = 0;; ++pages) {
      ASSERT_LT(pages, 1000);
      auto page = door_->Search(r);
      ASSERT_TRUE(page.ok()) << page.status();
      ASSERT_LE(page->hits.size(), 37u);
      for (const auto& h : page->hits) paged.push_back(h.hit.id);
      IngestSynthetic(50);           // new tweets, many of them matching, between every two pages
      clock_.AdvanceMillis(60'000);  // and time passes (recency must not shift scores)
      if (page->next_page_token.empty()) break;
      r.page_token = page->next_page_token;
    }
    EXPECT_EQ(paged, expected) << "sort " << int(sort);
    absl::flat_hash_set<TweetId> unique(paged.begin(), paged.end());
    EXPECT_EQ(unique.size(), paged.size());
  }
}

TEST_F(FrontDoorTest, BadTokensAndKeysAreRejected) {
  IngestSynthetic(300);
  const std::string q = gen_.Word(0);
  auto first = door_->Search({std::string(kKey), q, 5, query::SortMode::kNewest, ""});
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->next_page_token.empty());
  std::string tampered = first->next_page_token;
  tampered[10] = tampered[10] == 'A' ? 'B' : 'A';
  EXPECT_TRUE(absl::IsInvalidArgument(
      door_->Search({std::string(kKey), q, 5, query::SortMode::kNewest, tampered}).status()));
  // A token of another query, or another sort mode, does not continue this one.
  EXPECT_TRUE(
      absl::IsInvalidArgument(door_
                                  ->Search({std::string(kKey), q + " x", 5,
                                            query::SortMode::kNewest, first->next_page_token})
                                  .status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      door_->Search({std::string(kKey), q, 5, query::SortMode::kMostLiked, first->next_page_token})
          .status()));
  // Signed by another deployment.
  FrontDoor other(*engine_, *keys_, PageTokenCodec(std::string(32, 'x')));
  EXPECT_TRUE(absl::IsInvalidArgument(
      other.Search({std::string(kKey), q, 5, query::SortMode::kNewest, first->next_page_token})
          .status()));

  EXPECT_TRUE(
      absl::IsUnauthenticated(door_->Search({"", q, 5, query::SortMode::kNewest, ""}).status()));
  EXPECT_TRUE(absl::IsUnauthenticated(
      door_->Search({"no-such-key-000", q, 5, query::SortMode::kNewest, ""}).status()));
  EXPECT_TRUE(absl::IsPermissionDenied(door_->Ingest(kSearchOnly, {}).status()));
  EXPECT_TRUE(absl::IsPermissionDenied(door_->Delete(kSearchOnly, 1)));
  EXPECT_TRUE(absl::IsPermissionDenied(door_->ListKeys(kKey).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      door_->Search({std::string(kKey), q, 101, query::SortMode::kNewest, ""}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      door_->Search({std::string(kKey), "(((", 5, query::SortMode::kNewest, ""}).status()));
  ASSERT_TRUE(keys_->Revoke(kSearchOnly.substr(0, 10)).ok());
  EXPECT_TRUE(absl::IsUnauthenticated(
      door_->Search({std::string(kSearchOnly), q, 5, query::SortMode::kNewest, ""}).status()));
}

class CountingGate : public AdmissionGate {
 public:
  absl::Status Admit(const ApiKey* key, Endpoint endpoint, uint64_t cost, CallContext*) override {
    if (key == nullptr) return absl::OkStatus();
    if (endpoint == Endpoint::kIngest) ingest_cost += cost;
    return ++calls > 3 ? absl::ResourceExhaustedError("over quota") : absl::OkStatus();
  }
  int calls = 0;
  uint64_t ingest_cost = 0;
};

TEST_F(FrontDoorTest, TheGateRunsBeforeAnyWorkWithTheRequestCost) {
  auto gate = std::make_shared<CountingGate>();
  door_->set_gate(gate);
  std::vector<absl::StatusOr<NewTweet>> lines;
  for (int i = 0; i < 3; ++i) {
    NewTweet t;
    t.text = "gated";
    lines.push_back(t);
  }
  ASSERT_TRUE(door_->Ingest(kKey, lines).ok());
  EXPECT_EQ(gate->ingest_cost, 3u);
  EXPECT_TRUE(door_->Search({std::string(kKey), "gated", 5, query::SortMode::kNewest, ""}).ok());
  EXPECT_TRUE(door_->Search({std::string(kKey), "gated", 5, query::SortMode::kNewest, ""}).ok());
  auto limited = door_->Ingest(kKey, lines);
  EXPECT_TRUE(absl::IsResourceExhausted(limited.status()));
  EXPECT_EQ(engine_->Stats().tweets_ingested, 3u);  // the refused call did no work
}

TEST(KeyRegistryTest, KeysPersistHashedAndRevokeByPrefix) {
  testing::TempDir dir;
  std::string made;
  {
    auto keys = *KeyRegistry::Open(dir.path());
    auto key = keys->Create("alice", "pro", uint8_t(Scope::kSearch));
    ASSERT_TRUE(key.ok());
    made = *key;
    EXPECT_TRUE(made.starts_with("ts_"));
    EXPECT_EQ(made.size(), 35u);
    EXPECT_TRUE(keys->Authenticate(made, Scope::kSearch).ok());
    EXPECT_EQ(keys->Authenticate(made, Scope::kSearch)->tier, "pro");
    EXPECT_TRUE(absl::IsAlreadyExists(keys->Register(made, "bob", "", 1)));
    EXPECT_TRUE(absl::IsInvalidArgument(keys->Register("short", "bob", "", 1)));
    EXPECT_TRUE(absl::IsInvalidArgument(keys->Create("", "", 1).status()));
  }
  // The key itself is not on disk, only its hash.
  std::string all;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (entry.is_regular_file()) all += ReadFile(entry.path().string()).value_or("");
  }
  EXPECT_EQ(all.find(made), std::string::npos);
  auto keys = *KeyRegistry::Open(dir.path());
  EXPECT_TRUE(keys->Authenticate(made, Scope::kSearch).ok());
  ASSERT_EQ(keys->List().size(), 1u);
  EXPECT_EQ(keys->List()[0].owner, "alice");
  EXPECT_TRUE(absl::IsNotFound(keys->Revoke("zzzzzzzzzz")));
  EXPECT_TRUE(absl::IsInvalidArgument(keys->Revoke(made.substr(0, 9))));  // too short to be sure
  ASSERT_TRUE(keys->Revoke(made.substr(0, 10)).ok());
  EXPECT_TRUE(absl::IsUnauthenticated(keys->Authenticate(made, Scope::kSearch).status()));
  EXPECT_TRUE(keys->List()[0].revoked);
}

}  // namespace
}  // namespace tweetsearch::aggregator

namespace tweetsearch::aggregator {
namespace {

TEST_F(FrontDoorTest, UsageNeedsAStoreAndAKeyAndReadsOnlyItsOwnSeriesWithoutAdmin) {
  UsageRequest request;
  request.to_s = clock_.NowUnixMillis() / 1000;
  request.from_s = request.to_s - 3600;
  // Usage analytics off: 501, after the key is checked.
  EXPECT_EQ(door_->Usage("no-such-key-at-all", request).status().code(),
            absl::StatusCode::kUnauthenticated);
  absl::Status off = door_->Usage(kKey, request).status();
  EXPECT_EQ(off.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(HttpStatusFor(off), 501);

  auto store = usage::UsageStore::Open(dir_.path() + "/usage", clock_);
  ASSERT_TRUE(store.ok());
  door_->set_usage_store(store->get());
  auto own = door_->Usage(kSearchOnly, request);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->key_id, door_->KeyIdOf(kSearchOnly));
  EXPECT_EQ(own->resolution, usage::Resolution::kMinute);
  EXPECT_EQ(own->points.size(), 60u);
  request.key = usage::kAllKeys;
  EXPECT_EQ(door_->Usage(kSearchOnly, request).status().code(),
            absl::StatusCode::kPermissionDenied);
  request.key = door_->KeyIdOf(kKey);  // another key's id
  EXPECT_EQ(door_->Usage(kSearchOnly, request).status().code(),
            absl::StatusCode::kPermissionDenied);
  door_->set_usage_store(nullptr);
}

// The route table: each path answers its own methods, 405 lists them in Allow, a path that
// only starts like an endpoint is not one, and routes are named by their row in /metrics.
TEST_F(FrontDoorTest, RoutesMatchWholePathsAndListTheirMethods) {
  Metrics metrics;
  ApiHandler handler(*door_, metrics);
  using boost::beast::http::verb;
  auto handle = [&](verb method, std::string target) {
    HttpRequest request(method, target, 11);
    request.prepare_payload();
    return handler.Handle(request);
  };
  auto allow = [](const HttpResponse& r) {
    return std::string(r[boost::beast::http::field::allow]);
  };
  const std::string key = "api_dev_key=test-key-search-ingest";
  EXPECT_EQ(handle(verb::get, "/v1/search?q=the&" + key).result_int(), 200);
  EXPECT_EQ(handle(verb::get, "/v1/searchX?q=the&" + key).result_int(), 404);
  EXPECT_EQ(handle(verb::get, "/v1/search/?q=the&" + key).result_int(), 200);
  EXPECT_EQ(handle(verb::get, "/v1/tweets/1/likes/x?" + key).result_int(), 404);
  EXPECT_EQ(handle(verb::get, "*").result_int(), 404);

  HttpResponse put_tweet = handle(verb::put, "/v1/tweets/12?" + key);
  EXPECT_EQ(put_tweet.result_int(), 405);
  EXPECT_EQ(allow(put_tweet), "GET, DELETE");
  HttpResponse put_keys = handle(verb::put, "/v1/admin/keys?" + key);
  EXPECT_EQ(put_keys.result_int(), 405);
  EXPECT_EQ(allow(put_keys), "GET, POST");
  EXPECT_EQ(allow(handle(verb::get, "/v1/tweets?" + key)), "POST");
  EXPECT_EQ(allow(handle(verb::post, "/assets/search.js")), "GET");

  EXPECT_EQ(handle(verb::get, "/assets/search.js").result_int(), 200);
  EXPECT_EQ(handle(verb::get, "/assets/nothing.js").result_int(), 404);
  EXPECT_EQ(handle(verb::get, "/v1/tweets/notanumber?" + key).result_int(), 400);

  std::string rendered;
  metrics.Render(&rendered);
  for (const char* series : {"route=\"search\",code=\"200\"", "route=\"not_found\",code=\"404\"",
                             "route=\"get\",code=\"405\"", "route=\"admin_keys\",code=\"405\"",
                             "route=\"ingest\",code=\"405\"", "route=\"web\",code=\"200\"",
                             "route=\"get\",code=\"400\""}) {
    EXPECT_NE(rendered.find(series), std::string::npos) << series;
  }
}

// HandleAsync answers as Handle does; with the Engine, whose searches wait on nothing but
// their own work, before it returns. Searches are compared without their took_ms.
TEST_F(FrontDoorTest, AnswersHandedOnLaterAreTheAnswersHandleGives) {
  Metrics metrics;
  ApiHandler handler(*door_, metrics);
  IngestSynthetic(300);
  using boost::beast::http::verb;
  const std::string key = "api_dev_key=test-key-search-ingest";
  auto comparable = [](const HttpResponse& r) {
    nlohmann::json body = nlohmann::json::parse(r.body(), nullptr, false);
    if (body.is_object()) body.erase("took_ms");
    return std::pair{r.result_int(), body.is_discarded() ? r.body() : body.dump()};
  };
  for (const auto& [method, target] : std::vector<std::pair<verb, std::string>>{
           {verb::get, "/v1/search?q=" + gen_.Word(0) + "&limit=5&" + key},
           {verb::get, "/v1/search?q=" + gen_.Word(1) + "&sort=1&highlight=1&" + key},
           {verb::get, "/v1/search?q=" + gen_.Word(2) + "&sort=2&" + key},
           {verb::get, "/v1/search?q=&" + key},
           {verb::get, "/v1/search?q=the&page_token=tampered&" + key},
           {verb::get, "/v1/search?q=the&api_dev_key=unknown"},
           {verb::get, "/v1/search?q=the&bogus=1&" + key},
           {verb::put, "/v1/search?q=the&" + key},
           {verb::get, "/v1/nothing"},
           {verb::get, "/healthz"}}) {
    HttpRequest request(method, target, 11);
    request.prepare_payload();
    const HttpResponse now = handler.Handle(request);
    int answers = 0;
    HttpResponse later;
    handler.HandleAsync(std::make_shared<const HttpRequest>(request), "", [&](HttpResponse r) {
      ++answers;
      later = std::move(r);
    });
    ASSERT_EQ(answers, 1) << target;
    EXPECT_EQ(comparable(later), comparable(now)) << target;
  }
  std::string rendered;
  metrics.Render(&rendered);
  // Both ways are counted, as every call is.
  EXPECT_NE(rendered.find("route=\"search\",code=\"200\"} 6"), std::string::npos) << rendered;
}

// Random request targets, methods and bodies through the whole HTTP handler: every answer is a
// known status with a JSON body (or plain text for the probes), and nothing throws or crashes.
TEST_F(FrontDoorTest, HandlerSurvivesRandomRequests) {
  Metrics metrics;
  ApiHandler handler(*door_, metrics);
  auto usage_store = usage::UsageStore::Open(dir_.path() + "/usage", clock_);
  ASSERT_TRUE(usage_store.ok());
  usage::UsageRecorder recorder(**usage_store, clock_);
  door_->set_usage_store(usage_store->get());
  handler.set_usage(&recorder);
  IngestSynthetic(200);
  std::mt19937_64 rng(3);
  const std::vector<std::string> seeds = {
      "/v1/search?api_dev_key=test-key-search-ingest&q=the+cat&sort=1&limit=5",
      "/v1/search?api_dev_key=test-key-search-ingest&q=(the+OR+%22cat+day%22)+-dog&highlight=1",
      "/v1/usage?api_dev_key=test-key-search-ingest&key=all&from=-2h&to=now&resolution=5m",
      "/v1/usage?key=test-key-search-ingest&from=1793577600&to=-1d&resolution=auto",
      "/assets/search.js",
      "/v1/web-config",
      "/v1/tweets?api_dev_key=test-key-search-ingest",
      "/v1/tweets/12345/likes?add=3&api_dev_key=test-key-search-ingest",
      "/v1/admin/keys/abc?key=test-key-search-ingest",
      "/v1/search?q=%22a%20b%22&page_token=AQAAAAAAAAAAAAQAwFiTk9gbAAAAWpOT2Btic6X"};
  const std::vector<boost::beast::http::verb> verbs = {
      boost::beast::http::verb::get, boost::beast::http::verb::post,
      boost::beast::http::verb::delete_, boost::beast::http::verb::put};
  const std::string alphabet = "abc%2F?&=/+-\"()#@:0123456789\xff\xc3";
  for (int i = 0; i < 20000; ++i) {
    std::string target = seeds[rng() % seeds.size()];
    for (int k = rng() % 4; k > 0; --k) {
      const size_t at = rng() % target.size();
      if (rng() % 2) {
        target[at] = alphabet[rng() % alphabet.size()];
      } else {
        target.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    HttpRequest request(verbs[rng() % verbs.size()], target, 11);
    if (rng() % 3 == 0) request.body() = i % 2 ? "{\"text\":\"fuzz\"}\n{bad" : "{\"set\": 4}";
    request.prepare_payload();
    HttpResponse response = handler.Handle(request);
    const int status = response.result_int();
    ASSERT_TRUE(status == 200 || status == 201 || status == 400 || status == 401 || status == 403 ||
                status == 404 || status == 405 || status == 409)
        << status << " for " << target << ": " << response.body();
    if (i % 1000 == 0) {
      ASSERT_TRUE(recorder.Flush().ok());
    }
    if (response[boost::beast::http::field::content_type] == "application/json") {
      ASSERT_FALSE(nlohmann::json::parse(response.body(), nullptr, false).is_discarded())
          << target << " -> " << response.body();
    }
  }
}

}  // namespace
}  // namespace tweetsearch::aggregator

namespace tweetsearch::aggregator {
namespace {

TEST(ApiHandlerTest, SlowOrBlockingRequestsGoToTheWorkerPool) {
  auto req = [](boost::beast::http::verb verb, std::string target) {
    return HttpRequest(verb, target, 11);
  };
  using boost::beast::http::verb;
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::get, "/v1/search?q=a")));
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::get, "/v1/search?q=a&sort=0")));
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::get, "/v1/search?q=a&sort=most_liked")));
  EXPECT_TRUE(ApiHandler::MayBlock(req(verb::get, "/v1/search?q=a&sort=1")));
  EXPECT_TRUE(ApiHandler::MayBlock(req(verb::get, "/v1/search?sort=best_match&q=a")));
  // A cluster's front door runs best match on its network threads, as other searches.
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::get, "/v1/search?q=a&sort=1"), true));
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::get, "/v1/search?sort=best_match&q=a"), true));
  EXPECT_TRUE(ApiHandler::MayBlock(req(verb::post, "/v1/tweets"), true));
  EXPECT_TRUE(ApiHandler::MayBlock(req(verb::get, "/v1/tweets/12"), true));
  EXPECT_TRUE(ApiHandler::MayBlock(req(verb::get, "/v1/tweets/12")));
  EXPECT_TRUE(ApiHandler::MayBlock(req(verb::post, "/v1/tweets")));
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::get, "/metrics")));
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::get, "/v1/searchX?q=a&sort=1")));  // a 404
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::put, "/v1/tweets")));              // a 405
  EXPECT_TRUE(ApiHandler::MayBlock(req(verb::delete_, "/v1/admin/keys/abc")));
  EXPECT_FALSE(ApiHandler::MayBlock(req(verb::get, "/assets/search.js")));
}

}  // namespace
}  // namespace tweetsearch::aggregator
