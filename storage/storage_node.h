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
// trimmed only below what every known reader still needs and older than
// change_retention (streams resume from it), or beyond max_log_changes, but
// never past the position of a reader that has read within live_reader_window
// (a live reader that lags is not cut off).
//
// A peer whose log position the primary no longer has (a replica on a
// replaced disk, or one away for longer than the log keeps) gets a full
// copy: the primary streams a snapshot of its store with Install, then
// continues from the log after the snapshot's sequence. Until the last chunk
// is in, the receiving replica refuses reads and replication, and a restart
// clears the partial copy (<data_dir>/INSTALLING marks it).
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_STORAGE_STORAGE_NODE_H_
#define TWEETSEARCH_STORAGE_STORAGE_NODE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "storage/tweet_store.h"
#include "storage/write_records.h"

namespace tweetsearch::storage {

// One chunk of a full copy of a replica. The first has `begin`; the last has
// `finish`, the change at `sequence` (the copy's log starts with it).
struct InstallChunk {
  uint64_t sequence = 0;  // the snapshot's sequence
  bool begin = false;
  std::vector<StoredTweet> tweets;
  std::vector<StoredRequest> requests;  // idempotent writes' records
  std::vector<StoredUsage> usage;       // the usage series
  std::optional<ReplicatedChange> finish;
};

// The other replica of the partition, as the primary sees it.
class StoragePeer {
 public:
  virtual ~StoragePeer() = default;
  // Sends changes (consecutive sequences; may be empty) with the primary's
  // epoch. Returns the peer's last sequence after applying: below the batch's
  // last when the peer has a gap before it (the primary then sends the missing
  // changes first). FailedPrecondition when the peer has seen a higher epoch
  // (this primary is stale); Unavailable when unreachable.
  // `synced_through`: once the peer's last sequence reaches it, the peer holds
  // every acknowledged write (it then serves readers for a while; see
  // StorageNode::ReadChanges); 0 when it does not.
  virtual absl::StatusOr<uint64_t> Replicate(uint64_t epoch, const std::string& primary,
                                             std::span<const ReplicatedChange> changes,
                                             uint64_t synced_through) = 0;
  // Sends one chunk of a full copy (see StorageNode::Install). Errors as
  // Replicate; Aborted when the peer has no copy in progress to continue.
  virtual absl::StatusOr<uint64_t> Install(uint64_t epoch, const std::string& primary,
                                           const InstallChunk& chunk) = 0;
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
  // A reader (or the peer) heard from within this window is live: the cap
  // never trims past its position.
  absl::Duration live_reader_window = absl::Seconds(30);
  // Changes younger than this are kept whatever readers still need (within
  // max_log_changes), so that a front door's stream can resume from them.
  // Default 15 min.
  absl::Duration change_retention = absl::Minutes(15);
  // Tweets per chunk of a full copy.
  size_t copy_batch = 2000;
  // A secondary serves reads for this long after its primary last said it is
  // in sync; an in-sync primary says so at least four times as often.
  absl::Duration in_sync_validity = absl::Seconds(4);
  // The time the windows above are measured on (its monotonic part); null: SystemClock().
  // Tests drive it with a ManualClock.
  const Clock* clock = nullptr;
};

// Begins the message of a write refused because etcd no longer renews the primary's lease and
// the secondary cannot take the write with it: no retry helps until one of them is back, so
// front doors answer such a write at once (503) instead of retrying it for write_retry_s.
inline constexpr std::string_view kWaitsForEtcdOrSecondary =
    "no write until etcd or the secondary is back: ";

struct LikesChange {
  TweetId id = 0;
  int64_t value = 0;
  bool add = false;
};

// One write: tweets to store, or one delete, or one likes change, or usage counts to add; or,
// alone, the record of an idempotent ingest (storage/write_records.h).
struct WriteOp {
  std::vector<StoredTweet> puts;
  bool retry = false;  // a stored identical tweet is this caller's earlier write: OK
  std::optional<TweetId> delete_id;
  std::optional<LikesChange> likes;
  std::vector<usage::Increment> usage;  // one change adds them all
  // An idempotent write: the key of its record, and the record (its fingerprint and time; alone,
  // the whole record to store). With a delete, likes change or usage, a stored record answers
  // instead of the write; else the record of the answer is written with the change. Alone, the
  // record is stored unless one is stored already that is final, or for another request, or this
  // one is a plan.
  std::string request_key;
  std::optional<WriteRecord> record;

