// FrontDoor: what every API call does, whatever transport carried it (HTTP or gRPC).
//
// Each call: authenticate the api_dev_key for the call's scope; pass the admission gate (where
// the quota limiter sits; it runs before any search or ingest work); validate; do the work on
// the Engine; shape the answer. Errors are absl::Status values with canonical codes, which the
// transports map to HTTP statuses and gRPC codes (see HttpStatusFor).
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_FRONT_DOOR_H_
#define TWEETSEARCH_AGGREGATOR_FRONT_DOOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/api_keys.h"
#include "aggregator/backend.h"
#include "aggregator/live_stream.h"
#include "aggregator/page_token.h"
#include "usage/usage_recorder.h"
#include "usage/usage_store.h"

namespace tweetsearch::aggregator {

inline constexpr uint32_t kDefaultResults = 20;
inline constexpr uint32_t kMaxResults = 100;
// Most tweets (lines) in one ingest call. Parsed tweets cost many times their text (measured:
// a 52 MB body of 4,000,000 minimal lines took 3.7 GB), so a call's memory is bounded by its
// line count as well as its bytes. Bulk loaders send batches (tweetctl: 2,000 lines).
inline constexpr size_t kMaxIngestTweets = 100'000;

// kStreamEvents: events pushed to a stream (cost: the events).
enum class Endpoint { kSearch, kIngest, kRead, kWrite, kAdmin, kStreamEvents };

// What a transport knows about a call, and what the front door hands back for its answer.
struct CallContext {
  std::string client_ip;  // in: the peer's address, for limits on requests without a key
  // in: a write's Idempotency-Key (aggregator/idempotency.h); empty: none
  std::string idempotency_key;
  bool replayed = false;   // out: an earlier attempt of this idempotent write answered
  std::string key_id;      // out: the caller's key id once authenticated (for usage counts)
  std::string limited_by;  // out: the limit that refused the call, if one did
  // out: headers for the answer (quota: X-Ratelimit-*, RateLimit-Policy, RateLimit, and
  // Retry-After when refused; Idempotent-Replayed: true), whatever the outcome.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Where the quota limiter plugs in. Admit() is called after authentication and before any
// work, with the request's cost (1, or the number of lines of a bulk ingest); for a request
// without a valid key, `key` is null and the call is limited by client IP (a refusal then
// wins over the 401). A non-OK status (ResourceExhausted for "over quota") is returned to the
// caller unchanged. `call` may be null.
class AdmissionGate {
 public:
  virtual ~AdmissionGate() = default;
  virtual absl::Status Admit(const ApiKey* key, Endpoint endpoint, uint64_t cost,
                             CallContext* call) = 0;
  // The most streams `key` may hold open at once; none: no cap.
  virtual std::optional<uint32_t> MaxStreams(const ApiKey& /*key*/) { return std::nullopt; }
  // Where several front doors share the count of open streams (Redis): takes one of `key`'s
  // `cap` slots for a stream, held until the handle is destroyed. ResourceExhausted when the
  // key holds `cap` streams on all front doors together; null when the count is not shared (or
  // its store did not answer): the front door's own count is then the cap.
  virtual absl::StatusOr<std::unique_ptr<StreamSlot>> TakeStreamSlot(const ApiKey& /*key*/,
                                                                     uint32_t /*cap*/) {
    return nullptr;
  }
};

struct SearchRequest {
  std::string api_dev_key;
  std::string search_terms;
  uint32_t maximum_results_to_return = 0;  // 0: kDefaultResults
  query::SortMode sort = query::SortMode::kNewest;
  std::string page_token;  // empty for the first page
  bool highlight = false;  // fill SearchResponse::highlights
  // In a cluster, answer without the partitions that have no live replica (partial: true)
  // instead of failing with Unavailable.
  bool allow_partial = false;
  // Count every match: by default total_hits is exact up to 10,000 and otherwise says "at
  // least 10,000" (query::kTrackTotalHitsUpTo).
  bool exact_total = false;
};

// Bytes [begin, end) of a tweet's text that matched a query word.
struct TextSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool operator==(const TextSpan&) const = default;
};

struct SearchResponse {
  std::vector<SearchHit> hits;
  // With SearchRequest::highlight: per hit, the spans of its text that match the query's
  // words (not its excluded words or its from:/lang: filters), in order, not overlapping.
  std::vector<std::vector<TextSpan>> highlights;
  std::string next_page_token;  // empty when there is no further page
  uint64_t total_hits = 0;      // matches after the page token; a lower bound unless exact
  bool total_is_exact = true;
  double took_ms = 0;
  // Index partitions left out (allow_partial only): the results may miss their tweets.
  std::vector<uint32_t> missing_partitions;
  bool partial() const { return !missing_partitions.empty(); }
};

struct IngestResponse {
  std::vector<IngestOutcome> outcomes;  // one per line, in order
  uint32_t accepted = 0;
  uint32_t rejected = 0;
};

// A usage series request (GET /v1/usage).
struct UsageRequest {
  // Whose series: a key id (16 hex digits), a key prefix as listings show it, "all" (every key
  // together), "anonymous" (calls without a valid key), or empty for the caller's own key.
  // Keys without the admin scope may read their own series only.
  std::string key;
  int64_t from_s = 0;  // Unix seconds; the range is [from_s, to_s)
  int64_t to_s = 0;
  // Empty: the finest resolution that still keeps `from_s` and gives at most
  // kMaxAutoUsagePoints buckets.
  std::optional<usage::Resolution> resolution;
};
inline constexpr size_t kMaxAutoUsagePoints = 1500;

struct UsageResponse {
  std::string key_id;  // the series' key id ("all", "anonymous" or 16 hex digits)
  usage::Resolution resolution = usage::Resolution::kMinute;
  std::vector<usage::Point> points;
};

// Counts over time (GET /v1/counts): matches per minute, hour or day.
enum class Granularity { kMinute, kHour, kDay };
struct CountsRequest {
  std::string api_dev_key;
  std::string search_terms;
  Granularity granularity = Granularity::kHour;
  // The range [since_ms, until_ms), widened to whole buckets (UTC). Defaults: until now, since
  // kDefaultCountsDays before until.
  std::optional<int64_t> since_ms;
  std::optional<int64_t> until_ms;
  bool allow_partial = false;  // as SearchRequest::allow_partial
};
inline constexpr int64_t kDefaultCountsDays = 7;

struct CountsResponse {
  query::TimeBuckets buckets;
  std::vector<uint64_t> counts;  // per bucket
  uint64_t total = 0;            // their sum
  double took_ms = 0;
  std::vector<uint32_t> missing_partitions;
};

// "minute", "hour" or "day".
absl::StatusOr<Granularity> ParseGranularity(std::string_view text);
std::string_view GranularityName(Granularity granularity);
int64_t GranularityMillis(Granularity granularity);

// "0"/"newest", "1"/"best_match"/"relevance", "2"/"most_liked"/"likes".
absl::StatusOr<query::SortMode> ParseSortMode(std::string_view text);
std::string_view SortModeName(query::SortMode mode);

// The HTTP status for a Status code (400, 401, 403, 404, 409, 429, 501, 503, 504, else 500).
int HttpStatusFor(const absl::Status& status);
// "invalid_argument", "unauthenticated", ... for the JSON error body.
std::string ErrorCodeName(const absl::Status& status);

class FrontDoor {
 public:
  // `backend` and `keys` must outlive the front door.
  FrontDoor(Backend& backend, KeyRegistry& keys, PageTokenCodec tokens);

