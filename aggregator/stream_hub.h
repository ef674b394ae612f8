// StreamHub: standing queries (GET /v1/stream, the gRPC Stream call) and the changes they
// follow.
//
// The write path hands every change to Publish() once it is durable and searchable, in change
// sequence order. One matcher thread analyzes each new or deleted tweet once and tests it only
// against the standing queries filed under one of its terms: each query is filed under its
// anchor terms (query::AnchorTerms: the rarest term of an AND, every branch of an OR), so a
// tweet meets the few queries that could match it, not all of them. Identical queries share one
// evaluation. A match becomes an event on each of its streams' queues.
//
// Every event's id is the sequence number of its change in the storage change log, so a stream
// resumes after any id still in the log: it reads the changes it missed from the log (in
// chunks, on the reader's thread), then joins the live feed with no gap and no duplicate. The
// same catch-up serves a stream whose client reads too slowly (its queue is full) and a matcher
// that falls behind the writers: both drop to the log and come back, instead of holding memory
// without bound or slowing ingest.
//
// With no stream open, Publish() costs one short queue append per write group (the write path
// calls Advance() instead, which carries no tweet).
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_STREAM_HUB_H_
#define TWEETSEARCH_AGGREGATOR_STREAM_HUB_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "indexer/analysis/analyzer.h"
#include "indexer/query/plan.h"
#include "storage/tweet_store.h"

namespace tweetsearch::aggregator {

// A change as the write path publishes it: an accepted tweet, or a deleted one (as it was).
struct StreamChange {
  enum class Kind { kPut, kDelete };
  uint64_t sequence = 0;
  Kind kind = Kind::kPut;
  std::shared_ptr<const storage::StoredTweet> tweet;  // never null
};

struct StreamEvent {
  enum class Kind { kTweet, kDelete };
  Kind kind = Kind::kTweet;
  uint64_t sequence = 0;  // the event's id: a stream resumes after it
  std::shared_ptr<const storage::StoredTweet> tweet;
};

// Where streams read the changes they missed: the change log.
class ChangeLog {
 public:
  virtual ~ChangeLog() = default;
  // Up to `max` changes after `after`, in order, with tweets (TweetStore::ReadChanges with
  // ChangeBodies::kInclude). FailedPrecondition if they were trimmed.
  virtual absl::StatusOr<std::vector<storage::ReplicatedChange>> Read(uint64_t after,
                                                                      size_t max) const = 0;
  // The oldest change kept, and the last written.
  virtual uint64_t FirstSequence() const = 0;
  virtual uint64_t LastSequence() const = 0;
};

// The storage change log of one process.
class StoreChangeLog final : public ChangeLog {
 public:
  explicit StoreChangeLog(const storage::TweetStore& store) : store_(store) {}
  absl::StatusOr<std::vector<storage::ReplicatedChange>> Read(uint64_t after,
                                                              size_t max) const override {
    return store_.ReadChanges(after, max, storage::ChangeBodies::kInclude);
  }
  uint64_t FirstSequence() const override { return store_.FirstSequence(); }
  uint64_t LastSequence() const override { return store_.LastSequence(); }

 private:
  const storage::TweetStore& store_;
};

struct StreamHubOptions {
  // Events waiting in one stream's queue; beyond it the stream catches up from the log.
  // Default 10,000.
  size_t max_queued_events = 10'000;
  // Changes published but not yet matched; beyond it every stream catches up from the log.
  // Default 500,000.
  size_t max_backlog_changes = 500'000;
  // Changes read from the log per read while catching up. Default 2,000.
  size_t log_read_batch = 2'000;
};

struct StreamHubStats {
  uint64_t open_streams = 0;
  uint64_t standing_queries = 0;  // distinct queries of the open streams
  uint64_t position = 0;          // the last change matched
  uint64_t events = 0;            // queued for streams since start
  uint64_t tweets_matched = 0;    // tweets tested against the standing queries
  uint64_t query_tests = 0;       // (tweet, query) pairs evaluated
  uint64_t catch_ups = 0;         // times a stream dropped to the log (overflow, backlog)
};

class StreamHub;

// One open stream. Ends when Close() is called or the hub ends it.
class Subscription {
 public:
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // The position it started after: the id of its first ("ready") event.
  uint64_t start() const { return start_; }
  // For a resumed stream whose resume point was trimmed from the log: the last id asked for
  // (events after it up to start() were lost).
  std::optional<uint64_t> gap_after() const { return gap_after_; }

  // `wake` is called (on the matcher's thread, briefly) when events become available or the
  // stream ends. Set before the first Next().
  void OnReady(std::function<void()> wake);

