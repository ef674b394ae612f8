#include "indexer/index/sealed_segment.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <numeric>

#include "common/file_util.h"
#include "common/snowflake.h"
#include "common/strings.h"
#include "indexer/index/ascending.h"
#include "indexer/index/bitpack.h"
#include "indexer/index/champions.h"
#include "indexer/index/pair_champions.h"
#include "indexer/index/section_file.h"

namespace tweetsearch::index {
namespace {

// Skip table entry of a multi-block list. A list of one block has only the three bit widths
// as its header: its bounds are left unknown (a short list is cheap to read whole).
struct SkipEntry {
  uint32_t last_doc;
  uint32_t offset;                   // of the block's data, from the start of the term's postings
  uint8_t doc_bits;                  // PFor descriptor of the DocId gaps
  uint8_t freq_bits;                 // PFor descriptor of the frequencies minus one
  uint8_t pos_bits;                  // PFor descriptor of the positions
  uint8_t max_tf;                    // kManyTf means "kManyTf or more"
  uint8_t min_length;                // capped at 255 (a lower bound)
  uint8_t min_length_repeated;       // among postings with a term frequency above one; capped
  uint8_t band_tf[kLikesBands / 4];  // 2 bits a band, band b at bits 2b: its tf class - 1
  uint8_t band_lengths[kLikesBands * 5 / 8];  // 5 bits a band, band b at bits 5b: its code
};
static_assert(sizeof(SkipEntry) == 28);
constexpr size_t kSingleHeaderBytes = 3;  // doc_bits, freq_bits, pos_bits
constexpr uint8_t kManyTf = 255;
// A doc_bits value meaning: the block's DocIds are a bitmap, one bit per DocId from the block's
// start (the previous block's last DocId + 1) to its last DocId. Chosen for blocks of more-than-
// one-block lists when smaller than the packed gaps, or when dense: at least one posting per
// kBitmapDensity DocIds. A dense term then answers "is DocId x in this block, or which is the
// next one" from the bits alone, without decoding the block: a conjunction of a rare and a
// dense word, ranked or counted, then decodes only the rare list, and a count copies a dense
// list's bits 64 at a time. (One per 16, Roaring's container rule, until 2026-12: from one per
// 32 the lists take 5.5% more bytes at 10M tweets, and counts of ANDs of common words execute
// 19% fewer instructions, 29% with the 64-bit copies; docs/benchmarks.md.)
constexpr uint8_t kBitmapDocs = 0x40;
constexpr uint32_t kBitmapDensity = 32;

uint64_t LoadWordAt(const uint8_t* p) {
  uint64_t x;
  std::memcpy(&x, p, sizeof(x));
  return x;
}

uint64_t LoadWord(const uint8_t* bits, uint32_t word) {
  return LoadWordAt(bits + 8 * static_cast<size_t>(word));
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

// Bits [i, i + n) of a bitmap as the low bits of a word, n <= 56: one load at the byte of bit i
// holds them (up to 7 bytes past that byte must be readable).
uint64_t LoadBits(const uint8_t* bits, uint64_t i, uint64_t n) {
  return LoadWordAt(bits + i / 8) >> (i % 8) & ((uint64_t{1} << n) - 1);
}

// Bits [a, b) of a bitmap as the low bits of a word (b - a <= 64). Reads from the byte of bit a
// to 7 bytes past the byte of bit b - 1.
uint64_t ExtractBits(const uint8_t* bits, uint64_t a, uint64_t b) {
  const uint64_t first = std::min<uint64_t>(56, b - a);
  uint64_t word = LoadBits(bits, a, first);
  if (b - a > first) word |= LoadBits(bits, a + first, b - a - first) << first;
  return word;
}

bool TestBit(const uint8_t* bits, uint32_t bit) { return (bits[bit / 8] >> (bit % 8) & 1) != 0; }

// Set bits in [from, end) of a bitmap (from <= end).
uint32_t Rank(const uint8_t* bits, uint32_t from, uint32_t end) {
  if (from == end) return 0;
  const uint32_t first = from / 64, last = (end - 1) / 64;
  uint64_t word = LoadWord(bits, first) & (~uint64_t{0} << (from % 64));
  uint32_t count = 0;
  for (uint32_t w = first; w < last; ++w) {
    count += static_cast<uint32_t>(std::popcount(word));
    word = LoadWord(bits, w + 1);
  }
  if (end % 64 != 0) word &= (uint64_t{1} << (end % 64)) - 1;
  return count + static_cast<uint32_t>(std::popcount(word));
}

// DocIds a cursor keeps past a packed block's last (kEndDoc), for reads eight at a time.
constexpr uint32_t kDocsPad = 8;

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
    std::memcpy(&e, term_base + (block + 1) * sizeof(SkipEntry), sizeof(SkipEntry));
  }
  return e;
}

// The per-band fields of a skip entry, unpacked.
struct EntryBands {
  std::array<uint8_t, kLikesBands> length_code{};  // kBandEmpty: no posting in the band
  std::array<uint8_t, kLikesBands> tf{};           // 1, 2, 3 or kBandManyTf
};

EntryBands UnpackBands(const SkipEntry& e) {
  EntryBands out;
  for (int b = 0; b < kLikesBands; ++b) {
    const int bit = 5 * b, byte = bit / 8;
    uint32_t v = e.band_lengths[byte];
    if (byte + 1 < static_cast<int>(sizeof(e.band_lengths))) {
      v |= uint32_t{e.band_lengths[byte + 1]} << 8;
    }
    out.length_code[b] = static_cast<uint8_t>((v >> (bit % 8)) & 31);
    out.tf[b] = static_cast<uint8_t>(((e.band_tf[b / 4] >> (2 * (b % 4))) & 3) + 1);
  }
  return out;
}

void PackBands(const EntryBands& bands, SkipEntry* e) {
  std::memset(e->band_lengths, 0, sizeof(e->band_lengths));
  std::memset(e->band_tf, 0, sizeof(e->band_tf));
  for (int b = 0; b < kLikesBands; ++b) {
    const int bit = 5 * b, byte = bit / 8;
    const uint32_t v = uint32_t{bands.length_code[b]} << (bit % 8);
    e->band_lengths[byte] = static_cast<uint8_t>(e->band_lengths[byte] | (v & 0xFF));
    if (byte + 1 < static_cast<int>(sizeof(e->band_lengths))) {
      e->band_lengths[byte + 1] = static_cast<uint8_t>(e->band_lengths[byte + 1] | (v >> 8));
    }
    e->band_tf[b / 4] =
        static_cast<uint8_t>(e->band_tf[b / 4] | (bands.tf[b] - 1) << (2 * (b % 4)));
  }
}

// The likes bands (bit b) an entry's block holds a posting of: those with a length code.
uint32_t BandsOf(const SkipEntry& e) {
  static_assert(sizeof(e.band_lengths) > 8 && sizeof(e.band_lengths) <= 16);
  uint64_t lo = 0, hi = 0;  // bits 0-63 and 64-79 of the codes
  std::memcpy(&lo, e.band_lengths, 8);
  std::memcpy(&hi, e.band_lengths + 8, sizeof(e.band_lengths) - 8);
  uint32_t bands = 0;
  for (int b = 0; b < kLikesBands; ++b) {
    const int bit = 5 * b;
    const uint64_t v = bit >= 64 ? hi >> (bit - 64) : lo >> bit | (bit > 59 ? hi << (64 - bit) : 0);
    bands |= static_cast<uint32_t>((v & 31) != 0) << b;
  }
  return bands;
}

PostingBound BoundOf(const SkipEntry& e, bool single_block) {
  if (single_block) return PostingBound{};
  PostingBound b{e.max_tf == kManyTf ? std::numeric_limits<uint32_t>::max() : e.max_tf,
                 e.min_length, e.min_length_repeated};
  const EntryBands bands = UnpackBands(e);
  for (int i = 0; i < kLikesBands; ++i) {
    b.band_length[i] = kBandLengthFloor[bands.length_code[i]];
    b.band_tf[i] = bands.tf[i];
  }
  return b;
}

// The entry before a multi-block list's skip table: the bounds of the whole list (its blocks'
// folded together), last_doc the list's last DocId; offset and descriptors unused (zero).
SkipEntry ReadListEntry(const uint8_t* term_base) {
  SkipEntry e;
  std::memcpy(&e, term_base, sizeof(SkipEntry));
  return e;
}

// Widens the bounds of `into` to hold the postings of block `b` too.
void FoldEntry(const SkipEntry& b, SkipEntry* into) {
  into->last_doc = std::max(into->last_doc, b.last_doc);
  into->max_tf = std::max(into->max_tf, b.max_tf);
  into->min_length = std::min(into->min_length, b.min_length);
  into->min_length_repeated = std::min(into->min_length_repeated, b.min_length_repeated);
  EntryBands folded = UnpackBands(*into);
  const EntryBands x = UnpackBands(b);
  for (int i = 0; i < kLikesBands; ++i) {
    const uint8_t a = folded.length_code[i], y = x.length_code[i];
    folded.length_code[i] = a == kBandEmpty ? y : y == kBandEmpty ? a : std::min(a, y);
    folded.tf[i] = std::max(folded.tf[i], x.tf[i]);
  }
  PackBands(folded, into);
}

class SealedCursor final : public PostingCursor {
 public:
  // The list at `base` (its bytes end at `end`) of a segment of `num_docs` documents.
  SealedCursor(const uint8_t* base, const uint8_t* end, uint32_t doc_freq, uint32_t num_docs)
      : base_(base),
        end_(end),
        doc_freq_(doc_freq),
        num_docs_(num_docs),
        num_blocks_(NumBlocks(doc_freq)) {
    if (num_blocks_ > 1) {
      const SkipEntry list = ReadListEntry(base_);
      if (list.doc_bits == kBitmapDocs) {
        dense_bits_ = base_ + (num_blocks_ + 1) * sizeof(SkipEntry);
        dense_span_ = uint64_t{list.last_doc} + 1;
      }
    }
    if (num_blocks_ > 0) DecodeBlock(0);
  }

  bool champions(Champions* out) const override {
    if (num_blocks_ < 2) return false;
    const uint32_t at = ReadListEntry(base_).offset;
    return at != 0 && at < end_ - base_ && ReadChampions(base_ + at, end_, num_docs_, out);
  }

