// PairChampions: for every pair of a sealed segment's densest words, the matches of both words
// that can score highest in best match, and a bound of every other match of both
// (docs/ranking.md, "Champions of pairs of common words").
//
// An AND or an OR of two common words has hundreds of thousands of matches per ten million
// tweets, and its top k is a front of short, repeating and liked tweets holding both words.
// Bounds per block, per window or per word cannot prune them: each pairs the best posting of
// one word with the best of the other, mostly in different tweets. A pair's matches are
// described here together: its champions (the matches that rank first when the two words'
// text is weighed at a few multiples against popularity) and the skyline of the others, the
// (frequency of each word, length, likes) points that no other remaining match matches or beats
// in all four. Any score that grows with the frequencies and likes and falls with length is
// largest, over the remaining matches, at one of those points, whatever the query's idfs,
// average length and weights: the bound is exact to compute at query time, and the choice of
// champions only decides how often it suffices.
//
// Built in memory from the segment's lists (the densest words' lists are read once, a window
// of DocIds at a time), after the segment is written or loaded.
//
// Thread-safety: immutable once built.
#ifndef TWEETSEARCH_INDEXER_INDEX_PAIR_CHAMPIONS_H_
#define TWEETSEARCH_INDEXER_INDEX_PAIR_CHAMPIONS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "indexer/index/packed_docs.h"
#include "indexer/index/segment.h"

namespace tweetsearch::index {

// A word joins the pairs if its list holds at least one posting per kPairWordShare rows and at
// least kPairWordMinPostings postings (rarer words are intersected at query time instead:
// docs/ranking.md, "Sparse ANDs"); at most kMaxPairWords of them, the densest.
inline constexpr uint32_t kPairWordShare = 64;
inline constexpr uint32_t kPairWordMinPostings = 2048;
inline constexpr size_t kMaxPairWords = 128;
// Each of the selection's weightings keeps this many matches; champions are their union.
inline constexpr uint32_t kPairChampionsPerWeight = 64;
// A pair keeps every row holding both words (PairChampionList::rows) when those are at most one
// in this many of the rarer word's postings: an AND holding both then reads them rather than
// intersecting the two lists (docs/ranking.md, "Rows of pairs").
inline constexpr uint64_t kPairRowsShare = 16;

// A (frequency of the first word, frequency of the second, length, likes) point.
struct PairPoint {
  uint32_t likes = 0;  // as the segment file has them (Columns::BaseLikes)
  uint16_t tf_first = 0;
  uint16_t tf_second = 0;
  uint16_t length = 0;  // a lower bound
};

// What bounds the score of a pair word's posting in a tweet that holds the word at least
// twice, without reading a column: the frequency, the tweet's length and its likes band.
struct RepeatPoint {
  uint8_t tf = 0;      // 255: 255 or more
  uint8_t length = 0;  // 255: 255 or more (a lower bound)
  uint8_t band = 0;    // LikesBand of the likes the tweet was written with
};
// A pair word's postings of frequency 2 or more, with their points. Kept as a sorted list of
// DocIds, or as a bitmap with counts per 512 DocIds where that is smaller (more than one
// posting in about 30 rows: the commonest words'). Find answers in O(1) over the bitmap, and
// over the list by stepping from the place the last call reached.
struct Repeats {
  std::vector<DocId> docs;            // ascending; empty when bits holds them
  std::vector<uint64_t> bits;         // bit d % 64 of bits[d / 64] for each DocId d
  std::vector<uint32_t> block_ranks;  // with bits: the postings before each 512 DocIds
  std::vector<RepeatPoint> points;    // of each posting, ascending by DocId

  // The point of DocId d, or null. *at: the place in docs the last call reached (start at
  // 0), d not below the last one asked.
  const RepeatPoint* Find(DocId d, size_t* at) const;
  size_t size() const { return points.size(); }
  // Turns docs into bits and block_ranks over `rows` DocIds, if that is smaller.
  void Compact(DocId rows);
};

// Reads a few words' repeats a window of DocIds at a time, windows in ascending order: of a
// window's rows given in a mask, those that repeat any of the words, and each one's points. A
// walk over every match of common words (docs/ranking.md, "Three common words") would
// otherwise find each word's point row by row (Repeats::Find: a bit, a rank, a popcount of up
// to seven words); here each list is read once, in order, and a row that repeats no word costs
// nothing.
class RepeatsWindow {
 public:
  static constexpr size_t kMaxWords = 4;
  // `repeats` (at most kMaxWords, none null) are read over windows of `window` DocIds, a
  // multiple of 512, each starting at a multiple of `window`.
  RepeatsWindow(std::span<const Repeats* const> repeats, DocId window);

