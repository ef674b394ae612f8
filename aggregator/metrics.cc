#include "aggregator/metrics.h"

#include <algorithm>
#include <iterator>

#include "aggregator/backend.h"
#include "aggregator/stream_hub.h"
#include "common/strings.h"
#include "usage/usage_recorder.h"

namespace tweetsearch::aggregator {
namespace {

// One series without labels, with its help and type lines.
void Series(std::string* out, std::string_view name, std::string_view type, std::string_view help,
            uint64_t value) {
  StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ", value,
            "\n");
}

std::string LabelsOf(const StoragePartitionStats& p) {
  return StrCat("partition=\"", p.partition, "\"");
}
std::string LabelsOf(const ReplicaStats& r) {
  return StrCat("role=\"", r.role, "\",partition=\"", r.partition, "\",node=\"", r.node, "\"");
}
std::string LabelsOf(const HedgeDelayStats& h) {
  return StrCat("role=\"", h.role, "\",partition=\"", h.partition, "\"");
}

// One series per item (a storage partition, a replica), labelled; the help and type lines come
// once per name.
template <typename Item, typename Value>
void LabelledSeries(std::string* out, const std::vector<Item>& items, std::string_view name,
                    std::string_view type, std::string_view help, Value value) {
  StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  for (const Item& item : items) StrAppend(out, name, "{", LabelsOf(item), "} ", value(item), "\n");
}

void RenderReplicaMetrics(const EngineStats& s, std::string* out) {
  LabelledSeries(out, s.replicas, "tweetsearch_replica_ejected", "gauge",
                 "1 while the replica is ejected (asked only after the others).",
                 [](const ReplicaStats& r) { return r.ejected ? 1 : 0; });
  LabelledSeries(out, s.replicas, "tweetsearch_replica_ejections_total", "counter",
                 "Times the replica was ejected (failed or overtaken calls in a row).",
                 [](const ReplicaStats& r) { return r.ejections; });
  LabelledSeries(out, s.replicas, "tweetsearch_replica_hedges_total", "counter",
                 "Calls to the replica that ran past the hedge delay and were sent again.",
                 [](const ReplicaStats& r) { return r.hedges; });
  LabelledSeries(out, s.replicas, "tweetsearch_replica_hedges_refused_total", "counter",
                 "Calls to the replica that ran past the hedge delay and were not sent again then: "
                 "hedges had used up the partition's budget (5% of its answered calls); such a "
                 "call is sent again at four times the delay.",
                 [](const ReplicaStats& r) { return r.hedges_refused; });
  std::vector<ReplicaStats> index;
  std::copy_if(s.replicas.begin(), s.replicas.end(), std::back_inserter(index),
               [](const ReplicaStats& r) { return r.role == "index"; });
  LabelledSeries(out, index, "tweetsearch_replica_listed", "gauge",
                 "1 while this front door's view of etcd lists the index replica as serving.",
                 [](const ReplicaStats& r) { return r.listed ? 1 : 0; });
  LabelledSeries(out, s.hedge_delays, "tweetsearch_replica_hedge_delay_seconds", "gauge",
                 "How long a call to the partition runs before it is hedged (its recent p95).",
                 [](const HedgeDelayStats& h) { return h.seconds; });
}

}  // namespace

void RenderStreamMetrics(const StreamHubStats& s, std::string* out) {
  Series(out, "tweetsearch_streams_open", "gauge", "Streams open (GET /v1/stream, gRPC Stream).",
         s.open_streams);
  Series(out, "tweetsearch_stream_standing_queries", "gauge",
         "Distinct queries of the open streams.", s.standing_queries);
  Series(out, "tweetsearch_stream_position", "gauge",
         "The last change the streams' matcher has matched (compare tweetsearch_change_sequence).",
         s.position);
  Series(out, "tweetsearch_stream_events_total", "counter", "Events queued for streams.", s.events);
  Series(out, "tweetsearch_stream_query_tests_total", "counter",
         "Standing queries evaluated against new tweets (those filed under one of its terms).",
         s.query_tests);
  Series(out, "tweetsearch_stream_catch_ups_total", "counter",
         "Times a stream read the change log to catch up (a slow client, a late matcher).",
         s.catch_ups);
}

