#include "cluster/stats_cache.h"

#include "absl/strings/string_view.h"

namespace tweetsearch::cluster {

StatsCache::StatsCache(const Clock& clock, int64_t ttl_ms, size_t max_entries)
    : clock_(clock), ttl_ms_(ttl_ms), max_entries_(max_entries) {}

std::optional<query::CollectionStats> StatsCache::Find(std::string_view search_terms) const {
  if (ttl_ms_ <= 0) return std::nullopt;
  const int64_t now = clock_.NowUnixMillis();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(absl::string_view(search_terms.data(), search_terms.size()));
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  if (now - e.collected_ms >= ttl_ms_ || now < e.collected_ms) return std::nullopt;
  if (e.generations.size() > seen_.size()) return std::nullopt;
  for (size_t p = 0; p < e.generations.size(); ++p) {
    if (seen_[p] != e.generations[p]) return std::nullopt;
  }
  return e.stats;
}

uint64_t StatsCache::Epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

void StatsCache::Store(std::string_view search_terms, const query::CollectionStats& stats,
                       const std::vector<uint64_t>& generations, uint64_t epoch) {
  const int64_t now = clock_.NowUnixMillis();
  absl::MutexLock lock(&mu_);
  if (seen_.size() < generations.size()) seen_.resize(generations.size(), 0);
  for (size_t p = 0; p < generations.size(); ++p) seen_[p] = generations[p];
  if (ttl_ms_ <= 0 || epoch != epoch_) return;
  if (entries_.size() >= max_entries_) entries_.clear();
  entries_.insert_or_assign(std::string(search_terms), Entry{stats, generations, now});
}

void StatsCache::Saw(uint32_t partition, uint64_t generation) {
  absl::MutexLock lock(&mu_);
  if (seen_.size() <= partition) seen_.resize(partition + 1, 0);
  seen_[partition] = generation;
}

void StatsCache::Clear() {
  absl::MutexLock lock(&mu_);
  entries_.clear();
  ++epoch_;
}

}  // namespace tweetsearch::cluster
