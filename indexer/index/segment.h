// Segment: the unit of the index. A segment holds a run of tweets with segment-local DocIds
// (0, 1, 2, ...), their per-tweet columns, and a posting list per term.
//
// Two kinds implement it: the ActiveSegment, which takes writes, and the SealedSegment, a
// compressed read-only form. Query evaluation sees only this interface.
//
// Thread-safety: every const method may be called from any thread at any time, also while the
// single writer appends to an active segment. Likes and the deleted flag are the only mutable
// per-tweet state of a sealed segment; they live on the heap, written by the index's writer.
#ifndef TWEETSEARCH_INDEXER_INDEX_SEGMENT_H_
#define TWEETSEARCH_INDEXER_INDEX_SEGMENT_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/ids.h"
#include "indexer/index/count_cache.h"
#include "indexer/index/likes_overlay.h"
#include "indexer/index/packed_column.h"

namespace tweetsearch::index {

using DocId = uint32_t;  // segment-local
struct Champions;
struct LikesTier;
class TierPostings;
class LeadPoints;
class LengthClasses;
class PairChampions;
inline constexpr DocId kEndDoc = std::numeric_limits<DocId>::max();

// A tweet as the index receives it.
struct IndexDoc {
  TweetId id = 0;
  UserId user_id = 0;
  std::string user_name;      // indexed as the term "from:<name>", case-folded
  std::string text;           // UTF-8
  int64_t created_at_ms = 0;  // Unix milliseconds
  std::string lang;           // BCP 47 code such as "en"; indexed as "lang:<code>"; may be empty
  uint32_t likes = 0;
};

// Likes bands: band 0 holds tweets with no like, band b (1 to 14) those with 2^(b-1) to 2^b - 1
// likes, band 15 those with 16,384 or more. Sealed posting lists record per block, for each
// band, the shortest tweet of the band that holds the term, so that a score bound can pair
// high like counts with the lengths that really go with them (docs/ranking.md, "Pruning").
inline constexpr int kLikesBands = 16;
inline int LikesBand(uint32_t likes) {
  return likes == 0 ? 0 : std::min(kLikesBands - 1, static_cast<int>(std::bit_width(likes)));
}
// The most likes a tweet of `band` can have.
inline uint32_t LikesBandMax(int band) {
  return band >= kLikesBands - 1 ? std::numeric_limits<uint32_t>::max() : (uint32_t{1} << band) - 1;
}
// Per likes band, a block keeps the shortest length as a 5-bit code (0: no posting in the
// band): lengths 1 to 22 exactly, longer ones rounded down to one of nine steps.
inline constexpr uint8_t kBandEmpty = 0;
inline constexpr std::array<uint8_t, 32> kBandLengthFloor = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
    16, 17, 18, 19, 20, 21, 22, 24, 26, 28, 30, 33, 36, 40, 48, 56};
// The code of a document of `length` (at least 1): that of the longest floor not above it.
inline uint8_t BandLengthCode(uint32_t length) {
  const auto it = std::upper_bound(kBandLengthFloor.begin() + 1, kBandLengthFloor.end(),
                                   std::max<uint32_t>(length, 1));
  return static_cast<uint8_t>(it - kBandLengthFloor.begin() - 1);
}
// And the band's largest term frequency in 2 bits: 1, 2, 3, or kBandManyTf ("4 or more":
// the block's max_tf bounds it).
inline constexpr uint8_t kBandManyTf = 4;

// What is known about the postings of one block (or a whole list) for score upper bounds:
// every posting has a term frequency of at most max_tf and a document at least min_length
// long, and those with a term frequency above one have documents at least
// min_length_repeated long. (Separating the two keeps the bound tight: in tweets the longest
// documents tend to repeat words, and the shortest do not.) Per likes band (of the likes a
// tweet was written with), band_length is 0 if no posting's tweet is in the band, else a
// lower bound of their lengths (kBandLengthFloor of the shortest one's code), and band_tf
// bounds their term frequencies (kBandManyTf: max_tf does). The defaults promise nothing.
struct PostingBound {
  uint32_t max_tf = std::numeric_limits<uint32_t>::max();
  uint32_t min_length = 0;
  uint32_t min_length_repeated = 0;
  std::array<uint8_t, kLikesBands> band_length = FilledBands(1);
  std::array<uint8_t, kLikesBands> band_tf = FilledBands(kBandManyTf);

