#include "aggregator/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "common/file_util.h"
#include "common/strings.h"
#include "indexer/index/tweet_sources.h"
#include "indexer/server/index_node.h"
#include "storage/write_records.h"

namespace tweetsearch::aggregator {
namespace {

// Ingest calls merged into one store write stop growing at this many tweets.
constexpr size_t kMaxGroupTweets = 50'000;
// Changes replayed or tweets re-indexed per batch on recovery.
constexpr size_t kRecoveryBatch = 4096;

std::string IndexDir(const EngineOptions& o) { return o.data_dir + "/index"; }
std::string CheckpointFile(const EngineOptions& o) { return IndexDir(o) + "/CHECKPOINT"; }

}  // namespace

struct Engine::Writer {
  enum class Kind { kIngest, kDelete, kLikes };
  Kind kind = Kind::kIngest;
  std::vector<NewTweet>* tweets = nullptr;         // kIngest
  std::vector<IngestOutcome>* outcomes = nullptr;  // kIngest
  TweetId id = 0;                                  // kDelete, kLikes
  int64_t value = 0;                               // kLikes
  bool add = false;                                // kLikes
  absl::Status status;                             // kDelete, kLikes
  uint32_t likes = 0;                              // kLikes: the new value
  WriteOnce* once = nullptr;                       // an idempotent write: its key
  bool done = false;
  absl::CondVar cv;
};

Engine::Engine(const EngineOptions& options, const Clock& clock, SnowflakeGenerator ids,
               std::unique_ptr<storage::TweetStore> store, std::unique_ptr<index::Index> index,
               uint64_t checkpoint_change)
    : options_(options),
      clock_(clock),
      ids_(std::move(ids)),
      store_(std::move(store)),
      index_(std::move(index)),
      cache_(options.tweet_cache_bytes),
      checkpoint_change_(checkpoint_change) {
  checkpoint_change_seen_.store(checkpoint_change);
  // The streams file queries under their rarest terms, by this index's document frequency.
  if (!options.streams) return;
  streams_ = std::make_unique<StreamHub>(
      index_->analyzer(), change_log_, store_->LastSequence(),
      [this](std::string_view term) {
        uint64_t df = 0;
        // Held: a temporary in the range would die before the loop (and a merge may drop it).
        const std::shared_ptr<const index::IndexSnapshot> snapshot = index_->Snapshot();
        for (const auto& segment : snapshot->segments) df += segment->DocFreq(term);
        return df;
      },
      options.stream_options);
}

Engine::~Engine() {
  // Best effort: a failed final checkpoint only means a longer replay on the next start.
  if (options_.checkpoint_on_close) (void)Checkpoint();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& options,
                                                     const Clock& clock) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir is empty");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir + "/storage", ec);
  if (ec)
    return absl::UnavailableError(StrCat("cannot create ", options.data_dir, ": ", ec.message()));
  absl::StatusOr<SnowflakeGenerator> ids = SnowflakeGenerator::Create(options.node_id, clock);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<std::unique_ptr<storage::TweetStore>> store =
      storage::TweetStore::Open(options.data_dir + "/storage", options.store);
  if (!store.ok()) return store.status();

  // The saved index and the change it reflects. No saved index means: rebuild from storage.
  index::IndexOptions index_options = options.index;
  index_options.background_merges = true;  // sealing and merging off the ingest path
  absl::StatusOr<std::unique_ptr<index::Index>> index =
      index::Index::Open(index_options, IndexDir(options));
  uint64_t checkpoint = 0;
  bool rebuild = false;
  if (absl::IsNotFound(index.status())) {
    index::IndexOptions fresh = index_options;
    fresh.directory = IndexDir(options);
    index = index::Index::Create(fresh);
    rebuild = true;
  } else if (index.ok()) {
    absl::StatusOr<std::string> text = ReadFile(CheckpointFile(options));
    if (text.ok() && !absl::SimpleAtoi(AsAbsl(*text), &checkpoint)) {
      return absl::DataLossError(StrCat(CheckpointFile(options), " is not a number"));
    }
  }
  if (!index.ok()) return index.status();

