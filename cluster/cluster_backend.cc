#include "cluster/cluster_backend.h"

#include <algorithm>
#include <functional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "cluster/fan_out.h"
#include "common/strings.h"
#include "indexer/server/service.h"
#include "net/grpc.h"
#include "storage/convert.h"
#include "storage/storage_node.h"
#include "storage/tweet_store.h"
#include "storage/write_records.h"

namespace tweetsearch::cluster {
namespace {

namespace ipb = internal::v1;
using Steady = std::chrono::steady_clock;
using indexer::FromProto;
using indexer::ToProto;
using storage::FromProto;
using storage::ToProto;

absl::Status OutcomeStatus(const ipb::Outcome& o) {
  return absl::Status(static_cast<absl::StatusCode>(o.code()), o.message());
}

// What `start` hands its callback, waited for.
template <typename T, typename Start>
T Await(Start start) {
  T out;
  absl::Notification answered;
  start([&](T answer) {
    out = std::move(answer);
    answered.Notify();
  });
  answered.WaitForNotification();
  return out;
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::CANCELLED;
}

std::vector<uint32_t> ReplicaCounts(const std::vector<Partition>& partitions) {
  std::vector<uint32_t> counts;
  for (const Partition& p : partitions) counts.push_back(static_cast<uint32_t>(p.replicas.size()));
  return counts;
}

ReplicaHealthOptions HealthOptions(const ClusterBackendOptions& options) {
  ReplicaHealthOptions health = options.health;
  health.max_hedge = options.hedge_after;
  health.min_hedge = std::min(health.min_hedge, health.max_hedge);
  return health;
}

}  // namespace

ClusterBackend::ClusterBackend(ClusterView& view, const ClusterBackendOptions& options,
                               const Clock& clock, SnowflakeGenerator ids,
                               std::unique_ptr<analysis::Analyzer> analyzer)
    : view_(view),
      options_(options),
      clock_(clock),
      ids_(std::move(ids)),
      analyzer_(std::move(analyzer)),
      cache_(options.tweet_cache_bytes),
      index_health_(ReplicaCounts(view.topology().index), HealthOptions(options), clock),
      storage_health_(ReplicaCounts(view.topology().storage), HealthOptions(options), clock),
      batcher_(
          [&view](uint32_t p, uint32_t r) -> SearchBatcher::Stub& { return view.index(p, r); }),
      stats_cache_(clock, options.stats_ttl.count()),
      streams_(std::make_unique<ClusterStreams>(view, *analyzer_)) {}

ClusterBackend::~ClusterBackend() {
  // A search answered may still have calls running (a losing hedge, cancelled): they end
  // soon, and tell the replicas' health and the batcher as they do.
  absl::MutexLock lock(&in_flight_mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(in_flight_mu_) { return in_flight_ == 0; };
  in_flight_mu_.Await(absl::Condition(&idle));
}

absl::StatusOr<std::unique_ptr<ClusterBackend>> ClusterBackend::Create(
    ClusterView& view, const ClusterBackendOptions& options, const Clock& clock) {
  absl::StatusOr<SnowflakeGenerator> ids = SnowflakeGenerator::Create(options.node_id, clock);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<std::unique_ptr<analysis::Analyzer>> analyzer =
      analysis::Analyzer::Create(options.index.analyzer);
  if (!analyzer.ok()) return analyzer.status();
  return std::unique_ptr<ClusterBackend>(
      new ClusterBackend(view, options, clock, *std::move(ids), *std::move(analyzer)));
}

absl::StatusOr<ipb::WriteResponse> ClusterBackend::WriteToPrimary(uint32_t p,
                                                                  ipb::WriteRequest request) {
  auto deadline = Steady::now() + options_.write_deadline;
  bool stranded = false;
  absl::Status last = absl::UnavailableError(StrCat("storage partition ", p, " has no primary"));
  for (int attempt = 0; Steady::now() < deadline; ++attempt) {
    if (attempt > 0) {
      // A stranded primary is still the primary: asking etcd (away) who is would only wait.
      if (!stranded) view_.Refresh();
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50 * attempt, 500)));
    }
    std::optional<uint32_t> primary = view_.StoragePrimary(p);
    if (!primary.has_value()) continue;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ipb::WriteResponse response;
    grpc::Status s = view_.storage(p, *primary).Write(&context, request, &response);
    if (s.ok()) return response;
    last = net::FromGrpc(s);
    if (!Retryable(s)) return last;
    if (!stranded && s.error_code() == grpc::StatusCode::UNAVAILABLE &&
        s.error_message().starts_with(storage::kWaitsForEtcdOrSecondary)) {
      // Only etcd's return or the secondary's catching up helps: a short wait for either.
      stranded = true;
      deadline = std::min(deadline, Steady::now() + options_.stranded_write_deadline);
    }
    request.set_retry(true);  // the write may have landed before its answer was lost
  }
  return absl::UnavailableError(StrCat("storage partition ", p, ": ", last.message()));
}

