// The query mixes of the benchmarks, drawn from a vocabulary's frequency ranks as users would
// type them: mostly words of middling frequency, some very common ones.
#ifndef TWEETSEARCH_BENCH_QUERY_MIX_H_
#define TWEETSEARCH_BENCH_QUERY_MIX_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "indexer/index/index.h"
#include "indexer/query/searcher.h"

namespace tweetsearch::bench {

struct QueryKind {
  std::string name;
  std::vector<std::string> queries;
};

inline std::vector<QueryKind> MakeQueries(const std::vector<std::string>& words_by_rank,
                                          size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto word = [&] {
    // Log-uniform over ranks 1..2000: common and middling words alike.
    const double r = std::exp(std::uniform_real_distribution<double>(0, std::log(2000.0))(rng));
    return words_by_rank[std::min(words_by_rank.size() - 1, static_cast<size_t>(r))];
  };
  // n distinct words (a user does not type "i i").
  auto words = [&](size_t n) {
    std::vector<std::string> w;
    while (w.size() < n) {
      std::string candidate = word();
      if (std::find(w.begin(), w.end(), candidate) == w.end()) w.push_back(candidate);
    }
    return w;
  };
  std::vector<QueryKind> kinds = {
      {"1 word", {}}, {"2-word AND", {}}, {"3-word AND", {}}, {"2-word OR", {}}, {"mixed", {}}};
  for (size_t i = 0; i < count; ++i) {
    kinds[0].queries.push_back(word());
    const auto two = words(2), three = words(3), four = words(4), pair = words(2);
    kinds[1].queries.push_back(two[0] + " " + two[1]);
    kinds[2].queries.push_back(three[0] + " " + three[1] + " " + three[2]);
    kinds[3].queries.push_back(pair[0] + " OR " + pair[1]);
    kinds[4].queries.push_back("(" + four[0] + " OR " + four[1] + ") " + four[2] + " -" + four[3]);
  }
  return kinds;
}

struct TimedQuery {
  double micros = 0;
  size_t hits = 0;
  uint64_t total_hits = 0;
  bool total_is_exact = true;
};

// Runs `text` alone on `index` (top 20, as of `now_ms`) and times it; nullopt when it does
// not parse. Without cache_counts every run counts its matches (the same query in another sort
// mode would find its counts cached). rank_counted_up_to: SearchOptions' (0: best match of an
// AND always walks its lists).
inline std::optional<TimedQuery> TimeQuery(const index::Index& index, const std::string& text,
                                           query::SortMode sort, int64_t now_ms,
                                           bool exact_total = false, bool cache_counts = false,
                                           size_t rank_counted_up_to = query::kTrackTotalHitsUpTo) {
  absl::StatusOr<query::Plan> plan = query::PlanQuery(text, index.analyzer());
  if (!plan.ok()) return std::nullopt;
  query::SearchOptions options;
  options.sort = sort;
  options.limit = 20;
  options.now_ms = now_ms;
  options.exact_total = exact_total;
  options.cache_counts = cache_counts;
  options.rank_counted_up_to = rank_counted_up_to;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<query::SearchResult> r = query::Search(*index.Snapshot(), *plan, options);
  const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
  if (!r.ok()) return TimedQuery{took.count(), 0, 0, true};
  return TimedQuery{took.count(), r->hits.size(), r->total_hits, r->total_is_exact};
}

}  // namespace tweetsearch::bench

#endif  // TWEETSEARCH_BENCH_QUERY_MIX_H_