  std::unique_ptr<Engine> engine(new Engine(options, clock, *std::move(ids), *std::move(store),
                                            *std::move(index), checkpoint));
  absl::Status s;
  if (rebuild) {
    // Every stored tweet, in id order; then the change log is history.
    std::vector<index::IndexDoc> docs;
    auto flush = [&] {
      for (const auto& doc : docs) engine->NoteId(doc.id);
      engine->index_->AddBatch(docs);
      docs.clear();
    };
    s = engine->store_->Scan(0, kMaxTweetId, [&](const storage::StoredTweet& t) {
      docs.push_back(indexer::ToIndexDoc(t));
      if (docs.size() == kRecoveryBatch) flush();
      return true;
    });
    flush();
    absl::MutexLock lock(&engine->leader_mu_);
    engine->checkpoint_change_ = engine->store_->LastSequence();
  } else {
    s = engine->Recover();
  }
  if (!s.ok()) return s;
  return engine;
}

absl::Status Engine::Recover() {
  uint64_t from = 0;
  {
    absl::MutexLock lock(&leader_mu_);
    from = checkpoint_change_;
  }
  const std::shared_ptr<const index::IndexSnapshot> snapshot = index_->Snapshot();
  for (const auto& segment : snapshot->segments) NoteId(segment->MaxTweetId());
  std::vector<storage::Change> changes;
  auto apply = [&] {
    size_t i = 0;
    while (i < changes.size()) {
      if (changes[i].kind == storage::ChangeKind::kPut) {
        std::vector<TweetId> ids;
        while (i < changes.size() && changes[i].kind == storage::ChangeKind::kPut) {
          ids.push_back(changes[i++].id);
        }
        std::vector<index::IndexDoc> docs;
        for (auto& t : store_->MultiGet(ids)) {
          // NotFound: deleted later in the log.
          if (t.ok()) docs.push_back(indexer::ToIndexDoc(*t));
        }
        for (const auto& doc : docs) NoteId(doc.id);
        index_->AddBatch(docs);  // AlreadyExists: indexed before the checkpoint was recorded
      } else if (changes[i].kind == storage::ChangeKind::kDelete) {
        (void)index_->Delete(changes[i++].id);  // NotFound: never indexed or deleted already
      } else if (!storage::ConcernsATweet(changes[i].kind)) {
        ++i;  // a write's record: nothing to index
      } else {
        (void)index_->SetLikes(changes[i].id, changes[i].likes);  // NotFound: deleted later
        ++i;
      }
    }
    changes.clear();
  };
  absl::Status s = store_->ScanChanges(from, [&](const storage::Change& c) {
    changes.push_back(c);
    if (changes.size() == kRecoveryBatch) apply();
    return true;
  });
  apply();
  return s;
}

void Engine::NoteId(TweetId id) {
  TweetId seen = max_id_.load(std::memory_order_relaxed);
  while (id > seen && !max_id_.compare_exchange_weak(seen, id, std::memory_order_acq_rel)) {
  }
}

std::vector<IngestOutcome> Engine::Ingest(std::vector<NewTweet> tweets, WriteOnce* once) {
  std::vector<IngestOutcome> outcomes(tweets.size());
  if (tweets.empty() && once == nullptr) return outcomes;
  Writer w;
  w.kind = Writer::Kind::kIngest;
  w.tweets = &tweets;
  w.outcomes = &outcomes;
  w.once = once;
  Submit(&w);
  if (!w.status.ok() && once != nullptr) {
    // The call failed as a whole (only an idempotent one can): no outcome is its own.
    once->status = w.status;
    for (IngestOutcome& o : outcomes) o = IngestOutcome{w.status, 0};
  }
  return outcomes;
}

absl::Status Engine::Delete(TweetId id, WriteOnce* once) {
  Writer w;
  w.kind = Writer::Kind::kDelete;
  w.id = id;
  w.once = once;
  Submit(&w);
  return w.status;
}

absl::StatusOr<uint32_t> Engine::Likes(TweetId id, int64_t value, bool add, WriteOnce* once) {
  if (absl::Status s = storage::CheckLikesChange(value, add); !s.ok()) return s;
  Writer w;
  w.kind = Writer::Kind::kLikes;
  w.id = id;
  w.value = value;
  w.add = add;
  w.once = once;
  Submit(&w);
  if (!w.status.ok()) return w.status;
  return w.likes;
}

