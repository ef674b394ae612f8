#include "indexer/query/searcher.h"

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "indexer/index/champions.h"
#include "indexer/index/lead_points.h"
#include "indexer/index/length_classes.h"
#include "indexer/index/likes_tiers.h"
#include "indexer/index/merged_docs.h"
#include "indexer/index/pair_champions.h"
#include "indexer/index/sealed_segment.h"
#include "indexer/query/counter.h"

namespace tweetsearch::query {
namespace {

using index::Columns;
using index::DocId;
using index::kEndDoc;
using index::PostingCursor;
using index::Segment;

// What every matcher of one segment shares.
struct Context {
  const Columns* columns;
  const ScoringParams* params;
  double avg_length;
  // TfPart of tf occurrences in a document of `length`, at tf_table[(tf - 1) *
  // kTfTableLengths + length] for tf 1 to kTfTableTfs and lengths below kTfTableLengths, for
  // the bounds per likes band; null outside best match.
  const double* tf_table = nullptr;
};
inline constexpr uint32_t kTfTableLengths = 256;
inline constexpr uint32_t kTfTableTfs = index::kBandManyTf - 1;

// A doc-at-a-time iterator over the documents of one segment that match a plan node.
class Matcher {
 public:
  virtual ~Matcher() = default;
  DocId doc() const { return doc_; }
  virtual void Next() = 0;
  // Moves to the first match at or after target. Requires: target >= doc().
  virtual void Advance(DocId target) = 0;
  // The text score of doc(), summed in plan order. Requires: doc() is a match.
  virtual double Score() = 0;
  // An upper bound of Score() over the whole segment.
  virtual double MaxScore() const = 0;
  // Postings this matcher may visit, to order conjunctions cheapest first.
  virtual uint64_t Cost() const = 0;
  // For pruning, from block bounds and without decoding: the likes bands (bit b) in which a
  // match in DocIds [target, *end] may lie, lowering *end to where that answer may change,
  // and adding to sums[b] the most its Score() can be for such a match of band b (for bands
  // it answers; more elsewhere is harmless; no sums when null). Requires: targets do not
  // decrease, and no target is below a DocId the matcher was moved to. (Not for excluded
  // matchers.)
  virtual uint32_t WindowBands(DocId target, DocId* end, double* sums) = 0;

 protected:
  DocId doc_ = kEndDoc;
};

class EmptyMatcher final : public Matcher {
 public:
  void Next() override {}
  void Advance(DocId) override {}
  double Score() override { return 0; }
  double MaxScore() const override { return 0; }
  uint64_t Cost() const override { return 0; }
  uint32_t WindowBands(DocId, DocId*, double*) override { return 0; }
};

class TermMatcher final : public Matcher {
 public:
  TermMatcher(std::unique_ptr<PostingCursor> cursor, double idf, bool scored, const Context& ctx)
      : cursor_(std::move(cursor)), idf_(scored ? idf : 0), ctx_(ctx) {
    doc_ = cursor_->doc();
  }
  void Next() override {
    cursor_->Next();
    doc_ = cursor_->doc();
  }
  void Advance(DocId target) override {
    cursor_->Advance(target);
    doc_ = cursor_->doc();
  }
  double Score() override { return idf_ == 0 ? 0 : ScoreAt(ctx_.columns->length(doc_)); }
  // Score() of doc(), whose length the caller read (once for all its terms). Common
  // frequencies and lengths come from the query's TfPart table: the same function of the same
  // numbers, so the same bits, without a division per posting.
  double ScoreAt(uint32_t length) const {
    return idf_ == 0 ? 0 : ScoreFor(cursor_->freq(), length);
  }
  // The same for a posting of `freq` occurrences in a document of `length`.
  double ScoreFor(uint32_t freq, uint32_t length) const {
    if (idf_ == 0) return 0;
    if (ctx_.tf_table != nullptr && freq <= kTfTableTfs && length < kTfTableLengths) {
      return idf_ * ctx_.tf_table[(freq - 1) * kTfTableLengths + length];
    }
    return idf_ * TfPart(*ctx_.params, freq, length, ctx_.avg_length);
  }
  // Computed on first use: only pruning needs it, and the list's bound costs a pass over its
  // skip table.
  double MaxScore() const override {
    if (max_score_ < 0) max_score_ = Bound(cursor_->list_bound());
    return max_score_;
  }
  uint64_t Cost() const override { return cursor_->size(); }
  double idf() const { return idf_; }

  PostingCursor& cursor() { return *cursor_; }

  uint32_t WindowBands(DocId target, DocId* end, double* sums) override {
    if (doc_ == kEndDoc) return 0;
    if (doc_ > target) {  // the cursor passed every posting before doc_
      *end = std::min(*end, doc_ - 1);
      return 0;
    }
    const DocId last = cursor_->ShallowAdvance(target);
    if (last == kEndDoc) return 0;
    *end = std::min(*end, last);
    if (sums == nullptr) return cursor_->shallow_bands();
    // A window ends where the first of its terms' blocks ends: the others' blocks are asked
    // again for the next window, and their bounds are kept (a block is named by its last DocId).
    if (last != bound_block_last_) {
      bound_block_last_ = last;
      block_text_.fill(0);
      block_bands_ = AddBandText(cursor_->shallow_bound(), block_text_.data());
    }
    for (int b = 0; b < index::kLikesBands; ++b) sums[b] += block_text_[b];
    return block_bands_;
  }

  // Adds to sums[b] the largest text score this term can give a posting of likes band b
  // among those `bound` covers, and returns the bands (bit b) that may hold such a posting.
  uint32_t AddBandText(const index::PostingBound& bound, double* sums) const {
    uint32_t bands = 0;
    for (int b = 0; b < index::kLikesBands; ++b) {
      const uint8_t band_length = bound.band_length[b];
      if (band_length == index::kBandEmpty) continue;
      bands |= 1u << b;
      if (idf_ == 0) continue;
      const uint32_t length = std::max<uint32_t>(band_length, bound.min_length);
      double text = ctx_.tf_table[std::min(length, kTfTableLengths - 1)];
      const uint32_t tf = std::min<uint32_t>(bound.band_tf[b], bound.max_tf);
      if (tf > 1) {
        // TfPart grows with tf and falls with length: the band's largest tf at the shortest
        // length of a repeating posting bounds its repeating postings.
        const uint32_t repeated = std::max(length, bound.min_length_repeated);
        text = std::max(text, tf < index::kBandManyTf
                                  ? ctx_.tf_table[(tf - 1) * kTfTableLengths +
                                                  std::min(repeated, kTfTableLengths - 1)]
                                  : TfPart(*ctx_.params, bound.max_tf, repeated, ctx_.avg_length));
      }
      sums[b] += idf_ * text;
    }
    return bands;
  }

 private:
  double Bound(const index::PostingBound& b) const {
    if (idf_ == 0) return 0;
    // TfPart grows with tf and falls with length: the larger of the bounds for single and for
    // repeated occurrences.
    const double single = TfPart(*ctx_.params, 1, b.min_length, ctx_.avg_length);
    if (b.max_tf <= 1) return idf_ * single;
    return idf_ *
           std::max(single, TfPart(*ctx_.params, b.max_tf, b.min_length_repeated, ctx_.avg_length));
  }

  std::unique_ptr<PostingCursor> cursor_;
  const double idf_;
  const Context& ctx_;
  mutable double max_score_ = -1;  // unknown until MaxScore()
  // WindowBands's last block: its last DocId, and AddBandText's answer for it.
  DocId bound_block_last_ = kEndDoc;
  uint32_t block_bands_ = 0;
  std::array<double, index::kLikesBands> block_text_{};
};

// Moves every matcher to the first DocId >= target that all of them contain.
// `order` lists the matchers cheapest first. Returns kEndDoc when they have no common doc.
template <typename M>
DocId Align(const std::vector<M*>& order, DocId target) {
  while (target != kEndDoc) {
    bool agreed = true;
    for (M* m : order) {
      if (m->doc() < target) m->Advance(target);
      if (m->doc() != target) {
        target = m->doc();  // kEndDoc ends the loop
        agreed = false;
        break;
      }
    }
    if (agreed) return target;
  }
  return kEndDoc;
}

// True if any of `matchers` matches `d`; moves them forward to `d` on the way. Requires: d is
// not below any position they were asked for before.
bool AnyMatches(std::vector<std::unique_ptr<Matcher>>& matchers, DocId d) {
  for (auto& m : matchers) {
    if (m->doc() < d) m->Advance(d);
    if (m->doc() == d) return true;
  }
  return false;
}

// The documents every child matches and Accept() approves, found by leapfrogging the children
// cheapest first. Scores the children's sum, in plan order.
template <typename Child>
class Conjunction : public Matcher {
 public:
  void Next() override {
    if (doc_ != kEndDoc) Find(doc_ + 1);
  }
  void Advance(DocId target) override {
    if (doc_ != kEndDoc && target > doc_) Find(target);
  }
  double Score() override {
    double s = 0;
    for (auto& c : children_) s += c->Score();
    return s;
  }
  double MaxScore() const override {
    double s = 0;
    for (const auto& c : children_) s += c->MaxScore();
    return s;
  }
  uint64_t Cost() const override { return order_[0]->Cost(); }
  uint32_t WindowBands(DocId target, DocId* end, double* sums) override {
    uint32_t bands = (1u << index::kLikesBands) - 1;
    for (auto& c : children_) {
      bands &= c->WindowBands(target, end, sums);
      if (bands == 0) break;  // *end was lowered to where the child may match again
    }
    return bands;
  }

 protected:
  explicit Conjunction(std::vector<std::unique_ptr<Child>> children)
      : children_(std::move(children)) {
    for (auto& c : children_) order_.push_back(c.get());
    std::stable_sort(order_.begin(), order_.end(),
                     [](Child* a, Child* b) { return a->Cost() < b->Cost(); });
  }
  // Moves to the first match; the derived constructor calls it once its own state is set.
  void Start() { Find(0); }
  // Whether `d`, which every child contains, is a match.
  virtual bool Accept(DocId d) = 0;

  std::vector<std::unique_ptr<Child>> children_;  // plan order

 private:
  void Find(DocId target) {
    for (DocId d = Align(order_, target); d != kEndDoc; d = Align(order_, d + 1)) {
      if (Accept(d)) {
        doc_ = d;
        return;
      }
    }
    doc_ = kEndDoc;
  }

  std::vector<Child*> order_;  // cheapest first
};

// Terms at fixed offsets from the first one.
class PhraseMatcher final : public Conjunction<TermMatcher> {
 public:
  PhraseMatcher(std::vector<std::unique_ptr<TermMatcher>> terms, std::vector<uint32_t> offsets)
      : Conjunction(std::move(terms)), offsets_(std::move(offsets)) {
    Start();
  }

 private:
  bool Accept(DocId) override {
    std::span<const uint32_t> first = children_[0]->cursor().positions();
    for (uint32_t start : first) {
      bool all = true;
      for (size_t i = 1; i < children_.size() && all; ++i) {
        std::span<const uint32_t> p = children_[i]->cursor().positions();
        all = std::binary_search(p.begin(), p.end(), start + offsets_[i]);
      }
      if (all) return true;
    }
    return false;
  }

  std::vector<uint32_t> offsets_;
};

// All children and none of the excluded.
class AndMatcher final : public Conjunction<Matcher> {
 public:
  AndMatcher(std::vector<std::unique_ptr<Matcher>> children,
             std::vector<std::unique_ptr<Matcher>> excluded)
      : Conjunction(std::move(children)), excluded_(std::move(excluded)) {
    Start();
  }

 private:
  bool Accept(DocId d) override { return !AnyMatches(excluded_, d); }

  std::vector<std::unique_ptr<Matcher>> excluded_;
};

class OrMatcher final : public Matcher {
 public:
  explicit OrMatcher(std::vector<std::unique_ptr<Matcher>> children)
      : children_(std::move(children)) {
    Settle();
  }
  void Next() override {
    const DocId current = doc_;
    for (auto& c : children_) {
      if (c->doc() == current) c->Next();
    }
    Settle();
  }
  void Advance(DocId target) override {
    for (auto& c : children_) {
      if (c->doc() < target) c->Advance(target);
    }
    Settle();
  }
  double Score() override {
    double s = 0;
    for (auto& c : children_) {
      if (c->doc() == doc_) s += c->Score();
    }
    return s;
  }
  double MaxScore() const override {
    double s = 0;
    for (const auto& c : children_) s += c->MaxScore();
    return s;
  }
  uint64_t Cost() const override {
    uint64_t cost = 0;
    for (const auto& c : children_) cost += c->Cost();
    return cost;
  }
  uint32_t WindowBands(DocId target, DocId* end, double* sums) override {
    uint32_t bands = 0;
    for (auto& c : children_) bands |= c->WindowBands(target, end, sums);
    return bands;
  }

 private:
  void Settle() {
    doc_ = kEndDoc;
    for (const auto& c : children_) doc_ = std::min(doc_, c->doc());
  }
  std::vector<std::unique_ptr<Matcher>> children_;
};

class MatcherBuilder {
 public:
  // With `tier`, every term is read from the tier's postings (tier_postings()), which must
  // keep them all and the plan hold no phrase that can match (TierCovers): the matchers then
  // walk the matches among the tier's rows by rank, most liked first, and their scores mean
  // nothing.
  MatcherBuilder(const Segment& segment, DocId visible, const CollectionStats& stats,
                 const Context& ctx, const index::TierPostings* tier = nullptr)
      : segment_(segment), visible_(visible), stats_(stats), ctx_(ctx), tier_(tier) {}

  std::unique_ptr<TermMatcher> Term(const std::string& term, bool scored) {
    const index::TierPostings::List* tier_list = tier_ != nullptr ? tier_->Find(term) : nullptr;
    if (tier_ != nullptr && tier_list == nullptr) return nullptr;
    std::unique_ptr<PostingCursor> cursor =
        tier_list != nullptr ? index::OpenTierList(*tier_list) : segment_.OpenTerm(term, visible_);
    if (cursor == nullptr) return nullptr;
    auto df = stats_.doc_freq.find(AsAbsl(term));
    const uint64_t doc_freq = df == stats_.doc_freq.end() ? 0 : df->second;
    return std::make_unique<TermMatcher>(std::move(cursor), Idf(stats_.num_docs, doc_freq), scored,
                                         ctx_);
  }

  std::unique_ptr<Matcher> Build(const PlanNode& node) {
    switch (node.kind) {
      case PlanNode::Kind::kTerm: {
        std::unique_ptr<TermMatcher> t = Term(node.term, node.scored);
        if (t == nullptr) return std::make_unique<EmptyMatcher>();
        return t;
      }
      case PlanNode::Kind::kPhrase: {
        std::vector<std::unique_ptr<TermMatcher>> terms;
        for (const std::string& term : node.phrase_terms) {
          std::unique_ptr<TermMatcher> t = Term(term, true);
          if (t == nullptr) return std::make_unique<EmptyMatcher>();
          terms.push_back(std::move(t));
        }
        return std::make_unique<PhraseMatcher>(std::move(terms), node.phrase_offsets);
      }
      case PlanNode::Kind::kAnd: {
        std::vector<std::unique_ptr<Matcher>> children, excluded;
        for (const PlanNode& c : node.children) {
          std::unique_ptr<Matcher> m = Build(c);
          if (m->doc() == kEndDoc) return std::make_unique<EmptyMatcher>();
          children.push_back(std::move(m));
        }
        for (const PlanNode& e : node.excluded) {
          std::unique_ptr<Matcher> m = Build(e);
          if (m->doc() != kEndDoc) excluded.push_back(std::move(m));
        }
        return std::make_unique<AndMatcher>(std::move(children), std::move(excluded));
      }
      case PlanNode::Kind::kOr: {
        std::vector<std::unique_ptr<Matcher>> children;
        for (const PlanNode& c : node.children) children.push_back(Build(c));
        return std::make_unique<OrMatcher>(std::move(children));
      }
      case PlanNode::Kind::kNothing:
        return std::make_unique<EmptyMatcher>();
    }
    return std::make_unique<EmptyMatcher>();
  }

 private:
  const Segment& segment_;
  const DocId visible_;
  const CollectionStats& stats_;
  const Context& ctx_;
  const index::TierPostings* const tier_;
};

// A matcher's DocIds, for the counter (which asks for those of phrases).
class MatcherSource final : public DocSource {
 public:
  explicit MatcherSource(std::unique_ptr<Matcher> m) : m_(std::move(m)) {}
  DocId doc() const override { return m_->doc(); }
  void Next() override { m_->Next(); }
  void Advance(DocId target) override { m_->Advance(target); }

 private:
  std::unique_ptr<Matcher> m_;
};

// Keeps the k best hits seen so far.
class TopK {
 public:
  explicit TopK(uint32_t k) : k_(k) { heap_.reserve(k); }
  bool full() const { return heap_.size() == k_; }
  // The worst kept key. Requires: full().
  const SortKey& worst() const { return heap_.front().key; }
  // True if a hit with `key` would be kept.
  bool Wants(const SortKey& key) const { return !full() || Before(key, worst()); }
  void Push(const Hit& hit) {
    if (!Wants(hit.key)) return;
    if (full()) {
      std::pop_heap(heap_.begin(), heap_.end(), HeapLess);
      heap_.pop_back();
    }
    heap_.push_back(hit);
    std::push_heap(heap_.begin(), heap_.end(), HeapLess);
  }
  // Calls fn(hit) for each kept hit, which may change anything but its key.
  template <typename Fn>
  void ForEach(const Fn& fn) {
    for (Hit& hit : heap_) fn(hit);
  }
  std::vector<Hit> Take() {
    std::sort(heap_.begin(), heap_.end(),
              [](const Hit& a, const Hit& b) { return Before(a.key, b.key); });
    return std::move(heap_);
  }

 private:
  // The heap's "less": ordered by Before, a max-heap keeps the hit that comes last (the worst)
  // at the front.
  static bool HeapLess(const Hit& a, const Hit& b) { return Before(a.key, b.key); }
  const uint32_t k_;
  std::vector<Hit> heap_;
};

// Bounds computed from sums in another order may fall short of the canonical sum by a rounding
// error; pruning compares against a slightly inflated bound so it never drops a real hit.
double Inflate(double bound) { return bound * (1 + 1e-12) + 1e-12; }

// A window of DocIds [begin, end] of one segment, and the bound of any document in it.
struct ScoredWindow {
  DocId begin = 0, end = 0;
  double bound = 0;
};

class Evaluation {
 public:
  Evaluation(const index::IndexSnapshot& snapshot, const Plan& plan, const SearchOptions& options)
      : snapshot_(snapshot),
        plan_(plan),
        options_(options),
        top_(options.limit),
        stats_(options.stats != nullptr ? *options.stats : ComputeStats(snapshot, plan)) {
    if (options.sort != SortMode::kBestMatch) return;
    const ScoringParams& p = options.scoring;
    for (int b = 0; b < index::kLikesBands; ++b) {
      band_popularity_[b] = p.popularity_weight * Popularity(p, index::LikesBandMax(b));
    }
    for (uint32_t tf = 1; tf <= kTfTableTfs; ++tf) {
      for (uint32_t length = 0; length < kTfTableLengths; ++length) {
        tf_table_[(tf - 1) * kTfTableLengths + length] = TfPart(p, tf, length, stats_.avg_length);
      }
    }
  }

  // Context::tf_table: filled for best match only.
  const double* TfTable() const {
    return options_.sort == SortMode::kBestMatch ? tf_table_.data() : nullptr;
  }

  // DataLoss if a segment the query read turned out damaged (its damaged lists were not read).
  absl::StatusOr<SearchResult> Run() {
    // Each segment's visible prefix, read once: ranking and counting see the same tweets.
    // Its largest id is read after it, so that it bounds every visible tweet of the segment
    // (an active segment raises it before it publishes a row): newest first orders the
    // segments by it, and stops at the first one whose bound is below the k-th hit. Read
    // before the prefix, a segment that was empty then and took rows meanwhile sorted last
    // and was never ranked, though it was counted.
    struct Part {
      const Segment* segment;
      DocId visible;
      TweetId max_id;
    };
    std::vector<Part> parts;
    for (const auto& s : snapshot_.segments) parts.push_back({s.get(), s->VisibleDocs(), 0});
    for (Part& p : parts) p.max_id = p.segment->MaxTweetId();
    if (options_.sort == SortMode::kNewest) {
      std::stable_sort(parts.begin(), parts.end(),
                       [](const Part& a, const Part& b) { return a.max_id > b.max_id; });
    }
    std::vector<const Segment*> segments;
    std::vector<DocId>& visible_docs = visible_docs_;
    for (const Part& p : parts) {
      segments.push_back(p.segment);
      visible_docs.push_back(p.visible);
    }
    for (size_t i = 0; i < segments.size(); ++i) {
      const Segment* segment = segments[i];
      const DocId visible = visible_docs[i];
      if (visible == 0) continue;
      if (options_.sort == SortMode::kNewest && top_.full() && parts[i].max_id < top_.worst().id) {
        pruned_ = true;  // this and every later segment only hold older tweets
        break;
      }
      Context ctx{&segment->columns(), &options_.scoring, stats_.avg_length, TfTable()};
      MatcherBuilder builder(*segment, visible, stats_, ctx);
      segment_index_ = i;
      if (TwoWordsNeverMeet(*segment)) {
        ++never_meeting_segments_;
        counted_.insert(i);  // no match here: nothing to rank or count
        continue;
      }
      switch (options_.sort) {
        case SortMode::kNewest:
          RunNewest(*segment, builder, i);
          break;
        case SortMode::kMostLiked:
          RunMostLiked(*segment, builder);
          break;
        case SortMode::kBestMatch:
          RunBestMatch(*segment, builder);
          break;
      }
      if (absl::Status health = segment->Health(); !health.ok()) return health;
    }
    CountTotal(segments, visible_docs);  // what the ranking did not count
    SearchResult result;
    result.hits = top_.Take();
    result.total_hits = total_;
    // A damaged segment the ranking did not need fails no query, but its matches are not
    // counted: the total is then only a lower bound.
    result.total_is_exact = !count_missed_damaged_;
    CapTotal(options_.exact_total, &result.total_hits, &result.total_is_exact);
    result.pruned = pruned_;
    result.champion_cutoffs = champion_cutoffs_;
    result.tier_cutoffs = tier_cutoffs_;
    result.triple_walk_cutoffs = triple_walk_cutoffs_;
    result.counted_rankings = counted_rankings_;
    result.newest_from_counts = newest_from_counts_;
    result.pair_rows_counts = pair_rows_counts_;
    result.sparse_alternative_cutoffs = sparse_alternative_cutoffs_;
    result.held_weighings = held_weighings_;
    result.never_meeting_segments = never_meeting_segments_;
    return result;
  }

