// engine_bench: indexing throughput, query latency percentiles and memory of the search engine,
// on synthetic tweets (tweetgen's generator) or the real Sentiment140 tweets.
//
//   engine_bench --tweets 1000000            # the numbers docs/benchmarks.md records
//   engine_bench --sentiment140 ../shared/data/sentiment140-20k.csv
//   engine_bench --tweets 10000000 --index-dir /tmp/idx10m   # builds once, reuses after
//
// Single-threaded throughout: indexing runs on one core, and each query runs alone.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>

#include "bench/query_mix.h"
#include "common/file_util.h"
#include "common/memory.h"
#include "common/synthetic.h"
#include "common/tweet_csv.h"
#include "indexer/index/index.h"
#include "indexer/index/sealed_segment.h"
#include "indexer/index/tweet_sources.h"
#include "indexer/query/searcher.h"

namespace ts = tweetsearch;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

long RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      return value;
    }
    status.ignore(1 << 10, '\n');
  }
  return 0;
}

struct Latency {
  double p50_us, p99_us, mean_us;
  double avg_hits;
  std::string slowest;  // the slowest query and its time
};

// Writes a buffer larger than the caches, so that what a query finds cached is only what it
// brings in itself (--evict-caches).
void EvictCaches() {
  static std::vector<uint64_t> buffer(size_t{64} << 17);  // 64 MiB
  static uint64_t round = 0;
  ++round;
  for (uint64_t& word : buffer) word += round;
  asm volatile("" : : "r"(buffer.data()) : "memory");  // the writes are kept
}

// With counts_cached, each query first runs once newest first with the segments' count caches
// on, and is then timed with them: the ranking alone. With exact_total every match is counted.
// With each_out, every query's time and its number of matches are written there too.
Latency Measure(const ts::index::Index& index, const std::vector<std::string>& queries,
                ts::query::SortMode sort, int64_t now_ms, bool counts_cached, bool exact_total,
                size_t rank_counted_up_to, bool evict_caches, std::ostream* each_out) {
  std::vector<double> micros;
  double hits = 0;
  double slowest = -1;
  std::string slowest_query;
  uint64_t slowest_total = 0;
  bool slowest_exact = true;
  for (const std::string& q : queries) {
    if (counts_cached) {
      (void)ts::bench::TimeQuery(index, q, ts::query::SortMode::kNewest, now_ms, exact_total, true);
    }
    if (evict_caches) EvictCaches();
    std::optional<ts::bench::TimedQuery> timed = ts::bench::TimeQuery(
        index, q, sort, now_ms, exact_total, counts_cached, rank_counted_up_to);
    if (!timed.has_value()) continue;
    micros.push_back(timed->micros);
    if (each_out != nullptr) {
      *each_out << static_cast<int64_t>(timed->micros) << " µs\t"
                << (timed->total_is_exact ? "" : "≥ ") << timed->total_hits << " matches\t" << q
                << "\n";
    }
    if (micros.back() > slowest) {
      slowest = micros.back();
      slowest_query = q;
      slowest_total = timed->total_hits;
      slowest_exact = timed->total_is_exact;
    }
    hits += static_cast<double>(timed->hits);
  }
  std::sort(micros.begin(), micros.end());
  Latency l{};
  if (micros.empty()) return l;
  l.p50_us = micros[micros.size() / 2];
  l.p99_us = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
  double sum = 0;
  for (double m : micros) sum += m;
  l.mean_us = sum / static_cast<double>(micros.size());
  l.avg_hits = hits / static_cast<double>(micros.size());
  l.slowest = "[" + slowest_query + "] " + std::to_string(static_cast<int>(slowest)) + " µs, " +
              (slowest_exact ? "" : "≥ ") + std::to_string(slowest_total) + " matches";
  return l;
}

