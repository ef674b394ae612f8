#include "tests/testing/local_storage.h"

#include <algorithm>

namespace tweetsearch::testing {

absl::StatusOr<std::vector<storage::ReplicatedChange>> LocalChangeSource::ReadChanges(
    uint64_t after, size_t max, absl::Duration wait, uint64_t keeps) {
  return node_.ReadChanges(after, max, std::min(wait, absl::Milliseconds(50)), reader_, keeps,
                           storage::ChangeBodies::kInclude);
}

absl::StatusOr<uint64_t> LocalChangeSource::SnapshotIds(
    const std::function<absl::Status(std::span<const TweetId>)>& ids) {
  absl::StatusOr<std::unique_ptr<storage::StoreSnapshot>> snapshot = node_.SnapshotFor(reader_);
  if (!snapshot.ok()) return snapshot.status();
  const bool fail = fail_snapshots_.fetch_sub(1) > 0;
  for (;;) {
    absl::StatusOr<std::vector<storage::StoredTweet>> next = (*snapshot)->Next(1000);
    if (!next.ok()) return next.status();
    if (next->empty()) break;
    std::vector<TweetId> batch;
    for (const storage::StoredTweet& t : *next) batch.push_back(t.id);
    if (absl::Status s = ids(batch); !s.ok()) return s;
    if (fail) return absl::UnavailableError("the snapshot was cut off (test)");
  }
  return (*snapshot)->last().change.sequence;
}

absl::StatusOr<uint64_t> LocalStoragePeer::Replicate(
    uint64_t epoch, const std::string& primary, std::span<const storage::ReplicatedChange> changes,
    uint64_t synced_through) {
  storage::StorageNode* node = node_;
  if (node == nullptr) return absl::UnavailableError("the peer is cut off");
  return node->Replicate(epoch, primary, changes, synced_through);
}

absl::StatusOr<uint64_t> LocalStoragePeer::Install(uint64_t epoch, const std::string& primary,
                                                   const storage::InstallChunk& chunk) {
  storage::StorageNode* node = node_;
  if (node == nullptr) return absl::UnavailableError("the peer is cut off");
  ++install_calls_;
  return node->Install(epoch, primary, chunk);
}

}  // namespace tweetsearch::testing
