// scale_bench: how the engine's costs grow with the index, one row per size, as one table:
// indexing rate and the longest AddBatch (a write stall), peak RSS while indexing, bytes per
// tweet on disk, the time to open the saved index and the heap it then takes, and query latency
// on the reopened index (newest first and best match, as indexed: no compaction), first with
// the postings out of the page cache ("cold", evicted with posix_fadvise) and then warm.
// Sealed segments are files in --dir, served mapped, as in tweetsearchd.
//
//   scale_bench --sizes 1000000,10000000 --dir /tmp/scale   # the saved index goes under --dir
//
// Tweets are generated on the fly in batches of 1,000 (the generator's own time is not counted
// as indexing). Single-threaded, like engine_bench.
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "bench/query_mix.h"
#include "common/memory.h"
#include "common/synthetic.h"
#include "indexer/index/index.h"
#include "indexer/index/tweet_sources.h"
#include "indexer/query/searcher.h"

namespace ts = tweetsearch;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// A field of /proc/self/status in KiB ("VmHWM:", "RssAnon:").
long StatusKiB(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == field) {
      status >> value;
      return value;
    }
    status.ignore(1 << 10, '\n');
  }
  return 0;
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) bytes += e.file_size();
  }
  return bytes;
}

// Drops the files' pages from the page cache (those not mapped by this process).
void EvictFromPageCache(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// p50 and p99 in µs of `queries` in `sort`, each alone.
std::pair<double, double> Latency(const ts::index::Index& index,
                                  const std::vector<std::string>& queries, ts::query::SortMode sort,
                                  int64_t now_ms) {
  std::vector<double> micros;
  for (const std::string& q : queries) {
    if (auto timed = ts::bench::TimeQuery(index, q, sort, now_ms)) micros.push_back(timed->micros);
  }
  return {Percentile(micros, 0.5), Percentile(micros, 0.99)};
}

struct Row {
  uint64_t tweets = 0;
  double index_rate = 0, max_batch_ms = 0, p999_batch_ms = 0;
  long peak_rss_mib = 0, peak_anon_mib = 0;
  size_t segments = 0;
  double save_s = 0, disk_bytes_per_tweet = 0, open_s = 0, heap_bytes_per_tweet = 0;
  double mapped_bytes_per_tweet = 0, compacted_bytes_per_tweet = 0;
  double merge_catch_up_s = 0, write_amplification = 0;
  uint64_t merges = 0;
  std::vector<std::pair<std::string, std::pair<double, double>>> latencies, cold_latencies;
};

uint32_t g_merge_factor = 10;

Row RunSize(uint64_t tweets, const std::string& dir, size_t queries, uint64_t compact_limit) {
  Row row;
  row.tweets = tweets;
  std::vector<std::string> words_by_rank;
  int64_t now_ms = 0;
  {
    ts::index::IndexOptions options;
    std::filesystem::remove_all(dir);
    options.directory = dir;
    options.background_merges = true;  // as tweetsearchd runs it
    options.merge.merge_factor = g_merge_factor;
    std::unique_ptr<ts::index::Index> index = *ts::index::Index::Create(options);
    ts::SyntheticTweetGenerator gen;
    for (size_t rank = 0; rank < 2000; ++rank) words_by_rank.push_back(gen.Word(rank));
    std::vector<double> batch_ms;
    double indexing_s = 0;
    std::vector<ts::index::IndexDoc> batch;
    for (uint64_t done = 0; done < tweets;) {
      batch.clear();
      for (; batch.size() < 1000 && done < tweets; ++done) {
        batch.push_back(ts::index::ToIndexDoc(gen.Next()));
      }
      now_ms = std::max(now_ms, batch.back().created_at_ms);
      const auto start = Clock::now();
      (void)index->AddBatch(batch);
      batch_ms.push_back(Seconds(start) * 1e3);
      indexing_s += batch_ms.back() / 1e3;
      if (batch_ms.size() % 16 == 0) {
        row.peak_anon_mib = std::max(row.peak_anon_mib, StatusKiB("RssAnon:") / 1024);
      }
    }
    row.index_rate = static_cast<double>(tweets) / indexing_s;
    row.max_batch_ms = *std::max_element(batch_ms.begin(), batch_ms.end());
    row.p999_batch_ms = Percentile(batch_ms, 0.999);
    const auto merges_start = Clock::now();
    index->WaitForMerges();
    row.merge_catch_up_s = Seconds(merges_start);
    (void)index->Seal();
    row.peak_rss_mib = StatusKiB("VmHWM:") / 1024;
    row.segments = index->Snapshot()->segments.size();
    const ts::index::IndexStats stats = index->Stats();
    row.merges = stats.merges;
    row.write_amplification = static_cast<double>(stats.merged_docs) / static_cast<double>(tweets);
    const auto start = Clock::now();
    if (absl::Status s = index->Save(dir); !s.ok()) std::cerr << "save: " << s << "\n";
    row.save_s = Seconds(start);
    row.disk_bytes_per_tweet = static_cast<double>(DirBytes(dir)) / static_cast<double>(tweets);
  }
  malloc_trim(0);  // give the first index's memory back, so that the heap after opening is its own
  const long anon_before = StatusKiB("RssAnon:");
  const auto start = Clock::now();
  std::unique_ptr<ts::index::Index> index = *ts::index::Index::Open({}, dir);  // no merging
  row.open_s = Seconds(start);
  row.heap_bytes_per_tweet =
      static_cast<double>(StatusKiB("RssAnon:") - anon_before) * 1024 / static_cast<double>(tweets);
  row.mapped_bytes_per_tweet =
      static_cast<double>(index->Stats().mapped_bytes) / static_cast<double>(tweets);
  const std::vector<ts::bench::QueryKind> kinds = ts::bench::MakeQueries(words_by_rank, queries, 7);
  for (auto* latencies : {&row.cold_latencies, &row.latencies}) {
    if (latencies == &row.cold_latencies) EvictFromPageCache(dir);
    for (const ts::bench::QueryKind& kind : kinds) {
      for (auto [sort, name] : {std::pair{ts::query::SortMode::kNewest, "newest"},
                                std::pair{ts::query::SortMode::kBestMatch, "best match"},
                                std::pair{ts::query::SortMode::kMostLiked, "most liked"}}) {
        latencies->emplace_back(kind.name + " | " + name,
                                Latency(*index, kind.queries, sort, now_ms));
      }
    }
  }
  if (tweets <= compact_limit) {
    (void)index->Compact();
    (void)index->Save(dir);
    row.compacted_bytes_per_tweet =
        static_cast<double>(DirBytes(dir)) / static_cast<double>(tweets);
    const ts::index::SealedStats s = index->Stats().sealed;
    const auto per_tweet = [tweets](uint64_t bytes) {
      return static_cast<double>(bytes) / static_cast<double>(tweets);
    };
    std::cerr << "compacted, B/tweet: doc gaps " << per_tweet(s.doc_bytes) << ", freqs "
              << per_tweet(s.freq_bytes) << ", positions " << per_tweet(s.position_bytes)
              << ", skips+headers " << per_tweet(s.skip_bytes) << ", dictionary "
              << per_tweet(s.dictionary_bytes) << ", columns " << per_tweet(s.column_bytes)
              << "; postings/tweet " << per_tweet(s.postings) << "\n";
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  tweetsearch::ReturnLargeBuffersToTheSystem();  // as tweetsearchd does
  CLI::App app{"scale_bench: the engine's costs at several index sizes, as one table"};
  std::vector<uint64_t> sizes = {1'000'000};
  std::string dir = "/tmp/tweetsearch-scale-bench";
  size_t queries = 500;
  uint64_t compact_limit = 2'000'000;
  app.add_option("--sizes", sizes, "Index sizes, comma-separated")->delimiter(',');
  app.add_option("--dir", dir, "Where the saved index goes (replaced)")->capture_default_str();
  app.add_option("--queries", queries, "Queries per kind and sort")->capture_default_str();
  app.add_option("--compact-up-to", compact_limit,
                 "Also measure the compacted size of indexes up to this many tweets")
      ->capture_default_str();
  app.add_option("--merge-factor", g_merge_factor, "Segments merged at once (large: no merges)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<Row> rows;
  for (uint64_t n : sizes) rows.push_back(RunSize(n, dir, queries, compact_limit));
  std::filesystem::remove_all(dir);

  std::cout << std::fixed << std::setprecision(1);
  std::cout
      << "| tweets | index tweets/s | longest AddBatch ms (p99.9) | peak RSS (heap) MiB | merges "
         "(docs written / tweet) | merge catch-up s | segments | save s | disk B/tweet "
         "(compacted) | open s | heap B/tweet after open | mapped B/tweet |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    std::cout << "| " << r.tweets << " | " << std::setprecision(0) << r.index_rate << " | "
              << std::setprecision(1) << r.max_batch_ms << " (" << r.p999_batch_ms << ") | "
              << r.peak_rss_mib << " (" << r.peak_anon_mib << ") | " << r.merges << " ("
              << r.write_amplification << ") | " << r.merge_catch_up_s << " | " << r.segments
              << " | " << std::setprecision(2) << r.save_s << " | " << std::setprecision(1)
              << r.disk_bytes_per_tweet << " (" << r.compacted_bytes_per_tweet << ") | "
              << std::setprecision(3) << r.open_s << " | " << std::setprecision(1)
              << r.heap_bytes_per_tweet << " | " << r.mapped_bytes_per_tweet << " |\n";
  }
  // One row per query kind and sort; per size, cold then warm p50 / p99 in µs.
  std::cout << "\n| query | sort |";
  for (const Row& r : rows) std::cout << " " << r.tweets << " cold | " << r.tweets << " warm |";
  std::cout << "\n|---|---|";
  for (size_t i = 0; i < rows.size(); ++i) std::cout << "---|---|";
  std::cout << "\n" << std::setprecision(0);
  for (size_t q = 0; q < rows.front().latencies.size(); ++q) {
    std::cout << "| " << rows.front().latencies[q].first << " |";
    for (const Row& r : rows) {
      for (const auto* latencies : {&r.cold_latencies, &r.latencies}) {
        const auto& l = (*latencies)[q].second;
        std::cout << " " << l.first << " / " << l.second << " |";
      }
    }
    std::cout << "\n";
  }
  return 0;
}
