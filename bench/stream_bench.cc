// Streams under load: standing queries against a paced ingest through the real write path (an
// Engine on a RocksDB directory, synced writes).
//
//   1. Ingest rate without streams: unpaced bulk ingest (batches of 1,000) with the stream hub
//      off and on (no stream open), alternated, medians of each.
//   2. Latency: N standing queries (words, pairs, ORs, hashtags, from:users), then tweets at a
//      fixed rate (batches every 10 ms); for every event, the time from the acknowledgement of
//      its tweet (Ingest returned) to the event leaving the hub (Subscription::Next returned),
//      and the CPU the matcher thread used.
//
//   3. With --stream-door HOST:PORT, the same against a running server (one process or a
//      cluster's front door) over HTTP: one Server-Sent Events connection per standing query
//      on that front door, tweets posted at a fixed rate to --ingest-door (default the same);
//      for every event, the time from the acknowledgement of its tweet's batch (the POST
//      answered) to the event read by the client. Nothing is preloaded: the server's own
//      sample ranks the terms.
//
//   stream_bench [--queries 10000] [--rate 50000] [--seconds 10] [--preload 200000] [--no-sync]
//   stream_bench --stream-door 127.0.0.1:8081 --ingest-door 127.0.0.1:8082 --queries 200
//                --rate 2000
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "aggregator/engine.h"
#include "common/clock.h"
#include "common/synthetic.h"
#include "indexer/query/plan.h"
#include "net/http_client.h"
#include "net/sse_client.h"

namespace ts = tweetsearch;
namespace agg = tweetsearch::aggregator;
using Clock = std::chrono::steady_clock;

