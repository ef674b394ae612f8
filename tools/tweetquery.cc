// tweetquery: loads tweets into an in-memory index and answers queries typed on standard input.
// It is the engine on its own, for trying the query language before the service exists.
//
//   tweetquery --sample 200000                 # synthetic tweets
//   tweetquery --sentiment140 FILE.csv         # real tweets
//   echo '#tag12 OR love' | tweetquery --sort 1
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <unordered_map>

#include "common/clock.h"
#include "common/synthetic.h"
#include "common/tweet_csv.h"
#include "indexer/index/index.h"
#include "indexer/index/tweet_sources.h"
#include "indexer/query/searcher.h"

namespace ts = tweetsearch;

int main(int argc, char** argv) {
  CLI::App app{"Searches tweets in an in-memory tweetsearch index"};
  uint64_t sample = 200000;
  std::string sentiment140;
  int sort = 0;
  uint32_t limit = 10;
  app.add_option("--sample", sample, "Synthetic tweets to load")->capture_default_str();
  app.add_option("--sentiment140", sentiment140, "Load this Sentiment140 CSV instead");
  app.add_option("--sort", sort, "0 newest, 1 best match, 2 most liked")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  app.add_option("--limit", limit, "Results per query")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<std::unique_ptr<ts::index::Index>> index = ts::index::Index::Create({});
  if (!index.ok()) {
    std::cerr << "tweetquery: " << index.status() << "\n";
    return 1;
  }
  // The index holds no tweet bodies (storage does, in the service); the shell keeps its own
  // copy to show them.
  std::unordered_map<ts::TweetId, std::pair<std::string, std::string>> bodies;
  const auto start = std::chrono::steady_clock::now();
  uint64_t loaded = 0;
  auto add = [&](ts::index::IndexDoc doc) {
    const ts::TweetId id = doc.id;
    std::pair<std::string, std::string> body{doc.user_name, doc.text};
    if ((*index)->Add(doc).ok()) {
      ++loaded;
      bodies[id] = std::move(body);
    }
  };
  if (!sentiment140.empty()) {
    size_t rejected = 0;
    absl::StatusOr<std::vector<ts::ImportedTweet>> tweets =
        ts::ReadSentiment140(sentiment140, &rejected);
    if (!tweets.ok()) {
      std::cerr << "tweetquery: " << tweets.status() << "\n";
      return 1;
    }
    for (ts::ImportedTweet& t : *tweets) add(ts::index::ToIndexDoc(std::move(t)));
  } else {
    ts::SyntheticTweetGenerator generator;
    for (uint64_t i = 0; i < sample; ++i) add(ts::index::ToIndexDoc(generator.Next()));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "indexed " << loaded << " tweets in " << std::fixed << std::setprecision(2)
            << seconds << " s. Type a query (e.g. 'love OR happy -sad', '#tag3', "
            << "'\"good morning\" min_faves:5'), one per line.\n";

  const bool interactive = ::isatty(STDIN_FILENO);
  std::string line;
  while ((interactive && std::cerr << "> "), std::getline(std::cin, line)) {
    if (line.empty()) continue;
    absl::StatusOr<ts::query::Plan> plan = ts::query::PlanQuery(line, (*index)->analyzer());
    if (!plan.ok()) {
      std::cout << "error: " << plan.status().message() << "\n";
      continue;
    }
    ts::query::SearchOptions options;
    options.sort = static_cast<ts::query::SortMode>(sort);
    options.limit = limit;
    options.now_ms = ts::SystemClock().NowUnixMillis();
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<ts::query::SearchResult> result =
        ts::query::Search(*(*index)->Snapshot(), *plan, options);
    const double micros =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (!result.ok()) {
      std::cout << "error: " << result.status().message() << "\n";
      continue;
    }
    std::cout << std::fixed << (result->total_is_exact ? "" : ">=") << result->total_hits
              << " hits in " << std::setprecision(0) << micros << " us\n";
    for (const ts::query::Hit& h : result->hits) {
      const auto& [user, text] = bodies[h.id];
      std::cout << "  " << h.id << "  likes=" << h.likes << "  score=" << std::setprecision(3)
                << h.score << "  @" << user << ": " << text << "\n";
    }
  }
  return 0;
}