 private:
  // Whether two words that every match of the plan holds (terms of its root AND) are pair
  // words of `segment` (pair_champions.h) that no row holds together: then the segment has no
  // match, however common each word is (`me la`, an English and a Spanish word). So too where
  // no word of an OR child of terms meets a term of the AND (`(in OR and) la`).
  bool TwoWordsNeverMeet(const Segment& segment) const {
    const index::PairChampions* pairs = segment.pair_champions();
    if (pairs == nullptr || plan_.root.kind != PlanNode::Kind::kAnd) return false;
    std::vector<const std::string*> words;
    std::vector<const PlanNode*> ors;
    for (const PlanNode& child : plan_.root.children) {
      if (child.kind == PlanNode::Kind::kTerm) words.push_back(&child.term);
      if (child.kind == PlanNode::Kind::kOr) ors.push_back(&child);
    }
    if (words.size() > kMaxMeetingWords) return false;
    auto never = [&](const std::string& a, const std::string& b) {
      bool swapped = false;
      const index::PairChampionList* pair = pairs->Find(a, b, &swapped);
      return pair != nullptr && pair->matches == 0;
    };
    for (size_t i = 0; i < words.size(); ++i) {
      for (size_t j = i + 1; j < words.size(); ++j) {
        if (never(*words[i], *words[j])) return true;
      }
      for (const PlanNode* o : ors) {
        if (o->children.size() <= kMaxMeetingWords &&
            std::all_of(o->children.begin(), o->children.end(), [&](const PlanNode& a) {
              return a.kind == PlanNode::Kind::kTerm && never(a.term, *words[i]);
            })) {
          return true;
        }
      }
    }
    return false;
  }

  // Counts the matches of the query under the watermark in every segment, whatever the sort
  // and the page, up to one past the cap (all of them with exact_total): the same total for
  // every sort mode, page and replica. Reads only the columns a filter needs.
  void CountTotal(const std::vector<const Segment*>& segments,
                  const std::vector<DocId>& visible_docs) {
    for (size_t i = 0; i < segments.size(); ++i) {
      const Segment* segment = segments[i];
      const DocId visible = visible_docs[i];
      if (visible == 0 || total_ >= stop_ || counted_.contains(i)) continue;
      const bool by_id = segment->MaxTweetId() > options_.watermark;
      bool exact = false;
      const uint64_t bound = SegmentLowerBound(*segment, by_id, &exact);
      if (exact || total_ + bound >= stop_) {
        total_ = exact ? total_ + bound : stop_;
        continue;
      }
      if (UseCachedCount(*segment)) continue;
      const uint64_t generation = segment->columns().changes(), before = total_;
      CountFrom(*segment, visible, 0);
      if (!segment->Health().ok()) {
        count_missed_damaged_ = true;
        continue;
      }
      StoreCount(*segment, generation, before);
    }
  }

  // At most as many tweets as `segment` holds that count, from document frequencies alone: a
  // term's frequency less the segment's deleted tweets, the same for the rows two terms share
  // where the segment keeps their pair's champions (pair_champions.h), an OR's largest
  // child's. Only for a sealed segment (whose frequencies count its own, all visible, tweets)
  // and a query with no filter to check per tweet; 0 otherwise. *exact says the bound is the
  // count itself: a lone term, or an AND of two terms with a pair, in a segment without
  // deletes.
  uint64_t SegmentLowerBound(const Segment& segment, bool by_id, bool* exact) const {
    *exact = false;
    if (!segment.newest_first() || by_id || by_created_ || plan_.min_likes > 0) return 0;
    return NodeLowerBound(plan_.root, segment, exact);
  }
  static uint64_t NodeLowerBound(const PlanNode& node, const Segment& segment, bool* exact) {
    const uint64_t deleted = segment.columns().deleted_count();
    *exact = false;
    if (node.kind == PlanNode::Kind::kTerm) {
      const uint64_t df = segment.DocFreq(node.term);
      *exact = deleted == 0;
      return df > deleted ? df - deleted : 0;
    }
    // Two terms whose pair the segment keeps champions for: the rows holding both.
    if (node.kind == PlanNode::Kind::kAnd && node.excluded.empty() && node.children.size() == 2 &&
        node.children[0].kind == PlanNode::Kind::kTerm &&
        node.children[1].kind == PlanNode::Kind::kTerm && segment.pair_champions() != nullptr) {
      bool swapped = false;
      if (const index::PairChampionList* pair = segment.pair_champions()->Find(
              node.children[0].term, node.children[1].term, &swapped)) {
        *exact = deleted == 0;
        return pair->matches > deleted ? pair->matches - deleted : 0;
      }
    }
    uint64_t bound = 0;
    if (node.kind == PlanNode::Kind::kOr) {
      bool child_exact = false;
      for (const PlanNode& child : node.children) {
        bound = std::max(bound, NodeLowerBound(child, segment, &child_exact));
      }
    }
    return bound;
  }

  // A sealed segment wholly under the watermark: its count depends only on the query and on
  // its rows' deletes and likes, so it may be cached (CountCache).
  bool CountIsCacheable(const Segment& segment) const {
    return options_.cache_counts && segment.newest_first() &&
           segment.MaxTweetId() <= options_.watermark;
  }
  // The plan and its filters, as the cache's key.
  const std::string& CountKey() {
    if (count_key_.empty()) {
      count_key_ = absl::StrCat(ToString(plan_.root), "|", plan_.since_ms, "|", plan_.until_ms, "|",
                                plan_.min_likes);
    }
    return count_key_;
  }
  // Adds the segment's cached count to the total, if one is stored and enough: complete, or
  // reaching the cap. False if the segment must be counted.
  bool UseCachedCount(const Segment& segment) {
    if (!CountIsCacheable(segment)) return false;
    const std::optional<index::CountCache::Count> cached =
        segment.count_cache().Get(CountKey(), segment.columns().changes());
    if (!cached) return false;
    if (cached->complete) {
      total_ += cached->matches;
    } else if (total_ + cached->matches >= stop_) {
      total_ = stop_;
    } else {
      return false;
    }
    return true;
  }
  // Stores what was counted in `segment` since the total was `before` (complete unless the
  // count stopped at the cap), as of the rows' state `generation` read before counting.
  void StoreCount(const Segment& segment, uint64_t generation, uint64_t before) {
    if (!CountIsCacheable(segment)) return;
    segment.count_cache().Put(CountKey(), generation,
                              index::CountCache::Count{total_ - before, total_ < stop_});
  }

  // Counts the matches of `segment` from DocId `from` on, until the cap, over bitmaps of
  // DocId windows (see counter.h); appends those counted to *matches if given, while they are
  // at most `max` (with `keep_first`, the first `max`), and tells whether it kept them all.
  // With `only_in_batches` it counts nothing and answers nullopt unless the counter goes in
  // batches of one child's postings (MatchCounter::CountsInBatches).
  std::optional<bool> CountFrom(const Segment& segment, DocId visible, DocId from,
                                std::vector<DocId>* matches = nullptr, size_t max = SIZE_MAX,
                                bool keep_first = false, bool only_in_batches = false) {
    Context ctx{&segment.columns(), &options_.scoring, stats_.avg_length, TfTable()};
    MatcherBuilder builder(segment, visible, stats_, ctx);
    MatchCounter counter(
        segment, visible, plan_, options_.watermark,
        [&builder](const PlanNode& phrase) -> std::unique_ptr<DocSource> {
          return std::make_unique<MatcherSource>(builder.Build(phrase));
        },
        stop_ > total_ ? stop_ - total_ : 0);
    if (only_in_batches && !counter.CountsInBatches()) return std::nullopt;
    counter.CollectInto(matches, max, keep_first);
    counter.Count(from, stop_, &total_);
    pair_rows_counts_ += counter.led_by_pair_rows() ? 1 : 0;
    return counter.collected_all();
  }

  bool CreatedInRange(const Columns& c, DocId d) const {
    const int64_t created = c.created_at_ms(d);
    return created >= plan_.since_ms && (!plan_.has_until() || created < plan_.until_ms);
  }

  // Applies the column filters, the watermark and the search-after key. Returns the sort key,
  // or nullopt if `d` is not a result.
  std::optional<SortKey> Accept(const Columns& c, DocId d) const {
    if (c.deleted(d)) return std::nullopt;
    const TweetId id = c.tweet_id(d);
    if (id > options_.watermark || !CreatedInRange(c, d)) return std::nullopt;
    const uint32_t likes = c.likes(d);
    if (likes < plan_.min_likes) return std::nullopt;
    SortKey key{0, id};
    if (options_.sort == SortMode::kMostLiked) key.primary = likes;
    if (options_.after && options_.sort != SortMode::kBestMatch && !Before(*options_.after, key)) {
      return std::nullopt;
    }
    return key;
  }

  double FullScore(const Columns& c, DocId d, double text_score) const {
    return text_score +
           StaticScore(options_.scoring, c.likes(d), c.created_at_ms(d), options_.now_ms);
  }

  // Counts and offers one accepted document whose matcher state gives its text score.
  // Counts and offers one accepted document in newest or most-liked order; its best-match
  // score, reported with the hit, is computed only if it is kept.
  void Offer(const Columns& c, DocId d, SortKey key, Matcher& matcher) {
    if (!top_.Wants(key)) return;
    top_.Push(Hit{key.id, FullScore(c, d, matcher.Score()), c.likes(d), c.created_at_ms(d), key});
  }

