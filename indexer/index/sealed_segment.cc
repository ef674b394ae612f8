#include "indexer/index/sealed_segment.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <numeric>

#include "common/strings.h"
#include "common/file_util.h"
#include "indexer/index/bitpack.h"

namespace tweetsearch::index {
namespace {

// Skip table entry of a multi-block list. A list of one block has only the three bit widths
// as its header: its bounds are left unknown (a short list is cheap to read whole).
struct SkipEntry {
  uint32_t last_doc;
  uint32_t offset;  // of the block's data, from the start of the term's postings
  uint8_t doc_bits;   // PFor descriptor of the DocId gaps
  uint8_t freq_bits;  // PFor descriptor of the frequencies minus one
  uint8_t pos_bits;   // PFor descriptor of the positions
  uint8_t max_tf;  // kManyTf means "kManyTf or more"
  uint16_t min_length;
  uint16_t min_length_repeated;  // among postings with a term frequency above one
};
static_assert(sizeof(SkipEntry) == 16);
constexpr size_t kSingleHeaderBytes = 3;  // doc_bits, freq_bits, pos_bits
constexpr uint8_t kManyTf = 255;
// A doc_bits value meaning: the block's DocIds are a bitmap, one bit per DocId from the block's
// start (the previous block's last DocId + 1) to its last DocId. Chosen for blocks of more-than-
// one-block lists when smaller than the packed gaps; a dense term then answers "is DocId x in
// this block, or which is the next one" from the bits alone, without decoding the block.
constexpr uint8_t kBitmapDocs = 0x40;

uint64_t LoadWord(const uint8_t* bits, uint32_t word) {
  uint64_t x;
  std::memcpy(&x, bits + 8 * static_cast<size_t>(word), sizeof(x));
  return x;
}

// The first set bit at or after `from` in a bitmap of `span` bits, or `span` if none. Reads
// whole 64-bit words, so up to 7 bytes past the bitmap must be readable (they are: the
// postings buffer is padded); bits at or past `span` are ignored.
uint32_t NextSetBit(const uint8_t* bits, uint32_t span, uint32_t from) {
  if (from >= span) return span;
  const uint32_t words = (span + 63) / 64;
  uint32_t w = from / 64;
  uint64_t word = LoadWord(bits, w) & (~uint64_t{0} << (from % 64));
  while (word == 0) {
    if (++w >= words) return span;
    word = LoadWord(bits, w);
  }
  const uint32_t bit = w * 64 + static_cast<uint32_t>(std::countr_zero(word));
  return std::min(bit, span);
}

// Set bits in [0, end) of a bitmap.
uint32_t Rank(const uint8_t* bits, uint32_t end) {
  uint32_t count = 0;
  uint32_t w = 0;
  for (; (w + 1) * 64 <= end; ++w) count += static_cast<uint32_t>(std::popcount(LoadWord(bits, w)));
  if (end % 64 != 0) {
    const uint64_t mask = (uint64_t{1} << (end % 64)) - 1;
    count += static_cast<uint32_t>(std::popcount(LoadWord(bits, w) & mask));
  }
  return count;
}

uint32_t NumBlocks(uint32_t doc_freq) { return (doc_freq + kBlockSize - 1) / kBlockSize; }

SkipEntry ReadSkip(const uint8_t* term_base, uint32_t doc_freq, uint32_t block) {
  SkipEntry e{};
  if (NumBlocks(doc_freq) == 1) {
    e.last_doc = kEndDoc;  // unknown until decoded
    e.offset = kSingleHeaderBytes;
    e.doc_bits = term_base[0];
    e.freq_bits = term_base[1];
    e.pos_bits = term_base[2];
  } else {
    std::memcpy(&e, term_base + block * sizeof(SkipEntry), sizeof(SkipEntry));
  }
  return e;
}

PostingBound BoundOf(const SkipEntry& e, bool single_block) {
  if (single_block) return PostingBound{};
  return PostingBound{e.max_tf == kManyTf ? std::numeric_limits<uint32_t>::max() : e.max_tf,
                      e.min_length, e.min_length_repeated};
}

class SealedCursor final : public PostingCursor {
 public:
  SealedCursor(const uint8_t* base, uint32_t doc_freq)
      : base_(base), doc_freq_(doc_freq), num_blocks_(NumBlocks(doc_freq)) {
    if (num_blocks_ > 0) DecodeBlock(0);
  }

