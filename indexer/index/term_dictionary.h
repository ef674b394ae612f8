// TermDictionary: the sorted terms of a sealed segment, each with its document frequency and
// the offset of its posting list, front-coded in blocks of kTermsPerBlock.
//
// In a block the first term is stored whole and every other one as the length of the prefix
// it shares with the previous term plus the rest; offsets are stored as differences. Numbers
// are LEB128 varints. A lookup bisects the blocks by their first terms, then scans one block.
// The bisection runs over an in-memory array of the first terms' leading bytes (8 bytes a
// block, half a byte a term) and reads the blob only where those tie: a segment of 65,536
// tweets has about 5,000 blocks, and bisecting the blob itself missed the cache at every step.
// Tweets' vocabularies are full of shared prefixes ("#tag1", "#tag12", "from:user..."), so this
// takes well under half the space of whole strings with fixed-size offsets.
//
// A dictionary is a view of bytes it does not own (a mapped segment file), except one made by
// the Builder, which owns its bytes.
//
// Thread-safety: immutable after construction; any number of readers.
#ifndef TWEETSEARCH_INDEXER_INDEX_TERM_DICTIONARY_H_
#define TWEETSEARCH_INDEXER_INDEX_TERM_DICTIONARY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tweetsearch::index {

inline constexpr uint32_t kTermsPerBlock = 16;

class TermDictionary {
 public:
  struct Entry {
    uint32_t doc_freq = 0;
    uint32_t offset = 0;  // of the term's posting list
  };

  // Adds terms in strictly increasing order, with non-decreasing offsets.
  class Builder {
   public:
    void Add(std::string_view term, Entry entry);
    TermDictionary Finish();

   private:
    std::string blob_;
    std::vector<uint32_t> block_offsets_;
    std::string previous_;
    uint32_t previous_offset_ = 0;
    uint32_t count_ = 0;
  };

  TermDictionary() = default;

  // A view of parts read from a file, after checking them: every block decodes inside the
  // blob, terms strictly increase, offsets never decrease, and there are `num_terms` of them.
  // DataLoss otherwise. The parts must outlive the dictionary.
  static absl::StatusOr<TermDictionary> FromParts(std::string_view blob,
                                                  std::span<const uint32_t> block_offsets,
                                                  uint32_t num_terms);
  // As FromParts, checking only what costs nothing per term (the block count and the first
  // block's offset), for parts whose checksum was verified. Lookups never read outside the
  // parts either way: a block that does not decode ends the walk.
  static absl::StatusOr<TermDictionary> ViewParts(std::string_view blob,
                                                  std::span<const uint32_t> block_offsets,
                                                  uint32_t num_terms);

  std::optional<Entry> Find(std::string_view term) const;
  // A term's entry and the offset of the next term's list (where this list ends), or
  // `end_of_last` for the last term.
  struct Located {
    Entry entry;
    uint32_t end = 0;
  };
  std::optional<Located> Locate(std::string_view term, uint32_t end_of_last) const;
  // Find(term) in each of `dictionaries`, into out[i] (out as long as dictionaries). The
  // lookups run in lockstep, each step asking for every dictionary's next probe before
  // reading any: over many segments a lookup then waits for the memory about once per step
  // rather than once per step and segment.
  static void LocateInEach(std::span<const TermDictionary* const> dictionaries,
                           std::string_view term, std::span<std::optional<Entry>> out);
  // Calls fn for every term in order; the view lives until fn returns.
  void ForEach(const std::function<void(std::string_view term, Entry entry)>& fn) const;

  // Walks the terms in order one block at a time (a merge walks several dictionaries side by
  // side without copying their terms). The dictionary must outlive it.
  class Iterator {
   public:
    explicit Iterator(const TermDictionary& dictionary);
    bool Valid() const { return at_ < terms_.size(); }
    // Valid until Next().
    std::string_view term() const { return terms_[at_].first; }
    Entry entry() const { return terms_[at_].second; }
    void Next();

   private:
    void LoadBlocks();  // from block_, until a block yields terms or none is left
    const TermDictionary* dictionary_;
    size_t block_ = 0;
    std::vector<std::pair<std::string, Entry>> terms_;  // of the current block
    size_t at_ = 0;
  };

  uint32_t size() const { return num_terms_; }
  // The bytes of its file sections (blob and block offsets).
  size_t bytes() const { return blob_.size() + block_offsets_.size() * sizeof(uint32_t); }
  // The bytes of the lookup array built in memory beside them.
  size_t memory_bytes() const {
    return block_keys_ == nullptr ? 0 : block_keys_->size() * sizeof(uint64_t);
  }
  std::string_view blob() const { return blob_; }
  std::span<const uint32_t> block_offsets() const { return block_offsets_; }

 private:
  struct Owned {
    std::string blob;
    std::vector<uint32_t> block_offsets;
  };
  // The block holding `target` if any; its first term is <= target.
  size_t BlockOf(std::string_view target) const;
  // BlockOf, given `lo`: the first block whose key is not below `key` (PrefixKey(target)).
  size_t BlockFrom(size_t lo, uint64_t key, std::string_view target) const;
  // Locate within block b.
  std::optional<Located> LocateIn(size_t b, std::string_view target, uint32_t end_of_last) const;
  // The list offset of the i-th term of block b, whose entry starts at blob byte `pos` (the
  // term before it has its list at `offset`); for i past the block, the next block's first
  // term's. Nullopt past the last term, or where the bytes do not decode.
  std::optional<uint32_t> NextOffset(size_t b, uint32_t i, size_t pos, uint32_t offset) const;
  // Block b's first term (empty if the block does not decode).
  std::string_view FirstTerm(size_t b) const;
  // Fills block_keys_ from the blob.
  void BuildKeys();
  uint32_t BlockCount(size_t b) const;
  size_t BlockEnd(size_t b) const;

  std::string_view blob_;
  std::span<const uint32_t> block_offsets_;
  uint32_t num_terms_ = 0;
  std::shared_ptr<const Owned> owned_;  // what blob_ and block_offsets_ view, if owned
  // Per block, PrefixKey (term_dictionary.cc) of its first term: ordered as those terms are,
  // ties aside.
  std::shared_ptr<const std::vector<uint64_t>> block_keys_;
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_TERM_DICTIONARY_H_