  static constexpr std::array<uint8_t, kLikesBands> FilledBands(uint8_t v) {
    std::array<uint8_t, kLikesBands> a{};
    a.fill(v);
    return a;
  }
};

// Iterates an ascending list of DocIds: what counting and looking up need, and all that a
// list of rows without postings (a pair's rows, pair_champions.h) can answer. A new cursor sits
// on its first DocId (or at kEndDoc when empty).
class DocCursor {
 public:
  virtual ~DocCursor() = default;
  virtual DocId doc() const = 0;
  virtual void Next() = 0;
  // Moves to the first DocId >= target. Requires: target >= doc().
  virtual void Advance(DocId target) = 0;
  // Number of DocIds in the list (for a term: documents containing it).
  virtual uint32_t size() const = 0;
  // Batch reading, one call for many postings (counting an AND without a call per posting):
  // copies the postings from doc() on that are below `end`, at most `max` of them, into `out`,
  // and moves past them. Returns how many were copied.
  virtual size_t NextDocs(DocId end, DocId* out, size_t max) {
    size_t n = 0;
    for (DocId d = doc(); n < max && d < end; Next(), d = doc()) out[n++] = d;
    return n;
  }
  // Keeps, in order, those of the ascending DocIds docs[0..n) that the list holds (keep) or
  // does not hold (!keep), and returns how many are kept; the cursor moves to its first posting
  // at or after the last DocId asked about. Requires: the DocIds asked about, over all calls
  // and Advance targets, do not decrease.
  virtual size_t Filter(DocId* docs, size_t n, bool keep) {
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (doc() < docs[i]) Advance(docs[i]);
      if ((doc() == docs[i]) == keep) docs[kept++] = docs[i];
    }
    return kept;
  }
  // Whether FillBits copies a window's bits from one bitmap of the list (a dense list:
  // docs/index-format.md), about a word per 64 DocIds whatever the postings.
  virtual bool fills_words() const { return false; }
  // Sets in `words` bit (d - from) for every posting d in [from, end), and moves to the first
  // posting at or after `end` (or kEndDoc): for counting over bitmaps of a window of DocIds
  // rather than a call per posting. `words` holds at least (end - from + 63) / 64 words, and
  // the words past the one of the cursor's first posting in the window are clear (callers
  // clear the window first): a sealed cursor stores whole words. Postings before `from` are
  // skipped.
  virtual void FillBits(DocId from, DocId end, uint64_t* words) {
    if (doc() < from) Advance(from);
    for (DocId d = doc(); d < end; Next(), d = doc()) {
      words[(d - from) / 64] |= uint64_t{1} << ((d - from) % 64);
    }
  }
  // Keeps in `words` (bit i for DocId from + i, (end - from + 63) / 64 words) only the bits
  // of DocIds the list holds (keep) or does not hold (!keep), as FillBits would set them
  // (postings before `from` or before the cursor's are not held), moves as FillBits does, and
  // returns how many bits are left set. A dense list ANDs its own words in place.
  virtual uint64_t AndBits(DocId from, DocId end, uint64_t* words, bool keep);
};