  // Ranks segment `index` newest first. Without a search-after key it also counts the matches
  // it walks, and past the page it keeps walking only to count (up to the cap), so that
  // CountTotal need not walk this segment again.
  void RunNewest(const Segment& segment, MatcherBuilder& builder, size_t index) {
    if (NewestFromCount(segment, builder)) return;
    std::unique_ptr<Matcher> m = builder.Build(plan_.root);
    const Columns& c = segment.columns();
    bool counting = !options_.after && !counted_.contains(index);
    if (counting && UseCachedCount(segment)) {
      counting = false;  // counted already: only rank
      counted_.insert(index);
    }
    const uint64_t generation = c.changes(), before = total_;
    uint64_t counted_here = 0;
    if (segment.newest_first() && options_.after) {
      // DocIds are TweetId descending: start at the first tweet older than the key.
      DocId lo = 0, hi = segment.VisibleDocs();
      while (lo < hi) {
        const DocId mid = lo + (hi - lo) / 2;
        if (c.tweet_id(mid) >= options_.after->id) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      if (lo >= segment.VisibleDocs()) return;
      m->Advance(lo);
    }
    for (DocId d = m->doc(); d != kEndDoc; m->Next(), d = m->doc()) {
      // Without a key, Accept() takes exactly the tweets that count.
      std::optional<SortKey> key = Accept(c, d);
      if (!key) continue;
      if (counting && total_ < stop_) {
        ++total_;
        ++counted_here;
      }
      if (segment.newest_first() && !top_.Wants(*key)) {
        pruned_ = true;  // every later posting of this segment is older still
        if (!counting) return;
        // The rest of the segment holds at least its lower bound less what was counted.
        const bool by_id = segment.MaxTweetId() > options_.watermark;
        bool exact = false;
        const uint64_t bound = SegmentLowerBound(segment, by_id, &exact);
        if (exact) {
          total_ += bound - counted_here;
        } else if (bound > counted_here && total_ + (bound - counted_here) >= stop_) {
          total_ = stop_;
        } else {
          CountFrom(segment, visible_docs_[index], d + 1);
        }
        break;
      }
      Offer(c, d, *key, *m);
    }
    if (counting) {
      counted_.insert(index);
      if (segment.Health().ok()) StoreCount(segment, generation, before);
    }
  }

  // Ranks a segment by likes. Where it keeps likes tiers (likes_tiers.h), the matches among
  // its rows whose likes changed are offered first, then those among its tier postings (any
  // shape they cover, most liked first), then, for a term or an OR of terms, those in each
  // tier, smallest first, until the k-th best hit has at least the tier's threshold: every
  // row not yet offered was written with fewer likes and kept them, so none can enter.
  // Otherwise the remaining matches are walked (skipping ranges whose likes bound is too low).
  void RunMostLiked(const Segment& segment, MatcherBuilder& builder) {
    // Tiers serve a term or an OR of terms, whose postings count their matches (an AND's
    // count only bounds them, and a tier chosen by it would rarely decide).
    std::vector<const PlanNode*> terms;
    const bool counted =
        FlatTerms(plan_.root, &terms) &&
        (plan_.root.kind == PlanNode::Kind::kTerm || plan_.root.kind == PlanNode::Kind::kOr);
    const std::span<const index::LikesTier> tiers = segment.likes_tiers();
    const Columns& c = segment.columns();
    // Rows whose likes changed since the segment was written have no place in its block
    // bounds or tiers (which count the likes it was written with): offered first, then passed
    // over.
    std::vector<DocId> changed;
    c.ChangedLikesRows(&changed);
    uint64_t offered_likes = UINT64_MAX;  // rows written with this many likes were offered
    auto offered = [&](DocId d) {
      return c.BaseLikes(d) >= offered_likes ||
             std::binary_search(changed.begin(), changed.end(), d);
    };
    auto offer = [&](DocId d, Matcher& m) {
      if (offered(d)) return;
      if (std::optional<SortKey> key = Accept(c, d)) Offer(c, d, *key, m);
    };
    VisitAmong(builder, changed, [&](DocId d, Matcher& m) {
      if (std::optional<SortKey> key = Accept(c, d)) Offer(c, d, *key, m);
    });
    // Its matches among the rows of the tier the segment keeps postings for, most liked
    // first, then, unless they decided, the rest.
    if (const index::TierPostings* postings = segment.tier_postings();
        postings != nullptr && TierCovers(plan_.root, segment, *postings)) {
      if (RunTierPostings(segment, builder, *postings, changed)) return;
      offered_likes = postings->min_likes();
    }
    if (!counted || tiers.empty()) {
      if (!counted && IsSparseAnd(segment)) {
        RunSparseAnd(segment, builder, offered);
        return;
      }
      if (!counted && RankCountedMatches(segment, builder, offered)) return;
      RunExhaustive(segment, builder.Build(plan_.root), offered);
      return;
    }
    // At most this many rows match (about as many: an OR's terms overlap little).
    const uint64_t matches = builder.Build(plan_.root)->Cost();
    const index::LikesTier* first = &PickTier(tiers, matches, segment.VisibleDocs());
    if (top_.full()) {
      // Rows outside a tier whose threshold is at most the k-th hit's likes cannot enter, so
      // the first such tier is the last one needed (later segments mostly need a small one).
      for (const index::LikesTier& tier : tiers) {
        if (tier.min_likes <= top_.worst().primary) {
          first = std::min(first, &tier);
          break;
        }
      }
    }
    for (const index::LikesTier& tier : tiers) {
      // The smaller tiers are inside the first; a tier within the tier postings' was offered.
      if (&tier < first || tier.min_likes >= offered_likes) continue;
      // A row of a tier costs a jump of the matcher; walking the matches costs less per match:
      // a tier more than a quarter the size of the matches is not worth it.
      if (tier.docs.size() * 4 > matches) break;
      VisitAmong(builder, tier.docs, offer);
      offered_likes = tier.min_likes;
      if (top_.full() && top_.worst().primary >= tier.min_likes) {
        pruned_ = true;
        return;
      }
    }
    RunExhaustive(segment, builder.Build(plan_.root), offered);
  }

  // Whether the plan is an AND (exclusions may join) of terms and ORs of terms, one of whose
  // children (a term, or an OR whose terms' lists together) holds in `segment` fewer than one
  // posting per kSparseAndDensity DocIds.
  bool IsSparseAnd(const Segment& segment) const {
    const PlanNode& root = plan_.root;
    if (root.kind != PlanNode::Kind::kAnd || root.children.size() < 2) return false;
    uint64_t rarest = UINT64_MAX;
    for (const PlanNode& child : root.children) {
      if (child.kind == PlanNode::Kind::kTerm) {
        rarest = std::min<uint64_t>(rarest, segment.DocFreq(child.term));
        continue;
      }
      if (child.kind != PlanNode::Kind::kOr) return false;
      uint64_t postings = 0;
      for (const PlanNode& alternative : child.children) {
        if (alternative.kind != PlanNode::Kind::kTerm) return false;
        postings += segment.DocFreq(alternative.term);
      }
      rarest = std::min(rarest, postings);
    }
    return rarest * kSparseAndDensity < segment.VisibleDocs();
  }

  // Calls visit(d) for each match d of a sparse AND (IsSparseAnd), ascending: found in batches
  // of the rarest term's postings looked up block by block in the other children's lists (as
  // counting does, PostingCursor::Filter; an OR keeps those any of its words holds), then
  // checked against the exclusions. A few matches cost less so than a leapfrog, which pays two
  // virtual calls per posting, or windows, whose bounds are computed per block of the longer
  // lists. Every match is met, so they are counted here too (unless the segment's count is
  // cached), and CountTotal passes over the segment.
  //
  // Once the segment's count is known or capped, `keep(lead, docs, n)` may first drop some of
  // the lead's postings docs[0..n) (it returns how many it kept, in order), before they are
  // looked up in the other children: `lead` is the plan child that leads.
  template <typename Visit, typename Keep>
  void ForEachSparseAndMatch(const Segment& segment, MatcherBuilder& builder, const Visit& visit,
                             const Keep& keep) {
    // Per child, its node and its words' cursors (one for a term; an OR's present words).
    using Words = std::vector<std::unique_ptr<TermMatcher>>;
    std::vector<std::pair<const PlanNode*, Words>> children;
    for (const PlanNode& node : plan_.root.children) {
      Words& words = children.emplace_back(&node, Words{}).second;
      for (const PlanNode* word : WordsOf(node)) {
        if (auto m = builder.Term(word->term, /*scored=*/false)) words.push_back(std::move(m));
      }
      if (words.empty()) {  // a word or every alternative the segment lacks: no match
        counted_.insert(segment_index_);
        return;
      }
    }
    const Columns& c = segment.columns();
    const bool counting = !UseCachedCount(segment);  // else the cached count was added
    const bool by_id = segment.MaxTweetId() > options_.watermark;
    const uint64_t generation = c.changes(), before = total_;
    // The lead: the child with the fewest postings (a term, or an OR's terms merged); the other
    // children filter its postings.
    auto cost = [](const auto& child) {
      uint64_t postings = 0;
      for (const auto& word : child.second) postings += word->Cost();
      return postings;
    };
    std::sort(children.begin(), children.end(),
              [&](const auto& a, const auto& b) { return cost(a) < cost(b); });
    std::vector<std::unique_ptr<Matcher>> excluded;
    for (const PlanNode& e : plan_.root.excluded) excluded.push_back(builder.Build(e));
    std::vector<PostingCursor*> lead_words;  // the lead's words, merged
    for (auto& word : children[0].second) lead_words.push_back(&word->cursor());
    index::MergedDocs lead(lead_words, visible_docs_[segment_index_]);
    std::vector<std::vector<PostingCursor*>> filters;  // the other children's words' cursors
    for (size_t i = 1; i < children.size(); ++i) {
      std::vector<PostingCursor*>& cursors = filters.emplace_back();
      for (auto& word : children[i].second) cursors.push_back(&word->cursor());
    }
    std::array<DocId, kBatch> docs;
    while (size_t n = lead.Next(docs.data(), docs.size())) {
      if (!counting || total_ >= stop_) n = keep(*children[0].first, docs.data(), n);
      for (size_t i = 0; i < filters.size() && n > 0; ++i) {
        n = index::FilterAny(filters[i], docs.data(), n);
      }
      for (size_t i = 0; i < n; ++i) {
        const DocId d = docs[i];
        if (AnyMatches(excluded, d)) continue;
        if (counting && total_ < stop_ && Counts(c, d, by_id)) ++total_;
        visit(d);
      }
    }
    counted_.insert(segment_index_);
    if (counting && segment.Health().ok()) StoreCount(segment, generation, before);
  }
  template <typename Visit>
  void ForEachSparseAndMatch(const Segment& segment, MatcherBuilder& builder, const Visit& visit) {
    ForEachSparseAndMatch(segment, builder, visit,
                          [](const PlanNode&, DocId*, size_t n) { return n; });
  }

  // Whether match `d` counts toward the total: Accept() without the search-after key (by_id:
  // the segment holds tweets above the watermark).
  bool Counts(const Columns& c, DocId d, bool by_id) const {
    if (c.deleted(d) || (by_id && c.tweet_id(d) > options_.watermark)) return false;
    if (by_created_ && !CreatedInRange(c, d)) return false;
    return plan_.min_likes == 0 || c.likes(d) >= plan_.min_likes;
  }

  // The words of a sparse AND's child: a term itself, or an OR's alternatives.
  static std::vector<const PlanNode*> WordsOf(const PlanNode& node) {
    if (node.kind == PlanNode::Kind::kTerm) return {&node};
    std::vector<const PlanNode*> words;
    for (const PlanNode& n : node.children) words.push_back(&n);
    return words;
  }

  // Most liked over a sparse AND (IsSparseAnd) that the tiers did not decide: every match is
  // offered but those `offered` says were, and the hits kept are scored at the end.
  // Most liked: whether `d` has fewer likes than the k-th hit of a full top k, so that it
  // cannot enter (ties on likes are decided by TweetId). Once the top k is full most matches
  // do; one column read, before the others Accept() reads.
  bool TooFewLikes(const Columns& c, DocId d) const {
    return top_.full() && c.likes(d) < top_.worst().primary;
  }

  void RunSparseAnd(const Segment& segment, MatcherBuilder& builder,
                    const std::function<bool(DocId)>& offered) {
    const Columns& c = segment.columns();
    std::vector<std::pair<TweetId, DocId>> kept;  // hits pushed, scored below
    ForEachSparseAndMatch(segment, builder, [&](DocId d) {
      if (TooFewLikes(c, d)) return;
      if (offered(d)) return;
      const std::optional<SortKey> key = Accept(c, d);
      if (!key || !top_.Wants(*key)) return;
      top_.Push(Hit{key->id, 0, c.likes(d), c.created_at_ms(d), *key});
      kept.emplace_back(key->id, d);
    });
    ScoreHits(builder, c, &kept);
  }

  // Best match over a sparse AND (IsSparseAnd): every match not offered yet is scored by the
  // plan's matcher, moved forward to it, unless the plan's text bound plus its likes band's
  // popularity and the segment's recency bound cannot reach the k-th score. Windows of block
  // bounds would pass nearly all of these matches anyway (docs/ranking.md).
  //
  // Once the count is settled, a posting of the lead is dropped before it is looked up in the
  // other children if its own text (the lead's matcher moved to it), plus the most the other
  // children's words can add at the tweet's length (their lists' largest frequencies), its
  // likes band's popularity and the recency bound cannot reach the k-th score: the lead, the
  // rarest child, carries most of a match's text, and most matches of a common word with a
  // rare one are long or hold the rare word once (docs/benchmarks.md).
  void RunSparseAndBestMatch(const Segment& segment, MatcherBuilder& builder) {
    const Columns& c = segment.columns();
    // Scores as every walk does; built at the first match, as an AND's matcher moves to its
    // first match when built (a walk over the whole AND where there is none).
    std::unique_ptr<Matcher> m;
    double max_text = 0;
    // The segment's: bounds per 4,096 DocIds cost a pass over their ranges each, and matches
    // this sparse touch most of them (a candidate that passes gets its exact score anyway).
    const double recency = RecencyBound(c, 0, segment.VisibleDocs() - 1);
    std::unique_ptr<Matcher> lead;  // scores the lead's postings; built on first use
    std::vector<double> others;     // by length: the other children's largest text
    auto others_at = [&](uint32_t length) { return AtLength(others, length); };
    std::optional<LeadPointBound> by_point;  // where the lead is a word
    auto keep = [&](const PlanNode& lead_node, DocId* docs, size_t n) {
      if (!top_.full()) return n;
      if (lead == nullptr) {
        others = OthersTextByLength(builder, lead_node);
        if (lead_node.kind == PlanNode::Kind::kTerm) {
          if (std::unique_ptr<TermMatcher> t = builder.Term(lead_node.term, lead_node.scored)) {
            by_point.emplace(*this, segment, lead_node.term, *t, others_at, recency);
            lead = std::move(t);
          }
        }
        if (lead == nullptr) lead = builder.Build(lead_node);
      }
      size_t kept = 0;
      for (size_t i = 0; i < n; ++i) {
        const DocId d = docs[i];
        lead->Advance(d);  // the lead holds d
        if (AlreadyOffered(d) || (by_point && by_point->FallsShort())) {
          pruned_ = true;
          continue;
        }
        const uint32_t length = c.length(d);
        if (Inflate(lead->Score() + others_at(length) +
                    band_popularity_[index::LikesBand(c.BaseLikes(d))] + recency) <
            top_.worst().primary) {
          pruned_ = true;
          continue;
        }
        docs[kept++] = d;
      }
      return kept;
    };
    // While the count is not settled every match comes here: the rarest word with points
    // bounds it first, its own cursor moved to each match.
    std::unique_ptr<TermMatcher> match_lead;
    std::vector<double> match_others;
    auto match_others_at = [&](uint32_t length) { return AtLength(match_others, length); };
    std::optional<LeadPointBound> match_points;
    bool match_points_tried = false;
    ForEachSparseAndMatch(
        segment, builder,
        [&](DocId d) {
          if (AlreadyOffered(d)) return;
          if (m == nullptr) {
            m = builder.Build(plan_.root);
            max_text = m->MaxScore();
          }
          double static_bound = 0;
          if (top_.full()) {
            if (!match_points_tried) {
              match_points_tried = true;
              if (const PlanNode* word = RarestWordWithPoints(segment); word != nullptr) {
                match_lead = builder.Term(word->term, word->scored);
                match_others = OthersTextByLength(builder, *word);
                if (match_lead != nullptr) {
                  match_points.emplace(*this, segment, word->term, *match_lead, match_others_at,
                                       recency);
                }
              }
            }
            if (match_lead != nullptr) {
              match_lead->Advance(d);  // every child of the AND holds d
              if (match_points->FallsShort()) {
                pruned_ = true;
                return;
              }
            }
            static_bound = band_popularity_[index::LikesBand(c.BaseLikes(d))] + recency;
            if (Inflate(max_text + static_bound) < top_.worst().primary) {
              pruned_ = true;
              return;
            }
          }
          ScoreAndPush(c, d, *m, static_bound);
        },
        keep);
  }

  // The entry of a table by tweet length (OthersTextByLength) for `length`: its last entry
  // serves every longer one.
  static double AtLength(const std::vector<double>& by_length, uint32_t length) {
    return length < by_length.size() ? by_length[length] : by_length.back();
  }

  // Of the plan's root children (an AND), the word with the fewest postings in `segment`
  // among those with lead points (lead_points.h); null if none has them.
  const PlanNode* RarestWordWithPoints(const Segment& segment) const {
    const index::LeadPoints* points = segment.lead_points();
    if (points == nullptr) return nullptr;
    const PlanNode* rarest = nullptr;
    uint64_t fewest = UINT64_MAX;
    for (const PlanNode& child : plan_.root.children) {
      if (child.kind != PlanNode::Kind::kTerm || points->Of(child.term).empty()) continue;
      if (const uint64_t df = segment.DocFreq(child.term); df < fewest) {
        fewest = df;
        rarest = &child;
      }
    }
    return rarest;
  }

  // Best match of a sparse AND of words and ORs of words (IsSparseAnd; filters such as `from:`
  // and exclusions may join them) whose rarest child is a scored word with champions
  // (champions.h), joined by words among the segment's pair words (pair_champions.h). A match
  // outside the lead's champions scores at most a point of the rest's skyline plus each other
  // word's text at the point's length (of an OR's alternatives, its commonest pair word's, as
  // if the tweet held it; the others are looked up: SparseAndPartner::lookup): at frequency 1
  // for a pair word whose tweet holds it once, at its list's largest frequency for any other
  // word. The tweets that hold a pair word twice or more are its Repeats, with their lengths
  // and likes bands. So the lead's champions are offered first; then every posting of the
  // lead found among the others' repeats, unless its bound (the lead's own text, the others'
  // at their frequencies, its band's popularity and the segment's recency) falls short of the
  // k-th score; and if then the skyline's bound with the others at frequency 1 falls short
  // too, the segment is done: nothing but the lead's list and the repeats was read for the
  // matches passed over. Otherwise the segment's matches are ranked from its count where it
  // owes one and they are few (RankCountedBestMatch), else the lead's other postings are
  // offered (OfferOnceMatches), and the segment is done too. Where the top k is not full after
  // the champions, the matches are ranked from the count if it is owed and they are few, else
  // the rest follows as above (until 2026-12-06 the sparse AND's walk did: `(site10.example.com
  // OR it) then -of`, whose champions hold few matches, walked 130,640 postings of `then`).
  // False, having offered nothing, for other plans.
  bool RunSparseAndChampions(const Segment& segment, MatcherBuilder& builder) {
    const PlanNode& root = plan_.root;
    const index::PairChampions* pairs = segment.pair_champions();
    if (pairs == nullptr || root.kind != PlanNode::Kind::kAnd) return false;
    const PlanNode* lead_node = nullptr;
    uint64_t lead_postings = UINT64_MAX, or_postings = UINT64_MAX;
    for (const PlanNode& child : root.children) {
      if (child.kind == PlanNode::Kind::kOr) {  // an OR of words: its postings together
        uint64_t postings = 0;
        for (const PlanNode& word : child.children) {
          if (word.kind != PlanNode::Kind::kTerm) return false;
          postings += segment.DocFreq(word.term);
        }
        or_postings = std::min(or_postings, postings);
        continue;
      }
      if (child.kind != PlanNode::Kind::kTerm) return false;
      if (const uint64_t df = segment.DocFreq(child.term); df < lead_postings) {
        lead_postings = df;
        lead_node = &child;
      }
    }
    // The lead's list is read whole: a rarer OR leads the sparse AND's walk instead.
    if (lead_node == nullptr || !lead_node->scored || or_postings < lead_postings) return false;
    std::unique_ptr<TermMatcher> lead = builder.Term(lead_node->term, /*scored=*/true);
    index::Champions champions;
    if (lead == nullptr || !lead->cursor().champions(&champions)) return false;
    // Each scored word of the other children. An OR's commonest pair word counts as if the
    // tweet held it (it adds its text or nothing); its other alternatives are looked up
    // (SparseAndPartner::lookup): few tweets hold two of them, and their text on every posting
    // let most through (a word that is not a pair word at its largest frequency: twice as
    // slow as the sparse AND's walk; two pair words at frequency 1: a quarter of the
    // postings of `rara (more OR in)` offered).
    std::vector<SparseAndPartner> others;
    bool any_repeats = false;
    for (const PlanNode& child : root.children) {
      if (&child == lead_node || !child.scored) continue;
      const PlanNode* widest = CommonestPairWord(segment, *pairs, child);
      bool present = false;
      for (const PlanNode* word : WordsOf(child)) {
        std::unique_ptr<TermMatcher> t = builder.Term(word->term, /*scored=*/true);
        if (t == nullptr) continue;
        present = true;
        if (!word->scored) continue;
        SparseAndPartner& o = others.emplace_back();
        o.word = std::move(t);
        o.repeats = pairs->RepeatsOf(word->term);
        if (o.repeats == nullptr) o.most = MaxTextByLength(*o.word);
        if (child.kind == PlanNode::Kind::kOr && word != widest) {
          o.lookup = builder.Term(word->term, /*scored=*/false);
        }
        any_repeats = any_repeats || o.repeats != nullptr;
      }
      if (!present) return false;  // no match: the sparse AND finds none at once
    }
    if (!any_repeats) return false;  // at the largest frequencies the bound rarely cuts
    const Columns& c = segment.columns();
    const DocId visible = segment.VisibleDocs();
    const double recency = RecencyBound(c, 0, visible - 1);
    {
      // The champions' matches: found batch by batch in the other children's lists, not by
      // the plan's matcher, whose leapfrog would walk to the next match of all.
      SparseAndMatches matches(builder, plan_.root, *lead_node);
      auto offer = [&](DocId d, Matcher& m) {
        if (!AlreadyOffered(d)) OfferBestMatch(c, d, m.Score());
      };
      for (const DocId d : champions.docs) matches.Add(d, offer);
      matches.Flush(offer);
    }
    champion_rows_ = std::move(champions.docs);
    const double rest = Inflate(RestBoundBeside(*lead, champions, others) + recency);
    // Few matches among the champions: where the segment owes its count and holds few
    // matches, they are ranked from it; else the repeats' matches fill the top k.
    if (!top_.full() && RankCountedBestMatch(segment, builder)) return true;
    std::vector<DocId> once, offered;  // the lead's other postings; those offered
    OfferRepeatMatches(segment, builder, *lead_node, *lead, others, recency, visible, &once,
                       &offered);
    if (!top_.full() || rest >= top_.worst().primary) {
      // Where the segment owes its count and holds few matches, they are counted and ranked
      // (passing over those offered) for less than the lead's other postings are weighed.
      MergeIn(&champion_rows_, offered);
      if (!RankCountedBestMatch(segment, builder)) {
        OfferOnceMatches(segment, builder, *lead_node, others, recency, once);
      }
      return true;
    }
    pruned_ = true;
    ++champion_cutoffs_;
    return true;
  }

  // The matches of a plan `root` (an AND of words and ORs of words, with any exclusions) among
  // given postings of its child `lead` (or of a word of its child OR), ascending over all calls: a
  // batch is looked up in the other children's lists block by block (PostingCursor::Filter;
  // FilterAny for an OR), checked against the exclusions, and the plan's matcher moved to each
  // match, where it stops.
  class SparseAndMatches {
   public:
    SparseAndMatches(MatcherBuilder& builder, const PlanNode& root, const PlanNode& lead)
        : builder_(builder), root_(root) {
      for (const PlanNode& child : root.children) {
        // An OR the lead is an alternative of holds every posting of the lead.
        if (&child == &lead || (child.kind == PlanNode::Kind::kOr &&
                                std::any_of(child.children.begin(), child.children.end(),
                                            [&](const PlanNode& a) { return &a == &lead; }))) {
          continue;
        }
        Filter& filter = filters_.emplace_back();
        for (const PlanNode* word : WordsOf(child)) {
          if (std::unique_ptr<TermMatcher> t = builder.Term(word->term, /*scored=*/false)) {
            filter.cursors.push_back(&t->cursor());
            filter.words.push_back(std::move(t));
          }
        }
        if (filter.words.empty()) {  // a word, or every alternative, the segment lacks
          empty_ = true;
          break;
        }
      }
      for (const PlanNode& e : root.excluded) excluded_.push_back(builder.Build(e));
    }
    // Adds `d` (ascending) to the batch; calls visit(d, matcher) for each match of a batch
    // once it is full, and at Flush.
    template <typename Visit>
    void Add(DocId d, const Visit& visit) {
      batch_[n_++] = d;
      if (n_ == batch_.size()) Flush(visit);
    }
    template <typename Visit>
    void Flush(const Visit& visit) {
      Offer(batch_.data(), n_, visit);
      n_ = 0;
    }

   private:
    template <typename Visit>
    void Offer(DocId* docs, size_t n, const Visit& visit) {
      if (empty_) return;
      for (Filter& f : filters_) n = index::FilterAny(f.cursors, docs, n);
      for (size_t i = 0; i < n; ++i) {
        const DocId d = docs[i];
        if (AnyMatches(excluded_, d)) continue;
        // Built at the first match: an AND's matcher moves to its first match when built.
        if (m_ == nullptr) m_ = builder_.Build(root_);
        if (m_->doc() < d) m_->Advance(d);
        if (m_->doc() == d) visit(d, *m_);
      }
    }

    MatcherBuilder& builder_;
    const PlanNode& root_;
    std::array<DocId, 128> batch_;  // as many as ForEachSparseAndMatch's batches (kBatch)
    size_t n_ = 0;
    std::unique_ptr<Matcher> m_;  // the plan's, built at the first match
    struct Filter {               // one child: its words present in the segment
      std::vector<std::unique_ptr<TermMatcher>> words;
      std::vector<PostingCursor*> cursors;
    };
    std::vector<Filter> filters_;
    std::vector<std::unique_ptr<Matcher>> excluded_;
    bool empty_ = false;
  };

  // The lead points (lead_points.h) of `term`'s list in `segment`, read by `cursor`'s
  // ordinal; empty if it has none.
  static std::span<const uint8_t> LeadPointsOf(const Segment& segment, const std::string& term,
                                               TermMatcher& cursor) {
    const index::LeadPoints* all = segment.lead_points();
    if (all == nullptr) return {};
    const std::span<const uint8_t> points = all->Of(term);
    return points.size() == cursor.cursor().size() ? points : std::span<const uint8_t>{};
  }

  // Passes over a sparse AND's lead postings on the lead's points (lead_points.h), without a
  // column read: a posting falls short when the lead's text at its frequency, the other
  // words' most text `others(length)`, its band's popularity and the recency bound, at the
  // point's least length, fall short of the k-th score (text falls with length). The bounds
  // of the lead once, as most postings hold it, are a table by point. Decides nothing where
  // the lead has no points.
  class LeadPointBound {
   public:
    template <typename Others>
    LeadPointBound(const Evaluation& e, const Segment& segment, const std::string& term,
                   TermMatcher& lead, const Others& others, double recency)
        : e_(e), lead_(lead) {
      points_ = LeadPointsOf(segment, term, lead);
      if (points_.empty()) return;
      auto bound = [&e, &lead, &others, recency](uint32_t tf, uint8_t point) {
        const uint32_t length = index::LeadPointLength(point);
        return Inflate(lead.ScoreFor(tf, length) + others(length) +
                       e.band_popularity_[index::LeadPointBand(point)] + recency);
      };
      for (size_t p = 0; p < once_.size(); ++p) once_[p] = bound(1, static_cast<uint8_t>(p));
      many_ = bound;
    }
    // Whether the lead's posting at hand (the lead moved to it) falls short; the top k full.
    bool FallsShort() const {
      if (points_.empty()) return false;
      const uint32_t at = lead_.cursor().ordinal();
      if (at >= points_.size()) return false;
      const uint32_t tf = lead_.cursor().freq();
      const double bound = tf == 1 ? once_[points_[at]] : many_(tf, points_[at]);
      return bound < e_.top_.worst().primary;
    }

   private:
    const Evaluation& e_;
    TermMatcher& lead_;
    std::span<const uint8_t> points_;
    std::array<double, 256> once_{};
    std::function<double(uint32_t, uint8_t)> many_;
  };

  // A scored word of a sparse AND beside its lead (RunSparseAndChampions).
  struct SparseAndPartner {
    std::unique_ptr<TermMatcher> word;
    const index::Repeats* repeats = nullptr;  // null: not a pair word
    std::vector<double> most;                 // without repeats: MaxTextByLength
    size_t at = 0;                            // the place in *repeats reached
    // An OR's alternative but its commonest pair word: the lead's postings are looked up in
    // its list (OfferRepeatMatches), and those it holds are offered with its text (at the
    // repeat's frequency or 1 for a pair word, else its most), so the others (`once`) hold
    // none of it.
    std::unique_ptr<TermMatcher> lookup;
    std::vector<DocId> held;  // with lookup: the batch's DocIds its list holds (LookUp)
    size_t held_at = 0;       // the place in held reached

    // For a word looked up: notes which of the ascending docs[0..n) its list holds.
    void LookUp(const DocId* docs, size_t n) {
      held.assign(docs, docs + n);
      held.resize(lookup->cursor().Filter(held.data(), n, /*keep=*/true));
      held_at = 0;
    }
    // For a word looked up: whether its list holds d, of the DocIds last looked up, asked in
    // ascending order.
    bool Holds(DocId d) {
      const bool holds = held_at < held.size() && held[held_at] == d;
      held_at += holds ? 1 : 0;
      return holds;
    }

    // The text the word adds to a tweet of `length` where Find answered `found`: at the
    // repeat's frequency, else TextOnce.
    double TextAt(const index::RepeatPoint* found, uint32_t length) const {
      if (found == nullptr) return TextOnce(length);
      const uint32_t tf = found->tf == 255
                              ? std::max<uint32_t>(255, word->cursor().list_bound().max_tf)
                              : found->tf;
      return word->ScoreFor(tf, length);
    }
    // The most text the word adds to a tweet of `length` that holds it at most once (any
    // number of times, without repeats).
    double TextOnce(uint32_t length) const {
      if (lookup != nullptr) return 0;
      if (repeats != nullptr) return word->ScoreFor(1, length);
      return AtLength(most, length);
    }
    // The repeat of DocId d, or null; d not below the last one asked.
    const index::RepeatPoint* Find(DocId d) {
      return repeats == nullptr ? nullptr : repeats->Find(d, &at);
    }
    // For a word looked up, the most text it adds to DocId d of `length`, which holds it: at
    // its repeat's frequency or 1 for a pair word, else its most. d as for Find.
    double HeldText(DocId d, uint32_t length) {
      if (repeats == nullptr) return AtLength(most, length);
      const index::RepeatPoint* found = Find(d);
      return found != nullptr ? TextAt(found, length) : word->ScoreFor(1, length);
    }
  };

  // Of an OR's scored alternatives, the pair word (pair_champions.h) with the most postings
  // in `segment`; null if none is one, or `node` is not an OR.
  static const PlanNode* CommonestPairWord(const Segment& segment,
                                           const index::PairChampions& pairs,
                                           const PlanNode& node) {
    if (node.kind != PlanNode::Kind::kOr) return nullptr;
    const PlanNode* commonest = nullptr;
    uint32_t most = 0;
    for (const PlanNode& word : node.children) {
      if (!word.scored || pairs.RepeatsOf(word.term) == nullptr) continue;
      if (const uint32_t df = segment.DocFreq(word.term); commonest == nullptr || df > most) {
        commonest = &word;
        most = df;
      }
    }
    return commonest;
  }

  // The most a posting of `lead` outside its champions can score with its text and
  // popularity in a tweet that holds each of `others` once (SparseAndPartner::TextOnce): the
  // maximum over the rest's skyline, each point with the others' text at its length
  // (RestBound, with no others).
  double RestBoundBeside(const TermMatcher& lead, const index::Champions& champions,
                         const std::vector<SparseAndPartner>& others) const {
    const ScoringParams& p = options_.scoring;
    double rest = -std::numeric_limits<double>::infinity();
    for (const index::ImpactPoint& q : champions.rest) {
      double bound = lead.idf() * TfPart(p, q.tf, q.length, stats_.avg_length) +
                     p.popularity_weight * Popularity(p, q.likes);
      for (const SparseAndPartner& o : others) bound += o.TextOnce(q.length);
      rest = std::max(rest, bound);
    }
    return rest;
  }

  // AlreadyOffered for DocIds asked in ascending order: the two lists walked along, not
  // searched (a sparse list's every posting is asked).
  class OfferedRows {
   public:
    OfferedRows(const std::vector<DocId>& changed, const std::vector<DocId>& champions)
        : lists_{&changed, &champions} {}
    bool Holds(DocId d) {
      if (d < next_) return false;  // most postings: one comparison
      bool held = false;
      next_ = kEndDoc;
      for (size_t i = 0; i < lists_.size(); ++i) {
        const std::vector<DocId>& rows = *lists_[i];
        while (at_[i] < rows.size() && rows[at_[i]] < d) ++at_[i];
        if (at_[i] == rows.size()) continue;
        held = held || rows[at_[i]] == d;
        next_ = std::min(next_, rows[at_[i]]);
      }
      return held;
    }

   private:
    std::array<const std::vector<DocId>*, 2> lists_;
    std::array<size_t, 2> at_{};
    DocId next_ = 0;  // no row of either list is below it, past the last DocId asked
  };

  // Offers the matches of the plan among the postings of `lead` (the child `lead_node`) that
  // some partner's repeats hold, or a partner looked up holds (RunSparseAndChampions), and
  // whose bound reaches the k-th score, appending them to *offered (ascending). The lead's
  // other postings not offered yet go to *once. With `held_by`, only the lead's postings that
  // its list holds are read (RunOrAndChampions, where the two seldom meet).
  void OfferRepeatMatches(const Segment& segment, MatcherBuilder& builder,
                          const PlanNode& lead_node, TermMatcher& lead,
                          std::vector<SparseAndPartner>& others, double recency, DocId visible,
                          std::vector<DocId>* once, std::vector<DocId>* offered,
                          TermMatcher* held_by = nullptr) {
    const Columns& c = segment.columns();
    SparseAndMatches matches(builder, plan_.root, lead_node);
    auto push = [&](DocId d, Matcher& m) { PushBestMatch(c, d, m.Score()); };
    std::vector<const index::RepeatPoint*> found(others.size());
    std::vector<char> holds(others.size());  // per partner looked up: whether it holds d
    OfferedRows already(changed_rows_, champion_rows_);
    // The lead's DocIds are read a batch at a time; its frequency only for the candidates,
    // by a second cursor moved to them.
    std::unique_ptr<TermMatcher> tf = builder.Term(lead_node.term, /*scored=*/false);
    const std::span<const uint8_t> points = LeadPointsOf(segment, lead_node.term, *tf);
    // The bound of DocId d (the cursor tf moved to it) in a tweet of `length` and likes band.
    auto bound_at = [&](DocId d, uint32_t length, int band) {
      double bound = lead.ScoreFor(tf->cursor().freq(), length) + band_popularity_[band] + recency;
      for (size_t i = 0; i < others.size(); ++i) {
        if (others[i].lookup != nullptr) {
          if (holds[i]) bound += others[i].HeldText(d, length);
        } else {
          bound += others[i].TextAt(found[i], length);
        }
      }
      return Inflate(bound);
    };
    auto falls_short = [&](double bound) {
      if (!top_.full() || bound >= top_.worst().primary) return false;
      pruned_ = true;
      return true;
    };
    std::array<DocId, kBatch> docs;
    // The batch's repeat points, partner by partner (batch_found[k * others.size() + i]),
    // each asked for as it is found: the points of a common word span megabytes, and reading
    // each where it is used waited on its miss alone.
    std::vector<const index::RepeatPoint*> batch_found(kBatch * others.size());
    while (size_t n = lead.cursor().NextDocs(visible, docs.data(), docs.size())) {
      if (held_by != nullptr) n = held_by->cursor().Filter(docs.data(), n, /*keep=*/true);
      for (size_t i = 0; i < others.size(); ++i) {
        if (others[i].lookup != nullptr) {
          others[i].LookUp(docs.data(), n);
          continue;
        }
        for (size_t k = 0; k < n; ++k) {
          const index::RepeatPoint* p = others[i].Find(docs[k]);
          if (p != nullptr) __builtin_prefetch(p);
          batch_found[k * others.size() + i] = p;
        }
      }
      for (size_t k = 0; k < n; ++k) {
        const DocId d = docs[k];
        const index::RepeatPoint* any = nullptr;
        bool member = false;  // a partner looked up holds d
        for (size_t i = 0; i < others.size(); ++i) {
          if (others[i].lookup != nullptr) {
            holds[i] = others[i].Holds(d);
            member = member || holds[i];
            continue;
          }
          found[i] = batch_found[k * others.size() + i];
          if (found[i] != nullptr) any = found[i];
        }
        if (already.Holds(d)) continue;
        if (any == nullptr && !member) {
          once->push_back(d);
          continue;
        }
        tf->Advance(d);  // the lead holds d
        // A repeat's point gives the tweet's length and likes band. Else the lead's point
        // bounds them first (nearly every such posting falls short of the k-th score: most
        // of `(i OR come) is`'s 60,000 held by i), and only then are the columns read.
        if (any != nullptr) {
          if (falls_short(bound_at(d, any->length, any->band))) continue;
        } else {
          const uint32_t at = tf->cursor().ordinal();
          if (at < points.size() && falls_short(bound_at(d, index::LeadPointLength(points[at]),
                                                         index::LeadPointBand(points[at])))) {
            continue;
          }
          if (falls_short(bound_at(d, c.length(d), index::LikesBand(c.BaseLikes(d))))) continue;
        }
        offered->push_back(d);
        matches.Add(d, push);
      }
    }
    matches.Flush(push);
  }

  // Offers the matches of the plan among `once`, postings of the child `lead_node` in tweets
  // that hold every other scored word at most once (OfferRepeatMatches). A posting is passed
  // over when the lead's text, the others' at frequency 1 (SparseAndPartner::TextOnce), its
  // likes band's popularity and the recency bound fall short of the k-th score, before the
  // other lists are read (with two common words, looking them up first cost half as much
  // again: docs/benchmarks.md): on the lead's point first (LeadPointBound), then on the
  // columns (two cache misses a posting, where nearly every posting is passed over).
  // *weighed, if given, gets the postings looked up in the other lists (the matches among
  // them were offered).
  void OfferOnceMatches(const Segment& segment, MatcherBuilder& builder, const PlanNode& lead_node,
                        const std::vector<SparseAndPartner>& others, double recency,
                        const std::vector<DocId>& once, std::vector<DocId>* weighed = nullptr) {
    const Columns& c = segment.columns();
    SparseAndMatches matches(builder, plan_.root, lead_node);
    auto offer = [&](DocId d, Matcher& m) { OfferBestMatch(c, d, m.Score()); };
    std::unique_ptr<TermMatcher> lead = builder.Term(lead_node.term, /*scored=*/true);
    auto others_once = [&](uint32_t length) {
      double text = 0;
      for (const SparseAndPartner& o : others) text += o.TextOnce(length);
      return text;
    };
    const LeadPointBound by_point(*this, segment, lead_node.term, *lead, others_once, recency);
    for (const DocId d : once) {
      if (top_.full()) {
        lead->Advance(d);  // the lead holds d
        if (by_point.FallsShort() || Inflate(lead->ScoreAt(c.length(d)) + others_once(c.length(d)) +
                                             band_popularity_[index::LikesBand(c.BaseLikes(d))] +
                                             recency) < top_.worst().primary) {
          pruned_ = true;
          continue;
        }
      }
      if (weighed != nullptr) weighed->push_back(d);
      matches.Add(d, offer);
    }
    matches.Flush(offer);
  }

  // For each tweet length up to kOthersLengths (the last entry: any length), the most text
  // the plan's root children other than `lead` can add to a match: for each of their words,
  // its idf times TfPart at the list's largest frequency, summed (an OR over its words).
  // TfPart grows with the frequency at a given length.
  std::vector<double> OthersTextByLength(MatcherBuilder& builder, const PlanNode& lead) {
    std::vector<double> text(kOthersLengths + 1, 0);
    for (const PlanNode& child : plan_.root.children) {
      if (&child == &lead) continue;
      for (const PlanNode* word : WordsOf(child)) {
        std::unique_ptr<TermMatcher> t = builder.Term(word->term, word->scored);
        if (t == nullptr) continue;
        const std::vector<double> most = MaxTextByLength(*t);
        for (size_t length = 0; length <= kOthersLengths; ++length) text[length] += most[length];
      }
    }
    return text;
  }

  // Whether `postings` keep every list the plan `node` reads, and it needs no positions: a
  // phrase only if one of its words is not in `segment` at all, so that it matches nothing
  // there (a misspelt word, or until 2026-12-06 a host typed without its scheme, which the
  // analyzer split into words no link holds).
  static bool TierCovers(const PlanNode& node, const Segment& segment,
                         const index::TierPostings& postings) {
    switch (node.kind) {
      case PlanNode::Kind::kTerm:
        return postings.Find(node.term) != nullptr;
      case PlanNode::Kind::kPhrase:
        return std::any_of(node.phrase_terms.begin(), node.phrase_terms.end(),
                           [&](const std::string& term) { return segment.DocFreq(term) == 0; });
      case PlanNode::Kind::kNothing:
        return true;
      case PlanNode::Kind::kAnd:
      case PlanNode::Kind::kOr:
        for (const auto* nodes : {&node.children, &node.excluded}) {
          for (const PlanNode& child : *nodes) {
            if (!TierCovers(child, segment, postings)) return false;
          }
        }
        return true;
    }
    return false;
  }

  // Offers the query's matches among the rows of `postings`' tier, most liked first (rows whose
  // likes changed were offered already), and stops at the first that cannot enter the top k:
  // every later one ranks lower. True if that decided the segment: every row outside the tier
  // was written with fewer likes than the k-th hit has, and kept them.
  bool RunTierPostings(const Segment& segment, MatcherBuilder& builder,
                       const index::TierPostings& postings, const std::vector<DocId>& changed) {
    const Columns& c = segment.columns();
    Context ctx{&c, &options_.scoring, stats_.avg_length, TfTable()};
    MatcherBuilder by_rank(segment, segment.VisibleDocs(), stats_, ctx, &postings);
    std::unique_ptr<Matcher> m = by_rank.Build(plan_.root);
    std::vector<std::pair<TweetId, DocId>> kept;  // hits pushed, scored below
    for (DocId rank = m->doc(); rank != kEndDoc; m->Next(), rank = m->doc()) {
      const DocId d = postings.doc(rank);
      if (std::binary_search(changed.begin(), changed.end(), d)) continue;
      const std::optional<SortKey> key = Accept(c, d);
      if (!key) continue;
      if (!top_.Wants(*key)) {
        pruned_ = true;
        break;
      }
      top_.Push(Hit{key->id, 0, c.likes(d), c.created_at_ms(d), *key});
      kept.emplace_back(key->id, d);
    }
    ScoreHits(builder, c, &kept);
    if (top_.full() && top_.worst().primary >= postings.min_likes()) {
      pruned_ = true;
      ++tier_cutoffs_;
      return true;
    }
    return false;
  }

  // Sets the best-match score of the hits among `pushed` (TweetId, DocId) still in the top k,
  // from matchers over the segment's own lists.
  void ScoreHits(MatcherBuilder& builder, const Columns& c,
                 std::vector<std::pair<TweetId, DocId>>* pushed) {
    if (pushed->empty()) return;
    std::sort(pushed->begin(), pushed->end());
    std::vector<std::pair<DocId, Hit*>> hits;
    top_.ForEach([&](Hit& hit) {
      auto it = std::lower_bound(pushed->begin(), pushed->end(), std::pair{hit.id, DocId{0}});
      if (it != pushed->end() && it->first == hit.id) hits.emplace_back(it->second, &hit);
    });
    std::sort(hits.begin(), hits.end());
    std::unique_ptr<Matcher> m = builder.Build(plan_.root);
    for (auto [d, hit] : hits) {
      m->Advance(d);  // a match: the tier's lists are the segment's, restricted
      hit->score = FullScore(c, d, m->doc() == d ? m->Score() : 0);
    }
  }

  // Calls visit(d, matcher) for each match d among `rows` (ascending), the matcher standing on
  // it, leapfrogging between the rows and the query's matches.
  template <typename Visit>
  void VisitAmong(MatcherBuilder& builder, const std::vector<DocId>& rows, const Visit& visit) {
    if (rows.empty()) return;
    std::unique_ptr<Matcher> m = builder.Build(plan_.root);
    for (auto it = rows.begin(); it != rows.end();) {
      if (m->doc() < *it) m->Advance(*it);
      const DocId at = m->doc();
      if (at == kEndDoc) return;
      if (at != *it) {
        it = std::lower_bound(it + 1, rows.end(), at);
        continue;
      }
      visit(at, *m);
      ++it;
    }
  }

  // The first tier expected to hold 2k matches, were the query's `matches` spread evenly over
  // the `rows` (a smaller one rarely decides), else the largest.
  const index::LikesTier& PickTier(std::span<const index::LikesTier> tiers, uint64_t matches,
                                   uint64_t rows) const {
    for (const index::LikesTier& tier : tiers) {
      if (tier.docs.size() * matches >= 2 * uint64_t{options_.limit} * rows) return tier;
    }
    return tiers.back();
  }

  // Whether `segment` owes the total a count of an AND that nothing cheaper settles: no bound
  // from document frequencies settles it, and it has no cached count (one found is added to the
  // total, and the segment is counted).
  bool OwesAndCount(const Segment& segment) {
    if (plan_.root.kind != PlanNode::Kind::kAnd || total_ >= stop_ ||
        counted_.contains(segment_index_)) {
      return false;
    }
    bool exact = false;
    const uint64_t bound =
        SegmentLowerBound(segment, segment.MaxTweetId() > options_.watermark, &exact);
    if (exact || total_ + bound >= stop_) return false;  // CountTotal needs no walk
    if (UseCachedCount(segment)) {
      counted_.insert(segment_index_);
      return false;
    }
    return true;
  }

  // Counts a segment that owes its count (OwesAndCount), from its first DocId, keeping in
  // *matches the matches it counts while they are at most `max` (with `keep_first`, the first
  // `max` of them); *all tells whether it kept every match. False if the segment turned out
  // damaged, or (with `only_in_batches`, see CountFrom) was not counted: the walk must follow.
  bool CountOwed(const Segment& segment, size_t max, bool keep_first, std::vector<DocId>* matches,
                 bool* all, bool only_in_batches = false) {
    const uint64_t generation = segment.columns().changes(), before = total_;
    const std::optional<bool> kept = CountFrom(segment, visible_docs_[segment_index_], 0, matches,
                                               max, keep_first, only_in_batches);
    if (!kept) return false;  // still owed: the walk counts it
    *all = *kept;
    counted_.insert(segment_index_);
    if (!segment.Health().ok()) {
      count_missed_damaged_ = true;
      return false;
    }
    StoreCount(segment, generation, before);
    return true;
  }

  // Counts an AND whose count `segment` owes (OwesAndCount), keeping in *matches the matches
  // it counts while they are at most `max`. True when *matches then holds every match of the
  // segment (the count stayed under the cap and under `max`), which can be ranked instead of
  // walking the AND's lists again; false, having counted the segment or not, where the walk
  // must follow.
  bool CountKeepingMatches(const Segment& segment, size_t max, std::vector<DocId>* matches) {
    if (max == 0 || !OwesAndCount(segment)) return false;
    bool all = false;
    return CountOwed(segment, max, /*keep_first=*/false, matches, &all) && all && total_ < stop_;
  }

  // Newest first of an AND whose count a segment with DocIds newest first owes (OwesAndCount),
  // where the count goes in batches of its rarest child's postings, a term's or an OR of terms'
  // (MatchCounter::CountsInBatches): counted first, keeping its first k matches, which are its
  // newest; the AND's lists are not walked (over lists that rarely meet, a leapfrog costs
  // several times the counter's batches: `get 東京`, no match in 10M tweets). False, having
  // counted the segment or not, where the walk must follow.
  bool NewestFromCount(const Segment& segment, MatcherBuilder& builder) {
    if (!options_.newest_from_count || options_.after || !segment.newest_first() ||
        options_.limit == 0 || !OwesAndCount(segment)) {
      return false;
    }
    std::vector<DocId> newest;
    bool all = false;
    if (!CountOwed(segment, options_.limit, /*keep_first=*/true, &newest, &all,
                   /*only_in_batches=*/true)) {
      return false;
    }
    ++newest_from_counts_;
    if (!all) pruned_ = true;         // its older matches were counted, not ranked
    if (newest.empty()) return true;  // (an AND's matcher, built, walks to its first match)
    const Columns& c = segment.columns();
    std::unique_ptr<Matcher> m = builder.Build(plan_.root);
    for (const DocId d : newest) {
      const std::optional<SortKey> key = Accept(c, d);  // the counter's filters: it passes
      if (!key || !top_.Wants(*key)) continue;          // newer segments may have filled the page
      m->Advance(d);  // a match: it stops there, for the hit's score
      Offer(c, d, *key, *m);
    }
    return true;
  }

  // Most liked of an AND that the segment must count and whose matches there fit under the
  // cap: counted first (the count is owed anyway), keeping the matches, which are then
  // offered one by one; the AND's lists are not walked a second time (a leapfrog over common
  // words costs more than the counter's bitmaps: `me like back`). False, having counted the
  // segment or not, where the walk must follow (CountKeepingMatches).
  bool RankCountedMatches(const Segment& segment, MatcherBuilder& builder,
                          const std::function<bool(DocId)>& offered) {
    std::vector<DocId> matches;
    if (!CountKeepingMatches(segment, SIZE_MAX, &matches)) return false;
    const Columns& c = segment.columns();
    std::unique_ptr<Matcher> m = builder.Build(plan_.root);
    for (const DocId d : matches) {
      if (TooFewLikes(c, d) || offered(d)) continue;
      const std::optional<SortKey> key = Accept(c, d);
      if (!key || !top_.Wants(*key)) continue;
      m->Advance(d);  // a match: it stops there, for the hit's score
      Offer(c, d, *key, *m);
    }
    return true;
  }

  // A pair word's frequency in the tweets that hold it, ascending, from its repeats
  // (pair_champions.h): a tweet not among them holds it once; one with 255 or more is given
  // the list's largest frequency, a bound.
  struct RepeatedWord {
    RepeatedWord() = default;
    RepeatedWord(const index::Repeats* r, TermMatcher& word)
        : repeats(r), max_tf(std::max<uint32_t>(1, word.cursor().list_bound().max_tf)) {}
    // Requires: the word is in `d`, and d is not below the last DocId asked. Without
    // repeats (not a pair word), the list's largest frequency.
    uint32_t Tf(DocId d) {
      if (repeats == nullptr) return max_tf;
      const index::RepeatPoint* p = repeats->Find(d, &at);
      return p == nullptr ? 1 : p->tf == UINT8_MAX ? max_tf : p->tf;
    }
    const index::Repeats* repeats = nullptr;
    size_t at = 0;  // Repeats::Find's place
    uint32_t max_tf = 1;
  };

  // Best match of an AND whose count the segment owes and whose matches there are at most
  // options_.rank_counted_up_to: counted first, keeping the matches (CountKeepingMatches),
  // which are then scored one by one; the lists are not walked again (the count met every
  // match already, over bitmaps). A match is passed over when its text bound (CountedText)
  // falls short of the k-th score with, in turn: its lead point's likes band and least length
  // (no column read), the most popularity at its length, its likes band's popularity at its
  // length; each with its block's recency bound. False where the walk must follow.
  bool RankCountedBestMatch(const Segment& segment, MatcherBuilder& builder) {
    std::vector<DocId> matches;
    if (!CountKeepingMatches(segment, options_.rank_counted_up_to, &matches)) return false;
    ++counted_rankings_;
    const Columns& c = segment.columns();
    CountedText text(*this, segment, builder, matches.size());
    const double most_popularity = band_popularity_.back();
    std::unique_ptr<Matcher> m;
    for (const DocId d : matches) {
      if (AlreadyOffered(d)) continue;
      if (m == nullptr) m = builder.Build(plan_.root);
      double static_bound = 0;
      if (top_.full()) {
        const double recency = RecencyBound(c, d, d);  // its 4,096 DocIds', kept per query
        text.MoveTo(d);
        if (const int point = text.point(); point >= 0) {  // no column read yet
          const auto p = static_cast<uint8_t>(point);
          if (Inflate(text.At(index::LeadPointLength(p)) +
                      band_popularity_[index::LeadPointBand(p)] + recency) < top_.worst().primary) {
            pruned_ = true;
            continue;
          }
        }
        const double most = text.At(c.length(d));
        if (Inflate(most + most_popularity + recency) < top_.worst().primary) {
          pruned_ = true;
          continue;
        }
        static_bound = band_popularity_[index::LikesBand(c.BaseLikes(d))] + recency;
        if (Inflate(most + static_bound) < top_.worst().primary) {
          pruned_ = true;
          continue;
        }
      }
      ScoreAndPush(c, d, *m, static_bound);
    }
    return true;
  }

  // The most text a match of the plan can have, match by match in ascending DocIds (MoveTo),
  // at a given length (At): each scored word's idf times TfPart at the length and the word's
  // frequency in the match. A word rare beside the matches (at most kExactTextPostings
  // postings per match: its cursor decodes at most about one block per two matches) is looked
  // up with its own cursor, so that its frequency is exact and a match that lacks it, under
  // an OR, gets none of its text; not a pair word that every match holds, whose repeats give
  // as much without a block decoded. Where a word looked up has lead points (lead_points.h), the
  // match's point gives a likes band and a lower bound of its length without a column read.
  // Any other word counts as if the match held it: at its frequency from the segment's
  // repeats where it is a pair word (a posting not among its repeats holds the word once:
  // pair_champions.h), else at its list's largest frequency. For a plan of pair words and
  // rare words this is the match's text itself.
  class CountedText {
   public:
    static constexpr size_t kExactTextPostings = 64;

    CountedText(const Evaluation& e, const Segment& segment, MatcherBuilder& builder,
                size_t matches) {
      const index::PairChampions* pairs = segment.pair_champions();
      std::vector<ScoredWord> words;
      CollectWords(e.plan_.root, /*in_or=*/false, &words);
      for (const ScoredWord& w : words) {
        std::unique_ptr<TermMatcher> t = builder.Term(*w.word, /*scored=*/true);
        if (t == nullptr || t->idf() == 0) continue;
        const index::Repeats* repeats = pairs == nullptr ? nullptr : pairs->RepeatsOf(*w.word);
        // A pair word that every match holds has its exact frequency from its repeats; a
        // phrase's words are scored by the phrase.
        const bool exact = !w.in_phrase && (repeats == nullptr || w.in_or) &&
                           t->cursor().size() <= kExactTextPostings * matches;
        RepeatedWord r(exact ? nullptr : repeats, *t);
        std::span<const uint8_t> points;
        if (exact) points = LeadPointsOf(segment, *w.word, *t);
        words_.push_back({std::move(t), r, exact, points});
      }
      tf_.resize(words_.size());
    }
    // Reads each word's frequency in `d`, a match not below the last one moved to.
    void MoveTo(DocId d) {
      point_ = -1;
      for (size_t i = 0; i < words_.size(); ++i) {
        Word& w = words_[i];
        if (!w.exact) {
          tf_[i] = w.repeated.Tf(d);
          continue;
        }
        PostingCursor& cursor = w.term->cursor();
        if (cursor.doc() < d) cursor.Advance(d);
        tf_[i] = cursor.doc() == d ? cursor.freq() : 0;
        if (tf_[i] != 0 && point_ < 0 && !w.points.empty()) {
          const uint32_t at = cursor.ordinal();
          if (at < w.points.size()) point_ = w.points[at];
        }
      }
    }
    // The text bound of the match moved to, were it `length` words long.
    double At(uint32_t length) const {
      double text = 0;
      for (size_t i = 0; i < words_.size(); ++i) {
        if (tf_[i] != 0) text += words_[i].term->ScoreFor(tf_[i], length);
      }
      return text;
    }
    // The lead point of the match moved to, from a word that holds it; -1 if none has one.
    int point() const { return point_; }

   private:
    // A scored word of the plan, and where it stands.
    struct ScoredWord {
      const std::string* word;
      bool in_phrase;  // a phrase's word
      bool in_or;      // under an OR
    };
    // The plan's scored words, in CollectScoredWords's order.
    static void CollectWords(const PlanNode& node, bool in_or, std::vector<ScoredWord>* words) {
      if (node.kind == PlanNode::Kind::kTerm && node.scored) {
        words->push_back({&node.term, false, in_or});
      }
      for (const std::string& t : node.phrase_terms) words->push_back({&t, true, in_or});
      for (const PlanNode& child : node.children) {
        CollectWords(child, in_or || node.kind == PlanNode::Kind::kOr, words);
      }
    }

    struct Word {
      std::unique_ptr<TermMatcher> term;  // its cursor is moved only by MoveTo, if exact
      RepeatedWord repeated;
      bool exact = false;               // looked up by its cursor
      std::span<const uint8_t> points;  // if exact: its lead points, if it has any
    };
    std::vector<Word> words_;
    std::vector<uint32_t> tf_;  // per word, in the match moved to (0: an exact word it lacks)
    int point_ = -1;
  };

  // Scores `d`, a match of the plan, with `m` (moved to it) and pushes it, unless the top k is
  // full and its text plus `static_bound` (its likes band's popularity and a recency bound)
  // falls short of the k-th score.
  void ScoreAndPush(const Columns& c, DocId d, Matcher& m, double static_bound) {
    if (m.doc() < d) m.Advance(d);
    if (m.doc() != d) return;
    const double text = m.Score();
    if (top_.full() && Inflate(text + static_bound) < top_.worst().primary) {
      pruned_ = true;
      return;
    }
    PushBestMatch(c, d, text);
  }

  // Offers every match of `m` in most-liked order but those `offered` says were (which must
  // include every row whose likes changed since the segment was written), skipping the
  // windows whose block bounds hold no likes band that can reach the k-th hit, and the ranges
  // of DocIds with too few likes.
  void RunExhaustive(const Segment& segment, std::unique_ptr<Matcher> m,
                     const std::function<bool(DocId)>& offered) {
    const Columns& c = segment.columns();
    const DocId visible = segment.VisibleDocs();
    DocId window_end = kEndDoc;  // [d, window_end] holds a band that passed; kEndDoc: none yet
    for (DocId d = m->doc(); d != kEndDoc;) {
      if (top_.full()) {
        const auto likes = static_cast<uint64_t>(top_.worst().primary);
        DocId target = d;
        if (window_end == kEndDoc || d > window_end) {
          target = SkipBandWindows(*m, visible, d, likes, &window_end);
          if (target == kEndDoc) return;
        }
        // Skip the ranges where no tweet has enough likes to enter the top k.
        if (target == d && !SkipToLikes(c, visible, likes, &target)) return;
        if (target != d) {
          m->Advance(target);
          d = m->doc();
          continue;
        }
      }
      if (!TooFewLikes(c, d) && (offered == nullptr || !offered(d))) {
        if (std::optional<SortKey> key = Accept(c, d)) Offer(c, d, *key, *m);
      }
      m->Next();
      d = m->doc();
    }
  }

  // An upper bound of the static score of every tweet in the range holding `d`, computed once
  // per range (it costs a logarithm and an exponential).
  double StaticBound(const Columns& c, DocId d) {
    const DocId range = d >> Columns::kRangeShift;
    if (&c != bound_columns_ || range != bound_range_) {
      bound_columns_ = &c;
      bound_range_ = range;
      bound_ = StaticScore(options_.scoring, c.range_max_likes(d), c.range_max_created_at_ms(d),
                           options_.now_ms);
    }
    return bound_;
  }

  // From `target` on, skips the windows in which `m`'s block bounds (WindowBands) hold no
  // posting of a likes band that reaches `likes`: every tweet there was written with fewer
  // likes (rows whose likes changed are offered apart). Returns the first DocId not ruled
  // out, with *end the last DocId of its window, or kEndDoc.
  DocId SkipBandWindows(Matcher& m, DocId visible, DocId target, uint64_t likes, DocId* end) {
    const int band = likes > UINT32_MAX ? index::kLikesBands - 1
                                        : index::LikesBand(static_cast<uint32_t>(likes));
    const uint32_t wanted = ~((1u << band) - 1);
    while (target < visible) {
      *end = visible - 1;
      if ((m.WindowBands(target, end, nullptr) & wanted) != 0) return target;
      pruned_ = true;
      if (*end >= visible - 1) return kEndDoc;
      target = *end + 1;
    }
    return kEndDoc;
  }

  // Moves `d` past the ranges that cannot hold a tweet with `likes` likes. Returns false when
  // no such range is left in the segment.
  bool SkipToLikes(const Columns& c, DocId visible, uint64_t likes, DocId* d) {
    if (likes == 0 || c.range_max_likes(*d) >= likes) return true;
    pruned_ = true;
    *d = c.NextRangeWithLikes(*d, visible, likes);
    return *d != kEndDoc;
  }

  // Offers a best-match candidate whose text score is known. When even the static bound of
  // its range cannot lift it into the top k, its exact static score is never computed.
  void OfferBestMatch(const Columns& c, DocId d, double text) {
    if (top_.full() && Inflate(text + StaticBound(c, d)) < top_.worst().primary) {
      pruned_ = true;
      return;
    }
    PushBestMatch(c, d, text);
  }
  // Pushes `d`, whose text score is known, if the filters and the search-after key take it.
  void PushBestMatch(const Columns& c, DocId d, double text) {
    std::optional<SortKey> key = Accept(c, d);
    if (!key) return;
    key->primary = FullScore(c, d, text);
    if (options_.after && !Before(*options_.after, *key)) return;
    top_.Push(Hit{key->id, key->primary, c.likes(d), c.created_at_ms(d), *key});
  }

  // An upper bound of the recency part of every tweet of `c` in DocIds [from, to], from the
  // newest created_at of each 4,096 DocIds (computed once per query and segment) or, for a
  // wider span, of the whole segment.
  double RecencyBound(const Columns& c, DocId from, DocId to) {
    constexpr int kShift = Columns::kBlockShift;
    const ScoringParams& p = options_.scoring;
    if (&c != recency_columns_) {
      recency_columns_ = &c;
      recency_by_block_.clear();
      recency_segment_ = p.recency_weight * Recency(p, c.max_created_at_ms(), options_.now_ms);
    }
    if ((to >> kShift) - (from >> kShift) > 8) return recency_segment_;
    double bound = 0;
    for (DocId block = from >> kShift; block <= to >> kShift; ++block) {
      if (recency_by_block_.size() <= block) recency_by_block_.resize(block + 1, -1);
      double& r = recency_by_block_[block];
      if (r < 0) {
        const int64_t newest = c.block_max_created_at_ms(block << kShift);
        r = p.recency_weight * Recency(p, newest, options_.now_ms);
      }
      bound = std::max(bound, r);
    }
    return bound;
  }

  // Pruning window by window, from block bounds per likes band without decoding a block
  // (Ding & Suel's block-max idea with "shallow" moves, as Lucene's advanceShallow). From
  // `target` on, skips every window of DocIds in which no document can enter the top k:
  // `bands(target, &end, sums)` (a matcher's WindowBands) names the likes bands a match in
  // [target, end] may lie in and bounds its text score per band; the window's bound is the
  // best band's text bound plus the band's popularity bound plus the window's recency bound.
  // Returns the first DocId not ruled out (kEndDoc if none is left), and leaves window_
  // describing its window. Requires: top k full.
  template <typename Bands>
  DocId SkipWindows(const Columns& c, DocId visible, DocId target, const Bands& bands) {
    const double threshold = top_.worst().primary;
    while (target < visible) {
      DocId end = visible - 1;
      std::array<double, index::kLikesBands> sums{};
      const uint32_t mask = bands(target, &end, sums.data());
      if (mask != 0) {
        const double recency = RecencyBound(c, target, end);
        double best = -std::numeric_limits<double>::infinity();
        for (int b = 0; b < index::kLikesBands; ++b) {
          window_.band_score[b] = (mask >> b & 1) != 0
                                      ? Inflate(sums[b] + band_popularity_[b] + recency)
                                      : -std::numeric_limits<double>::infinity();
          best = std::max(best, window_.band_score[b]);
        }
        if (best >= threshold) {
          window_.columns = &c;
          window_.begin = target;
          window_.end = end;
          window_.threshold = threshold;
          window_.recency = recency;
          return target;
        }
      }
      pruned_ = true;
      if (end >= visible - 1) return kEndDoc;
      target = end + 1;
    }
    return kEndDoc;
  }

  // The window bands of flat terms: in a conjunction all must match, in a disjunction any.
  static uint32_t TermBands(std::span<TermMatcher* const> terms, bool conjunctive, DocId target,
                            DocId* end, double* sums) {
    uint32_t all = (1u << index::kLikesBands) - 1, any = 0;
    for (TermMatcher* t : terms) {
      const uint32_t bands = t->WindowBands(target, end, sums);
      all &= bands;
      any |= bands;
    }
    return conjunctive ? all : any;
  }

  // True if window_ holds `d` and was computed against the current k-th score.
  bool InWindow(const Columns& c, DocId d) const {
    return window_.columns == &c && d >= window_.begin && d <= window_.end &&
           window_.threshold == top_.worst().primary;
  }

  // An upper bound of the static score of `d` (inside window_), from the likes it was written
  // with and the window's recency; nullopt when even the best text score the window allows
  // cannot lift it into the top k. Rows whose likes changed since are not asked about (they
  // were offered first: OfferChangedRows).
  std::optional<double> WindowStaticBound(const Columns& c, DocId d) {
    const int band = index::LikesBand(c.BaseLikes(d));
    if (window_.band_score[band] < top_.worst().primary) {
      pruned_ = true;
      return std::nullopt;
    }
    return band_popularity_[band] + window_.recency;
  }

  // Offers best-match candidate d (inside window_ once the top k is full) with the text
  // score text() gives, unless it was offered already, its likes band rules it out, or its
  // text with its band's bound falls short; admit() is asked last (exclusions).
  template <typename Text, typename Admit>
  void OfferCandidate(const Columns& c, DocId d, const Text& text, const Admit& admit) {
    if (AlreadyOffered(d)) return;
    std::optional<double> static_bound;
    if (top_.full()) {
      static_bound = WindowStaticBound(c, d);
      if (!static_bound) return;
    }
    const double t = text();
    if (static_bound && Inflate(t + *static_bound) < top_.worst().primary) {
      pruned_ = true;
      return;
    }
    if (admit()) OfferBestMatch(c, d, t);
  }

  // A sealed segment's rows whose likes changed since it was written have no place in its
  // block bounds (which count the likes it was written with): best match offers their
  // matches first, and the walks pass over them (AlreadyOffered).
  void OfferChangedRows(const Segment& segment, MatcherBuilder& builder) {
    changed_rows_.clear();
    segment.columns().ChangedLikesRows(&changed_rows_);
    const Columns& c = segment.columns();
    VisitAmong(builder, changed_rows_,
               [&](DocId d, Matcher& m) { OfferBestMatch(c, d, m.Score()); });
  }
  bool AlreadyOffered(DocId d) const {
    return (!changed_rows_.empty() &&
            std::binary_search(changed_rows_.begin(), changed_rows_.end(), d)) ||
           (!champion_rows_.empty() &&
            std::binary_search(champion_rows_.begin(), champion_rows_.end(), d));
  }

  // How many words of `node` score, and the first of them, with whether every match of the
  // node holds it (a term's own word, under ANDs only: not under an OR).
  struct ScoredWords {
    int count = 0;
    const std::string* first = nullptr;
    bool first_required = false;
  };
  static void CountScoredWords(const PlanNode& node, bool required, ScoredWords* words) {
    auto add = [&](const std::string& word) {
      if (words->count++ > 0) return;
      words->first = &word;
      words->first_required = required;
    };
    if (node.kind == PlanNode::Kind::kTerm && node.scored) add(node.term);
    if (node.kind == PlanNode::Kind::kPhrase) {
      for (const std::string& t : node.phrase_terms) add(t);
    }
    for (const PlanNode& c : node.children) {
      CountScoredWords(c, required && node.kind == PlanNode::Kind::kAnd, words);
    }
  }
  // The word RunChampions ranks by: the plan's only scored word, if every match holds it;
  // else null (`word OR from:x`: a match of from:x alone owes nothing to the word's list).
  static const std::string* ChampionWord(const PlanNode& root) {
    ScoredWords words;
    CountScoredWords(root, true, &words);
    return words.count == 1 && words.first_required ? words.first : nullptr;
  }

  // The most a posting of `word`'s list outside its `champions` can score with its text and
  // popularity: the maximum over the rest's skyline (champions.h); -infinity if every
  // posting is a champion.
  double RestBound(const TermMatcher& word, const index::Champions& champions) const {
    return RestBoundBeside(word, champions, {});
  }

  // The most any match of `word` in the segment can score, from its list's bounds per likes
  // band and the segment's recency bound.
  double ListBound(const Columns& c, DocId visible, TermMatcher& word) {
    std::array<double, index::kLikesBands> sums{};
    const uint32_t bands = word.AddBandText(word.cursor().list_bound(), sums.data());
    double best = -std::numeric_limits<double>::infinity();
    for (int b = 0; b < index::kLikesBands; ++b) {
      if ((bands >> b & 1) != 0) best = std::max(best, sums[b] + band_popularity_[b]);
    }
    return Inflate(best + RecencyBound(c, 0, visible - 1));
  }

  // Best match of a plan with one scored word, which every match holds (filters and
  // exclusions may join it), over a
  // sealed segment where the word's list has champions (champions.h). Returns true if the
  // segment is done:
  //  - the list's bounds per likes band cannot reach the k-th score: nothing to rank; or
  //  - the matches among the champions were ranked, and no other posting of the list can
  //    reach the k-th score (its text and popularity at most the rest's skyline allows, its
  //    recency at most the segment's newest tweet's).
  // Otherwise the usual walk follows and passes over the rows ranked here (AlreadyOffered).
  // Plans of several scored words are left to the usual walks: a bound for a match outside
  // every word's champions adds each word's rest bound, and that sum stayed above the k-th
  // score for every such query measured (docs/benchmarks.md).
  bool RunChampions(const Segment& segment, MatcherBuilder& builder) {
    champion_rows_.clear();
    if (champion_word_ == nullptr) return false;
    std::unique_ptr<TermMatcher> word = builder.Term(*champion_word_, /*scored=*/true);
    index::Champions champions;
    if (word == nullptr || !word->cursor().champions(&champions)) return false;
    const Columns& c = segment.columns();
    const DocId visible = segment.VisibleDocs();
    if (top_.full() && ListBound(c, visible, *word) < top_.worst().primary) {
      pruned_ = true;
      return true;
    }
    const double recency = RecencyBound(c, 0, visible - 1);
    if (plan_.root.kind == PlanNode::Kind::kTerm) {
      // The champions' frequencies are known: no list is read. With the top k full, a
      // champion whose text plus its likes band's and the segment's bounds falls short is
      // passed over before its exact static score is computed (a logarithm and a power).
      // Where the record keeps each champion's length and likes band, the columns are not
      // read for that bound (each a cache miss), only for the champions it lets through.
      const bool kept = !champions.lengths.empty();
      for (size_t i = 0; i < champions.docs.size(); ++i) {
        const DocId d = champions.docs[i];
        if (AlreadyOffered(d)) continue;
        const uint32_t length = kept && champions.lengths[i] != index::kChampionLongLength
                                    ? champions.lengths[i]
                                    : c.length(d);
        const double text = word->ScoreFor(champions.tfs[i], length);
        const int band = kept ? champions.bands[i] : index::LikesBand(c.BaseLikes(d));
        if (top_.full() &&
            Inflate(text + band_popularity_[band] + recency) < top_.worst().primary) {
          continue;
        }
        OfferBestMatch(c, d, text);
      }
    } else {
      VisitAmong(builder, champions.docs, [&](DocId d, Matcher& m) {
        if (!AlreadyOffered(d)) OfferBestMatch(c, d, m.Score());
      });
    }
    champion_rows_ = std::move(champions.docs);  // offered: the walks pass over them
    if (!top_.full() || Inflate(RestBound(*word, champions) + recency) >= top_.worst().primary) {
      return false;
    }
    pruned_ = true;
    ++champion_cutoffs_;
    return true;
  }

  // Best match of `s OR c` (RunOrChampions), s sparse with champions, c a pair word with
  // champions and repeats (pair_champions.h). A match of s alone outside its champions scores
  // at most s's rest bound, one of c alone c's; one of both, outside s's champions, at most
  // s's rest skyline with c's text at frequency 1 (RestBoundBeside) if the tweet holds c
  // once, and else it is among c's repeats. So the two words' champions are offered, then
  // the matches of both among c's repeats whose bound reaches the k-th score, and the other
  // matches of both only if the bound of both then does. Instead of every match of both,
  // scored, as RunOrChampions offers. True if the segment is done; false if the
  // walk follows (passing over every row offered); nullopt, having offered nothing, where a
  // word lacks what this needs.
  std::optional<bool> RunOrOverRepeats(const Segment& segment, MatcherBuilder& builder,
                                       const std::string& sparse, const std::string& common) {
    const index::PairChampions* pairs = segment.pair_champions();
    const index::Repeats* repeats = pairs == nullptr ? nullptr : pairs->RepeatsOf(common);
    if (repeats == nullptr) return std::nullopt;
    const PlanNode* lead_node = nullptr;
    for (const PlanNode& child : plan_.root.children) {
      if (child.term == sparse) lead_node = &child;
    }
    std::unique_ptr<TermMatcher> lead = builder.Term(sparse, /*scored=*/true);
    std::vector<SparseAndPartner> others(1);
    others[0].word = builder.Term(common, /*scored=*/true);
    others[0].repeats = repeats;
    index::Champions lead_champions, common_champions;
    if (lead_node == nullptr || lead == nullptr || others[0].word == nullptr ||
        !lead->cursor().champions(&lead_champions) ||
        !others[0].word->cursor().champions(&common_champions)) {
      return std::nullopt;
    }
    const Columns& c = segment.columns();
    const DocId visible = segment.VisibleDocs();
    const double recency = RecencyBound(c, 0, visible - 1);
    const double alone = Inflate(
        std::max(RestBound(*lead, lead_champions), RestBound(*others[0].word, common_champions)) +
        recency);
    const double both = Inflate(RestBoundBeside(*lead, lead_champions, others) + recency);
    std::vector<DocId> rows = lead_champions.docs;
    MergeIn(&rows, common_champions.docs);
    OfferChampionRows(segment, builder, std::move(rows),
                      std::numeric_limits<double>::infinity());  // decided below
    if (!top_.full()) return false;                              // the walk ranks the rest
    // The matches of both words, found as RunOrChampions finds them (there may be none, as in
    // `in OR ありがとう`); those among c's repeats whose bound reaches the k-th score are
    // offered, and the others only if the bound of both does.
    std::vector<DocId> matches, candidates, once;
    AppendDocs(lead->cursor(), visible, &matches,
               {&builder.Term(common, /*scored=*/false)->cursor()});
    OfferedRows already(changed_rows_, champion_rows_);
    std::unique_ptr<TermMatcher> tf = builder.Term(sparse, /*scored=*/false);
    for (const DocId d : matches) {
      if (already.Holds(d)) continue;
      const index::RepeatPoint* q = others[0].Find(d);
      if (q == nullptr) {
        once.push_back(d);
        continue;
      }
      tf->Advance(d);
      const double bound = lead->ScoreFor(tf->cursor().freq(), q->length) +
                           others[0].TextAt(q, q->length) + band_popularity_[q->band] + recency;
      if (Inflate(bound) >= top_.worst().primary) candidates.push_back(d);
    }
    VisitAmong(builder, candidates, [&](DocId d, Matcher& m) { PushBestMatch(c, d, m.Score()); });
    if (both >= top_.worst().primary) {
      VisitAmong(builder, once, [&](DocId d, Matcher& m) { OfferBestMatch(c, d, m.Score()); });
      MergeIn(&candidates, once);
    }
    MergeIn(&champion_rows_, candidates);  // a walk that follows passes over them
    if (alone >= top_.worst().primary) return false;
    pruned_ = true;
    ++champion_cutoffs_;
    return true;
  }

  // Best match of an OR of scored words over their champions (champions.h). A match of one
  // of the words alone that is not among its champions scores at most that word's rest bound
  // (and the segment's recency bound); a match of several words is a match of two of them.
  // So the champions of every word, every posting of a word whose list is no longer than
  // champions are, and every match of two of the words are offered first (the intersections
  // are cheap because every list but the longest must be sparse); if then no word's rest
  // bound can reach the k-th score, the segment is done. Otherwise the usual walk follows and
  // passes over the rows offered here. False, having offered nothing, for other plans, or
  // when a list longer than that has no champions (in a small segment, offering a list of a
  // few hundred postings whole cost more than MaxScore's walk: docs/benchmarks.md).
  bool RunOrChampions(const Segment& segment, MatcherBuilder& builder) {
    const PlanNode& root = plan_.root;
    if (root.kind != PlanNode::Kind::kOr || root.children.size() < 2) return false;
    const DocId visible = segment.VisibleDocs();
    std::vector<std::pair<uint64_t, const std::string*>> words;  // (postings, word), present
    for (const PlanNode& child : root.children) {
      if (child.kind != PlanNode::Kind::kTerm || !child.scored) return false;
      if (const uint64_t df = segment.DocFreq(child.term); df > 0) {
        words.emplace_back(df, &child.term);
      }
    }
    std::sort(words.begin(), words.end());
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i].first * kSparseAndDensity >= visible) return false;
    }
    if (words.size() == 2) {
      if (std::optional<bool> done =
              RunOrOverRepeats(segment, builder, *words[0].second, *words[1].second)) {
        return *done;
      }
    }
    std::vector<DocId> rows;  // ascending: each part is merged in as it comes
    double rest = -std::numeric_limits<double>::infinity();
    for (auto [postings, word] : words) {
      std::unique_ptr<TermMatcher> m = builder.Term(*word, /*scored=*/true);
      if (m == nullptr) continue;
      index::Champions champions;
      const size_t from = rows.size();
      if (m->cursor().champions(&champions)) {
        rest = std::max(rest, RestBound(*m, champions));
        rows.insert(rows.end(), champions.docs.begin(), champions.docs.end());
      } else if (postings <= index::kMaxChampions) {  // no longer than champions are
        AppendDocs(m->cursor(), visible, &rows);
      } else {
        return false;
      }
      MergeTail(&rows, from);
    }
    for (size_t i = 0; i < words.size(); ++i) {
      for (size_t j = i + 1; j < words.size(); ++j) {
        std::unique_ptr<TermMatcher> rarer = builder.Term(*words[i].second, /*scored=*/false);
        std::unique_ptr<TermMatcher> other = builder.Term(*words[j].second, /*scored=*/false);
        if (rarer != nullptr && other != nullptr) {
          const size_t from = rows.size();
          AppendDocs(rarer->cursor(), visible, &rows, {&other->cursor()});
          MergeTail(&rows, from);
        }
      }
    }
    return OfferChampionRows(segment, builder, std::move(rows), rest);
  }

