#include "indexer/index/index.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace tweetsearch::index {
namespace {

// v4: segment files of format v5, each line "<segment file>[ <updates file>]". An index with
// an older manifest (v1: whole segments on the heap; v2: segment files of format v3, whose
// skip entries have no likes bands; v3: format v4, whose bands keep lengths to 15 and no term
// frequencies) is reported as not found, and rebuilt by its owner.
constexpr std::string_view kManifestHeader = "tweetsearch-index-manifest v4";
constexpr std::string_view kOldManifestHeaders[] = {"tweetsearch-index-manifest v1",
                                                    "tweetsearch-index-manifest v2",
                                                    "tweetsearch-index-manifest v3"};

// What the analyzer options were when the index was written: terms made with other options
// would not meet the saved ones, so Open() refuses a mismatch.
std::string AnalyzerLine(const analysis::AnalyzerOptions& o) {
  return StrCat("analyzer drop_stop_words=", o.drop_stop_words ? 1 : 0,
                " stem_language=", o.stem_language, " fold_diacritics=", o.fold_diacritics ? 1 : 0,
                " max_token_bytes=", o.max_token_bytes);
}

std::string SegmentFileName(uint64_t sequence) { return fmt::format("seg-{:06d}.tss", sequence); }

std::string UpdatesFileName(uint64_t sequence, uint64_t generation) {
  return fmt::format("seg-{:06d}.upd-{:06d}", sequence, generation);
}

// Parses "seg-<n>.tss" or "seg-<n>.upd-<g>"; false for anything else.
bool ParseFileName(std::string_view name, uint64_t* sequence, uint64_t* generation) {
  *generation = 0;
  if (!name.starts_with("seg-")) return false;
  name.remove_prefix(4);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || !absl::SimpleAtoi(AsAbsl(name.substr(0, dot)), sequence)) {
    return false;
  }
  const std::string_view rest = name.substr(dot);
  if (rest == ".tss") return true;
  return rest.starts_with(".upd-") && absl::SimpleAtoi(AsAbsl(rest.substr(5)), generation) &&
         *generation > 0;
}

// Removes the segment and updates files of `dir` that `named` does not hold (merged away,
// older updates, left by a crash) and the temporary files of interrupted writes, except the
// files of segments numbered in `busy` (being written by a seal or merge now).
void RemoveUnnamedFiles(const std::string& dir, const absl::flat_hash_set<std::string>& named,
                        const absl::flat_hash_set<uint64_t>& busy) {
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = file.path().filename().string();
    const bool temporary = name.ends_with(".tmp");
    if (temporary) name.resize(name.size() - 4);
    uint64_t sequence, generation;
    if (!ParseFileName(name, &sequence, &generation)) continue;
    if (!temporary && named.contains(name)) continue;
    if (generation == 0 && busy.contains(sequence)) continue;
    std::filesystem::remove(file.path(), ec);  // best effort: a leftover file is harmless
  }
}

}  // namespace

// Tokens of the tweets staged for the active segment, and the DocId of each.
struct Index::Batch {
  std::vector<analysis::Token> tokens;
  std::vector<DocId> token_doc;
  std::vector<uint32_t> next;  // next token of the same term, or UINT32_MAX
  std::vector<uint32_t> group_head, group_tail;
  std::vector<uint64_t> hashes;  // of each group's term
  absl::flat_hash_map<absl::string_view, uint32_t> group_of_term;
  std::vector<uint32_t> positions;
  std::vector<uint32_t> starts;  // of each posting's positions
  std::vector<NewPosting> postings;
};

std::string FromTerm(std::string_view user_name) {
  return StrCat("from:", absl::AsciiStrToLower(AsAbsl(user_name)));
}

std::string LangTerm(std::string_view lang) {
  return StrCat("lang:", absl::AsciiStrToLower(AsAbsl(lang)));
}

