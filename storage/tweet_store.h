// TweetStore: the storage role's durable home of tweets, on RocksDB.
//
// Two column families:
//   "default"  key = big-endian TweetId (8 bytes, so key order is id order), value = a
//              serialized tweetsearch.v1.Tweet.
//   "changes"  key = big-endian change sequence number, value = a ChangeRecord: every put,
//              delete (with the tweet deleted) and likes change in the order it was applied. An
//              index that saved its segments at sequence S catches up by replaying the changes
//              after S; changes at or below the oldest index checkpoint are trimmed.
//   "requests" the records of idempotent writes (storage/write_records.h): key and value
//              chosen by the writer. A record is written in the same batch as the write's
//              changes and logged as a change of its own (kRequest), so that it replicates
//              with them; readers of the log that only index or route tweets skip it.
//   "usage"    a cluster's usage series (usage/usage_table.h): each write of usage counts is
//              merged into its buckets and logged as one change (kUsage) holding the
//              increments, so the secondary adds the same counts; readers of tweets skip it.
// A Write() lands in both families in one RocksDB write batch, so the log never disagrees with
// the tweets. With `sync_writes`, the WAL is fsynced before Write() returns: an acknowledged
// write survives kill -9 and power loss. RocksDB groups concurrent synced writers into one
// fsync (its write group), and callers batch too, so bulk ingest pays one fsync per batch.
//
// The tuning (block cache, bloom filters, compression) and its reasons are in docs/storage.md.
//
// Thread-safety: every method may be called from any thread. Writes are applied in one total
// order, which is the order of their change sequence numbers.
#ifndef TWEETSEARCH_STORAGE_TWEET_STORE_H_
#define TWEETSEARCH_STORAGE_TWEET_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/ids.h"
#include "usage/series.h"

namespace tweetsearch::storage {

// A tweet as stored; our own struct (the protobuf encoding stays inside the store).
struct StoredTweet {
  TweetId id = 0;
  UserId user_id = 0;
  std::string user_name;
  std::string text;           // UTF-8
  int64_t created_at_ms = 0;  // Unix milliseconds
  std::string lang;           // BCP 47 code, may be empty
  uint32_t likes = 0;

  bool operator==(const StoredTweet&) const = default;
};

enum class ChangeKind { kPut, kDelete, kLikes, kRequest, kUsage };

// Whether a change of `kind` is about a tweet (readers that index or route tweets skip the
// others: records of idempotent writes, usage counts).
inline bool ConcernsATweet(ChangeKind kind) {
  return kind != ChangeKind::kRequest && kind != ChangeKind::kUsage;
}

struct Change {
  uint64_t sequence = 0;
  ChangeKind kind = ChangeKind::kPut;
  TweetId id = 0;
  uint32_t likes = 0;  // for kLikes: the new absolute value
};

// An entry of the requests column family: the record of an idempotent write.
struct StoredRequest {
  std::string key;
  std::string value;

  bool operator==(const StoredRequest&) const = default;
};

// An entry of the usage column family, as a full copy of a replica carries it.
struct StoredUsage {
  std::string key;
  std::string value;
};

// One atomic, durable write: tweets to store (replacing any with the same id), tweets to
// delete, likes to set, usage counts to add (one change for all), and records of idempotent
// writes to store (replacing any with the same key). Applied and logged in that order.
struct Mutation {
  std::vector<StoredTweet> puts;
  std::vector<TweetId> deletes;
  std::vector<std::pair<TweetId, uint32_t>> likes;
  std::vector<usage::Increment> usage;
  std::vector<StoredRequest> requests;

