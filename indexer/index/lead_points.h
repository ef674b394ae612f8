// LeadPoints: for each of a sealed segment's middling words, one byte per posting, in list
// order: the likes band its tweet was written with and a lower bound of the tweet's length.
//
// A best-match AND of such a word with common ones ranks nearly every match of the word out
// on a bound made of the word's text, the others' text at frequency 1, the tweet's likes band
// and the recency bound (docs/ranking.md, "Sparse ANDs over champions and repeats"). Reading
// the length and likes columns for that bound costs a cache miss or two per posting; these
// bytes are read in the list's order instead.
//
// Built in memory after the segment is written or loaded, with the pair champions.
//
// Thread-safety: immutable once built.
#ifndef TWEETSEARCH_INDEXER_INDEX_LEAD_POINTS_H_
#define TWEETSEARCH_INDEXER_INDEX_LEAD_POINTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "indexer/index/segment.h"

namespace tweetsearch::index {

// A word gets points if its list holds at least one posting per kLeadPointsShare rows and at
// least kLeadPointsMinPostings postings, and it is not a pair word (pair_champions.h).
inline constexpr uint32_t kLeadPointsShare = 1024;
inline constexpr uint32_t kLeadPointsMinPostings = 1024;

// The point of a posting: the likes band (LikesBand) in the high four bits, the length's
// bucket in the low four. Buckets 0-7 are lengths 0-7; then 8, 10, 12, 14, 16, 20, 24 and 32
// or more, each the least length of its bucket.
uint8_t PackLeadPoint(uint32_t length, uint32_t likes);
inline int LeadPointBand(uint8_t point) { return point >> 4; }
uint32_t LeadPointLength(uint8_t point);  // a lower bound of the tweet's length

class LeadPoints {
 public:
  explicit LeadPoints(absl::flat_hash_map<std::string, std::vector<uint8_t>> by_word);

  // The points of `word`'s postings, in the list's order; empty if the word has none.
  std::span<const uint8_t> Of(std::string_view word) const;
  size_t words() const { return by_word_.size(); }
  size_t MemoryBytes() const { return bytes_; }

 private:
  absl::flat_hash_map<std::string, std::vector<uint8_t>> by_word_;
  size_t bytes_ = 0;
};

// Of the words with these document frequencies in a segment of `rows` rows, those that get
// points (by the rule above), given the pair words, which do not.
std::vector<std::string> LeadWords(DocId rows,
                                   std::span<const std::pair<uint32_t, std::string>> doc_freqs,
                                   std::span<const std::string> pair_words);

// The points of `words` over `segment`'s first `rows` rows; null if no word is given, or if
// `cancel` (may be null) turned true meanwhile.
std::unique_ptr<LeadPoints> BuildLeadPoints(const Segment& segment, DocId rows,
                                            std::span<const std::string> words,
                                            const std::atomic<bool>* cancel = nullptr);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_LEAD_POINTS_H_
