#include "indexer/index/champions.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace tweetsearch::index {
namespace {

constexpr double kK1 = 1.2, kB = 0.75, kLikesReference = 10000;
// Cells of postings: tfs 1 to kSmallTfs in an array, larger ones in a map; lengths from 255 on
// share cells (as 255, a lower bound).
constexpr uint32_t kSmallTfs = 16;
constexpr uint32_t kSmallLengths = 256;

template <typename T>
void AppendRaw(const T* values, size_t n, std::string* out) {
  if (n == 0) return;  // `values` may be null
  out->append(reinterpret_cast<const char*>(values), n * sizeof(T));
}

}  // namespace

double SelectionText(uint32_t tf, uint32_t length, double avg_length) {
  const double norm = kK1 * (1.0 - kB + kB * length / avg_length);
  return tf * (kK1 + 1.0) / (tf + norm);
}

double SelectionPopularity(uint32_t likes) {
  return std::min(1.0, std::log1p(static_cast<double>(likes)) / std::log1p(kLikesReference));
}

std::vector<ImpactPoint> Skyline(std::vector<ImpactPoint> points) {
  // Any point that beats or matches another comes before it in this order, so each point
  // need only be compared with the ones already kept.
  std::sort(points.begin(), points.end(), [](const ImpactPoint& a, const ImpactPoint& b) {
    if (a.tf != b.tf) return a.tf > b.tf;
    if (a.length != b.length) return a.length < b.length;
    return a.likes > b.likes;
  });
  std::vector<ImpactPoint> kept;
  for (const ImpactPoint& p : points) {
    const bool beaten = std::any_of(kept.begin(), kept.end(), [&](const ImpactPoint& q) {
      return q.tf >= p.tf && q.length <= p.length && q.likes >= p.likes;
    });
    if (!beaten) kept.push_back(p);
  }
  return kept;
}

ChampionSelector::ChampionSelector(std::span<const uint16_t> lengths,
                                   std::span<const uint32_t> likes, double avg_length)
    : lengths_(lengths),
      likes_(likes),
      avg_length_(avg_length),
      small_(kSmallTfs * kSmallLengths),
      gates_(kSmallTfs * kSmallLengths, -1) {}

ChampionSelector::Cell& ChampionSelector::CellOf(uint32_t tf, uint32_t length) {
  if (tf <= kSmallTfs) {
    const uint32_t at = (tf - 1) * kSmallLengths + length;
    Cell& cell = small_[at];
    if (cell.top.empty() && cell.others_likes < 0) touched_.push_back(at);
    return cell;
  }
  return large_[std::min<uint32_t>(tf, UINT16_MAX) << 8 | length];
}

void ChampionSelector::Add(DocId doc, uint32_t tf) {
  ++count_;
  const uint32_t likes = likes_[doc];
  const uint32_t length = std::min<uint32_t>(lengths_[doc], kSmallLengths - 1);
  if (tf <= kSmallTfs) {
    // Most postings of a long list fall short of their full cell: decided from the compact
    // gates, without reading the cell's heap.
    const uint32_t at = (tf - 1) * kSmallLengths + length;
    if (static_cast<int64_t>(likes) <= gates_[at]) {
      small_[at].others_likes = std::max<int64_t>(small_[at].others_likes, likes);
      return;
    }
    gates_[at] = Offer(CellOf(tf, length), likes, doc);
    return;
  }
  Offer(CellOf(tf, length), likes, doc);
}

int64_t ChampionSelector::Offer(Cell& cell, uint32_t likes, DocId doc) {
  std::vector<std::pair<uint32_t, DocId>>& top = cell.top;
  if (top.size() < kMaxChampions) {
    top.emplace_back(likes, doc);
    if (top.size() < kMaxChampions) return -1;
    std::make_heap(top.begin(), top.end(), std::greater<>());
    return top.front().first;
  }
  uint32_t dropped = likes;
  if (likes > top.front().first) {
    dropped = top.front().first;
    std::pop_heap(top.begin(), top.end(), std::greater<>());
    top.back() = {likes, doc};
    std::push_heap(top.begin(), top.end(), std::greater<>());
  }
  cell.others_likes = std::max<int64_t>(cell.others_likes, dropped);
  return top.front().first;
}

