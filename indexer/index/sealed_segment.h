// SealedSegment: the compact, read-only form of a segment, served from its file's bytes.
//
// Documents are renumbered so that DocId 0 is the newest tweet (TweetId descending); walking a
// posting list forward then walks back in time, which lets newest-first queries stop after k
// hits. Each posting list is cut into blocks of kBlockSize postings. A block stores DocId gaps,
// term frequencies minus one and in-document positions, each bit-packed at the width of its
// largest value. Lists of more than one block start with a skip table: per block, its last
// DocId, byte offset, bit widths and the block maxima used by block-max pruning (largest term
// frequency, shortest document). Lists of at least kChampionMinPostings end with their
// champions for best match (champions.h).
//
// The file (format v4, docs/index-format.md) is written once and then only read: mapped from
// disk, or held in a heap buffer by an index without a directory. Opening one checks its
// header, and the checksums of everything but the postings; the postings are checksummed per
// 1 MiB chunk, and a chunk is verified the first time a query opens a list in it. A damaged
// chunk is never served: the segment reports DataLoss from Health() from then on.
//
// Likes changed and tweets deleted after the file was written live on the heap (Columns) and
// are saved beside the file as an updates file (EncodeUpdates / ApplyUpdates).
//
// Thread-safety: immutable after Build()/Load(), except likes and deleted flags (written by
// the index's writer through Columns). Any number of threads may read.
#ifndef TWEETSEARCH_INDEXER_INDEX_SEALED_SEGMENT_H_
#define TWEETSEARCH_INDEXER_INDEX_SEALED_SEGMENT_H_

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "indexer/index/lead_points.h"
#include "indexer/index/length_classes.h"
#include "indexer/index/likes_tiers.h"
#include "indexer/index/mapped_file.h"
#include "indexer/index/pair_champions.h"
#include "indexer/index/segment.h"
#include "indexer/index/term_dictionary.h"

namespace tweetsearch::index {

inline constexpr uint32_t kBlockSize = 128;

// Space used by a sealed segment, for benchmarks and /metrics.
struct SealedStats {
  uint64_t postings = 0;          // (term, document) pairs
  uint64_t positions = 0;         // term occurrences
  uint64_t posting_bytes = 0;     // the encoded lists, skip tables included, made of:
  uint64_t doc_bytes = 0;         //   DocId gaps
  uint64_t freq_bytes = 0;        //   term frequencies
  uint64_t position_bytes = 0;    //   positions
  uint64_t skip_bytes = 0;        //   skip tables and block headers
  uint64_t bitmap_blocks = 0;     // blocks whose DocIds are stored as a bitmap
  uint64_t dictionary_bytes = 0;  // term strings, offsets and per-term headers
  uint64_t column_bytes = 0;      // the packed columns in the file
};
static_assert(sizeof(SealedStats) == 10 * sizeof(uint64_t));  // stored as is in the file

class SealedSegment final : public Segment {
 public:
  // Maps a segment file written by Save() or by SealedSegmentBuilder::Encode(). Returns
  // DataLoss for a corrupt, truncated or inconsistent file, NotFound or Internal for I/O
  // errors.
  static absl::StatusOr<std::unique_ptr<SealedSegment>> Load(const std::string& path);
  // The same from bytes already in memory; `name` names them in errors. `trusted`: the bytes
  // were just encoded here, so their chunks need no verification.
  static absl::StatusOr<std::unique_ptr<SealedSegment>> FromBytes(std::unique_ptr<FileBytes> bytes,
                                                                  std::string name, bool trusted);
  ~SealedSegment() override;

  // Writes the segment file (as written when sealed: likes and deletes changed since are in
  // EncodeUpdates) to `path`, via a temporary file and rename, fsynced. Internal on I/O
  // errors.
  absl::Status Save(const std::string& path) const;
  // Reads every byte: the whole-file checksum, every chunk and the structure of every list.
  // DataLoss naming the problem (and marking the segment damaged) if anything is wrong.
  absl::Status VerifyAll() const;

