#include "indexer/index/segment.h"

#include <algorithm>
#include <array>

#include "common/snowflake.h"

namespace tweetsearch::index {

uint32_t PackLang(std::string_view lang) {
  uint32_t code = 0;
  for (size_t i = 0; i < lang.size() && i < 4; ++i) {
    code |= static_cast<uint32_t>(static_cast<unsigned char>(lang[i])) << (8 * i);
  }
  return code;
}

uint64_t DocCursor::AndBits(DocId from, DocId end, uint64_t* words, bool keep) {
  // The list's bits filled 4,096 DocIds at a time (FillBits) into a buffer on the stack.
  constexpr uint64_t kChunkWords = 64;
  uint64_t mine[kChunkWords];
  uint64_t left = 0;
  for (uint64_t at = from; at < end; at += 64 * kChunkWords) {
    const DocId stop = static_cast<DocId>(std::min<uint64_t>(end, at + 64 * kChunkWords));
    const size_t n = (stop - at + 63) / 64;
    std::fill_n(mine, n, uint64_t{0});
    FillBits(static_cast<DocId>(at), stop, mine);
    uint64_t* out = words + (at - from) / 64;
    for (size_t w = 0; w < n; ++w) {
      out[w] &= keep ? mine[w] : ~mine[w];
      left += static_cast<uint64_t>(std::popcount(out[w]));
    }
  }
  return left;
}

size_t FilterAny(std::span<PostingCursor* const> cursors, DocId* docs, size_t n) {
  if (cursors.size() == 1) return cursors[0]->Filter(docs, n, /*keep=*/true);
  // The candidates no list holds are narrowed list by list, in place in one copy (a later
  // list is asked only about those the earlier ones lack); the rest are kept.
  constexpr size_t kChunk = 256;
  size_t kept = 0;
  for (size_t from = 0; from < n; from += kChunk) {  // ascending over the calls, as Filter asks
    const size_t m = std::min(kChunk, n - from);
    std::array<DocId, kChunk> lacking;
    std::copy_n(docs + from, m, lacking.begin());
    size_t left = m;
    for (PostingCursor* cursor : cursors) {
      if (left == 0) break;
      left = cursor->Filter(lacking.data(), left, /*keep=*/false);
    }
    // docs[from..from + m) less lacking[0..left), a subsequence of it.
    for (size_t i = 0, j = 0; i < m; ++i) {
      const DocId d = docs[from + i];
      const bool lacks = j < left && lacking[j] == d;
      j += lacks ? 1 : 0;
      docs[kept] = d;  // kept <= from + i: a slot already read
      kept += lacks ? 0 : 1;
    }
  }
  return kept;
}

Columns::Columns(uint32_t capacity)
    : capacity_(capacity),
      tweet_id_(new TweetId[capacity]()),
      created_at_ms_(new int64_t[capacity]()),
      user_id_(new UserId[capacity]()),
      lang_(new uint32_t[capacity]()),
      length_(new uint16_t[capacity]()),
      likes_(new std::atomic<uint32_t>[capacity]()),
      range_max_created_(new std::atomic<int64_t>[(capacity >> kRangeShift) + 1]()),
      range_min_created_(new std::atomic<int64_t>[(capacity >> kRangeShift) + 1]()),
      deleted_(new std::atomic<uint64_t>[(capacity + 63) / 64]()),
      range_max_likes_(new std::atomic<uint32_t>[(capacity >> kRangeShift) + 1]()) {
  for (DocId r = 0; r <= (capacity >> kRangeShift); ++r) {
    range_max_created_[r].store(std::numeric_limits<int64_t>::min(), std::memory_order_relaxed);
    range_min_created_[r].store(std::numeric_limits<int64_t>::max(), std::memory_order_relaxed);
  }
}

Columns::Columns(uint32_t rows, const PackedColumns& packed,
                 std::span<const uint32_t> range_max_likes, int64_t max_created_at_ms)
    : capacity_(rows),
      packed_(std::make_unique<PackedColumns>(packed)),
      changed_(new std::atomic<uint64_t>[(rows + 63) / 64]()),
      overlay_(std::make_unique<LikesOverlay>()),
      deleted_(new std::atomic<uint64_t>[(rows + 63) / 64]()),
      range_max_likes_(new std::atomic<uint32_t>[(rows >> kRangeShift) + 1]()),
      max_created_(max_created_at_ms) {
  for (size_t r = 0; r < range_max_likes.size() && r <= (rows >> kRangeShift); ++r) {
    range_max_likes_[r].store(range_max_likes[r], std::memory_order_relaxed);
  }
  block_max_created_.assign((rows >> kBlockShift) + 1, std::numeric_limits<int64_t>::min());
  for (DocId d = 0; d < rows; d += kRangeSize) {
    int64_t& newest = block_max_created_[d >> kBlockShift];
    newest = std::max(newest, packed.range_max_created[d >> kRangeShift]);
  }
}

Columns::~Columns() = default;

size_t Columns::MemoryBytes() const {
  const size_t rows = capacity_;
  const size_t ranges = (rows >> kRangeShift) + 1;
  const size_t bits = (rows + 63) / 64 * sizeof(uint64_t);
  if (packed_ != nullptr) {
    const bool derived_bounds =
        packed_range_min_created_.load(std::memory_order_acquire) != nullptr;
    const size_t derived = derived_bounds ? ranges * sizeof(int64_t) : 0;
    return 2 * bits + ranges * sizeof(uint32_t) + derived +
           block_max_created_.capacity() * sizeof(int64_t) + overlay_->MemoryBytes();
  }
  return rows * (sizeof(TweetId) + sizeof(int64_t) + sizeof(UserId) + sizeof(uint32_t) +
                 sizeof(uint16_t) + sizeof(uint32_t)) +
         bits + ranges * (sizeof(uint32_t) + 2 * sizeof(int64_t));
}

int64_t Columns::created_at_ms(DocId d) const {
  if (packed_ == nullptr) return created_at_ms_[d];
  const uint64_t millis = packed_->id_high.Get(d);
  return static_cast<int64_t>(millis) + kSnowflakeEpochMillis +
         UnZigZag(packed_->created_offset.Get(d));
}

uint32_t Columns::BaseLikes(DocId d) const {
  if (packed_ == nullptr) return likes_[d].load(std::memory_order_acquire);
  const uint8_t small = packed_->likes[d];
  if (small != kLikesOverflow) return small;
  const auto& docs = packed_->overflow_docs;
  const auto it = std::lower_bound(docs.begin(), docs.end(), d);
  if (it == docs.end() || *it != d) return kLikesOverflow;  // checked when the file was read
  return packed_->overflow_likes[static_cast<size_t>(it - docs.begin())];
}

void Columns::ChangedLikesRows(std::vector<DocId>* out) const {
  if (overlay_ == nullptr) return;
  const size_t first = out->size();
  overlay_->ForEach([out](DocId d, uint32_t) { out->push_back(d); });
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
}

void Columns::ForEachChangedLikes(const std::function<void(DocId, uint32_t)>& fn) const {
  if (overlay_ != nullptr) overlay_->ForEach(fn);
}

void Columns::SetLikes(DocId d, uint32_t likes) {
  if (packed_ == nullptr) {
    likes_[d].store(likes, std::memory_order_release);
  } else {
    overlay_->Set(d, likes);
    changed_[d / 64].fetch_or(uint64_t{1} << (d % 64), std::memory_order_acq_rel);
  }
  RaiseRangeMaxLikes(d, likes);
  changes_.fetch_add(1, std::memory_order_acq_rel);
}

void Columns::SetRow(DocId d, TweetId id, int64_t created_at_ms, UserId user, uint32_t lang,
                     uint16_t length, uint32_t likes) {
  tweet_id_[d] = id;
  created_at_ms_[d] = created_at_ms;
  user_id_[d] = user;
  lang_[d] = lang;
  length_[d] = length;
  likes_[d].store(likes, std::memory_order_relaxed);
  RaiseRangeMaxLikes(d, likes);
  std::atomic<int64_t>& created = range_max_created_[d >> kRangeShift];
  if (created.load(std::memory_order_relaxed) < created_at_ms) {
    created.store(created_at_ms, std::memory_order_release);
  }
  std::atomic<int64_t>& earliest = range_min_created_[d >> kRangeShift];
  if (earliest.load(std::memory_order_relaxed) > created_at_ms) {
    earliest.store(created_at_ms, std::memory_order_release);
  }
  if (max_created_.load(std::memory_order_relaxed) < created_at_ms) {
    max_created_.store(created_at_ms, std::memory_order_release);
  }
}

void Columns::PrepareRangeMinCreated() const {
  if (packed_ == nullptr) return;
  std::call_once(range_min_once_, [this] {
    const size_t ranges = (capacity_ >> kRangeShift) + 1;
    auto bounds = std::make_unique<int64_t[]>(ranges);
    std::fill_n(bounds.get(), ranges, std::numeric_limits<int64_t>::max());
    for (DocId d = 0; d < capacity_; ++d) {
      int64_t& bound = bounds[d >> kRangeShift];
      bound = std::min(bound, created_at_ms(d));
    }
    range_min_owned_ = std::move(bounds);
    packed_range_min_created_.store(range_min_owned_.get(), std::memory_order_release);
  });
}

}  // namespace tweetsearch::index