  DocId doc() const override { return doc_; }
  void Next() override {
    if (bitmap_) {
      const uint32_t bit = NextSetBit(bits_, span_, doc_ - start_ + 1);
      if (bit < span_) {
        doc_ = start_ + bit;
        rank_known_ = false;  // counted on from ranked_bit_ when asked (EnsureRank)
        return;
      }
    } else if (++i_ < block_n_) {
      doc_ = docs_[i_];
      return;
    }
    NextBlock();
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
  // A block's first few frequencies are read one at a time (a conjunction led by a rarer list
  // scores a posting or two per block of a common one); then the block is decoded.
  uint32_t freq() const override {
    EnsureRank();
    if (!freqs_decoded_ && ++freq_reads_ <= kFreqReadsBeforeDecode) {
      return PForAt(freq_data_, block_n_, entry_.freq_bits, i_) + 1;
    }
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
      if (pos_data_ == nullptr)
        pos_data_ = freq_data_ + PForBytes(freq_data_, block_n_, entry_.freq_bits);
      UnpackPFor(pos_data_, positions_.size(), entry_.pos_bits, positions_.data());
      positions_decoded_ = true;
    }
    return std::span<const uint32_t>(positions_.data() + pos_start_[i_], freqs_[i_]);
  }
  bool fills_words() const override { return dense_bits_ != nullptr; }
  // Whole blocks at a time: a bitmap block's bytes are shifted into the words, a packed
  // block's DocIds set one bit each. A dense list's words are copied whatever its blocks.
  void FillBits(DocId from, DocId end, uint64_t* words) override {
    if (dense_bits_ != nullptr) {
      FillDense(from, end, words);
      return;
    }
    if (doc_ < from) Advance(from);
    while (doc_ < end) {
      if (bitmap_) {
        const uint32_t hi = std::min<uint64_t>(span_, uint64_t{end} - start_);
        CopyBits(doc_ - start_, hi, from, words);
        if (hi < span_) {
          // The block goes on past `end`, and its last bit is set.
          doc_ = start_ + NextSetBit(bits_, span_, hi);
          rank_known_ = false;
          return;
        }
      } else {
        // The postings below `end`: all of the block's, or up to the first at or past it.
        const uint32_t n = block_last_ < end
                               ? block_n_
                               : static_cast<uint32_t>(
                                     std::lower_bound(docs_ + i_, docs_ + block_n_, end) - docs_);
        SetBits(docs_ + i_, n - i_, from, words);
        if (n < block_n_) {
          i_ = n;
          doc_ = docs_[n];
          return;
        }
      }
      NextBlock();
    }
  }
  size_t NextDocs(DocId end, DocId* out, size_t max) override {
    size_t n = 0;
    while (n < max && doc_ < end) {
      if (bitmap_) {
        uint32_t bit = doc_ - start_;
        while (n < max && bit < span_ && start_ + bit < end) {
          out[n++] = start_ + bit;
          bit = NextSetBit(bits_, span_, bit + 1);
        }
        rank_known_ = false;
        if (bit < span_) {
          doc_ = start_ + bit;
          return n;
        }
      } else {
        uint32_t j = i_;
        while (j < block_n_ && n < max && docs_[j] < end) out[n++] = docs_[j++];
        if (j < block_n_) {
          i_ = j;
          doc_ = docs_[j];
          return n;
        }
      }
      NextBlock();
    }
    return n;
  }
  // The candidates of one block at a time: a bitmap block tests their bits, a packed block
  // is merged with them; blocks holding none are never decoded.
  size_t Filter(DocId* docs, size_t n, bool keep) override {
    if (dense_bits_ != nullptr) return FilterDense(docs, n, keep);
    uint32_t blocks[kLookAhead];  // LookAhead's blocks, for candidates below `ahead`
    const size_t ahead = LookAhead(docs, n, blocks);
    size_t kept = 0, i = 0;
    while (i < n) {
      if (doc_ == kEndDoc) {  // no posting left: none of the rest is held
        if (!keep) {
          std::memmove(docs + kept, docs + i, (n - i) * sizeof(DocId));
          kept += n - i;
        }
        break;
      }
      bool located = true;  // doc_ is a posting of the block
      if (docs[i] > block_last_) {
        const uint32_t b = i < ahead ? blocks[i] : FindBlock(docs[i]);
        if (b >= num_blocks_) {
          doc_ = kEndDoc;
          continue;
        }
        // A bitmap block's first posting is not looked for: only the candidates' bits are
        // read (when a rarer list's candidates fall one to a block, its first word is
        // another cache miss).
        DecodeBlock(b, /*locate=*/false);
        located = false;
      }
      // docs[i] <= block_last_: every candidate up to the block's last DocId is decided here.
      if (bitmap_) {
        DocId last = docs[i];
        for (; i < n && docs[i] <= block_last_; ++i) {
          last = docs[i];
          const bool held = last >= start_ && TestBit(bits_, last - start_);
          docs[kept] = last;  // kept <= i: a slot already read
          kept += held == keep;
        }
        if (!located || last > doc_) {  // the block's last bit is set, so a posting is found
          doc_ = start_ + NextSetBit(bits_, span_, last >= start_ ? last - start_ : 0);
          rank_known_ = false;
        }
      } else {
        // Each candidate moves j past the postings below it, eight compared at once (the
        // candidates of a rarer list are a few postings apart); a merge step by step waits on
        // each comparison. Every candidate here is at most the block's last DocId, so j stays
        // in the block.
        uint32_t j = i_;
        DocId last = 0;  // the last candidate decided here
        // Four candidates at a time while the block holds them: compared with the block's
        // DocIds four at a time, all pairs at once, from the first not below the first of
        // them to the first four reaching past the last (the padding's kEndDocs end the
        // block). A candidate a DocId or two apart from the next waits on no comparison.
        for (; i + 4 <= n && docs[i + 3] <= block_last_; i += 4) {
          DocId four[4];
          std::memcpy(four, docs + i, sizeof(four));
          j = PastBelow(j, four[0]);
          uint32_t found = EqualsAnyOfFour(four, docs_ + j);
          while (docs_[j + 3] < four[3]) {
            j += 4;
            found |= EqualsAnyOfFour(four, docs_ + j);
          }
          for (uint32_t k = 0; k < 4; ++k) {
            docs[kept] = four[k];  // kept <= i + k: a slot already read
            kept += ((found >> k & 1) != 0) == keep;
          }
          last = four[3];
        }
        for (; i < n && docs[i] <= block_last_; ++i) {
          last = docs[i];
          j = PastBelow(j, last);
          docs[kept] = last;  // kept <= i: a slot already read
          kept += (docs_[j] == last) == keep;
        }
        i_ = PastBelow(j, last);
        doc_ = docs_[i_];
      }
    }
    return kept;
  }
  uint32_t size() const override { return doc_freq_; }
  uint32_t ordinal() const override {
    if (doc_ == kEndDoc) return UINT32_MAX;
    EnsureRank();
    return block_ * kBlockSize + i_;
  }
  DocId block_last_doc() const override { return block_last_; }
  PostingBound block_bound() const override { return BoundOf(entry_, num_blocks_ == 1); }
  // Folded from every skip entry on first use: newest-first queries never ask, and a common
  // term has thousands of blocks.
  PostingBound list_bound() const override {
    if (num_blocks_ <= 1) return PostingBound{};
    return BoundOf(ReadListEntry(base_), false);
  }
  DocId ShallowAdvance(DocId target) override {
    if (num_blocks_ == 1) {
      shallow_last_ = target <= block_last_ ? block_last_ : kEndDoc;
      return shallow_last_;
    }
    if (shallow_ < block_) {
      shallow_ = block_;
      shallow_last_ = block_last_;
    }
    if (shallow_last_ < target || shallow_ == kNoBlock) {
      shallow_ = FindBlockFrom(shallow_ == kNoBlock ? block_ : shallow_, target);
      shallow_last_ =
          shallow_ < num_blocks_ ? ReadSkip(base_, doc_freq_, shallow_).last_doc : kEndDoc;
    }
    return shallow_last_;
  }
  PostingBound shallow_bound() const override {
    if (num_blocks_ <= 1) return PostingBound{};
    if (shallow_ == kNoBlock || shallow_ >= num_blocks_) return BoundOf(entry_, false);
    return BoundOf(ReadSkip(base_, doc_freq_, shallow_), false);
  }
  uint32_t shallow_bands() const override {
    if (num_blocks_ <= 1) return PostingCursor::shallow_bands();
    if (shallow_ == kNoBlock || shallow_ >= num_blocks_) return BandsOf(entry_);
    return BandsOf(ReadSkip(base_, doc_freq_, shallow_));
  }

 private:
  // A dense list's words are read in place: no copy of the window's bits first.
  uint64_t AndBits(DocId from, DocId end, uint64_t* words, bool keep) override {
    if (dense_bits_ == nullptr) return DocCursor::AndBits(from, end, words, keep);
    const uint64_t lo = std::max(doc_, from), hi = std::min<uint64_t>(end, dense_span_);
    const size_t n = (end - from + 63) / 64;
    const uint64_t flip = keep ? 0 : ~uint64_t{0};
    // Words [whole, past) lie inside [lo, hi) and start on a byte: loaded as they are.
    size_t whole = n, past = n;
    if (from % 8 == 0 && lo < hi) {
      whole = (lo - from + 63) / 64;
      past = std::max<size_t>(whole, (hi - from) / 64);
    }
    uint64_t left = 0;
    auto edge = [&](size_t w) {             // a word partly (or not) inside [lo, hi)
      const uint64_t base = from + 64 * w;  // the word's first DocId
      const uint64_t a = std::max(base, lo), b = std::min(base + 64, hi);
      const uint64_t bits = a < b ? ExtractBits(dense_bits_, a, b) << (a - base) : 0;
      words[w] &= bits ^ flip;
      left += static_cast<uint64_t>(std::popcount(words[w]));
    };
    for (size_t w = 0; w < whole; ++w) edge(w);
    const uint8_t* p = dense_bits_ + (from + 64 * whole) / 8;
    for (size_t w = whole; w < past; ++w, p += 8) {
      words[w] &= LoadWordAt(p) ^ flip;
      left += static_cast<uint64_t>(std::popcount(words[w]));
    }
    for (size_t w = past; w < n; ++w) edge(w);
    if (doc_ < end) MoveDensePast(end);
    return left;
  }