  // The deletes and likes changes made since the file was written, as the bytes of an updates
  // file; ApplyUpdates() applies such bytes (DataLoss if they are damaged or for another
  // segment). Writer only.
  std::string EncodeUpdates() const;
  absl::Status ApplyUpdates(std::string_view bytes, std::string_view name);

  // The DocId of `id`, found by binary search over the TweetId column.
  std::optional<DocId> Find(TweetId id) const;

  DocId VisibleDocs() const override { return num_docs_; }
  bool newest_first() const override { return true; }
  std::unique_ptr<PostingCursor> OpenTerm(std::string_view term, DocId visible) const override;
  uint32_t DocFreq(std::string_view term) const override;
  // DocFreq(term) of each of `segments` into out[i] (out as long as segments). The sealed
  // ones' dictionaries are searched in lockstep (TermDictionary::LocateInEach) and the first
  // bytes of each list found are asked for, ahead of the OpenTerm that usually follows: over
  // many segments, a query then waits for the memory once per step of the search rather than
  // once per step and segment.
  static void DocFreqs(std::span<const Segment* const> segments, std::string_view term,
                       std::span<uint32_t> out);
  // Whether `term`'s list keeps its DocIds as one bitmap (a dense list: docs/index-format.md).
  bool DenseList(std::string_view term) const;
  uint64_t TotalLength() const override { return total_length_; }
  TweetId MaxTweetId() const override { return num_docs_ == 0 ? 0 : columns().tweet_id(0); }
  size_t NumTerms() const override { return dictionary_.size(); }
  // Heap bytes only: the file's bytes are mapped (or, without a directory, FileBytesSize()).
  size_t MemoryBytes() const override;
  absl::Status Health() const override;
  std::span<const LikesTier> likes_tiers() const override;
  // Null until BuildDerived() ran (never waits for it).
  const TierPostings* tier_postings() const override {
    return tier_postings_.load(std::memory_order_acquire);
  }
  const PairChampions* pair_champions() const override {
    return pair_champions_.load(std::memory_order_acquire);
  }
  const LeadPoints* lead_points() const override {
    return lead_points_.load(std::memory_order_acquire);
  }
  const LengthClasses* length_classes() const override {
    return length_classes_.load(std::memory_order_acquire);
  }
  // Builds the tier postings (likes_tiers.h), the pair champions (pair_champions.h), the
  // lead points (lead_points.h) and the length classes (length_classes.h) once, reading every
  // long list and the length column: by whoever writes the segment,
  // or in the background after it is loaded (opening reads no postings). `cancel` (may be null)
  // stops it early, leaving those not built yet.
  void BuildDerived(const std::atomic<bool>* cancel = nullptr) const;

  uint32_t num_docs() const { return num_docs_; }
  uint32_t num_live_docs() const;
  const SealedStats& stats() const { return stats_; }
  size_t FileBytesSize() const;
  bool mapped() const;

  // The terms in sorted order (for merging).
  TermDictionary::Iterator Terms() const { return TermDictionary::Iterator(dictionary_); }

 private:
  friend class SealedSegmentBuilder;
  struct Parts;
  SealedSegment(std::unique_ptr<FileBytes> bytes, std::string name, const Parts& parts);
  // Verifies the chunks holding postings bytes [begin, end); false (and the segment marked
  // damaged) if one is corrupt.
  bool VerifyChunks(size_t begin, size_t end) const;
  void MarkDamaged(std::string why) const;

