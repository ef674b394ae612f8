// StatsCache: a front door's recent collection statistics for best match, so that a search
// whose statistics nothing has changed since need not ask every partition for them first (a
// round of RPCs that cost a cluster's best match a third of its CPU: docs/benchmarks.md).
//
// Best match scores with the statistics of every partition summed (docs/cluster.md). An entry
// holds them for one query's search terms, with each partition's generation as its answer
// gave it (how many changes the replica had applied) and when it was collected. It is used only
//   - within `ttl` of its collection, and
//   - while the latest generation seen from each partition (in any search or statistics
//     answer since) is still the one it was collected at,
// and everything is dropped when this front door writes. So while no tweet changes, scores are
// exactly those of collecting now; while tweets change through other front doors, statistics
// are at most `ttl` old (collecting now is no exacter: the partitions' searches run after it,
// and replicas apply changes at their own pace).
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_CLUSTER_STATS_CACHE_H_
#define TWEETSEARCH_CLUSTER_STATS_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "indexer/query/searcher.h"

namespace tweetsearch::cluster {

class StatsCache {
 public:
  // `ttl` zero: nothing is kept. At most `max_entries` queries are kept (beyond: all dropped).
  StatsCache(const Clock& clock, int64_t ttl_ms, size_t max_entries = 4096);

  // The statistics of `search_terms`, if an entry may still be used.
  std::optional<query::CollectionStats> Find(std::string_view search_terms) const;
  // Read before collecting, and given to Store: statistics collected across a Clear are not
  // kept.
  uint64_t Epoch() const;
  // Keeps `stats` of `search_terms`, collected from partitions at `generations` (one per
  // partition, in order), if nothing was cleared since `epoch`.
  void Store(std::string_view search_terms, const query::CollectionStats& stats,
             const std::vector<uint64_t>& generations, uint64_t epoch);
  // Partition `partition` answered at `generation`.
  void Saw(uint32_t partition, uint64_t generation);
  // This front door wrote: what is kept may be out of date.
  void Clear();

 private:
  struct Entry {
    query::CollectionStats stats;
    std::vector<uint64_t> generations;
    int64_t collected_ms = 0;
  };

  const Clock& clock_;
  const int64_t ttl_ms_;
  const size_t max_entries_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> seen_ ABSL_GUARDED_BY(mu_);  // per partition; grows as partitions answer
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;          // Clear calls
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_STATS_CACHE_H_