  // The N scored words of a plan best match can rank over pair champions: an OR of N words,
  // or an AND whose only scored children are N words (filters such as `from:` and exclusions
  // may join them); else nulls.
  template <size_t N>
  static std::array<const std::string*, N> ScoredPlanWords(const PlanNode& root) {
    const bool disjunction = root.kind == PlanNode::Kind::kOr;
    if (disjunction ? !root.excluded.empty() || root.children.size() != N
                    : root.kind != PlanNode::Kind::kAnd) {
      return {};
    }
    std::array<const std::string*, N> words{};
    size_t n = 0;
    for (const PlanNode& child : root.children) {
      if (child.kind != PlanNode::Kind::kTerm || (disjunction && !child.scored)) return {};
      if (!child.scored) continue;
      if (n == words.size()) return {};
      words[n++] = &child.term;
    }
    return n == words.size() ? words : std::array<const std::string*, N>{};
  }

  // The most a match of both words outside their pair's champions can score with its text
  // and popularity: the maximum over the rest's skyline (pair_champions.h); -infinity if
  // every match is a champion. `swapped` (PairChampions::Find's) says `b` is the record's
  // first word.
  double PairRestBound(const TermMatcher& a, const TermMatcher& b,
                       const index::PairChampionList& pair, bool swapped) const {
    const TermMatcher& first = swapped ? b : a;
    const TermMatcher& second = swapped ? a : b;
    const ScoringParams& p = options_.scoring;
    double best = -std::numeric_limits<double>::infinity();
    for (const index::PairPoint& q : pair.rest) {
      best = std::max(best, first.idf() * TfPart(p, q.tf_first, q.length, stats_.avg_length) +
                                second.idf() * TfPart(p, q.tf_second, q.length, stats_.avg_length) +
                                p.popularity_weight * Popularity(p, q.likes));
    }
    return best;
  }

