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

std::string IdKey(uint32_t partition, TweetId id) {
  std::string key(1, kIdKey);
  storage::AppendBigEndian(&key, partition, 2);
  storage::AppendBigEndian(&key, id);
  return key;
}

std::string CursorKey(uint32_t storage) {
  std::string key(1, kCursorKey);
  storage::AppendBigEndian(&key, storage, 4);
  return key;
}

}  // namespace

std::string_view BuilderStateName(BuilderState state) {
  switch (state) {
    case BuilderState::kCatchingUp:
      return "catching_up";
    case BuilderState::kServing:
      return "serving";
    case BuilderState::kNeedsResync:
      return "needs_resync";
  }
  return "?";
}

BuilderNode::BuilderNode(const BuilderNodeOptions& options,
                         std::vector<std::unique_ptr<storage::ChangeSource>> sources,
                         std::unique_ptr<rocksdb::DB> db, std::vector<uint64_t> cursors)
    : options_(options),
      sources_(std::move(sources)),
      db_(std::move(db)),
      applied_(cursors),
      synced_(std::move(cursors)),
      caught_up_(sources_.size(), false),
      trimmed_(sources_.size(), false),
      last_sync_(absl::Now()) {}

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
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(std::string(1, kCursorKey)); it->Valid() && it->key()[0] == kCursorKey;
       it->Next()) {
    const uint64_t storage = storage::DecodeKey(it->key(), 1, 4);
    if (storage >= cursors.size()) {
      return absl::FailedPreconditionError(
          StrCat(dir, " has storage partition ", storage, ", the topology only ", cursors.size()));
    }
    cursors[storage] = storage::DecodeKey(it->value());
  }
  if (absl::Status s = storage::FromRocks(it->status(), dir); !s.ok()) return s;
  it.reset();
  return std::unique_ptr<BuilderNode>(
      new BuilderNode(options, std::move(sources), std::move(db), std::move(cursors)));
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
  absl::MutexLock lock(&mu_);
  // A trimmed log is not read again: the map stays as it is until resynced.
  auto may_read = [this, storage]()
                      ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !trimmed_[storage]; };
  mu_.Await(absl::Condition(&may_read));
  if (stopping_) return std::nullopt;
  return Position{applied_[storage], synced_[storage]};
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
  trimmed_[storage] = true;
}

void BuilderNode::MaybeSync() {
  absl::MutexLock sync(&sync_mu_);
  std::vector<uint64_t> covered;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Now() - last_sync_ < options_.sync_every || synced_ == applied_) return;
    covered = applied_;  // written before this point, so the sync covers it
  }
  if (!db_->SyncWAL().ok()) return;
  absl::MutexLock lock(&mu_);
  synced_ = std::move(covered);
  last_sync_ = absl::Now();
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
  if (std::find(trimmed_.begin(), trimmed_.end(), true) != trimmed_.end()) {
    out.state = BuilderState::kNeedsResync;
  } else if (std::all_of(caught_up_.begin(), caught_up_.end(), [](bool b) { return b; })) {
    out.state = BuilderState::kServing;
  }
  return out;
}

}  // namespace tweetsearch::indexer
