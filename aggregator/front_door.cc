#include "aggregator/front_door.h"

#include <chrono>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "aggregator/idempotency.h"
#include "aggregator/key_table.h"
#include "common/strings.h"
#include "common/utf8.h"
#include "indexer/analysis/analyzer.h"
#include "indexer/query/plan.h"
#include "storage/tweet_store.h"

namespace tweetsearch::aggregator {

absl::StatusOr<query::SortMode> ParseSortMode(std::string_view text) {
  if (text.empty() || text == "0" || text == "newest") return query::SortMode::kNewest;
  if (text == "1" || text == "best_match" || text == "relevance") {
    return query::SortMode::kBestMatch;
  }
  if (text == "2" || text == "most_liked" || text == "likes") return query::SortMode::kMostLiked;
  return absl::InvalidArgumentError(StrCat(
      "sort must be 0 (newest), 1 (best_match) or 2 (most_liked), not '", text.substr(0, 32), "'"));
}

namespace {

struct GranularityRow {
  Granularity granularity;
  std::string_view name;
  int64_t millis;
};
constexpr GranularityRow kGranularities[] = {{Granularity::kMinute, "minute", 60'000},
                                             {Granularity::kHour, "hour", 3'600'000},
                                             {Granularity::kDay, "day", 86'400'000}};

const GranularityRow& RowOf(Granularity granularity) {
  for (const GranularityRow& row : kGranularities) {
    if (row.granularity == granularity) return row;
  }
  return kGranularities[1];
}

}  // namespace

absl::StatusOr<Granularity> ParseGranularity(std::string_view text) {
  for (const GranularityRow& row : kGranularities) {
    if (row.name == text) return row.granularity;
  }
  return absl::InvalidArgumentError(
      StrCat("granularity must be minute, hour or day, not '", text.substr(0, 32), "'"));
}

std::string_view GranularityName(Granularity granularity) { return RowOf(granularity).name; }

int64_t GranularityMillis(Granularity granularity) { return RowOf(granularity).millis; }

std::string_view SortModeName(query::SortMode mode) {
  switch (mode) {
    case query::SortMode::kNewest:
      return "newest";
    case query::SortMode::kBestMatch:
      return "best_match";
    case query::SortMode::kMostLiked:
      return "most_liked";
  }
  return "?";
}

int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:  // a conflict with another change: try again
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorCodeName(const absl::Status& status) {
  std::string name = absl::StatusCodeToString(status.code());
  for (char& c : name) c = c == ' ' ? '_' : static_cast<char>(std::tolower(c));
  return name;
}

namespace {

// The statistics' terms in bytewise order: the order doc frequencies travel in tokens.
std::vector<std::pair<std::string, uint64_t>> SortedTerms(const query::CollectionStats& stats) {
  std::vector<std::pair<std::string, uint64_t>> terms(stats.doc_freq.begin(), stats.doc_freq.end());
  std::sort(terms.begin(), terms.end());
  return terms;
}

// Replaces `stats` (computed now, for the query's terms) with the values page 1 used.
absl::Status ApplyTokenStats(const PageCursor& cursor, query::CollectionStats* stats) {
  std::vector<std::pair<std::string, uint64_t>> terms = SortedTerms(*stats);
  if (!cursor.has_stats || cursor.doc_freqs.size() != terms.size() || cursor.avg_length < 1) {
    return absl::InvalidArgumentError("invalid page_token: its scoring statistics do not fit");
  }
  stats->num_docs = cursor.num_docs;
  stats->avg_length = cursor.avg_length;
  for (size_t i = 0; i < terms.size(); ++i) stats->doc_freq[terms[i].first] = cursor.doc_freqs[i];
  return absl::OkStatus();
}

// The index terms a query looks for (what a highlighter marks): terms and phrase words, but
// not excluded ones nor unscored filters (from:, lang:).
void CollectHighlightTerms(const query::PlanNode& node, absl::flat_hash_set<std::string>* out) {
  switch (node.kind) {
    case query::PlanNode::Kind::kTerm:
      if (node.scored) out->insert(node.term);
      break;
    case query::PlanNode::Kind::kPhrase:
      out->insert(node.phrase_terms.begin(), node.phrase_terms.end());
      break;
    case query::PlanNode::Kind::kAnd:
    case query::PlanNode::Kind::kOr:
      for (const query::PlanNode& child : node.children) CollectHighlightTerms(child, out);
      break;
    case query::PlanNode::Kind::kNothing:
      break;
  }
}

}  // namespace

absl::Status TooManyTweets(size_t lines) {
  return absl::InvalidArgumentError(StrCat("a call holds at most ", kMaxIngestTweets,
                                           " tweets (this one ", lines,
                                           "): send them in several calls"));
}

absl::StatusOr<TweetId> ParseTweetId(std::string_view text) {
  const std::optional<TweetId> id = ParseDecimal<TweetId>(text);
  if (!id.has_value()) {
    return absl::InvalidArgumentError(
        StrCat("'", SanitizeUtf8(text.substr(0, 32)),
               "' is not a tweet id (a decimal unsigned 64-bit number)"));
  }
  return *id;
}

FrontDoor::FrontDoor(Backend& backend, KeyRegistry& keys, PageTokenCodec tokens)
    : backend_(backend), keys_(keys), tokens_(std::move(tokens)) {}

absl::StatusOr<ApiKey> FrontDoor::Authorize(std::string_view api_dev_key, Scope scope,
                                            Endpoint endpoint, uint64_t cost,
                                            CallContext* call) const {
  return Admit(keys_.Authenticate(api_dev_key, scope), endpoint, cost, call);
}

absl::StatusOr<ApiKey> FrontDoor::Admit(absl::StatusOr<ApiKey> key, Endpoint endpoint,
                                        uint64_t cost, CallContext* call) const {
  if (!key.ok()) {
    // Callers without a valid key are limited per client IP: floods of guesses get 429.
    if (gate_ != nullptr && absl::IsUnauthenticated(key.status())) {
      if (absl::Status s = gate_->Admit(nullptr, endpoint, 1, call); !s.ok()) return s;
    }
    return key.status();
  }
  if (call != nullptr) call->key_id = key->id;
  if (gate_ != nullptr) {
    if (absl::Status s = gate_->Admit(&*key, endpoint, cost, call); !s.ok()) return s;
  }
  return key;
}

struct FrontDoor::PlannedSearch {
  std::chrono::steady_clock::time_point start;
  std::string search_terms;
  query::SortMode sort = query::SortMode::kNewest;
  bool highlight = false;
  bool allow_partial = false;
  uint32_t limit = 0;  // asked for; the backend is asked for one more
  uint64_t fingerprint = 0;
  query::Plan plan;
  query::SearchOptions options;
  std::optional<PageCursor> cursor;  // from the page token, if any
  query::CollectionStats stats;      // best match: options.stats points here (UseStats)