// Iterates one term's postings in increasing DocId order, with what ranking reads of each.
class PostingCursor : public DocCursor {
 public:
  // Term frequency in doc(). Requires: doc() != kEndDoc.
  virtual uint32_t freq() const = 0;
  // Positions of the term in doc(), ascending. Valid until the cursor moves.
  virtual std::span<const uint32_t> positions() = 0;
  // The place of doc() among the list's postings (0: the first), where the list knows it
  // (sealed segments: lead_points.h); UINT32_MAX elsewhere.
  virtual uint32_t ordinal() const { return UINT32_MAX; }
  // Last DocId of the block holding doc(), and the bound over that block. Lists without
  // blocks report the whole list as one block.
  virtual DocId block_last_doc() const = 0;
  virtual PostingBound block_bound() const = 0;
  virtual PostingBound list_bound() const = 0;
  // The block-level view, for pruning without decoding: moves a "shallow" position, apart
  // from doc(), to the first block whose last DocId is >= target, and returns that last DocId
  // (kEndDoc if no block is left); shallow_bound() is that block's bound. Every posting of the
  // list in [target, returned DocId] is in that block. Requires: targets do not decrease.
  // Lists without blocks answer for the whole list.
  virtual DocId ShallowAdvance(DocId target) {
    (void)target;
    return doc() == kEndDoc ? kEndDoc : kEndDoc - 1;
  }
  virtual PostingBound shallow_bound() const { return list_bound(); }
  // The likes bands (bit b) of shallow_bound() that hold a posting, without the rest.
  virtual uint32_t shallow_bands() const {
    const PostingBound b = shallow_bound();
    uint32_t bands = 0;
    for (int i = 0; i < kLikesBands; ++i) {
      bands |= static_cast<uint32_t>(b.band_length[i] != kBandEmpty) << i;
    }
    return bands;
  }
  // The list's champions (champions.h), if it has them: false for short lists, active
  // segments and files written before champions existed.
  virtual bool champions(Champions* out) const {
    (void)out;
    return false;
  }
};

// Packs a language code of up to four ASCII bytes into an integer column value.
uint32_t PackLang(std::string_view lang);

// Keeps, in order, those of the ascending docs[0..n) that any of `cursors` holds, and returns
// how many: the candidates no list holds are narrowed a block at a time (PostingCursor::Filter,
// which moves each cursor as that says), each list asked only about those the lists before it
// lack, rather than a virtual call per DocId and list. A cursor is left at or after the last
// DocId it was asked about, which may be below docs[n - 1].
size_t FilterAny(std::span<PostingCursor* const> cursors, DocId* docs, size_t n);

// The per-tweet values of a sealed segment, compact and read-only, viewed in its file (see
// docs/index-format.md, "Compact columns"). Built by SealedSegment.
struct PackedColumns {
  PackedColumn id_high;         // TweetId >> 22 (a snowflake's milliseconds)
  PackedColumn id_low;          // TweetId & (2^22 - 1)
  PackedColumn created_offset;  // ZigZag(created_at_ms - the snowflake time of the id)
  PackedColumn user_codes;      // index into user_values
  PackedColumn user_values;     // the segment's distinct user ids, ascending
  PackedColumn lang_codes;
  PackedColumn lang_values;
  PackedColumn lengths;
  const uint8_t* likes = nullptr;           // kLikesOverflow: in the overflow table
  std::span<const uint32_t> overflow_docs;  // ascending
  std::span<const uint32_t> overflow_likes;
  const int64_t* range_max_created = nullptr;  // per range of kRangeSize DocIds
};
inline constexpr uint8_t kLikesOverflow = 255;

// Per-tweet columns, kept beside the postings (never inside them). Two layouts behind one
// interface: dense heap arrays of fixed capacity (the active segment, written row by row), or
// packed columns in a mapped file (a sealed segment). Either way the likes and deleted state
// that changes after a row is written lives on the heap: atomics per row in the dense layout;
// for packed columns a deleted bit per row and, for rows whose likes changed, a "changed" bit
// and an entry in a LikesOverlay.
class Columns {
 public:
  explicit Columns(uint32_t capacity);
  // Packed columns of `rows` rows; `range_max_likes` seeds the likes bounds (which then rise on
  // the heap as likes change).
  Columns(uint32_t rows, const PackedColumns& packed, std::span<const uint32_t> range_max_likes,
          int64_t max_created_at_ms);
  Columns(const Columns&) = delete;
  Columns& operator=(const Columns&) = delete;
  ~Columns();