void RenderEngineMetrics(const EngineStats& s, std::string* out) {
  Series(out, "tweetsearch_index_documents", "gauge", "Tweets in the index.", s.indexed_documents);
  Series(out, "tweetsearch_index_memory_bytes", "gauge",
         "Heap bytes of the index: the active segment, deletes and likes changes of sealed ones.",
         s.index_memory_bytes);
  Series(out, "tweetsearch_index_mapped_bytes", "gauge",
         "Bytes of sealed segment files served from read-only mappings (page cache).",
         s.index_mapped_bytes);
  Series(out, "tweetsearch_index_damaged_segments", "gauge",
         "Sealed segments in which a corrupt part was found; queries reaching them fail.",
         s.index_damaged_segments);
  Series(out, "tweetsearch_index_sealed_segments", "gauge", "Sealed index segments.",
         s.sealed_segments);
  Series(out, "tweetsearch_storage_tweets_estimate", "gauge",
         "RocksDB's estimate of stored tweets.", s.stored_tweets_estimate);
  Series(out, "tweetsearch_storage_disk_bytes", "gauge", "Bytes of SST files and memtables.",
         s.storage_disk_bytes);
  Series(out, "tweetsearch_ingested_tweets_total", "counter", "Tweets accepted since start.",
         s.tweets_ingested);
  Series(out, "tweetsearch_rejected_tweets_total", "counter", "Tweets rejected since start.",
         s.tweets_rejected);
  Series(out, "tweetsearch_ingest_write_groups_total", "counter",
         "Synced storage writes made by ingest (group commits).", s.write_groups);
  Series(out, "tweetsearch_tweet_cache_hits_total", "counter",
         "Search hits hydrated from the cache.", s.tweet_cache_hits);
  Series(out, "tweetsearch_tweet_cache_misses_total", "counter", "Search hits read from storage.",
         s.tweet_cache_misses);
  Series(out, "tweetsearch_tweet_cache_bytes", "gauge", "Bytes of cached tweets.",
         s.tweet_cache_bytes);
  Series(out, "tweetsearch_change_sequence", "gauge", "Last change written to storage.",
         s.last_change);
  Series(out, "tweetsearch_checkpoint_change_sequence", "gauge",
         "Change reflected by the last saved index.", s.checkpoint_change);
  Series(out, "tweetsearch_checkpoint_failures_total", "counter",
         "Checkpoints that failed (full disk, failed fsync); the previous one stays in force.",
         s.checkpoint_failures);
  if (!s.replicas.empty()) RenderReplicaMetrics(s, out);
  if (s.storage_partitions.empty()) return;
  const std::vector<StoragePartitionStats>& parts = s.storage_partitions;
  LabelledSeries(out, parts, "tweetsearch_storage_has_primary", "gauge",
                 "1 when the storage partition has a primary that answers.",
                 [](const StoragePartitionStats& p) { return p.has_primary ? 1 : 0; });
  LabelledSeries(out, parts, "tweetsearch_storage_primary_epoch", "gauge",
                 "The primary's term (epoch).",
                 [](const StoragePartitionStats& p) { return p.epoch; });
  LabelledSeries(out, parts, "tweetsearch_storage_secondary_in_sync", "gauge",
                 "1 when the secondary holds every acknowledged write (it may be promoted).",
                 [](const StoragePartitionStats& p) { return p.secondary_in_sync ? 1 : 0; });
  LabelledSeries(out, parts, "tweetsearch_storage_single_replica_writes_total", "counter",
                 "Writes the current primary acknowledged without its secondary.",
                 [](const StoragePartitionStats& p) { return p.single_replica_writes; });
}

