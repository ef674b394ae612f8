// MatchCounter: counts the tweets of one segment that match a plan, without ranking them.
//
// It walks the segment in windows of DocIds. In each window every posting list the plan needs
// sets its bits in a bitmap (a bitmap block of a sealed list is copied, a packed block sets one
// bit per DocId); an AND combines its children's bitmaps word by word, an OR likewise, an
// exclusion clears; then the deleted tweets' words are cleared and the words popcounted. A child
// of an AND whose window would cost far more to fill than looking up the few bits left is
// probed instead. Windows start where the plan's next match can be, so a rare term jumps across
// the segment. An AND whose rarest child is a term, or an OR of terms, with fewer postings
// than one per 64 DocIds is counted in batches of that child's postings instead (an OR's lists
// merged, MergedDocs), each batch looked up in the other children block by block
// (PostingCursor::Filter); another AND whose rarest child is sparse (fewer postings than one
// per 256 DocIds) a DocId at a time. An AND two of whose terms are a pair whose rows the
// segment keeps (two common words that seldom meet: pair_champions.h) reads those rows in
// place of the two terms' lists; an OR of terms beside a term, the union of its common
// terms' rows with that term and of its sparse terms' postings found in the term's list. Only
// filters that may fail in a range of 64 tweets (by the columns' per-range bounds) read a
// column, tweet by tweet.
//
// A phrase needs positions, which bitmaps do not hold: its matches come from a DocSource the
// caller supplies, one DocId at a time.
//
// Thread-safety: one counter per thread; the segment must outlive it.
#ifndef TWEETSEARCH_INDEXER_QUERY_COUNTER_H_
#define TWEETSEARCH_INDEXER_QUERY_COUNTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/ids.h"
#include "indexer/index/segment.h"
#include "indexer/query/plan.h"

namespace tweetsearch::index {
class PairChampions;
}  // namespace tweetsearch::index

namespace tweetsearch::query {

// Buckets of one width over time: bucket i holds the tweets created in [start_ms + i *
// width_ms, start_ms + (i + 1) * width_ms).
struct TimeBuckets {
  int64_t start_ms = 0;
  int64_t width_ms = 60'000;
  uint32_t count = 0;
  // Where bucket i starts (i == count: where the last one ends).
  int64_t start_of(uint32_t i) const { return start_ms + width_ms * static_cast<int64_t>(i); }
  int64_t end_ms() const { return start_of(count); }
};

// The DocIds matching one plan node, ascending.
class DocSource {
 public:
  virtual ~DocSource() = default;
  // The current match, or index::kEndDoc.
  virtual index::DocId doc() const = 0;
  virtual void Next() = 0;
  // Moves to the first match at or after target. Requires: target >= doc().
  virtual void Advance(index::DocId target) = 0;
};

class MatchCounter {
 public:
  // Makes the DocSource of a phrase node (restricted to the counter's visible DocIds).
  using PhraseSources = std::function<std::unique_ptr<DocSource>(const PlanNode&)>;

  // Counts the matches of `plan` (its terms and its filters) among DocIds [0, visible) whose
  // TweetId is at most `watermark` and that are not deleted. `enough`: how many matches Count()
  // will be asked for at most (its `stop` less the count it starts from), so that no list is
  // gathered in full where a count that stops early reads only part of the lists.
  MatchCounter(const index::Segment& segment, index::DocId visible, const Plan& plan,
               TweetId watermark, const PhraseSources& phrases, uint64_t enough = UINT64_MAX);
  ~MatchCounter();
  MatchCounter(const MatchCounter&) = delete;
  MatchCounter& operator=(const MatchCounter&) = delete;

  // Whether Count() goes in batches of its rarest child's postings (an AND whose rarest child
  // is a term, or an OR of terms, with fewer postings than one per 64 DocIds): it then reads
  // that child's postings alone (an OR's lists merged) and looks each up in the other lists,
  // which costs less than leapfrogging over them.
  bool CountsInBatches() const;
  // Adds to *count the matches among DocIds [from, visible), stopping at the end of the first
  // window after which *count is at least `stop` (so it may pass `stop`). Call once.
  void Count(index::DocId from, uint64_t stop, uint64_t* count);
  // Makes Count() also append each match it counts to *matches, ascending, while they are at
  // most `max` (a ranked search of an AND with few matches ranks those rather than walking its
  // lists again). Past `max`, *matches is cleared (with `keep_first`, it keeps the first `max`
  // matches: a newest-first page of a segment whose DocIds run newest first) and no more are
  // kept: collected_all() turns false.
  void CollectInto(std::vector<index::DocId>* matches, size_t max = SIZE_MAX,
                   bool keep_first = false) {
    collect_ = matches;
    collect_max_ = max;
    collect_first_ = keep_first;
  }
  // Whether an AND's count reads the rows of a pair of its words (pair_champions.h) in place
  // of the two words' lists.
  bool led_by_pair_rows() const { return led_by_pair_rows_; }
  // Whether every match Count() counted is in CollectInto's vector.
  bool collected_all() const { return !collect_overflowed_; }
  // Adds each match to counts[i] of the bucket its created_at falls in (`counts` holds
  // buckets.count entries); matches outside every bucket are not counted. Only ranges of 64
  // DocIds whose created_at bounds straddle a bucket boundary read the column, tweet by tweet.
  // Call once, instead of Count().
  void CountByTime(const TimeBuckets& buckets, uint64_t* counts);