  // FillBits of a dense list: its postings from max(doc_, from) to `end` are one copy from its
  // bitmap; then the cursor moves to the first posting at or past `end`, in whichever block.
  void FillDense(DocId from, DocId end, uint64_t* words) {
    if (doc_ >= end) return;
    const DocId lo = std::max(doc_, from);
    const uint64_t hi = std::min<uint64_t>(end, dense_span_);
    CopyBits(lo, static_cast<uint32_t>(hi), from, words);  // bits_ is the list's, start_ 0
    MoveDensePast(end);
  }
  // Filter of a dense list: each candidate's bit is read from the list's bitmap, whatever its
  // block; the cursor then moves once, to its block of the last candidate.
  size_t FilterDense(DocId* docs, size_t n, bool keep) {
    if (n == 0) return 0;
    const DocId last = docs[n - 1];
    size_t kept = 0;
    // Candidates of a rarer list fall a cache line or more apart: their bytes are asked for
    // kFilterAhead candidates ahead, so that the misses overlap.
    for (size_t i = 0; i < std::min(n, kFilterAhead); ++i) {
      if (docs[i] < dense_span_) __builtin_prefetch(dense_bits_ + docs[i] / 8);
    }
    for (size_t i = 0; i < n; ++i) {
      const DocId d = docs[i];
      if (i + kFilterAhead < n && docs[i + kFilterAhead] < dense_span_) {
        __builtin_prefetch(dense_bits_ + docs[i + kFilterAhead] / 8);
      }
      // Postings the cursor has passed are not held (as Advance would say).
      const bool held = d >= doc_ && d < dense_span_ && TestBit(dense_bits_, d);
      docs[kept] = d;  // kept <= i: a slot already read
      kept += held == keep;
    }
    if (last > doc_) MoveDensePast(last);
    return kept;
  }
  // Moves a dense list's cursor to its first posting at or after `end`, in whichever block.
  void MoveDensePast(DocId end) {
    if (end >= dense_span_) {
      doc_ = kEndDoc;  // past the list's last posting
      return;
    }
    // The list's last bit is set, so a posting is found.
    const DocId next = NextSetBit(dense_bits_, static_cast<uint32_t>(dense_span_), end);
    if (next > block_last_) DecodeBlock(FindBlock(next), /*locate=*/false);
    doc_ = next;
    rank_known_ = false;
  }

  // Moves to the next block's first posting, or to kEndDoc after the last block.
  void NextBlock() {
    if (block_ + 1 < num_blocks_) {
      DecodeBlock(block_ + 1);
    } else {
      doc_ = kEndDoc;
    }
  }

  // The first place at or after j (in the decoded packed block) whose DocId is not below
  // `a`, which is at most the block's last DocId.
  uint32_t PastBelow(uint32_t j, DocId a) const {
    while (true) {
      const uint32_t below = CountBelowOfEight(docs_ + j, a);
      j += below;
      if (below < 8) return j;
    }
  }

  // ORs the bits of `n` ascending DocIds into `words` (bit 0: DocId `from`), whose words past
  // the first DocId's must be clear (FillBits's callers clear the window, and the cursor sets
  // its bits in DocId order). The bits of one word gather in a register, and the word is
  // stored after every posting, without a branch: whether the next posting shares the word is
  // a coin toss for a list of one posting in 16 to 64 DocIds, and a mispredicted branch per
  // posting cost more than the stores (newest-first 2-word AND p99 at 10M tweets 3.1 → 2.6 ms).
  static void SetBits(const DocId* docs, uint32_t n, DocId from, uint64_t* words) {
    if (n == 0) return;
    uint32_t word = (docs[0] - from) / 64;
    uint64_t bits = words[word];  // an earlier block may have set bits in the first word
    for (uint32_t j = 0; j < n; ++j) {
      const uint32_t d = docs[j] - from;
      const uint64_t keep = d / 64 == word ? ~uint64_t{0} : 0;
      bits = (bits & keep) | uint64_t{1} << (d % 64);
      word = d / 64;
      words[word] = bits;
    }
  }

  // ORs bits [lo, hi) of the bitmap block into `words`, whose bit 0 is DocId `from`
  // (start_ + lo >= from).
  void CopyBits(uint32_t lo, uint32_t hi, DocId from, uint64_t* words) const {
    // The block's bit i is DocId start_ + i, at or past `from`: bit i + to_window of `words`.
    const uint64_t to_window = uint64_t{start_} - from;  // wraps: only sums with i are used
    // Up to the first whole word of `words`, and after the last, at most 56 bits at a time: a
    // word loaded at any byte holds at least 56 bits from any of its byte's bits (the
    // postings buffer is padded past every bitmap).
    auto chunks = [&](uint32_t i, uint32_t stop) {
      while (i < stop) {
        const uint32_t n = std::min<uint32_t>(56, stop - i);
        const uint64_t b = LoadBits(bits_, i, n);
        const uint64_t at = i + to_window, shift = at % 64;
        words[at / 64] |= b << shift;
        if (shift + n > 64) words[at / 64 + 1] |= b >> (64 - shift);
        i += n;
      }
    };
    const uint32_t head =
        static_cast<uint32_t>(std::min<uint64_t>(hi - lo, (64 - (lo + to_window) % 64) % 64));
    chunks(lo, lo + head);
    // Whole words of `words`: 64 bits of the block each, from two loads (the ninth byte is the
    // bitmap's own when the bits do not start at a byte: they end at most at bit hi - 1).
    uint32_t i = lo + head;
    for (; i + 64 <= hi; i += 64) {
      const uint8_t* p = bits_ + i / 8;
      const uint32_t r = i % 8;
      uint64_t b = LoadWordAt(p) >> r;
      if (r != 0) b |= uint64_t{p[8]} << (64 - r);
      words[(i + to_window) / 64] |= b;
    }
    chunks(i, hi);
  }

  // Finds the blocks Filter will decode for the first candidates of docs[0..n) (ascending,
  // none below doc_), as Filter would: blocks[i] for each candidate i past the block of the
  // one before (num_blocks_ past the last block, where it stops). For each it asks for the
  // cache line of the candidate's bit, in a bitmap block, before Filter reads any: a rarer
  // list's candidates fall about one to a block of a common word's list, and decided one after
  // the other each waited for its own cache miss. Returns how many candidates it looked at:
  // it looks from a bitmap block, up to the first packed one.
  size_t LookAhead(const DocId* docs, size_t n, uint32_t* blocks) const {
    if (n < kMinLookAhead || num_blocks_ <= 1 || doc_ == kEndDoc || !bitmap_) return 0;
    n = std::min(n, kLookAhead);
    uint32_t b = block_;
    DocId last = block_last_;
    for (size_t i = 0; i < n; ++i) {
      const DocId d = docs[i];
      if (d <= last) continue;  // in the block of the candidate before: Filter decodes none
      const uint32_t next = FindBlockFrom(b + 1, d);
      blocks[i] = next;
      if (next >= num_blocks_) return i + 1;
      const DocId start =
          next == b + 1 ? last + 1 : SkipField<DocId>(next - 1, offsetof(SkipEntry, last_doc)) + 1;
      // A packed block ends the look: the list is not dense here, and its candidates rarely
      // fall one to a block.
      if (SkipField<uint8_t>(next, offsetof(SkipEntry, doc_bits)) != kBitmapDocs) return i;
      b = next;
      last = SkipField<DocId>(b, offsetof(SkipEntry, last_doc));
      if (d >= start) {
        __builtin_prefetch(base_ + SkipField<uint32_t>(b, offsetof(SkipEntry, offset)) +
                           (d - start) / 8);
      }
    }
    return n;
  }
  // One field of block b's skip entry, read alone. Requires: more than one block.
  template <typename T>
  T SkipField(uint32_t b, size_t offset) const {
    T value;
    std::memcpy(&value, base_ + (b + 1) * sizeof(SkipEntry) + offset, sizeof(T));
    return value;
  }
  static constexpr size_t kMinLookAhead = 8;
  static constexpr size_t kFilterAhead = 16;
  static constexpr size_t kLookAhead = 128;

  // With `locate` false a bitmap block's doc_ is left at its start, maybe no posting, for the
  // caller to set (Filter).
  void DecodeBlock(uint32_t b, bool locate = true) {
    // Gaps are stored minus one; the first gap of the list counts from DocId -1. The next
    // block (a walk, or a window filled) starts after the entry at hand.
    const uint32_t start = b == 0            ? 0
                           : b == block_ + 1 ? entry_.last_doc + 1
                                             : ReadSkip(base_, doc_freq_, b - 1).last_doc + 1;
    entry_ = ReadSkip(base_, doc_freq_, b);
    block_ = b;
    block_n_ = std::min(kBlockSize, doc_freq_ - b * kBlockSize);
    const uint8_t* p = base_ + entry_.offset;
    i_ = 0;
    rank_known_ = true;
    bitmap_ = dense_bits_ != nullptr || entry_.doc_bits == kBitmapDocs;
    if (bitmap_) {
      if (dense_bits_ != nullptr) {  // the list's bitmap; the block holds no DocIds
        bits_ = dense_bits_;
        start_ = 0;
      } else {
        bits_ = p;
        start_ = start;
        p += (entry_.last_doc - start + 1 + 7) / 8;
      }
      span_ = entry_.last_doc - start_ + 1;
      if (locate) {
        doc_ = start_ + NextSetBit(bits_, span_, start - start_);
        ranked_bit_ = doc_ - start_;
      } else {
        doc_ = start;
        ranked_bit_ = start - start_;  // i_ counts the postings before the block's start: none
        rank_known_ = false;
      }
      block_last_ = entry_.last_doc;
    } else {
      p += UnpackPFor(p, block_n_, entry_.doc_bits, docs_);
      GapsToValues(docs_, block_n_, start);
      std::fill_n(docs_ + block_n_, kDocsPad, kEndDoc);
      doc_ = docs_[0];
      block_last_ = docs_[block_n_ - 1];
    }
    freq_data_ = p;
    pos_data_ = nullptr;  // after the frequencies: found when positions are asked for
    freqs_decoded_ = false;
    freq_reads_ = 0;
    positions_decoded_ = false;
  }