  SearchCall Call() const { return SearchCall{search_terms, &plan, options, allow_partial}; }
};

absl::StatusOr<std::unique_ptr<FrontDoor::PlannedSearch>> FrontDoor::PlanSearch(
    const SearchRequest& request, CallContext* call) const {
  auto search = std::make_unique<PlannedSearch>();
  search->start = std::chrono::steady_clock::now();
  absl::StatusOr<ApiKey> key =
      Authorize(request.api_dev_key, Scope::kSearch, Endpoint::kSearch, 1, call);
  if (!key.ok()) return key.status();
  search->limit =
      request.maximum_results_to_return == 0 ? kDefaultResults : request.maximum_results_to_return;
  if (search->limit > kMaxResults) {
    return absl::InvalidArgumentError(
        StrCat("maximum_results_to_return must be from 1 to ", kMaxResults));
  }
  absl::StatusOr<query::Plan> plan = query::PlanQuery(request.search_terms, backend_.analyzer());
  if (!plan.ok()) return plan.status();
  search->plan = *std::move(plan);
  search->search_terms = request.search_terms;
  search->sort = request.sort;
  search->highlight = request.highlight;
  search->allow_partial = request.allow_partial;
  search->fingerprint = QueryFingerprint(request.search_terms);

  query::SearchOptions& options = search->options;
  options.sort = request.sort;
  options.exact_total = request.exact_total;
  options.limit = search->limit + 1;  // one more than asked tells whether a next page exists
  if (request.page_token.empty()) {
    options.watermark = backend_.Watermark();
    options.now_ms = backend_.clock().NowUnixMillis();
  } else {
    absl::StatusOr<PageCursor> cursor = tokens_.Decode(request.page_token);
    if (!cursor.ok()) return cursor.status();
    if (cursor->query_fingerprint != search->fingerprint ||
        cursor->sort != static_cast<int>(request.sort)) {
      return absl::InvalidArgumentError(
          "invalid page_token: it belongs to another query or sort mode");
    }
    options.after = query::SortKey{cursor->primary, cursor->id};
    search->cursor = *cursor;
    options.watermark = cursor->watermark;
    options.now_ms = cursor->now_ms;
  }
  return search;
}

absl::Status FrontDoor::UseStats(PlannedSearch& search,
                                 absl::StatusOr<query::CollectionStats> collected) const {
  // Best match scores with the statistics of page 1 on every page (see page_token.h).
  if (!collected.ok()) return collected.status();
  search.stats = *std::move(collected);
  if (search.cursor.has_value()) {
    if (absl::Status s = ApplyTokenStats(*search.cursor, &search.stats); !s.ok()) return s;
  }
  search.options.stats = &search.stats;
  return absl::OkStatus();
}

absl::StatusOr<SearchResponse> FrontDoor::AnswerSearch(
    const PlannedSearch& search, absl::StatusOr<SearchOutcome> outcome) const {
  if (!outcome.ok()) return outcome.status();
  SearchResponse response;
  response.hits = std::move(outcome->hits);
  response.total_hits = outcome->total_hits;
  response.total_is_exact = outcome->total_is_exact;
  response.missing_partitions = std::move(outcome->missing_partitions);
  const query::SearchOptions& options = search.options;
  // A backend that learns the watermark from the search itself (a cluster) fixes it now.
  const TweetId watermark = options.watermark == kMaxTweetId ? outcome->max_id : options.watermark;
  if (response.hits.size() > search.limit) {
    response.hits.resize(search.limit);
    const query::SortKey& last = response.hits.back().hit.key;
    PageCursor next;
    next.sort = static_cast<int>(search.sort);
    next.primary = last.primary;
    next.id = last.id;
    next.watermark = watermark;
    next.now_ms = options.now_ms;
    next.query_fingerprint = search.fingerprint;
    if (options.stats != nullptr) {
      next.has_stats = true;
      next.num_docs = search.stats.num_docs;
      next.avg_length = search.stats.avg_length;
      for (const auto& [term, df] : SortedTerms(search.stats)) next.doc_freqs.push_back(df);
    }
    response.next_page_token = tokens_.Encode(next);
  }
  if (search.highlight) {
    absl::flat_hash_set<std::string> terms;
    CollectHighlightTerms(search.plan.root, &terms);
    response.highlights.reserve(response.hits.size());
    std::vector<analysis::Token> tokens;
    for (const SearchHit& h : response.hits) {
      std::vector<TextSpan>& spans = response.highlights.emplace_back();
      tokens.clear();
      if (!backend_.analyzer().Analyze(h.tweet->text, &tokens).ok()) continue;
      for (const analysis::Token& t : tokens) {
        if (!terms.contains(t.text)) continue;
        if (!spans.empty() && t.begin < spans.back().end) continue;  // one URL, several hosts
        spans.push_back(TextSpan{t.begin, t.end});
      }
    }
  }
  response.took_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - search.start)
          .count();
  return response;
}

absl::StatusOr<SearchResponse> FrontDoor::Search(const SearchRequest& request,
                                                 CallContext* call) const {
  absl::StatusOr<std::unique_ptr<PlannedSearch>> search = PlanSearch(request, call);
  if (!search.ok()) return search.status();
  if (request.sort == query::SortMode::kBestMatch) {
    absl::Status s = UseStats(**search, backend_.CollectStats((*search)->Call()));
    if (!s.ok()) return s;
  }
  return AnswerSearch(**search, backend_.RunSearch((*search)->Call()));
}

void FrontDoor::StartSearch(const SearchRequest& request, CallContext* call,
                            SearchDone done) const {
  absl::StatusOr<std::unique_ptr<PlannedSearch>> planned = PlanSearch(request, call);
  if (!planned.ok()) return std::move(done)(planned.status());
  if (request.sort != query::SortMode::kBestMatch) {
    return SearchPlanned(*std::move(planned), std::move(done));
  }
  // The backend's SearchCall points into the plan; it is read before the Start calls return.
  const SearchCall stats_call = (*planned)->Call();
  backend_.StartCollectStats(
      stats_call, [this, search = *std::move(planned), done = std::move(done)](
                      absl::StatusOr<query::CollectionStats> collected) mutable {
        if (absl::Status s = UseStats(*search, std::move(collected)); !s.ok()) {
          return std::move(done)(s);
        }
        SearchPlanned(std::move(search), std::move(done));
      });
}

void FrontDoor::SearchPlanned(std::unique_ptr<PlannedSearch> search, SearchDone done) const {
  const SearchCall backend_call = search->Call();
  backend_.StartSearch(backend_call, [this, search = std::move(search), done = std::move(done)](
                                         absl::StatusOr<SearchOutcome> outcome) mutable {
    std::move(done)(AnswerSearch(*search, std::move(outcome)));
  });
}

namespace {

// Times a count may name: from 1970 to the end of 9999 (RFC 3339's years), in milliseconds.
constexpr int64_t kLatestMillis = 253'402'300'800'000;

// The buckets of `request`'s range, widened to whole buckets of its granularity.
absl::StatusOr<query::TimeBuckets> BucketsOf(const CountsRequest& request, int64_t now_ms) {
  const int64_t width = GranularityMillis(request.granularity);
  const int64_t until = request.until_ms.value_or(now_ms);
  const int64_t since = request.since_ms.value_or(until - kDefaultCountsDays * 86'400'000);
  for (auto [name, t] : {std::pair{"since", since}, std::pair{"until", until}}) {
    if (t < 0 || t >= kLatestMillis) {
      return absl::InvalidArgumentError(StrCat(name, " must lie from 1970 to 9999"));
    }
  }
  if (since >= until) return absl::InvalidArgumentError("since must be before until");
  query::TimeBuckets buckets;
  buckets.width_ms = width;
  buckets.start_ms = since / width * width;
  const int64_t end = (until + width - 1) / width * width;
  const int64_t count = (end - buckets.start_ms) / width;
  if (count > query::kMaxTimeBuckets) {
    return absl::InvalidArgumentError(StrCat(
        "the range holds ", count, " ", GranularityName(request.granularity), " buckets; at most ",
        query::kMaxTimeBuckets, ": narrow since and until, or choose a coarser granularity"));
  }
  buckets.count = static_cast<uint32_t>(count);
  return buckets;
}

}  // namespace

absl::StatusOr<CountsResponse> FrontDoor::Counts(const CountsRequest& request,
                                                 CallContext* call) const {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ApiKey> key =
      Authorize(request.api_dev_key, Scope::kSearch, Endpoint::kSearch, 1, call);
  if (!key.ok()) return key.status();
  absl::StatusOr<query::TimeBuckets> buckets = BucketsOf(request, backend_.clock().NowUnixMillis());
  if (!buckets.ok()) return buckets.status();
  absl::StatusOr<query::Plan> plan = query::PlanQuery(request.search_terms, backend_.analyzer());
  if (!plan.ok()) return plan.status();
  absl::StatusOr<CountsOutcome> outcome =
      backend_.RunCounts(CountsCall{request.search_terms, &*plan, *buckets, request.allow_partial});
  if (!outcome.ok()) return outcome.status();
  CountsResponse response;
  response.buckets = *buckets;
  response.counts = std::move(outcome->counts);
  for (uint64_t n : response.counts) response.total += n;
  response.missing_partitions = std::move(outcome->missing_partitions);
  response.took_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return response;
}

namespace {

// The call's idempotency key, checked and scoped to `key`, with the fingerprint `hash` makes;
// none without one.
template <typename Hash>
absl::StatusOr<std::optional<WriteOnce>> OnceOf(const CallContext* call, const ApiKey& key,
                                                Hash hash) {
  if (call == nullptr || call->idempotency_key.empty()) return std::optional<WriteOnce>();
  if (absl::Status s = CheckIdempotencyKey(call->idempotency_key); !s.ok()) return s;
  return std::optional<WriteOnce>(MakeWriteOnce(key.id, call->idempotency_key, hash()));
}

// Marks the call's answer as the one an earlier attempt got.
void MarkReplayed(CallContext* call) {
  call->replayed = true;
  call->headers.emplace_back("Idempotent-Replayed", "true");
}

void NoteReplayed(const WriteOnce& once, CallContext* call) {
  if (once.replayed && call != nullptr) MarkReplayed(call);
}

}  // namespace

absl::StatusOr<IngestResponse> FrontDoor::Ingest(std::string_view api_dev_key,
                                                 std::vector<absl::StatusOr<NewTweet>> lines,
                                                 CallContext* call) const {
  absl::StatusOr<ApiKey> key = Authorize(api_dev_key, Scope::kIngest, Endpoint::kIngest,
                                         std::max<size_t>(1, lines.size()), call);
  if (!key.ok()) return key.status();
  if (lines.size() > kMaxIngestTweets) return TooManyTweets(lines.size());
  absl::StatusOr<std::optional<WriteOnce>> once =
      OnceOf(call, *key, [&] { return IngestFingerprint(lines); });
  if (!once.ok()) return once.status();
  IngestResponse response;
  response.outcomes.resize(lines.size());
  std::vector<NewTweet> tweets;
  std::vector<size_t> line_of;
  tweets.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].ok()) {
      tweets.push_back(*std::move(lines[i]));
      line_of.push_back(i);
    } else {
      response.outcomes[i].status = lines[i].status();
    }
  }
  std::vector<IngestOutcome> outcomes =
      backend_.Ingest(std::move(tweets), once->has_value() ? &**once : nullptr);
  if (once->has_value()) {
    if (!(*once)->status.ok()) return (*once)->status;
    NoteReplayed(**once, call);
  }
  for (size_t j = 0; j < outcomes.size(); ++j) response.outcomes[line_of[j]] = outcomes[j];
  for (const IngestOutcome& o : response.outcomes)
    ++(o.status.ok() ? response.accepted : response.rejected);
  return response;
}