absl::StatusOr<std::unique_ptr<Index>> Index::Create(const IndexOptions& options) {
  if (options.segment_max_docs == 0 || options.segment_max_docs > kMaxSegmentDocs) {
    return absl::InvalidArgumentError(StrCat("segment_max_docs must be in [1, ", kMaxSegmentDocs,
                                             "], not ", options.segment_max_docs));
  }
  if (!options.directory.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.directory, ec);
    if (ec) {
      return absl::UnavailableError(
          StrCat("cannot create ", options.directory, ": ", ec.message()));
    }
  }
  absl::StatusOr<std::unique_ptr<analysis::Analyzer>> analyzer =
      analysis::Analyzer::Create(options.analyzer);
  if (!analyzer.ok()) return analyzer.status();
  return std::unique_ptr<Index>(new Index(options, *std::move(analyzer)));
}

Index::Index(const IndexOptions& options, std::unique_ptr<analysis::Analyzer> analyzer)
    : options_(options), analyzer_(std::move(analyzer)), batch_(std::make_unique<Batch>()) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = std::make_shared<ActiveSegment>(options_.segment_max_docs);
    PublishLocked();
  }
  if (options_.background_merges) {
    sealer_ = std::thread([this] { MergeLoop(JobKind::kSeal); });
    merger_ = std::thread([this] { MergeLoop(JobKind::kMerge); });
  }
}

Index::~Index() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  cancel_.store(true, std::memory_order_release);
  if (sealer_.joinable()) sealer_.join();
  if (merger_.joinable()) merger_.join();
}

void Index::PublishLocked() {
  auto snapshot = std::make_shared<IndexSnapshot>();
  snapshot->segments.reserve(sealed_.size() + frozen_.size() + 1);
  for (const Sealed& s : sealed_) snapshot->segments.push_back(s.segment);
  for (const auto& f : frozen_) snapshot->segments.push_back(f);
  snapshot->segments.push_back(active_);
  snapshot_.store(std::move(snapshot));
  cv_.notify_all();  // the segments changed: the merge threads may have work, waiters may go on
}

Index::Location Index::LocateLocked(TweetId id) {
  // A deleted tweet may be indexed again; its deleted copy stays (flagged) until sealing or
  // compaction drops it, so only a live copy counts.
  if (std::optional<DocId> d = active_->FindForWriter(id); d && !active_->columns().deleted(*d)) {
    return {active_.get(), *d};
  }
  for (const auto& f : frozen_) {
    if (std::optional<DocId> d = f->FindForWriter(id); d && !f->columns().deleted(*d)) {
      return {f.get(), *d};
    }
  }
  for (const Sealed& entry : sealed_) {
    SealedSegment* s = entry.segment.get();
    if (s->num_docs() == 0 || id > s->MaxTweetId() ||
        id < s->columns().tweet_id(s->num_docs() - 1)) {
      continue;
    }
    if (std::optional<DocId> d = s->Find(id); d && !s->columns().deleted(*d)) {
      return {s, *d};
    }
  }
  return {};
}

absl::Status Index::Add(const IndexDoc& doc) {
  return AddBatch(std::span<const IndexDoc>(&doc, 1))[0];
}

std::vector<absl::Status> Index::AddBatch(std::span<const IndexDoc> docs) {
  std::vector<absl::Status> results(docs.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < docs.size(); ++i) {
    results[i] = StageLocked(docs[i]);
    if (active_->full()) {
      FlushStagedLocked();
      if (absl::Status s = RotateActiveLocked(); !s.ok() && results[i].ok()) results[i] = s;
    }
  }
  FlushStagedLocked();
  return results;
}

absl::Status Index::StageLocked(const IndexDoc& doc) {
  if (const Location at = LocateLocked(doc.id); at.segment != nullptr) {
    return absl::AlreadyExistsError(StrCat("tweet ", doc.id, " is already indexed"));
  }
  std::vector<analysis::Token>& tokens = batch_->tokens;
  const size_t first = tokens.size();
  if (absl::Status s = analyzer_->Analyze(doc.text, &tokens); !s.ok()) return s;
  const size_t count = tokens.size() - first;
  if (count > UINT16_MAX) {
    tokens.resize(first);
    return absl::InvalidArgumentError(
        StrCat("tweet ", doc.id, " has ", count, " tokens; at most 65535"));
  }
  // from: and lang: terms are never part of a phrase; position 0 for all of them makes their
  // position streams zero bits wide.
  if (!doc.user_name.empty()) {
    tokens.push_back({FromTerm(doc.user_name), 0, analysis::TokenKind::kWord});
  }
  if (!doc.lang.empty()) {
    tokens.push_back({LangTerm(doc.lang), 0, analysis::TokenKind::kWord});
  }
  const DocId d = active_->AddRow(doc, static_cast<uint16_t>(count));
  batch_->token_doc.resize(tokens.size(), d);
  return absl::OkStatus();
}