  const std::unique_ptr<FileBytes> bytes_;
  const std::string name_;
  const uint32_t num_docs_;
  const uint64_t total_length_;
  TermDictionary dictionary_;
  const uint8_t* postings_ = nullptr;
  size_t postings_size_ = 0;
  std::span<const uint64_t> chunk_sums_;
  std::unique_ptr<std::atomic<uint64_t>[]> verified_;  // a bit per chunk
  mutable std::atomic<bool> damaged_{false};
  mutable absl::Mutex damage_mu_;
  mutable std::string damage_ ABSL_GUARDED_BY(damage_mu_);
  SealedStats stats_;
  mutable std::once_flag tiers_once_;
  mutable std::vector<LikesTier> tiers_;
  mutable std::once_flag tier_postings_once_;
  mutable std::unique_ptr<TierPostings> tier_postings_owned_;
  mutable std::atomic<const TierPostings*> tier_postings_{nullptr};  // once built
  mutable std::atomic<size_t> tier_postings_bytes_{0};
  mutable std::unique_ptr<PairChampions> pair_champions_owned_;
  mutable std::atomic<const PairChampions*> pair_champions_{nullptr};  // once built
  mutable std::atomic<size_t> pair_champions_bytes_{0};
  mutable std::unique_ptr<LeadPoints> lead_points_owned_;
  mutable std::atomic<const LeadPoints*> lead_points_{nullptr};  // once built
  mutable std::atomic<size_t> lead_points_bytes_{0};
  mutable std::unique_ptr<LengthClasses> length_classes_owned_;
  mutable std::atomic<const LengthClasses*> length_classes_{nullptr};  // once built
  mutable std::atomic<size_t> tiers_bytes_{0};  // set once the tiers are built
};

// Builds a sealed segment from documents in any order, renumbering them newest first.
// Thread-safety: single-threaded.
class SealedSegmentBuilder {
 public:
  struct Row {
    TweetId id;
    int64_t created_at_ms;
    UserId user_id;
    uint32_t lang;
    uint16_t length;
    uint32_t likes;
  };

  // Adds a document; returns the builder's number for it, to use with AddPosting().
  uint32_t AddDoc(const Row& row);
  // Records that `doc` contains `term` at `positions` (ascending, non-empty). Each (term, doc)
  // pair may be added once.
  void AddPosting(std::string_view term, uint32_t doc, std::span<const uint32_t> positions);

  // The segment file of the documents added, and the builder emptied. If `new_ids`, sets it
  // to the DocId each added document got (by the number AddDoc returned).
  std::string Encode(std::vector<DocId>* new_ids = nullptr);
  // Encode() held in a heap buffer.
  std::unique_ptr<SealedSegment> Build();

 private:
  std::vector<Row> rows_;
  // term -> records [doc, freq, positions...]
  absl::flat_hash_map<std::string, std::vector<uint32_t>> postings_;
  // Postings arrive term by term: the last term's records, to skip the hash lookup. Reset
  // whenever a new term is inserted (which may move the map's values).
  std::string last_term_;
  std::vector<uint32_t>* last_records_ = nullptr;
};

// Receives an encoded segment file as consecutive pieces (valid during the call) and stores
// it (in a file, or in memory). Its error is the encoder's.
using SegmentFileSink = std::function<absl::Status(std::span<const std::string_view> pieces)>;

// Encodes the live documents among the first VisibleDocs() of `segment` (an active segment
// no longer written to) as a segment file, renumbered newest first, into `sink`. `terms` are
// all of its terms, in any order; the lists are read one at a time through OpenTerm, so memory
// grows with the output, not with a copy of the postings. Sets (*doc_map)[d] to the new DocId
// of DocId d, kEndDoc if it was deleted.
absl::Status EncodeSegment(const Segment& segment, std::vector<std::string_view> terms,
                           std::vector<DocId>* doc_map, const SegmentFileSink& sink);

// Merges `sources` into one segment file of their live documents (deleted ones are dropped),
// reading one term's lists at a time, into `sink`: memory grows with the output's columns
// and postings, not with a copy of every list. Sets (*doc_maps)[i][d] to the new DocId of
// DocId d of sources[i], kEndDoc if it was dropped. DataLoss if a source turns out damaged,
// Cancelled once `*cancel` is set (the sink is then not called).
absl::Status MergeSegments(std::span<const SealedSegment* const> sources,
                           std::vector<std::vector<DocId>>* doc_maps, const SegmentFileSink& sink,
                           const std::atomic<bool>* cancel = nullptr);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_SEALED_SEGMENT_H_