void ChampionSelector::Reset() {
  for (uint32_t at : touched_) {  // keeping their memory for the next list
    small_[at].top.clear();
    small_[at].others_likes = -1;
    gates_[at] = -1;
  }
  touched_.clear();
  large_.clear();
  count_ = 0;
}

std::vector<ChampionSelector::Candidate> ChampionSelector::Candidates() const {
  std::vector<Candidate> out;
  auto add = [&](const Cell& cell, uint32_t tf, uint32_t length) {
    for (const auto& [likes, doc] : cell.top) {
      out.push_back({doc, likes, static_cast<uint16_t>(tf), static_cast<uint16_t>(length)});
    }
  };
  for (uint32_t at : touched_) add(small_[at], at / kSmallLengths + 1, at % kSmallLengths);
  for (const auto& [key, cell] : large_) add(cell, key >> 8, key & 0xFF);
  return out;
}

Champions ChampionSelector::Finish() {
  Champions out;
  const auto wanted = static_cast<uint32_t>(std::min<uint64_t>(kMaxChampions, count_ / 8));
  if (wanted == 0) {
    Reset();
    return out;
  }
  const std::vector<Candidate> candidates = Candidates();
  const double num_docs = static_cast<double>(lengths_.size());
  const double n = static_cast<double>(count_);
  const double idf = std::log(1.0 + (num_docs - n + 0.5) / (n + 0.5));
  // Each weighting's first `wanted` candidates, best first; then taken in turns (the first
  // of each, then the second, ...) until `wanted` distinct ones are chosen: they mostly
  // agree at the top.
  std::vector<double> text(candidates.size()), popularity(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    text[i] = idf * SelectionText(candidates[i].tf, candidates[i].length, avg_length_);
    popularity[i] = SelectionPopularity(candidates[i].likes);
  }
  std::vector<std::vector<uint32_t>> ranked;
  std::vector<std::pair<double, uint32_t>> keyed(candidates.size());
  for (double weight : kSelectionTextWeights) {
    for (uint32_t i = 0; i < candidates.size(); ++i) {
      keyed[i] = {weight * text[i] + popularity[i], i};
    }
    const size_t first = std::min<size_t>(wanted, keyed.size());
    const auto cut = keyed.begin() + static_cast<ptrdiff_t>(first);
    std::nth_element(keyed.begin(), cut, keyed.end(), std::greater<>());
    std::sort(keyed.begin(), cut, std::greater<>());
    std::vector<uint32_t>& r = ranked.emplace_back();
    for (size_t i = 0; i < first; ++i) r.push_back(keyed[i].second);
  }
  std::vector<bool> chosen(candidates.size(), false);
  std::vector<uint32_t> picked;
  for (size_t rank = 0; picked.size() < wanted && rank < wanted; ++rank) {
    for (const std::vector<uint32_t>& r : ranked) {
      if (rank < r.size() && picked.size() < wanted && !chosen[r[rank]]) {
        chosen[r[rank]] = true;
        picked.push_back(r[rank]);
      }
    }
  }
  std::sort(picked.begin(), picked.end(),
            [&](uint32_t a, uint32_t b) { return candidates[a].doc < candidates[b].doc; });
  for (uint32_t i : picked) {
    out.docs.push_back(candidates[i].doc);
    out.tfs.push_back(candidates[i].tf);
    out.lengths.push_back(
        static_cast<uint8_t>(std::min<uint32_t>(candidates[i].length, kChampionLongLength)));
    out.bands.push_back(static_cast<uint8_t>(LikesBand(candidates[i].likes)));
  }
  out.rest = RestSkyline(candidates, chosen);
  Reset();
  return out;
}