  // Installs the admission gate (the limiter); null for none. Not thread-safe: call it before
  // serving.
  void set_gate(std::shared_ptr<AdmissionGate> gate) { gate_ = std::move(gate); }

  absl::StatusOr<SearchResponse> Search(const SearchRequest& request,
                                        CallContext* call = nullptr) const;
  // The same search, without waiting on the backend (Backend::StartSearch): `done` runs once
  // with the answer, here when the request is refused before any search, else on whichever
  // thread the backend answers on; it must not block. `request` and `call` need live only
  // until this returns.
  using SearchDone = absl::AnyInvocable<void(absl::StatusOr<SearchResponse>) &&>;
  void StartSearch(const SearchRequest& request, CallContext* call, SearchDone done) const;
  // A count over time costs one search of the quota (scope search).
  absl::StatusOr<CountsResponse> Counts(const CountsRequest& request,
                                        CallContext* call = nullptr) const;
  // `lines` holds one parsed tweet or parse error per input line; parse errors are reported as
  // rejections of their line.
  absl::StatusOr<IngestResponse> Ingest(std::string_view api_dev_key,
                                        std::vector<absl::StatusOr<NewTweet>> lines,
                                        CallContext* call = nullptr) const;
  // Opens a stream of the query's new matches (live_stream.h). Unimplemented where the backend
  // serves no streams; ResourceExhausted when the key holds its max_streams open already;
  // InvalidArgument for a bad query or event id.
  absl::StatusOr<std::unique_ptr<LiveStream>> OpenStream(const StreamRequest& request,
                                                         CallContext* call = nullptr) const;
  absl::StatusOr<storage::StoredTweet> Get(std::string_view api_dev_key, TweetId id,
                                           CallContext* call = nullptr) const;
  absl::Status Delete(std::string_view api_dev_key, TweetId id, CallContext* call = nullptr) const;
  absl::StatusOr<uint32_t> Likes(std::string_view api_dev_key, TweetId id, int64_t value, bool add,
                                 CallContext* call = nullptr) const;

