// LikesTiers: a sealed segment's most liked tweets, in nested tiers, so that ranking by likes
// can look at the few tweets that may rank first instead of every match (docs/ranking.md,
// "Most liked").
//
// Likes follow a power law: almost every range of 64 tweets holds one with many likes, so
// per-range bounds skip little. A tier instead lists every tweet whose likes, as the segment
// file has them, reach its threshold. A query walks its matches among the smallest tier first;
// once its k-th best hit has at least the tier's threshold, no tweet outside the tier (unless
// its likes changed since: those are looked at apart) can enter the top k.
//
// Thread-safety: immutable once built.
#ifndef TWEETSEARCH_INDEXER_INDEX_LIKES_TIERS_H_
#define TWEETSEARCH_INDEXER_INDEX_LIKES_TIERS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "indexer/index/segment.h"

namespace tweetsearch::index {

struct LikesTier {
  uint32_t min_likes = 0;   // every tweet written with at least this many likes is in docs
  std::vector<DocId> docs;  // ascending
};

// Tiers of about 32, 128, 512, ... (4^i times 32) tweets, smallest first, by the likes the
// rows were written with (Columns::BaseLikes): sizes that do not grow with the segment, because
// a query whose matches are a fraction p of the tweets finds k of them among about k/p tweets
// however many there are. Each tier holds the one before it. A threshold of 0 likes (every
// tweet) makes no tier, nor does one that would hold more than rows/8 tweets (ties at small
// like counts): beyond that, walking every match costs no more.
std::vector<LikesTier> BuildLikesTiers(const Columns& columns, DocId rows);

// The postings of a segment's long lists among one tier's rows, renumbered in most-liked
// order: rank 0 is the row written with the most likes, ties newest first (as most liked sorts).
// A query of any shape over these lists finds its matches among the tier most liked first, so
// it can stop after its first k (as newest first does over DocIds), and intersects lists about
// rows / tier size times shorter than the segment's (leapfrogging the tier's rows through the
// segment's lists would decode a block of each list per row). Short lists are not kept: a
// query with a rarer word is ranked over the segment's lists, where its word's is short.
class TierPostings {
 public:
  struct List {
    std::vector<uint32_t> ranks;  // ascending
    std::vector<uint16_t> freqs;  // the term's frequency at each (a tweet has < 2^16 tokens)
  };
  TierPostings(uint32_t min_likes, std::vector<DocId> by_rank,
               absl::flat_hash_map<std::string, List> lists);

  // Every row written with at least this many likes is in the tier.
  uint32_t min_likes() const { return min_likes_; }
  // The row of rank r.
  DocId doc(uint32_t rank) const { return by_rank_[rank]; }
  // The term's list among the tier's rows; null if the segment's list is short (or absent).
  const List* Find(std::string_view term) const;
  size_t MemoryBytes() const { return bytes_; }

 private:
  uint32_t min_likes_;
  std::vector<DocId> by_rank_;
  absl::flat_hash_map<std::string, List> lists_;
  size_t bytes_ = 0;
};

// The tier TierPostings are kept for: the largest tier of at most rows / 32 rows (null if none).
const LikesTier* TierForPostings(std::span<const LikesTier> tiers, DocId rows);

// A list of at least this many postings, and one in kTierListMinShare of the rows, gets
// TierPostings.
inline constexpr uint32_t kTierListMinDocs = 1024;
inline constexpr uint32_t kTierListMinShare = 8192;

// TierPostings of `tier` over `terms` (those whose lists are long) in `segment`'s first
// `rows` rows; null if `cancel` (may be null) turned true meanwhile.
std::unique_ptr<TierPostings> BuildTierPostings(const Segment& segment, DocId rows,
                                                const LikesTier& tier,
                                                std::span<const std::string> terms,
                                                const std::atomic<bool>* cancel = nullptr);

// A cursor over a TierPostings list: its "DocIds" are ranks (no positions: phrases read the
// segment's lists).
std::unique_ptr<PostingCursor> OpenTierList(const TierPostings::List& list);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_LIKES_TIERS_H_
