// UsageStore: usage counters per API key in time buckets that coarsen with age.
//
// Four resolutions, each kept for a while:
//   minute    kept 24 hours
//   5 minutes kept 7 days
//   hour      kept 30 days
//   day       kept for ever
// Every increment is added to its bucket at all four resolutions at once, so a coarse bucket
// always holds the sum of the fine buckets it covers, and expiring a fine bucket only deletes:
// nothing is ever read back, summed and rewritten. Open() is one process's store, a RocksDB of
// its own laid out as usage/usage_table.h says; a cluster's front doors share one kept in the
// storage partitions (cluster/cluster_usage.h).
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_USAGE_USAGE_STORE_H_
#define TWEETSEARCH_USAGE_USAGE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "usage/series.h"

namespace tweetsearch::usage {

struct UsageStoreOptions {
  // Sync each flush to disk (fsync of the WAL). Default true: a flush is every few seconds.
  bool sync = true;
};

class UsageStore {
 public:
  // Opens or creates the store in `dir`. `clock` decides what has expired; it must outlive the
  // store.
  static absl::StatusOr<std::unique_ptr<UsageStore>> Open(const std::string& dir,
                                                          const Clock& clock,
                                                          const UsageStoreOptions& options = {});
  virtual ~UsageStore() = default;

  // Adds the increments to their buckets at every resolution, in one atomic write. A store
  // several front doors share (a cluster's storage partitions) writes parts of it separately:
  // there a failed Add may have written some parts, and an Add again with the same `batch_id`
  // writes only the parts still missing. `batch_id` is unique to each batch of increments.
  virtual absl::Status Add(const std::vector<Increment>& increments, std::string_view batch_id) = 0;

  // The buckets of `key_id` at `resolution` starting in [from_s, to_s), one Point per bucket
  // (zero counters where nothing was counted), oldest first. `from_s` is rounded down and `to_s`
  // up to bucket boundaries. Buckets past their retention come back empty. InvalidArgument if
  // from_s > to_s or the range holds more than `max_points` buckets.
  virtual absl::StatusOr<std::vector<Point>> Query(std::string_view key_id, Resolution resolution,
                                                   int64_t from_s, int64_t to_s,
                                                   size_t max_points = 10'000) const = 0;

  // The key ids that have any bucket, in order (kAllKeys and kAnonymousKey included).
  virtual absl::StatusOr<std::vector<std::string>> Keys() const = 0;

  // Removes expired buckets now (a compaction of the whole store; it also happens on its own
  // as RocksDB compacts).
  virtual absl::Status ExpireNow() = 0;

  // How many buckets of `resolution` are stored (expired ones not yet removed included).
  virtual absl::StatusOr<uint64_t> StoredBuckets(Resolution resolution) const = 0;
};

}  // namespace tweetsearch::usage

#endif  // TWEETSEARCH_USAGE_USAGE_STORE_H_
