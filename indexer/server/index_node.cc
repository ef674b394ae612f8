#include "indexer/server/index_node.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cluster/topology.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace tweetsearch::indexer {
namespace {

std::string IndexDir(const IndexNodeOptions& o) { return o.data_dir + "/index"; }
std::string CursorsFile(const IndexNodeOptions& o) { return IndexDir(o) + "/CURSORS"; }
std::string RebuildFile(const IndexNodeOptions& o) { return IndexDir(o) + "/REBUILD"; }

absl::StatusOr<std::vector<uint64_t>> ParseCursors(const std::string& path, absl::string_view text,
                                                   size_t count) {
  std::vector<uint64_t> cursors;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(part, &v)) return absl::DataLossError(StrCat(path, " is damaged"));
    cursors.push_back(v);
  }
  if (cursors.size() != count) {
    return absl::FailedPreconditionError(
        StrCat(path, " has ", cursors.size(), " storage partitions, the topology ", count));
  }
  return cursors;
}

absl::StatusOr<std::vector<uint64_t>> ReadCursors(const std::string& path, size_t count) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseCursors(path, AsAbsl(*text), count);
}

// REBUILD: "<from sequences, comma separated>;<through id>".
struct RebuildProgress {
  std::vector<uint64_t> from;
  TweetId through = 0;
};

absl::StatusOr<RebuildProgress> ReadRebuild(const std::string& path, size_t count) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<absl::string_view> parts = absl::StrSplit(AsAbsl(*text), ';');
  RebuildProgress out;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &out.through)) {
    return absl::DataLossError(StrCat(path, " is damaged"));
  }
  absl::StatusOr<std::vector<uint64_t>> from = ParseCursors(path, parts[0], count);
  if (!from.ok()) return from.status();
  out.from = *std::move(from);
  return out;
}

std::string JoinCursors(const std::vector<uint64_t>& cursors) {
  std::string out;
  for (size_t i = 0; i < cursors.size(); ++i) out += StrCat(i == 0 ? "" : ",", cursors[i]);
  return out;
}

}  // namespace

index::IndexDoc ToIndexDoc(const storage::StoredTweet& t) {
  index::IndexDoc doc;
  doc.id = t.id;
  doc.user_id = t.user_id;
  doc.user_name = t.user_name;
  doc.text = t.text;
  doc.created_at_ms = t.created_at_ms;
  doc.lang = t.lang;
  doc.likes = t.likes;
  return doc;
}

std::string_view IndexStateName(IndexState state) {
  switch (state) {
    case IndexState::kCatchingUp:
      return "catching_up";
    case IndexState::kServing:
      return "serving";
    case IndexState::kNeedsRebuild:
      return "needs_rebuild";
    case IndexState::kRebuilding:
      return "rebuilding";
  }
  return "?";
}

IndexNode::IndexNode(const IndexNodeOptions& options,
                     std::vector<std::unique_ptr<storage::ChangeSource>> sources,
                     std::unique_ptr<index::Index> index, std::vector<uint64_t> cursors)
    : options_(options),
      sources_(std::move(sources)),
      index_(std::move(index)),
      saved_(cursors),
      applied_(std::move(cursors)),
      changed_(applied_),
      caught_up_(sources_.size(), false) {
  // Held: a temporary in the range would die before the loop.
  const std::shared_ptr<const index::IndexSnapshot> snapshot = index_->Snapshot();
  for (const auto& segment : snapshot->segments) max_id_ = std::max(max_id_, segment->MaxTweetId());
  absl::MutexLock state(&mu_);
  SumGeneration();
}

absl::StatusOr<std::unique_ptr<IndexNode>> IndexNode::Open(
    const IndexNodeOptions& options, std::vector<std::unique_ptr<storage::ChangeSource>> sources) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir is empty");
  if (sources.empty()) return absl::InvalidArgumentError("no storage partitions to read");
  std::error_code ec;
  std::filesystem::create_directories(IndexDir(options), ec);
  if (ec)
    return absl::UnavailableError(StrCat("cannot create ", IndexDir(options), ": ", ec.message()));
  std::vector<uint64_t> cursors(sources.size(), 0);
  std::optional<RebuildProgress> rebuild;
  if (std::filesystem::exists(RebuildFile(options))) {  // a rebuild was under way
    absl::StatusOr<RebuildProgress> progress = ReadRebuild(RebuildFile(options), sources.size());
    if (!progress.ok()) return progress.status();
    rebuild = *std::move(progress);
    cursors = rebuild->from;
  }
  index::IndexOptions index_options = options.index;
  index_options.background_merges = true;  // sealing and merging off the apply path
  absl::StatusOr<std::unique_ptr<index::Index>> index =
      index::Index::Open(index_options, IndexDir(options));
  if (absl::IsNotFound(index.status())) {
    index::IndexOptions fresh = index_options;
    fresh.directory = IndexDir(options);
    index = index::Index::Create(fresh);  // new: tail every log from its start
  } else if (index.ok() && !rebuild.has_value()) {
    absl::StatusOr<std::vector<uint64_t>> saved = ReadCursors(CursorsFile(options), sources.size());
    if (!saved.ok()) return saved.status();
    cursors = *std::move(saved);
  }
  if (!index.ok()) return index.status();
  auto node = std::unique_ptr<IndexNode>(
      new IndexNode(options, std::move(sources), *std::move(index), std::move(cursors)));
  if (rebuild.has_value()) {
    absl::MutexLock lock(&node->mu_);
    node->state_ = IndexState::kRebuilding;
    node->rebuild_from_ = std::move(rebuild->from);
    node->rebuild_through_ = rebuild->through;
  }
  return node;
}