void RenderUsageMetrics(const usage::RecorderStats& u, std::string* out) {
  Series(out, "tweetsearch_usage_recorded_total", "counter", "API calls counted in usage series.",
         u.recorded);
  Series(out, "tweetsearch_usage_flushes_total", "counter", "Usage flushes written.", u.flushes);
  Series(out, "tweetsearch_usage_flush_errors_total", "counter",
         "Usage flushes that failed (their counts wait for the next one).", u.flush_errors);
}

void Metrics::RecordRequest(std::string_view transport, std::string_view route, int status,
                            double seconds) {
  // Built in a per-thread buffer: no allocation once the buffer has grown.
  thread_local std::string labels;
  labels.clear();
  labels.append("transport=\"").append(transport).append("\",route=\"").append(route).append("\"");
  std::atomic<uint64_t>* counter;
  Histogram* histogram;
  {
    absl::MutexLock lock(&mu_);
    auto h = latency_.find(labels);
    histogram = h != latency_.end() ? &h->second : &latency_[labels];
    labels.append(",code=\"").append(std::to_string(status)).append("\"");
    auto c = requests_.find(labels);
    counter = c != requests_.end() ? &c->second : &requests_[labels];
  }
  counter->fetch_add(1, std::memory_order_relaxed);
  const size_t bucket =
      std::lower_bound(kBuckets.begin(), kBuckets.end(), seconds) - kBuckets.begin();
  histogram->counts[bucket].fetch_add(1, std::memory_order_relaxed);
  histogram->sum_nanos.fetch_add(static_cast<uint64_t>(std::max(0.0, seconds) * 1e9),
                                 std::memory_order_relaxed);
}

void Metrics::Render(std::string* out) const {
  absl::MutexLock lock(&mu_);
  StrAppend(out, "# HELP tweetsearch_requests_total Requests answered, by route and status.\n",
            "# TYPE tweetsearch_requests_total counter\n");
  for (const auto& [labels, count] : requests_) {
    StrAppend(out, "tweetsearch_requests_total{", labels, "} ",
              count.load(std::memory_order_relaxed), "\n");
  }
  StrAppend(out, "# HELP tweetsearch_request_duration_seconds Time to answer a request.\n",
            "# TYPE tweetsearch_request_duration_seconds histogram\n");
  for (const auto& [labels, h] : latency_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= kBuckets.size(); ++i) {
      cumulative += h.counts[i].load(std::memory_order_relaxed);
      const std::string le = i < kBuckets.size() ? StrCat(kBuckets[i]) : "+Inf";
      StrAppend(out, "tweetsearch_request_duration_seconds_bucket{", labels, ",le=\"", le, "\"} ",
                cumulative, "\n");
    }
    StrAppend(out, "tweetsearch_request_duration_seconds_sum{", labels, "} ",
              h.sum_nanos.load(std::memory_order_relaxed) / 1e9, "\n");
    StrAppend(out, "tweetsearch_request_duration_seconds_count{", labels, "} ", cumulative, "\n");
  }
}

void RateMeter::Sample(int64_t now_ms, uint64_t total) {
  absl::MutexLock lock(&mu_);
  samples_[count_ % kSamples] = {now_ms, total};
  ++count_;
}

double RateMeter::PerSecond(int64_t window_ms) const {
  absl::MutexLock lock(&mu_);
  if (count_ < 2) return 0;
  const auto& newest = samples_[(count_ - 1) % kSamples];
  // The oldest sample still inside the window (at least the one before the newest).
  const size_t available = std::min(count_, kSamples);
  size_t back = 1;
  while (back + 1 < available &&
         newest.first - samples_[(count_ - 1 - (back + 1)) % kSamples].first <= window_ms) {
    ++back;
  }
  const auto& oldest = samples_[(count_ - 1 - back) % kSamples];
  const int64_t dt = newest.first - oldest.first;
  if (dt <= 0 || newest.second < oldest.second) return 0;
  return static_cast<double>(newest.second - oldest.second) * 1000.0 / static_cast<double>(dt);
}

}  // namespace tweetsearch::aggregator