  // Best match of two common words, `a b` or `a OR b`, over their pair champions
  // (pair_champions.h). A match of both that is not among the pair's champions scores at most
  // the pair's rest bound (and the segment's recency bound); under OR, a match of one word
  // alone that is not among that word's champions scores at most the word's rest bound. So
  // the pair's champions (and, under OR, each word's) are offered first; if then no rest
  // bound can reach the k-th score, the segment is done. Otherwise the usual walk follows and
  // passes over the rows offered here. False, having offered nothing, for other plans and
  // where the segment keeps no champions of the pair.
  bool RunPairChampions(const Segment& segment, MatcherBuilder& builder) {
    const std::array<const std::string*, 2> words = pair_words_;
    const index::PairChampions* pairs = segment.pair_champions();
    if (words[0] == nullptr || pairs == nullptr) return false;
    bool swapped = false;
    const index::PairChampionList* pair = pairs->Find(*words[0], *words[1], &swapped);
    if (pair == nullptr) return false;
    std::unique_ptr<TermMatcher> a = builder.Term(*words[0], /*scored=*/true);
    std::unique_ptr<TermMatcher> b = builder.Term(*words[1], /*scored=*/true);
    if (a == nullptr || b == nullptr) return false;
    std::vector<DocId> rows = pair->docs;
    double rest = PairRestBound(*a, *b, *pair, swapped);
    if (plan_.root.kind == PlanNode::Kind::kOr) {
      for (TermMatcher* word : {a.get(), b.get()}) {
        index::Champions champions;
        if (!word->cursor().champions(&champions)) return false;
        rest = std::max(rest, RestBound(*word, champions));
        MergeIn(&rows, champions.docs);
      }
    }
    return OfferChampionRows(segment, builder, std::move(rows), rest);
  }

