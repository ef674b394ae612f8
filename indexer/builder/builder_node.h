// BuilderNode: the Index-Builder's reverse map, index partition → tweet ids
// (docs/cluster.md, "Index-Builder and rebuild").
//
// It tails the change log of every storage partition, as index servers do,
// and keeps one RocksDB key per live tweet: partition (2 bytes) | id (8
// bytes), big-endian, so one index partition's ids are one ascending range
// scan. A put adds the key, a delete removes it; likes changes do not concern
// it. Each batch of changes is written together with the storage sequence it
// reaches (key 'c' | storage partition), so the map and its cursors never
// disagree and replays are harmless. The WAL is synced every `sync_every`;
// what is synced is what the node tells storage it no longer needs.
//
// States: kCatchingUp until every log has been read to its end once, then
// kServing. A log trimmed past a cursor (a builder that was away too long, or
// one whose disk was replaced) puts it in kResyncing for that storage
// partition: it drops the partition's ids, loads every id of a storage
// snapshot (SnapshotIds), sets the cursor to the snapshot's sequence, and
// reads the log from there. A marker key ('r' | storage partition) makes a
// resync cut off by a crash start again. A resyncing builder cannot lead.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_INDEXER_BUILDER_BUILDER_NODE_H_
#define TWEETSEARCH_INDEXER_BUILDER_BUILDER_NODE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/ids.h"
#include "storage/change_tail.h"

namespace rocksdb {
class DB;
}

namespace tweetsearch::indexer {

struct BuilderNodeOptions {
  std::string node;
  uint32_t index_partitions = 1;
  std::string data_dir;  // the map lives in <data_dir>/builder
  absl::Duration poll_wait = absl::Seconds(1);
  absl::Duration sync_every = absl::Seconds(1);
  // The time sync_every is measured on (its monotonic part); null: SystemClock(). Tests drive
  // it with a ManualClock.
  const Clock* clock = nullptr;
};

enum class BuilderState { kCatchingUp, kServing, kResyncing };
std::string_view BuilderStateName(BuilderState state);

struct BuilderNodeStatus {
  BuilderState state = BuilderState::kCatchingUp;
  std::vector<uint64_t> applied;  // per storage partition
  std::vector<uint64_t> synced;   // per storage partition: durable, what storage may drop
  uint64_t ids_estimate = 0;
  uint64_t resyncs = 0;  // storage partitions resynced from a snapshot since start
};

struct IdPage {
  std::vector<TweetId> ids;  // ascending
  bool done = false;         // nothing above the last one
};

class BuilderNode : private storage::ChangeConsumer {
 public:
  // Opens (or creates) the map; `sources` has one entry per storage partition.
  static absl::StatusOr<std::unique_ptr<BuilderNode>> Open(
      const BuilderNodeOptions& options,
      std::vector<std::unique_ptr<storage::ChangeSource>> sources);
  ~BuilderNode() override;

  void Start();
  void Stop();

  // Ids of index partition `partition` above `after`, at most `max`,
  // ascending.
  absl::StatusOr<IdPage> PartitionIds(uint32_t partition, TweetId after, size_t max) const;
  // How many ids index partition `partition` has (a range scan).
  absl::StatusOr<uint64_t> PartitionCount(uint32_t partition) const;

  BuilderNodeStatus Status() const;
  const BuilderNodeOptions& options() const { return options_; }

 private:
  BuilderNode(const BuilderNodeOptions& options,
              std::vector<std::unique_ptr<storage::ChangeSource>> sources,
              std::unique_ptr<rocksdb::DB> db, std::vector<uint64_t> cursors,
              std::vector<bool> resyncing);

  std::optional<Position> Next(uint32_t storage) override;
  void Apply(uint32_t storage, const std::vector<storage::ReplicatedChange>& changes) override;
  void AtEnd(uint32_t storage) override;
  void Trimmed(uint32_t storage) override;
  absl::Status CheckPartition(uint32_t partition) const;
  // Replaces storage partition `storage`'s ids with those of a snapshot (see
  // above).
  absl::Status Resync(uint32_t storage);
  // Syncs the WAL when `sync_every` has passed; what it covered becomes what
  // storage may trim.
  void MaybeSync();

  // Now on the options' clock (monotonic; only compared with other readings of it).
  absl::Time Now() const { return absl::FromUnixMicros(clock_.NowMonotonicMicros()); }

  const BuilderNodeOptions options_;
  const Clock& clock_;
  std::vector<std::unique_ptr<storage::ChangeSource>> sources_;
  std::unique_ptr<rocksdb::DB> db_;

  mutable absl::Mutex mu_;
  std::vector<uint64_t> applied_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> synced_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> caught_up_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> resync_needed_ ABSL_GUARDED_BY(mu_);  // per storage partition
  uint64_t resyncs_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_sync_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex sync_mu_;  // one WAL sync at a time
  std::vector<std::thread> tailers_;
};

}  // namespace tweetsearch::indexer

#endif  // TWEETSEARCH_INDEXER_BUILDER_BUILDER_NODE_H_
