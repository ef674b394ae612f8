#include "cluster/cluster_backend.h"

#include <algorithm>
#include <functional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
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

// A call that the hedge budget refused a hedge is hedged anyway after this many hedge delays.
constexpr int kLateHedge = 4;

// One call per partition, in parallel, each to the first of its `replicas`; a
// failed call goes on to the next replica at once, a slow one is hedged to the
// next once it has run for its partition's hedge delay (`health`'s, at most
// `max_hedge`), or kLateHedge times that while the partition's hedge budget is
// spent. Returns per partition the first successful response, or the
// last error. What each replica did is told to `health`. Held by shared_ptr:
// each call's callback keeps it alive until the callback has returned.
template <typename Response>
class FanOut : public std::enable_shared_from_this<FanOut<Response>> {
 public:
  // Starts the call for partition p on replica r; must call `done` exactly
  // once.
  using Start = std::function<void(uint32_t p, uint32_t r, grpc::ClientContext* ctx,
                                   Response* response, std::function<void(grpc::Status)> done)>;

  // Cancels a call that `start` began with this context (by default, the call itself).
  using Cancel = std::function<void(grpc::ClientContext* ctx)>;

  FanOut(
      std::vector<std::vector<uint32_t>> replicas, ReplicaHealth& health, const Clock& clock,
      Start start, Cancel cancel = [](grpc::ClientContext* ctx) { ctx->TryCancel(); })
      : start_(std::move(start)),
        cancel_(std::move(cancel)),
        health_(health),
        clock_(clock),
        parts_(replicas.size()) {
    for (size_t p = 0; p < replicas.size(); ++p) parts_[p].replicas = std::move(replicas[p]);
  }

