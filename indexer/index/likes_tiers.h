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

#include <cstdint>
#include <vector>

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

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_LIKES_TIERS_H_
