#include "indexer/index/pair_champions.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>

#include "common/strings.h"
#include "indexer/index/ascending.h"
#include "indexer/index/champions.h"

namespace tweetsearch::index {
namespace {

// The lists are read a window of DocIds at a time, every word's postings of the window as a
// bitmap and a frequency per row.
constexpr DocId kWindow = 16384;
constexpr size_t kWindowWords = kWindow / 64;
// Text scores are looked up for frequencies up to kTableTfs and lengths below kTableLengths.
constexpr uint32_t kTableTfs = 8;
constexpr uint32_t kTableLengths = 256;
constexpr uint32_t kPopularityTable = 4096;  // likes looked up below this
// The rest is kept per (frequency, frequency, length) cell: the most likes of each. Cells of
// frequencies up to kGridTfs and lengths below kGridLengths (most matches) in an array, the
// others in a map; lengths from 255 on share cells (as 255, a lower bound).
constexpr uint32_t kGridTfs = 2;
constexpr uint32_t kGridLengths = 64;

struct Match {
  double text = 0;  // both words' SelectionText, weighed by their idfs in the segment
  double popularity = 0;
  DocId doc = 0;
  uint32_t likes = 0;
  uint16_t tf_first = 0, tf_second = 0, length = 0;
};

// Chooses one pair's champions as its matches stream by, in memory that does not grow with
// them: per weighting of text against popularity a heap of the best kPairChampionsPerWeight
// matches, and for every match that has left (or never entered) all heaps its grid cell.
class PairSelector {
 public:
  void Add(const Match& m) {
    bool kept = false;
    for (size_t w = 0; w < kSelectionTextWeights.size(); ++w) {
      std::vector<Match>& heap = heaps_[w];
      const auto greater = [w](const Match& a, const Match& b) { return Less(b, a, w); };
      if (heap.size() < kPairChampionsPerWeight) {
        heap.push_back(m);
        std::push_heap(heap.begin(), heap.end(), greater);
        kept = true;
        continue;
      }
      if (!Less(heap.front(), m, w)) continue;
      std::pop_heap(heap.begin(), heap.end(), greater);
      const Match out = heap.back();
      heap.back() = m;
      std::push_heap(heap.begin(), heap.end(), greater);
      kept = true;
      if (!InAnyHeap(out)) AddToRest(out);
    }
    if (!kept) AddToRest(m);
  }

  // Whether a match with these frequencies, length and likes need not be offered: a match of
  // the same cell with more likes is in the rest, so the rest's bound covers this one too, and
  // under every weighting it ranks at least as high as one that left every heap (it could
  // enter one only by a tie of capped popularity, and champions need not be exact).
  bool Dominated(uint16_t tf_first, uint16_t tf_second, uint16_t length, uint32_t likes) const {
    if (grid_.empty() || tf_first > kGridTfs || tf_second > kGridTfs || length >= kGridLengths) {
      return false;
    }
    return static_cast<int64_t>(likes) < grid_[GridCell(tf_first, tf_second, length)];
  }

  PairChampionList Finish() const {
    PairChampionList out;
    for (const std::vector<Match>& heap : heaps_) {
      for (const Match& m : heap) out.docs.push_back(m.doc);
    }
    std::sort(out.docs.begin(), out.docs.end());
    out.docs.erase(std::unique(out.docs.begin(), out.docs.end()), out.docs.end());
    out.docs.shrink_to_fit();
    std::vector<PairPoint> points;
    for (size_t at = 0; at < grid_.size(); ++at) {
      if (grid_[at] < 0) continue;
      const size_t tfs = at / kGridLengths;
      points.push_back({static_cast<uint32_t>(grid_[at]), static_cast<uint16_t>(tfs / kGridTfs + 1),
                        static_cast<uint16_t>(tfs % kGridTfs + 1),
                        static_cast<uint16_t>(at % kGridLengths)});
    }
    for (const auto& [key, likes] : others_) {
      points.push_back({likes, static_cast<uint16_t>(key >> 32), static_cast<uint16_t>(key >> 16),
                        static_cast<uint16_t>(key & 0xFFFF)});
    }
    out.rest = PairSkyline(std::move(points));
    return out;
  }

