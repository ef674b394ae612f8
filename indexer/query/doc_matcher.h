// DocMatcher: whether one tweet matches a plan, without an index.
//
// Streams (GET /v1/stream) hold standing queries and test each new tweet against those its
// terms select. The tweet is analyzed once into exactly the terms the index would give it (the
// analyzer's tokens with their positions, "from:<name>" and "lang:<code>"), and a plan is
// evaluated on them with the searcher's semantics: a phrase is its terms at their offsets from
// the first, AND needs every child and no excluded one, since:/until:/min_faves: restrict the
// whole query.
//
// Thread-safety: pure functions; an AnalyzedTweet is immutable once made.
#ifndef TWEETSEARCH_INDEXER_QUERY_DOC_MATCHER_H_
#define TWEETSEARCH_INDEXER_QUERY_DOC_MATCHER_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "common/strings.h"
#include "indexer/analysis/analyzer.h"
#include "indexer/index/segment.h"
#include "indexer/query/plan.h"

namespace tweetsearch::query {

class AnalyzedTweet {
 public:
  // InvalidArgument for text the index would refuse (ill-formed UTF-8).
  static absl::StatusOr<AnalyzedTweet> Make(const index::IndexDoc& doc,
                                            const analysis::Analyzer& analyzer) {
    return Make(doc.text, doc.user_name, doc.lang, doc.created_at_ms, doc.likes, analyzer);
  }
  static absl::StatusOr<AnalyzedTweet> Make(std::string_view text, std::string_view user_name,
                                            std::string_view lang, int64_t created_at_ms,
                                            uint32_t likes, const analysis::Analyzer& analyzer);

  // The positions of `term` in the tweet, ascending; empty if it does not occur.
  std::span<const uint32_t> positions(std::string_view term) const;
  bool has(std::string_view term) const { return terms_.contains(AsAbsl(term)); }
  // Every distinct term, in no particular order.
  template <typename F>
  void ForEachTerm(F&& f) const {
    for (const auto& [term, positions] : terms_) f(std::string_view(term));
  }

  int64_t created_at_ms() const { return created_at_ms_; }
  uint32_t likes() const { return likes_; }

 private:
  // Most terms occur once in a tweet: their position is kept inline.
  absl::flat_hash_map<std::string, absl::InlinedVector<uint32_t, 2>> terms_;
  int64_t created_at_ms_ = 0;
  uint32_t likes_ = 0;
};

// Whether `tweet` matches `plan` (its query and its since:/until:/min_faves: filters).
bool Matches(const Plan& plan, const AnalyzedTweet& tweet);
bool Matches(const PlanNode& node, const AnalyzedTweet& tweet);

// Terms of which every tweet matching `node` holds at least one: a term for a term, the
// rarest term for a phrase, the best child's set for an AND, the union of the children's for
// an OR. `rarity` ranks a term (smaller is rarer; the document frequency, say). Empty for a
// node that matches nothing.
std::vector<std::string> AnchorTerms(const PlanNode& node,
                                     const std::function<uint64_t(std::string_view)>& rarity);

}  // namespace tweetsearch::query

#endif  // TWEETSEARCH_INDEXER_QUERY_DOC_MATCHER_H_
