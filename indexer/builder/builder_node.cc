#include "indexer/builder/builder_node.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <filesystem>

#include "cluster/topology.h"
#include "common/strings.h"
#include "storage/rocks_util.h"

namespace tweetsearch::indexer {
namespace {

constexpr char kIdKey = 'i';      // 'i' | index partition (2 bytes) | id (8 bytes)
constexpr char kCursorKey = 'c';  // 'c' | storage partition (4 bytes) → sequence (8 bytes)
constexpr char kResyncKey = 'r';  // 'r' | storage partition (4 bytes): a resync in progress
constexpr size_t kResyncBatch = 16384;

std::string IdKey(uint32_t partition, TweetId id) {
  std::string key(1, kIdKey);
  storage::AppendBigEndian(&key, partition, 2);
  storage::AppendBigEndian(&key, id);
  return key;
}

std::string StorageKey(char kind, uint32_t storage) {
  std::string key(1, kind);
  storage::AppendBigEndian(&key, storage, 4);
  return key;
}
std::string CursorKey(uint32_t storage) { return StorageKey(kCursorKey, storage); }
std::string ResyncKey(uint32_t storage) { return StorageKey(kResyncKey, storage); }

}  // namespace

std::string_view BuilderStateName(BuilderState state) {
  switch (state) {
    case BuilderState::kCatchingUp:
      return "catching_up";
    case BuilderState::kServing:
      return "serving";
    case BuilderState::kResyncing:
      return "resyncing";
  }
  return "?";
}

BuilderNode::BuilderNode(const BuilderNodeOptions& options,
                         std::vector<std::unique_ptr<storage::ChangeSource>> sources,
                         std::unique_ptr<rocksdb::DB> db, std::vector<uint64_t> cursors,
                         std::vector<bool> resyncing)
    : options_(options),
      clock_(options.clock != nullptr ? *options.clock : SystemClock()),
      sources_(std::move(sources)),
      db_(std::move(db)),
      applied_(cursors),
      synced_(std::move(cursors)),
      caught_up_(sources_.size(), false),
      resync_needed_(std::move(resyncing)),
      last_sync_(Now()) {}

absl::StatusOr<std::unique_ptr<BuilderNode>> BuilderNode::Open(
    const BuilderNodeOptions& options,
    std::vector<std::unique_ptr<storage::ChangeSource>> sources) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir is empty");
  if (sources.empty()) return absl::InvalidArgumentError("no storage partitions to read");
  if (options.index_partitions == 0 || options.index_partitions > 65535) {
    return absl::InvalidArgumentError("index_partitions must be 1..65535");
  }
  const std::string dir = options.data_dir + "/builder";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(StrCat("cannot create ", dir, ": ", ec.message()));
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.compression = rocksdb::kLZ4Compression;
  rocksdb::DB* raw = nullptr;
  if (absl::Status s = storage::FromRocks(rocksdb::DB::Open(db_options, dir, &raw), dir); !s.ok()) {
    return s;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  std::vector<uint64_t> cursors(sources.size(), 0);
  std::vector<bool> resyncing(sources.size(), false);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (const char kind : {kCursorKey, kResyncKey}) {
    for (it->Seek(std::string(1, kind)); it->Valid() && it->key()[0] == kind; it->Next()) {
      const uint64_t storage = storage::DecodeKey(it->key(), 1, 4);
      if (storage >= cursors.size()) {
        return absl::FailedPreconditionError(StrCat(dir, " has storage partition ", storage,
                                                    ", the topology only ", cursors.size()));
      }
      if (kind == kCursorKey) {
        cursors[storage] = storage::DecodeKey(it->value());
      } else {
        resyncing[storage] = true;  // cut off by a crash: start again
      }
    }
  }
  if (absl::Status s = storage::FromRocks(it->status(), dir); !s.ok()) return s;
  it.reset();
  return std::unique_ptr<BuilderNode>(new BuilderNode(options, std::move(sources), std::move(db),
                                                      std::move(cursors), std::move(resyncing)));
}

BuilderNode::~BuilderNode() {
  Stop();
  (void)db_->SyncWAL();
}

void BuilderNode::Start() {
  if (!tailers_.empty()) return;
  storage::TailOptions tail;
  tail.wait = options_.poll_wait;
  tailers_ = storage::StartTailing(sources_, *this, tail);
}

void BuilderNode::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : tailers_) t.join();
  tailers_.clear();
}

std::optional<storage::ChangeConsumer::Position> BuilderNode::Next(uint32_t storage) {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return std::nullopt;
      if (!resync_needed_[storage]) return Position{applied_[storage], synced_[storage]};
    }
    if (Resync(storage).ok()) continue;
    // Storage unreachable: try again in a while (or stop).
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Seconds(1));
  }
}