void ClusterBackend::WaitVisible(const std::vector<std::pair<uint32_t, uint64_t>>& written) const {
  if (written.empty()) return;
  struct Call {
    grpc::ClientContext ctx;
    ipb::WaitAppliedRequest request;
    ipb::WaitAppliedResponse response;
  };
  // Shared with the callbacks, which may still be returning when the wait below
  // ends.
  struct Pending {
    absl::Mutex mu;
    size_t count ABSL_GUARDED_BY(mu) = 0;
    std::vector<std::unique_ptr<Call>> calls;
  };
  auto state = std::make_shared<Pending>();
  for (uint32_t ip = 0; ip < view_.topology().index.size(); ++ip) {
    for (uint32_t r : view_.LiveIndexReplicas(ip)) {
      for (const auto& [sp, sequence] : written) {
        auto call = std::make_unique<Call>();
        call->request.set_storage_partition(sp);
        call->request.set_sequence(sequence);
        call->request.set_timeout_ms(static_cast<uint32_t>(options_.visible_wait.count()));
        call->ctx.set_deadline(std::chrono::system_clock::now() + options_.visible_wait +
                               std::chrono::milliseconds(500));
        Call* c = call.get();
        {
          absl::MutexLock lock(&state->mu);
          state->calls.push_back(std::move(call));
          ++state->count;
        }
        view_.index(ip, r).async()->WaitApplied(&c->ctx, &c->request, &c->response,
                                                [state](grpc::Status) {
                                                  absl::MutexLock lock(&state->mu);
                                                  --state->count;
                                                });
      }
    }
  }
  absl::MutexLock lock(&state->mu);
  auto done = [&state]() ABSL_SHARED_LOCKS_REQUIRED(state->mu) { return state->count == 0; };
  state->mu.Await(absl::Condition(&done));
}

namespace {

// Whether an outcome may change on a retry (the write may not have landed).
bool Passing(const absl::Status& s) { return absl::IsUnavailable(s); }

}  // namespace

absl::StatusOr<storage::WriteRecord> ClusterBackend::StoreRecord(uint32_t p,
                                                                 const aggregator::WriteOnce& once,
                                                                 const storage::WriteRecord& record,
                                                                 bool* replayed) {
  ipb::WriteRequest request;
  request.set_request_key(once.key);
  ToProto(record, request.mutable_record());
  absl::StatusOr<ipb::WriteResponse> answer = WriteToPrimary(p, std::move(request));
  if (!answer.ok()) return answer.status();
  storage::WriteRecord stored = FromProto(answer->record());
  if (absl::Status s = storage::CheckSameRequest(stored, once.fingerprint); !s.ok()) return s;
  if (replayed != nullptr) *replayed = answer->replayed();
  return stored;
}

std::vector<aggregator::IngestOutcome> ClusterBackend::Ingest(
    std::vector<aggregator::NewTweet> tweets, aggregator::WriteOnce* once) {
  std::vector<aggregator::IngestOutcome> outcomes = IngestNow(std::move(tweets), once);
  stats_cache_.Clear();  // after the tweets are visible (or refused): collected again
  return outcomes;
}