  struct Batch {
    std::vector<StreamEvent> events;  // in id order
    bool more = false;                // call again at once (it is catching up from the log)
  };
  // The next events, at most `max`; none if nothing is waiting (then `wake` says when).
  // While catching up it reads the log (may block on disk). Returns the reason once the stream
  // has ended: Unavailable at shutdown, DataLoss if the log was trimmed past it.
  absl::StatusOr<Batch> Next(size_t max);
  // Ends the stream; the hub forgets it.
  void Close();

 private:
  friend class StreamHub;
  struct Standing;
  Subscription(StreamHub& hub, uint64_t start) : hub_(hub), start_(start) {}

  StreamHub& hub_;
  const uint64_t start_;
  std::optional<uint64_t> gap_after_;
  Standing* standing_ = nullptr;  // guarded by the hub's mutex
  query::Plan plan_;              // immutable once subscribed

  // std::mutex rather than absl::Mutex here and in the hub: ThreadSanitizer sees its ordering
  // (Debian's Abseil is not built with it). Taken after the hub's.
  std::mutex mu_;
  std::deque<StreamEvent> queue_;  // guarded by mu_, as the fields below
  bool from_log_ = false;          // catching up: the matcher skips it
  uint64_t log_after_ = 0;
  uint64_t live_after_ = 0;  // live events at or below it are duplicates
  absl::Status ended_;
  bool closed_ = false;
  std::function<void()> wake_;
};

class StreamHub {
 public:
  // `rarity` ranks terms for filing queries (the index's document frequency); `log` and
  // `analyzer` must outlive the hub. `position` is the last change already applied.
  StreamHub(const analysis::Analyzer& analyzer, const ChangeLog& log, uint64_t position,
            std::function<uint64_t(std::string_view)> rarity, StreamHubOptions options = {});
  // Ends every stream (Unavailable) and stops the matcher.
  ~StreamHub();
  StreamHub(const StreamHub&) = delete;
  StreamHub& operator=(const StreamHub&) = delete;

  // Whether any stream is open (the write path then publishes tweets, else Advance()).
  bool wanted() const { return open_.load(std::memory_order_acquire) > 0; }
  // The changes of one write, in sequence order, durable and searchable; `through` is the
  // write's last sequence (likes changes take sequences too).
  void Publish(std::vector<StreamChange> changes, uint64_t through) {
    Push(std::move(changes), through, true);
  }
  // A write whose tweets were not published (no stream was open when it was made): streams
  // opened meanwhile read its changes from the log.
  void Advance(uint64_t through) { Push({}, through, false); }

  // Opens a stream of `plan`'s matches: new changes only, or those after `resume_after`
  // (then the log is read first). InvalidArgument for a resume point ahead of the log.
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(query::Plan plan,
                                                          std::optional<uint64_t> resume_after);

  StreamHubStats Stats() const;

 private:
  friend class Subscription;
  struct Pending {
    std::vector<StreamChange> changes;
    uint64_t through = 0;
    bool complete = true;  // `changes` hold every tweet a stream needs up to `through`
  };
  void Push(std::vector<StreamChange> changes, uint64_t through, bool complete);
  struct Analyzed;

  void Run();
  void MatchBatch(const std::vector<Analyzed>& tweets, uint64_t through, bool complete);
  void Deliver(Subscription& s, const StreamEvent& event);
  // Every live stream that wants changes up to `through` drops to the log after the current
  // position (the backlog overflowed, or a write went by unpublished). Requires mu_.
  void AllToLog(uint64_t through);
  void Unsubscribe(Subscription& s);
  // Matches changes read from the log against `s`'s plan.
  std::vector<StreamEvent> MatchLog(const Subscription& s,
                                    std::vector<storage::ReplicatedChange>& changes) const;

  const analysis::Analyzer& analyzer_;
  const ChangeLog& log_;
  const std::function<uint64_t(std::string_view)> rarity_;
  const StreamHubOptions options_;

  // Guards the fields below it up to queue_mu_.
  mutable std::mutex mu_;
  uint64_t position_;
  std::vector<Subscription*> subs_;
  absl::flat_hash_map<std::string, std::unique_ptr<Subscription::Standing>> by_key_;
  absl::flat_hash_map<std::string, std::vector<Subscription::Standing*>> by_term_;
  uint64_t stamp_ = 0;
  std::atomic<uint64_t> open_{0};

  // Guards the matcher's queue (never taken with mu_).
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending> queue_;
  size_t queued_changes_ = 0;
  bool stop_ = false;

  std::atomic<uint64_t> events_{0}, tweets_matched_{0}, query_tests_{0}, catch_ups_{0};
  std::thread matcher_;
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_STREAM_HUB_H_
