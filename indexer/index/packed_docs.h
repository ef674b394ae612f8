// PackedDocs: an immutable ascending list of DocIds in memory, compressed as a sealed posting
// list's DocIds are (docs/index-format.md): blocks of 128 gaps, each bit-packed at its widest
// gap's width, one skip entry per block. Read through a DocCursor, which decodes a block at a
// time and finds a block by its skip entries. It holds the rows two common words share
// (pair_champions.h): 1.7 bytes a DocId at 10M tweets, where 4 would be plain.
//
// Thread-safety: immutable once finished; a cursor is for one thread.
#ifndef TWEETSEARCH_INDEXER_INDEX_PACKED_DOCS_H_
#define TWEETSEARCH_INDEXER_INDEX_PACKED_DOCS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "indexer/index/segment.h"

namespace tweetsearch::index {

class PackedDocs {
 public:
  static constexpr uint32_t kBlockSize = 128;

 private:
  struct Block {
    DocId last = 0;       // the block's last DocId
    uint32_t offset = 0;  // of its packed gaps in data_
    uint8_t bits = 0;     // the gaps' width
  };

 public:
  // Packs DocIds handed in ascending order, a block at a time: what it holds while writing is
  // the packed blocks and one block of DocIds.
  class Writer {
   public:
    // Requires: d above every DocId added before.
    void Add(DocId d);
    PackedDocs Finish() &&;

   private:
    void Flush();

    std::vector<Block> blocks_;
    std::string data_;
    uint32_t size_ = 0;
    std::vector<uint32_t> pending_;  // the open block's DocIds
  };

  // DocIds held.
  uint32_t size() const { return size_; }
  // Bytes of memory the list holds (its blocks and skip entries).
  size_t bytes() const { return data_.capacity() + blocks_.capacity() * sizeof(Block); }
  // A cursor over the DocIds below `end`.
  std::unique_ptr<DocCursor> Open(DocId end) const;

 private:
  class Cursor;

  std::vector<Block> blocks_;
  std::string data_;  // the packed gaps, then kUnpackPadding bytes
  uint32_t size_ = 0;
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_PACKED_DOCS_H_