  uint32_t capacity() const { return capacity_; }
  // Heap bytes the columns hold (allocated for the whole capacity).
  size_t MemoryBytes() const;
  TweetId tweet_id(DocId d) const {
    if (packed_ == nullptr) return tweet_id_[d];
    return packed_->id_high.Get(d) << 22 | packed_->id_low.Get(d);
  }
  int64_t created_at_ms(DocId d) const;
  UserId user_id(DocId d) const {
    if (packed_ == nullptr) return user_id_[d];
    return packed_->user_values.Get(Code(packed_->user_codes.Get(d), packed_->user_values));
  }
  uint32_t lang(DocId d) const {
    if (packed_ == nullptr) return lang_[d];
    return static_cast<uint32_t>(
        packed_->lang_values.Get(Code(packed_->lang_codes.Get(d), packed_->lang_values)));
  }
  uint16_t length(DocId d) const {
    if (packed_ == nullptr) return length_[d];
    return static_cast<uint16_t>(packed_->lengths.Get(d));
  }
  uint32_t likes(DocId d) const {
    if (packed_ == nullptr) return likes_[d].load(std::memory_order_acquire);
    if ((changed_[d / 64].load(std::memory_order_acquire) >> (d % 64)) & 1) {
      if (std::optional<uint32_t> v = overlay_->Get(d)) return *v;
    }
    return BaseLikes(d);
  }
  // The likes the row was written with (for packed columns: as in the file).
  uint32_t BaseLikes(DocId d) const;
  // Calls fn(d, BaseLikes(d)) for rows [0, rows) in order, faster than row by row.
  template <typename Fn>
  void ForEachBaseLikes(DocId rows, const Fn& fn) const {
    if (packed_ == nullptr) {
      for (DocId d = 0; d < rows; ++d) fn(d, likes_[d].load(std::memory_order_acquire));
      return;
    }
    size_t overflow = 0;  // the next overflow entry, both ascending
    const auto& docs = packed_->overflow_docs;
    for (DocId d = 0; d < rows; ++d) {
      const uint8_t small = packed_->likes[d];
      if (small != kLikesOverflow) {
        fn(d, small);
        continue;
      }
      while (overflow < docs.size() && docs[overflow] < d) ++overflow;
      fn(d, overflow < docs.size() && docs[overflow] == d ? packed_->overflow_likes[overflow]
                                                          : uint32_t{kLikesOverflow});
    }
  }
  bool deleted(DocId d) const {
    return (deleted_[d / 64].load(std::memory_order_acquire) >> (d % 64)) & 1;
  }

  // DocIds come in ranges of kRangeSize. For each range the columns keep upper bounds of likes
  // and created_at, so that sort modes ranking by them can skip whole ranges. The likes bound
  // only ever rises (a like count that drops leaves it high, which is still a bound).
  static constexpr int kRangeShift = 6;
  static constexpr DocId kRangeSize = DocId{1} << kRangeShift;
  // The first DocId of the range after the one holding `d`.
  static DocId RangeEnd(DocId d) { return ((d >> kRangeShift) + 1) << kRangeShift; }
  uint32_t range_max_likes(DocId d) const {
    return range_max_likes_[d >> kRangeShift].load(std::memory_order_acquire);
  }
  int64_t range_max_created_at_ms(DocId d) const {
    if (packed_ != nullptr) return packed_->range_max_created[d >> kRangeShift];
    return range_max_created_[d >> kRangeShift].load(std::memory_order_acquire);
  }
  // Ranges come in blocks of kBlockSize DocIds: the largest created_at_ms of the block holding
  // `d` (of its ranges'). Packed columns keep these from the start; dense ones read the
  // block's ranges.
  static constexpr int kBlockShift = 12;
  static constexpr DocId kBlockSize = DocId{1} << kBlockShift;
  int64_t block_max_created_at_ms(DocId d) const {
    if (packed_ != nullptr) return block_max_created_[d >> kBlockShift];
    int64_t newest = std::numeric_limits<int64_t>::min();
    const DocId first = d >> kBlockShift << kBlockShift;
    for (DocId r = first; r < first + kBlockSize && r < capacity_; r += kRangeSize) {
      newest = std::max(newest, range_max_created_at_ms(r));
    }
    return newest;
  }
  // The smallest created_at_ms of any row in the range holding `d` (the maximum int64 for a
  // range without rows), for counts over time. Packed columns derive these bounds from the
  // column (not the file) on first use: call PrepareRangeMinCreated() once before reading them.
  void PrepareRangeMinCreated() const;
  int64_t range_min_created_at_ms(DocId d) const {
    if (packed_ != nullptr) {
      return packed_range_min_created_.load(std::memory_order_acquire)[d >> kRangeShift];
    }
    return range_min_created_[d >> kRangeShift].load(std::memory_order_acquire);
  }
  // The largest created_at_ms of any row (the minimum int64 while empty).
  int64_t max_created_at_ms() const { return max_created_.load(std::memory_order_acquire); }
  // The first DocId at or after `from` (and below `end`) whose range may hold a tweet with at
  // least `likes` likes, or kEndDoc.
  DocId NextRangeWithLikes(DocId from, DocId end, uint64_t likes) const {
    for (DocId r = from >> kRangeShift; (r << kRangeShift) < end; ++r) {
      if (range_max_likes_[r].load(std::memory_order_acquire) >= likes) {
        return std::max(from, r << kRangeShift);
      }
    }
    return kEndDoc;
  }

