#include "indexer/index/index.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/strings.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace tweetsearch::index {
namespace {

constexpr std::string_view kManifestHeader = "tweetsearch-index-manifest v1";

std::string SegmentFileName(uint64_t sequence) {
  return fmt::format("seg-{:06d}.tss", sequence);
}

// Adds every live document and posting of `segment` to `builder`.
void CopyLive(const SealedSegment& segment, SealedSegmentBuilder& builder) {
  const Columns& c = segment.columns();
  std::vector<uint32_t> new_number(segment.num_docs(), kEndDoc);
  for (DocId d = 0; d < segment.num_docs(); ++d) {
    if (c.deleted(d)) continue;
    new_number[d] = builder.AddDoc(SealedSegmentBuilder::Row{
        c.tweet_id(d), c.created_at_ms(d), c.user_id(d), c.lang(d), c.length(d), c.likes(d)});
  }
  for (std::string_view term : segment.Terms()) {
    std::unique_ptr<PostingCursor> cursor = segment.OpenTerm(term, segment.num_docs());
    for (; cursor->doc() != kEndDoc; cursor->Next()) {
      if (new_number[cursor->doc()] == kEndDoc) continue;
      builder.AddPosting(term, new_number[cursor->doc()], cursor->positions());
    }
  }
}

}  // namespace

std::string FromTerm(std::string_view user_name) {
  return StrCat("from:", absl::AsciiStrToLower(AsAbsl(user_name)));
}

std::string LangTerm(std::string_view lang) {
  return StrCat("lang:", absl::AsciiStrToLower(AsAbsl(lang)));
}

