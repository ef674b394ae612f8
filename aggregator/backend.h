// Backend: what the front door needs from the rest of the service, in either
// shape.
//
// In one process it is the Engine (storage and index together,
// aggregator/engine.h); in a cluster it is the ClusterBackend
// (cluster/cluster_backend.h), which routes writes to storage primaries and
// fans searches out to index partitions over gRPC. The front door's logic
// (authentication, quotas, validation, paging, highlighting) is the same for
// both.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_BACKEND_H_
#define TWEETSEARCH_AGGREGATOR_BACKEND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "aggregator/stream_feed.h"
#include "common/clock.h"
#include "common/ids.h"
#include "common/synthetic.h"
#include "indexer/analysis/analyzer.h"
#include "indexer/query/plan.h"
#include "indexer/query/searcher.h"
#include "storage/tweet_store.h"

namespace tweetsearch::aggregator {

// A tweet offered for ingest.
struct NewTweet {
  std::optional<TweetId> id;  // absent: a snowflake id is assigned
  UserId user_id = 0;
  std::string user_name;
  std::string text;
  std::optional<int64_t> created_at_ms;  // absent: the time of a snowflake id, else now
  std::string lang;
  uint32_t likes = 0;
};

// A generated tweet (the sample, the benchmarks) as offered for ingest, with its id.
NewTweet ToNewTweet(SyntheticTweet t);

// The answer for one offered tweet: its id when accepted, or why it was
// rejected (InvalidArgument for bad fields, AlreadyExists for a duplicate id,
// Unavailable when it could not be stored).
struct IngestOutcome {
  absl::Status status;
  TweetId id = 0;
};

// A write made with an idempotency key (HTTP's Idempotency-Key header, gRPC's
// idempotency_key): a retry within a day is answered as the first attempt was and changes
// nothing (storage/write_records.h); the same key for another request is FailedPrecondition.
struct WriteOnce {
  std::string key;          // whose and which: the caller's key id, '/', and the client's key
  std::string fingerprint;  // what was asked (idempotency.h)
  bool replayed = false;    // out: an earlier attempt answered, and nothing was written
  // out (ingest): not OK when the call failed as a whole, with no outcome its own: the key
  // answers another request (FailedPrecondition), or its record could not be read or stored.
  absl::Status status;
};

// InvalidArgument naming the field when `t` cannot be stored: text missing,
// over `max_text_bytes` or not UTF-8; user_name over 64 bytes or not UTF-8;
// lang not a language code; id 0.
absl::Status ValidateNewTweet(const NewTweet& t, size_t max_text_bytes);
// The tweet to store for `t` with `id`: created_at is the given time, else the
// id's time when the id was assigned here (`t.id` absent), else now.
storage::StoredTweet ToStoredTweet(NewTweet&& t, TweetId id, const Clock& clock);

// A search result: where it ranked (hit.likes is the current like count; the
// stored tweet's may be older) and the tweet itself, shared with the cache
// (never null).
struct SearchHit {
  query::Hit hit;
  std::shared_ptr<const storage::StoredTweet> tweet;
};

// One search as the front door hands it on.
struct SearchCall {
  std::string_view search_terms;
  const query::Plan* plan = nullptr;  // search_terms planned with the backend's analyzer
  query::SearchOptions options;
  bool allow_partial = false;  // answer without partitions that have no live replica
};

// One stream as the front door opens it.
struct StreamCall {
  std::string_view search_terms;
  const query::Plan* plan = nullptr;  // search_terms planned with the backend's analyzer
  std::string_view last_event_id;     // empty: only the changes acknowledged from now on
};

struct SearchOutcome {
  std::vector<SearchHit> hits;  // at most options.limit, in sort order, hydrated
  uint64_t total_hits = 0;
  bool total_is_exact = true;
  TweetId max_id = 0;                        // the largest id the searched partitions held (a new
                                             // first page's watermark)
  std::vector<uint32_t> missing_partitions;  // with allow_partial: partitions not searched
};

// One count over time as the front door hands it on (GET /v1/counts).
struct CountsCall {
  std::string_view search_terms;
  const query::Plan* plan = nullptr;  // search_terms planned with the backend's analyzer
  query::TimeBuckets buckets;
  bool allow_partial = false;  // answer without partitions that have no live replica
};

struct CountsOutcome {
  std::vector<uint64_t> counts;              // per bucket: the matching tweets created in it
  std::vector<uint32_t> missing_partitions;  // with allow_partial: partitions not counted
};

// One storage partition's replication, as its primary reports it (cluster only).
struct StoragePartitionStats {
  uint32_t partition = 0;
  bool has_primary = false;  // a replica answered as primary
  uint64_t epoch = 0;        // the primary's term
  bool secondary_in_sync = false;
  // Writes the current primary acknowledged on itself alone, since it started.
  uint64_t single_replica_writes = 0;
};

// What a front door has seen of one replica it reads from (cluster only).
struct ReplicaStats {
  std::string role;  // "index" or "storage"
  uint32_t partition = 0;
  std::string node;
  bool ejected = false;
  uint64_t ejections = 0;       // since start
  uint64_t hedges = 0;          // calls to it hedged to another replica
  uint64_t hedges_refused = 0;  // calls to it past the hedge delay, not hedged: over budget
  bool listed = false;  // index replicas: etcd lists it as serving, in this front door's view
};

struct HedgeDelayStats {
  std::string role;
  uint32_t partition = 0;
  double seconds = 0;
};

struct EngineStats {
  uint64_t indexed_documents = 0;
  uint64_t index_memory_bytes = 0;  // heap
  uint64_t index_mapped_bytes = 0;  // segment files served from mappings
  uint64_t index_damaged_segments = 0;
  uint64_t sealed_segments = 0;
  uint64_t stored_tweets_estimate = 0;
  uint64_t storage_disk_bytes = 0;
  uint64_t tweets_ingested = 0;  // accepted since start
  uint64_t tweets_rejected = 0;
  uint64_t write_groups = 0;  // synced store writes made by ingest
  uint64_t last_change = 0;
  uint64_t checkpoint_change = 0;
  uint64_t checkpoint_failures = 0;  // failed checkpoints since start (one process only)
  uint64_t tweet_cache_hits = 0;
  uint64_t tweet_cache_misses = 0;
  uint64_t tweet_cache_bytes = 0;
  std::vector<StoragePartitionStats> storage_partitions;  // empty in one process
  std::vector<ReplicaStats> replicas;                     // empty in one process
  std::vector<HedgeDelayStats> hedge_delays;              // empty in one process
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Ingests `tweets` with one outcome each, in order. Accepted tweets are
  // durable and searchable when this returns. With `once`, the write is idempotent (WriteOnce);
  // a call whose answer is lost may then be repeated.
  virtual std::vector<IngestOutcome> Ingest(std::vector<NewTweet> tweets, WriteOnce* once) = 0;
  // NotFound if the tweet is not stored.
  virtual absl::Status Delete(TweetId id, WriteOnce* once) = 0;
  // Sets (`add` false) or adds to (`add` true; clamped at 0 and 2^32-1) a
  // tweet's likes and returns the new value. NotFound if the tweet is not
  // stored.
  virtual absl::StatusOr<uint32_t> Likes(TweetId id, int64_t value, bool add, WriteOnce* once) = 0;
  // The same, without an idempotency key.
  std::vector<IngestOutcome> Ingest(std::vector<NewTweet> tweets) {
    return Ingest(std::move(tweets), nullptr);
  }
  absl::Status Delete(TweetId id) { return Delete(id, nullptr); }
  absl::StatusOr<uint32_t> Likes(TweetId id, int64_t value, bool add) {
    return Likes(id, value, add, nullptr);
  }
  virtual absl::StatusOr<storage::StoredTweet> Get(TweetId id) const = 0;

