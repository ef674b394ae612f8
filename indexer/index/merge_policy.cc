#include "indexer/index/merge_policy.h"

#include <algorithm>

namespace tweetsearch::index {

uint32_t MergeTier(uint64_t live, const MergePolicyOptions& options) {
  uint32_t tier = 0;
  const uint64_t factor = std::max<uint32_t>(options.merge_factor, 2);
  for (uint64_t bound = options.floor_docs * factor; live >= bound && tier < 63; bound *= factor) {
    ++tier;
  }
  return tier;
}

std::optional<MergeChoice> PickMerge(std::span<const SegmentSize> segments,
                                     const MergePolicyOptions& options) {
  const size_t factor = std::max<uint32_t>(options.merge_factor, 2);
  auto live = [&](size_t i) { return segments[i].docs - segments[i].deleted; };
  // A run of `factor` neighbours of one tier, the oldest first.
  for (size_t begin = 0; begin + factor <= segments.size();) {
    const uint32_t tier = MergeTier(live(begin), options);
    size_t end = begin + 1;
    uint64_t total = live(begin);
    while (end < segments.size() && end - begin < factor && MergeTier(live(end), options) == tier &&
           total + live(end) <= options.max_segment_docs) {
      total += live(end);
      ++end;
    }
    if (end - begin == factor) return MergeChoice{begin, end};
    begin = end;
  }
  // Else the segment with the largest deleted share past the limit, rewritten alone.
  std::optional<MergeChoice> purge;
  double worst = options.max_deleted_share;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].docs == 0) continue;
    const double share =
        static_cast<double>(segments[i].deleted) / static_cast<double>(segments[i].docs);
    if (share > worst) {
      worst = share;
      purge = MergeChoice{i, i + 1};
    }
  }
  return purge;
}

}  // namespace tweetsearch::index