IndexNode::~IndexNode() {
  Stop();
  (void)Checkpoint();  // best effort: a failure only means a longer replay next
                       // start
}

void IndexNode::Start() {
  if (!tailers_.empty()) return;
  storage::TailOptions tail;
  tail.wait = options_.poll_wait;
  tailers_ = storage::StartTailing(sources_, *this, tail);
}

void IndexNode::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : tailers_) t.join();
  tailers_.clear();
}

std::optional<storage::ChangeConsumer::Position> IndexNode::Next(uint32_t storage) {
  Position at;
  {
    absl::MutexLock lock(&mu_);
    // Idle while a rebuild owns the index (or one is needed).
    auto may_tail = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stopping_ || state_ == IndexState::kCatchingUp || state_ == IndexState::kServing;
    };
    mu_.Await(absl::Condition(&may_tail));
    if (stopping_) return std::nullopt;
    at.after = applied_[storage];
  }
  absl::ReaderMutexLock lock(&checkpoint_mu_);
  at.keeps = saved_[storage];
  return at;
}

void IndexNode::AtEnd(uint32_t storage) {
  {
    absl::MutexLock lock(&mu_);
    caught_up_[storage] = true;
    if (state_ == IndexState::kCatchingUp &&
        std::all_of(caught_up_.begin(), caught_up_.end(), [](bool b) { return b; })) {
      state_ = IndexState::kServing;
    }
  }
}

void IndexNode::Trimmed(uint32_t) {
  absl::MutexLock lock(&mu_);
  if (state_ != IndexState::kRebuilding) state_ = IndexState::kNeedsRebuild;
}

void IndexNode::Apply(uint32_t storage, const std::vector<storage::ReplicatedChange>& changes) {
  ApplyChanges(storage, changes);
  if (since_checkpoint_.load(std::memory_order_relaxed) >= options_.checkpoint_every) {
    (void)Checkpoint();  // a failure leaves the previous one in force
  }
}

void IndexNode::ApplyChanges(uint32_t storage,
                             const std::vector<storage::ReplicatedChange>& changes) {
  absl::ReaderMutexLock lock(&checkpoint_mu_);
  size_t first = 0;
  {
    absl::MutexLock state(&mu_);
    // A rebuild began while these were read: they are older than its starting
    // point.
    if (state_ == IndexState::kRebuilding || state_ == IndexState::kNeedsRebuild) return;
    const uint64_t applied = applied_[storage];
    while (first < changes.size() && changes[first].change.sequence <= applied) ++first;
    if (first == changes.size() || changes[first].change.sequence != applied + 1) return;
  }
  TweetId max_id = 0;
  uint64_t changed = 0;  // the last of these changes that adds or deletes one of this index's
  std::vector<index::IndexDoc> docs;
  auto flush = [&] {
    if (docs.empty()) return;
    index_->AddBatch(docs);  // AlreadyExists: a replay of what the index holds
    docs.clear();
  };
  for (size_t i = first; i < changes.size(); ++i) {
    const storage::ReplicatedChange& rc = changes[i];
    const storage::Change& c = rc.change;
    if (!storage::ConcernsATweet(c.kind)) continue;
    if (cluster::IndexPartitionOf(c.id, options_.partitions) != options_.partition) continue;
    if (c.kind == storage::ChangeKind::kPut) {
      if (rc.tweet.has_value()) {
        docs.push_back(ToIndexDoc(*rc.tweet));
        max_id = std::max(max_id, c.id);
        changed = c.sequence;
      }
      continue;
    }
    flush();
    if (c.kind == storage::ChangeKind::kDelete) {
      changed = c.sequence;
      (void)index_->Delete(c.id);  // NotFound: never indexed, or deleted already
    } else {
      (void)index_->SetLikes(c.id,
                             c.likes);  // NotFound: deleted later in the log
    }
  }
  flush();
  since_checkpoint_.fetch_add(changes.size() - first, std::memory_order_relaxed);
  absl::MutexLock state(&mu_);
  applied_[storage] = changes.back().change.sequence;
  if (changed != 0) {
    changed_[storage] = changed;
    SumGeneration();
  }
  max_id_ = std::max(max_id_, max_id);
}