absl::StatusOr<storage::StoredTweet> FrontDoor::Get(std::string_view api_dev_key, TweetId id,
                                                    CallContext* call) const {
  if (absl::StatusOr<ApiKey> key = Authorize(api_dev_key, Scope::kSearch, Endpoint::kRead, 1, call);
      !key.ok()) {
    return key.status();
  }
  return backend_.Get(id);
}

absl::Status FrontDoor::Delete(std::string_view api_dev_key, TweetId id, CallContext* call) const {
  absl::StatusOr<ApiKey> key = Authorize(api_dev_key, Scope::kIngest, Endpoint::kWrite, 1, call);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::optional<WriteOnce>> once =
      OnceOf(call, *key, [&] { return DeleteFingerprint(id); });
  if (!once.ok()) return once.status();
  absl::Status s = backend_.Delete(id, once->has_value() ? &**once : nullptr);
  if (once->has_value()) NoteReplayed(**once, call);
  return s;
}

absl::StatusOr<uint32_t> FrontDoor::Likes(std::string_view api_dev_key, TweetId id, int64_t value,
                                          bool add, CallContext* call) const {
  absl::StatusOr<ApiKey> key = Authorize(api_dev_key, Scope::kIngest, Endpoint::kWrite, 1, call);
  if (!key.ok()) return key.status();
  if (absl::Status s = storage::CheckLikesChange(value, add); !s.ok()) return s;
  absl::StatusOr<std::optional<WriteOnce>> once =
      OnceOf(call, *key, [&] { return LikesFingerprint(id, value, add); });
  if (!once.ok()) return once.status();
  absl::StatusOr<uint32_t> likes =
      backend_.Likes(id, value, add, once->has_value() ? &**once : nullptr);
  if (once->has_value()) NoteReplayed(**once, call);
  return likes;
}