  // Appends the rows whose likes changed since they were written (packed columns; none for
  // dense ones) to `out`, ascending. Any thread: a change made meanwhile may be missed.
  void ChangedLikesRows(std::vector<DocId>* out) const;

  // Rows deleted, and rows whose likes changed since they were written (packed columns), in
  // the order of the changes; for saving them beside a segment file. Writer only.
  uint64_t changes() const { return changes_.load(std::memory_order_acquire); }
  void ForEachChangedLikes(const std::function<void(DocId, uint32_t)>& fn) const;

  // Mutators for the index's writer, which reaches them through Segment::mutable_columns()
  // (readers hold segments as `const`, and columns() is const). Likes and deletes may change
  // after the row is published; the other fields are written once, before publication (dense
  // layout only).
  void SetRow(DocId d, TweetId id, int64_t created_at_ms, UserId user, uint32_t lang,
              uint16_t length, uint32_t likes);
  void SetLikes(DocId d, uint32_t likes);
  void MarkDeleted(DocId d) {
    const uint64_t bit = uint64_t{1} << (d % 64);
    if ((deleted_[d / 64].fetch_or(bit, std::memory_order_acq_rel) & bit) == 0) {
      deleted_count_.fetch_add(1, std::memory_order_acq_rel);
    }
    changes_.fetch_add(1, std::memory_order_acq_rel);
  }
  // The deleted bits of rows [64 w, 64 w + 64), bit i for row 64 w + i (w below
  // (capacity() + 63) / 64).
  uint64_t deleted_word(size_t w) const { return deleted_[w].load(std::memory_order_acquire); }
  // Rows marked deleted.
  uint32_t deleted_count() const { return deleted_count_.load(std::memory_order_acquire); }

 private:
  // A dictionary code, kept inside its dictionary whatever the file says.
  static uint32_t Code(uint64_t code, const PackedColumn& values) {
    return static_cast<uint32_t>(std::min<uint64_t>(code, values.size() - 1));
  }

  const uint32_t capacity_;
  // Dense layout.
  std::unique_ptr<TweetId[]> tweet_id_;
  std::unique_ptr<int64_t[]> created_at_ms_;
  std::unique_ptr<UserId[]> user_id_;
  std::unique_ptr<uint32_t[]> lang_;
  std::unique_ptr<uint16_t[]> length_;
  std::unique_ptr<std::atomic<uint32_t>[]> likes_;
  std::unique_ptr<std::atomic<int64_t>[]> range_max_created_;
  std::unique_ptr<std::atomic<int64_t>[]> range_min_created_;
  // Packed layout.
  std::unique_ptr<const PackedColumns> packed_;
  mutable std::once_flag range_min_once_;
  mutable std::unique_ptr<int64_t[]> range_min_owned_;  // set once, under the flag
  mutable std::atomic<const int64_t*> packed_range_min_created_{nullptr};
  std::vector<int64_t> block_max_created_;  // packed columns: per kBlockSize DocIds
  std::unique_ptr<std::atomic<uint64_t>[]> changed_;
  std::unique_ptr<LikesOverlay> overlay_;
  // Both.
  std::unique_ptr<std::atomic<uint64_t>[]> deleted_;
  std::unique_ptr<std::atomic<uint32_t>[]> range_max_likes_;
  std::atomic<int64_t> max_created_{std::numeric_limits<int64_t>::min()};
  std::atomic<uint64_t> changes_{0};
  std::atomic<uint32_t> deleted_count_{0};

