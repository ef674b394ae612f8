#include "tests/fuzz/fuzz_service.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>

#include "common/check.h"
#include "common/clock.h"
#include "common/synthetic.h"

namespace tweetsearch::fuzz {
namespace {

FuzzService* Make() {
  auto* s = new FuzzService;
  char pattern[] = "/tmp/tweetsearch-fuzz-XXXXXX";
  TS_CHECK(mkdtemp(pattern) != nullptr, "mkdtemp failed");
  s->dir = pattern;
  std::atexit([] { std::filesystem::remove_all(Service().dir); });
  aggregator::EngineOptions options;
  options.data_dir = s->dir + "/data";
  options.store.block_cache_bytes = 4 << 20;
  options.store.sync_writes = false;  // a fuzzer's writes need no durability
  absl::StatusOr<std::unique_ptr<aggregator::Engine>> engine =
      aggregator::Engine::Open(options, SystemClock());
  TS_CHECK(engine.ok(), "cannot open the engine");
  s->engine = *std::move(engine);
  s->keys = *aggregator::KeyRegistry::Open(s->dir + "/keys");
  const uint8_t all = uint8_t(aggregator::Scope::kSearch) | uint8_t(aggregator::Scope::kIngest) |
                      uint8_t(aggregator::Scope::kAdmin);
  TS_CHECK(s->keys->Register(kFuzzKey, "fuzz", "free", all).ok(), "cannot register the key");
  s->door = std::make_unique<aggregator::FrontDoor>(
      *s->engine, *s->keys, aggregator::PageTokenCodec(std::string(kFuzzSecret)));
  s->metrics = std::make_unique<aggregator::Metrics>();
  s->handler = std::make_unique<aggregator::ApiHandler>(*s->door, *s->metrics);
  s->handler->set_ready(true);
  SyntheticTweetGenerator generator;
  std::vector<absl::StatusOr<aggregator::NewTweet>> lines;
  for (int i = 0; i < 500; ++i) {
    SyntheticTweet t = generator.Next();
    aggregator::NewTweet tweet;
    tweet.id = t.id;
    tweet.text = t.text;
    tweet.likes = t.likes;
    tweet.created_at_ms = t.created_at_ms;
    lines.push_back(std::move(tweet));
  }
  TS_CHECK(s->door->Ingest(kFuzzKey, std::move(lines)).ok(), "cannot load the sample");
  return s;
}

}  // namespace

FuzzService& Service() {
  static FuzzService* service = Make();
  return *service;
}

}  // namespace tweetsearch::fuzz
