#include "indexer/index/packed_docs.h"

#include <algorithm>
#include <array>

#include "indexer/index/ascending.h"
#include "indexer/index/bitpack.h"

namespace tweetsearch::index {

void PackedDocs::Writer::Add(DocId d) {
  pending_.push_back(d);
  if (pending_.size() == kBlockSize) Flush();
}

// Gaps are stored minus one, from the DocId after the block before (the first block's from 0),
// as GapsToValues reads them.
void PackedDocs::Writer::Flush() {
  if (pending_.empty()) return;
  const DocId last = pending_.back();
  DocId next = blocks_.empty() ? 0 : blocks_.back().last + 1;
  for (uint32_t& d : pending_) {
    const DocId gap = d - next;
    next = d + 1;
    d = gap;
  }
  Block block;
  block.last = last;
  block.offset = static_cast<uint32_t>(data_.size());
  block.bits = BitsNeeded(pending_);
  PackBits(pending_, block.bits, &data_);
  blocks_.push_back(block);
  size_ += static_cast<uint32_t>(pending_.size());
  pending_.clear();
}

PackedDocs PackedDocs::Writer::Finish() && {
  Flush();
  PackedDocs docs;
  data_.append(kUnpackPadding, '\0');
  data_.shrink_to_fit();
  blocks_.shrink_to_fit();
  docs.blocks_ = std::move(blocks_);
  docs.data_ = std::move(data_);
  docs.size_ = size_;
  return docs;
}

class PackedDocs::Cursor : public DocCursor {
 public:
  Cursor(const PackedDocs& docs, DocId end) : docs_(docs), end_(end) {
    if (!docs_.blocks_.empty()) Decode(0);
    Settle();
  }

  DocId doc() const override { return doc_; }
  void Next() override {
    if (doc_ == kEndDoc) return;
    if (++i_ == n_) {
      if (block_ + 1 == docs_.blocks_.size()) {
        doc_ = kEndDoc;
        return;
      }
      Decode(block_ + 1);
    }
    Settle();
  }
  void Advance(DocId target) override {
    if (doc_ >= target) return;
    if (target > docs_.blocks_[block_].last) {
      // The first block from the next one whose last DocId reaches the target.
      const auto from = docs_.blocks_.begin() + block_ + 1;
      const auto it = std::partition_point(from, docs_.blocks_.end(),
                                           [&](const Block& b) { return b.last < target; });
      if (it == docs_.blocks_.end()) {
        doc_ = kEndDoc;
        return;
      }
      Decode(static_cast<uint32_t>(it - docs_.blocks_.begin()));
    }
    // The block's last DocId is at least the target: one of its DocIds is.
    while (values_[i_] < target) i_ += CountBelowOfEight(values_.data() + i_, target);
    Settle();
  }
  uint32_t size() const override { return docs_.size_; }
  size_t NextDocs(DocId end, DocId* out, size_t max) override {
    end = std::min(end, end_);
    size_t n = 0;
    while (n < max && doc_ < end) {
      const uint32_t take = static_cast<uint32_t>(std::min<size_t>(max - n, n_ - i_));
      uint32_t j = i_;
      while (j < i_ + take && values_[j] < end) out[n++] = values_[j++];
      i_ = j;
      if (i_ < n_) {
        Settle();
      } else if (block_ + 1 < docs_.blocks_.size()) {
        Decode(block_ + 1);
        Settle();
      } else {
        doc_ = kEndDoc;
      }
    }
    return n;
  }

 private:
  void Decode(uint32_t b) {
    const Block& block = docs_.blocks_[b];
    const DocId start = b == 0 ? 0 : docs_.blocks_[b - 1].last + 1;
    n_ = std::min(kBlockSize, docs_.size_ - b * kBlockSize);
    UnpackBitsFast(reinterpret_cast<const uint8_t*>(docs_.data_.data()) + block.offset, n_,
                   block.bits, values_.data());
    GapsToValues(values_.data(), n_, start);
    std::fill(values_.begin() + n_, values_.end(), kEndDoc);  // CountBelowOfEight reads eight
    block_ = b;
    i_ = 0;
  }
  // doc_ from the place at hand; DocIds from end_ on are not the cursor's.
  void Settle() { doc_ = i_ < n_ && values_[i_] < end_ ? values_[i_] : kEndDoc; }

  const PackedDocs& docs_;
  const DocId end_;
  std::array<DocId, kBlockSize + 8> values_{};
  uint32_t block_ = 0, i_ = 0, n_ = 0;
  DocId doc_ = kEndDoc;
};

std::unique_ptr<DocCursor> PackedDocs::Open(DocId end) const {
  return std::make_unique<Cursor>(*this, end);
}

}  // namespace tweetsearch::index