bool IndexNode::WaitApplied(uint32_t storage, uint64_t sequence, absl::Duration timeout) const {
  if (storage >= sources_.size()) return false;
  absl::MutexLock lock(&mu_);
  auto applied = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return applied_[storage] >= sequence; };
  return mu_.AwaitWithTimeout(absl::Condition(&applied), timeout);
}

absl::Status IndexNode::CheckServing() const {
  absl::MutexLock state(&mu_);
  return CheckServingLocked();
}

absl::Status IndexNode::CheckServingLocked() const {
  if (state_ == IndexState::kServing) return absl::OkStatus();
  return absl::UnavailableError(
      StrCat(options_.node, " is ", IndexStateName(state_), ": it does not answer searches"));
}

absl::StatusOr<PartitionResult> IndexNode::Search(std::string_view search_terms,
                                                  const query::SearchOptions& options) const {
  absl::ReaderMutexLock lock(&checkpoint_mu_);
  PartitionResult out;
  {
    absl::MutexLock state(&mu_);
    if (absl::Status s = CheckServingLocked(); !s.ok()) return s;
    out.max_id = max_id_;
  }
  absl::StatusOr<query::Plan> plan = query::PlanQuery(search_terms, index_->analyzer());
  if (!plan.ok()) return plan.status();
  std::shared_ptr<const index::IndexSnapshot> snapshot = index_->Snapshot();
  absl::StatusOr<query::SearchResult> result = query::Search(*snapshot, *plan, options);
  if (!result.ok()) return result.status();
  out.result = *std::move(result);
  return out;
}

absl::StatusOr<query::CollectionStats> IndexNode::Stats(std::string_view search_terms) const {
  if (absl::Status s = CheckServing(); !s.ok()) return s;
  absl::ReaderMutexLock lock(&checkpoint_mu_);
  absl::StatusOr<query::Plan> plan = query::PlanQuery(search_terms, index_->analyzer());
  if (!plan.ok()) return plan.status();
  return query::ComputeStats(*index_->Snapshot(), *plan);
}

absl::StatusOr<std::vector<uint64_t>> IndexNode::Counts(std::string_view search_terms,
                                                        const query::TimeBuckets& buckets) const {
  if (absl::Status s = CheckServing(); !s.ok()) return s;
  absl::ReaderMutexLock lock(&checkpoint_mu_);
  absl::StatusOr<query::Plan> plan = query::PlanQuery(search_terms, index_->analyzer());
  if (!plan.ok()) return plan.status();
  return query::CountOverTime(*index_->Snapshot(), *plan, buckets);
}

absl::Status IndexNode::BeginRebuild(std::vector<uint64_t> from_sequences) {
  if (from_sequences.size() != sources_.size()) {
    return absl::InvalidArgumentError(
        StrCat("expected ", sources_.size(), " storage sequences, got ", from_sequences.size()));
  }
  absl::MutexLock lock(&checkpoint_mu_);
  absl::StatusOr<std::unique_ptr<index::Index>> fresh = index::Index::Create(options_.index);
  if (!fresh.ok()) return fresh.status();
  std::error_code ec;
  std::filesystem::remove_all(IndexDir(options_), ec);
  std::filesystem::create_directories(IndexDir(options_), ec);
  if (ec)
    return absl::UnavailableError(StrCat("cannot reset ", IndexDir(options_), ": ", ec.message()));
  // From here a restart finds the node rebuilding (with nothing loaded yet).
  if (absl::Status s =
          WriteFileAtomically(RebuildFile(options_), StrCat(JoinCursors(from_sequences), ";0"));
      !s.ok()) {
    return s;
  }
  index_ = *std::move(fresh);
  saved_ = from_sequences;
  since_checkpoint_.store(0, std::memory_order_relaxed);
  absl::MutexLock state(&mu_);
  state_ = IndexState::kRebuilding;
  rebuild_from_ = from_sequences;
  rebuild_through_ = 0;
  applied_ = std::move(from_sequences);
  changed_ = applied_;
  SumGeneration();
  caught_up_.assign(sources_.size(), false);
  max_id_ = 0;
  return absl::OkStatus();
}

