// Engine: the storage role and one index partition in one process, kept in step.
//
// Every change (ingest, delete, likes) goes through one ordered write path:
//   1. validate; assign snowflake ids where the caller gave none; refuse duplicate ids;
//   2. write the tweets and a change-log entry per change to the TweetStore in one synced
//      RocksDB batch (durable once this returns);
//   3. apply the same changes to the in-memory index (searchable once this returns);
//   4. answer the caller.
// Concurrent callers are group-committed (LevelDB's writer queue): the caller at the head of
// the queue writes the ingest batches of everyone waiting behind it in one RocksDB write and one
// fsync, then wakes them. So many small ingest calls cost one fsync per group, not per call.
//
// Restart: every `checkpoint_every` changes (and on Close), the index is sealed and saved to
// <data>/index with the change sequence it reflects; the change log up to that point is then
// trimmed. Open() loads the saved segments and replays the changes after the checkpoint from
// the store: not a re-index of everything. Replay is idempotent (likes are absolute values,
// deletes of missing tweets and re-adds of present ones are ignored), so a crash between
// saving and recording the checkpoint is harmless.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_ENGINE_H_
#define TWEETSEARCH_AGGREGATOR_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/backend.h"
#include "aggregator/stream_hub.h"
#include "aggregator/tweet_cache.h"
#include "common/clock.h"
#include "common/ids.h"
#include "common/snowflake.h"
#include "indexer/index/index.h"
#include "indexer/query/searcher.h"
#include "storage/tweet_store.h"

namespace tweetsearch::aggregator {

struct EngineOptions {
  // Root of the data directory: <data_dir>/storage (RocksDB), <data_dir>/index (segments).
  std::string data_dir;
  index::IndexOptions index;
  storage::StoreOptions store;
  // Tweets whose text has more bytes are rejected. Default 4096 (a 280-character tweet of
  // 4-byte characters is 1120 bytes).
  size_t max_text_bytes = 4096;
  // Changes between index checkpoints (seal + save + trim of the change log). Default 1M.
  uint64_t checkpoint_every = 1'000'000;
  // Save the index when the engine is destroyed. Default true; tests turn it off to play a
  // crash.
  bool checkpoint_on_close = true;
  // Bytes of hot tweet bodies cached for hydrating search results. Default 128 MiB; 0 turns
  // the cache off.
  size_t tweet_cache_bytes = size_t{128} << 20;
  // Node bits of the snowflake ids this process assigns, 0 to 1023. Default 0.
  uint32_t node_id = 0;
  // Changes stay in the change log at least this long after they are written, whatever the
  // checkpoints: streams resume from it (GET /v1/stream with Last-Event-ID). Default 15 min.
  int64_t change_retention_ms = 15 * 60 * 1000;
  // Serve streams (the stream hub). Default true; false leaves the write path without it.
  bool streams = true;
  StreamHubOptions stream_options;
};

class Engine final : public Backend {
 public:
  // Opens the data directory (creating it), loads the saved index and catches up with the
  // store. `clock` must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Open(const EngineOptions& options,
                                                      const Clock& clock);
  // Checkpoints the index (errors are logged by the caller through Close()).
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  using Backend::Delete;
  using Backend::Ingest;
  using Backend::Likes;
  // Ingests `tweets` with one outcome each, in order; one bad tweet never affects the others.
  // Accepted tweets are durable and searchable when this returns. A store failure rejects the
  // whole call's tweets with Unavailable (nothing was acknowledged). With `once`, the call's
  // record is written in the same store write as its tweets.
  std::vector<IngestOutcome> Ingest(std::vector<NewTweet> tweets, WriteOnce* once) override;

  // Deletes a tweet from storage and the index. NotFound if it is not stored.
  absl::Status Delete(TweetId id, WriteOnce* once) override;
  // Sets (`add` false) or adds to (`add` true; clamped at 0 and 2^32-1) a tweet's likes;
  // returns the new value, which sort 2 uses at once. NotFound if the tweet is not stored.
  absl::StatusOr<uint32_t> Likes(TweetId id, int64_t value, bool add, WriteOnce* once) override;

  absl::StatusOr<storage::StoredTweet> Get(TweetId id) const override;

  // Runs `plan` and hydrates the hits from storage (hits deleted meanwhile are dropped).
  absl::StatusOr<std::vector<SearchHit>> Search(const query::Plan& plan,
                                                const query::SearchOptions& options,
                                                uint64_t* total_hits, bool* total_is_exact) const;