// Exact counts (exact_total, newest first, top 20): the time per match of the queries with at
// least 10,000 matches, where counting dominates.
void MeasureCounts(const ts::index::Index& index, const std::vector<ts::bench::QueryKind>& kinds,
                   int64_t now_ms) {
  std::cout << "## Exact counts (exact_total=true, newest first, top 20)\n\n"
               "| query | queries with >= 10k matches | matches p50 | ns/match p50 | "
               "ns/match p90 | µs p50 |\n|---|---|---|---|---|---|\n";
  for (const ts::bench::QueryKind& kind : kinds) {
    std::vector<double> per_match, micros, totals;
    for (const std::string& q : kind.queries) {
      std::optional<ts::bench::TimedQuery> timed =
          ts::bench::TimeQuery(index, q, ts::query::SortMode::kNewest, now_ms, true);
      if (!timed.has_value() || timed->total_hits < 10000) continue;
      per_match.push_back(timed->micros * 1000 / static_cast<double>(timed->total_hits));
      micros.push_back(timed->micros);
      totals.push_back(static_cast<double>(timed->total_hits));
    }
    if (per_match.empty()) continue;
    for (auto* v : {&per_match, &micros, &totals}) std::sort(v->begin(), v->end());
    const size_t n = per_match.size();
    std::cout << "| " << kind.name << " | " << n << " | " << std::setprecision(0) << totals[n / 2]
              << " | " << std::setprecision(1) << per_match[n / 2] << " | " << per_match[n * 9 / 10]
              << " | " << std::setprecision(0) << micros[n / 2] << " |\n";
  }
  std::cout << "\n";
}

// Counts over time (GET /v1/counts): a day of minute buckets ending with the minute of
// `now_ms`, every query of each kind.
void MeasureCountsOverTime(const ts::index::Index& index,
                           const std::vector<ts::bench::QueryKind>& kinds, int64_t now_ms) {
  constexpr int64_t kMinute = 60'000;
  ts::query::TimeBuckets buckets;
  buckets.width_ms = kMinute;
  buckets.count = 24 * 60;
  buckets.start_ms = (now_ms / kMinute + 1) * kMinute - buckets.end_ms();
  auto snapshot = index.Snapshot();
  std::cout << "## Counts over time (a day of minute buckets)\n\n";
  // The first count derives the sealed segments' created_at bounds per range (once).
  const auto first = Clock::now();
  const auto plan = ts::query::PlanQuery("the", index.analyzer());
  if (plan.ok()) (void)ts::query::CountOverTime(*snapshot, *plan, buckets);
  std::cout << "First count (derives the bounds): " << std::setprecision(1) << Seconds(first) * 1e3
            << " ms.\n\n"
            << "| query | p50 µs | p99 µs | matches p50 | slowest |\n|---|---|---|---|---|\n";
  for (const ts::bench::QueryKind& kind : kinds) {
    std::vector<std::pair<double, std::string>> micros;
    std::vector<uint64_t> matches;
    for (const std::string& q : kind.queries) {
      absl::StatusOr<ts::query::Plan> p = ts::query::PlanQuery(q, index.analyzer());
      if (!p.ok()) continue;
      const auto start = Clock::now();
      absl::StatusOr<std::vector<uint64_t>> counts =
          ts::query::CountOverTime(*snapshot, *p, buckets);
      micros.emplace_back(Seconds(start) * 1e6, q);
      if (!counts.ok()) continue;
      uint64_t total = 0;
      for (uint64_t c : *counts) total += c;
      matches.push_back(total);
    }
    if (micros.empty() || matches.empty()) continue;
    std::sort(micros.begin(), micros.end());
    std::sort(matches.begin(), matches.end());
    const size_t n = micros.size();
    std::cout << "| " << kind.name << " | " << std::setprecision(0) << micros[n / 2].first << " | "
              << micros[std::min(n - 1, n * 99 / 100)].first << " | " << matches[matches.size() / 2]
              << " | [" << micros.back().second << "] " << micros.back().first << " |\n";
  }
  std::cout << "\n";
}

void PrintMemory(const char* label, const ts::index::IndexStats& s) {
  const double postings = static_cast<double>(s.sealed.postings);
  std::cout << "| " << label << " | " << s.sealed.postings << " | " << std::setprecision(3)
            << static_cast<double>(s.sealed.posting_bytes) / postings << " | "
            << static_cast<double>(s.sealed.posting_bytes + s.sealed.dictionary_bytes) / postings
            << " | " << s.sealed.posting_bytes / (1 << 20) << " | "
            << s.sealed.dictionary_bytes / (1 << 20) << " | " << s.sealed.column_bytes / (1 << 20)
            << " |\n";
  std::cout << "|   split, bytes/posting | doc gaps "
            << static_cast<double>(s.sealed.doc_bytes) / postings << " | freqs "
            << static_cast<double>(s.sealed.freq_bytes) / postings << " | positions "
            << static_cast<double>(s.sealed.position_bytes) / postings << " | skips+headers "
            << static_cast<double>(s.sealed.skip_bytes) / postings << " | | |\n";
}