void Engine::Submit(Writer* w) {
  absl::MutexLock lock(&queue_mu_);
  queue_.push_back(w);
  while (!w->done && queue_.front() != w) w->cv.Wait(&queue_mu_);
  if (w->done) return;

  // This writer leads: it takes the ingest calls queued behind it (or only itself, for a
  // delete or likes change, whose order relative to ingests must stay as queued, and for an
  // idempotent ingest, whose record answers for its own tweets).
  std::vector<Writer*> group = {w};
  if (w->kind == Writer::Kind::kIngest && w->once == nullptr) {
    size_t tweets = w->tweets->size();
    for (size_t i = 1; i < queue_.size(); ++i) {
      Writer* next = queue_[i];
      if (next->kind != Writer::Kind::kIngest || next->once != nullptr ||
          tweets + next->tweets->size() > kMaxGroupTweets) {
        break;
      }
      tweets += next->tweets->size();
      group.push_back(next);
    }
  }
  queue_mu_.Unlock();
  {
    absl::MutexLock leader(&leader_mu_);
    WriteGroup(group);
    NoteChangeTime();
    if (const int64_t now = clock_.NowUnixMillis(); now - records_swept_ms_ >= 3'600'000) {
      // Idempotent writes' records older than a day, once an hour.
      records_swept_ms_ = now;
      if (absl::StatusOr<uint64_t> n = storage::DropExpiredWriteRecords(*store_, now); !n.ok()) {
        spdlog::warn("dropping expired write records failed: {}", n.status().message());
      }
    }
    const uint64_t last = store_->LastSequence();
    if (last - checkpoint_change_ >= options_.checkpoint_every && last >= checkpoint_retry_at_) {
      // A failed checkpoint leaves the previous one in force (the change log still holds every
      // change since), and is tried again a quarter interval later.
      if (absl::Status s = CheckpointLocked(); !s.ok()) {
        checkpoint_failures_.fetch_add(1, std::memory_order_relaxed);
        checkpoint_retry_at_ = last + std::max<uint64_t>(1, options_.checkpoint_every / 4);
        spdlog::warn(
            "checkpoint failed (the previous one stays in force; retried after change "
            "{}): {}",
            checkpoint_retry_at_, s.message());
      }
    }
  }
  queue_mu_.Lock();
  for (Writer* done : group) {
    queue_.pop_front();
    done->done = true;
    if (done != w) done->cv.Signal();
  }
  if (!queue_.empty()) queue_.front()->cv.Signal();
}

void Engine::WriteGroup(std::vector<Writer*>& group) {
  if (group[0]->kind == Writer::Kind::kIngest) {
    WriteIngest(group);
  } else {
    WriteOne(group[0]);
  }
}