// The skyline of the postings not chosen: per cell, the most likes of its candidates not
// chosen and of the postings it did not keep.
std::vector<ImpactPoint> ChampionSelector::RestSkyline(const std::vector<Candidate>& candidates,
                                                       const std::vector<bool>& chosen) const {
  absl::flat_hash_map<uint32_t, int64_t> most;  // by tf << 8 | length
  auto raise = [&](uint32_t tf, uint32_t length, int64_t likes) {
    if (likes < 0) return;
    int64_t& m = most.try_emplace(tf << 8 | length, -1).first->second;
    m = std::max(m, likes);
  };
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!chosen[i]) raise(candidates[i].tf, candidates[i].length, candidates[i].likes);
  }
  for (uint32_t at : touched_)
    raise(at / kSmallLengths + 1, at % kSmallLengths, small_[at].others_likes);
  for (const auto& [key, cell] : large_) raise(key >> 8, key & 0xFF, cell.others_likes);
  std::vector<ImpactPoint> points;
  for (const auto& [key, likes] : most) {
    points.push_back(ImpactPoint{static_cast<uint32_t>(likes), static_cast<uint16_t>(key >> 8),
                                 static_cast<uint16_t>(key & 0xFF)});
  }
  return Skyline(std::move(points));
}

Champions SelectChampions(std::span<const DocId> docs, std::span<const uint32_t> tfs,
                          std::span<const uint16_t> lengths, std::span<const uint32_t> likes,
                          double avg_length) {
  ChampionSelector selector(lengths, likes, avg_length);
  for (size_t i = 0; i < docs.size(); ++i) selector.Add(docs[i], tfs[i]);
  return selector.Finish();
}

void AppendChampions(const Champions& c, std::string* out) {
  const bool points = !c.lengths.empty();
  const uint32_t counts[2] = {
      static_cast<uint32_t>(c.docs.size()) | (points ? kChampionsWithPoints : 0),
      static_cast<uint32_t>(c.rest.size())};
  AppendRaw(counts, 2, out);
  AppendRaw(c.docs.data(), c.docs.size(), out);
  AppendRaw(c.tfs.data(), c.tfs.size(), out);
  if (c.tfs.size() % 2 != 0) out->append(2, '\0');
  if (points) {
    AppendRaw(c.lengths.data(), c.lengths.size(), out);
    AppendRaw(c.bands.data(), c.bands.size(), out);
    out->append((4 - c.docs.size() * 2 % 4) % 4, '\0');
  }
  AppendRaw(c.rest.data(), c.rest.size(), out);
}

bool ReadChampions(const uint8_t* p, const uint8_t* end, uint32_t num_docs, Champions* out) {
  uint32_t counts[2];
  if (end - p < static_cast<ptrdiff_t>(sizeof(counts))) return false;
  std::memcpy(counts, p, sizeof(counts));
  const bool with_points = (counts[0] & kChampionsWithPoints) != 0;
  const uint32_t n = counts[0] & ~kChampionsWithPoints, points = counts[1];
  if (n == 0 || n > kMaxChampions || points > kMaxRestPoints) return false;
  const size_t tf_bytes = (size_t{n} * 2 + 3) / 4 * 4;
  const size_t point_bytes = with_points ? tf_bytes : 0;  // a length and a band each
  const size_t bytes = sizeof(counts) + size_t{n} * 4 + tf_bytes + point_bytes + size_t{points} * 8;
  if (static_cast<size_t>(end - p) < bytes) return false;
  p += sizeof(counts);
  out->docs.resize(n);
  std::memcpy(out->docs.data(), p, size_t{n} * 4);
  p += size_t{n} * 4;
  out->tfs.resize(n);
  std::memcpy(out->tfs.data(), p, size_t{n} * 2);
  p += tf_bytes;
  out->lengths.clear();
  out->bands.clear();
  if (with_points) {
    out->lengths.assign(p, p + n);
    out->bands.assign(p + n, p + 2 * size_t{n});
    p += point_bytes;
    for (const uint8_t band : out->bands) {
      if (band >= kLikesBands) return false;
    }
  }
  out->rest.resize(points);
  if (points > 0) std::memcpy(out->rest.data(), p, size_t{points} * 8);  // data() may be null
  for (uint32_t i = 0; i < n; ++i) {
    if (out->docs[i] >= num_docs || (i > 0 && out->docs[i] <= out->docs[i - 1])) return false;
    if (out->tfs[i] == 0) return false;
  }
  return std::none_of(out->rest.begin(), out->rest.end(),
                      [](const ImpactPoint& q) { return q.tf == 0; });
}

}  // namespace tweetsearch::index
