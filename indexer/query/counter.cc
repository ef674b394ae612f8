#include "indexer/query/counter.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "indexer/index/merged_docs.h"
#include "indexer/index/packed_docs.h"
#include "indexer/index/pair_champions.h"

namespace tweetsearch::query {

using index::Columns;
using index::DocId;
using index::kEndDoc;
using index::PostingCursor;

namespace {

// DocIds per window: 2 KiB of bits per node, which stays in the first-level cache.
constexpr DocId kWindow = DocId{1} << 14;
constexpr size_t kWindowWords = kWindow / 64;
// An AND whose rarest child is a term or an OR of terms with fewer postings than one per this
// many DocIds is counted in batches of that child's postings; denser, in windows (at 10M
// tweets, of 16, 32, 64 and 128, 64 gave the lowest p99 at the same median:
// docs/benchmarks.md).
constexpr uint64_t kDense = 64;
// Other ANDs whose rarest child has fewer postings than one per this many DocIds are counted a
// DocId at a time.
constexpr uint64_t kSparse = 256;
// Candidates looked up per batch.
constexpr size_t kBatch = 128;

size_t Words(DocId from, DocId end) { return (end - from + 63) / 64; }

uint64_t PopCount(const uint64_t* words, size_t n) {
  uint64_t total = 0;
  for (size_t w = 0; w < n; ++w) total += static_cast<uint64_t>(std::popcount(words[w]));
  return total;
}

}  // namespace

struct MatchCounter::Node {
  PlanNode::Kind kind = PlanNode::Kind::kNothing;
  // kTerm: the union of pairs' rows that `cursor` reads (LeadByRowsOfAnOr); before the
  // cursor, which must not outlive it.
  std::unique_ptr<index::PackedDocs> rows;
  // kTerm: a term's postings, or the rows of a pair of words an AND holds (pair_champions.h),
  // which stand for the pair's two terms.
  std::unique_ptr<index::DocCursor> cursor;
  PostingCursor* term = nullptr;                // the term's cursor, if it is one
  std::string_view text;                        // the term, if it is one (the plan's)
  std::unique_ptr<DocSource> source;            // kPhrase
  std::vector<std::unique_ptr<Node>> children;  // kAnd: fewest postings first; kOr
  std::vector<std::unique_ptr<Node>> excluded;  // kAnd
  std::vector<PostingCursor*> words;            // kOr of words only: its children's cursors
  // Postings the node's lists hold (an upper bound of its matches), to choose between
  // decoding a child's window and looking bits up in it.
  uint64_t postings = 0;
  uint64_t bits[kWindowWords];
};

MatchCounter::MatchCounter(const index::Segment& segment, DocId visible, const Plan& plan,
                           TweetId watermark, const PhraseSources& phrases, uint64_t enough)
    : segment_(segment), visible_(visible), enough_(enough), plan_(plan), watermark_(watermark) {
  const Columns& c = segment.columns();
  if (segment.MaxTweetId() > watermark && visible > 0) {
    if (segment.newest_first()) {
      // TweetIds descend: the tweets above the watermark are a prefix.
      DocId lo = 0, hi = visible;
      while (lo < hi) {
        const DocId mid = lo + (hi - lo) / 2;
        if (c.tweet_id(mid) > watermark) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      above_watermark_ = lo;
    } else {
      check_id_ = true;
    }
  }
  check_created_ = plan.since_ms != std::numeric_limits<int64_t>::min() || plan.has_until();
  root_ = Build(plan.root, phrases);
}

MatchCounter::~MatchCounter() = default;

std::unique_ptr<MatchCounter::Node> MatchCounter::Build(const PlanNode& plan_node,
                                                        const PhraseSources& phrases) {
  auto node = std::make_unique<Node>();
  auto nothing = [] { return std::make_unique<Node>(); };  // matches no tweet
  switch (plan_node.kind) {
    case PlanNode::Kind::kNothing:
      return node;
    case PlanNode::Kind::kTerm: {
      std::unique_ptr<PostingCursor> term = segment_.OpenTerm(plan_node.term, visible_);
      if (term == nullptr || term->doc() == kEndDoc) return nothing();
      node->term = term.get();
      node->text = plan_node.term;
      node->cursor = std::move(term);
      node->postings = node->cursor->size();
      break;
    }
    case PlanNode::Kind::kPhrase: {
      node->source = phrases(plan_node);
      if (node->source == nullptr || node->source->doc() == kEndDoc) return nothing();
      node->postings = visible_;
      for (const std::string& term : plan_node.phrase_terms) {
        node->postings = std::min<uint64_t>(node->postings, segment_.DocFreq(term));
      }
      break;
    }
    case PlanNode::Kind::kAnd:
      node->postings = visible_;
      for (const PlanNode& child : plan_node.children) {
        node->children.push_back(Build(child, phrases));
        if (node->children.back()->kind == PlanNode::Kind::kNothing) return nothing();
        node->postings = std::min(node->postings, node->children.back()->postings);
      }
      for (const PlanNode& child : plan_node.excluded) {
        std::unique_ptr<Node> built = Build(child, phrases);
        if (built->kind != PlanNode::Kind::kNothing) node->excluded.push_back(std::move(built));
      }
      if (node->children.empty()) return nothing();  // the planner never makes one
      LeadByPairRows(plan_node, *node);
      std::stable_sort(node->children.begin(), node->children.end(),
                       [](const auto& a, const auto& b) { return a->postings < b->postings; });
      break;
    case PlanNode::Kind::kOr:
      for (const PlanNode& child : plan_node.children) {
        std::unique_ptr<Node> built = Build(child, phrases);
        if (built->kind == PlanNode::Kind::kNothing) continue;
        node->postings += built->postings;
        node->children.push_back(std::move(built));
      }
      if (node->children.empty()) return nothing();
      if (std::all_of(node->children.begin(), node->children.end(),
                      [](const auto& c) { return c->kind == PlanNode::Kind::kTerm; })) {
        for (const auto& child : node->children) node->words.push_back(child->term);
      }
      break;
  }
  node->kind = plan_node.kind;
  return node;
}

// Where two of the AND's terms are a pair whose rows the segment keeps (pair_champions.h),
// the fewest of those rows stand for the two terms: they are the matches of both, read
// without intersecting two long lists (`me today well` reads the 7,363 rows of `today well`
// where the lists hold 301,721 and 222,698 postings).
void MatchCounter::LeadByPairRows(const PlanNode& plan_node, Node& node) {
  const index::PairChampions* pairs = segment_.pair_champions();
  if (pairs == nullptr) return;
  // node.children[i] was built from plan_node.children[i]; a term may have been dropped only
  // by returning `nothing` for the whole AND.
  const index::PackedDocs* best = nullptr;
  size_t first = 0, second = 0;
  for (size_t i = 0; i < node.children.size(); ++i) {
    if (node.children[i]->kind != PlanNode::Kind::kTerm) continue;
    for (size_t j = i + 1; j < node.children.size(); ++j) {
      if (node.children[j]->kind != PlanNode::Kind::kTerm) continue;
      bool swapped = false;
      const index::PairChampionList* pair =
          pairs->Find(plan_node.children[i].term, plan_node.children[j].term, &swapped);
      if (pair == nullptr || !pair->rows) continue;
      if (best == nullptr || pair->rows->size() < best->size()) {
        best = &*pair->rows;
        first = i;
        second = j;
      }
    }
  }
  if (best == nullptr) {
    LeadByRowsOfAnOr(node, *pairs);
    return;
  }
  auto rows = std::make_unique<Node>();
  rows->kind = PlanNode::Kind::kTerm;
  rows->cursor = best->Open(visible_);
  rows->postings = best->size();
  node.children.erase(node.children.begin() + static_cast<ptrdiff_t>(second));
  node.children[first] = std::move(rows);
  node.postings = std::min(node.postings, node.children[first]->postings);
  led_by_pair_rows_ = true;
}

namespace {

// What may stand for an OR child and a term child of an AND (LeadByRowsOfAnOr): the rows of
// the pairs the OR's words make with the term, and the OR's sparse words, whose postings are
// looked up in the term's list.
struct RowsOfAnOr {
  std::vector<const index::PackedDocs*> rows;
  std::vector<PostingCursor*> sparse;
  uint64_t looked_up = 0;  // the sparse words' postings
  uint64_t cost = 0;       // rows read and postings looked up
};

// A word of the OR, as the counter opened it (words without postings in the segment are left
// out).
struct OrWord {
  std::string_view text;
  PostingCursor* cursor;
};

// How `words` (an OR's) and `term` could be read as one list: each word either makes with the
// term a pair that keeps its rows or has no match, or is sparse (fewer postings than one per
// kDense rows). At least one word must be settled by its pair: an OR of sparse words alone is
// looked up in the term's list by the batches anyway. nullopt where that fails.
std::optional<RowsOfAnOr> RowsOf(std::span<const OrWord> words, std::string_view term,
                                 const index::PairChampions& pairs, DocId visible,
                                 uint64_t enough) {
  RowsOfAnOr out;
  bool paired = false;
  for (const OrWord& word : words) {
    bool swapped = false;
    const index::PairChampionList* pair = pairs.Find(word.text, term, &swapped);
    if (pair != nullptr && (pair->matches == 0 || pair->rows)) {
      paired = true;
      if (pair->matches == 0) continue;  // no row holds both
      out.rows.push_back(&*pair->rows);
      out.cost += pair->rows->size();
      continue;
    }
    const uint64_t postings = word.cursor->size();
    if (postings * kDense >= visible) return std::nullopt;
    out.sparse.push_back(word.cursor);
    out.looked_up += postings;
  }
  if (!paired) return std::nullopt;
  // Where one pair's rows already hold enough matches, the count stops within them: looking
  // the sparse words up in the whole of the term's list would cost more than the windows
  // that stop there (`(not OR ixvente) was -susu`, 30,565 matches at 10M).
  if (!out.sparse.empty() &&
      std::any_of(out.rows.begin(), out.rows.end(),
                  [&](const index::PackedDocs* rows) { return rows->size() >= enough; })) {
    return std::nullopt;
  }
  out.cost += out.looked_up;
  return out;
}

}  // namespace

// Where each word of an OR child of the AND makes with a term child a pair whose rows the
// segment keeps (or that has no match), the union of those rows stands for the two children:
// `(a OR b) c` holds exactly the rows of `a c` and of `b c` (`(in OR and) la -lorami`, no match
// in 10M tweets, read 165,000 postings of `la` and the bitmaps of `in` and `and` over the
// whole segment). A sparse word of the OR joins the union with those of its postings the
// term's list holds, looked up there (`(mizo OR great) been -a` at 10M: the 3,955 rows of
// `great been` and 43,731 postings of `mizo` looked up, in place of windows over 420,000
// postings), where they are fewer than the postings of the AND's rarest other child. The
// cheapest such union is read, gathered once into a list of its own.
void MatchCounter::LeadByRowsOfAnOr(Node& node, const index::PairChampions& pairs) {
  std::optional<RowsOfAnOr> best;
  size_t or_child = 0, term_child = 0;
  for (size_t i = 0; i < node.children.size(); ++i) {
    if (node.children[i]->kind != PlanNode::Kind::kOr || node.children[i]->words.empty()) continue;
    std::vector<OrWord> words;  // its children are the words' terms
    for (const auto& word : node.children[i]->children) words.push_back({word->text, word->term});
    for (size_t j = 0; j < node.children.size(); ++j) {
      if (node.children[j]->kind != PlanNode::Kind::kTerm) continue;
      std::optional<RowsOfAnOr> rows =
          RowsOf(words, node.children[j]->text, pairs, visible_, enough_);
      if (!rows || (best && rows->cost >= best->cost)) continue;
      uint64_t others = visible_;  // the AND's rarest other child leads, if cheaper
      for (size_t k = 0; k < node.children.size(); ++k) {
        if (k != i && k != j) others = std::min(others, node.children[k]->postings);
      }
      if (rows->looked_up > 0 && rows->looked_up >= others) continue;
      best = std::move(rows);
      or_child = i;
      term_child = j;
    }
  }
  if (!best) return;
  std::vector<DocId> docs;
  DocId batch[kBatch];
  for (const index::PackedDocs* list : best->rows) {
    std::unique_ptr<index::DocCursor> cursor = list->Open(visible_);
    while (const size_t n = cursor->NextDocs(visible_, batch, kBatch)) {
      docs.insert(docs.end(), batch, batch + n);
    }
  }
  if (!best->sparse.empty()) {  // merged, then looked up in the term's list in batches
    index::MergedDocs merged(best->sparse, visible_);
    index::DocCursor& term = *node.children[term_child]->cursor;
    while (size_t n = merged.Next(batch, kBatch)) {
      n = term.Filter(batch, n, true);
      docs.insert(docs.end(), batch, batch + n);
    }
  }
  std::sort(docs.begin(), docs.end());
  docs.erase(std::unique(docs.begin(), docs.end()), docs.end());
  index::PackedDocs::Writer writer;
  for (const DocId d : docs) writer.Add(d);
  auto rows = std::make_unique<Node>();
  rows->kind = PlanNode::Kind::kTerm;
  rows->rows = std::make_unique<index::PackedDocs>(std::move(writer).Finish());
  rows->cursor = rows->rows->Open(visible_);
  rows->postings = docs.size();
  node.children[or_child] = std::move(rows);
  node.children.erase(node.children.begin() + static_cast<ptrdiff_t>(term_child));
  node.postings = visible_;
  for (const auto& child : node.children) node.postings = std::min(node.postings, child->postings);
  led_by_pair_rows_ = true;
}

// No match of `node` lies before the DocId returned: every cursor stands on its first posting
// at or after a DocId no later than the first one not yet counted.
DocId MatchCounter::NextPossible(const Node& node) {
  switch (node.kind) {
    case PlanNode::Kind::kNothing:
      return kEndDoc;
    case PlanNode::Kind::kTerm:
      return node.cursor->doc();
    case PlanNode::Kind::kPhrase:
      return node.source->doc();
    case PlanNode::Kind::kAnd: {
      DocId d = 0;
      for (const auto& child : node.children) d = std::max(d, NextPossible(*child));
      return d;
    }
    case PlanNode::Kind::kOr: {
      DocId d = kEndDoc;
      for (const auto& child : node.children) d = std::min(d, NextPossible(*child));
      return d;
    }
  }
  return kEndDoc;
}

// Sets node.bits to the node's matches in [from, end) (bit i for DocId from + i).
void MatchCounter::Fill(Node& node, DocId from, DocId end) {
  const size_t n = Words(from, end);
  std::memset(node.bits, 0, n * sizeof(uint64_t));
  switch (node.kind) {
    case PlanNode::Kind::kNothing:
      return;
    case PlanNode::Kind::kTerm:
      if (node.cursor->doc() < end) node.cursor->FillBits(from, end, node.bits);
      return;
    case PlanNode::Kind::kPhrase: {
      DocSource& s = *node.source;
      if (s.doc() < from) s.Advance(from);
      for (DocId d = s.doc(); d < end; s.Next(), d = s.doc()) {
        node.bits[(d - from) / 64] |= uint64_t{1} << ((d - from) % 64);
      }
      return;
    }
    case PlanNode::Kind::kOr:
      for (const auto& child : node.children) {
        if (NextPossible(*child) >= end) continue;
        Fill(*child, from, end);
        for (size_t w = 0; w < n; ++w) node.bits[w] |= child->bits[w];
      }
      return;
    case PlanNode::Kind::kAnd: {
      Node& lead = *node.children[0];
      if (lead.kind == PlanNode::Kind::kTerm) {  // straight into the node's bits
        if (lead.cursor->doc() < end) lead.cursor->FillBits(from, end, node.bits);
      } else {
        Fill(lead, from, end);
        std::memcpy(node.bits, lead.bits, n * sizeof(uint64_t));
      }
      uint64_t left = PopCount(node.bits, n);
      for (size_t i = 1; i < node.children.size() && left > 0; ++i) {
        left = Intersect(node, *node.children[i], from, end, true, left);
      }
      for (size_t i = 0; i < node.excluded.size() && left > 0; ++i) {
        left = Intersect(node, *node.excluded[i], from, end, false, left);
      }
      return;
    }
  }
}

// Keeps in node.bits (`left` bits set) only the DocIds `child` matches (keep) or does not match
// (!keep), and returns how many are left. When few bits are left next to what the child would
// decode in the window, each is looked up.
uint64_t MatchCounter::Intersect(Node& node, Node& child, DocId from, DocId end, bool keep,
                                 uint64_t left) {
  const size_t n = Words(from, end);
  // Filling the child costs about its postings in the window (were they spread evenly), but
  // no more than a byte of bitmap per 8 DocIds (bitmap blocks), and a word per 64 DocIds when
  // the child's words are copied from one bitmap (a dense list); a lookup costs about as much
  // as ten of any.
  const uint64_t expected = child.postings * (end - from) / std::max<DocId>(visible_, 1);
  const bool words = child.kind == PlanNode::Kind::kTerm && child.cursor->fills_words();
  if (left * 10 < (words ? (end - from) / 64 : std::min<uint64_t>(expected, (end - from) / 8))) {
    for (size_t w = 0; w < n; ++w) {
      for (uint64_t word = node.bits[w]; word != 0; word &= word - 1) {
        const DocId d = from + static_cast<DocId>(w * 64 + std::countr_zero(word));
        if (Contains(child, d) != keep) {
          node.bits[w] &= ~(uint64_t{1} << (d - from) % 64);
          --left;
        }
      }
    }
    return left;
  }
  if (NextPossible(child) >= end) {
    if (!keep) return left;
    std::memset(node.bits, 0, n * sizeof(uint64_t));
    return 0;
  }
  if (words) return child.cursor->AndBits(from, end, node.bits, keep);
  Fill(child, from, end);
  for (size_t w = 0; w < n; ++w) {
    node.bits[w] &= keep ? child.bits[w] : ~child.bits[w];
  }
  return PopCount(node.bits, n);
}

// Whether `node` matches `d`. Moves its cursors forward, so DocIds asked for must increase.
bool MatchCounter::Contains(Node& node, DocId d) {
  switch (node.kind) {
    case PlanNode::Kind::kNothing:
      return false;
    case PlanNode::Kind::kTerm:
      if (node.cursor->doc() < d) node.cursor->Advance(d);
      return node.cursor->doc() == d;
    case PlanNode::Kind::kPhrase:
      if (node.source->doc() < d) node.source->Advance(d);
      return node.source->doc() == d;
    case PlanNode::Kind::kOr: {
      bool any = false;
      // Every child is moved to d, so that later lookups start from there.
      for (const auto& child : node.children) any = Contains(*child, d) || any;
      return any;
    }
    case PlanNode::Kind::kAnd:
      for (const auto& child : node.children) {
        if (!Contains(*child, d)) return false;
      }
      for (const auto& child : node.excluded) {
        if (Contains(*child, d)) return false;
      }
      return true;
  }
  return false;
}

bool MatchCounter::CountsInBatches() const {
  if (root_->kind != PlanNode::Kind::kAnd || root_->postings * kDense >= visible_) return false;
  const Node& lead = *root_->children[0];
  return lead.kind == PlanNode::Kind::kTerm || !lead.words.empty();
}

void MatchCounter::Count(DocId from, uint64_t stop, uint64_t* count) {
  // An AND whose rarest list is not dense is cheaper in batches of its rarest list's postings:
  // a window's bitmaps would cost more to clear and scan than its candidates to look up. (A
  // term or an OR has nothing to skip: its windows are cheaper.)
  if (CountsInBatches()) {
    CountInBatches(from, stop, count);
    return;
  }
  if (root_->kind == PlanNode::Kind::kAnd) {
    if (root_->postings * kSparse < visible_) {
      CountSparse(from, stop, count);
      return;
    }
  }
  DocId at = from;  // DocIds before it are counted
  while (*count < stop && at < visible_) {
    const DocId next = std::max(at, NextPossible(*root_));
    if (next >= visible_) return;
    const DocId start = next & ~DocId{63};  // words line up with the deleted bits
    const DocId end = start + std::min<DocId>(kWindow, visible_ - start);
    Fill(*root_, start, end);
    if (start < at) root_->bits[0] &= ~uint64_t{0} << (at - start);  // counted already
    *count += CountWindow(root_->bits, start, end);
    at = end;
  }
}

void MatchCounter::CountInBatches(DocId from, uint64_t stop, uint64_t* count) {
  Node& lead = *root_->children[0];
  // An OR of words, or a term alone: its lists merged. The rows of a pair (no term) are read
  // from their cursor.
  std::span<PostingCursor* const> words = lead.words;
  if (lead.kind == PlanNode::Kind::kTerm) words = {&lead.term, lead.term != nullptr ? 1u : 0u};
  std::optional<index::MergedDocs> merged;
  if (words.empty()) {
    if (lead.cursor->doc() < from) lead.cursor->Advance(from);
  } else {
    for (PostingCursor* word : words) {
      if (word->doc() < from) word->Advance(from);
    }
    merged.emplace(words, visible_);
  }
  DocId docs[kBatch];
  while (*count < stop) {
    size_t n = merged ? merged->Next(docs, kBatch) : lead.cursor->NextDocs(visible_, docs, kBatch);
    if (n == 0) return;
    for (size_t i = 1; i < root_->children.size() && n > 0; ++i) {
      n = Keep(*root_->children[i], docs, n, true);
    }
    for (size_t i = 0; i < root_->excluded.size() && n > 0; ++i) {
      n = Keep(*root_->excluded[i], docs, n, false);
    }
    *count += CountDocs(docs, n);
  }
}

size_t MatchCounter::Keep(Node& node, DocId* docs, size_t n, bool keep) {
  if (node.kind == PlanNode::Kind::kTerm) return node.cursor->Filter(docs, n, keep);
  if (node.kind == PlanNode::Kind::kOr && keep && !node.words.empty()) {
    return index::FilterAny(node.words, docs, n);  // an OR of words: a block at a time
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (Contains(node, docs[i]) == keep) docs[kept++] = docs[i];
  }
  return kept;
}

void MatchCounter::CountSparse(DocId from, uint64_t stop, uint64_t* count) {
  for (DocId d = std::max(from, NextPossible(*root_)); d < visible_ && *count < stop;
       d = std::max(d + 1, NextPossible(*root_))) {
    if (Contains(*root_, d)) *count += CountDocs(&d, 1);
  }
}

bool MatchCounter::OnlyDeletedToTakeOut(DocId from) const {
  return from >= above_watermark_ && buckets_ == nullptr && collect_ == nullptr && !check_id_ &&
         !check_created_ && plan_.min_likes == 0;
}

uint64_t MatchCounter::CountDocs(const DocId* docs, size_t n) {
  if (n == 0) return 0;
  const Columns& c = segment_.columns();
  if (OnlyDeletedToTakeOut(docs[0])) {
    // Nothing but the deleted rows to take out (usually none): no window per match.
    if (c.deleted_count() == 0) return n;
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) total += c.deleted(docs[i]) ? 0 : 1;
    return total;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const DocId base = docs[i] & ~DocId{63};
    const uint64_t bit = uint64_t{1} << (docs[i] - base);
    total += CountWindow(&bit, base, docs[i] + 1);
  }
  return total;
}

uint64_t MatchCounter::CountWindow(const uint64_t* bits, DocId from, DocId end) {
  const Columns& c = segment_.columns();
  const bool check_likes = plan_.min_likes > 0;
  uint64_t total = 0;
  const size_t n = Words(from, end);
  if (OnlyDeletedToTakeOut(from)) {
    // Nothing but the deleted bits to take out: no branch per word (the words of an AND of
    // common words are mostly zero, at random).
    for (size_t w = 0; w < n; ++w) {
      total += static_cast<uint64_t>(std::popcount(bits[w] & ~c.deleted_word(from / 64 + w)));
    }
    return total;
  }
  for (size_t w = 0; w < n; ++w) {
    uint64_t word = bits[w];
    if (word == 0) continue;
    const DocId base = from + static_cast<DocId>(w * 64);
    word &= ~c.deleted_word(base / 64);
    if (base < above_watermark_) {
      const DocId shift = above_watermark_ - base;
      word = shift >= 64 ? 0 : word & (~uint64_t{0} << shift);
    }
    if (buckets_ != nullptr) {
      if (word != 0) total += TallyByTime(word, base);
      continue;
    }
    if (word != 0 && (check_id_ || check_created_ || check_likes)) {
      word = FilterWord(word, base, check_created_);
    }
    total += static_cast<uint64_t>(std::popcount(word));
    if (collect_ != nullptr && word != 0) Collect(word, base);
  }
  return total;
}

void MatchCounter::Collect(uint64_t word, DocId base) {
  const bool over = collect_->size() + static_cast<size_t>(std::popcount(word)) > collect_max_;
  if (over && !collect_first_) {
    collect_->clear();
  } else {  // all of the word's matches, or (keep_first) as many as fit
    for (uint64_t left = word; left != 0 && collect_->size() < collect_max_; left &= left - 1) {
      collect_->push_back(base + static_cast<DocId>(std::countr_zero(left)));
    }
  }
  if (over) {
    collect_ = nullptr;
    collect_overflowed_ = true;
  }
}

// Clears the bits of the 64 tweets from `base` that fail the filters checked tweet by tweet,
// after ruling the whole range out by its bounds where they allow.
uint64_t MatchCounter::FilterWord(uint64_t word, DocId base, bool check_created) const {
  const Columns& c = segment_.columns();
  if (plan_.min_likes > 0 && c.range_max_likes(base) < plan_.min_likes) return 0;
  if (check_created && c.range_max_created_at_ms(base) < plan_.since_ms) return 0;
  for (uint64_t left = word; left != 0; left &= left - 1) {
    const int bit = std::countr_zero(left);
    const DocId d = base + static_cast<DocId>(bit);
    bool pass = !(check_id_ && c.tweet_id(d) > watermark_);
    if (pass && check_created) {
      const int64_t created = c.created_at_ms(d);
      pass = created >= plan_.since_ms && (!plan_.has_until() || created < plan_.until_ms);
    }
    if (pass && plan_.min_likes > 0) pass = c.likes(d) >= plan_.min_likes;
    if (!pass) word &= ~(uint64_t{1} << bit);
  }
  return word;
}

void MatchCounter::CountByTime(const TimeBuckets& buckets, uint64_t* counts) {
  time_from_ = std::max(buckets.start_ms, plan_.since_ms);
  time_to_ = plan_.has_until() ? std::min(buckets.end_ms(), plan_.until_ms) : buckets.end_ms();
  if (time_from_ >= time_to_ || buckets.width_ms <= 0) return;
  const Columns& c = segment_.columns();
  c.PrepareRangeMinCreated();
  // Only the DocIds from the first range to the last whose bounds meet the span are walked.
  DocId first = kEndDoc, last = 0;
  for (DocId base = 0; base < visible_; base += Columns::kRangeSize) {
    if (c.range_max_created_at_ms(base) < time_from_ ||
        c.range_min_created_at_ms(base) >= time_to_) {
      continue;
    }
    first = std::min(first, base);
    last = base;
  }
  if (first == kEndDoc) return;
  visible_ = std::min<DocId>(visible_, last + Columns::kRangeSize);
  buckets_ = &buckets;
  bucket_counts_ = counts;
  uint64_t total = 0;
  Count(first, std::numeric_limits<uint64_t>::max(), &total);
}

uint64_t MatchCounter::TallyByTime(uint64_t word, DocId base) const {
  const Columns& c = segment_.columns();
  if (check_id_ || plan_.min_likes > 0) word = FilterWord(word, base, false);
  if (word == 0) return 0;
  const int64_t earliest = c.range_min_created_at_ms(base);
  const int64_t latest = c.range_max_created_at_ms(base);
  if (latest < time_from_ || earliest >= time_to_) return 0;
  const int64_t start = buckets_->start_ms, width = buckets_->width_ms;
  if (earliest >= time_from_ && latest < time_to_ &&
      (earliest - start) / width == (latest - start) / width) {
    const auto n = static_cast<uint64_t>(std::popcount(word));
    bucket_counts_[(earliest - start) / width] += n;
    return n;
  }
  uint64_t n = 0;
  for (; word != 0; word &= word - 1) {
    const int64_t created = c.created_at_ms(base + static_cast<DocId>(std::countr_zero(word)));
    if (created < time_from_ || created >= time_to_) continue;
    ++bucket_counts_[(created - start) / width];
    ++n;
  }
  return n;
}

}  // namespace tweetsearch::query
