// Micro-benchmarks of the engine's hot paths (Google Benchmark).
#include <benchmark/benchmark.h>
#include <sys/statvfs.h>

#include <filesystem>
#include <random>

#include "aggregator/engine.h"
#include "aggregator/http/request_checks.h"
#include "aggregator/idempotency.h"
#include "common/synthetic.h"
#include "indexer/analysis/analyzer.h"
#include "indexer/index/bitpack.h"
#include "indexer/index/index.h"
#include "indexer/index/tweet_sources.h"
#include "indexer/query/searcher.h"

namespace ts = tweetsearch;

namespace {

std::vector<ts::SyntheticTweet> Tweets(size_t n) {
  ts::SyntheticTweetGenerator gen;
  std::vector<ts::SyntheticTweet> tweets;
  for (size_t i = 0; i < n; ++i) tweets.push_back(gen.Next());
  return tweets;
}

void BM_Analyze(benchmark::State& state) {
  auto analyzer = *ts::analysis::Analyzer::Create({});
  const auto tweets = Tweets(10000);
  std::vector<ts::analysis::Token> tokens;
  size_t i = 0;
  for (auto _ : state) {
    tokens.clear();
    benchmark::DoNotOptimize(analyzer->Analyze(tweets[i++ % tweets.size()].text, &tokens));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Analyze);

// Indexes 200,000 tweets in batches of state.range(0) (1 = one Add per tweet).
void BM_IndexAdd(benchmark::State& state) {
  std::vector<ts::index::IndexDoc> docs;
  for (auto& t : Tweets(200000)) docs.push_back(ts::index::ToIndexDoc(std::move(t)));
  const size_t batch = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    auto index = *ts::index::Index::Create({});
    state.ResumeTiming();
    for (size_t i = 0; i < docs.size(); i += batch) {
      benchmark::DoNotOptimize(
          index->AddBatch({docs.data() + i, std::min(batch, docs.size() - i)}));
    }
    state.PauseTiming();
    index.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(docs.size()));
}
BENCHMARK(BM_IndexAdd)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)->Iterations(3);