  std::vector<absl::StatusOr<Response>> Run(std::chrono::milliseconds deadline,
                                            std::chrono::milliseconds max_hedge) {
    const auto now = std::chrono::system_clock::now();
    deadline_ = now + deadline;
    std::vector<Attempt*> to_start;
    mu_.Lock();
    for (uint32_t p = 0; p < parts_.size(); ++p) {
      Part& part = parts_[p];
      part.hedge_delay = std::min<std::chrono::microseconds>(max_hedge, health_.HedgeDelay(p));
      part.hedge_at = now + part.hedge_delay;
      if (Attempt* a = LaunchLocked(p))
        to_start.push_back(a);
      else
        part.error = absl::UnavailableError(StrCat("partition ", p, " has no live replica"));
    }
    mu_.Unlock();
    StartAll(to_start);
    mu_.Lock();
    HedgeUntilResolvedLocked();
    // Cancel what is still running (losing hedges, calls past the deadline) and
    // wait for their callbacks: the contexts and responses they use live here.
    // The cancels run unlocked: one may answer its call at once.
    std::vector<grpc::ClientContext*> to_cancel;
    for (uint32_t p = 0; p < parts_.size(); ++p) {
      for (auto& a : parts_[p].attempts) {
        if (a->finished) continue;
        if (parts_[p].winner < 0) health_.Failed(p, a->replica);  // ran past the deadline
        a->cancelled = true;
        to_cancel.push_back(&a->ctx);
      }
    }
    mu_.Unlock();
    for (grpc::ClientContext* ctx : to_cancel) cancel_(ctx);
    mu_.Lock();
    auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return running_ == 0; };
    mu_.Await(absl::Condition(&idle));
    std::vector<absl::StatusOr<Response>> out;
    out.reserve(parts_.size());
    for (uint32_t p = 0; p < parts_.size(); ++p) {
      Part& part = parts_[p];
      if (part.winner >= 0) {
        out.push_back(std::move(part.attempts[part.winner]->response));
      } else if (!part.error.ok()) {
        out.push_back(part.error);
      } else {
        out.push_back(
            absl::DeadlineExceededError(StrCat("partition ", p, " did not answer in time")));
      }
    }
    mu_.Unlock();
    return out;
  }

 private:
  struct Attempt {
    grpc::ClientContext ctx;
    Response response;
    uint32_t partition = 0;
    uint32_t replica = 0;
    int index = 0;  // in its part's attempts
    int64_t started_us = 0;
    bool finished = false;
    bool cancelled = false;  // by this fan-out: says nothing of the replica
  };
  struct Part {
    std::vector<uint32_t> replicas;
    size_t next = 0;
    std::vector<std::unique_ptr<Attempt>> attempts;
    int outstanding = 0;
    int winner = -1;
    bool hedged = false;
    bool over_budget = false;  // its hedge was refused once, and waits for kLateHedge delays
    std::chrono::microseconds hedge_delay{0};
    std::chrono::system_clock::time_point hedge_at;
    absl::Status error;
  };

  bool AllResolvedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (const Part& p : parts_) {
      if (p.winner < 0 && p.outstanding > 0) return false;
    }
    return true;
  }

  // Waits (mu_ held) until every partition has an answer or has run out of
  // replicas, or the deadline; hedges each partition whose call outlives its
  // hedge delay, once.
  void HedgeUntilResolvedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto resolved = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return AllResolvedLocked(); };
    for (;;) {
      auto wake = deadline_;
      for (const Part& part : parts_) {
        if (part.winner < 0 && part.outstanding > 0 && !part.hedged)
          wake = std::min(wake, part.hedge_at);
      }
      if (mu_.AwaitWithDeadline(absl::Condition(&resolved), absl::FromChrono(wake))) return;
      const auto now = std::chrono::system_clock::now();
      if (now >= deadline_) return;
      std::vector<Attempt*> hedges;
      for (uint32_t p = 0; p < parts_.size(); ++p) {
        Part& part = parts_[p];
        if (part.winner >= 0 || part.outstanding == 0 || part.hedged || now < part.hedge_at)
          continue;
        if (part.next >= part.replicas.size()) {  // no replica left to hedge to
          part.hedged = true;
          continue;
        }
        const auto slow = std::find_if(part.attempts.begin(), part.attempts.end(),
                                       [](const auto& a) { return !a->finished; });
        // Over the partition's hedge budget (replica_health.h) the call runs on, and is
        // hedged anyway once it has run kLateHedge times the delay: a busy replica's calls
        // seldom get there, a frozen one's all do.
        if (!part.over_budget && !health_.TakeHedge(p, (*slow)->replica)) {
          part.over_budget = true;
          part.hedge_at += (kLateHedge - 1) * part.hedge_delay;
          continue;
        }
        part.hedged = true;
        for (const auto& a : part.attempts) {
          if (!a->finished) health_.Hedged(p, a->replica);
        }
        if (Attempt* a = LaunchLocked(p)) hedges.push_back(a);
      }
      mu_.Unlock();
      StartAll(hedges);
      mu_.Lock();
    }
  }

  // The next attempt for partition p, or null when every replica was tried.
  Attempt* LaunchLocked(uint32_t p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Part& part = parts_[p];
    if (part.next >= part.replicas.size()) return nullptr;
    auto a = std::make_unique<Attempt>();
    a->ctx.set_deadline(deadline_);
    a->partition = p;
    a->replica = part.replicas[part.next];
    a->index = static_cast<int>(part.attempts.size());
    a->started_us = clock_.NowMonotonicMicros();
    Attempt* raw = a.get();
    part.attempts.push_back(std::move(a));
    ++part.next;
    ++part.outstanding;
    ++running_;
    return raw;
  }

  void StartAll(const std::vector<Attempt*>& attempts) {
    for (Attempt* a : attempts) {
      start_(a->partition, a->replica, &a->ctx, &a->response,
             [self = this->shared_from_this(), a](grpc::Status s) { self->Finished(a, s); });
    }
  }

  void Finished(Attempt* a, const grpc::Status& s) {
    const int64_t now_us = clock_.NowMonotonicMicros();
    const uint32_t p = a->partition;
    Attempt* retry = nullptr;
    {
      absl::MutexLock lock(&mu_);
      Part& part = parts_[p];
      a->finished = true;
      --part.outstanding;
      --running_;
      if (s.ok()) {
        if (part.winner < 0) Won(part, *a, now_us);
      } else if (part.winner < 0 && !a->cancelled) {
        part.error = net::FromGrpc(s);
        // A refused request (bad query) would be refused by every replica: do
        // not retry it, and do not hold it against the replica.
        if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
          health_.Failed(p, a->replica);
          if (s.error_code() != grpc::StatusCode::CANCELLED &&
              std::chrono::system_clock::now() < deadline_) {
            retry = LaunchLocked(p);
          }
        }
      }
    }
    if (retry != nullptr) StartAll({retry});
  }

  // `a` answered first: its latency is a sample, and the calls to this
  // partition that started no later and are still running were overtaken.
  void Won(Part& part, const Attempt& a, int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    part.winner = a.index;
    health_.Answered(a.partition, a.replica, std::chrono::microseconds(now_us - a.started_us));
    for (const auto& other : part.attempts) {
      if (!other->finished && other->started_us <= a.started_us)
        health_.Overtaken(a.partition, other->replica);
    }
  }

  Start start_;
  Cancel cancel_;
  ReplicaHealth& health_;
  const Clock& clock_;
  std::chrono::system_clock::time_point deadline_;
  absl::Mutex mu_;
  std::vector<Part> parts_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::Status OutcomeStatus(const ipb::Outcome& o) {
  return absl::Status(static_cast<absl::StatusCode>(o.code()), o.message());
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

ClusterBackend::~ClusterBackend() = default;

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
      std::move(replicas), storage_health_, clock_,
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

absl::StatusOr<query::CollectionStats> ClusterBackend::CollectStats(
    const aggregator::SearchCall& call) const {
  const uint64_t epoch = stats_cache_.Epoch();
  if (std::optional<query::CollectionStats> kept = stats_cache_.Find(call.search_terms)) {
    return *std::move(kept);
  }
  const uint32_t partitions = static_cast<uint32_t>(view_.topology().index.size());
  std::vector<std::vector<uint32_t>> replicas = IndexReplicasInTurn();
  ipb::StatsRequest request;
  request.set_search_terms(std::string(call.search_terms));
  auto fan = std::make_shared<FanOut<ipb::CollectionStats>>(
      std::move(replicas), index_health_, clock_,
      [&](uint32_t p, uint32_t r, grpc::ClientContext* ctx, ipb::CollectionStats* response,
          std::function<void(grpc::Status)> done) {
        view_.index(p, r).async()->Stats(ctx, &request, response, std::move(done));
      });
  query::CollectionStats total;
  std::vector<absl::StatusOr<ipb::CollectionStats>> answers =
      fan->Run(options_.search_deadline, options_.hedge_after);
  std::vector<uint64_t> generations(partitions);
  bool complete = true;
  for (uint32_t p = 0; p < partitions; ++p) {
    if (answers[p].ok()) {
      query::AddStats(FromProto(*answers[p]), &total);
      generations[p] = answers[p]->generation();
    } else if (absl::IsInvalidArgument(answers[p].status())) {
      return answers[p].status();  // the query itself is refused
    } else if (!call.allow_partial) {
      return absl::UnavailableError(
          StrCat("index partition ", p, ": ", answers[p].status().message()));
    } else {
      complete = false;
    }
  }
  if (complete) stats_cache_.Store(call.search_terms, total, generations, epoch);
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
      IndexReplicasInTurn(), index_health_, clock_,
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

absl::StatusOr<aggregator::SearchOutcome> ClusterBackend::RunSearch(
    const aggregator::SearchCall& call) const {
  const uint32_t partitions = static_cast<uint32_t>(view_.topology().index.size());
  std::vector<std::vector<uint32_t>> replicas = IndexReplicasInTurn();
  const query::SearchOptions& o = call.options;
  ipb::PartitionSearchRequest request;
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
  // Newest-first searches share calls (cluster/search_batcher.h); ranked ones measured no
  // gain from it, and go one to a call (docs/benchmarks.md).
  const bool batched = o.sort == query::SortMode::kNewest;
  auto fan = std::make_shared<FanOut<ipb::PartitionSearchResponse>>(
      std::move(replicas), index_health_, clock_,
      [&](uint32_t p, uint32_t r, grpc::ClientContext* ctx, ipb::PartitionSearchResponse* response,
          std::function<void(grpc::Status)> done) {
        if (batched) return batcher_.Search(p, r, ctx, request, response, std::move(done));
        view_.index(p, r).async()->Search(ctx, &request, response, std::move(done));
      },
      [this, batched](grpc::ClientContext* ctx) {
        if (batched) return batcher_.Cancel(ctx);
        ctx->TryCancel();
      });
  std::vector<absl::StatusOr<ipb::PartitionSearchResponse>> answers =
      fan->Run(options_.search_deadline, options_.hedge_after);

  // k-way merge of the partitions' top-k (each sorted), by sort key.
  aggregator::SearchOutcome out;
  std::vector<query::Hit> hits;
  for (uint32_t p = 0; p < partitions; ++p) {
    if (!answers[p].ok()) {
      absl::Status s =
          LeaveOut(p, answers[p].status(), call.allow_partial, &out.missing_partitions);
      if (!s.ok()) return s;
      continue;
    }
    const ipb::PartitionSearchResponse& r = *answers[p];
    stats_cache_.Saw(p, r.generation());
    out.total_hits += r.total_hits();
    out.total_is_exact = out.total_is_exact && r.total_is_exact();
    out.max_id = std::max<TweetId>(out.max_id, r.max_id());
    for (const ipb::PartitionHit& h : r.hits()) {
      hits.push_back(query::Hit{h.id(), h.score(), h.likes(), h.created_at_ms(),
                                query::SortKey{h.primary(), h.id()}});
    }
  }
  query::CapTotal(o.exact_total, &out.total_hits, &out.total_is_exact);
  std::sort(hits.begin(), hits.end(),
            [](const query::Hit& a, const query::Hit& b) { return query::Before(a.key, b.key); });
  if (hits.size() > o.limit) hits.resize(o.limit);

  // Hydrate: the cache, then one MultiGet per storage partition for the rest.
  const uint32_t storage_partitions = static_cast<uint32_t>(view_.topology().storage.size());
  out.hits.resize(hits.size());
  std::vector<ipb::MultiGetRequest> gets(storage_partitions);
  std::vector<std::vector<uint32_t>> storage_replicas(storage_partitions);
  for (size_t i = 0; i < hits.size(); ++i) {
    out.hits[i].hit = hits[i];
    out.hits[i].tweet = cache_.Get(hits[i].id);
    if (out.hits[i].tweet == nullptr) {
      gets[StoragePartitionOf(hits[i].id, storage_partitions)].add_ids(hits[i].id);
    }
  }
  bool any_missing = false;
  for (uint32_t p = 0; p < storage_partitions; ++p) {
    if (gets[p].ids_size() == 0) continue;
    any_missing = true;
    storage_replicas[p] = StorageReplicasPrimaryFirst(p);
  }
  if (any_missing) {
    const uint64_t epoch = cache_.epoch();
    auto fetch = std::make_shared<FanOut<ipb::MultiGetResponse>>(
        std::move(storage_replicas), storage_health_, clock_,
        [&](uint32_t p, uint32_t r, grpc::ClientContext* ctx, ipb::MultiGetResponse* response,
            std::function<void(grpc::Status)> done) {
          view_.storage(p, r).async()->MultiGet(ctx, &gets[p], response, std::move(done));
        });
    std::vector<absl::StatusOr<ipb::MultiGetResponse>> fetched =
        fetch->Run(options_.search_deadline, options_.hedge_after);
    absl::flat_hash_map<TweetId, std::shared_ptr<const storage::StoredTweet>> found;
    for (uint32_t p = 0; p < storage_partitions; ++p) {
      if (gets[p].ids_size() == 0) continue;
      if (!fetched[p].ok()) {
        return absl::UnavailableError(
            StrCat("storage partition ", p, ": ", fetched[p].status().message()));
      }
      for (const v1::Tweet& t : fetched[p]->tweets()) {
        auto tweet = std::make_shared<const storage::StoredTweet>(FromProto(t));
        cache_.PutIfUnchanged(tweet, epoch);
        found[t.id()] = std::move(tweet);
      }
    }
    for (aggregator::SearchHit& h : out.hits) {
      if (h.tweet != nullptr) continue;
      auto it = found.find(h.hit.id);
      if (it != found.end()) h.tweet = it->second;  // absent: deleted since it was indexed
    }
  }
  std::erase_if(out.hits, [](const aggregator::SearchHit& h) { return h.tweet == nullptr; });
  return out;
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
      std::move(replicas), index_health_, clock_,
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
      std::move(storage_replicas), storage_health_, clock_,
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
