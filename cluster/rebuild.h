// Rebuild: fills one index replica from nothing (tweetctl rebuild; see
// docs/operations.md, "Rebuilding a lost index server").
//
//   1. Asks the replica for its state. A replica already rebuilding is resumed
//      from the last id it has loaded; a serving one is refused unless forced,
//      and the partition's last serving one unless also told to take the
//      partition offline.
//   2. Otherwise takes the builder leader's cursors (one storage sequence per
//      storage partition) and begins the rebuild there: the replica forgets
//      its index and will tail the storage logs from those sequences.
//   3. Streams the partition's ids from the builder in ascending order,
//      fetches the tweets from storage in batches (one MultiGet per storage
//      partition, fetching the next batch while the replica indexes this one)
//      and sends them to the replica, which checkpoints as it goes.
//   4. Finishes: the replica saves, replays the changes made since step 2
//      from the storage logs, and joins the front doors' fan-out once caught
//      up. The run waits for that.
//
// Why it is complete: every tweet alive at the builder's cursors is in its
// listing (the builder only moves forward), and every change after them is in
// the storage logs the replica replays; replays are idempotent. Progress is
// kept in etcd (RebuildKey) for tweetctl status.
//
// Thread-safety: RunRebuild blocks its caller; one rebuild per replica at a time.
#ifndef TWEETSEARCH_CLUSTER_REBUILD_H_
#define TWEETSEARCH_CLUSTER_REBUILD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cluster/topology.h"
#include "common/clock.h"

namespace tweetsearch::cluster {

struct RebuildOptions {
  std::string replica;  // the index node to rebuild, e.g. "i0a"
  size_t batch = 2000;  // tweets per fetch and per AddTweets call
  bool force = false;   // rebuild a replica that is serving
  // ... even the partition's only serving one (the partition is offline until the end)
  bool take_offline = false;
  bool restart = false;  // begin again even if the replica is mid-rebuild
  // Load at most this many tweets in this run, then have the replica save
  // and stop (a later run resumes); 0: no limit.
  uint64_t stop_after = 0;
  uint64_t checkpoint_every = 250'000;              // tweets between the replica's saves
  absl::Duration join_timeout = absl::Minutes(10);  // waiting for the replica to serve
  // The time the join timeout, the elapsed time, the rate and the reports' pacing are measured
  // on (its monotonic part; its wall time stamps the progress in etcd); null: SystemClock().
  const Clock* clock = nullptr;
};

struct RebuildProgress {
  std::string phase;     // "loading", "stopped", "catching_up", "serving"
  std::string builder;   // the builder the ids come from
  uint64_t total = 0;    // ids of the partition when the run started
  uint64_t done = 0;     // ids sent (including those loaded before a resume)
  uint64_t missing = 0;  // ids storage no longer had (deleted since)
  bool resumed = false;
  bool partition_offline = false;  // no other replica of the partition serves meanwhile
  absl::Duration elapsed;
  double tweets_per_s = 0;  // this run's loading rate
};

// Runs a rebuild of `options.replica`, calling `report` about every 200 ms and
// at each phase change. OK also when it stopped early (phase "stopped").
absl::Status RunRebuild(const Topology& topology, const RebuildOptions& options,
                        const std::function<void(const RebuildProgress&)>& report);

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_REBUILD_H_