  // Only an idempotent ingest's record: no tweet to store, delete, like or usage.
  bool record_only() const {
    return puts.empty() && !delete_id.has_value() && !likes.has_value() && usage.empty();
  }
};

struct WriteResult {
  std::vector<absl::Status> outcomes;  // one per put
  uint32_t likes = 0;                  // the new value of a likes change
  uint64_t last_sequence = 0;
  std::optional<WriteRecord> record;  // an idempotent write: its record as stored now
  bool replayed = false;              // ... stored by an earlier attempt, and nothing was written
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
  bool installing = false;     // receiving a full copy: not readable yet
  uint64_t copies_sent = 0;    // full copies sent to the peer (primary)
  uint64_t tweets_copied = 0;  // tweets those copies carried
};

// What a primary knows of its role's lease, asked before each write.
enum class LeaseStanding {
  kHeld,  // renewed within its TTL
  // Lapsed while etcd has not answered since (etcd frozen or cut off). Another replica can
  // only have been promoted by taking a higher epoch, and from then on this primary's
  // secondary refuses its epoch; so a write its in-sync secondary accepts is still safe to
  // acknowledge, and the primary writes with it alone (never without it).
  kSilent,
  kLost,  // etcd said it expired, or it was replaced: step down
};

class StorageNode {
 public:
  static absl::StatusOr<std::unique_ptr<StorageNode>> Open(const StorageNodeOptions& options);
  ~StorageNode();

  // Takes the primary role with `epoch` (above every epoch seen; persisted
  // first). `peer` may be null (no second replica) and must outlive the role.
  // `holds_role` tells, before each write, where the role's lease stands
  // (LeaseStanding); `on_peer_stale` must durably record that the peer may not be promoted
  // (called before a write is acknowledged without it) and `on_peer_in_sync`
  // clears that record once the peer has caught up. The peer counts as out of
  // sync until CatchUpPeer() has brought it up to date.
  absl::Status BecomePrimary(uint64_t epoch, StoragePeer* peer,
                             std::function<LeaseStanding()> holds_role,
                             std::function<absl::Status()> on_peer_stale,
                             std::function<absl::Status()> on_peer_in_sync);
  // Gives up the primary role (writes are refused from now on).
  void StepDown();
  // The primary learned that its peer lacks acknowledged writes (it lost its
  // disk): it is out of sync until CatchUpPeer() has brought it up to date.
  void MarkPeerOutOfSync();

  // The primary's write. FailedPrecondition when this replica is not (or no
  // longer) the primary; Unavailable when the write could not be made durable
  // on enough replicas (nothing was acknowledged; the caller retries, with
  // `retry` set).
  absl::StatusOr<WriteResult> Write(WriteOp op);

  // A secondary's side of replication (see StoragePeer::Replicate).
  absl::StatusOr<uint64_t> Replicate(uint64_t epoch, const std::string& primary,
                                     std::span<const ReplicatedChange> changes,
                                     uint64_t synced_through);

  // A secondary's side of a full copy: `chunk.begin` clears the store (the
  // copy is then in progress), tweets are added, and `chunk.finish` completes
  // it. Returns the last sequence: the snapshot's once finished, else 0.
  // FailedPrecondition for a stale epoch; Aborted for a chunk that does not
  // continue the copy in progress.
  absl::StatusOr<uint64_t> Install(uint64_t epoch, const std::string& primary,
                                   const InstallChunk& chunk);

