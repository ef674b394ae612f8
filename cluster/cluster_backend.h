// ClusterBackend: the front door's Backend in the cluster shape
// (docs/cluster.md).
//
// Writes: the front door validates and assigns ids, groups tweets by storage
// partition and sends each group to that partition's primary (in parallel); a
// primary that is gone or no longer primary is looked up again in etcd and the
// write retried (marked as a retry, so a write that landed before its answer
// was lost is not a duplicate) until `write_deadline`. Once acknowledged, the
// call waits (up to `visible_wait`) until every serving index replica has
// applied the write, so that what Ingest() returns is searchable, as in one
// process.
//
// Searches: one call per index partition, in parallel, to a serving replica
// (rotating, ejected replicas last); a failed call is retried on the other
// replica, a slow one is hedged to it after the partition's observed p95
// latency (at most `hedge_after`); the whole fan-out has `search_deadline`.
// Replicas that keep failing or being overtaken are ejected for a while
// (cluster/replica_health.h); so are storage replicas for reads. An index
// replica that answered within `keep_answering` stays in the fan-out even
// when etcd stops listing it (its lease lapsed during an etcd outage).
// The partitions' top-k lists are merged by sort key. A partition with no
// replica answering fails the search (Unavailable), or with allow_partial is
// left out and named. Best match first collects the statistics of every
// partition (summed), then scores with them everywhere. Hits are hydrated from
// storage in one batch per storage partition, through an LRU cache of tweet
// bodies.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_CLUSTER_CLUSTER_BACKEND_H_
#define TWEETSEARCH_CLUSTER_CLUSTER_BACKEND_H_

#include <atomic>
#include <chrono>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/backend.h"
#include "aggregator/tweet_cache.h"
#include "cluster/cluster_streams.h"
#include "cluster/cluster_view.h"
#include "cluster/replica_health.h"
#include "cluster/search_batcher.h"
#include "cluster/stats_cache.h"
#include "cluster/timer_thread.h"
#include "common/snowflake.h"
#include "storage/write_records.h"

namespace tweetsearch::cluster {

struct ClusterBackendOptions {
  size_t max_text_bytes = 4096;
  uint32_t node_id = 0;  // snowflake node bits of this front door
  std::chrono::milliseconds search_deadline{2000};
  std::chrono::milliseconds hedge_after{100};  // the longest hedge delay
  ReplicaHealthOptions health;                 // its max_hedge is hedge_after
  // An index replica that answered within this long is asked even when etcd no
  // longer lists it (etcd was away and its lease lapsed).
  std::chrono::seconds keep_answering{5};
  std::chrono::milliseconds write_deadline{20000};  // long enough to ride out a failover
  // A write its primary refuses until etcd or the secondary is back
  // (storage::kWaitsForEtcdOrSecondary) is tried this long at most, then answered 503.
  std::chrono::milliseconds stranded_write_deadline{1000};
  std::chrono::milliseconds visible_wait{2000};
  size_t tweet_cache_bytes = size_t{64} << 20;
  // How long best match may use collection statistics collected before (cluster/stats_cache.h);
  // zero: collected for every search.
  std::chrono::milliseconds stats_ttl{10000};
  index::IndexOptions index;  // the analyzer must match the index servers'
};

class ClusterBackend final : public aggregator::Backend {
 public:
  // `view` must outlive the backend.
  static absl::StatusOr<std::unique_ptr<ClusterBackend>> Create(
      ClusterView& view, const ClusterBackendOptions& options, const Clock& clock);
  ~ClusterBackend() override;

  using aggregator::Backend::Delete;
  using aggregator::Backend::Ingest;
  using aggregator::Backend::Likes;
  std::vector<aggregator::IngestOutcome> Ingest(std::vector<aggregator::NewTweet> tweets,
                                                aggregator::WriteOnce* once) override;
  absl::Status Delete(TweetId id, aggregator::WriteOnce* once) override;
  absl::StatusOr<uint32_t> Likes(TweetId id, int64_t value, bool add,
                                 aggregator::WriteOnce* once) override;
  absl::StatusOr<storage::StoredTweet> Get(TweetId id) const override;
  absl::StatusOr<aggregator::SearchOutcome> RunSearch(
      const aggregator::SearchCall& call) const override;
  // Answers on a gRPC thread, or on the timer's at the deadline; never waits.
  void StartSearch(const aggregator::SearchCall& call, SearchDone done) const override;
  absl::StatusOr<aggregator::CountsOutcome> RunCounts(
      const aggregator::CountsCall& call) const override;
  absl::StatusOr<query::CollectionStats> CollectStats(
      const aggregator::SearchCall& call) const override;
  // Answers at once from the statistics kept, else as StartSearch.
  void StartCollectStats(const aggregator::SearchCall& call, StatsDone done) const override;
  TweetId Watermark() const override { return kMaxTweetId; }
  const analysis::Analyzer& analyzer() const override { return *analyzer_; }
  const Clock& clock() const override { return clock_; }
  aggregator::EngineStats Stats() const override;
  uint64_t tweets_ingested() const override { return ingested_.load(std::memory_order_relaxed); }
  absl::StatusOr<std::unique_ptr<aggregator::StreamFeed>> OpenStream(
      const aggregator::StreamCall& call) override;
  std::optional<aggregator::StreamHubStats> StreamStats() const override {
    return streams_->Stats();
  }