namespace {

struct Flags {
  size_t queries = 10'000;
  size_t rate = 50'000;
  double seconds = 10;
  size_t preload = 200'000;
  size_t ingest_tweets = 300'000;
  int ingest_rounds = 3;
  std::string dir;
  bool broad = false;    // standing queries of commoner words (ten times the events)
  bool no_sync = false;  // the engine's writes not synced (the write path runs faster)
  std::string stream_door, ingest_door, key = "demo-key-0123456789";  // a running server
};

class TempDir {
 public:
  explicit TempDir(const std::string& parent) {
    std::string templ =
        (parent.empty() ? std::filesystem::temp_directory_path().string() : parent) +
        "/stream-bench-XXXXXX";
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<agg::Engine> OpenEngine(const std::string& dir, bool streams, bool sync = true) {
  agg::EngineOptions o;
  o.data_dir = dir;
  o.streams = streams;
  o.store.sync_writes = sync;
  o.checkpoint_on_close = false;
  auto e = agg::Engine::Open(o, ts::SystemClock());
  if (!e.ok()) {
    std::cerr << e.status() << "\n";
    std::exit(1);
  }
  return *std::move(e);
}

std::vector<agg::NewTweet> Batch(ts::SyntheticTweetGenerator& gen, size_t n, ts::TweetId* next_id) {
  std::vector<agg::NewTweet> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(agg::ToNewTweet(gen.Next()));
    out.back().id = (*next_id)++;  // ids of the bench's own, to find a tweet's batch
  }
  return out;
}

double IngestRate(agg::Engine& e, ts::SyntheticTweetGenerator& gen, size_t tweets,
                  ts::TweetId* next_id) {
  const auto start = Clock::now();
  for (size_t done = 0; done < tweets; done += 1000) e.Ingest(Batch(gen, 1000, next_id));
  return tweets / std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void MeasureIngestRate(const Flags& flags) {
  std::vector<double> off, on;
  for (int round = 0; round < flags.ingest_rounds; ++round) {
    for (bool streams : {false, true}) {
      TempDir dir(flags.dir);
      auto engine = OpenEngine(dir.path(), streams);
      ts::SyntheticTweetGenerator gen(ts::SyntheticOptions{.seed = 7});
      ts::TweetId id = 1'000'000;
      (streams ? on : off).push_back(IngestRate(*engine, gen, flags.ingest_tweets, &id));
    }
  }
  std::cout << std::fixed;
  std::cout << "ingest, tweets/s (" << flags.ingest_tweets << " tweets, batches of 1,000, "
            << flags.ingest_rounds << " rounds): hub off median " << std::setprecision(0)
            << Median(off) << ", hub on with no stream median " << Median(on) << " (ratio "
            << std::setprecision(3) << Median(on) / Median(off) << ")\n  off:";
  for (double r : off) std::cout << " " << std::setprecision(0) << r;
  std::cout << "\n  on: ";
  for (double r : on) std::cout << " " << std::setprecision(0) << r;
  std::cout << "\n";
}

// Standing queries as stream users write them: specific words, pairs, hashtags, accounts.
// `broad`: commoner words and tags (about ten times the events).
std::vector<std::string> StandingQueries(const ts::SyntheticTweetGenerator& gen, size_t n,
                                         bool broad) {
  std::mt19937_64 rng(11);
  const double word_min = broad ? 200 : 2'000, pair_min = broad ? 20 : 100,
               or_min = broad ? 500 : 5'000, tag_min = broad ? 1 : 100;
  auto rank = [&](double lo, double hi) {
    return static_cast<size_t>(
        std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng)));
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    switch (i % 20) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
      case 5:
      case 6:
      case 7:
        out.push_back(gen.Word(rank(word_min, 50'000)));
        break;
      case 8:
      case 9:
      case 10:
      case 11:
        out.push_back(gen.Word(rank(pair_min, 5'000)) + " " + gen.Word(rank(pair_min, 5'000)));
        break;
      case 12:
      case 13:
      case 14:
        out.push_back(gen.Word(rank(or_min, 50'000)) + " OR " + gen.Word(rank(or_min, 50'000)));
        break;
      case 15:
      case 16:
      case 17:
        out.push_back("#tag" + std::to_string(rank(tag_min, 2'000)));
        break;
      default:
        out.push_back("from:user" + std::to_string(1 + rng() % 100'000));
    }
  }
  return out;
}

// Per event, ms from its batch's acknowledgement to its delivery (sorted; 0 for an event that
// came before the acknowledgement reached the writer).
std::vector<double> LatenciesMs(const std::vector<std::pair<uint32_t, int64_t>>& deliveries,
                                const std::vector<std::atomic<int64_t>>& acked) {
  std::vector<double> ms;
  ms.reserve(deliveries.size());
  for (const auto& [b, t] : deliveries) {
    if (acked[b].load() == 0) continue;  // the batch was not acknowledged
    ms.push_back(static_cast<double>(std::max<int64_t>(0, t - acked[b].load())) / 1e6);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

void PrintLatencies(const std::string& what, const std::vector<double>& ms) {
  auto q = [&](double p) {
    return ms.empty() ? 0 : ms[std::min(ms.size() - 1, size_t(p * ms.size()))];
  };
  std::cout << std::fixed << std::setprecision(2) << what << ", ms: p50 " << q(0.5) << "  p90 "
            << q(0.9) << "  p99 " << q(0.99) << "  max " << (ms.empty() ? 0 : ms.back()) << "\n";
}

// CPU seconds (user + system) of this process's thread named `name`; 0 if none.
double ThreadCpuSeconds(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string n;
    std::getline(comm, n);
    if (n != name) continue;
    std::ifstream stat(task.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string f;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i) {
      if (i == 14) utime = std::stoull(f);
      if (i == 15) stime = std::stoull(f);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return 0;
}

void MeasureLatency(const Flags& flags) {
  TempDir dir(flags.dir);
  auto engine = OpenEngine(dir.path(), true, !flags.no_sync);
  ts::SyntheticTweetGenerator gen(ts::SyntheticOptions{.seed = 3});
  ts::TweetId next_id = 1'000'000;
  for (size_t done = 0; done < flags.preload; done += 1000)
    engine->Ingest(Batch(gen, 1000, &next_id));

  const std::vector<std::string> texts = StandingQueries(gen, flags.queries, flags.broad);
  std::vector<std::unique_ptr<agg::Subscription>> subs;
  absl::Mutex mu;
  std::vector<size_t> ready;  // subscriptions woken
  for (size_t i = 0; i < texts.size(); ++i) {
    auto plan = ts::query::PlanQuery(texts[i], engine->analyzer());
    if (!plan.ok()) continue;
    auto s = engine->streams()->Subscribe(*std::move(plan), std::nullopt);
    if (!s.ok()) continue;
    const size_t index = subs.size();
    (*s)->OnReady([&mu, &ready, index] {
      absl::MutexLock lock(&mu);
      ready.push_back(index);
    });
    subs.push_back(*std::move(s));
  }

  // Acknowledgement times by batch; (batch, delivery time) per event.
  const size_t batch = std::max<size_t>(1, flags.rate / 100);  // every 10 ms
  const size_t batches = static_cast<size_t>(flags.seconds * 100);
  const ts::TweetId first_id = next_id;
  std::vector<std::atomic<int64_t>> acked(batches);  // ns; events of a batch come after it
  std::vector<std::pair<uint32_t, int64_t>> deliveries;
  deliveries.reserve(1 << 20);
  std::atomic<bool> writing = true;
  auto ns = [] { return Clock::now().time_since_epoch().count(); };

  std::thread consumer([&] {
    std::vector<size_t> mine;
    for (;;) {
      {
        absl::MutexLock lock(&mu);
        auto have = [&]() { return !ready.empty() || !writing.load(); };
        mu.AwaitWithTimeout(absl::Condition(&have), absl::Milliseconds(200));
        mine.swap(ready);
        if (mine.empty() && !writing.load()) return;
      }
      std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
      for (size_t i : mine) {
        for (;;) {
          auto b = subs[i]->Next(1024);
          if (!b.ok()) break;
          const int64_t now = ns();
          for (const agg::StreamEvent& e : b->events) {
            deliveries.emplace_back(static_cast<uint32_t>((e.tweet->id - first_id) / batch), now);
          }
          if (b->events.empty() && !b->more) break;
        }
      }
      mine.clear();
    }
  });

  // The batches, made up front (generating is not what is measured), offered by two writers
  // (one alone cannot offer 50,000 tweets/s with synced writes; the engine groups theirs).
  std::vector<std::vector<agg::NewTweet>> offered;
  for (size_t b = 0; b < batches; ++b) offered.push_back(Batch(gen, batch, &next_id));
  const double cpu_before = ThreadCpuSeconds("stream-matcher");
  const auto start = Clock::now();
  std::vector<std::thread> writers;
  for (size_t w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      for (size_t b = w; b < batches; b += 2) {
        std::this_thread::sleep_until(start + std::chrono::microseconds(10'000 * b));
        engine->Ingest(std::move(offered[b]));
        acked[b].store(ns());
      }
    });
  }
  for (std::thread& t : writers) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  // Let the matcher finish what was published, then stop the consumer.
  while (engine->streams()->Stats().position < engine->Stats().last_change) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double cpu = ThreadCpuSeconds("stream-matcher") - cpu_before;
  writing = false;
  consumer.join();

  const std::vector<double> ms = LatenciesMs(deliveries, acked);
  const agg::StreamHubStats s = engine->streams()->Stats();
  const double tweets = static_cast<double>(batches * batch);
  std::cout << std::fixed << std::setprecision(1);
  std::cout << subs.size() << " standing queries (" << s.standing_queries << " distinct), "
            << tweets / wall << " tweets/s offered over " << wall << " s (" << batches
            << " batches of " << batch << "), preload " << flags.preload << "\n";
  std::cout << "events " << ms.size() << " (" << ms.size() / tweets << " per tweet); query tests "
            << std::setprecision(2) << static_cast<double>(s.query_tests) / tweets
            << " per tweet; catch-ups " << s.catch_ups << "\n";
  PrintLatencies("ack -> event", ms);
  std::cout << "matcher thread CPU: " << cpu << " s over " << wall << " s (" << std::setprecision(1)
            << 100 * cpu / wall << " % of one core)\n";
}

// "HOST:PORT" split at its last colon.
std::pair<std::string, std::string> HostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "expected HOST:PORT, got '" << address << "'\n";
    std::exit(2);
  }
  return {address.substr(0, colon), address.substr(colon + 1)};
}

// A batch as the ingest endpoint takes it (JSON Lines), with the bench's own ids.
std::string JsonLines(const std::vector<agg::NewTweet>& batch) {
  std::string out;
  for (const agg::NewTweet& t : batch) {
    nlohmann::json line = {{"id", std::to_string(*t.id)},
                           {"user_id", std::to_string(t.user_id)},
                           {"user_name", t.user_name},
                           {"text", t.text},
                           {"likes", t.likes}};
    if (!t.lang.empty()) line["lang"] = t.lang;
    out += line.dump();
    out += '\n';
  }
  return out;
}

// Opens one SSE connection per standing query; each reader thread notes (batch, time) for every
// tweet event of the bench's ids, until its connection is closed.
struct RemoteStreams {
  std::vector<std::unique_ptr<ts::net::SseClient>> clients;
  std::vector<std::thread> readers;
  std::mutex mu;
  std::vector<std::pair<uint32_t, int64_t>> deliveries;  // guarded by mu

  void Open(const Flags& flags, const std::vector<std::string>& texts, ts::TweetId first_id,
            size_t batch, size_t batches) {
    const auto [host, port] = HostPort(flags.stream_door);
    for (const std::string& text : texts) {
      auto c = ts::net::SseClient::Open(host, port,
                                        "/v1/stream?search_terms=" + ts::net::UrlEncode(text),
                                        flags.key, "", std::chrono::seconds(30));
      if (!c.ok() || !(*c)->Next().ok()) {
        std::cerr << "cannot open a stream for '" << text << "': " << c.status() << "\n";
        std::exit(1);
      }
      clients.push_back(*std::move(c));
    }
    for (auto& c : clients) {
      readers.emplace_back([this, client = c.get(), first_id, batch, batches] {
        for (;;) {
          absl::StatusOr<ts::net::SseEvent> e = client->Next();
          if (!e.ok()) return;
          if (e->event != "tweet") continue;
          const int64_t now = Clock::now().time_since_epoch().count();
          const size_t at = e->data.find("\"tweet_id\":\"");
          if (at == std::string::npos) continue;
          const ts::TweetId id = std::strtoull(e->data.c_str() + at + 12, nullptr, 10);
          if (id < first_id || id >= first_id + batch * batches) continue;
          std::lock_guard<std::mutex> lock(mu);
          deliveries.emplace_back(static_cast<uint32_t>((id - first_id) / batch), now);
        }
      });
    }
  }
  void Close() {
    for (auto& c : clients) c->Close();
    for (std::thread& t : readers) t.join();
  }
};

void MeasureRemote(const Flags& flags) {
  ts::SyntheticTweetGenerator gen(ts::SyntheticOptions{.seed = 3});
  const std::vector<std::string> texts = StandingQueries(gen, flags.queries, flags.broad);
  const size_t batch = std::max<size_t>(1, flags.rate / 100);  // every 10 ms
  const size_t batches = static_cast<size_t>(flags.seconds * 100);
  // Ids of this run's own, past those of earlier runs (and below the server's snowflakes).
  const ts::TweetId first_id = static_cast<ts::TweetId>(ts::SystemClock().NowUnixMillis()) * 100;
  RemoteStreams streams;
  streams.Open(flags, texts, first_id, batch, batches);

  std::vector<std::string> bodies;
  ts::TweetId next_id = first_id;
  for (size_t b = 0; b < batches; ++b) bodies.push_back(JsonLines(Batch(gen, batch, &next_id)));
  std::vector<std::atomic<int64_t>> sent(batches), acked(batches);
  std::atomic<size_t> refused{0};
  const auto [host, port] =
      HostPort(flags.ingest_door.empty() ? flags.stream_door : flags.ingest_door);
  const auto start = Clock::now();
  std::vector<std::thread> writers;
  for (size_t w = 0; w < 2; ++w) {
    writers.emplace_back([&, w, host = host, port = port] {
      ts::net::HttpClient client(host, port);
      for (size_t b = w; b < batches; b += 2) {
        std::this_thread::sleep_until(start + std::chrono::microseconds(10'000 * b));
        sent[b].store(Clock::now().time_since_epoch().count());
        auto r = client.Send("POST", "/v1/tweets", bodies[b], "application/x-ndjson", flags.key);
        if (r.ok() && r->status == 200) {
          acked[b].store(Clock::now().time_since_epoch().count());
        } else {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : writers) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  // Until no event came for a second: the last ones are on their way.
  for (size_t seen = SIZE_MAX;;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::lock_guard<std::mutex> lock(streams.mu);
    if (streams.deliveries.size() == seen) break;
    seen = streams.deliveries.size();
  }
  streams.Close();
  const std::vector<double> ms = LatenciesMs(streams.deliveries, acked);
  const double tweets = static_cast<double>(batches * batch);
  std::cout << std::fixed << std::setprecision(1) << texts.size() << " streams on "
            << flags.stream_door << ", " << tweets / wall << " tweets/s posted to " << host << ":"
            << port << " over " << wall << " s (" << batches << " batches of " << batch << ", "
            << refused.load() << " not acknowledged)\n";
  std::cout << "events " << ms.size() << " (" << std::setprecision(2) << ms.size() / tweets
            << " per tweet)\n";
  PrintLatencies("ack -> event", ms);
  // In a cluster a tweet's event can come before its POST is answered (the answer waits until
  // the index replicas hold the tweet): the time from the POST's start shows the whole path.
  PrintLatencies("POST sent -> event", LatenciesMs(streams.deliveries, sent));
  std::vector<double> post;
  for (size_t b = 0; b < batches; ++b) {
    if (acked[b].load() != 0) post.push_back(static_cast<double>(acked[b] - sent[b]) / 1e6);
  }
  std::sort(post.begin(), post.end());
  PrintLatencies("POST sent -> answered", post);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as tweetsearchd does
  CLI::App app{"Benchmarks streams: standing queries against a paced ingest"};
  Flags flags;
  app.add_option("--queries", flags.queries, "Standing queries")->capture_default_str();
  app.add_option("--rate", flags.rate, "Tweets per second offered")->capture_default_str();
  app.add_option("--seconds", flags.seconds, "Seconds of paced ingest")->capture_default_str();
  app.add_option("--preload", flags.preload, "Tweets ingested before the streams open")
      ->capture_default_str();
  app.add_option("--ingest-tweets", flags.ingest_tweets,
                 "Tweets per round of the ingest-rate comparison (0 skips it)")
      ->capture_default_str();
  app.add_option("--ingest-rounds", flags.ingest_rounds, "Rounds of the ingest-rate comparison")
      ->capture_default_str();
  app.add_flag("--broad", flags.broad, "Standing queries of commoner words (ten times the events)");
  app.add_option("--dir", flags.dir, "Where to make the temporary data directories");
  app.add_flag("--no-sync", flags.no_sync, "The engine's writes not synced");
  app.add_option("--stream-door", flags.stream_door,
                 "HOST:PORT of a running server whose streams to measure (over HTTP)");
  app.add_option("--ingest-door", flags.ingest_door,
                 "HOST:PORT to post tweets to (default: the same)");
  app.add_option("--key", flags.key, "API key of the running server")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!flags.stream_door.empty()) {
    MeasureRemote(flags);
    return 0;
  }
  if (flags.ingest_tweets > 0) MeasureIngestRate(flags);
  if (flags.queries > 0) MeasureLatency(flags);
  return 0;
}