  bool empty() const {
    return puts.empty() && deletes.empty() && likes.empty() && usage.empty() && requests.empty();
  }
};

// Whether a read of the change log carries the tweets of puts and deletes. Index servers
// need them; the Index-Builder, which only maps ids to index partitions, does
// not, and omitting them spares the storage replica a lookup per change.
enum class ChangeBodies { kInclude, kOmit };

// A change as a replica, an index server or a stream needs it: the change, and for a put the
// tweet as stored now (absent when it was deleted since), for a delete the tweet as it was
// deleted (absent in changes logged before deletes recorded it); absent in both when read with
// ChangeBodies::kOmit. A kRequest change always carries its record, a kUsage change its
// increments.
struct ReplicatedChange {
  Change change;
  std::optional<StoredTweet> tweet;
  std::optional<StoredRequest> request;
  std::vector<usage::Increment> usage;
};

struct StoreOptions {
  // fsync the WAL before Write() returns. Default true; false only for benchmarks and tests
  // that measure what durability costs.
  bool sync_writes = true;
  // LRU cache of uncompressed data blocks, shared by both column families. Default 256 MiB.
  size_t block_cache_bytes = size_t{256} << 20;
  // Bits per key of the bloom filter on tweet keys (duplicate checks on ingest are mostly
  // misses, which the filter answers without reading a block). Default 10 (~1% false
  // positives).
  double bloom_bits_per_key = 10;
  // Size of one memtable, bytes. Default 64 MiB.
  size_t write_buffer_bytes = size_t{64} << 20;
  // Writes are refused (Unavailable) while the store's disk has less free space than this,
  // so that RocksDB never runs out of it mid-write; 0 turns the check off. Default 64 MiB.
  uint64_t min_free_disk_bytes = uint64_t{64} << 20;
  // The time that decides which usage buckets have expired; null: SystemClock(). Must outlive
  // the store.
  const Clock* clock = nullptr;
};

// A consistent read-only view of a whole store at one change sequence (for a full copy of a
// replica and for readers that start over). Holds a RocksDB snapshot until destroyed.
class StoreSnapshot {
 public:
  virtual ~StoreSnapshot() = default;
  // The sequence the snapshot reflects, and that change itself (with its tweet for a put), so
  // that a copy's change log can start with it. Sequence 0: an empty store.
  virtual const ReplicatedChange& last() const = 0;
  // The next tweets in id order, at most `max`; empty at the end.
  virtual absl::StatusOr<std::vector<StoredTweet>> Next(size_t max) = 0;
  // The next records of idempotent writes in key order, at most `max`; empty at the end.
  virtual absl::StatusOr<std::vector<StoredRequest>> NextRequests(size_t max) = 0;
  // The next entries of the usage column family in key order, at most `max`; empty at the end.
  virtual absl::StatusOr<std::vector<StoredUsage>> NextUsage(size_t max) = 0;
};

class TweetStore {
 public:
  // Opens (creating if missing) the store in `dir`. Returns the RocksDB error (IOError as
  // Unavailable, Corruption as DataLoss) if it cannot.
  static absl::StatusOr<std::unique_ptr<TweetStore>> Open(const std::string& dir,
                                                          const StoreOptions& options = {});

  virtual ~TweetStore() = default;

  // Applies `mutation` atomically (durably with sync_writes) and appends one change per
  // element. Returns the sequence number of the last change written (unchanged if empty).
  virtual absl::StatusOr<uint64_t> Write(const Mutation& mutation) = 0;

  // NotFound if absent.
  virtual absl::StatusOr<StoredTweet> Get(TweetId id) const = 0;
  // One answer per id, in order: the tweet, or NotFound.
  virtual std::vector<absl::StatusOr<StoredTweet>> MultiGet(std::span<const TweetId> ids) const = 0;
  // Which of `ids` are stored (one bool each). Cheaper than MultiGet: values are not decoded.
  virtual absl::StatusOr<std::vector<bool>> Contains(std::span<const TweetId> ids) const = 0;
  // The record stored under `key` in the requests column family; nullopt if none.
  virtual absl::StatusOr<std::optional<std::string>> GetRequest(std::string_view key) const = 0;
  // Deletes every record for which `expired(value)` says true (not logged: each replica
  // forgets its own records by the same rule). Returns how many it deleted.
  virtual absl::StatusOr<uint64_t> DropRequests(
      const std::function<bool(std::string_view value)>& expired) = 0;
  // The usage series kept here (usage/usage_store.h has what each does).
  virtual absl::StatusOr<std::vector<usage::Point>> QueryUsage(std::string_view key_id,
                                                               usage::Resolution resolution,
                                                               int64_t from_s, int64_t to_s,
                                                               size_t max_points) const = 0;
  virtual absl::StatusOr<std::vector<std::string>> UsageKeys() const = 0;
  // Drops expired usage buckets now (a compaction of the usage column family; not logged:
  // each replica drops its own by the same rule).
  virtual absl::Status ExpireUsage() = 0;

