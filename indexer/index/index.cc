#include "indexer/index/index.h"

#include <algorithm>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/strings.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace tweetsearch::index {
namespace {

// v2: segment files of format v3, each line "<segment file>[ <updates file>]". An index
// with a v1 manifest (whole segments on the heap, format v2) is rebuilt by its owner.
constexpr std::string_view kManifestHeader = "tweetsearch-index-manifest v2";
constexpr std::string_view kOldManifestHeader = "tweetsearch-index-manifest v1";

// What the analyzer options were when the index was written: terms made with other options
// would not meet the saved ones, so Open() refuses a mismatch.
std::string AnalyzerLine(const analysis::AnalyzerOptions& o) {
  return StrCat("analyzer drop_stop_words=", o.drop_stop_words ? 1 : 0,
                " stem_language=", o.stem_language, " fold_diacritics=",
                o.fold_diacritics ? 1 : 0, " max_token_bytes=", o.max_token_bytes);
}

std::string SegmentFileName(uint64_t sequence) {
  return fmt::format("seg-{:06d}.tss", sequence);
}

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

// Adds every live document and posting of `segment` to `builder`. If the segment turns out
// damaged, what was added is incomplete: check its Health() after.
void CopyLive(const SealedSegment& segment, SealedSegmentBuilder& builder) {
  const Columns& c = segment.columns();
  std::vector<uint32_t> new_number(segment.num_docs(), kEndDoc);
  for (DocId d = 0; d < segment.num_docs(); ++d) {
    if (c.deleted(d)) continue;
    new_number[d] = builder.AddDoc(SealedSegmentBuilder::Row{
        c.tweet_id(d), c.created_at_ms(d), c.user_id(d), c.lang(d), c.length(d), c.likes(d)});
  }
  segment.ForEachTerm([&](std::string_view term) {
    std::unique_ptr<PostingCursor> cursor = segment.OpenTerm(term, segment.num_docs());
    if (cursor == nullptr) return;  // damaged: the caller checks the segment's Health()
    for (; cursor->doc() != kEndDoc; cursor->Next()) {
      if (new_number[cursor->doc()] == kEndDoc) continue;
      builder.AddPosting(term, new_number[cursor->doc()], cursor->positions());
    }
  });
}

}  // namespace

IndexDoc ToIndexDoc(SyntheticTweet t) {
  return IndexDoc{t.id, t.user_id, std::move(t.user_name), std::move(t.text), t.created_at_ms,
                  std::move(t.lang), t.likes};
}

IndexDoc ToIndexDoc(ImportedTweet t) {
  return IndexDoc{t.id, t.user_id, std::move(t.user_name), std::move(t.text), t.created_at_ms,
                  "en", t.likes};
}

std::string FromTerm(std::string_view user_name) {
  return StrCat("from:", absl::AsciiStrToLower(AsAbsl(user_name)));
}

std::string LangTerm(std::string_view lang) {
  return StrCat("lang:", absl::AsciiStrToLower(AsAbsl(lang)));
}