void Index::FlushStagedLocked() {
  Batch& b = *batch_;
  const size_t n = b.tokens.size();
  if (n == 0) {
    active_->Publish();  // rows of tweets without tokens
    return;
  }
  // Group the tokens by term with a linked list per term; tokens are in (doc, position)
  // order, so each list is too.
  b.next.assign(n, UINT32_MAX);
  b.group_head.clear();
  b.group_tail.clear();
  b.group_of_term.clear();
  for (uint32_t t = 0; t < n; ++t) {
    auto [it, inserted] = b.group_of_term.try_emplace(AsAbsl(b.tokens[t].text),
                                                      static_cast<uint32_t>(b.group_head.size()));
    if (inserted) {
      b.group_head.push_back(t);
      b.group_tail.push_back(t);
    } else {
      b.next[b.group_tail[it->second]] = t;
      b.group_tail[it->second] = t;
    }
  }
  // Hash every term first, so that each term's table slot can be fetched a few terms ahead.
  const uint32_t groups = static_cast<uint32_t>(b.group_head.size());
  b.hashes.resize(groups);
  for (uint32_t g = 0; g < groups; ++g) {
    b.hashes[g] = active_->HashForWriter(b.tokens[b.group_head[g]].text);
  }
  constexpr uint32_t kSlotDistance = 16, kTermDistance = 8;
  for (uint32_t g = 0; g < std::min(groups, kSlotDistance); ++g) {
    active_->PrefetchForWriter(b.hashes[g], 0);
  }
  for (uint32_t g = 0; g < groups; ++g) {
    if (g + kSlotDistance < groups) active_->PrefetchForWriter(b.hashes[g + kSlotDistance], 0);
    if (g + kTermDistance < groups) active_->PrefetchForWriter(b.hashes[g + kTermDistance], 1);
    b.positions.clear();
    b.postings.clear();
    std::vector<uint32_t>& starts = b.starts;
    starts.clear();
    for (uint32_t t = b.group_head[g]; t != UINT32_MAX; t = b.next[t]) {
      if (b.postings.empty() || b.postings.back().doc != b.token_doc[t]) {
        b.postings.push_back({b.token_doc[t], {}});
        starts.push_back(static_cast<uint32_t>(b.positions.size()));
      }
      b.positions.push_back(b.tokens[t].position);
    }
    // Point the postings at their positions now that the buffer no longer grows.
    starts.push_back(static_cast<uint32_t>(b.positions.size()));
    for (size_t i = 0; i < b.postings.size(); ++i) {
      b.postings[i].positions =
          std::span<const uint32_t>(b.positions.data() + starts[i], starts[i + 1] - starts[i]);
    }
    active_->AppendPostings(b.tokens[b.group_head[g]].text, b.hashes[g], b.postings);
  }
  active_->Publish();
  b.tokens.clear();
  b.token_doc.clear();
}

