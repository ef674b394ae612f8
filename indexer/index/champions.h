// Champions: per long posting list of a sealed segment, the few postings that can score highest
// in best match, and a bound of every other posting's score, so that a query over a common
// word can rank those few and prove that nothing else can enter its top k (docs/ranking.md,
// "Champions").
//
// A posting's best-match score depends, besides the query's statistics, on its term
// frequency, its tweet's length, likes and age. Champions are chosen at seal and merge time
// from the first three (age is bounded per segment at query time): the postings that rank
// first under a few weightings of text against popularity. The rest are described by their
// skyline: the (tf, length, likes) points no other remaining posting beats in all three. Any
// score that grows with tf and likes and falls with length is largest, over the remaining
// postings, at one of those points, whatever the query's idf, average length or weights: the
// bound is exact to compute at query time, and the choice of champions only decides how often
// it suffices.
//
// Thread-safety: plain values.
#ifndef TWEETSEARCH_INDEXER_INDEX_CHAMPIONS_H_
#define TWEETSEARCH_INDEXER_INDEX_CHAMPIONS_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "indexer/index/segment.h"

namespace tweetsearch::index {

// A list gets champions from this many postings on. 1,024 rather than 2,048: in segments of
// 65,536 tweets, as indexed, one-word best match costs about a quarter less for 2% more list
// bytes (docs/benchmarks.md, "Champions for lists from 1,024 postings").
inline constexpr uint32_t kChampionMinPostings = 1024;
// At most this many champions per list.
inline constexpr uint32_t kMaxChampions = 256;
// At most this many points in a rest's skyline (a record claiming more is damaged).
inline constexpr uint32_t kMaxRestPoints = 1 << 16;

// A (term frequency, document length, likes) point; stored as is in segment files.
struct ImpactPoint {
  uint32_t likes = 0;   // as the segment file has them (Columns::BaseLikes)
  uint16_t tf = 0;      // exact
  uint16_t length = 0;  // a lower bound (lengths from 255 on are stored as 255)
};
static_assert(sizeof(ImpactPoint) == 8);

struct Champions {
  std::vector<DocId> docs;    // ascending
  std::vector<uint16_t> tfs;  // the term's frequency in each of docs
  // Each of docs' tweet length (kChampionLongLength: that many tokens or more) and likes band
  // as written (LikesBand of Columns::BaseLikes), so that a query bounds a champion without
  // reading the columns; both empty in a record written before they were kept.
  std::vector<uint8_t> lengths;
  std::vector<uint8_t> bands;
  std::vector<ImpactPoint> rest;  // the skyline of every other posting; empty if none is left
};
inline constexpr uint8_t kChampionLongLength = 255;

// Chooses the champions of one list at a time from its postings as they stream by, in
// memory that does not grow with the list: per (term frequency, length) cell of postings the
// kMaxChampions with the most likes (the first kMaxChampions under any weighting that grows
// with likes are among them, as all of a cell share their text score) and the most likes of
// the others.
class ChampionSelector {
 public:
  // For a segment whose tweets have lengths[d] and likes[d] (as written) and `avg_length`
  // tokens on average. The spans must outlive the selector.
  ChampionSelector(std::span<const uint16_t> lengths, std::span<const uint32_t> likes,
                   double avg_length);
  // The next posting of the list: DocId `doc` (ascending) holds the word `tf` times.
  void Add(DocId doc, uint32_t tf);
  // The champions of the postings added since the last Finish() or Reset() (none for fewer
  // than 8 postings), and the selector ready for the next list.
  Champions Finish();
  // Forgets the postings added (a list too short for champions).
  void Reset();

 private:
  struct Cell {
    std::vector<std::pair<uint32_t, DocId>> top;  // (likes, doc); a min-heap once full
    int64_t others_likes = -1;                    // the most likes of the postings not kept
  };
  struct Candidate {
    DocId doc;
    uint32_t likes;
    uint16_t tf, length;
  };
  Cell& CellOf(uint32_t tf, uint32_t length);
  // Offers a posting to `cell`; returns the likes a posting must beat to enter it from now on
  // (-1: any enters).
  static int64_t Offer(Cell& cell, uint32_t likes, DocId doc);
  std::vector<Candidate> Candidates() const;
  std::vector<ImpactPoint> RestSkyline(const std::vector<Candidate>& candidates,
                                       const std::vector<bool>& chosen) const;

  std::span<const uint16_t> lengths_;
  std::span<const uint32_t> likes_;
  double avg_length_;
  uint64_t count_ = 0;
  std::vector<Cell> small_;                    // tf 1 to kSmallTfs, by (tf - 1) * 256 + length
  std::vector<int64_t> gates_;                 // per cell of small_, what Offer() last answered
  std::vector<uint32_t> touched_;              // the cells of small_ this list used
  absl::flat_hash_map<uint32_t, Cell> large_;  // by tf << 8 | length, for larger tfs
};

// Chooses the champions of a whole list of `docs` (ascending) with frequencies `tfs` at once
// (a ChampionSelector fed with them).
Champions SelectChampions(std::span<const DocId> docs, std::span<const uint32_t> tfs,
                          std::span<const uint16_t> lengths, std::span<const uint32_t> likes,
                          double avg_length);

// The skyline of `points`: those no other point matches or beats in tf, length (shorter) and
// likes at once, in no particular order.
std::vector<ImpactPoint> Skyline(std::vector<ImpactPoint> points);

// How the selection weighs a posting (query/scoring.h's default parameters: only which
// postings are champions depends on them, never a result). BM25's frequency part of `tf` in a
// tweet of `length` tokens:
double SelectionText(uint32_t tf, uint32_t length, double avg_length);
// The popularity part of `likes`:
double SelectionPopularity(uint32_t likes);
// Text is weighed against popularity at these multiples of the term's idf in the segment (the
// query's idf, average length and weights differ; recency and filters leave popularity more
// or less room).
inline constexpr std::array<double, 4> kSelectionTextWeights = {0.5, 1, 2, 4};

// Set in a champion record's count when it keeps the champions' lengths and bands.
inline constexpr uint32_t kChampionsWithPoints = uint32_t{1} << 31;
// Appends `c` to `out` in the file's form: a count of champions (kChampionsWithPoints set in
// it when the lengths and bands are kept), a count of points, the DocIds, the tfs (padded to
// 4 bytes), then if kept the lengths and the bands (a byte each, padded to 4 bytes), and the
// points, all little-endian.
void AppendChampions(const Champions& c, std::string* out);
// Reads a record AppendChampions wrote at [p, end) into *out. False if it does not fit in the
// bytes, its DocIds do not ascend below `num_docs`, or a count is out of range.
bool ReadChampions(const uint8_t* p, const uint8_t* end, uint32_t num_docs, Champions* out);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_CHAMPIONS_H_