  DocId doc() const override { return doc_; }
  void Next() override {
    if (bitmap_) {
      const uint32_t bit = NextSetBit(bits_, span_, doc_ - start_ + 1);
      if (bit < span_) {
        doc_ = start_ + bit;
        ++i_;  // right when the rank was known; recomputed otherwise
        return;
      }
    } else if (++i_ < block_n_) {
      doc_ = docs_[i_];
      return;
    }
    if (block_ + 1 < num_blocks_) {
      DecodeBlock(block_ + 1);
    } else {
      doc_ = kEndDoc;
    }
  }
  void Advance(DocId target) override {
    if (doc_ >= target) return;
    if (block_last_ < target) {
      const uint32_t b = FindBlock(target);
      if (b >= num_blocks_) {
        doc_ = kEndDoc;
        return;
      }
      DecodeBlock(b);
      if (doc_ >= target) return;
    }
    if (bitmap_) {
      // The block's last DocId is >= target, so a set bit is found.
      doc_ = start_ + NextSetBit(bits_, span_, target - start_);
      rank_known_ = false;
      return;
    }
    while (docs_[i_] < target) ++i_;  // stops: the block's last DocId is >= target
    doc_ = docs_[i_];
  }
  uint32_t freq() const override {
    EnsureRank();
    DecodeFreqs();
    return freqs_[i_];
  }
  std::span<const uint32_t> positions() override {
    EnsureRank();
    DecodeFreqs();
    if (!positions_decoded_) {
      pos_start_[0] = 0;
      for (uint32_t j = 0; j < block_n_; ++j) pos_start_[j + 1] = pos_start_[j] + freqs_[j];
      positions_.resize(pos_start_[block_n_]);
      UnpackPFor(pos_data_, positions_.size(), entry_.pos_bits, positions_.data());
      positions_decoded_ = true;
    }
    return std::span<const uint32_t>(positions_.data() + pos_start_[i_], freqs_[i_]);
  }
  uint32_t size() const override { return doc_freq_; }
  DocId block_last_doc() const override { return block_last_; }
  PostingBound block_bound() const override { return BoundOf(entry_, num_blocks_ == 1); }
  // Folded from every skip entry on first use: newest-first queries never ask, and a common
  // term has thousands of blocks.
  PostingBound list_bound() const override {
    if (!list_bound_known_) {
      for (uint32_t b = 0; b < num_blocks_; ++b) {
        const PostingBound bb = BoundOf(ReadSkip(base_, doc_freq_, b), num_blocks_ == 1);
        list_bound_.max_tf = b == 0 ? bb.max_tf : std::max(list_bound_.max_tf, bb.max_tf);
        list_bound_.min_length =
            b == 0 ? bb.min_length : std::min(list_bound_.min_length, bb.min_length);
        list_bound_.min_length_repeated =
            b == 0 ? bb.min_length_repeated
                   : std::min(list_bound_.min_length_repeated, bb.min_length_repeated);
      }
      list_bound_known_ = true;
    }
    return list_bound_;
  }

 private:
  void DecodeBlock(uint32_t b) {
    // Gaps are stored minus one; the first gap of the list counts from DocId -1.
    const uint32_t start = b == 0 ? 0 : ReadSkip(base_, doc_freq_, b - 1).last_doc + 1;
    entry_ = ReadSkip(base_, doc_freq_, b);
    block_ = b;
    block_n_ = std::min(kBlockSize, doc_freq_ - b * kBlockSize);
    const uint8_t* p = base_ + entry_.offset;
    i_ = 0;
    rank_known_ = true;
    bitmap_ = entry_.doc_bits == kBitmapDocs;
    if (bitmap_) {
      bits_ = p;
      start_ = start;
      span_ = entry_.last_doc - start + 1;
      p += (span_ + 7) / 8;
      doc_ = start_ + NextSetBit(bits_, span_, 0);
      block_last_ = entry_.last_doc;
    } else {
      p += UnpackPFor(p, block_n_, entry_.doc_bits, docs_);
      GapsToValues(docs_, block_n_, start);
      doc_ = docs_[0];
      block_last_ = docs_[block_n_ - 1];
    }
    freq_data_ = p;
    pos_data_ = p + PForBytes(p, block_n_, entry_.freq_bits);
    freqs_decoded_ = false;
    positions_decoded_ = false;
  }

