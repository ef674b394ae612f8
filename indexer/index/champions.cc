#include "indexer/index/champions.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/container/flat_hash_set.h"

namespace tweetsearch::index {
namespace {

// The score's parameters the choice assumes (query/scoring.h's defaults). Only which postings
// are champions depends on them, never a result: the rest's skyline bounds them under any.
constexpr double kK1 = 1.2, kB = 0.75, kLikesReference = 10000;
// Text is weighed against popularity at these multiples of the term's idf in the segment (the
// query's idf, average length and weights differ; recency and filters leave popularity more
// or less room).
constexpr std::array<double, 4> kTextWeights = {0.5, 1, 2, 4};
// Points of the rest are kept per (tf, length): tfs 1 to kExactTfs apart, larger ones together.
constexpr uint32_t kExactTfs = 7;
constexpr uint32_t kLengths = 256;

double Text(uint32_t tf, uint32_t length, double avg_length) {
  const double norm = kK1 * (1.0 - kB + kB * length / avg_length);
  return tf * (kK1 + 1.0) / (tf + norm);
}

double Popularity(uint32_t likes) {
  return std::min(1.0, std::log1p(static_cast<double>(likes)) / std::log1p(kLikesReference));
}

// The indices of the `n` postings with the largest keys (ties broken arbitrarily), kept in a
// min-heap of (key, index) while the postings stream by.
class TopIndices {
 public:
  explicit TopIndices(size_t n) : n_(n) { heap_.reserve(n); }
  void Offer(double key, uint32_t index) {
    if (heap_.size() == n_) {
      if (key <= heap_.front().first) return;
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      heap_.pop_back();
    }
    heap_.emplace_back(key, index);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
  // The indices, the largest key first.
  std::vector<uint32_t> Ranked() const {
    std::vector<std::pair<double, uint32_t>> sorted = heap_;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    std::vector<uint32_t> out;
    for (const auto& [key, index] : sorted) out.push_back(index);
    return out;
  }

 private:
  const size_t n_;
  std::vector<std::pair<double, uint32_t>> heap_;
};

// The skyline of the postings not chosen: the most likes per (tf class, length), then the
// points no other beats.
std::vector<ImpactPoint> RestSkyline(std::span<const DocId> docs, std::span<const uint32_t> tfs,
                                     std::span<const uint16_t> lengths,
                                     std::span<const uint32_t> likes,
                                     std::span<const uint32_t> chosen) {
  constexpr int64_t kNone = -1;
  std::vector<int64_t> most_likes((kExactTfs + 1) * kLengths, kNone);
  std::array<uint32_t, kLengths> many_tf{};  // the largest tf above kExactTfs, per length
  size_t next_chosen = 0;
  for (uint32_t i = 0; i < docs.size(); ++i) {
    if (next_chosen < chosen.size() && chosen[next_chosen] == i) {
      ++next_chosen;
      continue;
    }
    const DocId d = docs[i];
    const uint32_t length = std::min<uint32_t>(lengths[d], kLengths - 1);
    const uint32_t tf_class = std::min(tfs[i], kExactTfs + 1);
    int64_t& most = most_likes[(tf_class - 1) * kLengths + length];
    most = std::max<int64_t>(most, likes[d]);
    if (tf_class > kExactTfs) many_tf[length] = std::max(many_tf[length], tfs[i]);
  }
  std::vector<ImpactPoint> points;
  for (uint32_t tf_class = 1; tf_class <= kExactTfs + 1; ++tf_class) {
    for (uint32_t length = 0; length < kLengths; ++length) {
      const int64_t most = most_likes[(tf_class - 1) * kLengths + length];
      if (most == kNone) continue;
      const uint32_t tf = tf_class > kExactTfs ? many_tf[length] : tf_class;
      points.push_back(ImpactPoint{static_cast<uint32_t>(most),
                                   static_cast<uint16_t>(std::min<uint32_t>(tf, UINT16_MAX)),
                                   static_cast<uint16_t>(length)});
    }
  }
  return Skyline(std::move(points));
}

template <typename T>
void AppendRaw(const T* values, size_t n, std::string* out) {
  out->append(reinterpret_cast<const char*>(values), n * sizeof(T));
}

}  // namespace

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

Champions SelectChampions(std::span<const DocId> docs, std::span<const uint32_t> tfs,
                          std::span<const uint16_t> lengths, std::span<const uint32_t> likes,
                          double avg_length) {
  Champions out;
  const size_t n = docs.size();
  const uint32_t wanted = std::min<uint32_t>(kMaxChampions, static_cast<uint32_t>(n / 8));
  if (wanted == 0) return out;
  const double num_docs = static_cast<double>(lengths.size());
  const double idf = std::log(1.0 + (num_docs - n + 0.5) / (n + 0.5));
  std::vector<TopIndices> tops(kTextWeights.size(), TopIndices(wanted));
  std::array<double, kTextWeights.size()> weights;
  for (size_t w = 0; w < weights.size(); ++w) weights[w] = kTextWeights[w] * idf;
  // Popularity of the few like counts most tweets have, computed once.
  std::array<double, 1024> small_popularity;
  for (uint32_t l = 0; l < small_popularity.size(); ++l) small_popularity[l] = Popularity(l);
  for (uint32_t i = 0; i < n; ++i) {
    const DocId d = docs[i];
    const double text = Text(tfs[i], lengths[d], avg_length);
    const double pop =
        likes[d] < small_popularity.size() ? small_popularity[likes[d]] : Popularity(likes[d]);
    for (size_t w = 0; w < weights.size(); ++w) tops[w].Offer(weights[w] * text + pop, i);
  }
  // The weightings' rankings, taken in turns (the first of each, then the second, ...) until
  // `wanted` distinct postings are chosen: they mostly agree at the top.
  std::vector<std::vector<uint32_t>> ranked;
  for (const TopIndices& top : tops) ranked.push_back(top.Ranked());
  std::vector<uint32_t> chosen;
  absl::flat_hash_set<uint32_t> seen;
  for (size_t rank = 0; chosen.size() < wanted && rank < wanted; ++rank) {
    for (const std::vector<uint32_t>& r : ranked) {
      if (rank < r.size() && chosen.size() < wanted && seen.insert(r[rank]).second) {
        chosen.push_back(r[rank]);
      }
    }
  }
  std::sort(chosen.begin(), chosen.end());
  for (uint32_t i : chosen) {
    out.docs.push_back(docs[i]);
    out.tfs.push_back(static_cast<uint16_t>(std::min<uint32_t>(tfs[i], UINT16_MAX)));
  }
  out.rest = RestSkyline(docs, tfs, lengths, likes, chosen);
  return out;
}

void AppendChampions(const Champions& c, std::string* out) {
  const uint32_t counts[2] = {static_cast<uint32_t>(c.docs.size()),
                              static_cast<uint32_t>(c.rest.size())};
  AppendRaw(counts, 2, out);
  AppendRaw(c.docs.data(), c.docs.size(), out);
  AppendRaw(c.tfs.data(), c.tfs.size(), out);
  if (c.tfs.size() % 2 != 0) out->append(2, '\0');
  AppendRaw(c.rest.data(), c.rest.size(), out);
}

bool ReadChampions(const uint8_t* p, const uint8_t* end, uint32_t num_docs, Champions* out) {
  uint32_t counts[2];
  if (end - p < static_cast<ptrdiff_t>(sizeof(counts))) return false;
  std::memcpy(counts, p, sizeof(counts));
  const uint32_t n = counts[0], points = counts[1];
  // kExactTfs + 1 tf classes and kLengths lengths bound the skyline.
  if (n == 0 || n > kMaxChampions || points > (kExactTfs + 1) * kLengths) return false;
  const size_t tf_bytes = (size_t{n} * 2 + 3) / 4 * 4;
  const size_t bytes = sizeof(counts) + size_t{n} * 4 + tf_bytes + size_t{points} * 8;
  if (static_cast<size_t>(end - p) < bytes) return false;
  p += sizeof(counts);
  out->docs.resize(n);
  std::memcpy(out->docs.data(), p, size_t{n} * 4);
  p += size_t{n} * 4;
  out->tfs.resize(n);
  std::memcpy(out->tfs.data(), p, size_t{n} * 2);
  p += tf_bytes;
  out->rest.resize(points);
  std::memcpy(out->rest.data(), p, size_t{points} * 8);
  for (uint32_t i = 0; i < n; ++i) {
    if (out->docs[i] >= num_docs || (i > 0 && out->docs[i] <= out->docs[i - 1])) return false;
    if (out->tfs[i] == 0) return false;
  }
  return std::none_of(out->rest.begin(), out->rest.end(),
                      [](const ImpactPoint& q) { return q.tf == 0; });
}

}  // namespace tweetsearch::index
