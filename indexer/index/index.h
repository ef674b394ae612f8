// Index: the segmented in-memory inverted index of one index partition.
//
// Writes (Add, Delete, SetLikes, Seal, Compact, Save) are serialized by a writer mutex and go to
// one active segment at a time; when it is full it is sealed into a compact read-only segment
// and a new active segment takes over. Readers call Snapshot() and query the segments in it
// without taking any lock: the snapshot is an immutable list, replaced copy-on-write, and a
// query keeps the one it started with for its whole run.
//
// Deletes and likes changes are visible to the next query (atomic per-tweet columns), without
// re-indexing. Deleted tweets are dropped from postings when their segment is sealed or
// compacted.
//
// Thread-safety: every method may be called from any thread. Writers wait for each other;
// readers (Snapshot and what it returns) never wait.
#ifndef TWEETSEARCH_INDEXER_INDEX_INDEX_H_
#define TWEETSEARCH_INDEXER_INDEX_INDEX_H_

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/synthetic.h"
#include "common/tweet_csv.h"
#include "indexer/analysis/analyzer.h"
#include "indexer/index/active_segment.h"
#include "indexer/index/sealed_segment.h"

namespace tweetsearch::index {

// The largest segment_max_docs: an active segment allocates its columns up front.
inline constexpr uint32_t kMaxSegmentDocs = 1u << 24;

struct IndexOptions {
  // How text is turned into terms. Queries against this index must use the same options.
  analysis::AnalyzerOptions analyzer;
  // Documents an active segment holds before it is sealed, 1 to kMaxSegmentDocs. Default
  // 65536 (2^16). Compaction may build larger sealed segments.
  uint32_t segment_max_docs = 1 << 16;
};

// What a query sees: sealed segments, oldest first, then the active segment (if any).
struct IndexSnapshot {
  std::vector<std::shared_ptr<const Segment>> segments;
};

struct IndexStats {
  uint64_t documents = 0;      // indexed, deleted ones not yet compacted away included
  uint64_t sealed_segments = 0;
  uint64_t terms = 0;          // summed over segments
  uint64_t memory_bytes = 0;   // postings, dictionaries and columns
  SealedStats sealed;          // summed over sealed segments
};

class Index {
 public:
  // Returns InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<Index>> Create(const IndexOptions& options);
  // Loads the sealed segments saved in `dir` by Save(). Returns NotFound if `dir` has no
  // manifest, DataLoss if a segment file is corrupt or missing, FailedPrecondition if the index
  // was written with other analyzer options.
  static absl::StatusOr<std::unique_ptr<Index>> Open(const IndexOptions& options,
                                                     const std::string& dir);

  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;
  ~Index();

  // Indexes `doc`; it is visible to queries that start after this returns. Returns
  // AlreadyExists if the id is indexed (and not deleted: a deleted tweet may come back),
  // InvalidArgument for text that is not UTF-8 or has more than 65,535 tokens.
  absl::Status Add(const IndexDoc& doc);
  // Indexes many tweets at once, with one status per tweet (in order), as Add() would return
  // it; a rejected tweet does not affect the others. Faster than Add() in a loop: each
  // distinct term of the batch is looked up once. All accepted tweets become visible together
  // (per active segment they fill).
  std::vector<absl::Status> AddBatch(std::span<const IndexDoc> docs);
  // Removes the tweet from every later query. NotFound if it is not indexed (or deleted).
  absl::Status Delete(TweetId id);
  // Sets, or adds to (clamped to [0, 2^32-1]), the likes of a tweet; returns the new value.
  // NotFound if it is not indexed.
  absl::StatusOr<uint32_t> SetLikes(TweetId id, uint32_t likes);
  absl::StatusOr<uint32_t> AddLikes(TweetId id, int64_t delta);

  // Seals the active segment now, if it holds anything.
  absl::Status Seal();
  // Merges all sealed segments into one, dropping deleted tweets. Writers wait meanwhile.
  absl::Status Compact();
  // Writes every sealed segment and a manifest to `dir` (created if missing). The active
  // segment is not saved: call Seal() first to include it.
  absl::Status Save(const std::string& dir);

  std::shared_ptr<const IndexSnapshot> Snapshot() const { return snapshot_.load(); }
  const analysis::Analyzer& analyzer() const { return *analyzer_; }
  IndexStats Stats() const;

 private:
  Index(const IndexOptions& options, std::unique_ptr<analysis::Analyzer> analyzer);
  struct Location {
    const Segment* segment = nullptr;
    DocId doc = kEndDoc;
  };
  Location LocateLocked(TweetId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SealLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const IndexOptions options_;
  const std::unique_ptr<analysis::Analyzer> analyzer_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<SealedSegment>> sealed_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> sealed_sequence_ ABSL_GUARDED_BY(mu_);  // file number of each
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::shared_ptr<ActiveSegment> active_ ABSL_GUARDED_BY(mu_);
  // Analyzes `doc` into batch_ and adds its row to the active segment. Requires room.
  absl::Status StageLocked(const IndexDoc& doc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends the staged postings to the active segment and publishes the staged rows.
  void FlushStagedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Tokens of the tweets staged for the active segment, and the DocId of each; reused.
  struct Batch {
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
  Batch batch_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::shared_ptr<const IndexSnapshot>> snapshot_;
};

// Index documents from the project's tweet sources (Sentiment140 tweets are English).
IndexDoc ToIndexDoc(SyntheticTweet tweet);
IndexDoc ToIndexDoc(ImportedTweet tweet);

// Index terms that are not words of the text.
std::string FromTerm(std::string_view user_name);  // "from:<name>", case-folded
std::string LangTerm(std::string_view lang);       // "lang:<code>", case-folded

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_INDEX_H_