void Engine::WriteIngest(std::vector<Writer*>& group) {
  Writer* const once = group[0]->once != nullptr ? group[0] : nullptr;  // then alone
  if (once != nullptr && Replay(once)) return;
  // Validate, assign ids, and gather the candidates of every call of the group.
  struct Candidate {
    IngestOutcome* outcome;
    storage::StoredTweet tweet;
  };
  std::vector<Candidate> candidates;
  absl::flat_hash_set<TweetId> seen;
  uint64_t rejected = 0;
  for (Writer* w : group) {
    for (size_t i = 0; i < w->tweets->size(); ++i) {
      NewTweet& t = (*w->tweets)[i];
      IngestOutcome& outcome = (*w->outcomes)[i];
      outcome.status = ValidateNewTweet(t, options_.max_text_bytes);
      if (!outcome.status.ok()) {
        ++rejected;
        continue;
      }
      const TweetId id = t.id.has_value() ? *t.id : ids_.Next();
      if (!seen.insert(id).second) {
        outcome.status = absl::AlreadyExistsError(StrCat("duplicate id ", id));
        ++rejected;
        continue;
      }
      storage::StoredTweet s = ToStoredTweet(std::move(t), id, clock_);
      outcome.id = s.id;
      candidates.push_back({&outcome, std::move(s)});
    }
  }

  // Ids stored by earlier calls are duplicates too.
  std::vector<TweetId> ids;
  ids.reserve(candidates.size());
  for (const Candidate& c : candidates) ids.push_back(c.tweet.id);
  absl::StatusOr<std::vector<bool>> stored = store_->Contains(ids);
  storage::Mutation mutation;
  std::vector<Candidate*> written;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Candidate& c = candidates[i];
    if (!stored.ok()) {
      c.outcome->status = absl::UnavailableError(StrCat("storage: ", stored.status().message()));
      ++rejected;
    } else if ((*stored)[i]) {
      c.outcome->status = absl::AlreadyExistsError(StrCat("duplicate id ", c.tweet.id));
      ++rejected;
    } else {
      written.push_back(&c);
      mutation.puts.push_back(c.tweet);
    }
  }
  rejected_.fetch_add(rejected, std::memory_order_relaxed);
  // An idempotent call's record says what it did, written with its tweets (or alone); only a
  // final answer is kept (a storage failure is not one: the retry tries again).
  if (once != nullptr &&
      std::none_of(once->outcomes->begin(), once->outcomes->end(),
                   [](const IngestOutcome& o) { return absl::IsUnavailable(o.status); })) {
    mutation.requests.push_back(RecordOf(*once));
  }
  if (mutation.empty()) return;

  // Durable first, then searchable.
  absl::StatusOr<uint64_t> sequence = store_->Write(mutation);
  write_groups_.fetch_add(1, std::memory_order_relaxed);
  if (!sequence.ok()) {
    for (Candidate* c : written) {
      c->outcome->status = absl::UnavailableError(StrCat("storage: ", sequence.status().message()));
    }
    rejected_.fetch_add(written.size(), std::memory_order_relaxed);
    return;
  }
  std::vector<index::IndexDoc> docs;
  docs.reserve(written.size());
  for (Candidate* c : written) docs.push_back(indexer::ToIndexDoc(c->tweet));
  std::vector<absl::Status> indexed = index_->AddBatch(docs);
  storage::Mutation undo;  // stored but not indexable: take back, so both stay in step
  for (size_t i = 0; i < written.size(); ++i) {
    if (indexed[i].ok()) {
      NoteId(written[i]->tweet.id);
      continue;
    }
    written[i]->outcome->status = indexed[i];
    undo.deletes.push_back(written[i]->tweet.id);
  }
  if (once != nullptr && !undo.empty()) undo.requests.push_back(RecordOf(*once));
  std::vector<StreamChange> changes;
  if (streams_ != nullptr && streams_->wanted()) {
    // Puts are logged in order, so the i-th written tweet has the i-th sequence of the write.
    const uint64_t first = *sequence - written.size() + 1;
    for (size_t i = 0; i < written.size(); ++i) {
      if (!indexed[i].ok()) continue;
      changes.push_back(
          StreamChange{first + i, StreamChange::Kind::kPut,
                       std::make_shared<const storage::StoredTweet>(std::move(written[i]->tweet))});
    }
  }
  PublishChanges(std::move(changes), *sequence);
  if (!undo.empty()) {
    // Failure: the tweet stays stored, unindexed. Either way no stream saw it.
    absl::StatusOr<uint64_t> undone = store_->Write(undo);
    if (undone.ok() && streams_ != nullptr) streams_->Publish({}, *undone);
  }
  ingested_.fetch_add(written.size() - undo.deletes.size(), std::memory_order_relaxed);
  rejected_.fetch_add(undo.deletes.size(), std::memory_order_relaxed);
}

void Engine::WriteOne(Writer* w) {
  if (w->once != nullptr && Replay(w)) return;
  absl::StatusOr<storage::StoredTweet> current = store_->Get(w->id);
  storage::Mutation mutation;
  if (!current.ok()) {
    w->status = current.status();
    // An idempotent write records its final answers: a tweet not stored is one.
    if (w->once == nullptr || !absl::IsNotFound(w->status)) return;
  } else if (w->kind == Writer::Kind::kDelete) {
    mutation.deletes.push_back(w->id);
  } else {
    w->likes = storage::ApplyLikes(current->likes, w->value, w->add);
    mutation.likes.emplace_back(w->id, w->likes);
  }
  if (w->once != nullptr) mutation.requests.push_back(RecordOf(*w));
  absl::StatusOr<uint64_t> sequence = store_->Write(mutation);
  if (!sequence.ok()) {
    w->status = sequence.status();
    return;
  }
  if (!current.ok()) {
    PublishChanges({}, *sequence);
    return;
  }
  // The store had the tweet, so the index has it too; a NotFound here would be a bug that the
  // next restart (replay) repairs, and is not worth failing the call for.
  if (w->kind == Writer::Kind::kDelete) {
    (void)index_->Delete(w->id);
  } else {
    (void)index_->SetLikes(w->id, w->likes);
  }
  cache_.Invalidate(w->id);
  std::vector<StreamChange> changes;
  if (w->kind == Writer::Kind::kDelete && streams_ != nullptr && streams_->wanted()) {
    changes.push_back(StreamChange{*sequence, StreamChange::Kind::kDelete,
                                   std::make_shared<const storage::StoredTweet>(*current)});
  }
  PublishChanges(std::move(changes), *sequence);
}

