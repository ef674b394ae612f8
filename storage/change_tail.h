// Reading a storage partition's change log from another process: the source
// (one partition's replicas) and the loop that tails it. Index servers and
// builders both tail every storage partition this way (docs/cluster.md).
//
// Thread-safety: a ChangeSource may be used from any thread unless an
// implementation says otherwise; TailChangeLog runs on the caller's thread
// until the consumer says stop.
#ifndef TWEETSEARCH_STORAGE_CHANGE_TAIL_H_
#define TWEETSEARCH_STORAGE_CHANGE_TAIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/tweet_store.h"

namespace tweetsearch::storage {

// Where a reader reads one storage partition's change log.
class ChangeSource {
 public:
  virtual ~ChangeSource() = default;
  // See StorageNode::ReadChanges. FailedPrecondition when the changes after
  // `after` were trimmed.
  virtual absl::StatusOr<std::vector<ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                                    absl::Duration wait,
                                                                    uint64_t keeps) = 0;
  // For a reader that starts over: calls `ids` with every stored tweet id of
  // one snapshot (ascending, in batches; an error from `ids` ends the scan) and
  // returns the snapshot's sequence, after which the reader reads the log.
  virtual absl::StatusOr<uint64_t> SnapshotIds(
      const std::function<absl::Status(std::span<const TweetId>)>& ids) = 0;
};

// What the tailing loop needs from its reader.
class ChangeConsumer {
 public:
  struct Position {
    uint64_t after = 0;  // read the changes after this sequence
    uint64_t keeps = 0;  // the reader no longer needs changes up to this one
  };
  virtual ~ChangeConsumer() = default;
  // Waits until the reader wants changes of `partition`; nullopt: stop tailing.
  virtual std::optional<Position> Next(uint32_t partition) = 0;
  // Changes read after Next()'s `after` (consecutive, not empty).
  virtual void Apply(uint32_t partition, const std::vector<ReplicatedChange>& changes) = 0;
  // A read returned everything the log held: the reader has caught up once.
  virtual void AtEnd(uint32_t partition) = 0;
  // The log no longer holds the changes the reader asked for.
  virtual void Trimmed(uint32_t partition) = 0;
};

struct TailOptions {
  size_t batch = 4096;                             // changes per read
  absl::Duration wait = absl::Seconds(1);          // how long one long poll waits
  absl::Duration retry = absl::Milliseconds(200);  // pause after an unreachable partition
};

// Reads `partition`'s log through `source` into `consumer` until Next() says
// stop. Storage errors other than a trimmed log are retried after a pause.
void TailChangeLog(ChangeSource& source, uint32_t partition, ChangeConsumer& consumer,
                   const TailOptions& options);

// One thread per source running TailChangeLog (partition = the source's index).
// The sources and the consumer must outlive the threads; they end when the
// consumer's Next() says stop.
std::vector<std::thread> StartTailing(const std::vector<std::unique_ptr<ChangeSource>>& sources,
                                      ChangeConsumer& consumer, const TailOptions& options);

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_CHANGE_TAIL_H_