absl::Status Index::Delete(TweetId id) {
  std::lock_guard<std::mutex> lock(mu_);
  const Location at = LocateLocked(id);
  if (at.segment == nullptr) return absl::NotFoundError(StrCat("tweet ", id, " is not indexed"));
  at.segment->mutable_columns().MarkDeleted(at.doc);
  NoteChangeLocked(at.segment, at.doc);
  cv_.notify_all();  // a segment with many deletes may now be worth rewriting
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Index::SetLikes(TweetId id, uint32_t likes) {
  std::lock_guard<std::mutex> lock(mu_);
  const Location at = LocateLocked(id);
  if (at.segment == nullptr || at.segment->columns().deleted(at.doc)) {
    return absl::NotFoundError(StrCat("tweet ", id, " is not indexed"));
  }
  at.segment->mutable_columns().SetLikes(at.doc, likes);
  NoteChangeLocked(at.segment, at.doc);
  return likes;
}

absl::StatusOr<uint32_t> Index::AddLikes(TweetId id, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  const Location at = LocateLocked(id);
  if (at.segment == nullptr || at.segment->columns().deleted(at.doc)) {
    return absl::NotFoundError(StrCat("tweet ", id, " is not indexed"));
  }
  const int64_t value = std::clamp<int64_t>(
      static_cast<int64_t>(at.segment->columns().likes(at.doc)) + delta, 0, UINT32_MAX);
  at.segment->mutable_columns().SetLikes(at.doc, static_cast<uint32_t>(value));
  NoteChangeLocked(at.segment, at.doc);
  return static_cast<uint32_t>(value);
}

absl::Status Index::Seal() {
  std::lock_guard<std::mutex> lock(mu_);
  return SealLocked();
}

absl::Status Index::SealLocked() {
  if (active_->VisibleDocs() > 0) {
    frozen_.push_back(std::move(active_));
    active_ = std::make_shared<ActiveSegment>(options_.segment_max_docs);
  }
  // Every full segment the merge thread is not already sealing, here; then wait for that one.
  const std::vector<std::shared_ptr<ActiveSegment>> frozen = frozen_;
  absl::Status status;
  for (const auto& f : frozen) {
    if (f.get() != sealing_ && status.ok()) status = SealFrozenLocked(f);
  }
  cv_.wait(mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return sealing_ == nullptr; });
  PublishLocked();
  return status;
}

absl::Status Index::RotateActiveLocked() {
  if (!options_.background_merges) return SealLocked();
  frozen_.push_back(std::move(active_));
  active_ = std::make_shared<ActiveSegment>(options_.segment_max_docs);
  absl::Status status;
  // The merge thread is behind: seal here rather than let full segments pile up in memory.
  while (frozen_.size() > 2 && status.ok()) {
    const auto oldest = frozen_[0].get() == sealing_ ? frozen_[1] : frozen_[0];
    status = SealFrozenLocked(oldest);
  }
  PublishLocked();
  return status;
}

namespace {

// Encodes an active segment's live documents into `sink`. Sets (*doc_map)[d] to the new
// DocId of DocId d (kEndDoc for a deleted one).
absl::Status EncodeActive(const ActiveSegment& active, std::vector<DocId>* doc_map,
                          const SegmentFileSink& sink) {
  std::vector<std::string_view> terms;
  terms.reserve(active.NumTerms());
  active.ForEachTerm([&](std::string_view term, PostingCursor&) { terms.push_back(term); });
  return EncodeSegment(active, std::move(terms), doc_map, sink);
}

}  // namespace

