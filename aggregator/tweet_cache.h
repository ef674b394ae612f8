// TweetCache: a bounded LRU cache of hot tweet bodies, for hydrating search results without a
// RocksDB lookup per hit.
//
// Sharded by id (16 shards, one mutex each). Entries are shared immutable tweets, so a hit
// costs a hash lookup and a reference count, not a copy. Eviction is LRU with second chance
// (CLOCK): a hit only sets a bit, and the eviction end gives referenced entries another round,
// so hits never reorder the list. Consistency with deletes and likes changes: every
// Invalidate() bumps an epoch; a reader takes the epoch before it reads the store and inserts
// what it read only if no invalidation happened meanwhile (PutIfUnchanged), so a body read
// before a delete can never be cached after it.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_TWEET_CACHE_H_
#define TWEETSEARCH_AGGREGATOR_TWEET_CACHE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "storage/tweet_store.h"

namespace tweetsearch::aggregator {

class TweetCache {
 public:
  // Holds about `capacity_bytes` of tweets (0 disables the cache).
  explicit TweetCache(size_t capacity_bytes);

  // The cached tweet, or null on a miss.
  std::shared_ptr<const storage::StoredTweet> Get(TweetId id);
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // Caches `tweet` unless an invalidation happened since `epoch` was read.
  void PutIfUnchanged(std::shared_ptr<const storage::StoredTweet> tweet, uint64_t epoch);
  // Drops `id` (after a delete or likes change).
  void Invalidate(TweetId id);

  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  size_t bytes() const;

 private:
  static constexpr size_t kShards = 16;
  struct Entry {
    std::shared_ptr<const storage::StoredTweet> tweet;
    bool referenced = false;  // hit since it last reached the eviction end
  };
  struct Shard {
    mutable absl::Mutex mu;
    std::list<Entry> lru ABSL_GUARDED_BY(mu);  // newest first
    absl::flat_hash_map<TweetId, std::list<Entry>::iterator> map ABSL_GUARDED_BY(mu);
    size_t bytes ABSL_GUARDED_BY(mu) = 0;
  };
  static size_t Cost(const storage::StoredTweet& t);
  Shard& ShardOf(TweetId id) { return shards_[(id * 0x9E3779B97F4A7C15ULL) >> 60]; }

  const size_t shard_capacity_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> hits_{0}, misses_{0};
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_TWEET_CACHE_H_