  // Runs a search and hydrates its hits (hits deleted meanwhile are dropped).
  // Unavailable when a partition has no live replica and partial answers were
  // not allowed.
  virtual absl::StatusOr<SearchOutcome> RunSearch(const SearchCall& call) const = 0;
  // RunSearch without waiting: `done` runs once with the answer, on this thread or on
  // another (it must not block). `call` and what it points to need live only until this
  // returns. By default RunSearch, here: a backend whose search waits on nothing but its own
  // work (the Engine) gains nothing from handing it on.
  using SearchDone = absl::AnyInvocable<void(absl::StatusOr<SearchOutcome>) &&>;
  virtual void StartSearch(const SearchCall& call, SearchDone done) const {
    std::move(done)(RunSearch(call));
  }
  // Counts the tweets matching `call`'s query per time bucket, exactly (every visible tweet).
  // InvalidArgument for bad buckets; Unavailable as RunSearch.
  virtual absl::StatusOr<CountsOutcome> RunCounts(const CountsCall& call) const = 0;
  // The best-match statistics of the whole collection for `call`'s terms.
  virtual absl::StatusOr<query::CollectionStats> CollectStats(const SearchCall& call) const = 0;
  // CollectStats without waiting, as StartSearch. By default CollectStats, here.
  using StatsDone = absl::AnyInvocable<void(absl::StatusOr<query::CollectionStats>) &&>;
  virtual void StartCollectStats(const SearchCall& call, StatsDone done) const {
    std::move(done)(CollectStats(call));
  }
  // The watermark of a new first page: the largest visible id, or kMaxTweetId
  // when the backend learns it from the search itself (SearchOutcome::max_id).
  virtual TweetId Watermark() const = 0;

  virtual const analysis::Analyzer& analyzer() const = 0;
  virtual const Clock& clock() const = 0;
  virtual EngineStats Stats() const = 0;
  // Tweets accepted since start.
  virtual uint64_t tweets_ingested() const = 0;
  // Opens a stream of the call's matches (GET /v1/stream; aggregator/stream_feed.h): the changes
  // acknowledged from now on, or those after its last event id when it has one.
  // InvalidArgument for an id this server did not give; Unimplemented where streams are not
  // served.
  virtual absl::StatusOr<std::unique_ptr<StreamFeed>> OpenStream(const StreamCall& /*call*/) {
    return absl::UnimplementedError("this server does not serve streams");
  }
  // The streams' figures (for /metrics); none where streams are not served.
  virtual std::optional<StreamHubStats> StreamStats() const { return std::nullopt; }
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_BACKEND_H_