  // Changes after `after` (at most `max`), waiting up to `wait` for one when
  // there are none. `reader` (may be empty) no longer needs changes up to
  // `reader_keeps`. A secondary serves reads (this, MultiGet, SnapshotFor)
  // only while its primary's last word, at most `in_sync_validity` ago, was
  // that it is in sync (so a primary that lost it, or died, soon sends readers
  // elsewhere), and not while a copy is being installed: Unavailable
  // otherwise, and on a secondary behind `after` (ask the primary). Puts
  // carry their tweets unless `bodies` is kOmit.
  absl::StatusOr<std::vector<ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                            absl::Duration wait,
                                                            const std::string& reader,
                                                            uint64_t reader_keeps,
                                                            ChangeBodies bodies);
  // A snapshot of the store for a reader that starts over: the reader then
  // reads the log after the snapshot's sequence, which counts as its position.
  absl::StatusOr<std::unique_ptr<StoreSnapshot>> SnapshotFor(const std::string& reader);

  // Unavailable for every id when reads are not served (see ReadChanges).
  std::vector<absl::StatusOr<StoredTweet>> MultiGet(std::span<const TweetId> ids) const;
  // The usage series this partition keeps (TweetStore::QueryUsage, UsageKeys); Unavailable
  // when reads are not served.
  absl::StatusOr<std::vector<usage::Point>> QueryUsage(std::string_view key_id,
                                                       usage::Resolution resolution, int64_t from_s,
                                                       int64_t to_s, size_t max_points) const;
  absl::StatusOr<std::vector<std::string>> UsageKeys() const;

  // Brings an out-of-sync peer up to date from the change log, or with a full
  // copy when the log no longer reaches back to it; tells an in-sync peer so
  // (about every in_sync_validity / 4). The primary's background work: call it
  // periodically. OK when there is nothing to do.
  absl::Status CatchUpPeer();
  // Trims the change log below what every reader still needs and older than
  // change_retention (see above). Call it periodically: it also notes the time
  // the retention is measured from.
  absl::Status TrimLog();

  // Status() reads RocksDB properties; these two are cheap, for periodic checks.
  bool peer_in_sync() const;
  uint64_t copies_sent() const { return copies_sent_.load(std::memory_order_relaxed); }
  StorageNodeStatus Status() const;
  uint64_t epoch() const;
  bool is_primary() const;
  uint64_t LastSequence() const { return store_->LastSequence(); }
  const StorageNodeOptions& options() const { return options_; }