  // Also for the cluster's usage series (cluster/cluster_usage.h):
  // Sends `request` to storage partition `p`'s primary until it answers or the deadline
  // passes (through a failover, marked as a retry after the first attempt).
  absl::StatusOr<internal::v1::WriteResponse> WriteToPrimary(uint32_t p,
                                                             internal::v1::WriteRequest request);
  // Storage partition p's replicas, the primary first (reads fall back to the secondary),
  // ejected ones last.
  std::vector<uint32_t> StorageReplicasPrimaryFirst(uint32_t p) const;

 private:
  ClusterBackend(ClusterView& view, const ClusterBackendOptions& options, const Clock& clock,
                 SnowflakeGenerator ids, std::unique_ptr<analysis::Analyzer> analyzer);
  // Ingest, without forgetting the statistics kept for best match.
  std::vector<aggregator::IngestOutcome> IngestNow(std::vector<aggregator::NewTweet> tweets,
                                                   aggregator::WriteOnce* once);
  struct SearchInFlight;
  struct Hydration;
  struct StatsInFlight;
  // The partitions' statistics summed (and kept when every partition answered).
  absl::StatusOr<query::CollectionStats> SumStats(
      const StatsInFlight& stats,
      const std::vector<absl::StatusOr<internal::v1::CollectionStats>>& answers) const;
  // The partitions' answers merged: totals, and the top `limit` hits by sort key into `hits`.
  // Unavailable when a partition did not answer and the search does not allow partial answers.
  absl::StatusOr<aggregator::SearchOutcome> Merge(
      const SearchInFlight& search,
      std::vector<absl::StatusOr<internal::v1::PartitionSearchResponse>>& answers,
      std::vector<query::Hit>* hits) const;
  // `out` with `hits` and their tweets, from the cache and from storage, to `done`.
  void Hydrate(aggregator::SearchOutcome out, const std::vector<query::Hit>& hits,
               std::shared_ptr<void> counted, SearchDone done) const;
  // Counts a search in flight until the last copy of what it returns is gone (the search's
  // calls have all ended): the destructor waits for none to be left.
  std::shared_ptr<void> InFlight() const;
  // The fetched tweets into the hits waiting for them; hits deleted meanwhile are dropped.
  absl::Status FillHits(const std::vector<absl::StatusOr<internal::v1::MultiGetResponse>>& fetched,
                        Hydration& hydration) const;
  // Per index partition, its serving replicas, starting at a different one on each call.
  std::vector<std::vector<uint32_t>> IndexReplicasInTurn() const;
  // Waits until the serving index replicas have applied storage partition `p`
  // through `sequence`.
  void WaitVisible(const std::vector<std::pair<uint32_t, uint64_t>>& written) const;
  // Stores an idempotent ingest's record (its plan or final answer) in storage partition `p`;
  // returns the record stored there now (FailedPrecondition when it answers another request),
  // and whether an earlier attempt had stored it.
  absl::StatusOr<storage::WriteRecord> StoreRecord(uint32_t p, const aggregator::WriteOnce& once,
                                                   const storage::WriteRecord& record,
                                                   bool* replayed);
  // Writes the tweets whose outcome is OK, under their outcome's id, and sets their outcomes.
  void WriteTweets(std::vector<aggregator::NewTweet> tweets, bool retry,
                   std::vector<aggregator::IngestOutcome>& outcomes);
  // A delete or likes change of tweet `id`, idempotent with `once`; the stored answer replaces
  // a replayed one's.
  absl::StatusOr<internal::v1::WriteResponse> WriteOne(TweetId id,
                                                       internal::v1::WriteRequest request,
                                                       aggregator::WriteOnce* once);

  ClusterView& view_;
  const ClusterBackendOptions options_;
  const Clock& clock_;
  SnowflakeGenerator ids_;
  std::unique_ptr<analysis::Analyzer> analyzer_;
  mutable aggregator::TweetCache cache_;
  mutable std::atomic<uint32_t> rotation_{0};
  mutable ReplicaHealth index_health_;
  mutable ReplicaHealth storage_health_;
  // Hedges and deadlines of the fan-outs: after the health they tell, before the batcher
  // whose calls end the fan-outs.
  mutable TimerThread timers_;
  mutable SearchBatcher batcher_;  // after the view and health it uses, before the streams
  mutable StatsCache stats_cache_;
  std::atomic<uint64_t> ingested_{0}, rejected_{0};
  mutable absl::Mutex in_flight_mu_;
  mutable uint64_t in_flight_ ABSL_GUARDED_BY(in_flight_mu_) = 0;
  std::unique_ptr<ClusterStreams> streams_;  // last: its streams go before the rest
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_CLUSTER_BACKEND_H_
