// MergePolicy: which sealed segments to merge next, decided from their sizes alone.
//
// Tiered and log-structured (after Lucene's TieredMergePolicy and LSM trees, simplified to keep
// time order): a segment's tier is how many times `merge_factor` its live size is above
// `floor_docs`. Segments are kept oldest first, and only runs of neighbours are merged, so that
// each segment covers a stretch of time and newest-first queries can stop after the newest few.
// When `merge_factor` neighbours share a tier, the oldest run of them becomes one segment of the
// next tier. A segment whose deleted share passes `max_deleted_share` is rewritten on its own
// (that is how deletes are purged). No merge makes a segment over `max_segment_docs`.
//
// With N tweets that gives at most (merge_factor - 1) segments per tier and about
// log_merge_factor(N / floor_docs) tiers below the cap, plus N / max_segment_docs capped ones;
// each tweet is written once per tier it passes (write amplification ~ number of tiers + 1).
//
// Thread-safety: a pure function.
#ifndef TWEETSEARCH_INDEXER_INDEX_MERGE_POLICY_H_
#define TWEETSEARCH_INDEXER_INDEX_MERGE_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace tweetsearch::index {

struct MergePolicyOptions {
  uint32_t merge_factor = 10;     // segments merged at once; also the size ratio between tiers
  uint64_t floor_docs = 1 << 16;  // segments up to this size are all tier 0
  uint64_t max_segment_docs = 8 << 20;
  double max_deleted_share = 0.2;
};

struct SegmentSize {
  uint64_t docs = 0;  // in the segment, deleted ones included
  uint64_t deleted = 0;
};

struct MergeChoice {
  size_t begin = 0, end = 0;  // the run [begin, end) of segments, oldest first
};

// The next merge for `segments` (oldest first), or nullopt when none is due.
std::optional<MergeChoice> PickMerge(std::span<const SegmentSize> segments,
                                     const MergePolicyOptions& options);

// The tier of a segment of `live` documents.
uint32_t MergeTier(uint64_t live, const MergePolicyOptions& options);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_MERGE_POLICY_H_