  // Best match of three common words `a b c` whose every two form a pair (pair_champions.h;
  // filters such as `from:` and exclusions may join them). Their matches are a few percent of
  // the segment, spread over all of it, and no bound from the pairs' rests cuts them: a rest
  // point of (a, b) joined with those of (a, c) and (b, c) at a common length and likes still
  // reached 0.1 to 0.4 above the k-th score at 10M tweets, with four times the champions. So
  // each pair's champions are offered first (those holding the third word match), which sets
  // a high k-th score, and then every match is met: from the segment's count where it is
  // owed and fits (RankCountedBestMatch), else by WalkThreeWords. False, having offered
  // nothing, for other plans and where a pair is missing.
  bool RunTripleOfPairs(const Segment& segment, MatcherBuilder& builder) {
    const std::array<const std::string*, 3>& words = triple_words_;
    const index::PairChampions* pairs = segment.pair_champions();
    if (words[0] == nullptr || pairs == nullptr) return false;
    std::vector<DocId> rows;
    for (const auto& [x, y] : {std::pair{0, 1}, std::pair{0, 2}, std::pair{1, 2}}) {
      bool swapped = false;
      const index::PairChampionList* pair = pairs->Find(*words[x], *words[y], &swapped);
      if (pair == nullptr) return false;
      MergeIn(&rows, pair->docs);
    }
    OfferChampionRows(segment, builder, std::move(rows),
                      std::numeric_limits<double>::infinity());  // never done here
    if (!RankCountedBestMatch(segment, builder)) WalkThreeWords(segment, builder, words, nullptr);
    return true;
  }

  // The words of `node` that score (not those of exclusions), as the plan holds them.
  static void CollectScoredWords(const PlanNode& node, std::vector<const std::string*>* words) {
    if (node.kind == PlanNode::Kind::kTerm && node.scored) words->push_back(&node.term);
    for (const std::string& t : node.phrase_terms) words->push_back(&t);
    for (const PlanNode& child : node.children) CollectScoredWords(child, words);
  }

  // The most text `word` can have in a tweet of each length up to kOthersLengths (the last
  // entry: any length): its idf times TfPart at its list's largest frequency.
  std::vector<double> MaxTextByLength(TermMatcher& word) const {
    std::vector<double> text(kOthersLengths + 1, 0);
    if (word.idf() == 0) return text;
    const uint32_t max_tf = std::max<uint32_t>(1, word.cursor().list_bound().max_tf);
    for (uint32_t length = 0; length < kOthersLengths; ++length) {
      text[length] = word.idf() * TfPart(options_.scoring, max_tf, length, stats_.avg_length);
    }
    text[kOthersLengths] = word.MaxScore();
    return text;
  }

  // Sets common[0..) to the DocIds of [from, end) (at most kBitmapWindow) that every list of
  // `finders` holds, bit i for DocId from + i.
  template <typename Finders>
  static void AndBits(Finders& finders, DocId from, DocId end, uint64_t* common) {
    std::fill_n(common, (end - from + 63) / 64, ~uint64_t{0});
    for (auto& f : finders) f->cursor().AndBits(from, end, common, /*keep=*/true);
  }

  // Calls fn(from, n, recency, common) for each window of kBitmapWindow DocIds of the
  // segment's visible rows, in order: common[0..n) the window's DocIds that every list of
  // `finders` holds (AndBits), recency the window's recency bound.
  template <typename Finders, typename Fn>
  void ForEachCommonWindow(const Segment& segment, Finders& finders, const Fn& fn) {
    std::array<uint64_t, kBitmapWindow / 64> common;
    const DocId visible = segment.VisibleDocs();
    for (DocId from = 0; from < visible; from += kBitmapWindow) {
      const DocId end = std::min<DocId>(visible, from + kBitmapWindow);
      AndBits(finders, from, end, common.data());
      fn(from, (end - from + 63) / 64, RecencyBound(segment.columns(), from, end - 1),
         common.data());
    }
  }

  // Offers every match of the plan that holds all three `words` (scored words of the plan, as
  // it holds them) and can enter the top k, but the rows offered before (AlreadyOffered) and those
  // in *pushed (if given; the ones offered here are added). The three lists' bits are ANDed a
  // window of DocIds at a time (PostingCursor::FillBits): a leapfrog step and a block bound per
  // window cost more than a bit per posting where lists are this dense. A common DocId is
  // passed over when the three words' text, plus the most every other scored word of the
  // plan can add at its length (their lists' largest frequencies), its likes band's
  // popularity and its window's recency bound, falls short of the k-th score. The three
  // words' frequencies come from their repeats (pair words'), so no cursor moves for it;
  // where the segment has none, the word with the largest idf is moved to it first and the
  // DocId passed over on its text alone where that suffices (one frequency read instead of
  // three). The rest are confirmed by the plan's matcher (filters, exclusions) and scored by
  // it, as every walk scores.
  void WalkThreeWords(const Segment& segment, MatcherBuilder& builder,
                      const std::array<const std::string*, 3>& words,
                      absl::flat_hash_set<DocId>* pushed) {
    std::array<std::unique_ptr<TermMatcher>, 3> scored, finders;
    for (size_t i = 0; i < words.size(); ++i) {
      scored[i] = builder.Term(*words[i], /*scored=*/true);
      finders[i] = builder.Term(*words[i], /*scored=*/false);
      if (scored[i] == nullptr || finders[i] == nullptr) return;  // no match holds them all
    }
    const size_t lead = static_cast<size_t>(
        std::max_element(scored.begin(), scored.end(),
                         [](const auto& a, const auto& b) { return a->idf() < b->idf(); }) -
        scored.begin());
    // beside_lead[l]: the most the plan's scored words but the lead add at length l;
    // beside_three[l]: those but the three.
    std::vector<double> beside_lead(kOthersLengths + 1, 0), beside_three(kOthersLengths + 1, 0);
    std::vector<const std::string*> plan_words;
    CollectScoredWords(plan_.root, &plan_words);
    for (const std::string* w : plan_words) {
      if (w == words[lead]) continue;
      std::unique_ptr<TermMatcher> t = builder.Term(*w, /*scored=*/true);
      if (t == nullptr) continue;
      const bool of_three = std::find(words.begin(), words.end(), w) != words.end();
      const std::vector<double> text = MaxTextByLength(*t);
      for (size_t l = 0; l <= kOthersLengths; ++l) {
        beside_lead[l] += text[l];
        if (!of_three) beside_three[l] += text[l];
      }
    }
    // Where the segment keeps the three words' repeats (pair words do), a match's text comes
    // from them and its length, no cursor moved: moving the rarest word's cursor to each
    // match and decoding its frequency took about a third of the walk (docs/benchmarks.md).
    std::array<const index::Repeats*, 3> repeats{};
    bool by_repeats = segment.pair_champions() != nullptr;
    for (size_t i = 0; i < words.size() && by_repeats; ++i) {
      repeats[i] = segment.pair_champions()->RepeatsOf(*words[i]);
      by_repeats = repeats[i] != nullptr;
    }
    if (by_repeats) {
      WalkThreeByRepeats(segment, builder, words, scored, finders, repeats, beside_three, pushed);
      return;
    }
    const Columns& c = segment.columns();
    std::unique_ptr<Matcher> m = builder.Build(plan_.root);
    bool lead_cut = false;
    ForEachCommonWindow(
        segment, finders, [&](DocId from, size_t n, double recency, const uint64_t* common) {
          for (size_t i = 0; i < n; ++i) {
            for (uint64_t word = common[i]; word != 0; word &= word - 1) {
              const DocId d = from + static_cast<DocId>(i * 64 + std::countr_zero(word));
              const uint32_t length = c.length(d);
              const size_t l = std::min<size_t>(length, kOthersLengths);
              // Rows whose likes changed were offered with their new likes; the others have the
              // likes they were written with.
              const double fixed = band_popularity_[index::LikesBand(c.BaseLikes(d))] + recency;
              scored[lead]->Advance(d);
              double text = scored[lead]->ScoreAt(length);
              if (top_.full() && Inflate(text + beside_lead[l] + fixed) < top_.worst().primary) {
                pruned_ = lead_cut = true;
                continue;
              }
              for (size_t t = 0; t < scored.size(); ++t) {
                if (t == lead) continue;
                scored[t]->Advance(d);
                text += scored[t]->ScoreAt(length);
              }
              if (top_.full() && Inflate(text + beside_three[l] + fixed) < top_.worst().primary) {
                pruned_ = true;
                continue;
              }
              OfferWalkedMatch(c, d, *m, pushed);
            }
          }
        });
    triple_walk_cutoffs_ += lead_cut ? 1 : 0;
  }

  // The rows of 64 DocIds that a bound made of a text by length (`text`, the last entry any
  // length) and a fixed part can bring to a k-th score, read from the segment's length classes
  // (length_classes.h): every row whose class holds a length that can; every row where the
  // segment has no classes.
  class ShortRows {
   public:
    ShortRows(const index::LengthClasses* classes, const std::vector<double>& text)
        : classes_(classes) {
      using index::LengthClasses;
      const size_t last = text.size() - 1;
      for (int k = 0; k < LengthClasses::kClasses; ++k) {
        const size_t from = LengthClasses::kLeast[k];
        const size_t to = k + 1 < LengthClasses::kClasses ? LengthClasses::kLeast[k + 1] : last + 1;
        most_[k] = -std::numeric_limits<double>::infinity();
        for (size_t l = from; l < std::max(to, from + 1); ++l) {
          most_[k] = std::max(most_[k], text[std::min(l, last)]);
        }
      }
    }
    // Of the 64 rows from DocId 64 * w, those kept for a k-th score `kth` and a fixed part.
    uint64_t Reaching(size_t w, double kth, double fixed) const {
      if (classes_ == nullptr) return ~uint64_t{0};
      int k = index::LengthClasses::kClasses - 1;
      while (k >= 0 && Inflate(most_[k] + fixed) < kth) --k;
      return classes_->AtMost(w, k);
    }

   private:
    const index::LengthClasses* classes_;
    std::array<double, index::LengthClasses::kClasses> most_;  // the most text of each class
  };

  // WalkThreeWords where the segment keeps the three words' repeats. A match that repeats
  // none of the words (about half of them) scores at most the three words' text at
  // frequency 1 and at the least length a match can have (each word is one of its tokens),
  // plus the most the plan's other words add there, its 64 DocIds' largest likes and its
  // window's recency bound: where that falls short of the k-th score, those matches of the 64
  // DocIds are passed over together, no column read; else those whose length class cannot
  // reach it (ShortRows) are. The others are bounded one by one: a repeating match on its
  // repeat points (frequencies, length, likes band), read a window at a time
  // (index::RepeatsWindow), the others on their length and likes band at frequency 1.
  void WalkThreeByRepeats(const Segment& segment, MatcherBuilder& builder,
                          const std::array<const std::string*, 3>& words,
                          const std::array<std::unique_ptr<TermMatcher>, 3>& scored,
                          const std::array<std::unique_ptr<TermMatcher>, 3>& finders,
                          const std::array<const index::Repeats*, 3>& repeats,
                          const std::vector<double>& beside_three,
                          absl::flat_hash_set<DocId>* pushed) {
    std::array<uint32_t, 3> max_tf;
    for (size_t t = 0; t < scored.size(); ++t) {
      max_tf[t] = std::max<uint32_t>(1, scored[t]->cursor().list_bound().max_tf);
    }
    const uint32_t least_length =
        1 + (*words[1] != *words[0]) + (*words[2] != *words[0] && *words[2] != *words[1]);
    // plain_text[l]: the text of a match of length l (the last entry: any length) that
    // repeats none of the three words, with the most the plan's other words add there.
    std::vector<double> plain_text(beside_three);
    for (uint32_t l = 0; l < kOthersLengths; ++l) {
      for (const auto& word : scored) plain_text[l] += word->ScoreFor(1, l);
    }
    for (const auto& word : scored) plain_text[kOthersLengths] += word->ScoreFor(1, kOthersLengths);
    const double plain_most = plain_text[std::min<size_t>(least_length, kOthersLengths)];
    const ShortRows short_rows(segment.length_classes(), plain_text);
    const Columns& c = segment.columns();
    std::unique_ptr<Matcher> m = builder.Build(plan_.root);
    index::RepeatsWindow window(repeats, kBitmapWindow);
    bool cut = false;
    ForEachCommonWindow(
        segment, finders, [&](DocId from, size_t n, double recency, const uint64_t* common) {
          window.Load(from, {common, n});
          for (size_t i = 0; i < n; ++i) {
            const uint64_t repeated = window.repeated(i);
            uint64_t walked = common[i];
            if (walked == 0) continue;
            // Rows whose likes changed were offered before; the range's bound covers the rest.
            const double range_popularity = band_popularity_[index::LikesBand(
                c.range_max_likes(from + static_cast<DocId>(i * 64)))];
            if ((walked & ~repeated) != 0 && top_.full()) {
              // Those that repeat none of the words and are too long to reach the k-th score
              // on their text at frequency 1 are left out 64 at a time (all of them where even
              // the shortest cannot); each of the rest is bounded below on its length.
              const double need = top_.worst().primary;
              const uint64_t kept =
                  Inflate(plain_most + range_popularity + recency) < need
                      ? 0
                      : short_rows.Reaching(from / 64 + i, need, range_popularity + recency);
              if ((walked & ~repeated & ~kept) != 0) pruned_ = cut = true;
              walked &= repeated | kept;
            }
            for (; walked != 0; walked &= walked - 1) {
              const size_t at = i * 64 + static_cast<size_t>(std::countr_zero(walked));
              const DocId d = from + static_cast<DocId>(at);
              const bool repeats_one = (repeated >> (at % 64) & 1) != 0;
              double text;
              if (repeats_one) {
                const uint32_t length = window.length(at);  // a lower bound
                text = beside_three[length];                // length < 256
                for (size_t t = 0; t < scored.size(); ++t) {
                  const uint8_t tf = window.tf(t, at);
                  text += scored[t]->ScoreFor(tf == UINT8_MAX ? max_tf[t] : tf, length);
                }
              } else {
                text = plain_text[std::min<size_t>(c.length(d), kOthersLengths)];
              }
              if (top_.full()) {
                // The range's likes first: most rows fall short on it, no column read.
                const double kth = top_.worst().primary;
                bool short_of = Inflate(text + range_popularity + recency) < kth;
                if (!short_of) {
                  const int band = repeats_one ? window.band(at) : index::LikesBand(c.BaseLikes(d));
                  short_of = Inflate(text + band_popularity_[band] + recency) < kth;
                }
                if (short_of) {
                  pruned_ = cut = true;
                  continue;
                }
              }
              OfferWalkedMatch(c, d, *m, pushed);
            }
          }
        });
    triple_walk_cutoffs_ += cut ? 1 : 0;
  }

