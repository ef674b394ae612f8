#include "storage/storage_node.h"

#include <algorithm>
#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace tweetsearch::storage {
namespace {

constexpr size_t kCatchUpBatch = 4096;

std::string EpochFile(const StorageNodeOptions& o) { return o.data_dir + "/EPOCH"; }
std::string InstallingFile(const StorageNodeOptions& o) { return o.data_dir + "/INSTALLING"; }

}  // namespace

StorageNode::StorageNode(const StorageNodeOptions& options, std::unique_ptr<TweetStore> store,
                         uint64_t epoch)
    : options_(options),
      clock_(options.clock != nullptr ? *options.clock : SystemClock()),
      store_(std::move(store)),
      epoch_(epoch) {
  applied_ = store_->LastSequence();
}

StorageNode::~StorageNode() = default;

absl::StatusOr<std::unique_ptr<StorageNode>> StorageNode::Open(const StorageNodeOptions& options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir is empty");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir + "/storage", ec);
  if (ec)
    return absl::UnavailableError(StrCat("cannot create ", options.data_dir, ": ", ec.message()));
  uint64_t epoch = 0;
  if (std::filesystem::exists(EpochFile(options))) {
    absl::StatusOr<std::string> text = ReadFile(EpochFile(options));
    if (!text.ok()) return text.status();
    if (!absl::SimpleAtoi(AsAbsl(*text), &epoch)) {
      return absl::DataLossError(StrCat(EpochFile(options), " is not a number"));
    }
  }
  StoreOptions store_options = options.store;
  if (store_options.clock == nullptr) store_options.clock = options.clock;  // usage expiry
  absl::StatusOr<std::unique_ptr<TweetStore>> store =
      TweetStore::Open(options.data_dir + "/storage", store_options);
  if (!store.ok()) return store.status();
  if (std::filesystem::exists(InstallingFile(options))) {
    // A copy was cut off: what it left is not a state of the partition.
    if (absl::Status s = (*store)->ClearForInstall(); !s.ok()) return s;
    std::filesystem::remove(InstallingFile(options), ec);
    if (ec) return absl::UnavailableError(StrCat("cannot remove the copy marker: ", ec.message()));
  }
  return std::unique_ptr<StorageNode>(new StorageNode(options, *std::move(store), epoch));
}

absl::Status StorageNode::PersistEpoch(uint64_t epoch) {
  if (epoch <= epoch_) return absl::OkStatus();
  if (absl::Status s = WriteFileAtomically(EpochFile(options_), StrCat(epoch)); !s.ok()) return s;
  epoch_ = epoch;
  return absl::OkStatus();
}

absl::Status StorageNode::BecomePrimary(uint64_t epoch, StoragePeer* peer,
                                        std::function<LeaseStanding()> holds_role,
                                        std::function<absl::Status()> on_peer_stale,
                                        std::function<absl::Status()> on_peer_in_sync) {
  absl::MutexLock lock(&write_mu_);
  if (epoch <= epoch_) {
    return absl::FailedPreconditionError(
        StrCat("epoch ", epoch, " is not above the highest seen, ", epoch_));
  }
  if (absl::Status s = PersistEpoch(epoch); !s.ok()) return s;
  role_ = ReplicaRole::kPrimary;
  primary_.store(true, std::memory_order_release);
  peer_ = peer;
  peer_in_sync_ = false;
  peer_last_ = 0;
  holds_role_ = std::move(holds_role);
  on_peer_stale_ = std::move(on_peer_stale);
  on_peer_in_sync_ = std::move(on_peer_in_sync);
  peer_marked_stale_ = false;
  return absl::OkStatus();
}

void StorageNode::StepDown() {
  absl::MutexLock lock(&write_mu_);
  StepDownLocked();
}

void StorageNode::StepDownLocked() {
  role_ = ReplicaRole::kSecondary;
  primary_.store(false, std::memory_order_release);
  SetInSyncUntil(absl::InfinitePast());  // until the new primary says so
  peer_ = nullptr;
  peer_in_sync_ = false;
  holds_role_ = nullptr;
  on_peer_stale_ = nullptr;
  on_peer_in_sync_ = nullptr;
  peer_marked_stale_ = false;
}