absl::Status Index::SealFrozenLocked(const std::shared_ptr<ActiveSegment>& segment) {
  std::vector<DocId> doc_map;
  const uint64_t sequence = next_sequence_++;
  absl::StatusOr<std::unique_ptr<SealedSegment>> sealed = WriteSegment(
      [&](const SegmentFileSink& sink) { return EncodeActive(*segment, &doc_map, sink); }, sequence,
      /*throttle=*/false);
  if (!sealed.ok()) return sealed.status();
  frozen_.erase(std::find(frozen_.begin(), frozen_.end(), segment));
  if ((*sealed)->num_docs() > 0) {
    Sealed entry;
    entry.segment = *std::move(sealed);
    entry.sequence = sequence;
    sealed_.push_back(std::move(entry));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SealedSegment>> Index::WriteSegment(const Encoder& encode,
                                                                   uint64_t sequence,
                                                                   bool throttle) {
  const int64_t start = options_.clock->NowUnixMillis();
  const std::string path = options_.directory.empty()
                               ? std::string()
                               : StrCat(options_.directory, "/", SegmentFileName(sequence));
  uint64_t size = 0;
  std::unique_ptr<FileBytes> bytes;  // without a directory
  const absl::Status written = encode([&](std::span<const std::string_view> pieces) {
    for (std::string_view p : pieces) size += p.size();
    if (path.empty()) {
      bytes = FileBytes::FromPieces(pieces);
      return absl::OkStatus();
    }
    // Durable by the Save that first names it: sealing does not wait for the disk.
    return WriteFileAtomically(path, pieces, Durability::kLater);
  });
  if (!written.ok()) return written;
  if (throttle && options_.merge_bytes_per_second > 0) {
    // A merge writing B bytes takes at least B / rate: wait out what its work did not take.
    // (Until it is committed, nothing names the file: a crash or a stop leaves it to Save()).
    const int64_t due_ms = static_cast<int64_t>(size * 1000 / options_.merge_bytes_per_second);
    std::lock_guard<std::mutex> lock(mu_);
    while (!stop_ && options_.clock->NowUnixMillis() - start < due_ms) {
      const int64_t left = due_ms - (options_.clock->NowUnixMillis() - start);
      cv_.wait_for(mu_, std::chrono::milliseconds(std::min<int64_t>(left, 100)),
                   [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; });
    }
    if (stop_) return absl::CancelledError("the index is closing");
  }
  absl::StatusOr<std::unique_ptr<SealedSegment>> segment;
  if (path.empty()) {
    segment = SealedSegment::FromBytes(std::move(bytes), "(in memory)", /*trusted=*/true);
  } else {
    absl::StatusOr<std::unique_ptr<FileBytes>> mapped = FileBytes::Map(path);
    if (!mapped.ok()) return mapped.status();
    segment = SealedSegment::FromBytes(*std::move(mapped), path, /*trusted=*/true);
  }
  // Its likes tiers, tier postings and pair champions are built here, by the writer or merger,
  // rather than by the first query that needs them (about 2 ms per million tweets for the
  // tiers, 0.11 to 0.14 s for the postings; the pair champions: docs/capacity.md).
  if (segment.ok()) (*segment)->BuildDerived(&cancel_);
  return segment;
}

absl::Status Index::Compact() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.wait(mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !merge_running_; });
  if (sealed_.empty()) return absl::OkStatus();
  std::vector<const SealedSegment*> sources;
  for (const Sealed& s : sealed_) sources.push_back(s.segment.get());
  std::vector<std::vector<DocId>> doc_maps;
  const uint64_t sequence = next_sequence_++;
  absl::StatusOr<std::unique_ptr<SealedSegment>> merged = WriteSegment(
      [&](const SegmentFileSink& sink) { return MergeSegments(sources, &doc_maps, sink); },
      sequence, /*throttle=*/false);
  if (!merged.ok()) return merged.status();
  sealed_.clear();
  if ((*merged)->num_docs() > 0) {
    Sealed entry;
    entry.segment = *std::move(merged);
    entry.sequence = sequence;
    sealed_.push_back(std::move(entry));
  }
  PublishLocked();
  return absl::OkStatus();
}

void Index::NoteChangeLocked(const Segment* segment, DocId doc) {
  if (auto it = changed_.find(segment); it != changed_.end()) it->second.push_back(doc);
}

struct Index::Job {
  std::shared_ptr<ActiveSegment> frozen;                // a seal: this segment
  std::vector<std::shared_ptr<SealedSegment>> sources;  // a merge: these neighbours
  uint64_t sequence = 0;
  std::vector<std::vector<DocId>> doc_maps;  // per source, old DocId -> new
};

std::optional<Index::Job> Index::NextJobLocked(JobKind kind) {
  Job job;
  if (kind == JobKind::kSeal) {
    if (frozen_.empty()) return std::nullopt;
    job.frozen = frozen_.front();
  } else {
    std::vector<SegmentSize> sizes;
    for (const Sealed& s : sealed_) {
      const uint32_t docs = s.segment->num_docs();
      // A damaged segment is never merged (its postings cannot be copied): it looks full.
      sizes.push_back(s.segment->Health().ok()
                          ? SegmentSize{docs, docs - s.segment->num_live_docs()}
                          : SegmentSize{options_.merge.max_segment_docs, 0});
    }
    const std::optional<MergeChoice> choice = PickMerge(sizes, options_.merge);
    if (!choice) return std::nullopt;
    for (size_t i = choice->begin; i < choice->end; ++i) job.sources.push_back(sealed_[i].segment);
  }
  return job;
}