  // Offers DocId d, a walk's match that its bounds let through, unless it was offered before
  // (AlreadyOffered, or in *pushed if given; added to it), once the plan's matcher `m`
  // (moved forward only) confirms it (filters, exclusions) and scores it.
  void OfferWalkedMatch(const Columns& c, DocId d, Matcher& m, absl::flat_hash_set<DocId>* pushed) {
    if (AlreadyOffered(d) || (pushed != nullptr && pushed->contains(d))) return;
    if (m.doc() < d) m.Advance(d);
    if (m.doc() != d) return;
    PushBestMatch(c, d, m.Score());
    if (pushed != nullptr) pushed->insert(d);
  }

  // The scored words of a plan `(x1 OR x2 ...) c`: an AND whose scored children are one word
  // and one OR of two to kMaxOrAndAlternatives words (filters such as `from:` and exclusions
  // may join them); else no words.
  struct OrAndWords {
    const std::string* required = nullptr;  // c
    std::vector<const std::string*> alternatives;
    std::vector<const PlanNode*> alternative_nodes;  // their terms, in the same order
  };
  static OrAndWords OrAndPlanWords(const PlanNode& root) {
    if (root.kind != PlanNode::Kind::kAnd) return {};
    OrAndWords words;
    for (const PlanNode& child : root.children) {
      if (child.kind == PlanNode::Kind::kTerm) {
        if (!child.scored) continue;
        if (words.required != nullptr) return {};
        words.required = &child.term;
        continue;
      }
      if (child.kind != PlanNode::Kind::kOr || !words.alternatives.empty() ||
          !child.excluded.empty()) {
        return {};
      }
      for (const PlanNode& alternative : child.children) {
        if (alternative.kind != PlanNode::Kind::kTerm || !alternative.scored) return {};
        words.alternatives.push_back(&alternative.term);
        words.alternative_nodes.push_back(&alternative);
      }
    }
    if (words.required == nullptr || words.alternatives.size() < 2 ||
        words.alternatives.size() > kMaxOrAndAlternatives) {
      return {};
    }
    return words;
  }

  // Best match of `(x1 OR x2 ...) c` (OrAndPlanWords) whose every alternative is either sparse
  // (fewer postings than one per kSparseAndDensity DocIds) or forms a pair of common words
  // with c (pair_champions.h). A match holds c and some of the alternatives. Offered first:
  // the champions of each dense alternative's pair with c and of each two dense alternatives'
  // pair; the matches holding a sparse alternative: where it has champions, c has repeats and
  // the two meet often or in enough matches (MeetRate), as the sparse AND of the two is weighed
  // over them (SparseAlternative: its champions, then its postings among c's repeats or holding
  // another alternative, if their bound reaches the k-th score), else every one (its postings that
  // c holds); then every match holding two dense alternatives that can enter the top k, walked over
  // the three lists' bits (WalkThreeWords). A match not offered then either holds one dense
  // alternative x and no other and is not among the champions of x's pair: it scores at most that
  // pair's rest bound; or holds one sparse alternative, c at most once and no other alternative,
  // outside that alternative's champions: it scores at most the alternative's rest skyline beside c
  // once (RestBoundBeside), and where that bound reaches the k-th score those postings are
  // weighed one by one (OfferOnceMatches). If then no dense pair's bound reaches the k-th
  // score (with the segment's recency bound), the segment is done. Otherwise the usual walk
  // follows and passes over the rows offered. False, having offered nothing, for other plans,
  // for a sparse AND, and where a dense alternative has no pair with c.
  //
  // Bounding the matches of two dense alternatives by a pair's rest bound plus the other
  // word's largest text instead stayed above the k-th score for every such query measured
  // (docs/benchmarks.md): they are few next to either pair's, so they are all met. Until
  // 2026-11 they were intersected and every one scored (`(to OR i) a`: about 500,000 at 10M
  // tweets); until 2026-12 every match of a sparse alternative was (`(what OR
  // site2.example.com) to -do`: 37,404).
  bool RunOrAndChampions(const Segment& segment, MatcherBuilder& builder) {
    const OrAndWords& words = or_and_words_;
    const index::PairChampions* pairs = segment.pair_champions();
    if (words.required == nullptr || pairs == nullptr || IsSparseAnd(segment)) return false;
    const DocId visible = segment.VisibleDocs();
    std::unique_ptr<TermMatcher> c = builder.Term(*words.required, /*scored=*/true);
    if (c == nullptr) return false;
    auto cursor = [&](const std::string& word) { return builder.Term(word, /*scored=*/false); };
    // Each part appended is ascending: merged as it comes, the rows need no sort (a sparse
    // alternative's matches with c can be tens of thousands).
    std::vector<DocId> rows;
    std::vector<const std::string*> dense;
    std::vector<SparseAlternative> sparse;                // weighed over c's repeats
    std::vector<std::unique_ptr<TermMatcher>> offer_all;  // sparse, every match with c offered
    double rest = -std::numeric_limits<double>::infinity();
    for (size_t a = 0; a < words.alternatives.size(); ++a) {
      const std::string* x = words.alternatives[a];
      std::unique_ptr<TermMatcher> word = builder.Term(*x, /*scored=*/true);
      if (word == nullptr) continue;  // no match holds it here
      if (word->Cost() * kSparseAndDensity < visible) {
        std::optional<SparseAlternative> alternative;
        const double meets = MeetRate(*cursor(*x), *cursor(*words.required), visible);
        if (meets * kOftenMeets >= 1) {
          alternative = OverRepeatsOfRequired(segment, builder, *words.alternative_nodes[a]);
        } else if (meets * static_cast<double>(word->Cost()) >= options_.weigh_held_from) {
          alternative = OverRepeatsOfRequired(segment, builder, *words.alternative_nodes[a],
                                              /*held_only=*/true);
        }
        if (alternative.has_value()) {
          MergeIn(&rows, alternative->champions.docs);
          sparse.push_back(*std::move(alternative));
        } else {
          offer_all.push_back(std::move(word));
        }
        continue;
      }
      bool swapped = false;
      const index::PairChampionList* pair = pairs->Find(*x, *words.required, &swapped);
      if (pair == nullptr) return false;
      MergeIn(&rows, pair->docs);
      rest = std::max(rest, PairRestBound(*word, *c, *pair, swapped));
      dense.push_back(x);
    }
    // Where every match is offered (no dense alternative, none weighed), the count, owed and
    // within the cap, keeps them: ranked from it, they are not looked up in c's list again.
    if (dense.empty() && sparse.empty() && RankCountedBestMatch(segment, builder)) return true;
    for (std::unique_ptr<TermMatcher>& word : offer_all) {
      const size_t from = rows.size();
      AppendDocs(word->cursor(), visible, &rows, {&cursor(*words.required)->cursor()});
      MergeTail(&rows, from);
    }
    // The matches of two dense alternatives: their pair's champions first (to raise the k-th
    // score), then every one is met by WalkThreeWords.
    for (size_t i = 0; i < dense.size(); ++i) {
      for (size_t j = i + 1; j < dense.size(); ++j) {
        bool swapped = false;
        if (const index::PairChampionList* pair = pairs->Find(*dense[i], *dense[j], &swapped)) {
          MergeIn(&rows, pair->docs);
        }
      }
    }
    if (dense.size() < 2 && sparse.empty()) {
      return OfferChampionRows(segment, builder, std::move(rows), rest);
    }
    OfferChampionRows(segment, builder, std::move(rows),
                      std::numeric_limits<double>::infinity());  // decided below
    const double recency = RecencyBound(segment.columns(), 0, visible - 1);
    for (SparseAlternative& alternative : sparse) {
      std::vector<DocId> offered;
      OfferRepeatMatches(segment, builder, *alternative.node, *alternative.lead, alternative.others,
                         recency, visible, &alternative.once, &offered, alternative.held_by.get());
      held_weighings_ += alternative.held_by != nullptr ? 1 : 0;
      MergeIn(&champion_rows_, offered);
    }
    if (dense.size() >= 2 && RankCountedBestMatch(segment, builder)) return true;
    absl::flat_hash_set<DocId> pushed;
    for (size_t i = 0; i < dense.size(); ++i) {
      for (size_t j = i + 1; j < dense.size(); ++j) {
        WalkThreeWords(segment, builder, {dense[i], dense[j], words.required}, &pushed);
      }
    }
    auto falls_short = [&](double bound) {
      return top_.full() && Inflate(bound + recency) < top_.worst().primary;
    };
    bool sparse_cut = false;
    for (SparseAlternative& alternative : sparse) {
      if (falls_short(alternative.rest)) {
        pruned_ = sparse_cut = true;
        continue;
      }
      std::vector<DocId> weighed;
      OfferOnceMatches(segment, builder, *alternative.node, alternative.others, recency,
                       alternative.once, &weighed);
      MergeIn(&champion_rows_, weighed);
    }
    sparse_alternative_cutoffs_ += sparse_cut ? 1 : 0;
    if (falls_short(rest)) {
      pruned_ = true;
      ++champion_cutoffs_;
      return true;
    }
    // The walk that follows passes over the rows offered, the walks' ones too.
    champion_rows_.insert(champion_rows_.end(), pushed.begin(), pushed.end());
    std::sort(champion_rows_.begin(), champion_rows_.end());
    return false;
  }

  // The share of the first postings of `x` (up to kMeetsSample of them; the newest tweets)
  // that the list of `c` holds. Where it is at least one in kOftenMeets, x's postings are
  // weighed (SparseAlternative). Where it is less, offering every match of the two costs less
  // than weighing every posting of x: at 10M tweets, offering a match took about 220 ns and
  // weighing a posting 25 to 40 ns; x's postings that c holds ranged from 4% (`could day`) to
  // 52% (`lomi i`) among the slow queries of the benchmark. But where even that share of x's
  // postings makes SearchOptions::weigh_held_from matches or more, only the postings c holds
  // are weighed (the others are no match): offering x's champions and weighing those costs less
  // than offering them all (`(sleep OR sulo) at -was` at 10M tweets, about 13,000 and 9,500
  // matches: 7.6 ms offered, 2.4 ms weighed).
  static double MeetRate(TermMatcher& x, TermMatcher& c, DocId visible) {
    std::array<DocId, kBatch> docs;
    size_t read = 0, held = 0;
    while (read < kMeetsSample) {
      const size_t n = x.cursor().NextDocs(visible, docs.data(), docs.size());
      if (n == 0) break;
      read += n;
      held += c.cursor().Filter(docs.data(), n, /*keep=*/true);
    }
    return read == 0 ? 0 : static_cast<double>(held) / static_cast<double>(read);
  }
  static constexpr size_t kMeetsSample = 1024;
  static constexpr double kOftenMeets = 8;

  // A sparse alternative x of `(x OR y ...) c` (RunOrAndChampions). Its matches are those of
  // the sparse AND `x c`, with the text of whichever other alternatives they hold, so they are
  // weighed as RunSparseAndChampions weighs that AND: c is a partner counted over its repeats,
  // the other alternatives partners looked up (SparseAndPartner::lookup), which add their
  // text where they are held and nothing elsewhere.
  struct SparseAlternative {
    const PlanNode* node = nullptr;     // x
    std::unique_ptr<TermMatcher> lead;  // x's, scored
    index::Champions champions;         // x's
    std::vector<SparseAndPartner> others;
    double rest = 0;          // RestBoundBeside: the bound of x's postings in `once`
    std::vector<DocId> once;  // filled by OfferRepeatMatches
    // Where x and c seldom meet (MeetRate): c's list, and only x's postings it holds are
    // weighed (OfferRepeatMatches); else null.
    std::unique_ptr<TermMatcher> held_by;
  };
  // The SparseAlternative of `x`, if x has champions and c is a pair word (it has repeats);
  // else none. held_only: only x's postings that c holds are weighed.
  std::optional<SparseAlternative> OverRepeatsOfRequired(const Segment& segment,
                                                         MatcherBuilder& builder, const PlanNode& x,
                                                         bool held_only = false) {
    const OrAndWords& words = or_and_words_;
    const index::PairChampions& pairs = *segment.pair_champions();
    SparseAlternative alternative;
    alternative.node = &x;
    alternative.lead = builder.Term(x.term, /*scored=*/true);
    if (alternative.lead == nullptr ||
        !alternative.lead->cursor().champions(&alternative.champions)) {
      return std::nullopt;
    }
    SparseAndPartner& required = alternative.others.emplace_back();
    required.repeats = pairs.RepeatsOf(*words.required);
    required.word = builder.Term(*words.required, /*scored=*/true);
    if (required.repeats == nullptr || required.word == nullptr) return std::nullopt;
    if (held_only) alternative.held_by = builder.Term(*words.required, /*scored=*/false);
    for (const PlanNode* y : words.alternative_nodes) {
      if (y == &x) continue;
      std::unique_ptr<TermMatcher> word = builder.Term(y->term, /*scored=*/true);
      if (word == nullptr) continue;  // no tweet of the segment holds it
      SparseAndPartner& other = alternative.others.emplace_back();
      other.word = std::move(word);
      other.repeats = pairs.RepeatsOf(y->term);
      if (other.repeats == nullptr) other.most = MaxTextByLength(*other.word);
      other.lookup = builder.Term(y->term, /*scored=*/false);
    }
    alternative.rest =
        RestBoundBeside(*alternative.lead, alternative.champions, alternative.others);
    return alternative;
  }

  // Offers the plan's matches among `rows` (sorted here, duplicates dropped) not offered
  // before, keeps the rows for the walks to pass over (AlreadyOffered), and tells whether the
  // segment is done: the top k is full and `rest`, a bound of the text and popularity of
  // every match not among the rows, plus the segment's recency bound falls short of the k-th
  // score. A row whose text plus its likes band's and the segment's recency bound falls short
  // is passed over before its exact static score (a logarithm and a power) is computed.
  bool OfferChampionRows(const Segment& segment, MatcherBuilder& builder, std::vector<DocId> rows,
                         double rest) {
    if (!std::is_sorted(rows.begin(), rows.end())) std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    const Columns& c = segment.columns();
    const double recency = RecencyBound(c, 0, segment.VisibleDocs() - 1);
    VisitAmong(builder, rows, [&](DocId d, Matcher& m) {
      if (AlreadyOffered(d)) return;
      const double text = m.Score();
      if (top_.full() && Inflate(text + band_popularity_[index::LikesBand(c.likes(d))] + recency) <
                             top_.worst().primary) {
        return;
      }
      PushBestMatch(c, d, text);
    });
    champion_rows_ = std::move(rows);
    if (!top_.full() || Inflate(rest + recency) >= top_.worst().primary) return false;
    pruned_ = true;
    ++champion_cutoffs_;
    return true;
  }

  // Sorts rows[from..) and merges it into the ascending rows[0..from). Rows gathered from
  // several ascending parts are kept ascending so, part by part: std::sort of the parts
  // appended one after another took a fifth of `i OR tomorrow` (docs/benchmarks.md).
  static void MergeTail(std::vector<DocId>* rows, size_t from) {
    const auto middle = rows->begin() + static_cast<ptrdiff_t>(from);
    if (!std::is_sorted(middle, rows->end())) std::sort(middle, rows->end());
    std::inplace_merge(rows->begin(), middle, rows->end());
  }
  // Merges `part` into the ascending *rows (MergeTail).
  static void MergeIn(std::vector<DocId>* rows, const std::vector<DocId>& part) {
    const size_t from = rows->size();
    rows->insert(rows->end(), part.begin(), part.end());
    MergeTail(rows, from);
  }

  // Appends the DocIds of `cursor`'s postings below `visible` to *rows, in batches; only
  // those every cursor of `filters` holds too.
  static void AppendDocs(PostingCursor& cursor, DocId visible, std::vector<DocId>* rows,
                         std::initializer_list<PostingCursor*> filters = {}) {
    std::array<DocId, kBatch> docs;
    while (size_t n = cursor.NextDocs(visible, docs.data(), docs.size())) {
      for (PostingCursor* filter : filters) n = filter->Filter(docs.data(), n, /*keep=*/true);
      rows->insert(rows->end(), docs.begin(), docs.begin() + static_cast<ptrdiff_t>(n));
    }
  }

  // The plan's root as a flat list of terms, if it is one term, an AND of terms (with any
  // exclusions) or an OR of terms; else empty.
  static bool FlatTerms(const PlanNode& root, std::vector<const PlanNode*>* terms) {
    if (root.kind == PlanNode::Kind::kTerm) {
      terms->push_back(&root);
      return true;
    }
    if (root.kind != PlanNode::Kind::kAnd && root.kind != PlanNode::Kind::kOr) return false;
    if (root.kind == PlanNode::Kind::kOr && !root.excluded.empty()) return false;
    for (const PlanNode& child : root.children) {
      if (child.kind != PlanNode::Kind::kTerm) return false;
      terms->push_back(&child);
    }
    return true;
  }

  // Best match over one segment, window by window, the windows with the highest bounds first.
  //
  // A walk in DocId order raises the k-th score slowly: for a common word most windows pass
  // the bound of a k-th score that is still low, though at the final one almost none would.
  // So a first pass reads only skip entries (CollectWindows: every window's bound, nothing
  // decoded); then the windows are walked in batches, each batch the best bounds left and
  // walked in DocId order by fresh matchers (they only move forward). Before each batch,
  // the windows whose bound is below the k-th score are dropped: no document in them can
  // enter the top k. Within a window the walks prune as before (SkipWindows, OfferCandidate).
  // Every window that may hold a document of the top k is walked, so the result is exact.
  //
  // This pays where the windows' bounds are tight: for one scored term, whose block bounds
  // per likes band describe its own postings. For several, a window's bound adds up the best
  // posting of each term, mostly different documents, and the order gains less than the
  // first pass and the jumps cost (docs/benchmarks.md): without `by_bound` the segment is
  // walked in DocId order, as one window.
  template <typename Bands, typename WalkBatch>
  void RunWindowsByBound(const Segment& segment, bool by_bound, const Bands& bands,
                         const WalkBatch& walk) {
    if (!by_bound) {
      const ScoredWindow all{0, segment.VisibleDocs() - 1, 0};
      walk(std::span(&all, 1));
      return;
    }
    CollectWindows(segment.columns(), segment.VisibleDocs(), bands);
    std::span<ScoredWindow> rest(windows_);
    size_t batch = kFirstBatch;
    while (!rest.empty()) {
      if (top_.full()) {
        const double threshold = top_.worst().primary;
        auto kept = std::partition(rest.begin(), rest.end(),
                                   [&](const ScoredWindow& w) { return w.bound >= threshold; });
        if (kept != rest.end()) pruned_ = true;
        rest = rest.first(static_cast<size_t>(kept - rest.begin()));
        if (rest.empty()) break;
      }
      // When a batch would take most of what is left, or the last one did not fill the top
      // k (the matches are sparse), take it all.
      const bool all = batch * 2 >= rest.size() || (batch > kFirstBatch && !top_.full());
      const size_t n = all ? rest.size() : batch;
      if (n < rest.size()) {
        std::nth_element(
            rest.begin(), rest.begin() + static_cast<ptrdiff_t>(n), rest.end(),
            [](const ScoredWindow& a, const ScoredWindow& b) { return a.bound > b.bound; });
      }
      std::sort(rest.begin(), rest.begin() + static_cast<ptrdiff_t>(n),
                [](const ScoredWindow& a, const ScoredWindow& b) { return a.begin < b.begin; });
      walk(rest.first(n));
      rest = rest.subspan(n);
      batch *= 2;
    }
  }

  // windows_ = the windows of the segment that `bands` (a WindowBands over matchers that were
  // never moved) says may hold a match, each with the bound of its best likes band.
  template <typename Bands>
  void CollectWindows(const Columns& c, DocId visible, const Bands& bands) {
    windows_.clear();
    for (DocId target = 0; target < visible;) {
      DocId end = visible - 1;
      std::array<double, index::kLikesBands> sums{};
      const uint32_t mask = bands(target, &end, sums.data());
      if (mask != 0) {
        double best = -std::numeric_limits<double>::infinity();
        for (int b = 0; b < index::kLikesBands; ++b) {
          if ((mask >> b & 1) != 0) best = std::max(best, sums[b] + band_popularity_[b]);
        }
        windows_.push_back({target, end, Inflate(best + RecencyBound(c, target, end))});
      }
      if (end >= visible - 1) break;
      target = end + 1;
    }
  }

  // Best match over any shape: the walk skips the windows its matcher's WindowBands rule out,
  // and the candidates whose likes band, or text score with their band's bound, falls short.
  void RunBestMatchTree(const Segment& segment, MatcherBuilder& builder) {
    std::unique_ptr<Matcher> m = builder.Build(plan_.root);
    WalkTree(segment.columns(), *m, segment.VisibleDocs() - 1);
  }