std::vector<aggregator::IngestOutcome> ClusterBackend::IngestNow(
    std::vector<aggregator::NewTweet> tweets, aggregator::WriteOnce* once) {
  std::vector<aggregator::IngestOutcome> outcomes(tweets.size());
  const uint32_t partitions = static_cast<uint32_t>(view_.topology().storage.size());
  // Validate and choose ids.
  absl::flat_hash_set<TweetId> seen;
  for (size_t i = 0; i < tweets.size(); ++i) {
    aggregator::NewTweet& t = tweets[i];
    outcomes[i].status = aggregator::ValidateNewTweet(t, options_.max_text_bytes);
    if (!outcomes[i].status.ok()) continue;
    const TweetId id = t.id.has_value() ? *t.id : ids_.Next();
    if (!seen.insert(id).second) {
      outcomes[i].status = absl::AlreadyExistsError(StrCat("duplicate id ", id));
      continue;
    }
    outcomes[i].id = id;
  }
  // An idempotent call's plan (its ids) is stored first: a retry answers from its final
  // record, or sends the same tweets under the same ids again (`retry`: those that landed
  // are OK).
  bool again = false;
  const uint32_t home = once != nullptr ? StoragePartitionOfKey(once->key, partitions) : 0;
  if (once != nullptr) {
    storage::WriteRecord plan;
    plan.fingerprint = once->fingerprint;
    plan.created_at_ms = clock_.NowUnixMillis();
    for (const aggregator::IngestOutcome& o : outcomes) plan.ids.push_back(o.id);
    absl::StatusOr<storage::WriteRecord> stored = StoreRecord(home, *once, plan, &again);
    if (stored.ok() && stored->ids.size() != outcomes.size()) {
      stored = absl::DataLossError("a stored ingest record does not fit its request");
    }
    if (!stored.ok()) {
      once->status = stored.status();
      return outcomes;
    }
    for (size_t i = 0; i < outcomes.size(); ++i) {
      outcomes[i].id = stored->ids[i];
      if (stored->done && i < stored->outcomes.size()) outcomes[i].status = stored->outcomes[i];
    }
    if (stored->done) {
      once->replayed = true;
      return outcomes;
    }
  }
  WriteTweets(std::move(tweets), again, outcomes);
  if (once == nullptr || std::any_of(outcomes.begin(), outcomes.end(),
                                     [](const auto& o) { return Passing(o.status); })) {
    return outcomes;  // no final answer yet: a retry finishes the plan
  }
  storage::WriteRecord answer;
  answer.fingerprint = once->fingerprint;
  answer.created_at_ms = clock_.NowUnixMillis();
  answer.done = true;
  for (const aggregator::IngestOutcome& o : outcomes) {
    answer.ids.push_back(o.id);
    answer.outcomes.push_back(o.status);
  }
  // Another attempt may have finished first: its answer is the one every retry gets.
  absl::StatusOr<storage::WriteRecord> stored = StoreRecord(home, *once, answer, nullptr);
  if (stored.ok() && stored->done && stored->outcomes.size() == outcomes.size()) {
    for (size_t i = 0; i < outcomes.size(); ++i) outcomes[i].status = stored->outcomes[i];
  }
  return outcomes;
}

void ClusterBackend::WriteTweets(std::vector<aggregator::NewTweet> tweets, bool retry,
                                 std::vector<aggregator::IngestOutcome>& outcomes) {
  const uint32_t partitions = static_cast<uint32_t>(view_.topology().storage.size());
  std::vector<ipb::WriteRequest> requests(partitions);
  std::vector<std::vector<size_t>> positions(partitions);
  uint64_t rejected = 0;
  for (size_t i = 0; i < tweets.size(); ++i) {
    if (!outcomes[i].status.ok()) {
      ++rejected;
      continue;
    }
    const TweetId id = outcomes[i].id;
    const uint32_t p = StoragePartitionOf(id, partitions);
    ToProto(aggregator::ToStoredTweet(std::move(tweets[i]), id, clock_), requests[p].add_puts());
    requests[p].set_retry(retry);
    positions[p].push_back(i);
  }
  // One writer thread per storage partition with tweets.
  std::vector<absl::StatusOr<ipb::WriteResponse>> answers(partitions, ipb::WriteResponse());
  std::vector<std::thread> writers;
  for (uint32_t p = 0; p < partitions; ++p) {
    if (positions[p].empty()) continue;
    writers.emplace_back(
        [this, p, &requests, &answers] { answers[p] = WriteToPrimary(p, std::move(requests[p])); });
  }
  for (std::thread& w : writers) w.join();
  std::vector<std::pair<uint32_t, uint64_t>> written;
  uint64_t accepted = 0;
  for (uint32_t p = 0; p < partitions; ++p) {
    if (positions[p].empty()) continue;
    const absl::StatusOr<ipb::WriteResponse>& answer = answers[p];
    for (size_t j = 0; j < positions[p].size(); ++j) {
      aggregator::IngestOutcome& o = outcomes[positions[p][j]];
      if (!answer.ok()) {
        o.status = answer.status();
      } else if (j < static_cast<size_t>(answer->outcomes_size())) {
        o.status = OutcomeStatus(answer->outcomes(static_cast<int>(j)));
      } else {
        o.status = absl::InternalError("storage answered fewer outcomes than tweets");
      }
      if (o.status.ok()) {
        ++accepted;
      } else {
        ++rejected;
      }
    }
    if (answer.ok()) written.emplace_back(p, answer->last_sequence());
  }
  WaitVisible(written);
  ingested_.fetch_add(accepted, std::memory_order_relaxed);
  rejected_.fetch_add(rejected, std::memory_order_relaxed);
}

