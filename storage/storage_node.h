// StorageNode: one replica of one storage partition (docs/cluster.md, "Storage
// replication").
//
// The primary orders every write: under one write lock it checks the request
// against its store (duplicate ids, the current likes), numbers the resulting
// changes after its last sequence, sends them to the secondary, and only then
// applies them to its own store. The secondary refuses any epoch below the
// highest it has seen (the fencing token, kept in <data>/EPOCH), so a primary
// whose term has passed cannot make a write durable anywhere: sending first
// means a refused primary has written nothing. A write is acknowledged once it
// is durable on both, or, with allow_single_replica and the secondary
// unreachable, on the primary alone; the secondary is then marked stale (the
// `on_peer_stale` hook, which must succeed first) and cannot be promoted until
// the primary has caught it up from its change log.
//
// Readers (index servers, builders, a catching-up peer) read the change log
// with ReadChanges, which can wait for new changes (long poll); the log is
// trimmed only below what every known reader still needs (or beyond
// max_log_changes).
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_STORAGE_STORAGE_NODE_H_
#define TWEETSEARCH_STORAGE_STORAGE_NODE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/tweet_store.h"

namespace tweetsearch::storage {

// The other replica of the partition, as the primary sees it.
class StoragePeer {
 public:
  virtual ~StoragePeer() = default;
  // Sends changes (consecutive sequences; may be empty) with the primary's
  // epoch. Returns the peer's last sequence after applying: below the batch's
  // last when the peer has a gap before it (the primary then sends the missing
  // changes first). FailedPrecondition when the peer has seen a higher epoch
  // (this primary is stale); Unavailable when unreachable.
  virtual absl::StatusOr<uint64_t> Replicate(uint64_t epoch, const std::string& primary,
                                             std::span<const ReplicatedChange> changes) = 0;
};

struct StorageNodeOptions {
  std::string node;  // this replica's name
  uint32_t partition = 0;
  std::string data_dir;  // <data_dir>/storage holds the RocksDB store,
                         // <data_dir>/EPOCH the fence
  StoreOptions store;
  bool allow_single_replica = false;
  // Change-log entries kept at most, whatever readers still need. Default 50M.
  uint64_t max_log_changes = 50'000'000;
  // Readers whose needs hold back trimming (index servers, builders): until
  // each has reported what it keeps, nothing is trimmed.
  std::vector<std::string> readers;
};

struct LikesChange {
  TweetId id = 0;
  int64_t value = 0;
  bool add = false;
};

// One write: tweets to store, or one delete, or one likes change.
struct WriteOp {
  std::vector<StoredTweet> puts;
  bool retry = false;  // a stored identical tweet is this caller's earlier write: OK
  std::optional<TweetId> delete_id;
  std::optional<LikesChange> likes;
};

struct WriteResult {
  std::vector<absl::Status> outcomes;  // one per put
  uint32_t likes = 0;                  // the new value of a likes change
  uint64_t last_sequence = 0;
};

enum class ReplicaRole { kSecondary, kPrimary };

struct StorageNodeStatus {
  ReplicaRole role = ReplicaRole::kSecondary;
  uint64_t epoch = 0;  // the highest seen
  uint64_t last_sequence = 0;
  uint64_t first_sequence = 0;
  uint64_t tweets_estimate = 0;
  uint64_t single_replica_writes = 0;
  uint64_t replicated_writes = 0;
  bool peer_in_sync = false;
};

class StorageNode {
 public:
  static absl::StatusOr<std::unique_ptr<StorageNode>> Open(const StorageNodeOptions& options);
  ~StorageNode();

  // Takes the primary role with `epoch` (above every epoch seen; persisted
  // first). `peer` may be null (no second replica) and must outlive the role.
  // `holds_role` tells, before each write, whether the role's lease is still
  // held; `on_peer_stale` must durably record that the peer may not be promoted
  // (called before a write is acknowledged without it) and `on_peer_in_sync`
  // clears that record once the peer has caught up. The peer counts as out of
  // sync until CatchUpPeer() has brought it up to date.
  absl::Status BecomePrimary(uint64_t epoch, StoragePeer* peer, std::function<bool()> holds_role,
                             std::function<absl::Status()> on_peer_stale,
                             std::function<absl::Status()> on_peer_in_sync);
  // Gives up the primary role (writes are refused from now on).
  void StepDown();

  // The primary's write. FailedPrecondition when this replica is not (or no
  // longer) the primary; Unavailable when the write could not be made durable
  // on enough replicas (nothing was acknowledged; the caller retries, with
  // `retry` set).
  absl::StatusOr<WriteResult> Write(WriteOp op);

  // A secondary's side of replication (see StoragePeer::Replicate).
  absl::StatusOr<uint64_t> Replicate(uint64_t epoch, const std::string& primary,
                                     std::span<const ReplicatedChange> changes);

  // Changes after `after` (at most `max`), waiting up to `wait` for one when
  // there are none. `reader` (may be empty) no longer needs changes up to
  // `reader_keeps`.
  absl::StatusOr<std::vector<ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                            absl::Duration wait,
                                                            const std::string& reader,
                                                            uint64_t reader_keeps);

  std::vector<absl::StatusOr<StoredTweet>> MultiGet(std::span<const TweetId> ids) const {
    return store_->MultiGet(ids);
  }

  // Brings an out-of-sync peer up to date from the change log (the primary's
  // background work; call it periodically). OK when there is nothing to do.
  absl::Status CatchUpPeer();
  // Trims the change log below what every reader still needs.
  absl::Status TrimLog();

  StorageNodeStatus Status() const;
  uint64_t epoch() const;
  bool is_primary() const;
  uint64_t LastSequence() const { return store_->LastSequence(); }
  const StorageNodeOptions& options() const { return options_; }

 private:
  StorageNode(const StorageNodeOptions& options, std::unique_ptr<TweetStore> store, uint64_t epoch);
  absl::Status PersistEpoch(uint64_t epoch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Sends `changes` to the peer, first whatever it is missing before them.
  absl::Status SendToPeer(std::span<const ReplicatedChange> changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void StepDownLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  const StorageNodeOptions options_;
  std::unique_ptr<TweetStore> store_;

  mutable absl::Mutex write_mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(write_mu_);
  ReplicaRole role_ ABSL_GUARDED_BY(write_mu_) = ReplicaRole::kSecondary;
  StoragePeer* peer_ ABSL_GUARDED_BY(write_mu_) = nullptr;
  bool peer_in_sync_ ABSL_GUARDED_BY(write_mu_) = false;
  uint64_t peer_last_ ABSL_GUARDED_BY(write_mu_) = 0;
  std::function<bool()> holds_role_ ABSL_GUARDED_BY(write_mu_);
  std::function<absl::Status()> on_peer_stale_ ABSL_GUARDED_BY(write_mu_);
  std::function<absl::Status()> on_peer_in_sync_ ABSL_GUARDED_BY(write_mu_);

  // Signalled (with the sequence) whenever changes are applied; long polls wait
  // on it.
  mutable absl::Mutex applied_mu_;
  uint64_t applied_ ABSL_GUARDED_BY(applied_mu_) = 0;

  mutable absl::Mutex readers_mu_;
  absl::flat_hash_map<std::string, uint64_t> reader_keeps_ ABSL_GUARDED_BY(readers_mu_);

  std::atomic<uint64_t> single_replica_writes_{0}, replicated_writes_{0};
};

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_STORAGE_NODE_H_