  // Walks `m` up to DocId `last`.
  void WalkTree(const Columns& c, Matcher& m, DocId last) {
    for (DocId d = m.doc(); d <= last;) {  // kEndDoc is above every `last`
      if (top_.full() && !InWindow(c, d)) {
        const DocId next = SkipWindows(c, last + 1, d, [&](DocId t, DocId* end, double* sums) {
          return m.WindowBands(t, end, sums);
        });
        if (next != d) {
          if (next == kEndDoc) return;
          m.Advance(next);
          d = m.doc();
          continue;
        }
      }
      OfferCandidate(
          c, d, [&] { return m.Score(); }, [] { return true; });
      m.Next();
      d = m.doc();
    }
  }

  void RunBestMatch(const Segment& segment, MatcherBuilder& builder) {
    OfferChangedRows(segment, builder);
    if (RunChampions(segment, builder) || RunOrChampions(segment, builder) ||
        RunPairChampions(segment, builder) || RunOrAndChampions(segment, builder) ||
        RunTripleOfPairs(segment, builder)) {
      return;
    }
    if (IsSparseAnd(segment)) {
      if (RunSparseAndChampions(segment, builder)) return;
      RunSparseAndBestMatch(segment, builder);
      return;
    }
    if (RankCountedBestMatch(segment, builder)) return;
    std::vector<const PlanNode*> nodes;
    if (!FlatTerms(plan_.root, &nodes)) {
      RunBestMatchTree(segment, builder);
      return;
    }
    const bool conjunctive = plan_.root.kind != PlanNode::Kind::kOr;
    // The plan's terms present in the segment, in plan order; false if the segment cannot
    // match (a term of a conjunction is missing).
    auto open = [&](std::vector<std::unique_ptr<TermMatcher>>* terms) {
      for (const PlanNode* node : nodes) {
        std::unique_ptr<TermMatcher> t = builder.Term(node->term, node->scored);
        if (t == nullptr) {
          if (conjunctive) return false;
          continue;
        }
        terms->push_back(std::move(t));
      }
      return !terms->empty();
    };
    // The first pass's matchers: never moved, they only answer WindowBands.
    std::vector<std::unique_ptr<TermMatcher>> shallow;
    std::vector<TermMatcher*> shallow_ptrs;
    // One scored term, with enough blocks for the order to matter.
    const auto scored = [](const PlanNode* n) { return n->scored; };
    const bool by_bound =
        std::count_if(nodes.begin(), nodes.end(), scored) == 1 &&
        segment.DocFreq((*std::find_if(nodes.begin(), nodes.end(), scored))->term) >=
            kByBoundMinPostings;
    if (by_bound) {
      if (!open(&shallow)) return;
      for (auto& t : shallow) shallow_ptrs.push_back(t.get());
    }
    const Columns& c = segment.columns();
    auto bands = [&](DocId t, DocId* end, double* sums) {
      return TermBands(shallow_ptrs, conjunctive, t, end, sums);
    };
    RunWindowsByBound(segment, by_bound, bands, [&](std::span<const ScoredWindow> windows) {
      std::vector<std::unique_ptr<TermMatcher>> terms;
      if (!open(&terms)) return;
      if (conjunctive) {
        std::vector<std::unique_ptr<Matcher>> excluded;
        for (const PlanNode& e : plan_.root.excluded) {
          std::unique_ptr<Matcher> m = builder.Build(e);
          if (m->doc() != kEndDoc) excluded.push_back(std::move(m));
        }
        // Bitmap windows pay where every list is dense (docs/benchmarks.md): then a
        // leapfrog step per posting costs more than a bit per posting and an AND per word.
        std::vector<std::unique_ptr<TermMatcher>> finders;
        const uint64_t rarest =
            std::min_element(terms.begin(), terms.end(),
                             [](auto& a, auto& b) { return a->Cost() < b->Cost(); })
                ->get()
                ->Cost();
        if (terms.size() > 1 && rarest * kBitmapDensity >= segment.VisibleDocs() &&
            !open(&finders)) {
          return;
        }
        BlockMaxAnd(c, terms, finders, excluded, windows);
      } else {
        MaxScore(c, terms, windows);
      }
    });
  }

  double CanonicalScore(const Columns& c, std::vector<std::unique_ptr<TermMatcher>>& terms,
                        DocId d) {
    const uint32_t length = c.length(d);
    double s = 0;
    for (auto& t : terms) {
      if (t->doc() == d) s += t->ScoreAt(length);
    }
    return s;
  }

  // Conjunction with block-max skipping over `windows` (ascending). Invariant: a candidate is
  // skipped only when its window's bound (SkipWindows), or its likes band's bound in the
  // window, is below the k-th best score, so no skipped document could have entered the top k.
  //
  // A window that passes and spans at most kBitmapWindow DocIds is walked a window at a time
  // when `finders` (a second cursor per term, in the same order) are given: each finder sets
  // its postings' bits in the window (PostingCursor::FillBits, a few nanoseconds a posting),
  // the words are ANDed, and only the common DocIds whose likes band can still make it move
  // the scoring cursors (BitmapWindow). Dense lists then cost a bit per posting instead of a
  // leapfrog step.
  void BlockMaxAnd(const Columns& c, std::vector<std::unique_ptr<TermMatcher>>& terms,
                   std::vector<std::unique_ptr<TermMatcher>>& finders,
                   std::vector<std::unique_ptr<Matcher>>& excluded,
                   std::span<const ScoredWindow> windows) {
    std::vector<TermMatcher*> order;
    for (auto& t : terms) order.push_back(t.get());
    std::stable_sort(order.begin(), order.end(),
                     [](TermMatcher* a, TermMatcher* b) { return a->Cost() < b->Cost(); });
    // A list kCoarseListRatio times longer than the rarest or more bounds every window by its
    // bounds per likes band over the whole list: its blocks are short, so windows ending with
    // them would cost a bound per candidate or two, and a common word's text varies little.
    std::vector<TermMatcher*> fine;
    uint32_t coarse_bands = (1u << index::kLikesBands) - 1;
    std::array<double, index::kLikesBands> coarse_sums{};
    for (TermMatcher* t : order) {
      if (t != order[0] && t->Cost() >= kCoarseListRatio * order[0]->Cost()) {
        coarse_bands &= t->AddBandText(t->cursor().list_bound(), coarse_sums.data());
      } else {
        fine.push_back(t);
      }
    }
    auto bands = [&](DocId t, DocId* end, double* sums) {
      const uint32_t mask = TermBands(fine, /*conjunctive=*/true, t, end, sums) & coarse_bands;
      for (int b = 0; b < index::kLikesBands; ++b) sums[b] += coarse_sums[b];
      return mask;
    };
    for (const ScoredWindow& w : windows) {
      for (DocId d = Align(order, w.begin); d <= w.end;) {
        if (top_.full() && !InWindow(c, d)) {
          const DocId next = SkipWindows(c, w.end + 1, d, bands);
          if (next != d) {
            if (next == kEndDoc) break;
            d = Align(order, next);
            continue;
          }
        }
        if (top_.full() && !finders.empty() && window_.end - d < kBitmapWindow) {
          BitmapWindow(c, terms, finders, excluded, d, window_.end);
          d = Align(order, window_.end + 1);
          continue;
        }
        OfferCandidate(
            c, d, [&] { return CanonicalScore(c, terms, d); },
            [&] { return !AnyMatches(excluded, d); });
        d = Align(order, d + 1);
      }
    }
  }

  // BlockMaxAnd's walk of DocIds [from, last] (inside window_) over bitmaps: the common
  // DocIds of the finders' postings are offered as candidates, and the scoring cursors move
  // only to those whose likes band can reach the k-th score (OfferCandidate asks for the text
  // last).
  void BitmapWindow(const Columns& c, std::vector<std::unique_ptr<TermMatcher>>& terms,
                    std::vector<std::unique_ptr<TermMatcher>>& finders,
                    std::vector<std::unique_ptr<Matcher>>& excluded, DocId from, DocId last) {
    const size_t n = (last - from) / 64 + 1;
    std::array<uint64_t, kBitmapWindow / 64> common;
    AndBits(finders, from, last + 1, common.data());
    for (size_t i = 0; i < n; ++i) {
      for (uint64_t word = common[i]; word != 0; word &= word - 1) {
        const DocId d = from + static_cast<DocId>(i * 64 + std::countr_zero(word));
        OfferCandidate(
            c, d,
            [&] {
              for (auto& t : terms) t->Advance(d);
              return CanonicalScore(c, terms, d);
            },
            [&] { return !AnyMatches(excluded, d); });
      }
    }
  }

  // Disjunction with MaxScore over `windows` (ascending). Terms are ordered by their maximum
  // score; the shortest prefix whose bounds (plus the largest static score) sum below the
  // k-th best score is "non-essential": a document that only they contain cannot enter the
  // top k, so candidates come from the essential terms alone, and non-essential terms are
  // only probed while the candidate can still make it (its partial score plus its static
  // bound plus the remaining terms' bounds).
  void MaxScore(const Columns& c, std::vector<std::unique_ptr<TermMatcher>>& terms,
                std::span<const ScoredWindow> windows) {
    std::vector<TermMatcher*> by_max;
    for (auto& t : terms) by_max.push_back(t.get());
    std::stable_sort(by_max.begin(), by_max.end(),
                     [](TermMatcher* a, TermMatcher* b) { return a->MaxScore() < b->MaxScore(); });
    const size_t n = by_max.size();
    std::vector<double> prefix(n);  // prefix[i] = bound of by_max[0..i]
    for (size_t i = 0; i < n; ++i) prefix[i] = (i ? prefix[i - 1] : 0) + by_max[i]->MaxScore();
    size_t first_essential = 0;
    for (const ScoredWindow& w : windows) {
      for (TermMatcher* t : by_max) {
        if (t->doc() < w.begin) t->Advance(w.begin);
      }
      if (!MaxScoreWindow(c, terms, by_max, prefix, w.end, &first_essential)) return;
    }
  }

  // MaxScore's walk up to DocId `last`. False when no document of the segment is left that
  // could enter the top k.
  bool MaxScoreWindow(const Columns& c, std::vector<std::unique_ptr<TermMatcher>>& terms,
                      std::span<TermMatcher* const> by_max, std::span<const double> prefix,
                      DocId last, size_t* first_essential_io) {
    const size_t n = by_max.size();
    const double max_static = MaxStaticScore(options_.scoring);
    size_t& first_essential = *first_essential_io;
    while (true) {
      if (top_.full()) {
        while (first_essential < n &&
               Inflate(prefix[first_essential] + max_static) < top_.worst().primary) {
          ++first_essential;
          pruned_ = true;
        }
        if (first_essential == n) return false;
      }
      DocId d = kEndDoc;
      for (size_t i = first_essential; i < n; ++i) d = std::min(d, by_max[i]->doc());
      if (d > last) return true;  // kEndDoc is above every `last`
      if (top_.full() && !InWindow(c, d)) {
        const DocId next = SkipWindows(c, last + 1, d, [&](DocId t, DocId* end, double* sums) {
          return TermBands(by_max, /*conjunctive=*/false, t, end, sums);
        });
        if (next != d) {
          if (next == kEndDoc) return true;
          for (size_t i = first_essential; i < n; ++i) {
            if (by_max[i]->doc() < next) by_max[i]->Advance(next);
          }
          continue;
        }
      }
      std::optional<double> static_bound;
      if (!AlreadyOffered(d)) {
        static_bound = top_.full() ? WindowStaticBound(c, d) : StaticBound(c, d);
      }
      if (!static_bound) {
        for (size_t i = first_essential; i < n; ++i) {
          if (by_max[i]->doc() == d) by_max[i]->Next();
        }
        continue;
      }
      const uint32_t length = c.length(d);
      double partial = *static_bound;
      for (size_t i = first_essential; i < n; ++i) {
        if (by_max[i]->doc() == d) partial += by_max[i]->ScoreAt(length);
      }
      bool possible = true;
      for (size_t i = first_essential; i-- > 0;) {
        if (top_.full() && Inflate(partial + prefix[i]) < top_.worst().primary) {
          possible = false;
          pruned_ = true;
          break;
        }
        if (by_max[i]->doc() < d) by_max[i]->Advance(d);
        if (by_max[i]->doc() == d) partial += by_max[i]->ScoreAt(length);
      }
      if (possible && top_.full() && Inflate(partial) < top_.worst().primary) {
        possible = false;  // its text is known now, and with its static bound falls short
        pruned_ = true;
      }
      if (possible) OfferBestMatch(c, d, CanonicalScore(c, terms, d));
      for (size_t i = first_essential; i < n; ++i) {
        if (by_max[i]->doc() == d) by_max[i]->Next();
      }
    }
  }

  const index::IndexSnapshot& snapshot_;
  const Plan& plan_;
  const SearchOptions& options_;
  TopK top_;
  CollectionStats stats_;
  uint64_t total_ = 0;                       // matches counted, up to the cap plus one
  bool pruned_ = false;                      // the ranking skipped documents
  uint32_t champion_cutoffs_ = 0;            // segments RunChampions decided
  uint32_t tier_cutoffs_ = 0;                // segments their tier postings decided (most liked)
  uint32_t triple_walk_cutoffs_ = 0;         // see SearchResult::triple_walk_cutoffs
  uint32_t counted_rankings_ = 0;            // see SearchResult::counted_rankings
  uint32_t newest_from_counts_ = 0;          // see SearchResult::newest_from_counts
  uint32_t pair_rows_counts_ = 0;            // see SearchResult::pair_rows_counts
  uint32_t sparse_alternative_cutoffs_ = 0;  // see SearchResult::sparse_alternative_cutoffs
  uint32_t held_weighings_ = 0;              // see SearchResult::held_weighings
  uint32_t never_meeting_segments_ = 0;      // see SearchResult::never_meeting_segments
  bool count_missed_damaged_ = false;        // CountTotal met a damaged segment
  // Counting stops at one past the cap (never, with exact_total).
  std::string count_key_;  // CountKey()
  const uint64_t stop_ = options_.exact_total ? UINT64_MAX : kTrackTotalHitsUpTo + 1;
  const bool by_created_ =
      plan_.since_ms != std::numeric_limits<int64_t>::min() || plan_.has_until();
  absl::flat_hash_set<size_t> counted_;  // segments the ranking counted whole
  size_t segment_index_ = 0;             // of the segment being ranked, in visible_docs_
  std::vector<DocId> visible_docs_;      // of each segment of Run(), read once
  // StaticBound's cache.
  const Columns* bound_columns_ = nullptr;
  DocId bound_range_ = 0;
  double bound_ = 0;
  // Per query, for the bounds per likes band: w_pop times the popularity of each band's most
  // likes, and TfPart by term frequency and document length (Context::tf_table).
  std::array<double, index::kLikesBands> band_popularity_{};
  std::array<double, kTfTableTfs * kTfTableLengths> tf_table_{};
  // The last window SkipWindows let through: the bound of each likes band in DocIds
  // [begin, end] of `columns`' segment, computed against the k-th score `threshold`.
  struct Window {
    const Columns* columns = nullptr;
    DocId begin = 0, end = 0;
    double threshold = 0;
    std::array<double, index::kLikesBands> band_score{};
    double recency = 0;  // the window's recency bound
  };
  Window window_;
  // RecencyBound's cache, for one segment.
  const Columns* recency_columns_ = nullptr;
  std::vector<double> recency_by_block_;
  double recency_segment_ = 0;
  std::vector<DocId> changed_rows_;                              // OfferChangedRows's, ascending
  std::vector<DocId> champion_rows_;                             // RunChampions's, ascending
  const std::string* champion_word_ = ChampionWord(plan_.root);  // RunChampions's word
  const std::array<const std::string*, 2> pair_words_ = ScoredPlanWords<2>(plan_.root);
  const std::array<const std::string*, 3> triple_words_ = plan_.root.kind == PlanNode::Kind::kAnd
                                                              ? ScoredPlanWords<3>(plan_.root)
                                                              : std::array<const std::string*, 3>{};
  const OrAndWords or_and_words_ = OrAndPlanWords(plan_.root);
  // OrAndPlanWords: at most this many alternatives (every two common ones are intersected).
  static constexpr size_t kMaxOrAndAlternatives = 4;
  // RunWindowsByBound's windows of the segment being ranked, and its first batch's size.
  static constexpr size_t kFirstBatch = 16;
  static constexpr uint32_t kByBoundMinPostings = 32 * index::kBlockSize;
  // BlockMaxAnd walks passing windows of at most this many DocIds over bitmaps.
  static constexpr DocId kBitmapWindow = 4096;
  // ... when the rarest list holds at least one DocId in this many.
  static constexpr uint64_t kBitmapDensity = 4;
  // BlockMaxAnd bounds lists this many times longer than the rarest by their list bounds.
  static constexpr uint64_t kCoarseListRatio = 8;
  // TwoWordsNeverMeet looks at the pairs of at most this many words.
  static constexpr size_t kMaxMeetingWords = 16;
  // IsSparseAnd: fewer postings than one per this many DocIds in the rarest child.
  static constexpr uint64_t kSparseAndDensity = 64;
  // OthersTextByLength: lengths below this have an entry of their own.
  static constexpr uint32_t kOthersLengths = 256;
  // ForEachSparseAndMatch's candidates looked up at a time.
  static constexpr size_t kBatch = 128;
  std::vector<ScoredWindow> windows_;
};

void CollectTerms(const PlanNode& node, std::vector<const std::string*>* terms) {
  if (node.kind == PlanNode::Kind::kTerm) terms->push_back(&node.term);
  for (const std::string& t : node.phrase_terms) terms->push_back(&t);
  for (const PlanNode& c : node.children) CollectTerms(c, terms);
  for (const PlanNode& e : node.excluded) CollectTerms(e, terms);
}

}  // namespace

static double AverageLength(const CollectionStats& stats) {
  return stats.num_docs == 0 ? 1.0
                             : std::max(1.0, static_cast<double>(stats.total_length) /
                                                 static_cast<double>(stats.num_docs));
}

void AddStats(const CollectionStats& partition, CollectionStats* total) {
  total->num_docs += partition.num_docs;
  total->total_length += partition.total_length;
  total->avg_length = AverageLength(*total);
  for (const auto& [term, df] : partition.doc_freq) total->doc_freq[term] += df;
}

void CapTotal(bool exact_total, uint64_t* total_hits, bool* total_is_exact) {
  if (exact_total) return;
  if (*total_hits > kTrackTotalHitsUpTo) {
    *total_hits = kTrackTotalHitsUpTo;
    *total_is_exact = false;
  }
}

CollectionStats ComputeStats(const index::IndexSnapshot& snapshot, const Plan& plan) {
  CollectionStats stats;
  uint64_t total_length = 0;
  for (const auto& s : snapshot.segments) {
    stats.num_docs += s->VisibleDocs();
    total_length += s->TotalLength();
  }
  stats.total_length = total_length;
  stats.avg_length = AverageLength(stats);
  std::vector<const std::string*> terms;
  CollectTerms(plan.root, &terms);
  std::vector<const index::Segment*> segments;
  for (const auto& s : snapshot.segments) segments.push_back(s.get());
  std::vector<uint32_t> doc_freqs(segments.size());
  for (const std::string* term : terms) {
    auto [it, inserted] = stats.doc_freq.try_emplace(AsAbsl(*term), 0);
    if (!inserted) continue;
    // Every segment at once: over many, their lookups' cache misses overlap.
    index::SealedSegment::DocFreqs(segments, *term, doc_freqs);
    for (const uint32_t df : doc_freqs) it->second += df;
  }
  return stats;
}

absl::StatusOr<SearchResult> Search(const index::IndexSnapshot& snapshot, const Plan& plan,
                                    const SearchOptions& options) {
  if (options.limit == 0 || options.limit > kMaxLimit) {
    return absl::InvalidArgumentError(
        StrCat("limit must be between 1 and ", kMaxLimit, ", not ", options.limit));
  }
  return Evaluation(snapshot, plan, options).Run();
}

absl::StatusOr<std::vector<uint64_t>> CountOverTime(const index::IndexSnapshot& snapshot,
                                                    const Plan& plan, const TimeBuckets& buckets) {
  // Bounds that keep the bucket arithmetic far from overflow (the buckets may come over the
  // network from a front door): ±30,000 years, buckets of at most a leap year.
  constexpr int64_t kFarthest = int64_t{1'000'000'000'000'000},
                    kLongest = 366 * int64_t{86'400'000};
  if (buckets.count == 0 || buckets.count > kMaxTimeBuckets || buckets.width_ms <= 0 ||
      buckets.width_ms > kLongest || buckets.start_ms < -kFarthest ||
      buckets.start_ms > kFarthest) {
    return absl::InvalidArgumentError(StrCat("a count over time takes 1 to ", kMaxTimeBuckets,
                                             " buckets of up to a year each, within ±30,000 "
                                             "years of 1970"));
  }
  std::vector<uint64_t> counts(buckets.count, 0);
  const CollectionStats stats;  // phrases are matched, not scored
  const ScoringParams params;
  for (const auto& segment : snapshot.segments) {
    const DocId visible = segment->VisibleDocs();
    if (visible == 0 || segment->columns().max_created_at_ms() < buckets.start_ms) continue;
    Context ctx{&segment->columns(), &params, 1.0, nullptr};
    MatcherBuilder builder(*segment, visible, stats, ctx);
    MatchCounter counter(*segment, visible, plan, kMaxTweetId,
                         [&builder](const PlanNode& phrase) -> std::unique_ptr<DocSource> {
                           return std::make_unique<MatcherSource>(builder.Build(phrase));
                         });
    counter.CountByTime(buckets, counts.data());
    if (absl::Status health = segment->Health(); !health.ok()) return health;
  }
  return counts;
}

}  // namespace tweetsearch::query
