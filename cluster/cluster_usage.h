// ClusterUsageStore: the usage series of a cluster's front doors, kept in its storage
// partitions (docs/cluster.md, "Usage series"), so that every front door counts into the same
// series and any front door shows them all.
//
// An API key's series lives in the storage partition its key id hashes to
// (StoragePartitionOfKey); so does the "all" series. Add() sends each partition its share of a
// batch as one write to the partition's primary, which adds the counts to its usage column
// family and logs them as one change, replicated to the secondary before it is acknowledged.
// Each share is an idempotent write keyed by the batch id and the partition: a share sent again
// after a lost answer, a failover, or a partial failure of the batch counts once. Query() and
// Keys() read from the primary, or the secondary while it is in sync.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_CLUSTER_CLUSTER_USAGE_H_
#define TWEETSEARCH_CLUSTER_CLUSTER_USAGE_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_backend.h"
#include "cluster/cluster_view.h"
#include "common/clock.h"
#include "usage/usage_store.h"

namespace tweetsearch::cluster {

class ClusterUsageStore final : public usage::UsageStore {
 public:
  // Writes go through `backend` (its retries through failovers); `view`, `backend` and `clock`
  // must outlive the store. `read_timeout` bounds each replica's answer to a query.
  ClusterUsageStore(ClusterBackend& backend, ClusterView& view, const Clock& clock,
                    std::chrono::milliseconds read_timeout = std::chrono::seconds(2));

  // Unavailable when a partition's share could not be written (the others may have been):
  // Add again with the same batch id.
  absl::Status Add(const std::vector<usage::Increment>& increments,
                   std::string_view batch_id) override;
  absl::StatusOr<std::vector<usage::Point>> Query(std::string_view key_id,
                                                  usage::Resolution resolution, int64_t from_s,
                                                  int64_t to_s, size_t max_points) const override;
  // The key ids of every partition, in order.
  absl::StatusOr<std::vector<std::string>> Keys() const override;
  // Nothing to do here: each storage replica drops its expired buckets once an hour, and
  // queries leave them out meanwhile.
  absl::Status ExpireNow() override { return absl::OkStatus(); }
  // Unimplemented: each storage replica keeps its own buckets.
  absl::StatusOr<uint64_t> StoredBuckets(usage::Resolution resolution) const override;

 private:
  // Calls `ask(partition p's replica r)` on p's replicas, the primary first, until one
  // answers; the last error otherwise. An answer that no replica would change (a bad
  // argument) is returned at once.
  template <typename Ask>
  absl::Status AskReplicas(uint32_t p, Ask ask) const;

  ClusterBackend& backend_;
  ClusterView& view_;
  const Clock& clock_;
  const std::chrono::milliseconds read_timeout_;
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_CLUSTER_USAGE_H_