  // In a bitmap block, the index of doc_ among the block's postings (for frequencies and
  // positions) is counted only when asked for.
  void EnsureRank() const {
    if (rank_known_) return;
    // The cursor only moves forward: count on from the last bit whose rank was known.
    const uint32_t bit = doc_ - start_;
    i_ += Rank(bits_, ranked_bit_, bit);
    ranked_bit_ = bit;
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
  uint32_t FindBlock(DocId target) const { return FindBlockFrom(block_ + 1, target); }
  // The first block from `first` on whose last DocId is >= target (num_blocks_ if none).
  uint32_t FindBlockFrom(uint32_t first, DocId target) const {
    uint32_t lo = first, step = 1;
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
  const uint8_t* const end_;
  const uint32_t doc_freq_;
  const uint32_t num_docs_;
  const uint32_t num_blocks_;
  static constexpr uint32_t kNoBlock = UINT32_MAX;
  uint32_t shallow_ = kNoBlock;  // ShallowAdvance's block, when ahead of block_
  DocId shallow_last_ = 0;
  SkipEntry entry_{};       // header of the decoded block
  uint32_t block_ = 0;      // number of the decoded block
  uint32_t block_n_ = 0;    // postings in it
  mutable uint32_t i_ = 0;  // index of doc_ in it (see EnsureRank)
  mutable bool rank_known_ = true;
  mutable uint32_t ranked_bit_ = 0;  // bitmap blocks: the bit of the posting i_ counts to
  DocId doc_ = kEndDoc;
  DocId block_last_ = kEndDoc;
  // A dense list's bitmap of DocIds 0 to its last (nullptr: the list is not dense).
  const uint8_t* dense_bits_ = nullptr;
  uint64_t dense_span_ = 0;
  // Bitmap blocks: the bits, the DocId of bit 0, and the number of bits to the block's last
  // DocId (a dense list's blocks: the list's bitmap, 0, and the block's last DocId + 1).
  bool bitmap_ = false;
  const uint8_t* bits_ = nullptr;
  uint32_t start_ = 0;
  uint32_t span_ = 0;
  // Past a packed block's postings, kDocsPad kEndDocs: PastBelow reads eight at a time.
  uint32_t docs_[kBlockSize + kDocsPad];
  mutable uint32_t freqs_[kBlockSize];
  mutable bool freqs_decoded_ = false;
  mutable uint32_t freq_reads_ = 0;  // frequencies of the block read one at a time
  static constexpr uint32_t kFreqReadsBeforeDecode = 8;
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

// Encodes one posting list at a time from postings given in increasing DocId order, holding
// one block of them and the encoded blocks (not the whole list's postings); reused list by
// list. A list of one block gets a 3-byte header, a longer one a skip table: which one is known
// only once a 129th posting comes, so the first block is encoded then.
class ListEncoder {
 public:
  // lengths[d], likes[d] and bands[d] (LikesBand of its likes) are those of DocId d;
  // avg_length is the segment's average length (for choosing champions).
  ListEncoder(std::span<const uint16_t> lengths, std::span<const uint32_t> likes,
              std::span<const uint8_t> bands, double avg_length, SealedStats* stats)
      : lengths_(lengths), bands_(bands), stats_(stats), champions_(lengths, likes, avg_length) {}

  uint32_t count() const { return count_; }
  void Add(DocId doc, std::span<const uint32_t> positions) {
    if (docs_.size() == kBlockSize) EncodeBlock(/*single=*/false);
    docs_.push_back(doc);
    freqs_.push_back(static_cast<uint32_t>(positions.size()));
    positions_.insert(positions_.end(), positions.begin(), positions.end());
    ++count_;
  }
  // Appends the list to `out` and starts the next one. Requires: a posting added.
  void Finish(std::string* out) {
    const bool single = skips_.empty();
    EncodeBlock(single);
    if (!single) {
      SkipEntry list = skips_[0];
      for (const SkipEntry& e : skips_) FoldEntry(e, &list);
      list.offset = 0;
      list.doc_bits = list.freq_bits = list.pos_bits = 0;
      const uint32_t table = static_cast<uint32_t>((skips_.size() + 1) * sizeof(SkipEntry));
      for (SkipEntry& e : skips_) e.offset += table;
      std::string champions;
      if (count_ >= kChampionMinPostings) {
        StartChampions();
        AppendChampions(champions_.Finish(), &champions);
        // After the blocks; the list entry's offset says where (0: none). Counted in the
        // posting bytes.
        list.offset = static_cast<uint32_t>(table + blocks_.size());
      }
      // Dense: the blocks' DocIds as one bitmap, then the blocks without them.
      const bool dense = Dense();
      std::string_view blocks = blocks_;
      const size_t bitmap = (uint64_t{list.last_doc} + 1 + 7) / 8;  // if dense
      if (dense) {
        for (size_t b = 0; b < skips_.size(); ++b) {
          skips_[b].doc_bits = kBitmapDocs;
          skips_[b].offset = static_cast<uint32_t>(table + bitmap + rest_offsets_[b]);
        }
        list.doc_bits = kBitmapDocs;
        if (list.offset != 0) list.offset = static_cast<uint32_t>(table + bitmap + rest_.size());
        stats_->doc_bytes += bitmap - block_doc_bytes_;
        stats_->bitmap_blocks += skips_.size() - bitmap_blocks_;
        blocks = rest_;
      }
      out->append(reinterpret_cast<const char*>(&list), sizeof(list));
      out->append(reinterpret_cast<const char*>(skips_.data()), table - sizeof(list));
      if (dense) {
        bitmap_.assign((uint64_t{list.last_doc} + 1 + 63) / 64, 0);
        for (DocId doc : list_docs_) bitmap_[doc / 64] |= uint64_t{1} << (doc % 64);
        out->append(reinterpret_cast<const char*>(bitmap_.data()), bitmap);
      }
      out->append(blocks);
      out->append(champions);
      stats_->skip_bytes += sizeof(list);
    } else {
      out->append(blocks_);
    }
    early_.clear();
    feeding_ = false;
    stats_->postings += count_;
    blocks_.clear();
    skips_.clear();
    rest_.clear();
    rest_offsets_.clear();
    list_docs_.clear();
    block_doc_bytes_ = 0;
    bitmap_blocks_ = 0;
    next_ = 0;
    count_ = 0;
  }

 private:
  // Encodes the buffered postings as the next block.
  void EncodeBlock(bool single) {
    const uint32_t block_start = next_;
    gaps_.clear();
    uint32_t max_tf = 0, min_length = UINT8_MAX, min_length_repeated = UINT8_MAX;
    EntryBands bands;  // empty, tf 1
    bands.tf.fill(1);
    for (size_t j = 0; j < docs_.size(); ++j) {
      const DocId doc = docs_[j];
      gaps_.push_back(doc - next_);
      next_ = doc + 1;
      max_tf = std::max(max_tf, freqs_[j]);
      min_length = std::min<uint32_t>(min_length, lengths_[doc]);
      const uint8_t band = bands_[doc], code = BandLengthCode(lengths_[doc]);
      uint8_t& band_code = bands.length_code[band];
      if (band_code == kBandEmpty || code < band_code) band_code = code;
      const auto tf_class = static_cast<uint8_t>(std::min<uint32_t>(freqs_[j], kBandManyTf));
      bands.tf[band] = std::max(bands.tf[band], tf_class);
      if (freqs_[j] > 1) {
        min_length_repeated = std::min<uint32_t>(min_length_repeated, lengths_[doc]);
      }
      FeedChampions(doc, freqs_[j]);  // here, where this DocId's columns are read anyway
      --freqs_[j];                    // stored minus one
    }
    SkipEntry entry{};
    entry.last_doc = docs_.back();
    entry.offset = static_cast<uint32_t>(blocks_.size());  // the skip table's size is added later
    entry.max_tf = static_cast<uint8_t>(std::min<uint32_t>(max_tf, kManyTf));
    entry.min_length = static_cast<uint8_t>(min_length);
    entry.min_length_repeated = static_cast<uint8_t>(min_length_repeated);
    PackBands(bands, &entry);
    // The descriptors are known only after encoding: write the block, then its header.
    block_.clear();
    entry.doc_bits = PackPFor(gaps_, &block_);
    const uint32_t span = entry.last_doc - block_start + 1;
    if (!single && (span <= kBitmapDensity * docs_.size() || (span + 7) / 8 < block_.size())) {
      block_.assign((span + 7) / 8, '\0');
      for (DocId doc : docs_) {
        const uint32_t bit = doc - block_start;
        block_[bit / 8] = static_cast<char>(block_[bit / 8] | (1 << (bit % 8)));
      }
      entry.doc_bits = kBitmapDocs;
      ++stats_->bitmap_blocks;
    }
    const size_t doc_bytes = block_.size();
    if (!single) {
      list_docs_.insert(list_docs_.end(), docs_.begin(), docs_.end());
      block_doc_bytes_ += doc_bytes;
      bitmap_blocks_ += entry.doc_bits == kBitmapDocs;
    }
    entry.freq_bits = PackPFor(freqs_, &block_);
    const size_t freq_bytes = block_.size() - doc_bytes;
    entry.pos_bits = PackPFor(positions_, &block_);
    if (single) {
      const char header[kSingleHeaderBytes] = {static_cast<char>(entry.doc_bits),
                                               static_cast<char>(entry.freq_bits),
                                               static_cast<char>(entry.pos_bits)};
      blocks_.append(header, kSingleHeaderBytes);
    } else {
      skips_.push_back(entry);
    }
    blocks_.append(block_);
    if (!single) {
      rest_offsets_.push_back(static_cast<uint32_t>(rest_.size()));
      rest_.append(block_, doc_bytes);
    }
    stats_->doc_bytes += doc_bytes;
    stats_->freq_bytes += freq_bytes;
    stats_->position_bytes += block_.size() - doc_bytes - freq_bytes;
    stats_->skip_bytes += single ? kSingleHeaderBytes : sizeof(SkipEntry);
    stats_->positions += positions_.size();
    docs_.clear();
    freqs_.clear();
    positions_.clear();
  }

  // Whether a list of more than one block keeps its DocIds as one bitmap: when that takes at
  // most an eighth more bytes than its blocks' DocIds (a list of one posting per 32 DocIds or
  // denser everywhere takes fewer). Counting and filling windows then copy whole words from
  // one bitmap, whatever the blocks' bounds (docs/index-format.md, "Dense lists").
  bool Dense() const {
    const uint64_t bitmap = (uint64_t{skips_.back().last_doc} + 1 + 7) / 8;
    return bitmap <= block_doc_bytes_ + block_doc_bytes_ / 8;
  }

  // Postings reach the champion selector only once the list has more than
  // kChampionMinPostings (until then they wait in early_): a short list costs no reads of the
  // likes column.
  void FeedChampions(DocId doc, uint32_t tf) {
    if (!feeding_ && early_.size() < kChampionMinPostings) {
      early_.emplace_back(doc, tf);
      return;
    }
    StartChampions();
    champions_.Add(doc, tf);
  }
  void StartChampions() {
    if (feeding_) return;
    for (const auto& [doc, tf] : early_) champions_.Add(doc, tf);
    early_.clear();
    feeding_ = true;
  }

  std::span<const uint16_t> lengths_;
  std::span<const uint8_t> bands_;
  SealedStats* stats_;
  ChampionSelector champions_;  // asked at the end of a long list
  std::vector<std::pair<DocId, uint32_t>> early_;
  bool feeding_ = false;
  std::vector<DocId> docs_;  // the block being filled
  std::vector<uint32_t> freqs_, positions_, gaps_;
  std::string block_;
  std::string blocks_;            // the list's encoded blocks so far
  std::vector<SkipEntry> skips_;  // their skip entries (offsets from the first block)
  // The same blocks without their DocIds, where each starts in rest_, and the list's DocIds:
  // for a dense list (Dense()), whose bitmap_ is made from them once the list is complete.
  std::string rest_;
  std::vector<uint32_t> rest_offsets_;
  std::vector<DocId> list_docs_;
  std::vector<uint64_t> bitmap_;
  uint64_t block_doc_bytes_ = 0;  // the blocks' DocId bytes
  uint64_t bitmap_blocks_ = 0;    // blocks stored as bitmaps
  DocId next_ = 0;                // the previous block's last DocId + 1
  uint32_t count_ = 0;
};

// Checks a multi-block list's champions, if it has them: the record fits before `end`, each
// champion is a posting of the list with the frequency it says, and, where the record keeps
// them, its tweet's length and likes band are those of `columns`. Returns a message or "".
std::string CheckChampions(const uint8_t* base, const uint8_t* end, uint32_t doc_freq,
                           uint32_t num_docs, const Columns& columns) {
  if (ReadListEntry(base).offset == 0) return "";
  SealedCursor cursor(base, end, doc_freq, num_docs);
  Champions champions;
  if (!cursor.champions(&champions)) return "bad champions";
  for (size_t i = 0; i < champions.docs.size(); ++i) {
    const DocId d = champions.docs[i];
    cursor.Advance(d);
    if (cursor.doc() != d || cursor.freq() != champions.tfs[i]) {
      return "champion is not a posting of its list";
    }
    if (!champions.lengths.empty() &&
        (champions.lengths[i] != std::min<uint32_t>(columns.length(d), kChampionLongLength) ||
         champions.bands[i] != LikesBand(columns.BaseLikes(d)))) {
      return "champion's length or likes band disagrees with the columns";
    }
  }
  return "";
}

// Checks that a list decodes inside [base, end) into valid DocIds. Returns a message or "".
std::string CheckList(const uint8_t* base, const uint8_t* end, uint32_t doc_freq, uint32_t num_docs,
                      const Columns& columns) {
  const uint32_t blocks = NumBlocks(doc_freq);
  if (doc_freq == 0) return "empty posting list";
  const size_t header = blocks == 1 ? kSingleHeaderBytes : (blocks + 1) * sizeof(SkipEntry);
  if (static_cast<size_t>(end - base) < header) return "posting list header out of bounds";
  // A dense list's bitmap of DocIds 0 to its last, between the skip table and the blocks.
  const uint8_t* dense = nullptr;
  size_t dense_bytes = 0;
  const SkipEntry list = blocks > 1 ? ReadListEntry(base) : SkipEntry{};
  if (list.doc_bits == kBitmapDocs) {
    const uint64_t span = uint64_t{list.last_doc} + 1;
    dense = base + header;
    dense_bytes = (span + 7) / 8;
    if (span > num_docs || dense_bytes > static_cast<size_t>(end - dense)) {
      return "list bitmap out of bounds";
    }
    if (span % 8 != 0 && (dense[dense_bytes - 1] >> (span % 8)) != 0) {
      return "list bitmap has bits past its last DocId";
    }
  }
  uint32_t docs[kBlockSize], freqs[kBlockSize];
  std::vector<uint32_t> positions;
  int64_t previous = -1;
  for (uint32_t b = 0; b < blocks; ++b) {
    const SkipEntry e = ReadSkip(base, doc_freq, b);
    const uint32_t n = std::min(kBlockSize, doc_freq - b * kBlockSize);
    if (e.offset < header + dense_bytes || e.offset > static_cast<size_t>(end - base)) {
      return "block offset out of bounds";
    }
    const uint8_t* p = base + e.offset;
    size_t used = 0;
    if (dense != nullptr && e.doc_bits != kBitmapDocs) return "packed block in a dense list";
    if (e.doc_bits == kBitmapDocs) {
      if (blocks == 1 || static_cast<int64_t>(e.last_doc) <= previous) return "bad bitmap block";
      // The block's bits [lo, hi): its own bitmap's, or its DocIds' in the list's.
      const uint8_t* bits = dense != nullptr ? dense : p;
      const uint64_t lo = dense != nullptr ? static_cast<uint64_t>(previous + 1) : 0;
      const uint64_t hi = dense != nullptr ? uint64_t{e.last_doc} + 1 : e.last_doc - previous;
      const size_t bytes = (hi + 7) / 8;
      if (dense == nullptr && bytes > static_cast<size_t>(end - p)) return "bitmap out of bounds";
      uint32_t set = 0;
      for (uint64_t bit = lo; bit < hi; ++bit) set += (bits[bit / 8] >> (bit % 8)) & 1;
      if (set != n || ((bits[(hi - 1) / 8] >> ((hi - 1) % 8)) & 1) == 0 ||
          (dense == nullptr && hi % 8 != 0 && (bits[bytes - 1] >> (hi % 8)) != 0)) {
        return "bitmap disagrees with its block";
      }
      previous = e.last_doc;
      if (previous >= num_docs) return "DocId out of range";
      if (dense == nullptr) p += bytes;
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
  if (blocks > 1 && list.last_doc != previous) {
    return "list entry disagrees with its blocks";
  }
  return blocks > 1 ? CheckChampions(base, end, doc_freq, num_docs, columns) : "";
}

// Segment file format v7: a section file (section_file.h) with these sections, in this order.
// v6 and v5 are read as well: v6 is v7 whose champion records keep no lengths and likes bands
// (champions.h), v5 is v6 without dense lists (no list entry of v5 has kBitmapDocs).
constexpr std::string_view kMagic = "TSSEG007";
constexpr std::string_view kMagicV6 = "TSSEG006";
constexpr std::string_view kMagicV5 = "TSSEG005";
enum SectionTag : uint32_t {
  kMeta = 1,
  kIdHigh,
  kIdLow,
  kCreatedOffset,
  kUserCodes,
  kUserValues,
  kLangCodes,
  kLangValues,
  kLengths,
  kLikes,
  kOverflowDocs,
  kOverflowLikes,
  kRangeMaxLikes,
  kRangeMaxCreated,
  kTermBlocks,
  kTerms,
  kPostings,
  kPostingChunks,
  kNumSections = kPostingChunks
};
// The postings are checksummed per chunk (kPostingChunks), verified when first read.
constexpr uint32_t kLazySections[] = {kPostings};
constexpr size_t kChunkBytes = size_t{1} << 20;

template <typename T>
std::string_view AsBytes(std::span<const T> v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
template <typename T>
std::string_view AsBytes(const std::vector<T>& v) {
  return AsBytes(std::span<const T>(v));
}

std::string Concatenate(std::span<const std::string_view> pieces) {
  size_t total = 0;
  for (std::string_view p : pieces) total += p.size();
  std::string out;
  out.reserve(total);
  for (std::string_view p : pieces) out.append(p);
  return out;
}

// A view of a section as an array of T; false if its size is not `count` values.
template <typename T>
bool ArrayOf(std::string_view bytes, size_t count, std::span<const T>* out) {
  if (bytes.size() != count * sizeof(T)) return false;
  *out = std::span<const T>(reinterpret_cast<const T*>(bytes.data()), count);
  return true;
}

std::string Packed(std::span<const uint64_t> values) {
  std::string out;
  PackedColumn::Encode(values, &out);
  return out;
}

// A column of codes into the sorted distinct values of `values`.
void DictionaryCode(const std::vector<uint64_t>& values, std::vector<uint64_t>* distinct,
                    std::vector<uint64_t>* codes) {
  *distinct = values;
  std::sort(distinct->begin(), distinct->end());
  distinct->erase(std::unique(distinct->begin(), distinct->end()), distinct->end());
  codes->resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    (*codes)[i] = static_cast<uint64_t>(
        std::lower_bound(distinct->begin(), distinct->end(), values[i]) - distinct->begin());
  }
}

}  // namespace

// The fixed-size metadata section. Outside the anonymous namespace: SealedSegment::Parts, which
// has external linkage, holds one.
struct SealedMeta {
  uint64_t num_docs, total_length, num_terms, user_values, lang_values, overflow;
  int64_t max_created;
  SealedStats stats;
};

// The parsed views of a segment file.
struct SealedSegment::Parts {
  SealedMeta meta{};
  PackedColumns columns;
  std::span<const uint32_t> range_max_likes;
  TermDictionary dictionary;
  std::string_view postings;
  std::span<const uint64_t> chunk_sums;
};

namespace {

// Where a segment file's posting lists go, term by term in increasing order: encodes each
// beside the others and makes the term dictionary.
class SegmentPostingsSink {
 public:
  SegmentPostingsSink(std::span<const uint16_t> lengths, std::span<const uint32_t> likes,
                      std::span<const uint8_t> bands, double avg_length, SealedStats* stats)
      : list_(lengths, likes, bands, avg_length, stats) {}
  // A hint: the lists will take about this many bytes.
  void Reserve(size_t bytes) { out_.reserve(bytes); }
  // `entries` in increasing DocId order, non-empty.
  void Add(std::string_view term, const std::vector<Entry>& entries) {
    for (const Entry& e : entries) list_.Add(e.doc, std::span(e.positions, e.freq));
    EndTerm(term);
  }
  // The list of the next term, to add its postings to in increasing DocId order; then
  // EndTerm(term) (a term given no posting is left out).
  ListEncoder& list() { return list_; }
  void EndTerm(std::string_view term) {
    if (list_.count() == 0) return;
    dictionary_.Add(term, TermDictionary::Entry{list_.count(), static_cast<uint32_t>(out_.size())});
    list_.Finish(&out_);
  }
  std::string& postings() { return out_; }
  TermDictionary Finish() { return dictionary_.Finish(); }

 private:
  ListEncoder list_;
  TermDictionary::Builder dictionary_;
  std::string out_;
};

// Encodes the segment file of `num_docs` rows (row_of(d) is the row of DocId d, asked for
// several times) and the lists `add_postings` adds, and hands it to `sink`; if add_postings
// fails, returns its error instead.
absl::Status EncodeSegmentFile(
    uint32_t num_docs, const std::function<SealedSegmentBuilder::Row(DocId)>& row_of,
    const std::function<absl::Status(SegmentPostingsSink&)>& add_postings,
    const SegmentFileSink& sink) {
  SealedMeta meta{};
  meta.num_docs = num_docs;
  meta.max_created = std::numeric_limits<int64_t>::min();
  const size_t ranges = (num_docs >> Columns::kRangeShift) + 1;
  std::vector<uint16_t> lengths(num_docs);
  std::vector<uint8_t> likes(num_docs), bands(num_docs);
  std::vector<uint32_t> all_likes(num_docs);
  std::vector<uint32_t> overflow_docs, overflow_likes, range_likes(ranges, 0);
  std::vector<int64_t> range_created(ranges, std::numeric_limits<int64_t>::min());
  for (uint32_t d = 0; d < num_docs; ++d) {
    const SealedSegmentBuilder::Row r = row_of(d);
    lengths[d] = r.length;
    bands[d] = static_cast<uint8_t>(LikesBand(r.likes));
    all_likes[d] = r.likes;
    likes[d] = static_cast<uint8_t>(std::min<uint32_t>(r.likes, kLikesOverflow));
    if (r.likes >= kLikesOverflow) {
      overflow_docs.push_back(d);
      overflow_likes.push_back(r.likes);
    }
    uint32_t& rl = range_likes[d >> Columns::kRangeShift];
    rl = std::max(rl, r.likes);
    int64_t& rc = range_created[d >> Columns::kRangeShift];
    rc = std::max(rc, r.created_at_ms);
    meta.max_created = std::max(meta.max_created, r.created_at_ms);
    meta.total_length += r.length;
  }
  // Each packed column through one scratch buffer (a merge's rows are many).
  std::vector<uint64_t> scratch(num_docs);
  auto pack = [&](auto value_of) {
    for (uint32_t d = 0; d < num_docs; ++d) scratch[d] = value_of(row_of(d));
    return Packed(scratch);
  };
  using Row = SealedSegmentBuilder::Row;
  std::vector<std::string> columns;
  columns.push_back(pack([](const Row& r) { return r.id >> 22; }));
  columns.push_back(pack([](const Row& r) { return r.id & ((uint64_t{1} << 22) - 1); }));
  columns.push_back(pack([](const Row& r) {
    return ZigZag(r.created_at_ms - (static_cast<int64_t>(r.id >> 22) + kSnowflakeEpochMillis));
  }));
  std::vector<uint64_t> values, codes;
  for (auto field : {+[](const Row& r) -> uint64_t { return r.user_id; },
                     +[](const Row& r) -> uint64_t { return r.lang; }}) {
    for (uint32_t d = 0; d < num_docs; ++d) scratch[d] = field(row_of(d));
    DictionaryCode(scratch, &values, &codes);
    columns.push_back(Packed(codes));
    columns.push_back(Packed(values));
    (columns.size() == 5 ? meta.user_values : meta.lang_values) = values.size();
  }
  columns.push_back(pack([](const Row& r) { return uint64_t{r.length}; }));
  scratch = {};
  codes = {};
  meta.overflow = overflow_docs.size();

  const double avg_length =
      num_docs == 0 ? 1 : std::max(1.0, static_cast<double>(meta.total_length) / num_docs);
  SegmentPostingsSink encoder(lengths, all_likes, bands, avg_length, &meta.stats);
  if (absl::Status s = add_postings(encoder); !s.ok()) return s;
  const std::string& postings = encoder.postings();
  const TermDictionary dictionary = encoder.Finish();
  meta.num_terms = dictionary.size();
  std::vector<uint64_t> chunk_sums;
  for (size_t at = 0; at < postings.size(); at += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, postings.size() - at);
    chunk_sums.push_back(XXH64(postings.data() + at, n, 0));
  }

  for (const std::string& c : columns) meta.stats.column_bytes += c.size();
  meta.stats.column_bytes +=
      likes.size() + 8 * overflow_docs.size() + 4 * range_likes.size() + 8 * range_created.size();
  meta.stats.posting_bytes = postings.size();
  meta.stats.dictionary_bytes = dictionary.bytes();

  SectionFileWriter file(kMagic, kNumSections);
  file.Add(std::string_view(reinterpret_cast<const char*>(&meta), sizeof(meta)));
  for (const std::string& c : columns) file.Add(c);
  file.Add(AsBytes(likes));
  file.Add(AsBytes(overflow_docs));
  file.Add(AsBytes(overflow_likes));
  file.Add(AsBytes(range_likes));
  file.Add(AsBytes(range_created));
  file.Add(AsBytes(dictionary.block_offsets()));
  file.Add(dictionary.blob());
  file.Add(postings);
  file.Add(AsBytes(chunk_sums));
  return sink(file.Pieces());
}

}  // namespace

std::string SealedSegmentBuilder::Encode(std::vector<DocId>* new_ids) {
  const uint32_t num_docs = static_cast<uint32_t>(rows_.size());
  // Newest first: DocId 0 is the largest TweetId.
  std::vector<uint32_t> order(num_docs);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return rows_[a].id > rows_[b].id; });
  std::vector<DocId> new_id(num_docs);
  std::vector<Row> rows(num_docs);
  for (uint32_t rank = 0; rank < num_docs; ++rank) {
    new_id[order[rank]] = rank;
    rows[rank] = rows_[order[rank]];
  }
  std::string file;
  const absl::Status status = EncodeSegmentFile(
      num_docs, [&](DocId d) { return rows[d]; },
      [&](SegmentPostingsSink& sink) {
        using TermRecords = std::pair<const std::string*, const std::vector<uint32_t>*>;
        std::vector<TermRecords> terms;
        terms.reserve(postings_.size());
        for (const auto& [term, records] : postings_) terms.emplace_back(&term, &records);
        std::sort(terms.begin(), terms.end(),
                  [](const TermRecords& a, const TermRecords& b) { return *a.first < *b.first; });
        std::vector<Entry> entries;
        for (size_t t = 0; t < terms.size(); ++t) {
          // Terms are visited in sorted order, not memory order: fetch ahead what is read next.
          if (t + 8 < terms.size()) __builtin_prefetch(terms[t + 8].second);
          if (t + 4 < terms.size()) __builtin_prefetch(terms[t + 4].second->data());
          const std::vector<uint32_t>& records = *terms[t].second;
          entries.clear();
          for (size_t i = 0; i < records.size(); i += 2 + records[i + 1]) {
            entries.push_back(Entry{new_id[records[i]], &records[i + 2], records[i + 1]});
          }
          std::sort(entries.begin(), entries.end(),
                    [](const Entry& a, const Entry& b) { return a.doc < b.doc; });
          sink.Add(*terms[t].first, entries);
        }
        return absl::OkStatus();
      },
      [&](std::span<const std::string_view> pieces) {
        file = Concatenate(pieces);
        return absl::OkStatus();
      });
  if (!status.ok()) std::abort();  // only the callbacks above can fail, and they do not
  if (new_ids != nullptr) *new_ids = std::move(new_id);
  rows_.clear();
  postings_.clear();
  last_records_ = nullptr;
  return file;
}

namespace {

// The row of DocId d of columns c, as a segment file stores it.
SealedSegmentBuilder::Row RowAt(const Columns& c, DocId d) {
  return {c.tweet_id(d), c.created_at_ms(d), c.user_id(d), c.lang(d), c.length(d), c.likes(d)};
}

// One term's postings in a segment, renumbered and put in DocId order; reused term by term.
class RenumberedList {
 public:
  void Clear() {
    entries_.clear();
    positions_.clear();
    starts_.clear();
    sorted_ = true;
  }
  bool empty() const { return entries_.empty(); }
  // The postings of `cursor` whose documents `map` keeps.
  void Append(PostingCursor& cursor, const std::vector<DocId>& map) {
    for (; cursor.doc() != kEndDoc; cursor.Next()) {
      const DocId nd = map[cursor.doc()];
      if (nd == kEndDoc) continue;
      const std::span<const uint32_t> p = cursor.positions();
      sorted_ = sorted_ && (entries_.empty() || entries_.back().doc < nd);
      starts_.push_back(static_cast<uint32_t>(positions_.size()));
      positions_.insert(positions_.end(), p.begin(), p.end());
      entries_.push_back(Entry{nd, nullptr, static_cast<uint32_t>(p.size())});
    }
  }
  // The entries in DocId order (their positions point into this list).
  const std::vector<Entry>& Finish() {
    for (size_t i = 0; i < entries_.size(); ++i) {
      entries_[i].positions = positions_.data() + starts_[i];
    }
    if (!sorted_) {
      std::sort(entries_.begin(), entries_.end(),
                [](const Entry& a, const Entry& b) { return a.doc < b.doc; });
    }
    return entries_;
  }