absl::StatusOr<std::string> FrontDoor::CreateKey(std::string_view api_dev_key,
                                                 std::string_view owner, std::string_view tier,
                                                 uint8_t scopes, CallContext* call,
                                                 std::string_view chosen) const {
  if (auto key = Authorize(api_dev_key, Scope::kAdmin, Endpoint::kAdmin, 1, call); !key.ok()) {
    return key.status();
  }
  if (call == nullptr || call->idempotency_key.empty()) {
    if (chosen.empty()) return keys_.Create(owner, tier, scopes);
    if (absl::Status s = keys_.Register(chosen, owner, tier, scopes); !s.ok()) return s;
    return std::string(chosen);
  }
  if (absl::Status s = CheckIdempotencyKey(call->idempotency_key); !s.ok()) return s;
  const std::string key =
      chosen.empty() ? KeyForRetries(api_dev_key, call->idempotency_key) : std::string(chosen);
  const absl::Status made = keys_.Register(key, owner, tier, scopes);
  if (!absl::IsAlreadyExists(made)) return made.ok() ? absl::StatusOr<std::string>(key) : made;
  // Made already: by an earlier attempt of this request if it holds what this one asks for
  // (the record this request would make, defaults included).
  const absl::StatusOr<ApiKey> asked = NewKeyRecord(key, owner, tier, scopes, 0);
  const std::string id = KeyIdOfHash(KeyHash(key));
  for (const ApiKey& k : keys_.List()) {
    if (k.id != id || !asked.ok()) continue;
    if (k.owner == asked->owner && k.tier == asked->tier && k.scopes == asked->scopes) {
      MarkReplayed(call);
      return key;
    }
  }
  if (!chosen.empty()) return made;
  return absl::FailedPreconditionError(
      "this Idempotency-Key made a key for another request: a key names one request");
}

