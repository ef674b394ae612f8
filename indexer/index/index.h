// Index: the segmented in-memory inverted index of one index partition.
//
// Writes (Add, Delete, SetLikes, Seal, Compact, Save) are serialized by a writer mutex and go to
// one active segment at a time; when it is full it is sealed into a compact read-only segment
// and a new active segment takes over. With background merging on, a full active segment is
// handed to a seal thread, and a merge thread merges sealed segments as the merge policy
// (merge_policy.h) asks, both off the writer; the writer seals inline only when two full
// segments are already waiting. Readers call Snapshot() and query the segments in it
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
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "indexer/analysis/analyzer.h"
#include "indexer/index/active_segment.h"
#include "indexer/index/merge_policy.h"
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
  // Where sealed segments live: each is written there as a file when it is sealed and served
  // from a read-only mapping of it. Empty: sealed segments stay on the heap (tests, tools),
  // and Save() writes them out.
  std::string directory;
  // Seal full active segments and merge sealed ones on a background thread (see the class
  // comment). Off: sealing happens inline and nothing merges but Compact().
  bool background_merges = false;
  MergePolicyOptions merge;
  // Bytes per second a background merge may write (0: no limit), measured on `clock`.
  uint64_t merge_bytes_per_second = 40 << 20;
  const Clock* clock = &SystemClock();
};

// What a query sees: sealed segments, oldest first, then the active segment (if any).
struct IndexSnapshot {
  std::vector<std::shared_ptr<const Segment>> segments;
};

struct IndexStats {
  uint64_t documents = 0;  // indexed, deleted ones not yet compacted away included
  uint64_t sealed_segments = 0;
  uint64_t terms = 0;             // summed over segments
  uint64_t memory_bytes = 0;      // heap: the active segment, heap-held segments, overlays
  uint64_t mapped_bytes = 0;      // sealed segment files served from mappings
  uint64_t damaged_segments = 0;  // sealed segments a corrupt part was found in
  uint64_t merges = 0;            // background merges and seals completed since start
  uint64_t merged_docs = 0;       // documents they wrote
  SealedStats sealed;             // summed over sealed segments
};

class Index {
 public:
  // Returns InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<Index>> Create(const IndexOptions& options);
  // Opens the index saved in `dir` by Save(): maps its segment files (checking headers and
  // small sections; postings are verified as queries first read them) and applies their
  // updates files. New segments are then written to `dir` (options.directory is ignored).
  // Returns NotFound if `dir` has no manifest or one of an older format (the caller rebuilds),
  // DataLoss if a file is corrupt or missing, FailedPrecondition if the index was written with
  // other analyzer options.
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
  // Makes the sealed segments durable in `dir` (created if missing): their files (already
  // there when `dir` is the index's directory), an updates file for each segment whose deletes
  // or likes changed since the last Save, and then the manifest naming them; files the
  // manifest no longer names are removed. The active segment is not saved: call Seal() first
  // to include it.
  absl::Status Save(const std::string& dir);

  // Waits until the background threads have nothing to do: seals, merges, and the tier
  // postings of loaded segments (for tests and benchmarks).
  void WaitForMerges();

  std::shared_ptr<const IndexSnapshot> Snapshot() const { return snapshot_.load(); }
  const analysis::Analyzer& analyzer() const { return *analyzer_; }
  IndexStats Stats() const;