 private:
  std::vector<Entry> entries_;
  std::vector<uint32_t> positions_;
  std::vector<uint32_t> starts_;  // of each entry's positions
  bool sorted_ = true;
};

// A source's posting list in a merge, with its DocIds renumbered and dropped ones skipped.
class RenumberedCursor {
 public:
  RenumberedCursor(std::unique_ptr<PostingCursor> cursor, const std::vector<DocId>* map)
      : cursor_(std::move(cursor)), map_(map) {
    Settle();
  }
  DocId doc() const { return doc_; }  // the new DocId; kEndDoc at the end
  std::span<const uint32_t> positions() { return cursor_->positions(); }
  // False at the end.
  bool Next() {
    cursor_->Next();
    Settle();
    return doc_ != kEndDoc;
  }

 private:
  void Settle() {
    for (; cursor_->doc() != kEndDoc; cursor_->Next()) {
      doc_ = (*map_)[cursor_->doc()];
      if (doc_ != kEndDoc) return;
    }
    doc_ = kEndDoc;
  }
  std::unique_ptr<PostingCursor> cursor_;
  const std::vector<DocId>* map_;
  DocId doc_ = kEndDoc;
};

}  // namespace

absl::Status EncodeSegment(const Segment& segment, std::vector<std::string_view> terms,
                           std::vector<DocId>* doc_map, const SegmentFileSink& sink) {
  const Columns& c = segment.columns();
  const DocId visible = segment.VisibleDocs();
  // The live documents, newest first: origin[new DocId] = old DocId.
  std::vector<DocId> origin;
  for (DocId d = 0; d < visible; ++d) {
    if (!c.deleted(d)) origin.push_back(d);
  }
  std::sort(origin.begin(), origin.end(),
            [&](DocId a, DocId b) { return c.tweet_id(a) > c.tweet_id(b); });
  doc_map->assign(visible, kEndDoc);
  for (DocId d = 0; d < origin.size(); ++d) (*doc_map)[origin[d]] = d;
  std::sort(terms.begin(), terms.end());
  return EncodeSegmentFile(
      static_cast<uint32_t>(origin.size()), [&](DocId d) { return RowAt(c, origin[d]); },
      [&](SegmentPostingsSink& postings) {
        RenumberedList list;
        for (std::string_view term : terms) {
          list.Clear();
          std::unique_ptr<PostingCursor> cursor = segment.OpenTerm(term, visible);
          if (cursor != nullptr) list.Append(*cursor, *doc_map);
          if (!list.empty()) postings.Add(term, list.Finish());
        }
        return absl::OkStatus();
      },
      sink);
}

absl::Status MergeSegments(std::span<const SealedSegment* const> sources,
                           std::vector<std::vector<DocId>>* doc_maps, const SegmentFileSink& sink,
                           const std::atomic<bool>* cancel) {
  // The live documents of every source, newest first.
  struct Source {
    uint32_t segment;
    DocId doc;
    TweetId id;
  };
  std::vector<Source> live;
  for (uint32_t s = 0; s < sources.size(); ++s) {
    const Columns& c = sources[s]->columns();
    for (DocId d = 0; d < sources[s]->num_docs(); ++d) {
      if (!c.deleted(d)) live.push_back({s, d, c.tweet_id(d)});
    }
  }
  std::sort(live.begin(), live.end(), [](const Source& a, const Source& b) { return a.id > b.id; });
  doc_maps->assign(sources.size(), {});
  for (uint32_t s = 0; s < sources.size(); ++s)
    (*doc_maps)[s].assign(sources[s]->num_docs(), kEndDoc);
  // Where each new row comes from (8 bytes a row; the row itself is read when encoded).
  std::vector<std::pair<uint32_t, DocId>> origin(live.size());
  for (uint32_t d = 0; d < live.size(); ++d) {
    (*doc_maps)[live[d].segment][live[d].doc] = d;
    origin[d] = {live[d].segment, live[d].doc};
  }
  live = {};
  auto row_of = [&](DocId d) {
    return RowAt(sources[origin[d].first]->columns(), origin[d].second);
  };
  uint64_t posting_bytes = 0;
  for (const SealedSegment* source : sources) posting_bytes += source->stats().posting_bytes;

  return EncodeSegmentFile(
      static_cast<uint32_t>(origin.size()), row_of,
      [&](SegmentPostingsSink& postings) -> absl::Status {
        postings.Reserve(posting_bytes);  // at most what the sources hold: no doubling on the way
        // The sources' dictionaries walked side by side: every term of any source, in order,
        // without holding the union of their terms.
        std::vector<TermDictionary::Iterator> walks;
        for (const SealedSegment* source : sources) walks.push_back(source->Terms());
        std::vector<RenumberedCursor> lists;
        std::string term;
        while (cancel == nullptr || !cancel->load(std::memory_order_relaxed)) {
          const TermDictionary::Iterator* smallest = nullptr;
          for (const TermDictionary::Iterator& w : walks) {
            if (w.Valid() && (smallest == nullptr || w.term() < smallest->term())) smallest = &w;
          }
          if (smallest == nullptr) break;
          term.assign(smallest->term());
          lists.clear();
          for (uint32_t s = 0; s < sources.size(); ++s) {
            if (!walks[s].Valid() || walks[s].term() != term) continue;
            walks[s].Next();
            // Null if damaged (checked below).
            std::unique_ptr<PostingCursor> cursor =
                sources[s]->OpenTerm(term, sources[s]->num_docs());
            if (cursor == nullptr) continue;
            RenumberedCursor list(std::move(cursor), &(*doc_maps)[s]);
            if (list.doc() != kEndDoc) lists.push_back(std::move(list));
          }
          // Each source's DocIds map to increasing new ones (both are newest first), so the
          // lists merge by their heads, a posting at a time.
          while (!lists.empty()) {
            size_t next = 0;
            for (size_t i = 1; i < lists.size(); ++i) {
              if (lists[i].doc() < lists[next].doc()) next = i;
            }
            postings.list().Add(lists[next].doc(), lists[next].positions());
            if (!lists[next].Next()) lists.erase(lists.begin() + static_cast<ptrdiff_t>(next));
          }
          postings.EndTerm(term);  // left out if every match was deleted
        }
        if (cancel != nullptr && cancel->load(std::memory_order_acquire)) {
          return absl::CancelledError("merge cancelled");
        }
        for (const SealedSegment* source : sources) {
          if (absl::Status health = source->Health(); !health.ok()) return health;
        }
        return absl::OkStatus();
      },
      sink);
}

std::unique_ptr<SealedSegment> SealedSegmentBuilder::Build() {
  absl::StatusOr<std::unique_ptr<SealedSegment>> segment =
      SealedSegment::FromBytes(FileBytes::FromBytes(Encode()), "(in memory)", /*trusted=*/true);
  // Bytes just encoded here always read back; anything else is a bug in this file.
  if (!segment.ok()) std::abort();
  return *std::move(segment);
}

absl::StatusOr<std::unique_ptr<SealedSegment>> SealedSegment::Load(const std::string& path) {
  absl::StatusOr<std::unique_ptr<FileBytes>> bytes = FileBytes::Map(path);
  if (!bytes.ok()) return bytes.status();
  return FromBytes(*std::move(bytes), path, /*trusted=*/false);
}

namespace {

// Reads the packed columns and their sizes; "" or what is wrong.
std::string ReadColumns(const SectionFile& file, const SealedMeta& meta, PackedColumns* c,
                        std::span<const uint32_t>* range_max_likes) {
  const uint32_t n = static_cast<uint32_t>(meta.num_docs);
  const std::pair<PackedColumn*, std::pair<uint32_t, uint64_t>> packed[] = {
      {&c->id_high, {kIdHigh, n}},
      {&c->id_low, {kIdLow, n}},
      {&c->created_offset, {kCreatedOffset, n}},
      {&c->user_codes, {kUserCodes, n}},
      {&c->user_values, {kUserValues, meta.user_values}},
      {&c->lang_codes, {kLangCodes, n}},
      {&c->lang_values, {kLangValues, meta.lang_values}},
      {&c->lengths, {kLengths, n}}};
  for (const auto& [column, where] : packed) {
    if (where.second > UINT32_MAX) return "bad column size";
    absl::StatusOr<PackedColumn> view =
        PackedColumn::View(file.sections[where.first], static_cast<uint32_t>(where.second));
    if (!view.ok()) return StrCat("section ", where.first, ": ", view.status().message());
    *column = *view;
  }
  if ((n > 0 && (meta.user_values == 0 || meta.lang_values == 0))) return "empty dictionary";
  std::span<const uint8_t> likes;
  std::span<const int64_t> range_created;
  const size_t ranges = (n >> Columns::kRangeShift) + 1;
  if (!ArrayOf(file.sections[kLikes], n, &likes) ||
      !ArrayOf(file.sections[kOverflowDocs], meta.overflow, &c->overflow_docs) ||
      !ArrayOf(file.sections[kOverflowLikes], meta.overflow, &c->overflow_likes) ||
      !ArrayOf(file.sections[kRangeMaxLikes], ranges, range_max_likes) ||
      !ArrayOf(file.sections[kRangeMaxCreated], ranges, &range_created)) {
    return "column sizes disagree";
  }
  for (size_t i = 0; i < c->overflow_docs.size(); ++i) {
    const uint32_t d = c->overflow_docs[i];
    if (d >= n || (i > 0 && d <= c->overflow_docs[i - 1]) || likes[d] != kLikesOverflow) {
      return "bad likes overflow table";
    }
  }
  c->likes = likes.data();
  c->range_max_created = range_created.data();
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<SealedSegment>> SealedSegment::FromBytes(
    std::unique_ptr<FileBytes> bytes, std::string name, bool trusted) {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(StrCat("segment file ", name, " is corrupt: ", why));
  };
  std::string_view magic = kMagic;
  for (const std::string_view older : {kMagicV6, kMagicV5}) {
    if (bytes->view().starts_with(older)) magic = older;
  }
  absl::StatusOr<SectionFile> file =
      ReadSectionFile(bytes->view(), magic, kNumSections, kLazySections);
  if (!file.ok()) return corrupt(AsStd(file.status().message()));
  Parts parts;
  if (file->sections[kMeta].size() != sizeof(SealedMeta)) return corrupt("bad metadata");
  std::memcpy(&parts.meta, file->sections[kMeta].data(), sizeof(SealedMeta));
  const SealedMeta& meta = parts.meta;
  if (meta.num_docs >= kEndDoc || meta.num_terms > UINT32_MAX) return corrupt("bad metadata");
  if (std::string why = ReadColumns(*file, meta, &parts.columns, &parts.range_max_likes);
      !why.empty()) {
    return corrupt(why);
  }
  parts.postings = file->sections[kPostings];
  if (parts.postings.size() != meta.stats.posting_bytes || parts.postings.size() > UINT32_MAX ||
      !ArrayOf(file->sections[kPostingChunks],
               (parts.postings.size() + kChunkBytes - 1) / kChunkBytes, &parts.chunk_sums)) {
    return corrupt("postings sizes disagree");
  }
  std::span<const uint32_t> blocks;
  if (file->sections[kTermBlocks].size() % 4 != 0) return corrupt("dictionary sizes disagree");
  ArrayOf(file->sections[kTermBlocks], file->sections[kTermBlocks].size() / 4, &blocks);
  absl::StatusOr<TermDictionary> dictionary = TermDictionary::ViewParts(
      file->sections[kTerms], blocks, static_cast<uint32_t>(meta.num_terms));
  if (!dictionary.ok()) return corrupt(AsStd(dictionary.status().message()));
  parts.dictionary = *std::move(dictionary);
  std::unique_ptr<SealedSegment> segment(new SealedSegment(std::move(bytes), name, parts));
  if (trusted) {
    for (size_t w = 0; w < (parts.chunk_sums.size() + 63) / 64; ++w) {
      segment->verified_[w].store(~uint64_t{0}, std::memory_order_relaxed);
    }
  }
  return segment;
}

SealedSegment::SealedSegment(std::unique_ptr<FileBytes> bytes, std::string name, const Parts& parts)
    : Segment(std::make_unique<Columns>(static_cast<uint32_t>(parts.meta.num_docs), parts.columns,
                                        parts.range_max_likes, parts.meta.max_created)),
      bytes_(std::move(bytes)),
      name_(std::move(name)),
      num_docs_(static_cast<uint32_t>(parts.meta.num_docs)),
      total_length_(parts.meta.total_length),
      dictionary_(parts.dictionary),
      postings_(reinterpret_cast<const uint8_t*>(parts.postings.data())),
      postings_size_(parts.postings.size()),
      chunk_sums_(parts.chunk_sums),
      verified_(new std::atomic<uint64_t>[(parts.chunk_sums.size() + 63) / 64 + 1]()),
      stats_(parts.meta.stats) {
  const size_t postings_offset = static_cast<size_t>(postings_ - bytes_->data());
  bytes_->AdviseRandom(postings_offset, postings_size_);
}

SealedSegment::~SealedSegment() = default;

absl::Status SealedSegment::Save(const std::string& path) const {
  return WriteFileAtomically(path, bytes_->view());
}

size_t SealedSegment::FileBytesSize() const { return bytes_->size(); }
bool SealedSegment::mapped() const { return bytes_->mapped(); }

void SealedSegment::MarkDamaged(std::string why) const {
  absl::MutexLock lock(&damage_mu_);
  if (damage_.empty()) damage_ = StrCat("segment file ", name_, " is corrupt: ", why);
  damaged_.store(true, std::memory_order_release);
}

std::span<const LikesTier> SealedSegment::likes_tiers() const {
  std::call_once(tiers_once_, [this] {
    tiers_ = BuildLikesTiers(columns(), num_docs_);
    size_t bytes = 0;
    for (const LikesTier& t : tiers_) bytes += t.docs.capacity() * sizeof(DocId);
    tiers_bytes_.store(bytes, std::memory_order_release);
  });
  return tiers_;
}

void SealedSegment::BuildDerived(const std::atomic<bool>* cancel) const {
  std::call_once(tier_postings_once_, [&] {
    length_classes_owned_ = std::make_unique<LengthClasses>(columns(), num_docs_);
    length_classes_.store(length_classes_owned_.get(), std::memory_order_release);
    std::vector<std::pair<uint32_t, std::string>> doc_freqs;  // of the long lists
    const uint32_t long_list = std::max(kTierListMinDocs, num_docs_ / kTierListMinShare);
    dictionary_.ForEach([&](std::string_view term, TermDictionary::Entry entry) {
      if (entry.doc_freq >= long_list) doc_freqs.emplace_back(entry.doc_freq, term);
    });
    if (const LikesTier* tier = TierForPostings(likes_tiers(), num_docs_); tier != nullptr) {
      std::vector<std::string> terms;
      for (const auto& [doc_freq, term] : doc_freqs) terms.push_back(term);
      tier_postings_owned_ = index::BuildTierPostings(*this, num_docs_, *tier, terms, cancel);
      if (tier_postings_owned_ != nullptr) {
        tier_postings_bytes_.store(tier_postings_owned_->MemoryBytes(), std::memory_order_release);
        tier_postings_.store(tier_postings_owned_.get(), std::memory_order_release);
      }
    }
    const std::vector<std::string> words = PairWords(num_docs_, doc_freqs);
    pair_champions_owned_ = BuildPairChampions(*this, num_docs_, words, cancel);
    if (pair_champions_owned_ != nullptr) {
      pair_champions_bytes_.store(pair_champions_owned_->MemoryBytes(), std::memory_order_release);
      pair_champions_.store(pair_champions_owned_.get(), std::memory_order_release);
    }
    lead_points_owned_ =
        BuildLeadPoints(*this, num_docs_, LeadWords(num_docs_, doc_freqs, words), cancel);
    if (lead_points_owned_ != nullptr) {
      lead_points_bytes_.store(lead_points_owned_->MemoryBytes(), std::memory_order_release);
      lead_points_.store(lead_points_owned_.get(), std::memory_order_release);
    }
  });
}

absl::Status SealedSegment::Health() const {
  if (!damaged_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&damage_mu_);
  return absl::DataLossError(damage_);
}

bool SealedSegment::VerifyChunks(size_t begin, size_t end) const {
  for (size_t chunk = begin / kChunkBytes; chunk * kChunkBytes < end; ++chunk) {
    std::atomic<uint64_t>& word = verified_[chunk / 64];
    const uint64_t bit = uint64_t{1} << (chunk % 64);
    if (word.load(std::memory_order_acquire) & bit) continue;
    const size_t at = chunk * kChunkBytes;
    const size_t n = std::min(kChunkBytes, postings_size_ - at);
    if (XXH64(postings_ + at, n, 0) != chunk_sums_[chunk]) {
      MarkDamaged(StrCat("checksum mismatch in postings chunk ", chunk));
      return false;
    }
    word.fetch_or(bit, std::memory_order_acq_rel);  // two racing verifiers are harmless
  }
  return true;
}

std::unique_ptr<PostingCursor> SealedSegment::OpenTerm(std::string_view term, DocId) const {
  const std::optional<TermDictionary::Located> found =
      dictionary_.Locate(term, static_cast<uint32_t>(postings_size_));
  if (!found) return nullptr;
  const TermDictionary::Entry& entry = found->entry;
  if (entry.doc_freq == 0 || entry.offset >= found->end || found->end > postings_size_) {
    MarkDamaged(StrCat("term '", term, "' points outside the postings"));
    return nullptr;
  }
  if (damaged_.load(std::memory_order_acquire) || !VerifyChunks(entry.offset, found->end)) {
    return nullptr;
  }
  return std::make_unique<SealedCursor>(postings_ + entry.offset, postings_ + found->end,
                                        entry.doc_freq, num_docs_);
}

bool SealedSegment::DenseList(std::string_view term) const {
  const std::optional<TermDictionary::Entry> entry = dictionary_.Find(term);
  if (!entry || NumBlocks(entry->doc_freq) < 2 ||
      entry->offset + sizeof(SkipEntry) > postings_size_) {
    return false;
  }
  return ReadListEntry(postings_ + entry->offset).doc_bits == kBitmapDocs;
}

uint32_t SealedSegment::DocFreq(std::string_view term) const {
  const std::optional<TermDictionary::Entry> entry = dictionary_.Find(term);
  return entry ? entry->doc_freq : 0;
}

void SealedSegment::DocFreqs(std::span<const Segment* const> segments, std::string_view term,
                             std::span<uint32_t> out) {
  std::vector<size_t> sealed;  // indexes into segments
  std::vector<const TermDictionary*> dictionaries;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (const auto* s = dynamic_cast<const SealedSegment*>(segments[i]); s != nullptr) {
      sealed.push_back(i);
      dictionaries.push_back(&s->dictionary_);
    } else {
      out[i] = segments[i]->DocFreq(term);
    }
  }
  std::vector<std::optional<TermDictionary::Entry>> entries(sealed.size());
  TermDictionary::LocateInEach(dictionaries, term, entries);
  for (size_t j = 0; j < sealed.size(); ++j) {
    const auto& s = static_cast<const SealedSegment&>(*segments[sealed[j]]);
    out[sealed[j]] = entries[j] ? entries[j]->doc_freq : 0;
    if (entries[j] && entries[j]->offset < s.postings_size_) {
      __builtin_prefetch(s.postings_ + entries[j]->offset);
    }
  }
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

uint32_t SealedSegment::num_live_docs() const { return num_docs_ - columns().deleted_count(); }

size_t SealedSegment::MemoryBytes() const {
  size_t bytes = columns().MemoryBytes() + (chunk_sums_.size() + 63) / 64 * 8 + sizeof(*this) +
                 dictionary_.memory_bytes() + tiers_bytes_.load(std::memory_order_acquire) +
                 tier_postings_bytes_.load(std::memory_order_acquire) +
                 pair_champions_bytes_.load(std::memory_order_acquire) +
                 lead_points_bytes_.load(std::memory_order_acquire);
  if (const LengthClasses* classes = length_classes(); classes != nullptr) {
    bytes += classes->MemoryBytes();
  }
  if (!bytes_->mapped()) bytes += bytes_->size();
  return bytes;
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

absl::Status SealedSegment::VerifyAll() const {
  if (absl::Status s = Health(); !s.ok()) return s;
  if (absl::Status whole = VerifyWholeFile(bytes_->view()); !whole.ok()) {
    MarkDamaged(std::string(AsStd(whole.message())));
    return Health();
  }
  if (!VerifyChunks(0, postings_size_)) return Health();
  // Each term's list must lie between its offset and the next term's, and decode into valid
  // DocIds.
  absl::StatusOr<TermDictionary> checked = TermDictionary::FromParts(
      dictionary_.blob(), dictionary_.block_offsets(), dictionary_.size());
  if (!checked.ok()) {
    MarkDamaged(std::string(AsStd(checked.status().message())));
    return Health();
  }
  std::string previous_term, problem;
  TermDictionary::Entry previous{};
  bool has_previous = false;
  auto check = [&](size_t end) {
    if (!problem.empty() || !has_previous) return;
    if (previous.offset > end || end > postings_size_) {
      problem = StrCat("term '", previous_term, "': posting offsets out of bounds");
      return;
    }
    const std::string why = CheckList(postings_ + previous.offset, postings_ + end,
                                      previous.doc_freq, num_docs_, columns());
    if (!why.empty()) problem = StrCat("term '", previous_term, "': ", why);
  };
  dictionary_.ForEach([&](std::string_view term, TermDictionary::Entry entry) {
    check(entry.offset);
    previous_term.assign(term);
    previous = entry;
    has_previous = true;
  });
  check(postings_size_);
  if (!problem.empty()) MarkDamaged(problem);
  return Health();
}

// Updates file: "TSUPD001", u32 num_docs, u32 likes entries, the deleted bits (u64 words),
// the entries {u32 doc, u32 likes}, u64 XXH64 of everything before.
namespace {
constexpr std::string_view kUpdatesMagic = "TSUPD001";
}  // namespace

std::string SealedSegment::EncodeUpdates() const {
  std::string out(kUpdatesMagic);
  std::vector<uint32_t> likes;
  columns().ForEachChangedLikes([&](DocId d, uint32_t v) {
    likes.push_back(d);
    likes.push_back(v);
  });
  const uint32_t header[2] = {num_docs_, static_cast<uint32_t>(likes.size() / 2)};
  out.append(reinterpret_cast<const char*>(header), sizeof(header));
  std::vector<uint64_t> deleted((num_docs_ + 63) / 64);
  for (DocId d = 0; d < num_docs_; ++d) {
    if (columns().deleted(d)) deleted[d / 64] |= uint64_t{1} << (d % 64);
  }
  out.append(AsBytes(deleted));
  out.append(AsBytes(likes));
  const uint64_t sum = XXH64(out.data(), out.size(), 0);
  out.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  return out;
}

absl::Status SealedSegment::ApplyUpdates(std::string_view bytes, std::string_view name) {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(StrCat("updates file ", name, " is corrupt: ", why));
  };
  const size_t words = (num_docs_ + 63) / 64;
  if (bytes.size() < kUpdatesMagic.size() + 16 || bytes.substr(0, 8) != kUpdatesMagic) {
    return corrupt("bad header");
  }
  uint64_t sum;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (XXH64(bytes.data(), bytes.size() - 8, 0) != sum) return corrupt("checksum mismatch");
  uint32_t header[2];
  std::memcpy(header, bytes.data() + 8, sizeof(header));
  if (header[0] != num_docs_ ||
      bytes.size() != 8 + sizeof(header) + words * 8 + uint64_t{header[1]} * 8 + 8) {
    return corrupt("sizes disagree with the segment");
  }
  const char* p = bytes.data() + 8 + sizeof(header);
  for (DocId d = 0; d < num_docs_; ++d) {
    uint64_t word;
    std::memcpy(&word, p + (d / 64) * 8, 8);
    if ((word >> (d % 64)) & 1) mutable_columns().MarkDeleted(d);
  }
  p += words * 8;
  for (uint32_t i = 0; i < header[1]; ++i) {
    uint32_t entry[2];
    std::memcpy(entry, p + i * 8, 8);
    if (entry[0] >= num_docs_) return corrupt("likes entry out of range");
    mutable_columns().SetLikes(entry[0], entry[1]);
  }
  return absl::OkStatus();
}

}  // namespace tweetsearch::index