 private:
  struct Node;

  // How a window's bits of `node` are computed.
  std::unique_ptr<Node> Build(const PlanNode& plan_node, const PhraseSources& phrases);
  // In an AND node just built from `plan_node` (children in the plan's order), puts the rows
  // of the rarest pair of its terms whose rows the segment keeps in place of the two terms.
  void LeadByPairRows(const PlanNode& plan_node, Node& node);
  // Else, in place of an OR of terms and a term, the union of the pairs' rows of each of the
  // OR's terms with that term, where the segment keeps them, and of the OR's sparse terms'
  // postings that the term's list holds.
  void LeadByRowsOfAnOr(Node& node, const index::PairChampions& pairs);
  static index::DocId NextPossible(const Node& node);
  void Fill(Node& node, index::DocId from, index::DocId end);
  uint64_t Intersect(Node& node, Node& child, index::DocId from, index::DocId end, bool keep,
                     uint64_t left);
  static bool Contains(Node& node, index::DocId d);
  // Counts an AND whose rarest child is a term or an OR of terms that is not dense: batches of
  // that child's postings, looked up in the other children.
  void CountInBatches(index::DocId from, uint64_t stop, uint64_t* count);
  // Keeps the DocIds of docs[0..n) that `node` matches (keep) or does not (!keep).
  static size_t Keep(Node& node, index::DocId* docs, size_t n, bool keep);
  // Counts a DocId at a time, for another AND whose rarest child is sparse.
  void CountSparse(index::DocId from, uint64_t stop, uint64_t* count);
  // Whether matches from DocId `from` on are counted less the deleted rows alone: visible,
  // with no filter to check, nothing tallied by time and none kept.
  bool OnlyDeletedToTakeOut(index::DocId from) const;
  // The matches among docs[0..n) (ascending, each matching the plan's words): less the
  // deleted, the invisible and the filtered.
  uint64_t CountDocs(const index::DocId* docs, size_t n);
  // The window's matches: the root's bits less the deleted, the invisible and the filtered.
  uint64_t CountWindow(const uint64_t* bits, index::DocId from, index::DocId end);
  // Appends the matches of one word of the window (bit i: DocId base + i) to collect_.
  void Collect(uint64_t word, index::DocId base);
  uint64_t FilterWord(uint64_t word, index::DocId base, bool check_created) const;
  // CountWindow's step for one word of matches under CountByTime: counts them in their buckets.
  uint64_t TallyByTime(uint64_t word, index::DocId base) const;

  const index::Segment& segment_;
  index::DocId visible_;  // lowered by CountByTime to the last range its buckets may hold
  const uint64_t enough_;
  const Plan& plan_;
  const TweetId watermark_;
  // DocIds below this hold tweets above the watermark (a sealed segment, newest first).
  index::DocId above_watermark_ = 0;
  // Filters checked tweet by tweet: the watermark in an active segment (arrival order), since/
  // until, min_faves.
  bool check_id_ = false;
  bool check_created_ = false;
  // CountByTime: the buckets, their counts, and the created_at span counted (the buckets'
  // and the plan's since/until together), [time_from_, time_to_).
  const TimeBuckets* buckets_ = nullptr;
  uint64_t* bucket_counts_ = nullptr;
  int64_t time_from_ = 0;
  int64_t time_to_ = 0;
  std::vector<index::DocId>* collect_ = nullptr;  // CollectInto
  size_t collect_max_ = SIZE_MAX;
  bool collect_first_ = false;
  bool collect_overflowed_ = false;
  bool led_by_pair_rows_ = false;
  std::unique_ptr<Node> root_;
};

}  // namespace tweetsearch::query

#endif  // TWEETSEARCH_INDEXER_QUERY_COUNTER_H_