absl::StatusOr<std::unique_ptr<Index>> Index::Create(const IndexOptions& options) {
  if (options.segment_max_docs == 0 || options.segment_max_docs > kMaxSegmentDocs) {
    return absl::InvalidArgumentError(
        StrCat("segment_max_docs must be in [1, ", kMaxSegmentDocs, "], not ",
               options.segment_max_docs));
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
    : options_(options), analyzer_(std::move(analyzer)) {
  absl::MutexLock lock(&mu_);
  active_ = std::make_shared<ActiveSegment>(options_.segment_max_docs);
  PublishLocked();
}

Index::~Index() = default;

void Index::PublishLocked() {
  auto snapshot = std::make_shared<IndexSnapshot>();
  snapshot->segments.reserve(sealed_.size() + 1);
  for (const Sealed& s : sealed_) snapshot->segments.push_back(s.segment);
  snapshot->segments.push_back(active_);
  snapshot_.store(std::move(snapshot));
}

Index::Location Index::LocateLocked(TweetId id) const {
  // A deleted tweet may be indexed again; its deleted copy stays (flagged) until sealing or
  // compaction drops it, so only a live copy counts.
  if (std::optional<DocId> d = active_->FindForWriter(id);
      d && !active_->columns().deleted(*d)) {
    return {active_.get(), *d};
  }
  for (const Sealed& entry : sealed_) {
    const SealedSegment* s = entry.segment.get();
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
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < docs.size(); ++i) {
    results[i] = StageLocked(docs[i]);
    if (active_->full()) {
      FlushStagedLocked();
      if (absl::Status s = SealLocked(); !s.ok() && results[i].ok()) results[i] = s;
    }
  }
  FlushStagedLocked();
  return results;
}

absl::Status Index::StageLocked(const IndexDoc& doc) {
  if (const Location at = LocateLocked(doc.id); at.segment != nullptr) {
    return absl::AlreadyExistsError(StrCat("tweet ", doc.id, " is already indexed"));
  }
  std::vector<analysis::Token>& tokens = batch_.tokens;
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
  batch_.token_doc.resize(tokens.size(), d);
  return absl::OkStatus();
}

void Index::FlushStagedLocked() {
  Batch& b = batch_;
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
  absl::MutexLock lock(&mu_);
  const Location at = LocateLocked(id);
  if (at.segment == nullptr) return absl::NotFoundError(StrCat("tweet ", id, " is not indexed"));
  at.segment->columns().MarkDeleted(at.doc);
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Index::SetLikes(TweetId id, uint32_t likes) {
  absl::MutexLock lock(&mu_);
  const Location at = LocateLocked(id);
  if (at.segment == nullptr || at.segment->columns().deleted(at.doc)) {
    return absl::NotFoundError(StrCat("tweet ", id, " is not indexed"));
  }
  at.segment->columns().SetLikes(at.doc, likes);
  return likes;
}

absl::StatusOr<uint32_t> Index::AddLikes(TweetId id, int64_t delta) {
  absl::MutexLock lock(&mu_);
  const Location at = LocateLocked(id);
  if (at.segment == nullptr || at.segment->columns().deleted(at.doc)) {
    return absl::NotFoundError(StrCat("tweet ", id, " is not indexed"));
  }
  const int64_t value = std::clamp<int64_t>(
      static_cast<int64_t>(at.segment->columns().likes(at.doc)) + delta, 0, UINT32_MAX);
  at.segment->columns().SetLikes(at.doc, static_cast<uint32_t>(value));
  return static_cast<uint32_t>(value);
}

absl::Status Index::Seal() {
  absl::MutexLock lock(&mu_);
  return SealLocked();
}

absl::Status Index::SealLocked() {
  const DocId visible = active_->VisibleDocs();
  if (visible == 0) return absl::OkStatus();
  SealedSegmentBuilder builder;
  const Columns& c = active_->columns();
  std::vector<uint32_t> new_number(visible, kEndDoc);
  for (DocId d = 0; d < visible; ++d) {
    if (c.deleted(d)) continue;
    new_number[d] = builder.AddDoc(SealedSegmentBuilder::Row{
        c.tweet_id(d), c.created_at_ms(d), c.user_id(d), c.lang(d), c.length(d), c.likes(d)});
  }
  active_->ForEachTerm([&](std::string_view term, PostingCursor& cursor) {
    for (; cursor.doc() != kEndDoc; cursor.Next()) {
      if (new_number[cursor.doc()] == kEndDoc) continue;
      builder.AddPosting(term, new_number[cursor.doc()], cursor.positions());
    }
  });
  if (absl::Status s = AddSegmentLocked(builder); !s.ok()) return s;
  active_ = std::make_shared<ActiveSegment>(options_.segment_max_docs);
  PublishLocked();
  return absl::OkStatus();
}

absl::Status Index::AddSegmentLocked(SealedSegmentBuilder& builder) {
  const std::string bytes = builder.Encode();
  const uint64_t sequence = next_sequence_++;
  absl::StatusOr<std::unique_ptr<SealedSegment>> segment;
  if (options_.directory.empty()) {
    segment = SealedSegment::FromBytes(FileBytes::FromBytes(bytes), "(in memory)", true);
  } else {
    const std::string path = StrCat(options_.directory, "/", SegmentFileName(sequence));
    if (absl::Status s = WriteFileAtomically(path, bytes); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<FileBytes>> mapped = FileBytes::Map(path);
    if (!mapped.ok()) return mapped.status();
    segment = SealedSegment::FromBytes(*std::move(mapped), path, /*trusted=*/true);
  }
  if (!segment.ok()) return segment.status();
  if ((*segment)->num_docs() > 0) {
    Sealed entry;
    entry.segment = *std::move(segment);
    entry.sequence = sequence;
    sealed_.push_back(std::move(entry));
  }
  return absl::OkStatus();
}

absl::Status Index::Compact() {
  absl::MutexLock lock(&mu_);
  if (sealed_.empty()) return absl::OkStatus();
  SealedSegmentBuilder builder;
  for (const Sealed& s : sealed_) {
    CopyLive(*s.segment, builder);
    if (absl::Status health = s.segment->Health(); !health.ok()) return health;
  }
  std::vector<Sealed> merged_away = std::move(sealed_);
  sealed_.clear();
  if (absl::Status s = AddSegmentLocked(builder); !s.ok()) {
    sealed_ = std::move(merged_away);
    return s;
  }
  PublishLocked();
  return absl::OkStatus();
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
  absl::MutexLock lock(&mu_);
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
  // Files the manifest no longer names (merged away, older updates, left by a crash) are
  // removed. A segment still mapped by a running query keeps its pages until it is done.
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = file.path().filename().string();
    uint64_t sequence, generation;
    if (ParseFileName(name, &sequence, &generation) && !named.contains(name)) {
      std::filesystem::remove(file.path(), ec);  // best effort: a leftover file is harmless
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Index>> Index::Open(const IndexOptions& options,
                                                   const std::string& dir) {
  absl::StatusOr<std::string> manifest = ReadFile(dir + "/MANIFEST");
  if (!manifest.ok()) return manifest.status();
  std::vector<std::string> lines = absl::StrSplit(*manifest, '\n', absl::SkipEmpty());
  if (!lines.empty() && lines[0] == kOldManifestHeader) {
    return absl::NotFoundError(StrCat("the index in ", dir, " has an older format"));
  }
  if (lines.size() < 2 || lines[0] != kManifestHeader || !lines[1].starts_with("analyzer ")) {
    return absl::DataLossError(StrCat(dir, "/MANIFEST is not an index manifest"));
  }
  if (lines[1] != AnalyzerLine(options.analyzer)) {
    return absl::FailedPreconditionError(
        StrCat("the index in ", dir, " was written with '", lines[1],
               "' but is opened with '", AnalyzerLine(options.analyzer),
               "'; queries would not find its terms"));
  }
  IndexOptions attached = options;
  attached.directory = dir;
  absl::StatusOr<std::unique_ptr<Index>> index = Create(attached);
  if (!index.ok()) return index.status();
  Index& ix = **index;
  absl::MutexLock lock(&ix.mu_);
  for (size_t i = 2; i < lines.size(); ++i) {
    absl::StatusOr<Sealed> entry = OpenSegment(dir, lines[i]);
    if (!entry.ok()) return entry.status();
    ix.next_sequence_ = std::max({ix.next_sequence_, entry->sequence + 1, entry->updates + 1});
    ix.sealed_.push_back(*std::move(entry));
  }
  ix.PublishLocked();
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
  absl::MutexLock lock(&mu_);
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
  stats.documents += active_->VisibleDocs();
  stats.terms += active_->NumTerms();
  stats.memory_bytes += active_->MemoryBytes();
  return stats;
}

}  // namespace tweetsearch::index