// A block of 128 values of the first argument's width, followed by its padding, decoded by the
// reference unpacker (second argument 0) or by the one blocks are decoded with (1: eight
// values a step with SSSE3/SSE4.1 up to 25 bits, one 64-bit load per value beyond).
void BM_Unpack(benchmark::State& state) {
  const uint8_t bits = static_cast<uint8_t>(state.range(0));
  const bool fast = state.range(1) != 0;
  std::vector<uint32_t> values(128);
  std::mt19937 rng(1);
  for (uint32_t& v : values) v = rng() & ((1u << bits) - 1);
  std::string packed;
  ts::index::PackBits(values, bits, &packed);
  packed.append(ts::index::kUnpackPadding, '\0');
  const auto* in = reinterpret_cast<const uint8_t*>(packed.data());
  uint32_t out[128];
  for (auto _ : state) {
    if (fast) {
      ts::index::UnpackBitsFast(in, 128, bits, out);
    } else {
      ts::index::UnpackBits(in, 128, bits, out);
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * 128);
}
BENCHMARK(BM_Unpack)->ArgsProduct({{3, 6, 7, 13, 28}, {0, 1}});

// 500,000 tweets compacted into one segment, and their words by document frequency, built once.
struct CountingCorpus {
  std::unique_ptr<ts::index::Index> index;
  std::vector<std::string> words;  // most frequent first
};
const CountingCorpus& Corpus() {
  static const CountingCorpus* corpus = [] {
    auto* c = new CountingCorpus{*ts::index::Index::Create({}), {}};
    std::vector<ts::index::IndexDoc> docs;
    for (auto& t : Tweets(500000)) docs.push_back(ts::index::ToIndexDoc(std::move(t)));
    for (size_t i = 0; i < docs.size(); i += 1000) {
      (void)c->index->AddBatch({docs.data() + i, std::min<size_t>(1000, docs.size() - i)});
    }
    (void)c->index->Seal();
    (void)c->index->Compact();
    std::vector<ts::analysis::Token> tokens;
    std::vector<std::pair<uint64_t, std::string>> by_df;
    auto snapshot = c->index->Snapshot();
    for (size_t i = 0; i < 2000; ++i) {
      tokens.clear();
      (void)c->index->analyzer().Analyze(docs[i * 97].text, &tokens);
      for (const auto& t : tokens) {
        by_df.emplace_back(snapshot->segments[0]->DocFreq(t.text), t.text);
      }
    }
    std::sort(by_df.rbegin(), by_df.rend());
    by_df.erase(std::unique(by_df.begin(), by_df.end()), by_df.end());
    for (auto& [df, w] : by_df) c->words.push_back(w);
    return c;
  }();
  return *corpus;
}

// The query of shape 0 (a), 1 (a OR b), 2 (a b), 3 (a b d) or 4 ((a OR b) d -e).
std::string ShapeQuery(int64_t shape, const std::string& a, const std::string& b,
                       const std::string& d, const std::string& e) {
  return shape == 0   ? a
         : shape == 1 ? a + " OR " + b
         : shape == 2 ? a + " " + b
         : shape == 3 ? a + " " + b + " " + d
                      : "(" + a + " OR " + b + ") " + d + " -" + e;
}

// Counting the matches of a query, newest first, top 20, by the words' frequency ranks:
// state.range(0) is the shape (0: one word, 1: a OR b, 2: a AND b, 3: a AND b AND c, 4:
// (a OR b) c -e), (1) the rank of its first word (b's is 8 times larger, c's 4 times, e's 2),
// (2) 0 for the default total (exact up to 10,000) or 1 for exact_total. Reports the time per
// counted match.
void BM_CountMatches(benchmark::State& state) {
  const CountingCorpus& c = Corpus();
  const size_t rank = static_cast<size_t>(state.range(1));
  const std::string& a = c.words[rank];
  // The other words are rarer, as in most queries of two or three words.
  const std::string& b = c.words[rank * 8 + 3];
  const std::string& d = c.words[rank * 4 + 1];
  const std::string& e = c.words[rank * 2 + 5];
  const std::string text = ShapeQuery(state.range(0), a, b, d, e);
  const ts::query::Plan plan = *ts::query::PlanQuery(text, c.index->analyzer());
  ts::query::SearchOptions options;
  options.exact_total = state.range(2) == 1;
  options.cache_counts = false;  // what counting costs, not what the cache saves
  auto snapshot = c.index->Snapshot();
  uint64_t total = 0;
  for (auto _ : state) {
    total = ts::query::Search(*snapshot, plan, options)->total_hits;
    benchmark::DoNotOptimize(total);
  }
  state.SetLabel("[" + text + "] " + std::to_string(total) + " matches");
  state.counters["per_match"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(total),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CountMatches)
    ->ArgsProduct({{0, 1}, {2, 20, 200}, {1}})
    ->ArgsProduct({{2, 3, 4}, {2, 10, 40}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// Ranking alone: best match (state.range(2) 1) or most liked (2), top 20, over the same
// corpus and shapes as BM_CountMatches (state.range(0) the shape, (1) the first word's rank;
// the other words are nearly as common, as in the slowest ranked queries). The counts come
// from the segment's count cache after the first run, so this times the ranking walk.
void BM_Rank(benchmark::State& state) {
  const CountingCorpus& c = Corpus();
  const size_t rank = static_cast<size_t>(state.range(1));
  const std::string& a = c.words[rank];
  const std::string& b = c.words[rank * 2 + 1];
  const std::string& d = c.words[rank * 3 + 2];
  const std::string& e = c.words[rank * 2 + 5];
  const std::string text = ShapeQuery(state.range(0), a, b, d, e);
  const ts::query::Plan plan = *ts::query::PlanQuery(text, c.index->analyzer());
  ts::query::SearchOptions options;
  options.sort = static_cast<ts::query::SortMode>(state.range(2));
  // Just after the newest tweet (500,000 tweets at the generator's ~4,600 a second).
  options.now_ms = ts::SyntheticOptions{}.start_unix_millis + 120 * 1000;
  auto snapshot = c.index->Snapshot();
  for (auto _ : state) {
    benchmark::DoNotOptimize(ts::query::Search(*snapshot, plan, options)->hits.size());
  }
  state.SetLabel("[" + text + "]");
}
BENCHMARK(BM_Rank)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 3, 30}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

// The second page of a newest-first AND of two common words, its matches counted each time
// (state.range(0) 0) or taken from the segment's count cache (1).
void BM_NextPage(benchmark::State& state) {
  const CountingCorpus& c = Corpus();
  const std::string text = c.words[2] + " " + c.words[19];
  const ts::query::Plan plan = *ts::query::PlanQuery(text, c.index->analyzer());
  ts::query::SearchOptions options;
  options.cache_counts = state.range(0) == 1;
  auto snapshot = c.index->Snapshot();
  options.after = ts::query::Search(*snapshot, plan, options)->hits.back().key;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ts::query::Search(*snapshot, plan, options)->total_hits);
  }
  state.SetLabel("[" + text + "]");
}
BENCHMARK(BM_NextPage)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

// What the HTTP server's header checks cost per request (framing, Host, content type), and a
// free-space check (statvfs), which the stores make once per write.
static void BM_RequestHeaderChecks(benchmark::State& state) {
  namespace http = boost::beast::http;
  const tweetsearch::aggregator::HostPolicy hosts("127.0.0.1", {});
  tweetsearch::aggregator::HttpRequestHeader header;
  header.method(state.range(0) == 0 ? http::verb::get : http::verb::post);
  header.target("/v1/tweets?report=rejected");
  header.version(11);
  header.set(http::field::host, "127.0.0.1:8080");
  header.set(http::field::content_type, "application/x-ndjson");
  header.set(http::field::transfer_encoding, "chunked");
  header.set("X-Api-Key", "ts_0123456789abcdef0123456789abcdef");
  for (auto _ : state) {
    bool ok = tweetsearch::aggregator::CheckFraming(header).ok() && hosts.Check(header).ok() &&
              tweetsearch::aggregator::CheckWriteContentType(header).ok();
    benchmark::DoNotOptimize(ok);
  }
}
BENCHMARK(BM_RequestHeaderChecks)->Arg(0)->Arg(1);

static void BM_FreeSpaceCheck(benchmark::State& state) {
  for (auto _ : state) {
    struct statvfs fs {};
    benchmark::DoNotOptimize(statvfs(".", &fs));
  }
}
BENCHMARK(BM_FreeSpaceCheck);

// What an Idempotency-Key costs a write in one process: range(0) 0 = a likes change, 1 = an
// ingest call of 100 tweets without ids; range(1) 1 = with a key (a fresh one per call);
// range(2) 1 = synced writes (the default), 0 = not synced (the work without the fsync).
static void BM_IdempotentWrites(benchmark::State& state) {
  namespace agg = tweetsearch::aggregator;
  char dir_template[] = "/tmp/ts-micro-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  agg::EngineOptions options;
  options.data_dir = dir;
  options.store.sync_writes = state.range(2) == 1;
  options.streams = false;
  {
    auto engine = agg::Engine::Open(options, tweetsearch::SystemClock());
    if (!engine.ok()) {
      state.SkipWithError(std::string(engine.status().message()).c_str());
      return;
    }
    const bool likes = state.range(0) == 0, keyed = state.range(1) == 1;
    std::vector<agg::NewTweet> batch;
    for (const ts::SyntheticTweet& t : Tweets(100)) {
      agg::NewTweet n = agg::ToNewTweet(t);
      n.id.reset();
      batch.push_back(std::move(n));
    }
    const tweetsearch::TweetId liked = (*engine)->Ingest(batch)[0].id;
    uint64_t call = 0;
    for (auto _ : state) {
      ++call;
      agg::WriteOnce once =
          agg::MakeWriteOnce("bench", std::to_string(call),
                             likes ? agg::LikesFingerprint(liked, 1, true) : std::string(32, 'f'));
      if (likes) {
        benchmark::DoNotOptimize((*engine)->Likes(liked, 1, true, keyed ? &once : nullptr));
      } else {
        benchmark::DoNotOptimize((*engine)->Ingest(batch, keyed ? &once : nullptr));
      }
    }
    state.SetItemsProcessed(state.iterations() * (likes ? 1 : 100));
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_IdempotentWrites)
    ->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);