struct Flags {
  uint64_t tweets = 1000000;
  size_t queries = 1000;
  std::string sentiment140;
  bool stop_words = true;
  std::vector<int> sorts;
  std::vector<std::string> kind_names;
  bool compacted_only = false;
  std::string index_dir;
  bool save_as_indexed = false;
  bool counts_cached = false;
  bool exact_total = false;
  size_t rank_counted_up_to = ts::query::kTrackTotalHitsUpTo;
  bool counts_over_time = false;
  bool each = false;
  bool evict_caches = false;
  std::vector<std::string> query_texts;
};

// The query mixes, or the queries the flags name (each repeated --queries times).
std::vector<ts::bench::QueryKind> Queries(const std::vector<std::string>& words,
                                          const Flags& flags) {
  if (flags.query_texts.empty()) return ts::bench::MakeQueries(words, flags.queries, 7);
  std::vector<ts::bench::QueryKind> kinds;
  for (const std::string& q : flags.query_texts) {
    kinds.push_back({q, std::vector<std::string>(flags.queries, q)});
  }
  return kinds;
}

// The corpus, built before indexing so that indexing is timed alone; nullopt (after printing
// why) if the CSV cannot be read.
std::optional<std::vector<ts::index::IndexDoc>> LoadCorpus(const Flags& flags) {
  std::vector<ts::index::IndexDoc> docs;
  if (!flags.sentiment140.empty()) {
    absl::StatusOr<std::vector<ts::ImportedTweet>> real = ts::ReadSentiment140(flags.sentiment140);
    if (!real.ok()) {
      std::cerr << real.status() << "\n";
      return std::nullopt;
    }
    for (ts::ImportedTweet& t : *real) docs.push_back(ts::index::ToIndexDoc(std::move(t)));
  } else {
    ts::SyntheticTweetGenerator gen;
    docs.reserve(flags.tweets);
    for (uint64_t i = 0; i < flags.tweets; ++i) docs.push_back(ts::index::ToIndexDoc(gen.Next()));
  }
  return docs;
}

// Indexes `docs` in batches of 1,000 (as a bulk ingest call hands them over), seals, and prints
// what it took.
std::unique_ptr<ts::index::Index> IndexAndReport(const ts::index::IndexOptions& options,
                                                 const std::vector<ts::index::IndexDoc>& docs) {
  const long rss_corpus = RssKiB();
  std::unique_ptr<ts::index::Index> index = *ts::index::Index::Create(options);
  auto start = Clock::now();
  uint64_t added = 0;
  constexpr size_t kBatch = 1000;
  for (size_t i = 0; i < docs.size(); i += kBatch) {
    const size_t n = std::min(kBatch, docs.size() - i);
    for (const absl::Status& s : index->AddBatch({docs.data() + i, n})) added += s.ok();
  }
  const double index_seconds = Seconds(start);
  start = Clock::now();
  (void)index->Seal();
  const double seal_seconds = Seconds(start);
  const long rss_indexed = RssKiB();

  // Analysis alone, to see what share of indexing it is.
  start = Clock::now();
  std::vector<ts::analysis::Token> tokens;
  size_t token_count = 0;
  for (const ts::index::IndexDoc& d : docs) {
    tokens.clear();
    (void)index->analyzer().Analyze(d.text, &tokens);
    token_count += tokens.size();
  }
  const double analyze_seconds = Seconds(start);

  std::cout << std::fixed << std::setprecision(0);
  std::cout << "## Indexing (" << added << " tweets, one core)\n\n";
  std::cout << "| what | value |\n|---|---|\n";
  std::cout << "| index into memory | " << added / index_seconds << " tweets/s ("
            << std::setprecision(2) << index_seconds << " s) |\n";
  std::cout << "| of which analysis alone | " << std::setprecision(0)
            << static_cast<double>(docs.size()) / analyze_seconds << " tweets/s |\n";
  std::cout << "| seal the last segment | " << std::setprecision(3) << seal_seconds << " s |\n";
  std::cout << "| tokens per tweet | " << std::setprecision(1)
            << static_cast<double>(token_count) / static_cast<double>(docs.size()) << " |\n";
  std::cout << "| RSS: corpus in memory / with index | " << rss_corpus / 1024 << " MiB / "
            << rss_indexed / 1024 << " MiB |\n\n";
  return index;
}

