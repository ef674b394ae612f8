// In-process stand-ins for the gRPC faces of a storage replica, for tests that
// run real StorageNodes (RocksDB in a temporary directory) in one process: a
// change source that reads a replica directly, and a primary's peer that calls
// the other replica directly and can be cut off.
#ifndef TWEETSEARCH_TESTS_TESTING_LOCAL_STORAGE_H_
#define TWEETSEARCH_TESTS_TESTING_LOCAL_STORAGE_H_

#include <atomic>
#include <string>

#include "storage/change_tail.h"
#include "storage/storage_node.h"

namespace tweetsearch::testing {

// Reads a storage replica's change log directly, as `reader`.
class LocalChangeSource final : public storage::ChangeSource {
 public:
  LocalChangeSource(storage::StorageNode& node, std::string reader)
      : node_(node), reader_(std::move(reader)) {}

  absl::StatusOr<std::vector<storage::ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                                     absl::Duration wait,
                                                                     uint64_t keeps) override;
  absl::StatusOr<uint64_t> SnapshotIds(
      const std::function<absl::Status(std::span<const TweetId>)>& ids) override;

  // The next `n` snapshots fail (Unavailable) after their first batch.
  void FailSnapshots(int n) { fail_snapshots_ = n; }

 private:
  storage::StorageNode& node_;
  const std::string reader_;
  std::atomic<int> fail_snapshots_{0};
};

// A primary's peer that is another StorageNode in this process. While cut off,
// every call fails as an unreachable replica does (Unavailable).
class LocalStoragePeer final : public storage::StoragePeer {
 public:
  explicit LocalStoragePeer(storage::StorageNode* node) : node_(node) {}

  absl::StatusOr<uint64_t> Replicate(uint64_t epoch, const std::string& primary,
                                     std::span<const storage::ReplicatedChange> changes,
                                     uint64_t synced_through) override;
  absl::StatusOr<uint64_t> Install(uint64_t epoch, const std::string& primary,
                                   const storage::InstallChunk& chunk) override;

  // Points the peer at another node (a replica reopened), or cuts it off (null).
  void Reconnect(storage::StorageNode* node) { node_ = node; }
  uint64_t install_calls() const { return install_calls_; }

 private:
  std::atomic<storage::StorageNode*> node_;
  std::atomic<uint64_t> install_calls_{0};
};

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_LOCAL_STORAGE_H_