bool Engine::Replay(Writer* w) {
  absl::StatusOr<std::optional<storage::WriteRecord>> stored =
      storage::FindWriteRecord(*store_, w->once->key, clock_.NowUnixMillis());
  if (!stored.ok()) {
    w->status = absl::UnavailableError(StrCat("storage: ", stored.status().message()));
    return true;
  }
  if (!stored->has_value()) return false;
  const storage::WriteRecord& r = **stored;
  if (absl::Status same = storage::CheckSameRequest(r, w->once->fingerprint); !same.ok()) {
    w->status = same;
    return true;
  }
  w->once->replayed = true;
  if (w->kind != Writer::Kind::kIngest) {
    w->status = r.status;
    w->likes = r.likes;
    return true;
  }
  if (r.ids.size() != w->outcomes->size() || r.outcomes.size() != w->outcomes->size()) {
    w->status = absl::DataLossError("a stored ingest record does not fit its request");
    return true;
  }
  for (size_t i = 0; i < r.ids.size(); ++i) (*w->outcomes)[i] = {r.outcomes[i], r.ids[i]};
  return true;
}

storage::StoredRequest Engine::RecordOf(const Writer& w) const {
  storage::WriteRecord r;
  r.fingerprint = w.once->fingerprint;
  r.created_at_ms = clock_.NowUnixMillis();
  r.done = true;
  if (w.kind == Writer::Kind::kIngest) {
    for (const IngestOutcome& o : *w.outcomes) {
      r.ids.push_back(o.id);
      r.outcomes.push_back(o.status);
    }
  } else {
    r.status = w.status;
    r.likes = w.likes;
  }
  return storage::ToStoredRequest(w.once->key, r);
}

void Engine::PublishChanges(std::vector<StreamChange> changes, uint64_t through) {
  // A stream opened since the caller looked at wanted() starts after `through` (after the
  // store's last sequence), so changes left out for it were never its own.
  if (streams_ == nullptr) return;
  if (streams_->wanted()) {
    streams_->Publish(std::move(changes), through);
  } else {
    streams_->Advance(through);
  }
}

void Engine::NoteChangeTime() {
  const int64_t now = clock_.NowUnixMillis();
  const uint64_t last = store_->LastSequence();
  if (change_times_.empty() || now - change_times_.back().first >= 1000) {
    change_times_.emplace_back(now, last);
  }
  while (!change_times_.empty() &&
         change_times_.front().first <= now - options_.change_retention_ms) {
    trimmable_ = std::max(trimmable_, change_times_.front().second);
    change_times_.pop_front();
  }
}

absl::StatusOr<storage::StoredTweet> Engine::Get(TweetId id) const { return store_->Get(id); }

absl::StatusOr<std::unique_ptr<StreamFeed>> Engine::OpenStream(const StreamCall& call) {
  if (streams_ == nullptr) return Backend::OpenStream(call);
  std::optional<StreamPosition> resume;
  if (!call.last_event_id.empty()) {
    absl::StatusOr<StreamPosition> position = ParseStreamEventId(call.last_event_id, 1);
    if (!position.ok()) return position.status();
    resume = *std::move(position);
  }
  StreamHub* const hubs[] = {streams_.get()};
  return StreamFeed::Open(hubs, *call.plan, resume);
}

std::optional<StreamHubStats> Engine::StreamStats() const {
  if (streams_ == nullptr) return std::nullopt;
  return streams_->Stats();
}

