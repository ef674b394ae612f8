// UsageRecorder: counts each request in memory and flushes the counts to a UsageStore every few
// seconds as increments.
//
// Record() is on every request's path: it takes one of 16 shard locks and adds to the key's
// minute bucket in a hash map (no allocation once the key has been seen this interval). Flush()
// swaps the shards' maps out, sums them per minute into the kAllKeys series too, and hands the
// increments to the store as one batch with an id of its own. A batch whose write failed is
// kept as it is and sent again, under the same id, before anything newer: a store shared by
// several front doors may have written part of it, and the id lets it skip that part. A crash
// loses at most the counts since the last flush.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_USAGE_USAGE_RECORDER_H_
#define TWEETSEARCH_USAGE_USAGE_RECORDER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/periodic.h"
#include "usage/usage_store.h"

namespace tweetsearch::usage {

struct UsageRecorderOptions {
  // Milliseconds between flushes of the background thread (Start()). Default 5000.
  int64_t flush_interval_ms = 5000;
  // Milliseconds between removals of expired buckets (UsageStore::ExpireNow); 0 never.
  // Default one hour.
  int64_t expire_interval_ms = 3'600'000;
};

struct RecorderStats {
  uint64_t recorded = 0;      // requests counted
  uint64_t flushes = 0;       // successful writes to the store
  uint64_t flush_errors = 0;  // failed writes (their counts were kept for the next flush)
};

class UsageRecorder {
 public:
  // `store` and `clock` must outlive the recorder.
  UsageRecorder(UsageStore& store, const Clock& clock, const UsageRecorderOptions& options = {});
  ~UsageRecorder();  // Stop()
  UsageRecorder(const UsageRecorder&) = delete;
  UsageRecorder& operator=(const UsageRecorder&) = delete;

  // Counts one request of `key_id` (kAnonymousKey for calls without a valid key). `limit` names
  // the refusing limit when `outcome` is kLimited; `search_latency_us` >= 0 adds a search
  // latency.
  void Record(std::string_view key_id, Outcome outcome, std::string_view limit = {},
              int64_t search_latency_us = -1);

  // Writes the counts gathered since the last flush.
  absl::Status Flush();

  // Starts the background thread that flushes (and expires old buckets). Call once.
  void Start();
  // Stops the thread and flushes what is left. Safe to call more than once.
  void Stop();

  RecorderStats Stats() const;
  UsageStore& store() const { return store_; }

 private:
  // Minute buckets of one key not yet flushed; nearly always one.
  using Minutes = std::vector<std::pair<int64_t, Counters>>;
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, Minutes> pending ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 16;

  struct Batch {
    std::string id;
    std::vector<Increment> increments;
  };
  // Sends `batch`; counts the outcome.
  absl::Status Send(const Batch& batch);

  UsageStore& store_;
  const Clock& clock_;
  const UsageRecorderOptions options_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> recorded_{0};
  std::atomic<uint64_t> flushes_{0};
  std::atomic<uint64_t> flush_errors_{0};

  absl::Mutex flush_mu_;  // one flush at a time
  // Unique to this recorder: "<random hex>-<n>" names batch n.
  const std::string batch_prefix_;
  uint64_t batches_ ABSL_GUARDED_BY(flush_mu_) = 0;
  std::optional<Batch> unsent_ ABSL_GUARDED_BY(flush_mu_);  // a failed batch, to send again
  int64_t last_expire_ms_ = 0;                              // used by the background thread only
  std::unique_ptr<PeriodicTask> thread_;
};

}  // namespace tweetsearch::usage

#endif  // TWEETSEARCH_USAGE_USAGE_RECORDER_H_