absl::StatusOr<ipb::WriteResponse> ClusterBackend::WriteOne(TweetId id, ipb::WriteRequest request,
                                                            aggregator::WriteOnce* once) {
  const uint32_t p = StoragePartitionOf(id, static_cast<uint32_t>(view_.topology().storage.size()));
  if (once != nullptr) {
    // The record is written with the change, or answers instead of it.
    storage::WriteRecord r;
    r.fingerprint = once->fingerprint;
    r.created_at_ms = clock_.NowUnixMillis();
    request.set_request_key(once->key);
    ToProto(r, request.mutable_record());
  }
  absl::StatusOr<ipb::WriteResponse> answer = WriteToPrimary(p, std::move(request));
  if (!answer.ok()) return answer.status();
  if (once != nullptr) {
    storage::WriteRecord stored = FromProto(answer->record());
    if (absl::Status s = storage::CheckSameRequest(stored, once->fingerprint); !s.ok()) return s;
    once->replayed = answer->replayed();
    if (!stored.status.ok()) return stored.status;
    answer->set_likes(stored.likes);
  }
  cache_.Invalidate(id);
  WaitVisible({{p, answer->last_sequence()}});
  return answer;
}

absl::Status ClusterBackend::Delete(TweetId id, aggregator::WriteOnce* once) {
  ipb::WriteRequest request;
  request.set_delete_id(id);
  absl::Status s = WriteOne(id, std::move(request), once).status();
  stats_cache_.Clear();  // after the write is visible (or failed): collected again
  return s;
}

absl::StatusOr<uint32_t> ClusterBackend::Likes(TweetId id, int64_t value, bool add,
                                               aggregator::WriteOnce* once) {
  if (absl::Status s = storage::CheckLikesChange(value, add); !s.ok()) return s;
  ipb::WriteRequest request;
  request.set_likes_id(id);
  request.set_likes_value(value);
  request.set_likes_add(add);
  // Without an idempotency key, a retried "add" could count twice if its first attempt
  // landed: the retry only happens across a failover. With one, the record answers it.
  absl::StatusOr<ipb::WriteResponse> answer = WriteOne(id, std::move(request), once);
  if (!answer.ok()) return answer.status();
  return answer->likes();
}

std::vector<std::vector<uint32_t>> ClusterBackend::IndexReplicasInTurn() const {
  const uint32_t turn = rotation_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::vector<uint32_t>> replicas(view_.topology().index.size());
  for (uint32_t p = 0; p < replicas.size(); ++p) {
    replicas[p] = view_.LiveIndexReplicas(p);
    // A replica etcd does not list (its lease lapsed while etcd was away, and it has not put
    // its key back yet) stays in while it keeps answering: it refuses searches itself when it
    // is not serving.
    const uint32_t count = static_cast<uint32_t>(view_.topology().index[p].replicas.size());
    for (uint32_t r = 0; r < count; ++r) {
      if (std::find(replicas[p].begin(), replicas[p].end(), r) == replicas[p].end() &&
          index_health_.AnsweredWithin(p, r, options_.keep_answering)) {
        replicas[p].push_back(r);
      }
    }
    if (replicas[p].empty()) continue;
    std::rotate(replicas[p].begin(), replicas[p].begin() + turn % replicas[p].size(),
                replicas[p].end());
    index_health_.Order(p, &replicas[p]);
  }
  return replicas;
}

std::vector<uint32_t> ClusterBackend::StorageReplicasPrimaryFirst(uint32_t p) const {
  std::vector<uint32_t> replicas;
  for (uint32_t r = 0; r < view_.topology().storage[p].replicas.size(); ++r) replicas.push_back(r);
  if (std::optional<uint32_t> primary = view_.StoragePrimary(p); primary.has_value()) {
    std::swap(replicas[0], replicas[*primary]);
  }
  storage_health_.Order(p, &replicas);
  return replicas;
}

absl::StatusOr<storage::StoredTweet> ClusterBackend::Get(TweetId id) const {
  const uint32_t partitions = static_cast<uint32_t>(view_.topology().storage.size());
  const uint32_t p = StoragePartitionOf(id, partitions);
  std::vector<std::vector<uint32_t>> replicas(partitions);  // only partition p is asked
  replicas[p] = StorageReplicasPrimaryFirst(p);
  ipb::MultiGetRequest request;
  request.add_ids(id);
  auto fan = std::make_shared<FanOut<ipb::MultiGetResponse>>(
      std::move(replicas), storage_health_, clock_, timers_,
      [&](uint32_t q, uint32_t r, grpc::ClientContext* ctx, ipb::MultiGetResponse* response,
          std::function<void(grpc::Status)> done) {
        view_.storage(q, r).async()->MultiGet(ctx, &request, response, std::move(done));
      });
  std::vector<absl::StatusOr<ipb::MultiGetResponse>> answers =
      fan->Run(options_.search_deadline, options_.hedge_after);
  if (!answers[p].ok()) return answers[p].status();
  if (answers[p]->tweets_size() == 0)
    return absl::NotFoundError(StrCat("tweet ", id, " not found"));
  return FromProto(answers[p]->tweets(0));
}