  // The best-match scoring statistics of `plan` over the current index.
  query::CollectionStats ComputeStats(const query::Plan& plan) const {
    return query::ComputeStats(*index_->Snapshot(), plan);
  }

  // The largest tweet id indexed so far (the watermark of a new first page).
  TweetId MaxTweetId() const { return max_id_.load(std::memory_order_acquire); }

  // Backend: one partition, so the search is Search() and the statistics ComputeStats().
  absl::StatusOr<SearchOutcome> RunSearch(const SearchCall& call) const override;
  absl::StatusOr<CountsOutcome> RunCounts(const CountsCall& call) const override;
  absl::StatusOr<query::CollectionStats> CollectStats(const SearchCall& call) const override {
    return ComputeStats(*call.plan);
  }
  TweetId Watermark() const override { return MaxTweetId(); }
  const analysis::Analyzer& analyzer() const override { return index_->analyzer(); }
  const Clock& clock() const override { return clock_; }
  EngineStats Stats() const override;
  uint64_t tweets_ingested() const override { return ingested_.load(std::memory_order_relaxed); }
  absl::StatusOr<std::unique_ptr<StreamFeed>> OpenStream(const StreamCall& call) override;
  std::optional<StreamHubStats> StreamStats() const override;
  // The hub of the streams (null when options.streams is false).
  StreamHub* streams() { return streams_.get(); }

  // Seals and saves the index and trims the change log now.
  absl::Status Checkpoint();

 private:
  struct Writer;
  Engine(const EngineOptions& options, const Clock& clock, SnowflakeGenerator ids,
         std::unique_ptr<storage::TweetStore> store, std::unique_ptr<index::Index> index,
         uint64_t checkpoint_change);

  absl::Status Recover();
  // Queues `w` and returns when it has been written (by this thread or a group leader).
  void Submit(Writer* w);
  void WriteGroup(std::vector<Writer*>& group);
  void WriteIngest(std::vector<Writer*>& group);
  void WriteOne(Writer* w);
  // An idempotent write whose record is stored: answers `w` from it and returns true.
  bool Replay(Writer* w);
  // The record of `w`'s answer as it stands (ingest: its outcomes; else status and likes).
  storage::StoredRequest RecordOf(const Writer& w) const;
  absl::Status CheckpointLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(leader_mu_);
  // Notes the time of the last change written (at most one note a second), and forgets notes
  // older than the retention, remembering how far the log may be trimmed.
  void NoteChangeTime() ABSL_EXCLUSIVE_LOCKS_REQUIRED(leader_mu_);
  // Hands a write's changes to the streams (or, with none open, only its last sequence).
  void PublishChanges(std::vector<StreamChange> changes, uint64_t through);
  void NoteId(TweetId id);

  const EngineOptions options_;
  const Clock& clock_;
  SnowflakeGenerator ids_;
  std::unique_ptr<storage::TweetStore> store_;
  std::unique_ptr<index::Index> index_;
  mutable TweetCache cache_;

  absl::Mutex queue_mu_;
  std::deque<Writer*> queue_ ABSL_GUARDED_BY(queue_mu_);
  // Held by the group leader while it writes; Checkpoint() takes it to stop writes.
  absl::Mutex leader_mu_ ABSL_ACQUIRED_AFTER(queue_mu_);
  uint64_t checkpoint_change_ ABSL_GUARDED_BY(leader_mu_);

  std::atomic<TweetId> max_id_{0};
  std::atomic<uint64_t> ingested_{0}, rejected_{0}, write_groups_{0};
  std::atomic<uint64_t> checkpoint_change_seen_{0};
  // After a failed checkpoint (a full disk, a failed fsync) the next try waits for this change
  // sequence, a quarter interval on, instead of sealing a segment on every write group.
  uint64_t checkpoint_retry_at_ ABSL_GUARDED_BY(leader_mu_) = 0;
  std::atomic<uint64_t> checkpoint_failures_{0};
  // (time, last sequence then), oldest first: the change log keeps what is younger than the
  // retention; `trimmable_` is the last sequence written before the oldest note kept.
  std::deque<std::pair<int64_t, uint64_t>> change_times_ ABSL_GUARDED_BY(leader_mu_);
  uint64_t trimmable_ ABSL_GUARDED_BY(leader_mu_) = 0;
  int64_t records_swept_ms_ ABSL_GUARDED_BY(leader_mu_) = 0;  // expired write records dropped

  // Declared last: destroyed first, while the store and the analyzer it reads are alive.
  StoreChangeLog change_log_{*store_};
  std::unique_ptr<StreamHub> streams_;
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_ENGINE_H_