  // Calls `visit` for each stored tweet with first <= id <= last, in id order, until it returns
  // false.
  virtual absl::Status Scan(TweetId first, TweetId last,
                            const std::function<bool(const StoredTweet&)>& visit) const = 0;

  // Applies changes numbered by another replica (storage replication): `changes` must be
  // consecutive and start at LastSequence() + 1 (FailedPrecondition otherwise, naming the
  // sequence expected). A put stores its tweet (a put without one only enters the log); a
  // likes change sets the stored tweet's likes; a delete deletes; a request change stores its
  // record; a usage change adds its counts. Atomic and, with sync_writes, durable when this
  // returns.
  virtual absl::Status Apply(std::span<const ReplicatedChange> changes) = 0;
  // Up to `max` changes after `after`, in order, with the tweets of puts unless `bodies` is
  // kOmit. FailedPrecondition if changes after `after` were trimmed already (the reader must
  // start over from a full copy).
  virtual absl::StatusOr<std::vector<ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                                    ChangeBodies bodies) const = 0;
  // The sequence of the oldest change still in the log (LastSequence() + 1 when it is empty).
  virtual uint64_t FirstSequence() const = 0;

  // Calls `visit` for every change with a sequence number above `after`, in order, until it
  // returns false.
  virtual absl::Status ScanChanges(uint64_t after,
                                   const std::function<bool(const Change&)>& visit) const = 0;
  // Forgets the changes with sequence numbers up to and including `through`.
  virtual absl::Status TrimChanges(uint64_t through) = 0;
  // The sequence number of the last change written (0 for a new store).
  virtual uint64_t LastSequence() const = 0;

  // A consistent view of every tweet and the sequence it reflects.
  virtual absl::StatusOr<std::unique_ptr<StoreSnapshot>> Snapshot() const = 0;

  // Installing a full copy of another replica (see StoreSnapshot), in three steps:
  // ClearForInstall() deletes every tweet, change, record and usage bucket (LastSequence() is
  // then 0); InstallTweets(), InstallRequests() and InstallUsage() add copied entries (not
  // synced); FinishInstall() logs the copy's last change (whose effect the copy holds), syncs,
  // and makes its sequence LastSequence(). Until FinishInstall() the store
  // holds tweets its sequence does not account for: the caller must not serve from it, and
  // must clear it again after a crash.
  virtual absl::Status ClearForInstall() = 0;
  virtual absl::Status InstallTweets(std::span<const StoredTweet> tweets) = 0;
  virtual absl::Status InstallRequests(std::span<const StoredRequest> requests) = 0;
  virtual absl::Status InstallUsage(std::span<const StoredUsage> buckets) = 0;
  virtual absl::Status FinishInstall(const ReplicatedChange& last) = 0;

  // RocksDB's estimate of the number of stored tweets.
  virtual uint64_t ApproximateCount() const = 0;
  // Bytes of SST and WAL files on disk.
  virtual uint64_t DiskBytes() const = 0;
};

// A likes change: set to `value` (0 to 2^32-1), or add `value` (-(2^32-1) to 2^32-1) with the
// sum clamped to [0, 2^32-1]. CheckLikesChange says InvalidArgument for a value out of its
// range; ApplyLikes computes the new count of a checked change (no arithmetic can overflow).
absl::Status CheckLikesChange(int64_t value, bool add);
uint32_t ApplyLikes(uint32_t current, int64_t value, bool add);

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_TWEET_STORE_H_