  // Writer only (so a load then a store cannot lose a raise).
  void RaiseRangeMaxLikes(DocId d, uint32_t likes) {
    std::atomic<uint32_t>& bound = range_max_likes_[d >> kRangeShift];
    if (bound.load(std::memory_order_relaxed) < likes) {
      bound.store(likes, std::memory_order_release);
    }
  }
};

class Segment {
 public:
  virtual ~Segment() = default;

  // Documents a reader may look at now: DocIds [0, VisibleDocs()). For an active segment
  // this grows as the writer publishes; call it once per query and keep the value.
  virtual DocId VisibleDocs() const = 0;
  // True if DocId order is TweetId descending (a sealed segment); false for arrival order.
  virtual bool newest_first() const = 0;
  // A cursor over `term` restricted to DocIds below `visible`; nullptr if the term is absent.
  virtual std::unique_ptr<PostingCursor> OpenTerm(std::string_view term, DocId visible) const = 0;
  // Documents containing `term` (including deleted ones not yet compacted away).
  virtual uint32_t DocFreq(std::string_view term) const = 0;
  // Sum of document lengths (tokens) over the segment, for BM25's average length.
  virtual uint64_t TotalLength() const = 0;
  // An upper bound of every TweetId in the segment.
  virtual TweetId MaxTweetId() const = 0;
  // Number of distinct terms.
  virtual size_t NumTerms() const = 0;
  // Bytes of memory held (postings, dictionary, columns).
  virtual size_t MemoryBytes() const = 0;

  const Columns& columns() const { return *columns_; }
  // The writer's handle on the columns (deletes, likes). Readers get segments as
  // `shared_ptr<const Segment>` and cannot reach it; the index's writer holds its segments by
  // non-const pointer and calls it under its writer mutex.
  Columns& mutable_columns() { return *columns_; }
  // Match counts of recent queries (count_cache.h); the query layer uses it for segments whose
  // postings never change.
  CountCache& count_cache() const { return count_cache_; }

  // The segment's most liked tweets in tiers (likes_tiers.h), smallest first, built on first
  // use (the index asks once it has written or loaded the segment); empty where the segment keeps
  // none (an active segment, whose likes all change in place).
  virtual std::span<const LikesTier> likes_tiers() const { return {}; }
  // The postings of the segment's long lists among one of those tiers (likes_tiers.h); null
  // where there are none, or not yet (a loaded segment builds them in the background).
  virtual const TierPostings* tier_postings() const { return nullptr; }
  // The champions of the pairs of the segment's densest words (pair_champions.h); null where
  // there are none, or not yet (built with the tier postings).
  virtual const PairChampions* pair_champions() const { return nullptr; }
  // The lead points of the segment's middling words (lead_points.h); null where there are
  // none (not built yet, or an active segment).
  virtual const LeadPoints* lead_points() const { return nullptr; }
  // The rows' length classes (length_classes.h); null where there are none (not built yet,
  // or an active segment).
  virtual const LengthClasses* length_classes() const { return nullptr; }

  // OK, or DataLoss once a damaged part of the segment was met (a query that opened terms of
  // the segment checks this before trusting their cursors).
  virtual absl::Status Health() const { return absl::OkStatus(); }

 protected:
  explicit Segment(uint32_t capacity) : columns_(std::make_unique<Columns>(capacity)) {}
  explicit Segment(std::unique_ptr<Columns> columns) : columns_(std::move(columns)) {}

 private:
  std::unique_ptr<Columns> columns_;
  mutable CountCache count_cache_;
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_SEGMENT_H_