 private:
  StorageNode(const StorageNodeOptions& options, std::unique_ptr<TweetStore> store, uint64_t epoch);
  absl::Status PersistEpoch(uint64_t epoch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The changes `op` makes, checked against the store as it is now, appended to `changes`; its
  // answers in `result`. NotFound for a delete or likes change of a tweet not stored.
  absl::Status ChangesOfLocked(WriteOp& op, WriteResult& result,
                               std::vector<ReplicatedChange>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // An idempotent write: true when a stored record answers it (`result` says what), and
  // nothing is to be written.
  absl::StatusOr<bool> ReplayLocked(const WriteOp& op, WriteResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // An idempotent write: appends its record to `changes`, after the write's own changes, with
  // the write's `answer` (unless it is an ingest's record alone).
  void AppendRecordLocked(const WriteOp& op, const absl::Status& answer, WriteResult& result,
                          std::vector<ReplicatedChange>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Sends `changes` to the peer, first whatever it is missing before them.
  absl::Status SendToPeer(std::span<const ReplicatedChange> changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void StepDownLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Refuses replication from a stale or conflicting primary; steps down when
  // a newer one exists; records the epoch.
  absl::Status AcceptPrimaryLocked(uint64_t epoch, const std::string& primary)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The in-sync primary's periodic word to its peer, which also finds a peer
  // that lost writes (it is then out of sync, and marked stale).
  absl::Status KeepPeerInSyncLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Drops a copy in progress: the store is cleared (sequence 0) and readable.
  absl::Status AbandonInstallLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Sends the peer a full copy of the store (the primary's catch-up when the
  // log no longer reaches back to the peer's position).
  absl::Status CopyToPeer(StoragePeer* peer, uint64_t epoch);
  void RecordReader(const std::string& reader, uint64_t after, std::optional<uint64_t> keeps);
  void SetApplied(uint64_t sequence);
  bool ServesReads() const;
  // Unavailable, saying why, when reads are not served.
  absl::Status CheckServesReads() const;
  void SetInSyncUntil(absl::Time until);

  // Now on the options' clock (monotonic; only compared with other readings of it).
  absl::Time Now() const { return absl::FromUnixMicros(clock_.NowMonotonicMicros()); }

  const StorageNodeOptions options_;
  const Clock& clock_;
  std::unique_ptr<TweetStore> store_;

  mutable absl::Mutex write_mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(write_mu_);
  ReplicaRole role_ ABSL_GUARDED_BY(write_mu_) = ReplicaRole::kSecondary;
  StoragePeer* peer_ ABSL_GUARDED_BY(write_mu_) = nullptr;
  bool peer_in_sync_ ABSL_GUARDED_BY(write_mu_) = false;
  uint64_t peer_last_ ABSL_GUARDED_BY(write_mu_) = 0;
  absl::Time peer_seen_ ABSL_GUARDED_BY(write_mu_) = absl::InfinitePast();
  std::optional<uint64_t> copy_floor_ ABSL_GUARDED_BY(write_mu_);  // a copy is being sent
  // Receiving a copy: the snapshot sequence of the copy in progress.
  std::optional<uint64_t> installing_ ABSL_GUARDED_BY(write_mu_);
  // Read without write_mu_ (see ServesReads): whether role_ is primary, and for
  // a secondary until when it serves reads (Unix ns; its primary's last word
  // was that it holds every write).
  std::atomic<bool> primary_{false};
  std::atomic<int64_t> in_sync_until_ns_{INT64_MIN};
  std::atomic<bool> readable_{true};  // false while a copy is being installed
  std::function<LeaseStanding()> holds_role_ ABSL_GUARDED_BY(write_mu_);
  std::function<absl::Status()> on_peer_stale_ ABSL_GUARDED_BY(write_mu_);
  std::function<absl::Status()> on_peer_in_sync_ ABSL_GUARDED_BY(write_mu_);

  // Signalled (with the sequence) whenever changes are applied; long polls wait
  // on it.
  mutable absl::Mutex applied_mu_;
  uint64_t applied_ ABSL_GUARDED_BY(applied_mu_) = 0;

  struct Reader {
    uint64_t keeps = 0;  // what it no longer needs (it has reported this)
    bool reported_keeps = false;
    uint64_t after = 0;  // where it last read
    absl::Time seen = absl::InfinitePast();
  };
  mutable absl::Mutex readers_mu_;
  absl::flat_hash_map<std::string, Reader> readers_ ABSL_GUARDED_BY(readers_mu_);
  // (time, last sequence) as TrimLog saw them, for change_retention; and the
  // last sequence noted at least change_retention ago.
  std::deque<std::pair<absl::Time, uint64_t>> log_times_ ABSL_GUARDED_BY(readers_mu_);
  uint64_t retained_after_ ABSL_GUARDED_BY(readers_mu_) = 0;
  // This primary has recorded its peer as stale (in etcd), and has not cleared the mark since.
  bool peer_marked_stale_ ABSL_GUARDED_BY(write_mu_) = false;
  // When TrimLog last dropped expired records of idempotent writes.
  absl::Time records_swept_ ABSL_GUARDED_BY(readers_mu_) = absl::InfinitePast();

  std::atomic<uint64_t> single_replica_writes_{0}, replicated_writes_{0};
  std::atomic<uint64_t> copies_sent_{0}, tweets_copied_{0};
};

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_STORAGE_NODE_H_