  // Key administration (admin scope).
  // Makes a random key, or registers `chosen` when it is not empty (front doors that must accept
  // the same keys, until the cluster shares one registry). With the call's idempotency key, the
  // key made is KeyForRetries(admin key, idempotency key) (or `chosen`), and a retry that finds
  // it made with the same owner, tier and scopes answers it again, marked replayed;
  // FailedPrecondition if it was made for another request. Revoking a key that a retry finds
  // revoked already is answered as done, marked replayed.
  absl::StatusOr<std::string> CreateKey(std::string_view api_dev_key, std::string_view owner,
                                        std::string_view tier, uint8_t scopes,
                                        CallContext* call = nullptr,
                                        std::string_view chosen = {}) const;
  absl::StatusOr<std::vector<ApiKey>> ListKeys(std::string_view api_dev_key,
                                               CallContext* call = nullptr) const;
  absl::Status RevokeKey(std::string_view api_dev_key, std::string_view key_or_prefix,
                         CallContext* call = nullptr) const;

  // Usage series (needs set_usage_store). Any valid key may ask for its own series; "all",
  // "anonymous" and other keys need the admin scope.
  absl::StatusOr<UsageResponse> Usage(std::string_view api_dev_key, const UsageRequest& request,
                                      CallContext* call = nullptr) const;
  // Where usage series are read from; null (the default) answers Usage() with Unimplemented.
  // Not thread-safe: call it before serving.
  void set_usage_store(const usage::UsageStore* store) { usage_ = store; }

  // The id of a registered, unrevoked key; empty otherwise. For attributing calls refused
  // before authentication (malformed requests) to their key.
  std::string KeyIdOf(std::string_view api_dev_key) const;

  // Authenticates for `scope` and passes the gate. Public for transports' own admin calls.
  absl::StatusOr<ApiKey> Authorize(std::string_view api_dev_key, Scope scope, Endpoint endpoint,
                                   uint64_t cost, CallContext* call = nullptr) const;

  Backend& backend() const { return backend_; }

 private:
  Backend& backend_;
  KeyRegistry& keys_;
  const PageTokenCodec tokens_;
  std::shared_ptr<AdmissionGate> gate_;
  const usage::UsageStore* usage_ = nullptr;
  // Open streams per key id (live_stream.cc).
  friend class LiveStream;
  mutable absl::Mutex streams_mu_;
  mutable absl::flat_hash_map<std::string, uint32_t> open_streams_ ABSL_GUARDED_BY(streams_mu_);

  // A search admitted, planned and paged, as the backend gets it (front_door.cc).
  struct PlannedSearch;
  absl::StatusOr<std::unique_ptr<PlannedSearch>> PlanSearch(const SearchRequest& request,
                                                            CallContext* call) const;
  // Best match: the collection's statistics (those of the page token's first page, if any)
  // into `search`.
  absl::Status UseStats(PlannedSearch& search,
                        absl::StatusOr<query::CollectionStats> collected) const;
  // StartSearch() once the search is planned (and its statistics are in).
  void SearchPlanned(std::unique_ptr<PlannedSearch> search, SearchDone done) const;
  // The answer to `search` from what the backend found: hits, next page token, highlights.
  absl::StatusOr<SearchResponse> AnswerSearch(const PlannedSearch& search,
                                              absl::StatusOr<SearchOutcome> outcome) const;

  // The rest of Authorize() once the key is looked up: key id into `call`, then the gate
  // (callers without a valid key are limited per IP, and a refusal wins over the 401).
  absl::StatusOr<ApiKey> Admit(absl::StatusOr<ApiKey> key, Endpoint endpoint, uint64_t cost,
                               CallContext* call) const;
};

// Counts a finished call in `usage` (nothing when null): for its key (kAnonymousKey without a
// valid one), with the outcome `http_status` means and the refusing limit, and for an answered
// search its latency. Every transport calls it once per call.
void RecordUsage(usage::UsageRecorder* usage, const CallContext& call, bool is_search,
                 int http_status, std::chrono::nanoseconds elapsed);

// Parses a decimal tweet id. InvalidArgument if it is not one.
absl::StatusOr<TweetId> ParseTweetId(std::string_view text);
// InvalidArgument: an ingest call over kMaxIngestTweets.
absl::Status TooManyTweets(size_t lines);

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_FRONT_DOOR_H_
