#include "indexer/index/likes_tiers.h"

#include <algorithm>
#include <array>
#include <functional>

namespace tweetsearch::index {

std::vector<LikesTier> BuildLikesTiers(const Columns& columns, DocId rows) {
  // How many rows have each like count: exactly below 256, as a sorted list above.
  std::array<uint64_t, 256> small{};
  std::vector<uint32_t> large;
  columns.ForEachBaseLikes(rows, [&](DocId, uint32_t likes) {
    if (likes < small.size()) {
      ++small[likes];
    } else {
      large.push_back(likes);
    }
  });
  std::sort(large.begin(), large.end(), std::greater<>());
  // The largest threshold that at least `want` rows reach, and how many reach it.
  auto threshold = [&](uint64_t want, uint64_t* reaching) -> uint32_t {
    if (want <= large.size()) {
      const uint32_t t = large[want - 1];
      *reaching = static_cast<uint64_t>(
          std::upper_bound(large.begin(), large.end(), t, std::greater<>()) - large.begin());
      return t;
    }
    uint64_t acc = large.size();
    for (uint32_t likes = static_cast<uint32_t>(small.size()) - 1; likes > 0; --likes) {
      acc += small[likes];
      if (acc >= want) {
        *reaching = acc;
        return likes;
      }
    }
    return 0;
  };
  std::vector<LikesTier> tiers;
  for (uint64_t size = 32; size <= rows / 8; size *= 4) {
    uint64_t reaching = 0;
    const uint32_t t = threshold(size, &reaching);
    if (t == 0 || reaching > rows / 8) break;
    if (!tiers.empty() && tiers.back().min_likes == t) continue;
    tiers.push_back(LikesTier{t, {}});
    tiers.back().docs.reserve(reaching);
  }
  if (tiers.empty()) return tiers;
  const uint32_t lowest = tiers.back().min_likes;
  columns.ForEachBaseLikes(rows, [&](DocId d, uint32_t likes) {
    if (likes < lowest) return;
    for (LikesTier& tier : tiers) {
      if (likes >= tier.min_likes) tier.docs.push_back(d);
    }
  });
  return tiers;
}

}  // namespace tweetsearch::index