absl::StatusOr<std::vector<SearchHit>> Engine::Search(const query::Plan& plan,
                                                      const query::SearchOptions& options,
                                                      uint64_t* total_hits,
                                                      bool* total_is_exact) const {
  std::shared_ptr<const index::IndexSnapshot> snapshot = index_->Snapshot();
  absl::StatusOr<query::SearchResult> result = query::Search(*snapshot, plan, options);
  if (!result.ok()) return result.status();
  *total_hits = result->total_hits;
  *total_is_exact = result->total_is_exact;
  // Hydrate from the cache, then the store for the misses.
  std::vector<SearchHit> hits(result->hits.size());
  std::vector<TweetId> missing;
  std::vector<size_t> missing_at;
  for (size_t i = 0; i < hits.size(); ++i) {
    hits[i].hit = result->hits[i];
    hits[i].tweet = cache_.Get(hits[i].hit.id);
    if (hits[i].tweet == nullptr) {
      missing.push_back(hits[i].hit.id);
      missing_at.push_back(i);
    }
  }
  if (!missing.empty()) {
    const uint64_t epoch = cache_.epoch();
    std::vector<absl::StatusOr<storage::StoredTweet>> tweets = store_->MultiGet(missing);
    for (size_t j = 0; j < missing.size(); ++j) {
      if (tweets[j].ok()) {
        auto tweet = std::make_shared<const storage::StoredTweet>(*std::move(tweets[j]));
        cache_.PutIfUnchanged(tweet, epoch);
        hits[missing_at[j]].tweet = std::move(tweet);
      } else if (!absl::IsNotFound(tweets[j].status())) {
        return tweets[j].status();
      }  // NotFound: deleted since the index snapshot was taken
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < hits.size(); ++i) {
    if (hits[i].tweet == nullptr) continue;
    if (kept != i) hits[kept] = std::move(hits[i]);
    ++kept;
  }
  hits.resize(kept);
  return hits;
}

absl::StatusOr<SearchOutcome> Engine::RunSearch(const SearchCall& call) const {
  SearchOutcome out;
  out.max_id = MaxTweetId();
  absl::StatusOr<std::vector<SearchHit>> hits =
      Search(*call.plan, call.options, &out.total_hits, &out.total_is_exact);
  if (!hits.ok()) return hits.status();
  out.hits = *std::move(hits);
  return out;
}

absl::StatusOr<CountsOutcome> Engine::RunCounts(const CountsCall& call) const {
  std::shared_ptr<const index::IndexSnapshot> snapshot = index_->Snapshot();
  absl::StatusOr<std::vector<uint64_t>> counts =
      query::CountOverTime(*snapshot, *call.plan, call.buckets);
  if (!counts.ok()) return counts.status();
  return CountsOutcome{*std::move(counts), {}};
}

absl::Status Engine::Checkpoint() {
  absl::MutexLock leader(&leader_mu_);
  return CheckpointLocked();
}

absl::Status Engine::CheckpointLocked() {
  const uint64_t sequence = store_->LastSequence();
  // Merging is the index's own background work; a checkpoint seals and saves, nothing more.
  if (sequence == checkpoint_change_ && std::filesystem::exists(IndexDir(options_) + "/MANIFEST")) {
    return absl::OkStatus();
  }
  if (absl::Status s = index_->Seal(); !s.ok()) return s;
  if (absl::Status s = index_->Save(IndexDir(options_)); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(CheckpointFile(options_), StrCat(sequence)); !s.ok()) {
    return s;
  }
  checkpoint_change_ = sequence;
  checkpoint_change_seen_.store(sequence, std::memory_order_relaxed);
  // Streams resume from the log: it keeps the retention's changes, checkpointed or not.
  NoteChangeTime();
  const uint64_t trim = std::min(sequence, trimmable_);
  return trim == 0 ? absl::OkStatus() : store_->TrimChanges(trim);
}

EngineStats Engine::Stats() const {
  EngineStats s;
  index::IndexStats is = index_->Stats();
  s.indexed_documents = is.documents;
  s.index_memory_bytes = is.memory_bytes;
  s.index_mapped_bytes = is.mapped_bytes;
  s.index_damaged_segments = is.damaged_segments;
  s.sealed_segments = is.sealed_segments;
  s.stored_tweets_estimate = store_->ApproximateCount();
  s.storage_disk_bytes = store_->DiskBytes();
  s.tweets_ingested = ingested_.load(std::memory_order_relaxed);
  s.tweets_rejected = rejected_.load(std::memory_order_relaxed);
  s.write_groups = write_groups_.load(std::memory_order_relaxed);
  s.last_change = store_->LastSequence();
  s.checkpoint_change = checkpoint_change_seen_.load(std::memory_order_relaxed);
  s.checkpoint_failures = checkpoint_failures_.load(std::memory_order_relaxed);
  s.tweet_cache_hits = cache_.hits();
  s.tweet_cache_misses = cache_.misses();
  s.tweet_cache_bytes = cache_.bytes();
  return s;
}

}  // namespace tweetsearch::aggregator