  // In a bitmap block, the index of doc_ among the block's postings (for frequencies and
  // positions) is counted only when asked for.
  void EnsureRank() const {
    if (rank_known_) return;
    i_ = Rank(bits_, doc_ - start_);
    rank_known_ = true;
  }

  // Frequencies are decoded only for blocks where a caller asks for them: a conjunction
  // skips through most blocks looking at DocIds alone.
  void DecodeFreqs() const {
    if (freqs_decoded_) return;
    UnpackPFor(freq_data_, block_n_, entry_.freq_bits, freqs_);
    for (uint32_t j = 0; j < block_n_; ++j) ++freqs_[j];
    freqs_decoded_ = true;
  }

  // The first block after the current one whose last DocId is >= target (num_blocks_ if
  // none): gallops forward, then bisects, so long jumps cost O(log blocks).
  uint32_t FindBlock(DocId target) const {
    uint32_t lo = block_ + 1, step = 1;
    uint32_t hi = lo;
    while (hi < num_blocks_ && ReadSkip(base_, doc_freq_, hi).last_doc < target) {
      lo = hi + 1;
      hi += step;
      step *= 2;
    }
    hi = std::min(hi, num_blocks_);
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (ReadSkip(base_, doc_freq_, mid).last_doc < target) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  const uint8_t* const base_;
  const uint32_t doc_freq_;
  const uint32_t num_blocks_;
  mutable PostingBound list_bound_;
  mutable bool list_bound_known_ = false;
  SkipEntry entry_{};       // header of the decoded block
  uint32_t block_ = 0;      // number of the decoded block
  uint32_t block_n_ = 0;    // postings in it
  mutable uint32_t i_ = 0;  // index of doc_ in it (see EnsureRank)
  mutable bool rank_known_ = true;
  DocId doc_ = kEndDoc;
  DocId block_last_ = kEndDoc;
  // Bitmap blocks: the bits, the DocId of bit 0, and the number of bits.
  bool bitmap_ = false;
  const uint8_t* bits_ = nullptr;
  uint32_t start_ = 0;
  uint32_t span_ = 0;
  uint32_t docs_[kBlockSize];
  mutable uint32_t freqs_[kBlockSize];
  mutable bool freqs_decoded_ = false;
  const uint8_t* freq_data_ = nullptr;
  const uint8_t* pos_data_ = nullptr;
  bool positions_decoded_ = false;
  uint32_t pos_start_[kBlockSize + 1];
  std::vector<uint32_t> positions_;
};

// Appends the encoded list of `entries` (DocId ascending) to `*out`.
struct Entry {
  DocId doc;
  const uint32_t* positions;
  uint32_t freq;
};

// Buffers EncodeList reuses from list to list.
struct EncodeScratch {
  std::vector<uint32_t> gaps, freqs, positions;
  std::string block;
};

void EncodeList(const std::vector<Entry>& entries, const Columns& columns, std::string* out,
                SealedStats* stats, EncodeScratch& scratch) {
  const size_t start = out->size();
  const uint32_t n = static_cast<uint32_t>(entries.size());
  const uint32_t blocks = NumBlocks(n);
  if (blocks > 1) out->resize(start + blocks * sizeof(SkipEntry));
  std::vector<uint32_t>& gaps = scratch.gaps;
  std::vector<uint32_t>& freqs = scratch.freqs;
  std::vector<uint32_t>& positions = scratch.positions;
  uint32_t next = 0;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t block_start = next;
    const uint32_t first = b * kBlockSize;
    const uint32_t count = std::min(kBlockSize, n - first);
    gaps.clear();
    freqs.clear();
    positions.clear();
    uint32_t max_tf = 0;
    uint32_t min_length = UINT16_MAX;
    uint32_t min_length_repeated = UINT16_MAX;
    for (uint32_t j = first; j < first + count; ++j) {
      const Entry& e = entries[j];
      gaps.push_back(e.doc - next);
      next = e.doc + 1;
      freqs.push_back(e.freq - 1);
      positions.insert(positions.end(), e.positions, e.positions + e.freq);
      max_tf = std::max(max_tf, e.freq);
      min_length = std::min<uint32_t>(min_length, columns.length(e.doc));
      if (e.freq > 1) {
        min_length_repeated = std::min<uint32_t>(min_length_repeated, columns.length(e.doc));
      }
    }
    SkipEntry entry{};
    entry.last_doc = entries[first + count - 1].doc;
    entry.offset = static_cast<uint32_t>(out->size() - start);
    entry.max_tf = static_cast<uint8_t>(std::min<uint32_t>(max_tf, kManyTf));
    entry.min_length = static_cast<uint16_t>(min_length);
    entry.min_length_repeated = static_cast<uint16_t>(min_length_repeated);
    // The descriptors are known only after encoding: write the block, then its header.
    std::string& block = scratch.block;
    block.clear();
    entry.doc_bits = PackPFor(gaps, &block);
    const uint32_t span = entry.last_doc - block_start + 1;
    if (blocks > 1 && (span + 7) / 8 < block.size()) {
      block.assign((span + 7) / 8, '\0');
      for (uint32_t j = first; j < first + count; ++j) {
        const uint32_t bit = entries[j].doc - block_start;
        block[bit / 8] = static_cast<char>(block[bit / 8] | (1 << (bit % 8)));
      }
      entry.doc_bits = kBitmapDocs;
      ++stats->bitmap_blocks;
    }
    const size_t doc_bytes = block.size();
    entry.freq_bits = PackPFor(freqs, &block);
    const size_t freq_bytes = block.size() - doc_bytes;
    entry.pos_bits = PackPFor(positions, &block);
    if (blocks == 1) {
      const char header[kSingleHeaderBytes] = {static_cast<char>(entry.doc_bits),
                                               static_cast<char>(entry.freq_bits),
                                               static_cast<char>(entry.pos_bits)};
      out->append(header, kSingleHeaderBytes);
      entry.offset = kSingleHeaderBytes;
    } else {
      std::memcpy(out->data() + start + b * sizeof(SkipEntry), &entry, sizeof(SkipEntry));
    }
    out->append(block);
    stats->doc_bytes += doc_bytes;
    stats->freq_bytes += freq_bytes;
    stats->position_bytes += block.size() - doc_bytes - freq_bytes;
    stats->skip_bytes += blocks == 1 ? kSingleHeaderBytes : sizeof(SkipEntry);
    stats->positions += positions.size();
  }
  stats->postings += n;
}

// Checks that a list decodes inside [base, end) into valid DocIds. Returns a message or "".
std::string CheckList(const uint8_t* base, const uint8_t* end, uint32_t doc_freq,
                      uint32_t num_docs) {
  const uint32_t blocks = NumBlocks(doc_freq);
  if (doc_freq == 0) return "empty posting list";
  const size_t header = blocks == 1 ? kSingleHeaderBytes : blocks * sizeof(SkipEntry);
  if (static_cast<size_t>(end - base) < header) return "posting list header out of bounds";
  uint32_t docs[kBlockSize], freqs[kBlockSize];
  std::vector<uint32_t> positions;
  int64_t previous = -1;
  for (uint32_t b = 0; b < blocks; ++b) {
    const SkipEntry e = ReadSkip(base, doc_freq, b);
    const uint32_t n = std::min(kBlockSize, doc_freq - b * kBlockSize);
    if (e.offset < header || e.offset > static_cast<size_t>(end - base)) {
      return "block offset out of bounds";
    }
    const uint8_t* p = base + e.offset;
    size_t used = 0;
    if (e.doc_bits == kBitmapDocs) {
      if (blocks == 1 || static_cast<int64_t>(e.last_doc) <= previous) return "bad bitmap block";
      const uint32_t span = static_cast<uint32_t>(e.last_doc - previous);
      const size_t bytes = (static_cast<size_t>(span) + 7) / 8;
      if (bytes > static_cast<size_t>(end - p)) return "bitmap out of bounds";
      uint32_t set = 0;
      for (uint32_t bit = 0; bit < span; ++bit) set += (p[bit / 8] >> (bit % 8)) & 1;
      if (set != n || ((p[(span - 1) / 8] >> ((span - 1) % 8)) & 1) == 0 ||
          (span % 8 != 0 && (p[bytes - 1] >> (span % 8)) != 0)) {
        return "bitmap disagrees with its block";
      }
      previous = e.last_doc;
      if (previous >= num_docs) return "DocId out of range";
      p += bytes;
      if (!UnpackPForChecked(p, end, n, e.freq_bits, freqs, &used)) return "bad frequency block";
      p += used;
      uint64_t total_positions = 0;
      for (uint32_t j = 0; j < n; ++j) {
        if (freqs[j] >= UINT16_MAX) return "term frequency out of range";
        total_positions += uint64_t{freqs[j]} + 1;
      }
      positions.resize(total_positions);
      if (!UnpackPForChecked(p, end, total_positions, e.pos_bits, positions.data(), &used)) {
        return "bad positions block";
      }
      continue;
    }
    if (!UnpackPForChecked(p, end, n, e.doc_bits, docs, &used)) return "bad DocId block";
    p += used;
    if (!UnpackPForChecked(p, end, n, e.freq_bits, freqs, &used)) return "bad frequency block";
    p += used;
    uint64_t total_positions = 0;
    for (uint32_t j = 0; j < n; ++j) {
      previous += static_cast<int64_t>(docs[j]) + 1;
      if (freqs[j] >= UINT16_MAX) return "term frequency out of range";  // tweets < 2^16 tokens
      total_positions += uint64_t{freqs[j]} + 1;
      if (previous >= num_docs) return "DocId out of range";
    }
    if (blocks > 1 && e.last_doc != previous) return "skip entry disagrees with its block";
    positions.resize(total_positions);
    if (!UnpackPForChecked(p, end, total_positions, e.pos_bits, positions.data(), &used)) {
      return "bad positions block";
    }
  }
  return "";
}

// Segment file layout: "TSSEG001", u32 section count, then sections
// [u32 tag][u64 length][u64 xxh64][bytes], then u64 xxh64 of all preceding bytes and "TSSEGEND".
constexpr std::string_view kMagic = "TSSEG002";
constexpr std::string_view kEndMagic = "TSSEGEND";
enum SectionTag : uint32_t {
  kMeta = 1, kTweetIds, kCreatedAt, kUserIds, kLangs, kLengths, kLikes, kDeleted,
  kTermBlocks, kTerms, kPostings, kNumSections = kPostings
};

template <typename T>
void PutRaw(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void PutSection(std::string* out, uint32_t tag, std::string_view bytes) {
  PutRaw(out, tag);
  PutRaw(out, static_cast<uint64_t>(bytes.size()));
  PutRaw(out, static_cast<uint64_t>(XXH64(bytes.data(), bytes.size(), 0)));
  out->append(bytes);
}

template <typename T>
std::string_view AsBytes(const std::vector<T>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
bool FromBytes(std::string_view bytes, std::vector<T>* out) {
  if (bytes.size() % sizeof(T) != 0) return false;
  out->resize(bytes.size() / sizeof(T));
  std::memcpy(out->data(), bytes.data(), bytes.size());
  return true;
}

}  // namespace

std::unique_ptr<PostingCursor> SealedSegment::OpenTerm(std::string_view term, DocId) const {
  const std::optional<TermDictionary::Entry> entry = dictionary_.Find(term);
  if (!entry) return nullptr;
  return std::make_unique<SealedCursor>(
      reinterpret_cast<const uint8_t*>(postings_.data()) + entry->offset, entry->doc_freq);
}

uint32_t SealedSegment::DocFreq(std::string_view term) const {
  const std::optional<TermDictionary::Entry> entry = dictionary_.Find(term);
  return entry ? entry->doc_freq : 0;
}

std::optional<DocId> SealedSegment::Find(TweetId id) const {
  // The TweetId column is descending.
  uint32_t lo = 0, hi = num_docs_;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (columns().tweet_id(mid) > id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < num_docs_ && columns().tweet_id(lo) == id) return lo;
  return std::nullopt;
}

uint32_t SealedSegment::num_live_docs() const {
  uint32_t live = 0;
  for (DocId d = 0; d < num_docs_; ++d) live += !columns().deleted(d);
  return live;
}

void SealedSegment::ForEachTerm(const std::function<void(std::string_view)>& fn) const {
  dictionary_.ForEach([&](std::string_view term, TermDictionary::Entry) { fn(term); });
}

size_t SealedSegment::MemoryBytes() const {
  return stats_.posting_bytes + stats_.dictionary_bytes + stats_.column_bytes;
}

uint32_t SealedSegmentBuilder::AddDoc(const Row& row) {
  rows_.push_back(row);
  return static_cast<uint32_t>(rows_.size() - 1);
}

void SealedSegmentBuilder::AddPosting(std::string_view term, uint32_t doc,
                                      std::span<const uint32_t> positions) {
  if (last_records_ == nullptr || term != last_term_) {
    last_records_ = &postings_[AsAbsl(term)];
    last_term_.assign(term);
  }
  std::vector<uint32_t>& records = *last_records_;
  records.push_back(doc);
  records.push_back(static_cast<uint32_t>(positions.size()));
  records.insert(records.end(), positions.begin(), positions.end());
}

std::unique_ptr<SealedSegment> SealedSegmentBuilder::Build() {
  const uint32_t num_docs = static_cast<uint32_t>(rows_.size());
  // Newest first: DocId 0 is the largest TweetId.
  std::vector<uint32_t> order(num_docs);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return rows_[a].id > rows_[b].id; });
  std::vector<DocId> new_id(num_docs);
  for (uint32_t rank = 0; rank < num_docs; ++rank) new_id[order[rank]] = rank;