void StorageNode::MarkPeerOutOfSync() {
  absl::MutexLock lock(&write_mu_);
  if (role_ == ReplicaRole::kPrimary) peer_in_sync_ = false;
}

void StorageNode::SetApplied(uint64_t sequence) {
  absl::MutexLock applied(&applied_mu_);
  applied_ = sequence;
}

bool StorageNode::peer_in_sync() const {
  absl::MutexLock lock(&write_mu_);
  return peer_in_sync_;
}

bool StorageNode::is_primary() const { return primary_.load(std::memory_order_acquire); }

void StorageNode::SetInSyncUntil(absl::Time until) {
  in_sync_until_ns_.store(absl::ToUnixNanos(until), std::memory_order_release);
}

uint64_t StorageNode::epoch() const {
  absl::MutexLock lock(&write_mu_);
  return epoch_;
}

absl::StatusOr<WriteResult> StorageNode::Write(WriteOp op) {
  absl::MutexLock lock(&write_mu_);
  if (role_ != ReplicaRole::kPrimary) {
    return absl::FailedPreconditionError(
        StrCat("not the primary of storage partition ", options_.partition));
  }
  const LeaseStanding standing = holds_role_ ? holds_role_() : LeaseStanding::kHeld;
  if (standing == LeaseStanding::kLost) {
    StepDownLocked();
    return absl::FailedPreconditionError(
        StrCat("the primary lease of storage partition ", options_.partition, " has lapsed"));
  }
  if (standing == LeaseStanding::kSilent && (peer_ == nullptr || !peer_in_sync_)) {
    return absl::UnavailableError(
        StrCat(kWaitsForEtcdOrSecondary, "etcd has not renewed the primary lease of storage ",
               "partition ", options_.partition, " and the secondary is not in sync"));
  }

  WriteResult result;
  std::vector<ReplicatedChange> changes;
  if (!op.request_key.empty() && !op.record.has_value()) {
    return absl::InvalidArgumentError("an idempotent write without its record");
  }
  if (!op.request_key.empty()) {
    // A stored record first: nothing is written when it answers.
    absl::StatusOr<bool> replayed = ReplayLocked(op, result);
    if (!replayed.ok()) return replayed.status();
    if (*replayed) {
      result.last_sequence = store_->LastSequence();
      return result;
    }
  }
  absl::Status answer;
  if (!op.record_only()) {
    answer = ChangesOfLocked(op, result, changes);
    // A final answer is recorded (a tweet not stored, a bad value); a passing failure is not,
    // so that a retry tries again.
    const bool final = answer.ok() || absl::IsNotFound(answer) || absl::IsInvalidArgument(answer);
    if (!final || (!answer.ok() && op.request_key.empty())) return answer;
  }
  if (!op.request_key.empty()) AppendRecordLocked(op, answer, result, changes);
  if (changes.empty()) {
    result.last_sequence = store_->LastSequence();
    return result;
  }

  // Durable on the secondary first: a stale primary is refused before it writes
  // anything.
  bool alone = peer_ == nullptr;
  if (!alone && peer_in_sync_) {
    absl::Status sent = SendToPeer(changes);
    if (absl::IsFailedPrecondition(sent)) {
      StepDownLocked();
      return absl::FailedPreconditionError(StrCat("no longer the primary: ", sent.message()));
    }
    if (!sent.ok()) {
      if (standing == LeaseStanding::kSilent) {
        return absl::UnavailableError(StrCat(
            kWaitsForEtcdOrSecondary, "the secondary of storage partition ", options_.partition,
            " is unreachable and etcd has not renewed the primary's lease: ", sent.message()));
      }
      if (!options_.allow_single_replica) {
        return absl::UnavailableError(
            StrCat("the secondary of storage partition ", options_.partition,
                   " is unreachable, and single-replica writes are off: ", sent.message()));
      }
      peer_in_sync_ = false;
      alone = true;
    }
  } else if (!alone) {
    alone = true;  // out of sync: CatchUpPeer() brings it back
    if (!options_.allow_single_replica) {
      return absl::UnavailableError(
          StrCat("the secondary of storage partition ", options_.partition,
                 " is not in sync (down or catching up) and single-replica "
                 "writes are off"));
    }
  }
  if (alone && peer_ != nullptr && !peer_marked_stale_) {
    // The peer must not be promoted while it lacks this write. Recorded once: only this
    // primary clears the mark, when the peer is back in sync.
    absl::Status marked = on_peer_stale_ ? on_peer_stale_() : absl::OkStatus();
    if (!marked.ok()) {
      return absl::UnavailableError(
          StrCat("cannot record the secondary as stale: ", marked.message()));
    }
    peer_marked_stale_ = true;
  }
  if (absl::Status s = store_->Apply(changes); !s.ok()) {
    // The secondary may hold changes this replica failed to write: it cannot
    // stay primary.
    StepDownLocked();
    return absl::UnavailableError(StrCat("primary write failed, stepped down: ", s.message()));
  }
  if (alone && peer_ != nullptr) {
    single_replica_writes_.fetch_add(1, std::memory_order_relaxed);
  } else if (!alone) {
    replicated_writes_.fetch_add(1, std::memory_order_relaxed);
  }
  result.last_sequence = changes.back().change.sequence;
  SetApplied(result.last_sequence);
  return result;
}

