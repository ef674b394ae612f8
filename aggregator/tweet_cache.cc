#include "aggregator/tweet_cache.h"

namespace tweetsearch::aggregator {

TweetCache::TweetCache(size_t capacity_bytes) : shard_capacity_(capacity_bytes / kShards) {}

size_t TweetCache::Cost(const storage::StoredTweet& t) {
  // The strings' heap blocks, the list node and the map slot.
  return sizeof(storage::StoredTweet) + t.text.capacity() + t.user_name.capacity() +
         t.lang.capacity() + 64;
}

std::shared_ptr<const storage::StoredTweet> TweetCache::Get(TweetId id) {
  if (shard_capacity_ == 0) return nullptr;
  Shard& shard = ShardOf(id);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.map.find(id);
  if (it == shard.map.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  it->second->referenced = true;
  hits_.fetch_add(1, std::memory_order_relaxed);
  return it->second->tweet;
}

void TweetCache::PutIfUnchanged(std::shared_ptr<const storage::StoredTweet> tweet, uint64_t epoch) {
  if (shard_capacity_ == 0) return;
  const TweetId id = tweet->id;
  const size_t cost = Cost(*tweet);
  Shard& shard = ShardOf(id);
  absl::MutexLock lock(&shard.mu);
  // Checked under the shard lock: Invalidate() bumps the epoch under the same lock, so an
  // invalidation either happened before this check (and we skip) or comes after the insert
  // (and removes it).
  if (epoch_.load(std::memory_order_acquire) != epoch || shard.map.contains(id)) return;
  shard.lru.push_front(Entry{std::move(tweet), false});
  shard.map.emplace(id, shard.lru.begin());
  shard.bytes += cost;
  // Second chance: a referenced entry at the end goes back to the front once.
  size_t moved = 0;
  while (shard.bytes > shard_capacity_ && !shard.lru.empty()) {
    Entry& last = shard.lru.back();
    if (last.referenced && moved++ < shard.map.size()) {
      last.referenced = false;
      shard.lru.splice(shard.lru.begin(), shard.lru, std::prev(shard.lru.end()));
      continue;
    }
    shard.bytes -= Cost(*last.tweet);
    shard.map.erase(last.tweet->id);
    shard.lru.pop_back();
  }
}

void TweetCache::Invalidate(TweetId id) {
  Shard& shard = ShardOf(id);
  absl::MutexLock lock(&shard.mu);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  auto it = shard.map.find(id);
  if (it == shard.map.end()) return;
  shard.bytes -= Cost(*it->second->tweet);
  shard.lru.erase(it->second);
  shard.map.erase(it);
}

size_t TweetCache::bytes() const {
  size_t total = 0;
  for (const Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    total += shard.bytes;
  }
  return total;
}

}  // namespace tweetsearch::aggregator
