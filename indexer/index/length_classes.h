// LengthClasses: a sealed segment's rows in eight classes by their length (text tokens), kept
// as three bit planes, so that the rows of 64 DocIds no longer than a class are one mask.
//
// Best match passes over most matches of common words on a bound made of their text at
// frequency 1, which falls with the tweet's length, and the popularity and recency bounds:
// only short tweets can reach the k-th score (docs/ranking.md, "Three common words"). Reading
// each match's length from the columns costs a cache miss a match; these planes are read 64
// rows at a time instead, in DocId order, and leave out the longer rows together.
//
// Built in memory after the segment is written or loaded, with the pair champions.
//
// Thread-safety: immutable once built.
#ifndef TWEETSEARCH_INDEXER_INDEX_LENGTH_CLASSES_H_
#define TWEETSEARCH_INDEXER_INDEX_LENGTH_CLASSES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "indexer/index/segment.h"

namespace tweetsearch::index {

class LengthClasses {
 public:
  static constexpr int kClasses = 8;
  // The least length of each class: class c holds lengths kLeast[c] to kLeast[c + 1] - 1 (the
  // last any longer). Finest where three common words' bound usually falls (8 to 12 tokens).
  static constexpr std::array<uint32_t, kClasses> kLeast = {0, 6, 8, 9, 10, 11, 13, 16};

  // The classes of `columns`' first `rows` rows.
  LengthClasses(const Columns& columns, DocId rows);

  static int ClassOf(uint32_t length);
  // Of the 64 rows from DocId 64 * w, those whose class is at most c (length below
  // kLeast[c + 1]), as bit i for row 64 * w + i; none past the segment's rows.
  uint64_t AtMost(size_t w, int c) const;
  DocId rows() const { return rows_; }
  size_t MemoryBytes() const { return planes_.capacity() * sizeof(uint64_t); }

 private:
  DocId rows_;
  std::vector<uint64_t> planes_;  // per 64 rows, three words: bit 0, 1 and 2 of each class
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_LENGTH_CLASSES_H_