absl::Status IndexNode::AddTweets(std::span<const storage::StoredTweet> tweets, TweetId through,
                                  bool checkpoint) {
  {
    absl::ReaderMutexLock lock(&checkpoint_mu_);
    {
      absl::MutexLock state(&mu_);
      if (state_ != IndexState::kRebuilding) {
        return absl::FailedPreconditionError("not rebuilding: call BeginRebuild first");
      }
    }
    std::vector<index::IndexDoc> docs;
    docs.reserve(tweets.size());
    TweetId max_id = 0;
    for (const storage::StoredTweet& t : tweets) {
      if (cluster::IndexPartitionOf(t.id, options_.partitions) != options_.partition) {
        return absl::InvalidArgumentError(StrCat("tweet ", t.id, " belongs to another partition"));
      }
      docs.push_back(ToIndexDoc(t));
      max_id = std::max(max_id, t.id);
    }
    for (const absl::Status& s : index_->AddBatch(docs)) {
      if (!s.ok() && !absl::IsAlreadyExists(s)) return s;
    }
    since_checkpoint_.fetch_add(docs.size(), std::memory_order_relaxed);
    absl::MutexLock state(&mu_);
    max_id_ = std::max(max_id_, max_id);
    rebuild_through_ = std::max({rebuild_through_, through, max_id});
  }
  if (checkpoint ||
      since_checkpoint_.load(std::memory_order_relaxed) >= options_.checkpoint_every) {
    return Checkpoint();
  }
  return absl::OkStatus();
}

absl::Status IndexNode::FinishRebuild() {
  absl::MutexLock lock(&checkpoint_mu_);
  {
    absl::MutexLock state(&mu_);
    if (state_ != IndexState::kRebuilding) return absl::FailedPreconditionError("not rebuilding");
    // Tailing resumes from the rebuild's starting sequences once the lock is
    // released.
    state_ = IndexState::kCatchingUp;
  }
  absl::Status s = CheckpointLocked();
  std::error_code ec;
  if (s.ok() && !std::filesystem::remove(RebuildFile(options_), ec) && ec) {
    s = absl::UnavailableError(StrCat("cannot remove ", RebuildFile(options_), ": ", ec.message()));
  }
  if (!s.ok()) {
    absl::MutexLock state(&mu_);
    state_ = IndexState::kRebuilding;
  }
  return s;
}

absl::Status IndexNode::Checkpoint() {
  absl::MutexLock lock(&checkpoint_mu_);
  return CheckpointLocked();
}

absl::Status IndexNode::CheckpointLocked() {
  std::vector<uint64_t> cursors;
  std::optional<std::string> rebuild;  // while rebuilding: the REBUILD file instead of CURSORS
  {
    absl::MutexLock state(&mu_);
    if (state_ == IndexState::kNeedsRebuild) return absl::OkStatus();  // nothing worth saving
    cursors = applied_;
    if (state_ == IndexState::kRebuilding) {
      rebuild = StrCat(JoinCursors(rebuild_from_), ";", rebuild_through_);
    }
  }
  if (!rebuild.has_value() && cursors == saved_ && std::filesystem::exists(CursorsFile(options_))) {
    return absl::OkStatus();
  }
  if (absl::Status s = index_->Seal(); !s.ok()) return s;
  if (absl::Status s = index_->Save(IndexDir(options_)); !s.ok()) return s;
  absl::Status written = rebuild.has_value()
                             ? WriteFileAtomically(RebuildFile(options_), *rebuild)
                             : WriteFileAtomically(CursorsFile(options_), JoinCursors(cursors));
  if (!written.ok()) return written;
  saved_ = std::move(cursors);
  since_checkpoint_.store(0, std::memory_order_relaxed);
  return absl::OkStatus();
}

uint64_t IndexNode::Generation() const { return generation_.load(std::memory_order_acquire); }

void IndexNode::SumGeneration() {
  uint64_t sum = 0;
  for (uint64_t c : changed_) sum += c;
  generation_.store(sum, std::memory_order_release);
}

IndexNodeStatus IndexNode::Status() const {
  IndexNodeStatus out;
  {
    absl::ReaderMutexLock lock(&checkpoint_mu_);
    index::IndexStats stats = index_->Stats();
    out.documents = stats.documents;
    out.memory_bytes = stats.memory_bytes;
    out.mapped_bytes = stats.mapped_bytes;
    out.damaged_segments = stats.damaged_segments;
  }
  absl::MutexLock state(&mu_);
  out.state = state_;
  out.applied = applied_;
  if (state_ == IndexState::kRebuilding) out.rebuild_through = rebuild_through_;
  return out;
}

}  // namespace tweetsearch::indexer