absl::StatusOr<std::unique_ptr<SealedSegment>> Index::RunJob(Job& job) {
  if (job.frozen != nullptr) {
    job.doc_maps.resize(1);
    return WriteSegment(
        [&](const SegmentFileSink& sink) {
          return EncodeActive(*job.frozen, &job.doc_maps[0], sink);
        },
        job.sequence, /*throttle=*/false);
  }
  std::vector<const SealedSegment*> sources;
  for (const auto& s : job.sources) sources.push_back(s.get());
  return WriteSegment(
      [&](const SegmentFileSink& sink) {
        return MergeSegments(sources, &job.doc_maps, sink, &cancel_);
      },
      job.sequence, /*throttle=*/true);
}

void Index::CommitJobLocked(Job& job, std::unique_ptr<SealedSegment> segment) {
  // Deletes and likes changes made to the sources while the job read them.
  std::vector<const Segment*> sources;
  if (job.frozen != nullptr) sources.push_back(job.frozen.get());
  for (const auto& s : job.sources) sources.push_back(s.get());
  for (size_t i = 0; i < sources.size(); ++i) {
    const Columns& from = sources[i]->columns();
    for (DocId d : changed_[sources[i]]) {
      const DocId nd = job.doc_maps[i][d];
      if (nd == kEndDoc) continue;
      if (from.deleted(d) && !segment->columns().deleted(nd))
        segment->mutable_columns().MarkDeleted(nd);
      if (from.likes(d) != segment->columns().likes(nd)) {
        segment->mutable_columns().SetLikes(nd, from.likes(d));
      }
    }
  }
  Sealed entry;
  entry.sequence = job.sequence;
  merged_docs_ += segment->num_docs();
  ++merges_;
  if (segment->num_docs() > 0) entry.segment = std::move(segment);
  if (job.frozen != nullptr) {
    frozen_.erase(std::find(frozen_.begin(), frozen_.end(), job.frozen));
    if (entry.segment != nullptr) sealed_.push_back(std::move(entry));
  } else {
    auto first = std::find_if(sealed_.begin(), sealed_.end(),
                              [&](const Sealed& s) { return s.segment == job.sources.front(); });
    first = sealed_.erase(first, first + static_cast<ptrdiff_t>(job.sources.size()));
    if (entry.segment != nullptr) sealed_.insert(first, std::move(entry));
  }
  PublishLocked();
}

void Index::MergeLoop(JobKind kind) {
  // Below the threads that take writes and answer queries when they compete for a core.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
  bool& running = kind == JobKind::kSeal ? seal_running_ : merge_running_;
  std::lock_guard<std::mutex> lock(mu_);
  while (true) {
    std::optional<Job> job;
    auto ready = [&] {
      if (stop_) return true;
      job = NextJobLocked(kind);
      return job.has_value() || (kind == JobKind::kMerge && !unwarmed_.empty());
    };
    cv_.wait(mu_, ready);
    if (stop_) return;
    if (!job.has_value()) {  // a loaded segment without its tier postings
      const std::shared_ptr<const SealedSegment> segment = std::move(unwarmed_.back());
      unwarmed_.pop_back();
      warming_ = true;
      mu_.unlock();
      segment->BuildDerived(&cancel_);
      mu_.lock();
      warming_ = false;
      cv_.notify_all();
      continue;
    }
    job->sequence = next_sequence_++;
    busy_.insert(job->sequence);
    running = true;
    if (job->frozen != nullptr) {
      sealing_ = job->frozen.get();
      changed_[job->frozen.get()];
    }
    for (const auto& s : job->sources) changed_[s.get()];
    mu_.unlock();
    absl::StatusOr<std::unique_ptr<SealedSegment>> segment = RunJob(*job);
    mu_.lock();
    if (segment.ok()) CommitJobLocked(*job, *std::move(segment));
    if (job->frozen != nullptr) {
      changed_.erase(job->frozen.get());
      sealing_ = nullptr;
    }
    for (const auto& s : job->sources) changed_.erase(s.get());
    busy_.erase(job->sequence);
    running = false;
    cv_.notify_all();
    if (!segment.ok() && !stop_) {
      // Sources stay in force; try again later rather than in a tight loop.
      std::fprintf(stderr, "index: a background %s failed: %s\n",
                   kind == JobKind::kSeal ? "seal" : "merge",
                   std::string(segment.status().message()).c_str());
      cv_.wait_for(mu_, std::chrono::seconds(1),
                   [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; });
    }
  }
}

