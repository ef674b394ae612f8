// SealedSegment: the compact, read-only form of a segment.
//
// Documents are renumbered so that DocId 0 is the newest tweet (TweetId descending); walking a
// posting list forward then walks back in time, which lets newest-first queries stop after k
// hits. Each posting list is cut into blocks of kBlockSize postings. A block stores DocId gaps,
// term frequencies minus one and in-document positions, each bit-packed at the width of its
// largest value. Lists of more than one block start with a skip table: per block, its last
// DocId, byte offset, bit widths and the block maxima used by block-max pruning (largest term
// frequency, shortest document).
//
// A sealed segment can be written to a file and read back. Every section of the file carries
// an XXH64 checksum and the file ends with a checksum of the whole, so a corrupt or truncated
// file is reported and never served.
//
// Thread-safety: immutable after Build()/Load(), except likes and deleted flags (atomics in
// Columns, written by the index's writer). Any number of threads may read.
#ifndef TWEETSEARCH_INDEXER_INDEX_SEALED_SEGMENT_H_
#define TWEETSEARCH_INDEXER_INDEX_SEALED_SEGMENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  uint64_t column_bytes = 0;
};

class SealedSegment final : public Segment {
 public:
  // Reads a segment file written by Save(). Returns DataLoss for a corrupt, truncated or
  // inconsistent file, NotFound or Internal for I/O errors.
  static absl::StatusOr<std::unique_ptr<SealedSegment>> Load(const std::string& path);

  // Writes the segment, with the current likes and deletes, to `path` (via a temporary file
  // and rename, fsynced). Returns Internal on I/O errors.
  absl::Status Save(const std::string& path) const;

  // The DocId of `id`, found by binary search over the TweetId column.
  std::optional<DocId> Find(TweetId id) const;

  DocId VisibleDocs() const override { return num_docs_; }
  bool newest_first() const override { return true; }
  std::unique_ptr<PostingCursor> OpenTerm(std::string_view term, DocId visible) const override;
  uint32_t DocFreq(std::string_view term) const override;
  uint64_t TotalLength() const override { return total_length_; }
  TweetId MaxTweetId() const override { return num_docs_ == 0 ? 0 : columns().tweet_id(0); }
  size_t NumTerms() const override { return dictionary_.size(); }
  size_t MemoryBytes() const override;

  uint32_t num_docs() const { return num_docs_; }
  uint32_t num_live_docs() const;
  const SealedStats& stats() const { return stats_; }

  // Calls fn for every term in sorted order (for merging); the view lives until fn returns.
  void ForEachTerm(const std::function<void(std::string_view term)>& fn) const;

 private:
  friend class SealedSegmentBuilder;
  explicit SealedSegment(uint32_t num_docs) : Segment(num_docs == 0 ? 1 : num_docs),
                                              num_docs_(num_docs) {}
  absl::Status Validate() const;

  const uint32_t num_docs_;
  uint64_t total_length_ = 0;
  TermDictionary dictionary_;  // offsets point into postings_
  std::string postings_;
  SealedStats stats_;
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

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_SEALED_SEGMENT_H_
