// The best-match score (sort mode 1). docs/ranking.md explains the formula and its choices.
//
//   score(d) = Σ_{t in q, t matches d} idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·len(d)/avglen))
//            + w_pop · min(1, ln(1 + likes(d)) / ln(1 + likes_ref))
//            + w_rec · 2^(−max(0, now − created_at(d)) / half_life)
//   idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// N, df and avglen are taken over the query's snapshot of the whole index (every segment), so
// scores from different segments compare. Sums over the query's terms always run in the
// query's own order, so the same document gets the same score, to the bit, whatever pruning
// did; page tokens rely on that.
#ifndef TWEETSEARCH_INDEXER_QUERY_SCORING_H_
#define TWEETSEARCH_INDEXER_QUERY_SCORING_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tweetsearch::query {

struct ScoringParams {
  double k1 = 1.2;                                  // BM25 term-frequency saturation
  double b = 0.75;                                  // BM25 length normalization
  double popularity_weight = 1.0;                   // w_pop: at most this much for likes
  double likes_reference = 10000;                   // likes_ref: likes that earn the whole w_pop
  double recency_weight = 1.0;                      // w_rec: at most this much for freshness
  double recency_half_life_ms = 6.0 * 3600 * 1000;  // the freshness bonus halves every 6 hours
};

inline double Idf(uint64_t num_docs, uint64_t doc_freq) {
  const double n = static_cast<double>(num_docs), df = static_cast<double>(doc_freq);
  return std::log(1.0 + (n - df + 0.5) / (df + 0.5));
}

// BM25's term-frequency part. Increasing in tf, decreasing in length.
inline double TfPart(const ScoringParams& p, double tf, double length, double avg_length) {
  const double norm = p.k1 * (1.0 - p.b + p.b * length / avg_length);
  return tf * (p.k1 + 1.0) / (tf + norm);
}

// The popularity part of StaticScore, before its weight. Increasing in likes.
inline double Popularity(const ScoringParams& p, uint32_t likes) {
  return std::min(1.0, std::log1p(static_cast<double>(likes)) / std::log1p(p.likes_reference));
}

// The recency part of StaticScore, before its weight. Increasing in created_at_ms.
inline double Recency(const ScoringParams& p, int64_t created_at_ms, int64_t now_ms) {
  // In double: any two int64 times subtract without overflow.
  const double age =
      std::max(0.0, static_cast<double>(now_ms) - static_cast<double>(created_at_ms));
  return std::exp2(-age / p.recency_half_life_ms);
}

inline double StaticScore(const ScoringParams& p, uint32_t likes, int64_t created_at_ms,
                          int64_t now_ms) {
  return p.popularity_weight * Popularity(p, likes) +
         p.recency_weight * Recency(p, created_at_ms, now_ms);
}

// An upper bound of StaticScore over all documents.
inline double MaxStaticScore(const ScoringParams& p) {
  return p.popularity_weight + p.recency_weight;
}

}  // namespace tweetsearch::query

#endif  // TWEETSEARCH_INDEXER_QUERY_SCORING_H_