 private:
  Index(const IndexOptions& options, std::unique_ptr<analysis::Analyzer> analyzer);
  struct Location {
    Segment* segment = nullptr;  // the writer's handle: deletes and likes go through it
    DocId doc = kEndDoc;
  };
  Location LocateLocked(TweetId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SealLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the updates file of `entry` to `dir` if its deletes or likes changed since the last
  // one; records the generation in `entry`.
  struct Sealed;
  absl::Status SaveUpdatesLocked(const std::string& dir, Sealed& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  IndexOptions options_;
  const std::unique_ptr<analysis::Analyzer> analyzer_;
  // std::mutex rather than absl::Mutex: ThreadSanitizer sees its ordering (Debian's Abseil is
  // not built with it). Waits are on cv_; whoever changes what a wait depends on (the
  // segments, stop_, a job's end, a delete) notifies it.
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  // A sealed segment and the files that make it durable.
  struct Sealed {
    std::shared_ptr<SealedSegment> segment;
    uint64_t sequence = 0;       // names its file, seg-<sequence>.tss
    bool synced = false;         // its file is durable (fsynced since written)
    uint64_t updates = 0;        // generation of its updates file; 0: none
    uint64_t saved_changes = 0;  // columns().changes() when that file was written
    std::string updates_dir;     // where that file was written
  };
  std::vector<Sealed> sealed_ ABSL_GUARDED_BY(mu_);
  // Loaded segments whose tier postings the merge thread has yet to build, and whether it is.
  std::vector<std::shared_ptr<const SealedSegment>> unwarmed_ ABSL_GUARDED_BY(mu_);
  bool warming_ ABSL_GUARDED_BY(mu_) = false;
  // Maps the segment a manifest line names and applies its updates file.
  static absl::StatusOr<Sealed> OpenSegment(const std::string& dir, std::string_view line);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::shared_ptr<ActiveSegment> active_ ABSL_GUARDED_BY(mu_);
  // Analyzes `doc` into batch_ and adds its row to the active segment. Requires room.
  absl::Status StageLocked(const IndexDoc& doc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends the staged postings to the active segment and publishes the staged rows.
  void FlushStagedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The writer's staging buffers for the active segment (index.cc); reused.
  struct Batch;
  const std::unique_ptr<Batch> batch_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::shared_ptr<const IndexSnapshot>> snapshot_;

  // Background merging. A job seals the oldest frozen segment or merges a run of sealed ones;
  // it reads its sources without the lock, and its commit (under the lock) carries over the
  // deletes and likes changes made to them meanwhile, recorded in changed_.
  struct Job;
  // One loop seals (kSeal), the other merges (kMerge): a long merge never holds up a seal.
  enum class JobKind { kSeal, kMerge };
  void MergeLoop(JobKind kind);
  std::optional<Job> NextJobLocked(JobKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::unique_ptr<SealedSegment>> RunJob(Job& job);
  void CommitJobLocked(Job& job, std::unique_ptr<SealedSegment> segment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the segment file `encode` makes (throttled for merges) and maps it, or keeps it on
  // the heap without a directory.
  using Encoder = std::function<absl::Status(const SegmentFileSink&)>;
  absl::StatusOr<std::unique_ptr<SealedSegment>> WriteSegment(const Encoder& encode,
                                                              uint64_t sequence, bool throttle);
  // Hands the active segment to the merge thread (or seals it inline if two are waiting).
  absl::Status RotateActiveLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Seals a full active segment inline and appends it to sealed_.
  absl::Status SealFrozenLocked(const std::shared_ptr<ActiveSegment>& segment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteChangeLocked(const Segment* segment, DocId doc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Full active segments waiting to be sealed, oldest first (queries see them).
  std::vector<std::shared_ptr<ActiveSegment>> frozen_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool seal_running_ ABSL_GUARDED_BY(mu_) = false;
  bool merge_running_ ABSL_GUARDED_BY(mu_) = false;
  const Segment* sealing_ ABSL_GUARDED_BY(mu_) = nullptr;  // the frozen segment being sealed
  absl::flat_hash_map<const Segment*, std::vector<DocId>> changed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> busy_ ABSL_GUARDED_BY(mu_);  // numbers of files being written
  uint64_t merges_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t merged_docs_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> cancel_{false};
  std::thread sealer_, merger_;
};

// Index terms that are not words of the text.
std::string FromTerm(std::string_view user_name);  // "from:<name>", case-folded
std::string LangTerm(std::string_view lang);       // "lang:<code>", case-folded

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_INDEX_H_