absl::StatusOr<std::vector<ApiKey>> FrontDoor::ListKeys(std::string_view api_dev_key,
                                                        CallContext* call) const {
  if (auto key = Authorize(api_dev_key, Scope::kAdmin, Endpoint::kAdmin, 1, call); !key.ok()) {
    return key.status();
  }
  return keys_.List();
}

absl::Status FrontDoor::RevokeKey(std::string_view api_dev_key, std::string_view key_or_prefix,
                                  CallContext* call) const {
  if (auto key = Authorize(api_dev_key, Scope::kAdmin, Endpoint::kAdmin, 1, call); !key.ok()) {
    return key.status();
  }
  const absl::Status revoked = keys_.Revoke(key_or_prefix);
  if (!absl::IsNotFound(revoked) || call == nullptr || call->idempotency_key.empty()) {
    return revoked;
  }
  // A retry whose first attempt revoked the key finds no key to revoke under that prefix: the
  // one key with that prefix (or text), revoked, is what the request asked for.
  const std::string id = KeyIdOfHash(KeyHash(key_or_prefix));
  int matching = 0;
  for (const ApiKey& k : keys_.List()) {
    if (k.id == id || k.prefix == key_or_prefix) matching += k.revoked ? 1 : 2;
  }
  if (matching != 1) return revoked;  // none, several, or one in force: as Revoke said
  MarkReplayed(call);
  return absl::OkStatus();
}

