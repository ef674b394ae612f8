#include "indexer/index/count_cache.h"

namespace tweetsearch::index {

std::optional<CountCache::Count> CountCache::Get(const std::string& key,
                                                 uint64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.generation != generation) return std::nullopt;
  return it->second.count;
}

void CountCache::Put(const std::string& key, uint64_t generation, Count count) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = entries_.insert_or_assign(key, Entry{generation, count});
  if (!added) return;
  order_.push_back(key);
  if (order_.size() > kMaxEntries) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

}  // namespace tweetsearch::index