absl::Status StorageNode::ChangesOfLocked(WriteOp& op, WriteResult& result,
                                          std::vector<ReplicatedChange>& changes) {
  uint64_t sequence = store_->LastSequence();
  if (!op.puts.empty()) {
    result.outcomes.resize(op.puts.size());
    std::vector<TweetId> ids;
    ids.reserve(op.puts.size());
    for (const StoredTweet& t : op.puts) ids.push_back(t.id);
    std::vector<absl::StatusOr<StoredTweet>> stored = store_->MultiGet(ids);
    absl::flat_hash_map<TweetId, size_t> seen;
    for (size_t i = 0; i < op.puts.size(); ++i) {
      StoredTweet& t = op.puts[i];
      if (stored[i].ok()) {
        result.outcomes[i] = op.retry && *stored[i] == t
                                 ? absl::OkStatus()
                                 : absl::AlreadyExistsError(StrCat("duplicate id ", t.id));
        continue;
      }
      if (!absl::IsNotFound(stored[i].status())) return stored[i].status();
      if (!seen.emplace(t.id, i).second) {
        result.outcomes[i] = absl::AlreadyExistsError(StrCat("duplicate id ", t.id));
        continue;
      }
      changes.push_back(
          {Change{++sequence, ChangeKind::kPut, t.id, 0}, std::move(t), std::nullopt, {}});
    }
  } else if (op.delete_id.has_value()) {
    absl::StatusOr<StoredTweet> t = store_->Get(*op.delete_id);
    if (!t.ok()) return t.status();
    // The change carries the deleted tweet: streams reading the log can tell whether it
    // matched their query.
    changes.push_back({Change{++sequence, ChangeKind::kDelete, *op.delete_id, 0},
                       *std::move(t),
                       std::nullopt,
                       {}});
  } else if (!op.usage.empty()) {
    changes.push_back({Change{++sequence, ChangeKind::kUsage, 0, 0}, std::nullopt, std::nullopt,
                       std::move(op.usage)});
  } else if (op.likes.has_value()) {
    absl::StatusOr<StoredTweet> t = store_->Get(op.likes->id);
    if (!t.ok()) return t.status();
    if (absl::Status s = CheckLikesChange(op.likes->value, op.likes->add); !s.ok()) return s;
    result.likes = ApplyLikes(t->likes, op.likes->value, op.likes->add);
    changes.push_back({Change{++sequence, ChangeKind::kLikes, op.likes->id, result.likes},
                       std::nullopt,
                       std::nullopt,
                       {}});
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> StorageNode::ReplayLocked(const WriteOp& op, WriteResult& result) {
  absl::StatusOr<std::optional<WriteRecord>> stored =
      FindWriteRecord(*store_, op.request_key, clock_.NowUnixMillis());
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return false;
  // An ingest's final answer replaces its plan; nothing else replaces a record (the caller
  // reads the stored one, and refuses it if it answers another request).
  if (op.record_only() && op.record->done && !(*stored)->done &&
      (*stored)->fingerprint == op.record->fingerprint) {
    return false;
  }
  result.record = **std::move(stored);
  result.replayed = true;
  return true;
}

void StorageNode::AppendRecordLocked(const WriteOp& op, const absl::Status& answer,
                                     WriteResult& result, std::vector<ReplicatedChange>& changes) {
  WriteRecord record = *op.record;
  if (!op.record_only()) {
    record.done = true;
    record.status = answer;
    record.likes = result.likes;
  }
  const uint64_t sequence =
      changes.empty() ? store_->LastSequence() + 1 : changes.back().change.sequence + 1;
  changes.push_back({Change{sequence, ChangeKind::kRequest, 0, 0},
                     std::nullopt,
                     ToStoredRequest(op.request_key, record),
                     {}});
  result.record = std::move(record);
}

absl::Status StorageNode::SendToPeer(std::span<const ReplicatedChange> changes) {
  absl::StatusOr<uint64_t> last =
      peer_->Replicate(epoch_, options_.node, changes, changes.back().change.sequence);
  // The peer may be missing changes before these: send them from the log, then
  // these again.
  for (int round = 0; last.ok() && *last < changes.back().change.sequence; ++round) {
    if (round > 1000) return absl::UnavailableError("the secondary does not catch up");
    peer_last_ = *last;
    if (*last + 1 >= changes.front().change.sequence) {
      last = peer_->Replicate(epoch_, options_.node, changes, changes.back().change.sequence);
      continue;
    }
    absl::StatusOr<std::vector<ReplicatedChange>> missing = store_->ReadChanges(
        *last, std::min<uint64_t>(kCatchUpBatch, changes.front().change.sequence - 1 - *last),
        ChangeBodies::kInclude);
    if (!missing.ok()) return missing.status();
    if (missing->empty())
      return absl::DataLossError("the change log lacks what the secondary needs");
    last = peer_->Replicate(epoch_, options_.node, *missing, /*synced_through=*/0);
  }
  if (!last.ok()) return last.status();
  peer_last_ = *last;
  peer_seen_ = Now();
  return absl::OkStatus();
}

absl::Status StorageNode::CatchUpPeer() {
  for (;;) {
    StoragePeer* peer = nullptr;
    uint64_t epoch = 0, from = 0;
    {
      absl::MutexLock lock(&write_mu_);
      if (role_ != ReplicaRole::kPrimary || peer_ == nullptr) return absl::OkStatus();
      if (peer_in_sync_) return KeepPeerInSyncLocked();
      peer = peer_;
      epoch = epoch_;
      from = peer_last_;
    }
    // Where the peer is. When the log no longer reaches back to it, it gets a
    // full copy first, and the log after the copy.
    absl::StatusOr<uint64_t> at = peer->Replicate(epoch, options_.node, {}, /*synced_through=*/0);
    if (!at.ok()) return at.status();
    {
      absl::MutexLock lock(&write_mu_);
      if (peer_ != peer) return absl::OkStatus();
      peer_last_ = from = *at;
      peer_seen_ = Now();
    }
    if (*at + 1 < store_->FirstSequence()) {
      if (absl::Status s = CopyToPeer(peer, epoch); !s.ok()) return s;
      continue;
    }
    // Far behind: send without holding up writes. Near the end: finish under
    // the write lock, so that no write slips between the last change sent and
    // the peer counting as in sync.
    if (store_->LastSequence() > from + kCatchUpBatch) {
      absl::StatusOr<std::vector<ReplicatedChange>> batch =
          store_->ReadChanges(from, kCatchUpBatch, ChangeBodies::kInclude);
      if (!batch.ok()) return batch.status();
      absl::StatusOr<uint64_t> after =
          peer->Replicate(epoch, options_.node, *batch, /*synced_through=*/0);
      if (!after.ok()) return after.status();
      absl::MutexLock lock(&write_mu_);
      if (peer_ == peer) {
        peer_last_ = *after;
        peer_seen_ = Now();
      }
      continue;
    }
    absl::MutexLock lock(&write_mu_);
    if (role_ != ReplicaRole::kPrimary || peer_ != peer) return absl::OkStatus();
    absl::StatusOr<uint64_t> last =
        peer_->Replicate(epoch_, options_.node, {}, /*synced_through=*/0);
    if (!last.ok()) return last.status();
    peer_last_ = *last;
    while (peer_last_ < store_->LastSequence()) {
      absl::StatusOr<std::vector<ReplicatedChange>> batch =
          store_->ReadChanges(peer_last_, kCatchUpBatch, ChangeBodies::kInclude);
      if (!batch.ok()) return batch.status();
      if (batch->empty())
        return absl::DataLossError("the change log lacks what the secondary needs");
      absl::StatusOr<uint64_t> after =
          peer_->Replicate(epoch_, options_.node, *batch, /*synced_through=*/0);
      if (!after.ok()) return after.status();
      if (*after <= peer_last_) return absl::InternalError("the secondary made no progress");
      peer_last_ = *after;
    }
    if (on_peer_in_sync_) {
      if (absl::Status s = on_peer_in_sync_(); !s.ok()) return s;
    }
    peer_marked_stale_ = false;
    // Tell the peer, so that it serves readers again.
    absl::StatusOr<uint64_t> told =
        peer_->Replicate(epoch_, options_.node, {}, store_->LastSequence());
    if (!told.ok()) return told.status();
    peer_in_sync_ = true;
    peer_seen_ = Now();
    return absl::OkStatus();
  }
}

absl::Status StorageNode::KeepPeerInSyncLocked() {
  const absl::Time now = Now();
  if (now - peer_seen_ < options_.in_sync_validity / 4) return absl::OkStatus();
  // Under the write lock: no write can slip in between, so the peer's answer
  // says whether it still holds everything.
  const uint64_t last = store_->LastSequence();
  absl::StatusOr<uint64_t> at = peer_->Replicate(epoch_, options_.node, {}, last);
  if (absl::IsFailedPrecondition(at.status())) {
    StepDownLocked();
    return at.status();
  }
  if (!at.ok()) {
    // Unreachable: it is caught up (outside the write lock) once it answers.
    // Nothing was acknowledged without it, so it is not stale.
    peer_in_sync_ = false;
    return at.status();
  }
  peer_last_ = *at;
  peer_seen_ = now;
  if (*at >= last) return absl::OkStatus();
  // It lost acknowledged writes (a replaced disk): never promote it as it is.
  peer_in_sync_ = false;
  if (on_peer_stale_) {
    if (absl::Status s = on_peer_stale_(); !s.ok()) return s;
    peer_marked_stale_ = true;
  }
  return absl::DataLossError(StrCat("the secondary is at ", *at, ", behind ", last));
}

absl::Status StorageNode::CopyToPeer(StoragePeer* peer, uint64_t epoch) {
  absl::StatusOr<std::unique_ptr<StoreSnapshot>> snapshot = store_->Snapshot();
  if (!snapshot.ok()) return snapshot.status();
  const ReplicatedChange& last = (*snapshot)->last();
  {
    // The log after the snapshot is what the peer reads next: keep it.
    absl::MutexLock lock(&write_mu_);
    copy_floor_ = last.change.sequence;
  }
  absl::Cleanup done = [this] {
    absl::MutexLock lock(&write_mu_);
    copy_floor_.reset();
  };
  InstallChunk chunk;
  chunk.sequence = last.change.sequence;
  chunk.begin = true;
  uint64_t tweets = 0;
  for (;;) {
    {
      absl::MutexLock lock(&write_mu_);
      if (role_ != ReplicaRole::kPrimary || peer_ != peer) {
        return absl::AbortedError("stepped down during a copy");
      }
    }
    absl::StatusOr<std::vector<StoredTweet>> next = (*snapshot)->Next(options_.copy_batch);
    if (!next.ok()) return next.status();
    if (next->empty()) break;
    tweets += next->size();
    chunk.tweets = *std::move(next);
    absl::StatusOr<uint64_t> sent = peer->Install(epoch, options_.node, chunk);
    if (!sent.ok()) return sent.status();
    chunk.begin = false;
  }
  chunk.tweets.clear();
  // Then the records of idempotent writes, so that a retry after a failover to the copy is
  // answered as the first attempt was, and the usage series.
  auto send_each = [&](auto next_of, auto& entries) -> absl::Status {
    for (;;) {
      auto next = next_of();
      if (!next.ok()) return next.status();
      if (next->empty()) break;
      entries = *std::move(next);
      absl::StatusOr<uint64_t> sent = peer->Install(epoch, options_.node, chunk);
      if (!sent.ok()) return sent.status();
      chunk.begin = false;
    }
    entries.clear();
    return absl::OkStatus();
  };
  absl::Status sent =
      send_each([&] { return (*snapshot)->NextRequests(options_.copy_batch); }, chunk.requests);
  if (sent.ok()) {
    sent = send_each([&] { return (*snapshot)->NextUsage(options_.copy_batch); }, chunk.usage);
  }
  if (!sent.ok()) return sent;
  chunk.finish = last;
  absl::StatusOr<uint64_t> installed = peer->Install(epoch, options_.node, chunk);
  if (!installed.ok()) return installed.status();
  if (*installed != last.change.sequence) {
    return absl::InternalError(StrCat("the copy ended at ", *installed, ", not ", chunk.sequence));
  }
  copies_sent_.fetch_add(1, std::memory_order_relaxed);
  tweets_copied_.fetch_add(tweets, std::memory_order_relaxed);
  absl::MutexLock lock(&write_mu_);
  if (peer_ == peer) {
    peer_last_ = *installed;
    peer_seen_ = Now();
  }
  return absl::OkStatus();
}

absl::Status StorageNode::AcceptPrimaryLocked(uint64_t epoch, const std::string& primary) {
  if (epoch < epoch_) {
    return absl::FailedPreconditionError(
        StrCat("epoch ", epoch, " of ", primary, " is stale: ", epoch_, " has been seen"));
  }
  if (role_ == ReplicaRole::kPrimary) {
    if (epoch == epoch_ || primary == options_.node) {
      return absl::FailedPreconditionError(
          StrCat(options_.node, " is the primary of epoch ", epoch_));
    }
    StepDownLocked();  // a newer primary exists
  }
  return PersistEpoch(epoch);
}

absl::Status StorageNode::AbandonInstallLocked() {
  if (absl::Status s = store_->ClearForInstall(); !s.ok()) return s;
  std::error_code ec;
  std::filesystem::remove(InstallingFile(options_), ec);
  if (ec) return absl::UnavailableError(StrCat("cannot remove the copy marker: ", ec.message()));
  installing_.reset();
  readable_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> StorageNode::Install(uint64_t epoch, const std::string& primary,
                                              const InstallChunk& chunk) {
  absl::MutexLock lock(&write_mu_);
  if (absl::Status s = AcceptPrimaryLocked(epoch, primary); !s.ok()) return s;
  SetInSyncUntil(absl::InfinitePast());
  if (chunk.begin) {
    // The marker first: a crash from here on leaves a store that is cleared at
    // the next start.
    if (absl::Status s = WriteFileAtomically(InstallingFile(options_), StrCat(chunk.sequence));
        !s.ok()) {
      return s;
    }
    readable_.store(false, std::memory_order_release);
    installing_ = chunk.sequence;
    if (absl::Status s = store_->ClearForInstall(); !s.ok()) return s;
  } else if (installing_ != chunk.sequence) {
    return absl::AbortedError(StrCat("no copy at sequence ", chunk.sequence, " in progress"));
  }
  if (!chunk.tweets.empty()) {
    if (absl::Status s = store_->InstallTweets(chunk.tweets); !s.ok()) return s;
  }
  if (!chunk.requests.empty()) {
    if (absl::Status s = store_->InstallRequests(chunk.requests); !s.ok()) return s;
  }
  if (!chunk.usage.empty()) {
    if (absl::Status s = store_->InstallUsage(chunk.usage); !s.ok()) return s;
  }
  if (!chunk.finish.has_value()) return 0;
  if (chunk.finish->change.sequence != chunk.sequence) {
    return absl::InvalidArgumentError("the copy's last change is not at its sequence");
  }
  if (absl::Status s = store_->FinishInstall(*chunk.finish); !s.ok()) return s;
  std::error_code ec;
  std::filesystem::remove(InstallingFile(options_), ec);
  if (ec) return absl::UnavailableError(StrCat("cannot remove the copy marker: ", ec.message()));
  installing_.reset();
  readable_.store(true, std::memory_order_release);
  SetApplied(chunk.sequence);
  return chunk.sequence;
}

absl::StatusOr<uint64_t> StorageNode::Replicate(uint64_t epoch, const std::string& primary,
                                                std::span<const ReplicatedChange> changes,
                                                uint64_t synced_through) {
  absl::MutexLock lock(&write_mu_);
  if (absl::Status s = AcceptPrimaryLocked(epoch, primary); !s.ok()) return s;
  if (installing_.has_value()) {
    // The primary catches this replica up from its log instead: the partial
    // copy goes, and the log is applied from the start.
    if (absl::Status s = AbandonInstallLocked(); !s.ok()) return s;
  }
  const uint64_t last = store_->LastSequence();
  size_t skip = 0;
  while (skip < changes.size() && changes[skip].change.sequence <= last) ++skip;
  changes = changes.subspan(skip);
  if (!changes.empty() && changes.front().change.sequence != last + 1) {
    SetInSyncUntil(absl::InfinitePast());
    return last;  // a gap
  }
  if (!changes.empty()) {
    if (absl::Status s = store_->Apply(changes); !s.ok()) return s;
    SetApplied(changes.back().change.sequence);
  }
  const bool in_sync = synced_through != 0 && store_->LastSequence() >= synced_through;
  SetInSyncUntil(in_sync ? Now() + options_.in_sync_validity : absl::InfinitePast());
  return store_->LastSequence();
}

void StorageNode::RecordReader(const std::string& reader, uint64_t after,
                               std::optional<uint64_t> keeps) {
  if (reader.empty()) return;
  absl::MutexLock lock(&readers_mu_);
  Reader& r = readers_[reader];
  r.after = after;
  r.seen = Now();
  if (keeps.has_value()) {
    r.keeps = *keeps;
    r.reported_keeps = true;
  }
}

bool StorageNode::ServesReads() const {
  // No lock: the primary holds write_mu_ through a whole replicated write, and
  // reads must not wait for that.
  return is_primary() ||
         absl::ToUnixNanos(Now()) < in_sync_until_ns_.load(std::memory_order_acquire);
}

absl::Status StorageNode::CheckServesReads() const {
  if (!readable_.load(std::memory_order_acquire)) {
    return absl::UnavailableError(StrCat(options_.node, " is installing a copy"));
  }
  if (!ServesReads())
    return absl::UnavailableError(StrCat(options_.node, " may lack recent writes"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<usage::Point>> StorageNode::QueryUsage(std::string_view key_id,
                                                                  usage::Resolution resolution,
                                                                  int64_t from_s, int64_t to_s,
                                                                  size_t max_points) const {
  if (absl::Status s = CheckServesReads(); !s.ok()) return s;
  return store_->QueryUsage(key_id, resolution, from_s, to_s, max_points);
}

absl::StatusOr<std::vector<std::string>> StorageNode::UsageKeys() const {
  if (absl::Status s = CheckServesReads(); !s.ok()) return s;
  return store_->UsageKeys();
}

std::vector<absl::StatusOr<StoredTweet>> StorageNode::MultiGet(std::span<const TweetId> ids) const {
  if (absl::Status s = CheckServesReads(); !s.ok()) {
    return std::vector<absl::StatusOr<StoredTweet>>(ids.size(), s);
  }
  return store_->MultiGet(ids);
}

absl::StatusOr<std::unique_ptr<StoreSnapshot>> StorageNode::SnapshotFor(const std::string& reader) {
  if (!readable_.load(std::memory_order_acquire)) {
    return absl::UnavailableError(StrCat(options_.node, " is installing a copy"));
  }
  if (!ServesReads()) {
    return absl::UnavailableError(StrCat(options_.node, " may lack recent writes"));
  }
  absl::StatusOr<std::unique_ptr<StoreSnapshot>> snapshot = store_->Snapshot();
  if (snapshot.ok()) RecordReader(reader, (*snapshot)->last().change.sequence, std::nullopt);
  return snapshot;
}

absl::StatusOr<std::vector<ReplicatedChange>> StorageNode::ReadChanges(uint64_t after, size_t max,
                                                                       absl::Duration wait,
                                                                       const std::string& reader,
                                                                       uint64_t reader_keeps,
                                                                       ChangeBodies bodies) {
  if (!readable_.load(std::memory_order_acquire)) {
    return absl::UnavailableError(StrCat(options_.node, " is installing a copy"));
  }
  if (!ServesReads()) {
    return absl::UnavailableError(
        StrCat(options_.node, " is a secondary its primary has not called in sync"));
  }
  if (!is_primary() && after > store_->LastSequence()) {
    return absl::UnavailableError(
        StrCat(options_.node, " is behind the reader (at ", store_->LastSequence(), ")"));
  }
  if (wait > absl::ZeroDuration()) {
    absl::MutexLock lock(&applied_mu_);
    auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(applied_mu_) { return applied_ > after; };
    applied_mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
  }
  absl::StatusOr<std::vector<ReplicatedChange>> changes =
      store_->ReadChanges(after, std::max<size_t>(1, max), bodies);
  // A reader asking for what is trimmed already holds nothing back.
  if (changes.ok()) RecordReader(reader, after, reader_keeps);
  return changes;
}

absl::Status StorageNode::TrimLog() {
  const uint64_t last = store_->LastSequence();
  const absl::Time now = Now();
  bool sweep = false;
  {
    absl::MutexLock lock(&readers_mu_);
    if (now - records_swept_ >= absl::Hours(1)) {
      records_swept_ = now;
      sweep = true;
    }
  }
  if (sweep) {
    {
      // Idempotent writes' records older than a day, once an hour; under the write lock, so
      // that an ingest's final answer is not written over one being dropped.
      absl::MutexLock lock(&write_mu_);
      absl::StatusOr<uint64_t> dropped = DropExpiredWriteRecords(*store_, clock_.NowUnixMillis());
      if (!dropped.ok()) return dropped.status();
    }
    // And usage buckets past their retention (which queries already leave out): a compaction,
    // which writes go on beside.
    if (absl::Status s = store_->ExpireUsage(); !s.ok()) return s;
  }
  const absl::Time live_since = now - options_.live_reader_window;
  // What the named readers still need (nothing is trimmed for one that has not
  // reported yet), and the position of every live reader.
  uint64_t needed = last, live_floor = last;
  {
    absl::MutexLock lock(&readers_mu_);
    // Changes through a sequence noted change_retention ago are old enough.
    log_times_.emplace_back(now, last);
    while (!log_times_.empty() && log_times_.front().first <= now - options_.change_retention) {
      retained_after_ = std::max(retained_after_, log_times_.front().second);
      log_times_.pop_front();
    }
    needed = std::min(needed, retained_after_);
    for (const std::string& reader : options_.readers) {
      auto it = readers_.find(reader);
      needed = std::min(needed,
                        it == readers_.end() || !it->second.reported_keeps ? 0 : it->second.keeps);
    }
    for (const auto& [name, r] : readers_) {
      if (r.seen >= live_since) live_floor = std::min(live_floor, r.after);
    }
  }
  {
    absl::MutexLock lock(&write_mu_);
    if (role_ == ReplicaRole::kPrimary && peer_ != nullptr) {
      needed = std::min(needed, peer_last_);
      if (peer_seen_ >= live_since) live_floor = std::min(live_floor, peer_last_);
    }
    if (copy_floor_.has_value()) live_floor = std::min(live_floor, *copy_floor_);
  }
  const uint64_t cap = last > options_.max_log_changes ? last - options_.max_log_changes : 0;
  const uint64_t through = std::min(std::max(cap, needed), live_floor);
  if (through == 0 || through < store_->FirstSequence()) return absl::OkStatus();  // nothing new
  return store_->TrimChanges(through);
}

StorageNodeStatus StorageNode::Status() const {
  StorageNodeStatus s;
  {
    absl::MutexLock lock(&write_mu_);
    s.role = role_;
    s.epoch = epoch_;
    s.peer_in_sync = peer_in_sync_;
  }
  s.last_sequence = store_->LastSequence();
  s.first_sequence = store_->FirstSequence();
  s.tweets_estimate = store_->ApproximateCount();
  s.single_replica_writes = single_replica_writes_.load(std::memory_order_relaxed);
  s.replicated_writes = replicated_writes_.load(std::memory_order_relaxed);
  s.installing = !readable_.load(std::memory_order_acquire);
  s.copies_sent = copies_sent_.load(std::memory_order_relaxed);
  s.tweets_copied = tweets_copied_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace tweetsearch::storage