void RecordUsage(usage::UsageRecorder* usage, const CallContext& call, bool is_search,
                 int http_status, std::chrono::nanoseconds elapsed) {
  if (usage == nullptr) return;
  const usage::Outcome outcome = usage::OutcomeForHttpStatus(http_status);
  const bool timed = is_search && outcome == usage::Outcome::kServed;
  usage->Record(
      call.key_id.empty() ? usage::kAnonymousKey : std::string_view(call.key_id), outcome,
      call.limited_by,
      timed ? std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count() : -1);
}

std::string FrontDoor::KeyIdOf(std::string_view api_dev_key) const {
  if (api_dev_key.empty()) return "";
  absl::StatusOr<ApiKey> key = keys_.Identify(api_dev_key);
  return key.ok() ? key->id : "";
}

absl::StatusOr<UsageResponse> FrontDoor::Usage(std::string_view api_dev_key,
                                               const UsageRequest& request,
                                               CallContext* call) const {
  // Any valid key may read its own series, whatever its scopes.
  absl::StatusOr<ApiKey> caller = Admit(keys_.Identify(api_dev_key), Endpoint::kAdmin, 1, call);
  if (!caller.ok()) return caller.status();
  if (usage_ == nullptr) return absl::UnimplementedError("usage analytics are off");

  UsageResponse response;
  const std::string& wanted = request.key;
  if (wanted.empty() || wanted == caller->id || wanted == caller->prefix) {
    response.key_id = caller->id;
  } else if (!caller->Allows(Scope::kAdmin)) {
    return absl::PermissionDeniedError(
        "a key may read its own usage only; other keys' usage needs the 'admin' scope");
  } else if (wanted == usage::kAllKeys || wanted == usage::kAnonymousKey) {
    response.key_id = wanted;
  } else {
    for (const ApiKey& k : keys_.List()) {
      if (k.id == wanted || k.prefix == wanted) {
        if (!response.key_id.empty() && response.key_id != k.id) {
          return absl::InvalidArgumentError(
              StrCat("several keys start with '", wanted, "': give the key id"));
        }
        response.key_id = k.id;
      }
    }
    if (response.key_id.empty()) {
      return absl::NotFoundError(StrCat("no key with id or prefix '", wanted.substr(0, 40), "'"));
    }
  }

  if (request.from_s > request.to_s) {
    return absl::InvalidArgumentError("usage: 'from' must not be after 'to'");
  }
  const int64_t now_s = backend_.clock().NowUnixMillis() / 1000;
  auto keeps = [&](usage::Resolution r) {
    const int64_t retention = usage::RetentionSeconds(r);
    return retention == 0 || request.from_s >= now_s - retention;
  };
  if (request.resolution.has_value()) {
    response.resolution = *request.resolution;
    if (!keeps(response.resolution)) {
      return absl::InvalidArgumentError(
          StrCat("buckets of ", usage::ResolutionName(response.resolution), " are kept for ",
                 usage::RetentionSeconds(response.resolution) / 3600,
                 " hours: 'from' is older; ask for a coarser resolution (5m, 1h, 1d)"));
    }
  } else {
    response.resolution = usage::Resolution::kDay;
    for (usage::Resolution r : usage::kResolutions) {
      const int64_t buckets = (request.to_s - request.from_s) / usage::BucketSeconds(r) + 1;
      if (keeps(r) && buckets <= static_cast<int64_t>(kMaxAutoUsagePoints)) {
        response.resolution = r;
        break;
      }
    }
  }
  absl::StatusOr<std::vector<usage::Point>> points =
      usage_->Query(response.key_id, response.resolution, request.from_s, request.to_s);
  if (!points.ok()) return points.status();
  response.points = *std::move(points);
  return response;
}

}  // namespace tweetsearch::aggregator