absl::StatusOr<std::unique_ptr<aggregator::StreamFeed>> ClusterBackend::OpenStream(
    const aggregator::StreamCall& call) {
  // The query is filed under its rarest terms: ask the index partitions how rare they are. Only
  // the standing queries' efficiency depends on it, so a failure is no refusal.
  aggregator::SearchCall search;
  search.search_terms = call.search_terms;
  search.plan = call.plan;
  search.allow_partial = true;
  absl::StatusOr<query::CollectionStats> stats = CollectStats(search);
  return streams_->Open(
      *call.plan, call.last_event_id,
      stats.ok() ? stats->doc_freq : absl::flat_hash_map<std::string, uint64_t>());
}

// A statistics round between its calls (StartCollectStats).
struct ClusterBackend::StatsInFlight {
  std::shared_ptr<void> counted;  // InFlight()
  ipb::StatsRequest request;
  bool allow_partial = false;
  uint64_t epoch = 0;  // the cache's, when the round began
  StatsDone done;
};

absl::StatusOr<query::CollectionStats> ClusterBackend::CollectStats(
    const aggregator::SearchCall& call) const {
  return Await<absl::StatusOr<query::CollectionStats>>(
      [&](StatsDone done) { StartCollectStats(call, std::move(done)); });
}

void ClusterBackend::StartCollectStats(const aggregator::SearchCall& call, StatsDone done) const {
  auto stats = std::make_shared<StatsInFlight>();
  stats->epoch = stats_cache_.Epoch();
  if (std::optional<query::CollectionStats> kept = stats_cache_.Find(call.search_terms)) {
    return std::move(done)(*std::move(kept));
  }
  stats->counted = InFlight();
  stats->request.set_search_terms(std::string(call.search_terms));
  stats->allow_partial = call.allow_partial;
  stats->done = std::move(done);
  auto fan = std::make_shared<FanOut<ipb::CollectionStats>>(
      IndexReplicasInTurn(), index_health_, clock_, timers_,
      [this, stats](uint32_t p, uint32_t r, grpc::ClientContext* ctx,
                    ipb::CollectionStats* response, std::function<void(grpc::Status)> done) {
        view_.index(p, r).async()->Stats(ctx, &stats->request, response, std::move(done));
      });
  fan->Start(options_.search_deadline, options_.hedge_after,
             [this, stats](std::vector<absl::StatusOr<ipb::CollectionStats>> answers) {
               std::move(stats->done)(SumStats(*stats, answers));
             });
}

absl::StatusOr<query::CollectionStats> ClusterBackend::SumStats(
    const StatsInFlight& stats,
    const std::vector<absl::StatusOr<ipb::CollectionStats>>& answers) const {
  query::CollectionStats total;
  std::vector<uint64_t> generations(answers.size());
  bool complete = true;
  for (uint32_t p = 0; p < answers.size(); ++p) {
    if (answers[p].ok()) {
      query::AddStats(FromProto(*answers[p]), &total);
      generations[p] = answers[p]->generation();
    } else if (absl::IsInvalidArgument(answers[p].status())) {
      return answers[p].status();  // the query itself is refused
    } else if (!stats.allow_partial) {
      return absl::UnavailableError(
          StrCat("index partition ", p, ": ", answers[p].status().message()));
    } else {
      complete = false;
    }
  }
  if (complete) {
    stats_cache_.Store(stats.request.search_terms(), total, generations, stats.epoch);
  }
  return total;
}

