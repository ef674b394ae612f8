// ClusterStreams: a cluster front door's streams (GET /v1/stream, the gRPC Stream call;
// docs/cluster.md, "Streams").
//
// A front door has no change log of its own. It follows each storage partition's log as index
// servers do, through a StreamHub per partition: a follower thread per partition reads the log
// from whichever replica answers (long polls, with the tweets) and publishes the changes to the
// partition's hub, whose matcher tests them against the standing queries. A stream subscribes
// to every partition's hub (aggregator/stream_feed.h); its event ids are vectors of
// per-partition sequences, so a client resumes on any front door.
//
// Followers read only while a stream is open. One that was idle skips to the partition's last
// sequence when a stream opens: the streams opened meanwhile start after every change
// acknowledged before them, and those resuming read what they need from the log themselves.
// A stream catching up reads the log from any replica; while no replica of a partition answers
// (a failover) live streams wait, and a catching-up one ends (Unavailable) for the client to
// resume.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_CLUSTER_CLUSTER_STREAMS_H_
#define TWEETSEARCH_CLUSTER_CLUSTER_STREAMS_H_

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "aggregator/stream_feed.h"
#include "cluster/cluster_view.h"

namespace tweetsearch::cluster {

class ClusterStreams {
 public:
  // `view` and `analyzer` (the index servers' analyzer) must outlive this.
  ClusterStreams(const ClusterView& view, const analysis::Analyzer& analyzer,
                 aggregator::StreamHubOptions options = {});
  // Ends every stream (Unavailable) and stops the followers.
  ~ClusterStreams();
  ClusterStreams(const ClusterStreams&) = delete;
  ClusterStreams& operator=(const ClusterStreams&) = delete;

  // Opens a stream of `plan`'s matches, after `last_event_id` when it is not empty (an id this
  // cluster's streams gave: one sequence per storage partition). `doc_freq` ranks the query's
  // terms for filing it (the collection's document frequencies; may be empty).
  absl::StatusOr<std::unique_ptr<aggregator::StreamFeed>> Open(
      const query::Plan& plan, std::string_view last_event_id,
      const absl::flat_hash_map<std::string, uint64_t>& doc_freq);

  // Summed over the partitions' hubs (every stream is open on each: streams and queries are
  // counted once).
  aggregator::StreamHubStats Stats() const;

 private:
  class PartitionLog;
  class Follower;

  uint64_t Rarity(std::string_view term) const;

  std::vector<std::unique_ptr<PartitionLog>> logs_;
  std::vector<std::unique_ptr<aggregator::StreamHub>> hubs_;
  std::vector<std::unique_ptr<Follower>> followers_;
  std::vector<std::thread> threads_;

  // Document frequencies of the terms of streams opened lately.
  mutable std::mutex rarity_mu_;
  absl::flat_hash_map<std::string, uint64_t> rarity_;
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_CLUSTER_STREAMS_H_
