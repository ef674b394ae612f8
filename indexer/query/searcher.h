// Searcher: evaluates a plan over an index snapshot in one of three sort modes.
//
//   kNewest    TweetId descending. Segments are visited newest first; inside a sealed segment
//              DocIds run newest to oldest, so the walk stops once k hits are found and no
//              later posting can be newer (Earlybird's early termination).
//   kBestMatch score descending, then TweetId descending. Windows of DocIds whose bound from
//              the blocks' bounds per likes band cannot reach the current k-th score are
//              skipped without decoding (block-max, Ding & Suel 2011), for every query shape;
//              a disjunction of terms is evaluated with MaxScore (Turtle & Flood 1995).
//   kMostLiked likes descending, then TweetId descending, over all matches.
//
// Paging is search-after: pass the sort key of the last hit of a page as `after`, and the same
// `watermark`, to get the next page; no hit repeats or goes missing while tweets are added.
//
// Thread-safety: Search() is reentrant; the snapshot must outlive the call.
#ifndef TWEETSEARCH_INDEXER_QUERY_SEARCHER_H_
#define TWEETSEARCH_INDEXER_QUERY_SEARCHER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "indexer/index/index.h"
#include "indexer/query/counter.h"
#include "indexer/query/plan.h"
#include "indexer/query/scoring.h"