  std::unique_ptr<SealedSegment> segment(new SealedSegment(num_docs));
  Columns& columns = segment->mutable_columns();
  for (uint32_t rank = 0; rank < num_docs; ++rank) {
    const Row& r = rows_[order[rank]];
    columns.SetRow(rank, r.id, r.created_at_ms, r.user_id, r.lang, r.length, r.likes);
    segment->total_length_ += r.length;
  }

  using TermRecords = std::pair<const std::string*, const std::vector<uint32_t>*>;
  std::vector<TermRecords> terms;
  terms.reserve(postings_.size());
  for (const auto& [term, records] : postings_) terms.emplace_back(&term, &records);
  std::sort(terms.begin(), terms.end(),
            [](const TermRecords& a, const TermRecords& b) { return *a.first < *b.first; });

  TermDictionary::Builder dictionary;
  std::vector<Entry> entries;
  EncodeScratch scratch;
  for (size_t t = 0; t < terms.size(); ++t) {
    // Terms are visited in sorted order, not memory order: fetch ahead what is read next.
    if (t + 8 < terms.size()) __builtin_prefetch(terms[t + 8].second);
    if (t + 4 < terms.size()) __builtin_prefetch(terms[t + 4].second->data());
    const std::string* term = terms[t].first;
    const std::vector<uint32_t>& records = *terms[t].second;
    entries.clear();
    for (size_t i = 0; i < records.size(); i += 2 + records[i + 1]) {
      entries.push_back(Entry{new_id[records[i]], &records[i + 2], records[i + 1]});
    }
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.doc < b.doc; });
    dictionary.Add(*term, TermDictionary::Entry{static_cast<uint32_t>(entries.size()),
                                                static_cast<uint32_t>(segment->postings_.size())});
    EncodeList(entries, columns, &segment->postings_, &segment->stats_, scratch);
  }
  segment->dictionary_ = dictionary.Finish();
  segment->stats_.posting_bytes = segment->postings_.size();
  segment->postings_.append(kUnpackPadding, '\0');  // see UnpackBitsFast
  segment->postings_.shrink_to_fit();
  segment->stats_.dictionary_bytes = segment->dictionary_.bytes();
  segment->stats_.column_bytes = segment->columns().MemoryBytes();
  rows_.clear();
  postings_.clear();
  last_records_ = nullptr;
  return segment;
}

