#include "indexer/index/likes_tiers.h"

#include <algorithm>
#include <array>
#include <functional>

#include "common/strings.h"

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

TierPostings::TierPostings(uint32_t min_likes, std::vector<DocId> by_rank,
                           absl::flat_hash_map<std::string, List> lists)
    : min_likes_(min_likes), by_rank_(std::move(by_rank)), lists_(std::move(lists)) {
  bytes_ = by_rank_.capacity() * sizeof(DocId);
  for (const auto& [term, list] : lists_) {
    bytes_ += sizeof(std::pair<const std::string, List>) + term.capacity() +
              list.ranks.capacity() * sizeof(uint32_t) + list.freqs.capacity() * sizeof(uint16_t);
  }
}

const TierPostings::List* TierPostings::Find(std::string_view term) const {
  auto it = lists_.find(AsAbsl(term));
  return it == lists_.end() ? nullptr : &it->second;
}

const LikesTier* TierForPostings(std::span<const LikesTier> tiers, DocId rows) {
  const LikesTier* chosen = nullptr;
  for (const LikesTier& tier : tiers) {
    if (uint64_t{tier.docs.size()} * 32 <= rows) chosen = &tier;
  }
  return chosen;
}

std::unique_ptr<TierPostings> BuildTierPostings(const Segment& segment, DocId rows,
                                                const LikesTier& tier,
                                                std::span<const std::string> terms,
                                                const std::atomic<bool>* cancel) {
  const Columns& c = segment.columns();
  std::vector<DocId> docs;  // the tier's rows below `rows`, ascending
  for (DocId d : tier.docs) {
    if (d < rows) docs.push_back(d);
  }
  std::vector<DocId> by_rank = docs;
  std::sort(by_rank.begin(), by_rank.end(), [&c](DocId a, DocId b) {
    const uint32_t la = c.BaseLikes(a), lb = c.BaseLikes(b);
    return la != lb ? la > lb : a < b;  // DocIds ascend as TweetIds descend
  });
  std::vector<uint32_t> rank_of(docs.size());  // by position in `docs`
  for (uint32_t r = 0; r < by_rank.size(); ++r) {
    rank_of[static_cast<size_t>(std::lower_bound(docs.begin(), docs.end(), by_rank[r]) -
                                docs.begin())] = r;
  }
  absl::flat_hash_map<std::string, TierPostings::List> lists;
  std::vector<std::pair<uint32_t, uint16_t>> postings;
  for (const std::string& term : terms) {
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return nullptr;
    std::unique_ptr<PostingCursor> cursor = segment.OpenTerm(term, rows);
    if (cursor == nullptr) continue;
    postings.clear();
    // Both ascend: walk the tier's rows beside the list. (Reading the lists as bitmaps of
    // windows ANDed with the tier's took as long: 1.1 to 1.4 s for 10M tweets either way.)
    size_t i = 0;
    for (DocId d = cursor->doc(); d < rows && i < docs.size(); cursor->Next(), d = cursor->doc()) {
      while (i < docs.size() && docs[i] < d) ++i;
      if (i == docs.size() || docs[i] != d) continue;
      postings.emplace_back(rank_of[i],
                            static_cast<uint16_t>(std::min<uint32_t>(cursor->freq(), UINT16_MAX)));
    }
    std::sort(postings.begin(), postings.end());
    TierPostings::List list;
    list.ranks.reserve(postings.size());
    list.freqs.reserve(postings.size());
    for (auto [rank, freq] : postings) {
      list.ranks.push_back(rank);
      list.freqs.push_back(freq);
    }
    lists.emplace(term, std::move(list));
  }
  return std::make_unique<TierPostings>(tier.min_likes, std::move(by_rank), std::move(lists));
}

namespace {

class TierCursor final : public PostingCursor {
 public:
  explicit TierCursor(const TierPostings::List& list) : list_(list) { Settle(); }
  // doc() is a rank.
  DocId doc() const override { return doc_; }
  void Next() override {
    ++i_;
    Settle();
  }
  void Advance(DocId target) override {
    if (doc_ >= target) return;
    // Gallops from the next posting, then bisects: long jumps cost O(log distance).
    const std::vector<uint32_t>& ranks = list_.ranks;
    size_t lo = i_ + 1, hi = lo, step = 1;
    while (hi < ranks.size() && ranks[hi] < target) {
      lo = hi + 1;
      hi += step;
      step *= 2;
    }
    // Every posting before lo is below target, the one at hi (if any) is not.
    hi = std::min(hi + 1, ranks.size());
    i_ = static_cast<size_t>(std::lower_bound(ranks.begin() + static_cast<ptrdiff_t>(lo),
                                              ranks.begin() + static_cast<ptrdiff_t>(hi), target) -
                             ranks.begin());
    Settle();
  }
  uint32_t freq() const override { return list_.freqs[i_]; }
  std::span<const uint32_t> positions() override { return {}; }
  uint32_t size() const override { return static_cast<uint32_t>(list_.ranks.size()); }
  DocId block_last_doc() const override {
    return list_.ranks.empty() ? kEndDoc : list_.ranks.back();
  }
  PostingBound block_bound() const override { return PostingBound{}; }
  PostingBound list_bound() const override { return PostingBound{}; }

 private:
  void Settle() { doc_ = i_ < list_.ranks.size() ? list_.ranks[i_] : kEndDoc; }

  const TierPostings::List& list_;
  size_t i_ = 0;
  DocId doc_ = kEndDoc;
};

}  // namespace

std::unique_ptr<PostingCursor> OpenTierList(const TierPostings::List& list) {
  return std::make_unique<TierCursor>(list);
}

}  // namespace tweetsearch::index