  // Loads the rows of [from, from + window) whose bit is set in `rows` (bit i % 64 of
  // rows[i / 64] for DocId from + i) and that repeat at least one of the words. `from` is
  // above the last window loaded.
  void Load(DocId from, std::span<const uint64_t> rows);
  // Bit i % 64 of repeated(i / 64): row i of the window was loaded (it repeats a word).
  uint64_t repeated(size_t word) const { return repeated_[word]; }
  // Of a loaded row i: word t's frequency (1 if the row does not repeat it; 255: 255 or more),
  // and the row's point (length, a lower bound; likes band).
  uint8_t tf(size_t t, size_t i) const {
    return (by_word_[t * words_ + i / 64] >> (i % 64) & 1) != 0 ? tfs_[t * window_ + i] : 1;
  }
  uint8_t length(size_t i) const { return lengths_[i]; }
  uint8_t band(size_t i) const { return bands_[i]; }

 private:
  void LoadBits(size_t t, DocId from, std::span<const uint64_t> rows);
  void LoadDocs(size_t t, DocId from, std::span<const uint64_t> rows);
  void SetPoint(size_t t, size_t i, const RepeatPoint& p);

  std::vector<const Repeats*> repeats_;
  DocId window_;
  size_t words_;                    // window_ / 64
  std::vector<size_t> at_;          // per word: its next doc in a list of docs
  std::vector<uint64_t> repeated_;  // the window's loaded rows
  std::vector<uint64_t> by_word_;   // word t's: at [t * words_ + w]
  std::vector<uint8_t> tfs_;        // word t's frequency in row i at [t * window_ + i]
  std::vector<uint8_t> lengths_, bands_;
};

struct PairChampionList {
  std::vector<DocId> docs;      // ascending
  std::vector<PairPoint> rest;  // the skyline of every other match; empty if none is left
  uint64_t matches = 0;         // rows holding both words (deleted ones too)
  // Where `matches` is at most the rarer word's postings / kPairRowsShare (and not 0): those
  // rows, deleted ones too.
  std::optional<PackedDocs> rows;
};

class PairChampions {
 public:
  // `words`, densest first; `lists[i * words.size() + j]` for i < j the pair (words[i],
  // words[j]), whose "first" word is words[i].
  // `repeats[i]`: words[i]'s.
  PairChampions(std::vector<std::string> words, std::vector<PairChampionList> lists,
                std::vector<Repeats> repeats);

  // The pair's record, or null if either word is not among the pairs' words (or a == b).
  // *swapped tells whether `b` is the record's first word.
  const PairChampionList* Find(std::string_view a, std::string_view b, bool* swapped) const;
  // The postings of `word` whose frequency is 2 or more, ascending; null if `word` is not among
  // the pairs' words. A match of an AND with a rarer word whose tweet holds this word once
  // scores its text at frequency 1, a function of the length alone: the rarer word's champions
  // and these bound such an AND (docs/ranking.md, "Sparse ANDs over champions and repeats").
  const Repeats* RepeatsOf(std::string_view word) const;
  size_t words() const { return words_; }
  size_t MemoryBytes() const { return bytes_; }

 private:
  absl::flat_hash_map<std::string, uint32_t> rank_;  // word -> its place, densest first
  size_t words_;
  std::vector<PairChampionList> lists_;
  std::vector<Repeats> repeats_;  // by rank
  size_t bytes_ = 0;
};

// Of the words with these document frequencies in a segment of `rows` rows, those that join
// pairs (by the rule above), densest first.
std::vector<std::string> PairWords(DocId rows,
                                   std::vector<std::pair<uint32_t, std::string>> doc_freqs);

// The pair champions of `words` (densest first) over `segment`'s first `rows` rows; null if
// fewer than two words are given, or if `cancel` (may be null) turned true meanwhile.
std::unique_ptr<PairChampions> BuildPairChampions(const Segment& segment, DocId rows,
                                                  std::span<const std::string> words,
                                                  const std::atomic<bool>* cancel = nullptr);

// The skyline of `points`: those no other point matches or beats in both frequencies, length
// (shorter) and likes at once, in no particular order.
std::vector<PairPoint> PairSkyline(std::vector<PairPoint> points);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_PAIR_CHAMPIONS_H_
