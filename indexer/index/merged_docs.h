// MergedDocs: the union of a few posting lists' DocIds, ascending and each once, read in
// batches. An OR of words that leads a sparse AND (the counter's batches, the searcher's
// sparse-AND walk) is read so: its words' DocIds merged, then looked up in the other lists.
//
// Thread-safety: one per thread; the cursors must outlive it.
#ifndef TWEETSEARCH_INDEXER_INDEX_MERGED_DOCS_H_
#define TWEETSEARCH_INDEXER_INDEX_MERGED_DOCS_H_

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "indexer/index/segment.h"

namespace tweetsearch::index {

class MergedDocs {
 public:
  // The union of the cursors' postings from where each stands, below `end`. Each cursor is
  // read ahead, NextDocs at a time, and must not be moved by anyone else meanwhile.
  MergedDocs(std::span<PostingCursor* const> cursors, DocId end);
  // Copies up to `max` of the next DocIds into `out` and returns how many; 0 once none are
  // left.
  size_t Next(DocId* out, size_t max);

 private:
  static constexpr size_t kBuffer = 128;
  struct List {
    PostingCursor* cursor;
    std::array<DocId, kBuffer> docs;
    size_t at = 0, size = 0;
  };

  // Drops the lists with nothing left; the others have a DocId at hand.
  void Refill();
  // Two lists, a step without a branch per DocId: the smaller DocId (both move on a tie).
  size_t MergeTwo(DocId* out, size_t max);

  DocId end_;
  std::vector<List> lists_;
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_MERGED_DOCS_H_