 private:
  static double Key(const Match& m, size_t w) {
    return kSelectionTextWeights[w] * m.text + m.popularity;
  }
  // A strict order of matches under weighting w (DocIds are distinct).
  static bool Less(const Match& a, const Match& b, size_t w) {
    const double ka = Key(a, w), kb = Key(b, w);
    return ka != kb ? ka < kb : a.doc < b.doc;
  }
  // Every match was offered to every heap, and a heap only lets go of its smallest: a match
  // is in a heap that is not full, or in a full one if it is not below its smallest.
  bool InAnyHeap(const Match& m) const {
    for (size_t w = 0; w < heaps_.size(); ++w) {
      if (heaps_[w].size() < kPairChampionsPerWeight || !Less(m, heaps_[w].front(), w)) {
        return true;
      }
    }
    return false;
  }
  void AddToRest(const Match& m) {
    if (m.tf_first <= kGridTfs && m.tf_second <= kGridTfs && m.length < kGridLengths) {
      if (grid_.empty()) grid_.resize(size_t{kGridTfs} * kGridTfs * kGridLengths, -1);
      int64_t& most = grid_[GridCell(m.tf_first, m.tf_second, m.length)];
      most = std::max<int64_t>(most, m.likes);
      return;
    }
    const uint64_t key = uint64_t{m.tf_first} << 32 | uint64_t{m.tf_second} << 16 |
                         std::min<uint32_t>(m.length, 255);
    uint32_t& most = others_.try_emplace(key, 0).first->second;
    most = std::max(most, m.likes);
  }

  static size_t GridCell(uint32_t tf_first, uint32_t tf_second, uint32_t length) {
    return ((tf_first - 1) * kGridTfs + (tf_second - 1)) * kGridLengths + length;
  }

  std::array<std::vector<Match>, kSelectionTextWeights.size()> heaps_;  // min-heaps
  std::vector<int64_t> grid_;  // the most likes per cell (-1: none); empty until needed
  absl::flat_hash_map<uint64_t, uint32_t> others_;  // by tf_first << 32 | tf_second << 16 | length
};

// One word's postings of the current window.
struct WindowList {
  std::unique_ptr<PostingCursor> cursor;
  std::array<double, kTableTfs * kTableLengths> text{};  // idf * SelectionText, by (tf - 1, length)
  double idf = 0;
  std::array<uint64_t, kWindowWords> bits{};
  std::vector<uint16_t> tfs = std::vector<uint16_t>(kWindow);
  bool any = false;

