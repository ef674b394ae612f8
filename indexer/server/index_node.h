// IndexNode: one replica of one index partition (docs/cluster.md, "Index
// servers").
//
// It holds the partition's tweets in an in-memory index and keeps it current by
// tailing the change log of every storage partition (one thread each, long
// polls), keeping the changes of tweets whose index partition is its own.
// Replays are idempotent (a re-add of an indexed tweet and a delete of a
// missing one are ignored; likes are absolute), so it may re-read changes.
// Every `checkpoint_every` applied changes (and on Checkpoint()), it seals and
// saves the index to <data>/index with the storage sequences it reflects
// (<data>/index/CURSORS); a restart loads them and tails from there. The
// cursors it has saved are what it tells storage it no longer needs.
//
// States: kCatchingUp until every log has been read to its end once, then
// kServing. A log that was trimmed past its cursor puts the node in
// kNeedsRebuild (tweetctl rebuild fills it): BeginRebuild() empties it and
// fixes the sequences to tail from, AddTweets() loads the partition's tweets
// in ascending id batches, FinishRebuild() saves and starts tailing. While
// rebuilding, checkpoints save the partial index with <data>/index/REBUILD
// (the starting sequences and the last id loaded) instead of CURSORS, so a
// restarted node is still rebuilding and the rebuild resumes where it was.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_INDEXER_SERVER_INDEX_NODE_H_
#define TWEETSEARCH_INDEXER_SERVER_INDEX_NODE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "indexer/index/index.h"
#include "indexer/query/plan.h"
#include "indexer/query/searcher.h"
#include "storage/change_tail.h"
#include "storage/tweet_store.h"

namespace tweetsearch::indexer {

// A stored tweet as the index takes it.
index::IndexDoc ToIndexDoc(const storage::StoredTweet& t);

struct IndexNodeOptions {
  std::string node;
  uint32_t partition = 0;
  uint32_t partitions = 1;  // index partitions in the cluster
  std::string data_dir;     // <data_dir>/index: saved segments and CURSORS
  index::IndexOptions index;
  uint64_t checkpoint_every = 1'000'000;
  absl::Duration poll_wait = absl::Seconds(1);  // how long one long poll waits
};

enum class IndexState { kCatchingUp, kServing, kNeedsRebuild, kRebuilding };
std::string_view IndexStateName(IndexState state);

struct IndexNodeStatus {
  IndexState state = IndexState::kCatchingUp;
  uint64_t documents = 0;
  uint64_t memory_bytes = 0;
  uint64_t mapped_bytes = 0;
  uint64_t damaged_segments = 0;
  std::vector<uint64_t> applied;  // per storage partition
  TweetId rebuild_through = 0;    // while rebuilding: ids up to this one are loaded
};

struct PartitionResult {
  query::SearchResult result;
  TweetId max_id = 0;
};

class IndexNode : private storage::ChangeConsumer {
 public:
  // Loads the saved index and cursors (none: an empty index tailing from the
  // start). `sources` has one entry per storage partition; tailing starts with
  // Start().
  static absl::StatusOr<std::unique_ptr<IndexNode>> Open(
      const IndexNodeOptions& options, std::vector<std::unique_ptr<storage::ChangeSource>> sources);
  // Stops tailing and saves a checkpoint.
  ~IndexNode() override;

  void Start();
  void Stop();

  // Search and Stats answer only while serving (Unavailable otherwise: a
  // replica that is catching up or rebuilding would give incomplete answers,
  // and the caller should ask the other replica).
  absl::StatusOr<PartitionResult> Search(std::string_view search_terms,
                                         const query::SearchOptions& options) const;
  absl::StatusOr<query::CollectionStats> Stats(std::string_view search_terms) const;
  absl::StatusOr<std::vector<uint64_t>> Counts(std::string_view search_terms,
                                               const query::TimeBuckets& buckets) const;
  // True once changes through `sequence` of storage partition `storage` are
  // applied, waiting up to `timeout`.
  bool WaitApplied(uint32_t storage, uint64_t sequence, absl::Duration timeout) const;

  absl::Status BeginRebuild(std::vector<uint64_t> from_sequences);
  // Adds tweets of this partition (others are refused with InvalidArgument);
  // re-adds are OK. `through`: every id of the partition up to this one has
  // now been offered (Status().rebuild_through, where a rebuild resumes).
  // `checkpoint`: save afterwards, so that a restarted node resumes from here.
  absl::Status AddTweets(std::span<const storage::StoredTweet> tweets, TweetId through,
                         bool checkpoint = false);
  absl::Status FinishRebuild();

  absl::Status Checkpoint();
  IndexNodeStatus Status() const;
  // Where this replica's tweets last changed: over every storage partition, the sequence of
  // the last applied change that added or deleted one of its tweets (likes and usage counts
  // leave it; on opening, where it resumes). Two serving replicas of a partition at the same
  // generation hold the same tweets, and while it does not move neither do the collection
  // statistics (front doors keep them meanwhile: cluster/stats_cache.h).
  uint64_t Generation() const;
  const IndexNodeOptions& options() const { return options_; }

 private:
  IndexNode(const IndexNodeOptions& options,
            std::vector<std::unique_ptr<storage::ChangeSource>> sources,
            std::unique_ptr<index::Index> index, std::vector<uint64_t> cursors);
  // storage::ChangeConsumer: the tailing threads, one per storage partition.
  std::optional<Position> Next(uint32_t storage) override;
  void Apply(uint32_t storage, const std::vector<storage::ReplicatedChange>& changes) override;
  void AtEnd(uint32_t storage) override;
  void Trimmed(uint32_t storage) override;
  void ApplyChanges(uint32_t storage, const std::vector<storage::ReplicatedChange>& changes);
  absl::Status CheckpointLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_);
  absl::Status CheckServing() const;
  absl::Status CheckServingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const IndexNodeOptions options_;
  std::vector<std::unique_ptr<storage::ChangeSource>> sources_;

  // Held to replace the index (a rebuild) and to checkpoint; readers take a
  // shared lock.
  mutable absl::Mutex checkpoint_mu_;
  std::unique_ptr<index::Index> index_ ABSL_GUARDED_BY(checkpoint_mu_);
  std::vector<uint64_t> saved_ ABSL_GUARDED_BY(checkpoint_mu_);  // cursors of the last save
  std::atomic<uint64_t> since_checkpoint_{0};  // changes applied since the last save

  mutable absl::Mutex mu_;
  std::vector<uint64_t> applied_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> changed_ ABSL_GUARDED_BY(mu_);  // per storage partition
  // Their sum (Generation), written under mu_ with them and read without it: every search asks.
  std::atomic<uint64_t> generation_{0};
  void SumGeneration() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // sets generation_ from changed_
  std::vector<bool> caught_up_ ABSL_GUARDED_BY(mu_);
  IndexState state_ ABSL_GUARDED_BY(mu_) = IndexState::kCatchingUp;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  TweetId max_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> rebuild_from_ ABSL_GUARDED_BY(mu_);  // while rebuilding
  TweetId rebuild_through_ ABSL_GUARDED_BY(mu_) = 0;

  std::vector<std::thread> tailers_;
};

}  // namespace tweetsearch::indexer

#endif  // TWEETSEARCH_INDEXER_SERVER_INDEX_NODE_H_