absl::Status SealedSegment::Save(const std::string& path) const {
  std::string out(kMagic);
  PutRaw(&out, static_cast<uint32_t>(kNumSections));
  std::vector<uint64_t> meta = {num_docs_, total_length_, dictionary_.size()};
  PutSection(&out, kMeta, AsBytes(meta));
  std::vector<TweetId> ids(num_docs_);
  std::vector<int64_t> created(num_docs_);
  std::vector<UserId> users(num_docs_);
  std::vector<uint32_t> langs(num_docs_), likes(num_docs_);
  std::vector<uint16_t> lengths(num_docs_);
  std::vector<uint64_t> deleted((num_docs_ + 63) / 64);
  for (DocId d = 0; d < num_docs_; ++d) {
    ids[d] = columns().tweet_id(d);
    created[d] = columns().created_at_ms(d);
    users[d] = columns().user_id(d);
    langs[d] = columns().lang(d);
    lengths[d] = columns().length(d);
    likes[d] = columns().likes(d);
    if (columns().deleted(d)) deleted[d / 64] |= uint64_t{1} << (d % 64);
  }
  PutSection(&out, kTweetIds, AsBytes(ids));
  PutSection(&out, kCreatedAt, AsBytes(created));
  PutSection(&out, kUserIds, AsBytes(users));
  PutSection(&out, kLangs, AsBytes(langs));
  PutSection(&out, kLengths, AsBytes(lengths));
  PutSection(&out, kLikes, AsBytes(likes));
  PutSection(&out, kDeleted, AsBytes(deleted));
  PutSection(&out, kTermBlocks, AsBytes(dictionary_.block_offsets()));
  PutSection(&out, kTerms, dictionary_.blob());
  PutSection(&out, kPostings,
             std::string_view(postings_).substr(0, postings_.size() - kUnpackPadding));
  PutRaw(&out, static_cast<uint64_t>(XXH64(out.data(), out.size(), 0)));
  out.append(kEndMagic);
  return WriteFileAtomically(path, out);
}

