#include "indexer/index/segment.h"

namespace tweetsearch::index {

uint32_t PackLang(std::string_view lang) {
  uint32_t code = 0;
  for (size_t i = 0; i < lang.size() && i < 4; ++i) {
    code |= static_cast<uint32_t>(static_cast<unsigned char>(lang[i])) << (8 * i);
  }
  return code;
}

Columns::Columns(uint32_t capacity)
    : capacity_(capacity),
      tweet_id_(new TweetId[capacity]()),
      created_at_ms_(new int64_t[capacity]()),
      user_id_(new UserId[capacity]()),
      lang_(new uint32_t[capacity]()),
      length_(new uint16_t[capacity]()),
      likes_(new std::atomic<uint32_t>[capacity]()),
      deleted_(new std::atomic<uint64_t>[(capacity + 63) / 64]()),
      range_max_likes_(new std::atomic<uint32_t>[(capacity >> kRangeShift) + 1]()),
      range_max_created_(new std::atomic<int64_t>[(capacity >> kRangeShift) + 1]()) {
  for (DocId r = 0; r <= (capacity >> kRangeShift); ++r) {
    range_max_created_[r].store(std::numeric_limits<int64_t>::min(), std::memory_order_relaxed);
  }
}

size_t Columns::MemoryBytes() const {
  const size_t rows = capacity_;
  const size_t ranges = (rows >> kRangeShift) + 1;
  return rows * (sizeof(TweetId) + sizeof(int64_t) + sizeof(UserId) + sizeof(uint32_t) +
                 sizeof(uint16_t) + sizeof(uint32_t)) +
         (rows + 63) / 64 * sizeof(uint64_t) + ranges * (sizeof(uint32_t) + sizeof(int64_t));
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
  if (max_created_.load(std::memory_order_relaxed) < created_at_ms) {
    max_created_.store(created_at_ms, std::memory_order_release);
  }
}

}  // namespace tweetsearch::index