namespace tweetsearch::query {

enum class SortMode : int { kNewest = 0, kBestMatch = 1, kMostLiked = 2 };

// A hit's place in its sort order: (primary, id), larger first. primary is 0 for kNewest, the
// score for kBestMatch, the likes for kMostLiked.
struct SortKey {
  double primary = 0;
  TweetId id = 0;
  bool operator==(const SortKey&) const = default;
};
// True if `a` comes before `b` in results.
inline bool Before(const SortKey& a, const SortKey& b) {
  return a.primary > b.primary || (a.primary == b.primary && a.id > b.id);
}

// Collection statistics the best-match score uses, over a whole snapshot.
struct CollectionStats {
  uint64_t num_docs = 0;
  uint64_t total_length = 0;  // of the num_docs documents: what partitions add up
  double avg_length = 1;      // total_length / num_docs, at least 1
  absl::flat_hash_map<std::string, uint64_t> doc_freq;  // for the plan's terms
};

inline constexpr uint32_t kMaxLimit = 1000;
// Matches are counted exactly up to this many; beyond, the total says "at least this many"
// (Elasticsearch's track_total_hits default), unless exact_total asks for every one.
inline constexpr uint64_t kTrackTotalHitsUpTo = 10'000;

struct SearchOptions {
  SortMode sort = SortMode::kNewest;
  uint32_t limit = 20;              // hits per page, 1 to kMaxLimit
  std::optional<SortKey> after;     // only hits after this key (the last of the previous page)
  TweetId watermark = kMaxTweetId;  // tweets with a larger id are invisible
  bool exact_total = false;         // count every match, not only up to kTrackTotalHitsUpTo
  // Use and fill the sealed segments' caches of match counts (benchmarks of counting turn it
  // off).
  bool cache_counts = true;
  int64_t now_ms = 0;  // "now" for the recency part of the score
  ScoringParams scoring;
  // Collection statistics to score with instead of the snapshot's own (null: the snapshot's).
  // A later page of a best-match search passes those of its first page, so that tweets
  // arriving in between cannot move scores. Must outlive the Search() call.
  const CollectionStats* stats = nullptr;
  // Best match of an AND in a segment whose count is owed: when the count finds at most this
  // many matches there, they are ranked from the count (which keeps them) instead of walking
  // the lists again. 0 always walks (tests of the walks).
  size_t rank_counted_up_to = kTrackTotalHitsUpTo;
  // Best match of `(x OR y) c`: a sparse alternative x that c seldom holds (fewer than one in
  // 8 of x's newest postings) has only its postings that c holds weighed when they make at
  // least this many matches (estimated from those); fewer are offered one by one. 0: weighed
  // wherever x and c seldom meet (tests of that path).
  double weigh_held_from = 4096;
  // Newest first of an AND in a segment whose DocIds run newest first and whose count is owed:
  // its newest matches are kept by the count instead of walking the lists. False always walks
  // (tests of the walks).
  bool newest_from_count = true;
};

struct Hit {
  TweetId id = 0;
  double score = 0;  // the best-match score, in every sort mode
  uint32_t likes = 0;
  int64_t created_at_ms = 0;
  SortKey key;
};

struct SearchResult {
  std::vector<Hit> hits;
  // The matches of the query under the watermark, whatever the sort and the page (not only
  // those after `after`): exact if total_is_exact, else kTrackTotalHitsUpTo, meaning "at
  // least that many". The same for every sort mode, page and replica.
  uint64_t total_hits = 0;
  bool total_is_exact = true;
  // Diagnostics: the ranking skipped documents (early termination or pruning).
  bool pruned = false;
  // Diagnostics: segments whose champions alone decided a best-match ranking.
  uint32_t champion_cutoffs = 0;
  // Diagnostics: segments whose tier postings alone decided a most-liked ranking.
  uint32_t tier_cutoffs = 0;
  // Diagnostics: segments where best match walked three common words over their lists' bits
  // and passed over some match before moving a cursor to it (on the words' repeats, or else
  // on its rarest word's text alone).
  uint32_t triple_walk_cutoffs = 0;
  // Diagnostics: segments whose best-match ranking scored the matches their count kept
  // (SearchOptions::rank_counted_up_to) instead of walking the lists.
  uint32_t counted_rankings = 0;
  // Diagnostics: segments whose newest matches the count kept (newest_from_count).
  uint32_t newest_from_counts = 0;
  // Diagnostics: segments counted from the rows of a pair of the query's words
  // (MatchCounter::led_by_pair_rows).
  uint32_t pair_rows_counts = 0;
  // Diagnostics: segments where best match of `(x OR y) c` passed over a sparse alternative's
  // postings outside its champions and c's repeats on their rest bound alone
  // (RunOrAndChampions).
  uint32_t sparse_alternative_cutoffs = 0;
  // Diagnostics: sparse alternatives of `(x OR y) c` whose postings were weighed only where c
  // holds them (SearchOptions::weigh_held_from), in any segment.
  uint32_t held_weighings = 0;
  // Diagnostics: segments passed over because two words every match holds never meet there (a
  // pair of words no row holds together, or an OR none of whose words meets a word of the AND).
  uint32_t never_meeting_segments = 0;
};

// Applies the kTrackTotalHitsUpTo rule to a total (one partition's, or partitions' summed,
// exact only if each was): beyond the cap, the cap and "at least". A partition that was
// capped reports the cap, so a sum with it is at least the cap too.
void CapTotal(bool exact_total, uint64_t* total_hits, bool* total_is_exact);

CollectionStats ComputeStats(const index::IndexSnapshot& snapshot, const Plan& plan);
// Adds the statistics of one partition into `total` (documents, lengths, document frequencies)
// and recomputes its avg_length: the statistics of the partitions together.
void AddStats(const CollectionStats& partition, CollectionStats* total);

// InvalidArgument for a limit outside [1, kMaxLimit].
absl::StatusOr<SearchResult> Search(const index::IndexSnapshot& snapshot, const Plan& plan,
                                    const SearchOptions& options);

// Most buckets one count over time may ask for (two weeks of minutes).
inline constexpr uint32_t kMaxTimeBuckets = 20'160;

// Counts over time (GET /v1/counts): the exact number of tweets matching `plan` (its filters
// included) created in each bucket, every visible tweet of the snapshot counted. Only segments
// and 64-tweet ranges whose created_at bounds meet the buckets are read. InvalidArgument for
// no buckets, more than kMaxTimeBuckets, a width that is not positive or above a year, or a
// start beyond 30,000 years of 1970; DataLoss if a segment it read turned out damaged.
absl::StatusOr<std::vector<uint64_t>> CountOverTime(const index::IndexSnapshot& snapshot,
                                                    const Plan& plan, const TimeBuckets& buckets);

}  // namespace tweetsearch::query

#endif  // TWEETSEARCH_INDEXER_QUERY_SEARCHER_H_