  void Read(DocId from, DocId end) {
    bits.fill(0);
    any = false;
    if (cursor == nullptr) return;
    for (DocId d = cursor->doc(); d < end; cursor->Next(), d = cursor->doc()) {
      const DocId i = d - from;
      bits[i / 64] |= uint64_t{1} << (i % 64);
      tfs[i] = static_cast<uint16_t>(std::min<uint32_t>(cursor->freq(), UINT16_MAX));
      any = true;
    }
  }
  // Appends the window's postings (from `from`) whose frequency is 2 or more to *out, with
  // lengths[i] and likes[i] the window's rows'.
  void AppendRepeats(DocId from, std::span<const uint16_t> lengths, std::span<const uint32_t> likes,
                     Repeats* out) const {
    for (size_t w = 0; any && w < kWindowWords; ++w) {
      for (uint64_t m = bits[w]; m != 0; m &= m - 1) {
        const size_t at = w * 64 + static_cast<size_t>(std::countr_zero(m));
        if (tfs[at] < 2) continue;
        out->docs.push_back(from + static_cast<DocId>(at));
        out->points.push_back(
            RepeatPoint{static_cast<uint8_t>(std::min<uint32_t>(tfs[at], 255)),
                        static_cast<uint8_t>(std::min<uint32_t>(lengths[at], 255)),
                        static_cast<uint8_t>(LikesBand(likes[at]))});
      }
    }
  }
  double Text(uint32_t tf, uint32_t length, double avg_length) const {
    if (tf <= kTableTfs && length < kTableLengths) return text[(tf - 1) * kTableLengths + length];
    return idf * SelectionText(tf, length, avg_length);
  }
};

}  // namespace

std::vector<PairPoint> PairSkyline(std::vector<PairPoint> points) {
  // Any point that beats or matches another comes before it in this order, so each point
  // need only be compared with the ones already kept.
  std::sort(points.begin(), points.end(), [](const PairPoint& a, const PairPoint& b) {
    if (a.tf_first != b.tf_first) return a.tf_first > b.tf_first;
    if (a.tf_second != b.tf_second) return a.tf_second > b.tf_second;
    if (a.length != b.length) return a.length < b.length;
    return a.likes > b.likes;
  });
  std::vector<PairPoint> kept;
  for (const PairPoint& p : points) {
    const bool beaten = std::any_of(kept.begin(), kept.end(), [&](const PairPoint& q) {
      return q.tf_first >= p.tf_first && q.tf_second >= p.tf_second && q.length <= p.length &&
             q.likes >= p.likes;
    });
    if (!beaten) kept.push_back(p);
  }
  return kept;
}

PairChampions::PairChampions(std::vector<std::string> words, std::vector<PairChampionList> lists,
                             std::vector<Repeats> repeats)
    : words_(words.size()), lists_(std::move(lists)), repeats_(std::move(repeats)) {
  repeats_.resize(words_);
  for (uint32_t i = 0; i < words.size(); ++i) rank_.emplace(std::move(words[i]), i);
  bytes_ = sizeof(*this) + lists_.capacity() * sizeof(PairChampionList) +
           repeats_.capacity() * sizeof(Repeats) +
           rank_.capacity() * (sizeof(std::string) + sizeof(uint32_t));
  for (const PairChampionList& l : lists_) {
    bytes_ += l.docs.capacity() * sizeof(DocId) + l.rest.capacity() * sizeof(PairPoint);
    if (l.rows) bytes_ += l.rows->bytes();
  }
  for (const Repeats& r : repeats_) {
    bytes_ += r.docs.capacity() * sizeof(DocId) + r.bits.capacity() * sizeof(uint64_t) +
              r.block_ranks.capacity() * sizeof(uint32_t) +
              r.points.capacity() * sizeof(RepeatPoint);
  }
}

const RepeatPoint* Repeats::Find(DocId d, size_t* at) const {
  if (!bits.empty()) {
    const size_t w = d / 64;
    if (w >= bits.size() || (bits[w] >> (d % 64) & 1) == 0) return nullptr;
    size_t rank = block_ranks[w / 8];
    for (size_t i = w & ~size_t{7}; i < w; ++i) rank += static_cast<size_t>(std::popcount(bits[i]));
    rank += static_cast<size_t>(std::popcount(bits[w] & ((uint64_t{1} << (d % 64)) - 1)));
    return &points[rank];
  }
  // A lead's postings are spread over the segment, so a call mostly steps a few places: eight
  // compared at once. Where the calls are sparser than the repeats (the few matches of a
  // ranked count), it gallops past the rest: steps doubling from 8, then a binary search in
  // the last. Everything below i is below d.
  const size_t n = docs.size();
  size_t i = *at;
  if (i + 8 <= n) {
    const uint32_t below = CountBelowOfEight(docs.data() + i, d);
    i += below;
    if (below == 8) {
      size_t step = 8;
      while (i + step <= n && docs[i + step - 1] < d) {
        i += step;
        step *= 2;
      }
      const auto first = docs.begin() + static_cast<std::ptrdiff_t>(i);
      i += static_cast<size_t>(
          std::lower_bound(first, first + static_cast<std::ptrdiff_t>(std::min(step, n - i)), d) -
          first);
    }
  }
  while (i < n && docs[i] < d) ++i;
  *at = i;
  return i < n && docs[i] == d ? &points[i] : nullptr;
}

void Repeats::Compact(DocId rows) {
  const size_t words = (size_t{rows} + 63) / 64;
  const size_t bitmap_bytes = words * sizeof(uint64_t) + (words + 7) / 8 * sizeof(uint32_t);
  if (bitmap_bytes >= docs.size() * sizeof(DocId)) {
    docs.shrink_to_fit();
    return;
  }
  bits.assign(words, 0);
  for (const DocId d : docs) bits[d / 64] |= uint64_t{1} << (d % 64);
  block_ranks.resize((words + 7) / 8);
  uint32_t rank = 0;
  for (size_t w = 0; w < words; ++w) {
    if (w % 8 == 0) block_ranks[w / 8] = rank;
    rank += static_cast<uint32_t>(std::popcount(bits[w]));
  }
  std::vector<DocId>().swap(docs);
}

RepeatsWindow::RepeatsWindow(std::span<const Repeats* const> repeats, DocId window)
    : repeats_(repeats.begin(), repeats.end()),
      window_(window),
      words_(window / 64),
      at_(repeats.size(), 0),
      repeated_(words_, 0),
      by_word_(repeats.size() * words_, 0),
      tfs_(repeats.size() * size_t{window}),
      lengths_(window),
      bands_(window) {
  assert(repeats.size() <= kMaxWords && window % 512 == 0);
}

void RepeatsWindow::Load(DocId from, std::span<const uint64_t> rows) {
  assert(from % window_ == 0 && rows.size() <= words_);
  std::fill(repeated_.begin(), repeated_.end(), 0);
  std::fill(by_word_.begin(), by_word_.end(), 0);
  for (size_t t = 0; t < repeats_.size(); ++t) {
    if (repeats_[t]->bits.empty()) {
      LoadDocs(t, from, rows);
    } else {
      LoadBits(t, from, rows);
    }
  }
}

void RepeatsWindow::LoadBits(size_t t, DocId from, std::span<const uint64_t> rows) {
  const Repeats& r = *repeats_[t];
  const size_t first = from / 64;
  if (first >= r.bits.size()) return;
  size_t rank = r.block_ranks[first / 8];  // `from` is a multiple of 512
  const size_t n = std::min(rows.size(), r.bits.size() - first);
  // The next window's points are asked for now: this window's are read while they come (a
  // window's hits are spread over nearly every line of its points, and waiting for each in
  // turn took most of the load).
  if (const size_t next = (first + 2 * words_) / 8; next < r.block_ranks.size()) {
    const char* begin =
        reinterpret_cast<const char*>(r.points.data() + r.block_ranks[(first + words_) / 8]);
    const char* end = reinterpret_cast<const char*>(r.points.data() + r.block_ranks[next]);
    for (const char* line = begin; line < end; line += 64) __builtin_prefetch(line);
  }
  uint64_t* loaded = by_word_.data() + t * words_;
  for (size_t w = 0; w < n; ++w) {
    const uint64_t word = r.bits[first + w];
    const uint64_t hit = word & rows[w];
    loaded[w] = hit;
    repeated_[w] |= hit;
    for (uint64_t m = hit; m != 0; m &= m - 1) {
      const int bit = std::countr_zero(m);
      const size_t below = static_cast<size_t>(std::popcount(word & ((uint64_t{1} << bit) - 1)));
      SetPoint(t, w * 64 + static_cast<size_t>(bit), r.points[rank + below]);
    }
    rank += static_cast<size_t>(std::popcount(word));
  }
}

void RepeatsWindow::LoadDocs(size_t t, DocId from, std::span<const uint64_t> rows) {
  const Repeats& r = *repeats_[t];
  size_t& at = at_[t];
  at = static_cast<size_t>(
      std::lower_bound(r.docs.begin() + static_cast<ptrdiff_t>(at), r.docs.end(), from) -
      r.docs.begin());
  const DocId end = from + static_cast<DocId>(rows.size() * 64);
  for (; at < r.docs.size() && r.docs[at] < end; ++at) {
    const size_t i = r.docs[at] - from;
    const uint64_t bit = uint64_t{1} << (i % 64);
    if ((rows[i / 64] & bit) == 0) continue;
    repeated_[i / 64] |= bit;
    by_word_[t * words_ + i / 64] |= bit;
    SetPoint(t, i, r.points[at]);
  }
}

void RepeatsWindow::SetPoint(size_t t, size_t i, const RepeatPoint& p) {
  tfs_[t * window_ + i] = p.tf;
  lengths_[i] = p.length;
  bands_[i] = p.band;
}

const Repeats* PairChampions::RepeatsOf(std::string_view word) const {
  const auto it = rank_.find(AsAbsl(word));
  return it == rank_.end() ? nullptr : &repeats_[it->second];
}

const PairChampionList* PairChampions::Find(std::string_view a, std::string_view b,
                                            bool* swapped) const {
  const auto ia = rank_.find(AsAbsl(a)), ib = rank_.find(AsAbsl(b));
  if (ia == rank_.end() || ib == rank_.end() || ia->second == ib->second) return nullptr;
  *swapped = ib->second < ia->second;
  const size_t first = std::min(ia->second, ib->second), second = std::max(ia->second, ib->second);
  return &lists_[first * words_ + second];
}

std::vector<std::string> PairWords(DocId rows,
                                   std::vector<std::pair<uint32_t, std::string>> doc_freqs) {
  const uint64_t least = std::max<uint64_t>(kPairWordMinPostings,
                                            (uint64_t{rows} + kPairWordShare - 1) / kPairWordShare);
  std::erase_if(doc_freqs, [&](const auto& e) { return e.first < least; });
  std::sort(doc_freqs.begin(), doc_freqs.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> words;
  for (size_t i = 0; i < doc_freqs.size() && i < kMaxPairWords; ++i) {
    words.push_back(std::move(doc_freqs[i].second));
  }
  return words;
}

namespace {

// Keeps the rows of every pair of `lists` (n words, the pair (i, j) at i * n + j) that has few
// enough of them (kPairRowsShare): a second pass over the words' lists, a window at a time,
// once the first has counted every pair's rows. False if cancelled.
bool KeepPairRows(const Segment& segment, DocId rows, std::span<const std::string> words,
                  std::vector<PairChampionList>& lists, const std::atomic<bool>* cancel) {
  const size_t n = words.size();
  std::vector<std::pair<size_t, size_t>> kept;  // (i, j)
  std::vector<std::unique_ptr<PostingCursor>> cursors(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const uint64_t rarer = std::min(segment.DocFreq(words[i]), segment.DocFreq(words[j]));
      const uint64_t matches = lists[i * n + j].matches;
      if (matches == 0 || matches * kPairRowsShare > rarer) continue;
      kept.emplace_back(i, j);
      for (size_t w : {i, j}) {
        if (cursors[w] == nullptr) cursors[w] = segment.OpenTerm(words[w], rows);
      }
    }
  }
  // A list that cannot be read (a damaged segment: OpenTerm says so) keeps its pairs' rows
  // unknown rather than empty.
  std::erase_if(kept, [&](const auto& p) {
    return cursors[p.first] == nullptr || cursors[p.second] == nullptr;
  });
  if (kept.empty()) return true;
  std::vector<PackedDocs::Writer> writers(kept.size());
  std::vector<uint64_t> bits(n * kWindowWords);  // word w's window at [w * kWindowWords]
  for (DocId from = 0; from < rows; from += std::min(kWindow, rows - from)) {
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return false;
    const DocId end = from + std::min(kWindow, rows - from);
    for (size_t w = 0; w < n; ++w) {
      if (cursors[w] == nullptr) continue;
      uint64_t* window = bits.data() + w * kWindowWords;
      std::fill_n(window, kWindowWords, uint64_t{0});
      if (cursors[w]->doc() < end) cursors[w]->FillBits(from, end, window);
    }
    for (size_t k = 0; k < kept.size(); ++k) {
      const uint64_t* a = bits.data() + kept[k].first * kWindowWords;
      const uint64_t* b = bits.data() + kept[k].second * kWindowWords;
      for (size_t w = 0; w < kWindowWords; ++w) {
        for (uint64_t m = a[w] & b[w]; m != 0; m &= m - 1) {
          writers[k].Add(from + static_cast<DocId>(w * 64 + std::countr_zero(m)));
        }
      }
    }
  }
  for (size_t k = 0; k < kept.size(); ++k) {
    lists[kept[k].first * n + kept[k].second].rows = std::move(writers[k]).Finish();
  }
  return true;
}

}  // namespace

std::unique_ptr<PairChampions> BuildPairChampions(const Segment& segment, DocId rows,
                                                  std::span<const std::string> words,
                                                  const std::atomic<bool>* cancel) {
  const size_t n = words.size();
  if (n < 2 || rows == 0) return nullptr;
  const Columns& c = segment.columns();
  const double avg_length = static_cast<double>(segment.TotalLength()) / rows;
  std::vector<WindowList> lists(n);
  for (size_t i = 0; i < n; ++i) {
    WindowList& l = lists[i];
    const double df = segment.DocFreq(words[i]);
    l.idf = std::log(1.0 + (rows - df + 0.5) / (df + 0.5));
    for (uint32_t tf = 1; tf <= kTableTfs; ++tf) {
      for (uint32_t length = 0; length < kTableLengths; ++length) {
        l.text[(tf - 1) * kTableLengths + length] = l.idf * SelectionText(tf, length, avg_length);
      }
    }
    l.cursor = segment.OpenTerm(words[i], rows);
  }
  std::vector<double> popularity(kPopularityTable);
  for (uint32_t likes = 0; likes < kPopularityTable; ++likes) {
    popularity[likes] = SelectionPopularity(likes);
  }
  std::vector<PairSelector> selectors(n * n);  // (i, j) at i * n + j, for i < j
  std::vector<uint64_t> matches(n * n);
  std::vector<uint16_t> lengths(kWindow);
  std::vector<uint32_t> likes(kWindow);
  std::vector<Repeats> repeats(n);
  for (DocId from = 0; from < rows; from += std::min(kWindow, rows - from)) {
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return nullptr;
    const DocId end = from + std::min(kWindow, rows - from);
    for (WindowList& l : lists) l.Read(from, end);
    for (DocId d = from; d < end; ++d) {
      lengths[d - from] = c.length(d);
      likes[d - from] = c.BaseLikes(d);
    }
    for (size_t i = 0; i < n; ++i) lists[i].AppendRepeats(from, lengths, likes, &repeats[i]);
    for (size_t i = 0; i < n; ++i) {
      if (!lists[i].any) continue;
      for (size_t j = i + 1; j < n; ++j) {
        if (!lists[j].any) continue;
        PairSelector& selector = selectors[i * n + j];
        for (size_t w = 0; w < kWindowWords; ++w) {
          const uint64_t both = lists[i].bits[w] & lists[j].bits[w];
          matches[i * n + j] += static_cast<uint64_t>(std::popcount(both));
          for (uint64_t m = both; m != 0; m &= m - 1) {
            const auto at = static_cast<DocId>(w * 64 + static_cast<size_t>(std::countr_zero(m)));
            Match match;
            match.doc = from + at;
            match.likes = likes[at];
            match.length = lengths[at];
            match.tf_first = lists[i].tfs[at];
            match.tf_second = lists[j].tfs[at];
            if (selector.Dominated(match.tf_first, match.tf_second, match.length, match.likes)) {
              continue;
            }
            match.text = lists[i].Text(match.tf_first, match.length, avg_length) +
                         lists[j].Text(match.tf_second, match.length, avg_length);
            match.popularity = match.likes < kPopularityTable ? popularity[match.likes]
                                                              : SelectionPopularity(match.likes);
            selector.Add(match);
          }
        }
      }
    }
  }
  std::vector<PairChampionList> out(n * n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      out[i * n + j] = selectors[i * n + j].Finish();
      out[i * n + j].matches = matches[i * n + j];
    }
  }
  if (!KeepPairRows(segment, rows, words, out, cancel)) return nullptr;
  for (Repeats& r : repeats) {
    r.Compact(rows);
    r.points.shrink_to_fit();
  }
  return std::make_unique<PairChampions>(std::vector<std::string>(words.begin(), words.end()),
                                         std::move(out), std::move(repeats));
}

}  // namespace tweetsearch::index