absl::StatusOr<std::unique_ptr<Index>> Index::Create(const IndexOptions& options) {
  if (options.segment_max_docs == 0 || options.segment_max_docs >= kEndDoc) {
    return absl::InvalidArgumentError("segment_max_docs must be in [1, 2^32-2]");
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
  for (const auto& s : sealed_) snapshot->segments.push_back(s);
  snapshot->segments.push_back(active_);
  snapshot_.store(std::move(snapshot));
}

Index::Location Index::LocateLocked(TweetId id) const {
  if (std::optional<DocId> d = active_->FindForWriter(id)) return {active_.get(), *d};
  for (const auto& s : sealed_) {
    if (s->num_docs() == 0 || id > s->MaxTweetId() ||
        id < s->columns().tweet_id(s->num_docs() - 1)) {
      continue;
    }
    if (std::optional<DocId> d = s->Find(id)) return {s.get(), *d};
  }
  return {};
}

absl::Status Index::Add(const IndexDoc& doc) {
  absl::MutexLock lock(&mu_);
  if (const Location at = LocateLocked(doc.id); at.segment != nullptr) {
    return absl::AlreadyExistsError(StrCat("tweet ", doc.id, " is already indexed"));
  }
  tokens_.clear();
  if (absl::Status s = analyzer_->Analyze(doc.text, &tokens_); !s.ok()) return s;
  if (tokens_.size() > UINT16_MAX) {
    return absl::InvalidArgumentError(
        StrCat("tweet ", doc.id, " has ", tokens_.size(), " tokens; at most 65535"));
  }
  const uint16_t length = static_cast<uint16_t>(tokens_.size());
  const uint32_t next_position = tokens_.empty() ? 0 : tokens_.back().position + 1;
  if (!doc.user_name.empty()) {
    tokens_.push_back({FromTerm(doc.user_name), next_position, analysis::TokenKind::kWord});
  }
  if (!doc.lang.empty()) {
    tokens_.push_back({LangTerm(doc.lang), next_position, analysis::TokenKind::kWord});
  }
  // Group the tokens by term, positions ascending (tokens come in position order, and the
  // sort is stable), without copying any term.
  order_.resize(tokens_.size());
  for (uint32_t i = 0; i < order_.size(); ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(),
                   [&](uint32_t a, uint32_t b) { return tokens_[a].text < tokens_[b].text; });
  positions_.resize(order_.size());
  terms_.clear();
  for (size_t i = 0; i < order_.size(); ++i) {
    const analysis::Token& token = tokens_[order_[i]];
    positions_[i] = token.position;
    if (terms_.empty() || terms_.back().term != token.text) {
      terms_.push_back({token.text, std::span<const uint32_t>(&positions_[i], 0)});
    }
    TermOccurrences& last = terms_.back();
    last.positions = std::span<const uint32_t>(last.positions.data(), last.positions.size() + 1);
  }
  active_->Append(doc, terms_, length);
  if (active_->full()) return SealLocked();
  return absl::OkStatus();
}

absl::Status Index::Delete(TweetId id) {
  absl::MutexLock lock(&mu_);
  const Location at = LocateLocked(id);
  if (at.segment == nullptr || at.segment->columns().deleted(at.doc)) {
    return absl::NotFoundError(StrCat("tweet ", id, " is not indexed"));
  }
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
  std::unique_ptr<SealedSegment> sealed = builder.Build();
  if (sealed->num_docs() > 0) {
    sealed_.push_back(std::move(sealed));
    sealed_sequence_.push_back(next_sequence_++);
  }
  active_ = std::make_shared<ActiveSegment>(options_.segment_max_docs);
  PublishLocked();
  return absl::OkStatus();
}

absl::Status Index::Compact() {
  absl::MutexLock lock(&mu_);
  if (sealed_.empty()) return absl::OkStatus();
  SealedSegmentBuilder builder;
  for (const auto& s : sealed_) CopyLive(*s, builder);
  std::unique_ptr<SealedSegment> merged = builder.Build();
  sealed_.clear();
  sealed_sequence_.clear();
  if (merged->num_docs() > 0) {
    sealed_.push_back(std::move(merged));
    sealed_sequence_.push_back(next_sequence_++);
  }
  PublishLocked();
  return absl::OkStatus();
}

absl::Status Index::Save(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(StrCat("cannot create ", dir, ": ", ec.message()));
  std::string manifest = StrCat(kManifestHeader, "\n");
  for (size_t i = 0; i < sealed_.size(); ++i) {
    const std::string name = SegmentFileName(sealed_sequence_[i]);
    if (absl::Status s = sealed_[i]->Save(dir + "/" + name); !s.ok()) return s;
    StrAppend(&manifest, name, "\n");
  }
  if (absl::Status s = WriteFileAtomically(dir + "/MANIFEST", manifest); !s.ok()) return s;
  // Segment files the manifest no longer names (merged away) are removed.
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("seg-") && manifest.find(name + "\n") == std::string::npos) {
      std::filesystem::remove(entry.path(), ec);  // best effort: a leftover file is harmless
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Index>> Index::Open(const IndexOptions& options,
                                                   const std::string& dir) {
  absl::StatusOr<std::string> manifest = ReadFile(dir + "/MANIFEST");
  if (!manifest.ok()) return manifest.status();
  std::vector<std::string> lines = absl::StrSplit(*manifest, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != kManifestHeader) {
    return absl::DataLossError(StrCat(dir, "/MANIFEST is not an index manifest"));
  }
  absl::StatusOr<std::unique_ptr<Index>> index = Create(options);
  if (!index.ok()) return index.status();
  Index& ix = **index;
  absl::MutexLock lock(&ix.mu_);
  for (size_t i = 1; i < lines.size(); ++i) {
    uint64_t sequence = 0;
    if (!lines[i].starts_with("seg-") || !lines[i].ends_with(".tss") ||
        !absl::SimpleAtoi(AsAbsl(lines[i]).substr(4, lines[i].size() - 8), &sequence)) {
      return absl::DataLossError(StrCat("bad manifest line '", lines[i], "'"));
    }
    absl::StatusOr<std::unique_ptr<SealedSegment>> segment =
        SealedSegment::Load(StrCat(dir, "/", lines[i]));
    if (!segment.ok()) {
      if (absl::IsNotFound(segment.status())) {
        return absl::DataLossError(segment.status().message());
      }
      return segment.status();
    }
    ix.sealed_.push_back(*std::move(segment));
    ix.sealed_sequence_.push_back(sequence);
    ix.next_sequence_ = std::max(ix.next_sequence_, sequence + 1);
  }
  ix.PublishLocked();
  return index;
}

IndexStats Index::Stats() const {
  absl::MutexLock lock(&mu_);
  IndexStats stats;
  stats.sealed_segments = sealed_.size();
  for (const auto& s : sealed_) {
    stats.documents += s->num_docs();
    stats.terms += s->NumTerms();
    stats.memory_bytes += s->MemoryBytes();
    stats.sealed.postings += s->stats().postings;
    stats.sealed.positions += s->stats().positions;
    stats.sealed.posting_bytes += s->stats().posting_bytes;
    stats.sealed.doc_bytes += s->stats().doc_bytes;
    stats.sealed.freq_bytes += s->stats().freq_bytes;
    stats.sealed.position_bytes += s->stats().position_bytes;
    stats.sealed.skip_bytes += s->stats().skip_bytes;
    stats.sealed.dictionary_bytes += s->stats().dictionary_bytes;
    stats.sealed.column_bytes += s->stats().column_bytes;
  }
  stats.documents += active_->VisibleDocs();
  stats.terms += active_->NumTerms();
  stats.memory_bytes += active_->MemoryBytes();
  return stats;
}

}  // namespace tweetsearch::index