absl::StatusOr<std::unique_ptr<SealedSegment>> SealedSegment::Load(const std::string& path) {
  absl::StatusOr<std::string> file = ReadFile(path);
  if (!file.ok()) return file.status();
  std::string_view data = *file;
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(StrCat("segment file ", path, " is corrupt: ", why));
  };
  const size_t trailer = sizeof(uint64_t) + kEndMagic.size();
  if (data.size() < kMagic.size() + sizeof(uint32_t) + trailer ||
      data.substr(0, kMagic.size()) != kMagic) {
    return corrupt("bad header (not a segment file, or truncated)");
  }
  if (data.substr(data.size() - kEndMagic.size()) != kEndMagic) return corrupt("truncated");
  uint64_t whole = 0;
  std::memcpy(&whole, data.data() + data.size() - trailer, sizeof(whole));
  if (XXH64(data.data(), data.size() - trailer, 0) != whole) return corrupt("checksum mismatch");

  std::string_view sections[kNumSections + 1];
  size_t pos = kMagic.size();
  uint32_t count = 0;
  std::memcpy(&count, data.data() + pos, sizeof(count));
  pos += sizeof(count);
  if (count != kNumSections) return corrupt("unexpected section count");
  const size_t body_end = data.size() - trailer;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t tag = 0;
    uint64_t length = 0, checksum = 0;
    if (body_end - pos < 20) return corrupt("section header truncated");
    std::memcpy(&tag, data.data() + pos, 4);
    std::memcpy(&length, data.data() + pos + 4, 8);
    std::memcpy(&checksum, data.data() + pos + 12, 8);
    pos += 20;
    if (tag != i + 1 || length > body_end - pos) return corrupt("bad section header");
    sections[tag] = data.substr(pos, length);
    if (XXH64(sections[tag].data(), length, 0) != checksum) {
      return corrupt(StrCat("checksum mismatch in section ", tag));
    }
    pos += length;
  }
  if (pos != body_end) return corrupt("trailing bytes");

  std::vector<uint64_t> meta;
  if (!FromBytes(sections[kMeta], &meta) || meta.size() != 3 || meta[0] >= kEndDoc) {
    return corrupt("bad metadata");
  }
  const uint32_t num_docs = static_cast<uint32_t>(meta[0]);
  std::unique_ptr<SealedSegment> segment(new SealedSegment(num_docs));
  segment->total_length_ = meta[1];
  std::vector<TweetId> ids;
  std::vector<int64_t> created;
  std::vector<UserId> users;
  std::vector<uint32_t> langs, likes;
  std::vector<uint16_t> lengths;
  std::vector<uint64_t> deleted;
  if (!FromBytes(sections[kTweetIds], &ids) || !FromBytes(sections[kCreatedAt], &created) ||
      !FromBytes(sections[kUserIds], &users) || !FromBytes(sections[kLangs], &langs) ||
      !FromBytes(sections[kLengths], &lengths) || !FromBytes(sections[kLikes], &likes) ||
      !FromBytes(sections[kDeleted], &deleted) || ids.size() != num_docs ||
      created.size() != num_docs || users.size() != num_docs || langs.size() != num_docs ||
      lengths.size() != num_docs || likes.size() != num_docs ||
      deleted.size() != (num_docs + 63) / 64) {
    return corrupt("column sizes disagree");
  }
  Columns& columns = segment->mutable_columns();
  for (DocId d = 0; d < num_docs; ++d) {
    if (d > 0 && ids[d] >= ids[d - 1]) return corrupt("tweet ids not in descending order");
    columns.SetRow(d, ids[d], created[d], users[d], langs[d], lengths[d], likes[d]);
    if ((deleted[d / 64] >> (d % 64)) & 1) columns.MarkDeleted(d);
  }
  segment->postings_ = std::string(sections[kPostings]);
  segment->postings_.append(kUnpackPadding, '\0');  // see UnpackBitsFast
  std::vector<uint32_t> blocks;
  if (!FromBytes(sections[kTermBlocks], &blocks) || meta[2] > UINT32_MAX) {
    return corrupt("dictionary sizes disagree");
  }
  absl::StatusOr<TermDictionary> dictionary = TermDictionary::FromParts(
      std::string(sections[kTerms]), std::move(blocks), static_cast<uint32_t>(meta[2]));
  if (!dictionary.ok()) return corrupt(AsStd(dictionary.status().message()));
  segment->dictionary_ = *std::move(dictionary);
  if (absl::Status valid = segment->Validate(); !valid.ok()) return corrupt(AsStd(valid.message()));
  segment->stats_.posting_bytes = segment->postings_.size() - kUnpackPadding;
  segment->stats_.dictionary_bytes = segment->dictionary_.bytes();
  segment->stats_.column_bytes = segment->columns().MemoryBytes();
  segment->dictionary_.ForEach([&](std::string_view, TermDictionary::Entry e) {
    segment->stats_.postings += e.doc_freq;
  });
  return segment;
}

absl::Status SealedSegment::Validate() const {
  // The dictionary's own structure was checked when it was read; here each term's list must
  // lie between its offset and the next term's, and decode into valid DocIds.
  const auto* base = reinterpret_cast<const uint8_t*>(postings_.data());
  const size_t postings_end = postings_.size() - kUnpackPadding;
  std::string previous_term;
  TermDictionary::Entry previous{};
  bool has_previous = false;
  std::string problem;
  auto check = [&](size_t end) {
    if (!problem.empty() || !has_previous) return;
    if (previous.offset > end || end > postings_end) {
      problem = StrCat("term '", previous_term, "': posting offsets out of bounds");
      return;
    }
    const std::string why =
        CheckList(base + previous.offset, base + end, previous.doc_freq, num_docs_);
    if (!why.empty()) problem = StrCat("term '", previous_term, "': ", why);
  };
  dictionary_.ForEach([&](std::string_view term, TermDictionary::Entry entry) {
    check(entry.offset);
    previous_term.assign(term);
    previous = entry;
    has_previous = true;
  });
  check(postings_end);
  if (!problem.empty()) return absl::DataLossError(problem);
  return absl::OkStatus();
}

}  // namespace tweetsearch::index