// The vocabulary by document frequency, from the words of 20,000 sampled tweets.
std::vector<std::string> WordsByRank(const ts::index::Index& index,
                                     const std::vector<ts::index::IndexDoc>& docs) {
  std::vector<std::pair<uint64_t, std::string>> by_df;
  auto snapshot = index.Snapshot();
  std::mt19937_64 rng(3);
  std::vector<std::string> candidates;
  std::vector<ts::analysis::Token> tokens;
  for (size_t i = 0; i < 20000 && i < docs.size(); ++i) {
    tokens.clear();
    (void)index.analyzer().Analyze(docs[rng() % docs.size()].text, &tokens);
    for (const auto& t : tokens) candidates.push_back(t.text);
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  for (const std::string& c : candidates) {
    uint64_t df = 0;
    for (const auto& s : snapshot->segments) df += s->DocFreq(c);
    by_df.emplace_back(df, c);
  }
  std::sort(by_df.rbegin(), by_df.rend());
  std::vector<std::string> words;
  for (auto& [df, w] : by_df) words.push_back(w);
  return words;
}

// The latency table of every query kind and sort mode the flags select.
void PrintQueryLatency(const ts::index::Index& index,
                       const std::vector<ts::bench::QueryKind>& kinds, const Flags& flags,
                       int64_t now_ms, const std::string& layout) {
  std::cout << "## Query latency, top 20, single thread, " << layout
            << (flags.counts_cached ? ", counts cached (ranking alone)" : "")
            << (flags.exact_total ? ", exact_total" : "") << "\n\n";
  std::cout << "| query | sort | p50 µs | p99 µs | mean µs | hits | slowest |\n"
               "|---|---|---|---|---|---|---|\n";
  for (const ts::bench::QueryKind& kind : kinds) {
    if (!flags.kind_names.empty() && std::find(flags.kind_names.begin(), flags.kind_names.end(),
                                               kind.name) == flags.kind_names.end()) {
      continue;
    }
    for (auto [sort, name] : {std::pair{ts::query::SortMode::kNewest, "0 newest"},
                              std::pair{ts::query::SortMode::kBestMatch, "1 best match"},
                              std::pair{ts::query::SortMode::kMostLiked, "2 most liked"}}) {
      if (!flags.sorts.empty() && std::find(flags.sorts.begin(), flags.sorts.end(),
                                            static_cast<int>(sort)) == flags.sorts.end()) {
        continue;
      }
      const Latency l =
          Measure(index, kind.queries, sort, now_ms, flags.counts_cached, flags.exact_total,
                  flags.rank_counted_up_to, flags.evict_caches, flags.each ? &std::cerr : nullptr);
      std::cout << "| " << kind.name << " | " << name << " | " << std::setprecision(1) << l.p50_us
                << " | " << l.p99_us << " | " << l.mean_us << " | " << std::setprecision(1)
                << l.avg_hits << " | " << l.slowest << " |\n";
    }
  }
  std::cout << "\n";
}

// Indexes `docs` again without stop words and compares the compacted lists' size.
void CompareStopWords(const ts::index::IndexOptions& options,
                      const std::vector<ts::index::IndexDoc>& docs,
                      const ts::index::IndexStats& compacted) {
  ts::index::IndexOptions dropping = options;
  dropping.analyzer.drop_stop_words = true;
  std::unique_ptr<ts::index::Index> lean = *ts::index::Index::Create(dropping);
  for (size_t i = 0; i < docs.size(); i += 1000) {
    (void)lean->AddBatch({docs.data() + i, std::min<size_t>(1000, docs.size() - i)});
  }
  (void)lean->Seal();
  (void)lean->Compact();
  const ts::index::IndexStats s = lean->Stats();
  std::cout << std::setprecision(0) << "Dropping stop words: " << s.sealed.postings
            << " postings instead of " << compacted.sealed.postings << ", lists "
            << s.sealed.posting_bytes / (1 << 20) << " MiB instead of "
            << compacted.sealed.posting_bytes / (1 << 20) << " MiB (" << std::setprecision(1)
            << 100.0 * (1.0 - static_cast<double>(s.sealed.posting_bytes) /
                                  static_cast<double>(compacted.sealed.posting_bytes))
            << "% smaller).\n\n";
}

// What a compacted index saved by --index-dir needs beside it to be queried as when it was
// built: the query time and the vocabulary by rank.
constexpr char kVocabularyFile[] = "/engine_bench_vocabulary";

void SaveForReuse(ts::index::Index& index, const std::string& dir, int64_t now_ms,
                  const std::vector<std::string>& words) {
  std::string text = std::to_string(now_ms) + "\n";
  for (const std::string& w : words) text += w + "\n";
  if (absl::Status s = index.Save(dir); !s.ok()) {
    std::cerr << "cannot save the index: " << s << "\n";
  } else if (s = ts::WriteFileAtomically(dir + kVocabularyFile, text); !s.ok()) {
    std::cerr << "cannot save the vocabulary: " << s << "\n";
  }
}

// Queries the compacted index an earlier run saved in flags.index_dir, if there is one.
bool RunOnSavedIndex(const ts::index::IndexOptions& options, const Flags& flags) {
  absl::StatusOr<std::string> vocabulary = ts::ReadFile(flags.index_dir + kVocabularyFile);
  if (!vocabulary.ok()) return false;
  absl::StatusOr<std::unique_ptr<ts::index::Index>> index =
      ts::index::Index::Open(options, flags.index_dir);
  if (!index.ok()) {
    std::cerr << "cannot open " << flags.index_dir << ": " << index.status() << "\n";
    return false;
  }
  // The tier postings of a loaded segment are built in the background: queries are timed
  // once they are there, as on a server that has been up for a few seconds.
  (*index)->WaitForMerges();
  // Every byte read and checked once, so that queries time the lists rather than their
  // first verification and page faults.
  for (const auto& segment : (*index)->Snapshot()->segments) {
    if (const auto* sealed = dynamic_cast<const ts::index::SealedSegment*>(segment.get())) {
      if (absl::Status s = sealed->VerifyAll(); !s.ok()) std::cerr << s << "\n";
    }
  }
  std::cout << std::fixed;
  std::istringstream in(*vocabulary);
  int64_t now_ms = 0;
  in >> now_ms;
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  const ts::index::IndexStats stats = (*index)->Stats();
  std::cout << "Reusing the index of " << stats.documents << " tweets in " << stats.sealed_segments
            << " segment(s), " << stats.terms << " terms, saved in " << flags.index_dir << ".\n\n";
  if (flags.counts_over_time) {
    MeasureCountsOverTime(**index, Queries(words, flags), now_ms);
  } else {
    PrintQueryLatency(**index, Queries(words, flags), flags, now_ms,
                      stats.sealed_segments == 1
                          ? "compacted into 1 segment"
                          : std::to_string(stats.sealed_segments) + " sealed segment(s) as saved");
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  tweetsearch::ReturnLargeBuffersToTheSystem();  // as tweetsearchd does
  CLI::App app{"Benchmarks the tweetsearch engine"};
  Flags flags;
  app.add_option("--tweets", flags.tweets, "Synthetic tweets to index")->capture_default_str();
  app.add_option("--queries", flags.queries, "Queries per kind and sort mode")
      ->capture_default_str();
  app.add_option("--sentiment140", flags.sentiment140, "Index this Sentiment140 CSV instead");
  app.add_option("--sort", flags.sorts, "Measure only these sort modes (0, 1, 2; default all)")
      ->check(CLI::Range(0, 2));
  app.add_option("--kind", flags.kind_names,
                 "Measure only these query kinds (\"1 word\", \"2-word AND\", ...; default all)");
  app.add_flag("--compacted-only", flags.compacted_only,
               "Measure queries only after compaction (skips the counts and the as-indexed run)");
  app.add_option("--stop-word-comparison", flags.stop_words,
                 "Also index without stop words and compare memory")
      ->capture_default_str();
  app.add_option("--index-dir", flags.index_dir,
                 "Save the compacted index here, or query the one an earlier run saved here "
                 "(same flags) without building it again");
  app.add_flag("--save-as-indexed", flags.save_as_indexed,
               "Save the index in --index-dir as indexed, before compaction (its segments as the "
               "writer sealed them)");
  app.add_option("--query", flags.query_texts,
                 "Time these queries, each --queries times, instead of the query mixes");
  app.add_flag("--counts-cached", flags.counts_cached,
               "Time the ranking alone: each query's counts come from the segments' caches, "
               "filled by running it once before");
  app.add_flag("--exact-total", flags.exact_total,
               "Count every match (exact_total), not only up to 10,000");
  app.add_option("--rank-counted-up-to", flags.rank_counted_up_to,
                 "Best match of an AND ranks the matches its count kept when they are at most "
                 "this many in a segment (0: always walk the lists)")
      ->capture_default_str();
  app.add_flag("--evict-caches", flags.evict_caches,
               "Write 64 MiB before each timed query, so that it finds nothing of its own cached "
               "(a query repeated with --query then costs what it does among others)");
  app.add_flag("--each", flags.each,
               "Also write every query's time and match count to stderr, as it runs");
  app.add_flag("--counts-over-time", flags.counts_over_time,
               "Time counts over time (a day of minute buckets) instead of searches");
  CLI11_PARSE(app, argc, argv);
  const ts::index::IndexOptions options;
  if (!flags.index_dir.empty() && RunOnSavedIndex(options, flags)) return 0;

  std::optional<std::vector<ts::index::IndexDoc>> docs = LoadCorpus(flags);
  if (!docs.has_value()) return 1;
  std::unique_ptr<ts::index::Index> index = IndexAndReport(options, *docs);
  const int64_t now_ms = docs->empty() ? 0 : docs->back().created_at_ms;
  const std::vector<std::string> words = WordsByRank(*index, *docs);
  const std::vector<ts::bench::QueryKind> kinds = Queries(words, flags);

  if (flags.save_as_indexed && !flags.index_dir.empty()) {
    SaveForReuse(*index, flags.index_dir, now_ms, words);
  }
  const ts::index::IndexStats segmented = index->Stats();
  std::cout << std::fixed;
  if (!flags.compacted_only) {
    PrintQueryLatency(*index, kinds, flags, now_ms,
                      std::to_string(segmented.sealed_segments) + " sealed segment(s) as indexed");
    MeasureCounts(*index, kinds, now_ms);
  }
  const auto start = Clock::now();
  (void)index->Compact();
  const double compact_seconds = Seconds(start);
  const ts::index::IndexStats compacted = index->Stats();
  std::cout << "## Memory (sealed segments)\n\n";
  std::cout << "| layout | postings | bytes/posting (lists) | bytes/posting (+dictionary) | "
               "lists MiB | dictionary MiB | columns MiB |\n|---|---|---|---|---|---|---|\n";
  const std::string label = std::to_string(segmented.sealed_segments) + " segment(s) of up to " +
                            std::to_string(options.segment_max_docs);
  PrintMemory(label.c_str(), segmented);
  PrintMemory("compacted into 1 segment", compacted);
  std::cout << "\nCompaction took " << std::setprecision(2) << compact_seconds << " s.\n\n";
  if (!flags.index_dir.empty() && !flags.save_as_indexed) {
    SaveForReuse(*index, flags.index_dir, now_ms, words);
  }
  if (flags.stop_words && flags.sentiment140.empty()) CompareStopWords(options, *docs, compacted);

  if (flags.counts_over_time) {
    MeasureCountsOverTime(*index, kinds, now_ms);
    return 0;
  }
  PrintQueryLatency(*index, kinds, flags, now_ms, "compacted into 1 segment");
  if (!flags.compacted_only) MeasureCounts(*index, kinds, now_ms);
  return 0;
}