void Index::WaitForMerges() {
  if (!options_.background_merges) return;  // no merge thread: nothing runs in the background
  std::lock_guard<std::mutex> lock(mu_);
  auto idle = [&] {
    return stop_ || (!seal_running_ && !merge_running_ && !warming_ && unwarmed_.empty() &&
                     !NextJobLocked(JobKind::kSeal) && !NextJobLocked(JobKind::kMerge));
  };
  cv_.wait(mu_, idle);
}

absl::Status Index::SaveUpdatesLocked(const std::string& dir, Sealed& entry) {
  const uint64_t changes = entry.segment->columns().changes();
  if (changes == 0 || (changes == entry.saved_changes && entry.updates_dir == dir)) {
    return absl::OkStatus();
  }
  const uint64_t generation = next_sequence_++;
  const std::string name = UpdatesFileName(entry.sequence, generation);
  if (absl::Status s = WriteFileAtomically(StrCat(dir, "/", name), entry.segment->EncodeUpdates());
      !s.ok()) {
    return s;
  }
  entry.updates = generation;
  entry.saved_changes = changes;
  entry.updates_dir = dir;
  return absl::OkStatus();
}

absl::Status Index::Save(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(StrCat("cannot create ", dir, ": ", ec.message()));
  const bool own_directory =
      !options_.directory.empty() && std::filesystem::equivalent(dir, options_.directory, ec);
  std::string manifest = StrCat(kManifestHeader, "\n", AnalyzerLine(options_.analyzer), "\n");
  absl::flat_hash_set<std::string> named;
  for (Sealed& entry : sealed_) {
    const std::string name = SegmentFileName(entry.sequence);
    if (!own_directory) {
      if (absl::Status s = entry.segment->Save(StrCat(dir, "/", name)); !s.ok()) return s;
    } else if (!entry.synced) {
      if (absl::Status s = SyncFile(StrCat(dir, "/", name)); !s.ok()) return s;
      entry.synced = true;
    }
    if (absl::Status s = SaveUpdatesLocked(dir, entry); !s.ok()) return s;
    StrAppend(&manifest, name);
    named.insert(name);
    if (entry.updates != 0) {
      const std::string updates = UpdatesFileName(entry.sequence, entry.updates);
      StrAppend(&manifest, " ", updates);
      named.insert(updates);
    }
    StrAppend(&manifest, "\n");
  }
  if (absl::Status s = WriteFileAtomically(dir + "/MANIFEST", manifest); !s.ok()) return s;
  // A segment still mapped by a running query keeps its pages until it is done.
  RemoveUnnamedFiles(dir, named, busy_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Index>> Index::Open(const IndexOptions& options,
                                                   const std::string& dir) {
  absl::StatusOr<std::string> manifest = ReadFile(dir + "/MANIFEST");
  if (!manifest.ok()) return manifest.status();
  std::vector<std::string> lines = absl::StrSplit(*manifest, '\n', absl::SkipEmpty());
  if (!lines.empty() && std::find(std::begin(kOldManifestHeaders), std::end(kOldManifestHeaders),
                                  lines[0]) != std::end(kOldManifestHeaders)) {
    return absl::NotFoundError(StrCat("the index in ", dir, " has an older format"));
  }
  if (lines.size() < 2 || lines[0] != kManifestHeader || !lines[1].starts_with("analyzer ")) {
    return absl::DataLossError(StrCat(dir, "/MANIFEST is not an index manifest"));
  }
  if (lines[1] != AnalyzerLine(options.analyzer)) {
    return absl::FailedPreconditionError(
        StrCat("the index in ", dir, " was written with '", lines[1], "' but is opened with '",
               AnalyzerLine(options.analyzer), "'; queries would not find its terms"));
  }
  IndexOptions attached = options;
  attached.directory = dir;
  absl::StatusOr<std::unique_ptr<Index>> index = Create(attached);
  if (!index.ok()) return index.status();
  Index& ix = **index;
  std::lock_guard<std::mutex> lock(ix.mu_);
  for (size_t i = 2; i < lines.size(); ++i) {
    absl::StatusOr<Sealed> entry = OpenSegment(dir, lines[i]);
    if (!entry.ok()) return entry.status();
    ix.next_sequence_ = std::max({ix.next_sequence_, entry->sequence + 1, entry->updates + 1});
    ix.sealed_.push_back(*std::move(entry));
  }
  absl::flat_hash_set<std::string> named;
  for (size_t i = 2; i < lines.size(); ++i) {
    for (absl::string_view name : absl::StrSplit(AsAbsl(lines[i]), ' ')) named.emplace(name);
  }
  RemoveUnnamedFiles(dir, named, {});  // what a crash left (nothing runs yet)
  ix.PublishLocked();                  // the merge threads may start on them now
  // Tier postings read every long list: on the merge thread (the seal thread keeps ingest
  // moving), so that opening reads no postings (without background threads, here).
  for (const Sealed& s : ix.sealed_) {
    if (ix.options_.background_merges) {
      ix.unwarmed_.push_back(s.segment);
    } else {
      s.segment->BuildDerived();
    }
  }
  ix.cv_.notify_all();
  return index;
}

absl::StatusOr<Index::Sealed> Index::OpenSegment(const std::string& dir, std::string_view line) {
  std::vector<std::string_view> names;
  for (absl::string_view part : absl::StrSplit(AsAbsl(line), ' ')) names.push_back(AsStd(part));
  Sealed entry;
  uint64_t generation = 0;
  if (names.size() > 2 || !ParseFileName(names[0], &entry.sequence, &generation) ||
      generation != 0 ||
      (names.size() == 2 && (!ParseFileName(names[1], &generation, &entry.updates) ||
                             generation != entry.sequence || entry.updates == 0))) {
    return absl::DataLossError(StrCat("bad manifest line '", line, "'"));
  }
  absl::StatusOr<std::unique_ptr<SealedSegment>> segment =
      SealedSegment::Load(StrCat(dir, "/", names[0]));
  if (!segment.ok()) {
    if (absl::IsNotFound(segment.status())) return absl::DataLossError(segment.status().message());
    return segment.status();
  }
  entry.segment = *std::move(segment);
  entry.synced = true;
  // Rather than on the first query by likes (its tier postings, which read the lists, are
  // built in the background: Open()).
  (void)entry.segment->likes_tiers();
  if (names.size() == 2) {
    const std::string path = StrCat(dir, "/", names[1]);
    absl::StatusOr<std::string> updates = ReadFile(path);
    if (!updates.ok()) return absl::DataLossError(updates.status().message());
    if (absl::Status s = entry.segment->ApplyUpdates(*updates, path); !s.ok()) return s;
    entry.saved_changes = entry.segment->columns().changes();
    entry.updates_dir = dir;
  }
  return entry;
}

IndexStats Index::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  IndexStats stats;
  stats.sealed_segments = sealed_.size();
  for (const Sealed& entry : sealed_) {
    const SealedSegment* s = entry.segment.get();
    stats.documents += s->num_docs();
    stats.terms += s->NumTerms();
    stats.memory_bytes += s->MemoryBytes();
    if (s->mapped()) stats.mapped_bytes += s->FileBytesSize();
    if (!s->Health().ok()) ++stats.damaged_segments;
    stats.sealed.postings += s->stats().postings;
    stats.sealed.positions += s->stats().positions;
    stats.sealed.posting_bytes += s->stats().posting_bytes;
    stats.sealed.doc_bytes += s->stats().doc_bytes;
    stats.sealed.freq_bytes += s->stats().freq_bytes;
    stats.sealed.position_bytes += s->stats().position_bytes;
    stats.sealed.skip_bytes += s->stats().skip_bytes;
    stats.sealed.bitmap_blocks += s->stats().bitmap_blocks;
    stats.sealed.dictionary_bytes += s->stats().dictionary_bytes;
    stats.sealed.column_bytes += s->stats().column_bytes;
  }
  for (const auto& f : frozen_) {
    stats.documents += f->VisibleDocs();
    stats.terms += f->NumTerms();
    stats.memory_bytes += f->MemoryBytes();
  }
  stats.merges = merges_;
  stats.merged_docs = merged_docs_;
  stats.documents += active_->VisibleDocs();
  stats.terms += active_->NumTerms();
  stats.memory_bytes += active_->MemoryBytes();
  return stats;
}

}  // namespace tweetsearch::index