namespace {

// What a partition that did not answer (`status`) means for a fanned-out read: the query's own
// error (InvalidArgument), Unavailable, or with `allow_partial` nothing (p joins `missing`).
absl::Status LeaveOut(uint32_t p, const absl::Status& status, bool allow_partial,
                      std::vector<uint32_t>* missing) {
  if (absl::IsInvalidArgument(status)) return status;
  if (!allow_partial) {
    return absl::UnavailableError(
        StrCat("index partition ", p,
               " is unavailable: no replica answered (last error: ", status.message(), ")"));
  }
  missing->push_back(p);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<aggregator::CountsOutcome> ClusterBackend::RunCounts(
    const aggregator::CountsCall& call) const {
  const uint32_t partitions = static_cast<uint32_t>(view_.topology().index.size());
  ipb::PartitionCountsRequest request;
  request.set_search_terms(std::string(call.search_terms));
  request.set_start_ms(call.buckets.start_ms);
  request.set_width_ms(call.buckets.width_ms);
  request.set_count(call.buckets.count);
  auto fan = std::make_shared<FanOut<ipb::PartitionCountsResponse>>(
      IndexReplicasInTurn(), index_health_, clock_, timers_,
      [&](uint32_t p, uint32_t r, grpc::ClientContext* ctx, ipb::PartitionCountsResponse* response,
          std::function<void(grpc::Status)> done) {
        view_.index(p, r).async()->Counts(ctx, &request, response, std::move(done));
      });
  std::vector<absl::StatusOr<ipb::PartitionCountsResponse>> answers =
      fan->Run(options_.search_deadline, options_.hedge_after);
  aggregator::CountsOutcome out;
  out.counts.assign(call.buckets.count, 0);
  for (uint32_t p = 0; p < partitions; ++p) {
    if (answers[p].ok() && answers[p]->counts_size() != static_cast<int>(call.buckets.count)) {
      answers[p] =
          absl::InternalError(StrCat("index partition ", p, " answered ", answers[p]->counts_size(),
                                     " buckets, not ", call.buckets.count));
    }
    if (!answers[p].ok()) {
      absl::Status s =
          LeaveOut(p, answers[p].status(), call.allow_partial, &out.missing_partitions);
      if (!s.ok()) return s;
      continue;
    }
    for (uint32_t b = 0; b < call.buckets.count; ++b) out.counts[b] += answers[p]->counts(b);
  }
  return out;
}

// A search between its calls: what they and its answer need once StartSearch has returned.
struct ClusterBackend::SearchInFlight {
  std::shared_ptr<void> counted;  // InFlight()
  ipb::PartitionSearchRequest request;
  uint32_t limit = 0;
  bool exact_total = false;
  bool allow_partial = false;
  SearchDone done;
};

// Hits being read from storage: the answer waiting for them, and the MultiGet per storage
// partition.
struct ClusterBackend::Hydration {
  std::shared_ptr<void> counted;  // InFlight()
  aggregator::SearchOutcome out;
  std::vector<ipb::MultiGetRequest> gets;
  uint64_t cache_epoch = 0;
  SearchDone done;
};

std::shared_ptr<void> ClusterBackend::InFlight() const {
  absl::MutexLock lock(&in_flight_mu_);
  ++in_flight_;
  return std::shared_ptr<void>(nullptr, [this](void*) {
    absl::MutexLock lock(&in_flight_mu_);
    --in_flight_;
  });
}

absl::StatusOr<aggregator::SearchOutcome> ClusterBackend::RunSearch(
    const aggregator::SearchCall& call) const {
  return Await<absl::StatusOr<aggregator::SearchOutcome>>(
      [&](SearchDone done) { StartSearch(call, std::move(done)); });
}

void ClusterBackend::StartSearch(const aggregator::SearchCall& call, SearchDone done) const {
  auto search = std::make_shared<SearchInFlight>();
  search->counted = InFlight();
  const query::SearchOptions& o = call.options;
  ipb::PartitionSearchRequest& request = search->request;
  request.set_search_terms(std::string(call.search_terms));
  request.set_sort(static_cast<int>(o.sort));
  request.set_limit(o.limit);
  if (o.after.has_value()) {
    request.set_has_after(true);
    request.set_after_primary(o.after->primary);
    request.set_after_id(o.after->id);
  }
  request.set_watermark(o.watermark);
  request.set_now_ms(o.now_ms);
  request.set_exact_total(o.exact_total);
  if (o.stats != nullptr) ToProto(*o.stats, request.mutable_stats());
  search->limit = o.limit;
  search->exact_total = o.exact_total;
  search->allow_partial = call.allow_partial;
  search->done = std::move(done);
  // Newest-first searches share calls (cluster/search_batcher.h); ranked ones measured no
  // gain from it, and go one to a call (docs/benchmarks.md).
  const bool batched = o.sort == query::SortMode::kNewest;
  auto fan = std::make_shared<FanOut<ipb::PartitionSearchResponse>>(
      IndexReplicasInTurn(), index_health_, clock_, timers_,
      [this, search, batched](uint32_t p, uint32_t r, grpc::ClientContext* ctx,
                              ipb::PartitionSearchResponse* response,
                              std::function<void(grpc::Status)> done) {
        if (batched) return batcher_.Search(p, r, ctx, search->request, response, std::move(done));
        view_.index(p, r).async()->Search(ctx, &search->request, response, std::move(done));
      },
      [this, batched](grpc::ClientContext* ctx) {
        if (batched) return batcher_.Cancel(ctx);
        ctx->TryCancel();
      });
  fan->Start(options_.search_deadline, options_.hedge_after,
             [this, search](std::vector<absl::StatusOr<ipb::PartitionSearchResponse>> answers) {
               std::vector<query::Hit> hits;
               absl::StatusOr<aggregator::SearchOutcome> out = Merge(*search, answers, &hits);
               if (!out.ok()) return std::move(search->done)(out.status());
               Hydrate(*std::move(out), hits, search->counted, std::move(search->done));
             });
}

absl::StatusOr<aggregator::SearchOutcome> ClusterBackend::Merge(
    const SearchInFlight& search,
    std::vector<absl::StatusOr<ipb::PartitionSearchResponse>>& answers,
    std::vector<query::Hit>* hits) const {
  // k-way merge of the partitions' top-k (each sorted), by sort key.
  aggregator::SearchOutcome out;
  for (uint32_t p = 0; p < answers.size(); ++p) {
    if (!answers[p].ok()) {
      absl::Status s =
          LeaveOut(p, answers[p].status(), search.allow_partial, &out.missing_partitions);
      if (!s.ok()) return s;
      continue;
    }
    const ipb::PartitionSearchResponse& r = *answers[p];
    stats_cache_.Saw(p, r.generation());
    out.total_hits += r.total_hits();
    out.total_is_exact = out.total_is_exact && r.total_is_exact();
    out.max_id = std::max<TweetId>(out.max_id, r.max_id());
    for (const ipb::PartitionHit& h : r.hits()) {
      hits->push_back(query::Hit{h.id(), h.score(), h.likes(), h.created_at_ms(),
                                 query::SortKey{h.primary(), h.id()}});
    }
  }
  query::CapTotal(search.exact_total, &out.total_hits, &out.total_is_exact);
  std::sort(hits->begin(), hits->end(),
            [](const query::Hit& a, const query::Hit& b) { return query::Before(a.key, b.key); });
  if (hits->size() > search.limit) hits->resize(search.limit);
  return out;
}

void ClusterBackend::Hydrate(aggregator::SearchOutcome out, const std::vector<query::Hit>& hits,
                             std::shared_ptr<void> counted, SearchDone done) const {
  // The cache, then one MultiGet per storage partition for the rest.
  const uint32_t storage_partitions = static_cast<uint32_t>(view_.topology().storage.size());
  auto hydration = std::make_shared<Hydration>();
  hydration->gets.resize(storage_partitions);
  out.hits.resize(hits.size());
  for (size_t i = 0; i < hits.size(); ++i) {
    out.hits[i].hit = hits[i];
    out.hits[i].tweet = cache_.Get(hits[i].id);
    if (out.hits[i].tweet == nullptr) {
      hydration->gets[StoragePartitionOf(hits[i].id, storage_partitions)].add_ids(hits[i].id);
    }
  }
  std::vector<std::vector<uint32_t>> storage_replicas(storage_partitions);
  bool any_missing = false;
  for (uint32_t p = 0; p < storage_partitions; ++p) {
    if (hydration->gets[p].ids_size() == 0) continue;
    any_missing = true;
    storage_replicas[p] = StorageReplicasPrimaryFirst(p);
  }
  if (!any_missing) return std::move(done)(std::move(out));
  hydration->counted = std::move(counted);
  hydration->out = std::move(out);
  hydration->done = std::move(done);
  hydration->cache_epoch = cache_.epoch();
  auto fetch = std::make_shared<FanOut<ipb::MultiGetResponse>>(
      std::move(storage_replicas), storage_health_, clock_, timers_,
      [this, hydration](uint32_t p, uint32_t r, grpc::ClientContext* ctx,
                        ipb::MultiGetResponse* response, std::function<void(grpc::Status)> done) {
        view_.storage(p, r).async()->MultiGet(ctx, &hydration->gets[p], response, std::move(done));
      });
  fetch->Start(options_.search_deadline, options_.hedge_after,
               [this, hydration](std::vector<absl::StatusOr<ipb::MultiGetResponse>> fetched) {
                 absl::Status s = FillHits(fetched, *hydration);
                 if (!s.ok()) return std::move(hydration->done)(s);
                 std::move(hydration->done)(std::move(hydration->out));
               });
}

absl::Status ClusterBackend::FillHits(
    const std::vector<absl::StatusOr<ipb::MultiGetResponse>>& fetched, Hydration& hydration) const {
  absl::flat_hash_map<TweetId, std::shared_ptr<const storage::StoredTweet>> found;
  for (uint32_t p = 0; p < fetched.size(); ++p) {
    if (hydration.gets[p].ids_size() == 0) continue;
    if (!fetched[p].ok()) {
      return absl::UnavailableError(
          StrCat("storage partition ", p, ": ", fetched[p].status().message()));
    }
    for (const v1::Tweet& t : fetched[p]->tweets()) {
      auto tweet = std::make_shared<const storage::StoredTweet>(FromProto(t));
      cache_.PutIfUnchanged(tweet, hydration.cache_epoch);
      found[t.id()] = std::move(tweet);
    }
  }
  for (aggregator::SearchHit& h : hydration.out.hits) {
    if (h.tweet != nullptr) continue;
    auto it = found.find(h.hit.id);
    if (it != found.end()) h.tweet = it->second;  // absent: deleted since it was indexed
  }
  std::erase_if(hydration.out.hits,
                [](const aggregator::SearchHit& h) { return h.tweet == nullptr; });
  return absl::OkStatus();
}

namespace {

void AddReplicaStats(std::string_view role, const std::vector<Partition>& partitions,
                     const ReplicaHealth& health, aggregator::EngineStats* s) {
  for (const ReplicaRecord& r : health.Records()) {
    s->replicas.push_back(aggregator::ReplicaStats{
        std::string(role), r.partition, partitions[r.partition].replicas[r.replica].node, r.ejected,
        r.ejections, r.hedges, r.hedges_refused});
  }
  const std::vector<std::chrono::microseconds> delays = health.HedgeDelays();
  for (uint32_t p = 0; p < delays.size(); ++p) {
    s->hedge_delays.push_back(aggregator::HedgeDelayStats{
        std::string(role), p, std::chrono::duration<double>(delays[p]).count()});
  }
}

}  // namespace

aggregator::EngineStats ClusterBackend::Stats() const {
  aggregator::EngineStats s;
  s.tweets_ingested = ingested_.load(std::memory_order_relaxed);
  s.tweets_rejected = rejected_.load(std::memory_order_relaxed);
  s.tweet_cache_hits = cache_.hits();
  s.tweet_cache_misses = cache_.misses();
  s.tweet_cache_bytes = cache_.bytes();
  AddReplicaStats("index", view_.topology().index, index_health_, &s);
  AddReplicaStats("storage", view_.topology().storage, storage_health_, &s);
  for (aggregator::ReplicaStats& r : s.replicas) {
    if (r.role != "index") continue;
    const std::vector<Partition>& index = view_.topology().index;
    const std::vector<uint32_t> listed = view_.LiveIndexReplicas(r.partition);
    r.listed = std::any_of(listed.begin(), listed.end(), [&](uint32_t replica) {
      return index[r.partition].replicas[replica].node == r.node;
    });
  }
  std::vector<std::vector<uint32_t>> replicas = IndexReplicasInTurn();
  ipb::StatusRequest request;
  auto fan = std::make_shared<FanOut<ipb::IndexStatus>>(
      std::move(replicas), index_health_, clock_, timers_,
      [&](uint32_t p, uint32_t r, grpc::ClientContext* ctx, ipb::IndexStatus* response,
          std::function<void(grpc::Status)> done) {
        view_.index(p, r).async()->Status(ctx, &request, response, std::move(done));
      });
  for (const absl::StatusOr<ipb::IndexStatus>& st :
       fan->Run(options_.search_deadline, options_.hedge_after)) {
    if (!st.ok()) continue;
    s.indexed_documents += st->documents();
    s.index_memory_bytes += st->memory_bytes();
    s.index_mapped_bytes += st->mapped_bytes();
    s.index_damaged_segments += st->damaged_segments();
  }
  // Storage: the primary of each partition first (a secondary answers only when it is gone).
  const uint32_t storage_partitions = static_cast<uint32_t>(view_.topology().storage.size());
  std::vector<std::vector<uint32_t>> storage_replicas(storage_partitions);
  for (uint32_t p = 0; p < storage_partitions; ++p) {
    storage_replicas[p] = StorageReplicasPrimaryFirst(p);
  }
  auto storage_fan = std::make_shared<FanOut<ipb::StorageStatus>>(
      std::move(storage_replicas), storage_health_, clock_, timers_,
      [&](uint32_t p, uint32_t r, grpc::ClientContext* ctx, ipb::StorageStatus* response,
          std::function<void(grpc::Status)> done) {
        view_.storage(p, r).async()->Status(ctx, &request, response, std::move(done));
      });
  std::vector<absl::StatusOr<ipb::StorageStatus>> storage_status =
      storage_fan->Run(options_.search_deadline, options_.search_deadline);
  for (uint32_t p = 0; p < storage_partitions; ++p) {
    aggregator::StoragePartitionStats& out = s.storage_partitions.emplace_back();
    out.partition = p;
    if (!storage_status[p].ok() || storage_status[p]->role() != "primary") continue;
    out.has_primary = true;
    out.epoch = storage_status[p]->epoch();
    out.secondary_in_sync = storage_status[p]->peer_in_sync();
    out.single_replica_writes = storage_status[p]->single_replica_writes();
    s.stored_tweets_estimate += storage_status[p]->tweets_estimate();
  }
  return s;
}

}  // namespace tweetsearch::cluster