absl::Status BuilderNode::Resync(uint32_t storage) {
  const uint32_t storage_partitions = static_cast<uint32_t>(sources_.size());
  rocksdb::WriteOptions synced;
  synced.sync = true;
  // The marker first, then drop every id of this storage partition.
  if (absl::Status s = storage::FromRocks(db_->Put(synced, ResyncKey(storage), ""), "resync");
      !s.ok()) {
    return s;
  }
  {
    rocksdb::WriteBatch batch;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek(std::string(1, kIdKey)); it->Valid() && it->key()[0] == kIdKey; it->Next()) {
      const TweetId id = storage::DecodeKey(it->key(), 3, 8);
      if (cluster::StoragePartitionOf(id, storage_partitions) != storage) continue;
      (void)batch.Delete(it->key());
      if (batch.Count() >= static_cast<int>(kResyncBatch)) {
        if (absl::Status s =
                storage::FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "resync");
            !s.ok()) {
          return s;
        }
        batch.Clear();
      }
    }
    if (absl::Status s = storage::FromRocks(it->status(), "resync"); !s.ok()) return s;
    if (absl::Status s = storage::FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "resync");
        !s.ok()) {
      return s;
    }
  }
  // Every id of a snapshot, then the cursor at the snapshot and the marker
  // gone, synced together.
  absl::StatusOr<uint64_t> sequence =
      sources_[storage]->SnapshotIds([&](std::span<const TweetId> ids) -> absl::Status {
        rocksdb::WriteBatch batch;
        for (TweetId id : ids) {
          (void)batch.Put(IdKey(cluster::IndexPartitionOf(id, options_.index_partitions), id),
                          rocksdb::Slice());
        }
        return storage::FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "resync");
      });
  if (!sequence.ok()) return sequence.status();
  rocksdb::WriteBatch done;
  (void)done.Put(CursorKey(storage), storage::EncodeKey(*sequence));
  (void)done.Delete(ResyncKey(storage));
  if (absl::Status s = storage::FromRocks(db_->Write(synced, &done), "resync"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  applied_[storage] = synced_[storage] = *sequence;
  resync_needed_[storage] = false;
  caught_up_[storage] = false;
  ++resyncs_;
  return absl::OkStatus();
}

void BuilderNode::Apply(uint32_t storage, const std::vector<storage::ReplicatedChange>& changes) {
  rocksdb::WriteBatch batch;
  for (const storage::ReplicatedChange& rc : changes) {
    const storage::Change& c = rc.change;
    const uint32_t partition = cluster::IndexPartitionOf(c.id, options_.index_partitions);
    if (c.kind == storage::ChangeKind::kPut) {
      (void)batch.Put(IdKey(partition, c.id), rocksdb::Slice());
    } else if (c.kind == storage::ChangeKind::kDelete) {
      (void)batch.Delete(IdKey(partition, c.id));
    }
  }
  const uint64_t last = changes.back().change.sequence;
  (void)batch.Put(CursorKey(storage), storage::EncodeKey(last));
  if (!db_->Write(rocksdb::WriteOptions(), &batch).ok()) return;  // read again next round
  {
    absl::MutexLock lock(&mu_);
    applied_[storage] = last;
  }
  MaybeSync();
}

void BuilderNode::AtEnd(uint32_t storage) {
  {
    absl::MutexLock lock(&mu_);
    caught_up_[storage] = true;
  }
  MaybeSync();
}

void BuilderNode::Trimmed(uint32_t storage) {
  absl::MutexLock lock(&mu_);
  resync_needed_[storage] = true;
}

void BuilderNode::MaybeSync() {
  absl::MutexLock sync(&sync_mu_);
  std::vector<uint64_t> covered;
  {
    absl::MutexLock lock(&mu_);
    if (Now() - last_sync_ < options_.sync_every || synced_ == applied_) return;
    covered = applied_;  // written before this point, so the sync covers it
  }
  if (!db_->SyncWAL().ok()) return;
  absl::MutexLock lock(&mu_);
  synced_ = std::move(covered);
  last_sync_ = Now();
}

absl::Status BuilderNode::CheckPartition(uint32_t partition) const {
  if (partition < options_.index_partitions) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat("index partition ", partition, " does not exist (",
                                           options_.index_partitions, " partitions)"));
}

absl::StatusOr<uint64_t> BuilderNode::PartitionCount(uint32_t partition) const {
  if (absl::Status s = CheckPartition(partition); !s.ok()) return s;
  const std::string prefix = IdKey(partition, 0).substr(0, 3);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  uint64_t count = 0;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) ++count;
  if (absl::Status s = storage::FromRocks(it->status(), "builder map"); !s.ok()) return s;
  return count;
}

absl::StatusOr<IdPage> BuilderNode::PartitionIds(uint32_t partition, TweetId after,
                                                 size_t max) const {
  if (absl::Status s = CheckPartition(partition); !s.ok()) return s;
  IdPage page;
  if (after == kMaxTweetId) {
    page.done = true;
    return page;
  }
  const std::string prefix = IdKey(partition, 0).substr(0, 3);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  it->Seek(IdKey(partition, after + 1));
  for (; it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (page.ids.size() == max) return page;
    page.ids.push_back(storage::DecodeKey(it->key(), 3, 8));
  }
  if (absl::Status s = storage::FromRocks(it->status(), "builder map"); !s.ok()) return s;
  page.done = true;
  return page;
}

BuilderNodeStatus BuilderNode::Status() const {
  BuilderNodeStatus out;
  (void)db_->GetIntProperty(rocksdb::DB::Properties::kEstimateNumKeys, &out.ids_estimate);
  absl::MutexLock lock(&mu_);
  out.applied = applied_;
  out.synced = synced_;
  out.resyncs = resyncs_;
  if (std::find(resync_needed_.begin(), resync_needed_.end(), true) != resync_needed_.end()) {
    out.state = BuilderState::kResyncing;
  } else if (std::all_of(caught_up_.begin(), caught_up_.end(), [](bool b) { return b; })) {
    out.state = BuilderState::kServing;
  }
  return out;
}

}  // namespace tweetsearch::indexer
