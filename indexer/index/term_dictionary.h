// TermDictionary: the sorted terms of a sealed segment, each with its document frequency and
// the offset of its posting list, front-coded in blocks of kTermsPerBlock.
//
// In a block the first term is stored whole and every other one as the length of the prefix
// it shares with the previous term plus the rest; offsets are stored as differences. Numbers
// are LEB128 varints. A lookup bisects the blocks by their first terms, then scans one block.
// Tweets' vocabularies are full of shared prefixes ("#tag1", "#tag12", "from:user..."), so this
// takes well under half the space of whole strings with fixed-size offsets.
//
// Thread-safety: immutable after construction; any number of readers.
#ifndef TWEETSEARCH_INDEXER_INDEX_TERM_DICTIONARY_H_
#define TWEETSEARCH_INDEXER_INDEX_TERM_DICTIONARY_H_

#include <cstdint>
#include <functional>
#include <optional>
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

  // Checks parts read from a file: every block decodes inside the blob, terms strictly
  // increase, offsets never decrease, and there are `num_terms` of them. DataLoss otherwise.
  static absl::StatusOr<TermDictionary> FromParts(std::string blob,
                                                  std::vector<uint32_t> block_offsets,
                                                  uint32_t num_terms);

  std::optional<Entry> Find(std::string_view term) const;
  // Calls fn for every term in order; the view lives until fn returns.
  void ForEach(const std::function<void(std::string_view term, Entry entry)>& fn) const;

  uint32_t size() const { return num_terms_; }
  size_t bytes() const { return blob_.size() + block_offsets_.size() * sizeof(uint32_t); }
  const std::string& blob() const { return blob_; }
  const std::vector<uint32_t>& block_offsets() const { return block_offsets_; }

 private:
  std::string blob_;
  std::vector<uint32_t> block_offsets_;
  uint32_t num_terms_ = 0;
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_TERM_DICTIONARY_H_
