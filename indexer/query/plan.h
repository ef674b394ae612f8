// Planner: turns a parsed query into index terms with the index's analyzer.
//
// A word that analyzes to one token is a term; to several ("e-mail", a Chinese word) a phrase of
// them; to none (punctuation, or a stop word when the index drops them) nothing. from: and lang:
// become unscored filter terms ("from:alice", "lang:en"). since:, until: and min_faves: are
// column filters and must restrict the whole query: inside OR or NOT they are rejected. NOT
// needs a positive sibling in an AND: "a -b" is fine, "-b" and "a OR -b" are not.
//
// Thread-safety: pure functions.
#ifndef TWEETSEARCH_INDEXER_QUERY_PLAN_H_
#define TWEETSEARCH_INDEXER_QUERY_PLAN_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "indexer/analysis/analyzer.h"
#include "indexer/query/parser.h"

namespace tweetsearch::query {

struct PlanNode {
  enum class Kind {
    kTerm,     // term: one index term
    kPhrase,   // phrase: terms at the given offsets from the first
    kAnd,      // all children, none of `excluded`
    kOr,       // any child
    kNothing,  // matches no tweet (as "a -a")
  };
  Kind kind = Kind::kTerm;
  std::string term;
  bool scored = true;  // false for from:/lang: terms, which filter but do not score
  std::vector<std::string> phrase_terms;
  std::vector<uint32_t> phrase_offsets;  // offsets[0] == 0, ascending
  std::vector<PlanNode> children;
  std::vector<PlanNode> excluded;
};

struct Plan {
  PlanNode root;
  int64_t since_ms = std::numeric_limits<int64_t>::min();  // created_at >= since_ms
  int64_t until_ms = std::numeric_limits<int64_t>::max();  // created_at < until_ms, if set
  uint32_t min_likes = 0;

  // The default until_ms means "no upper limit" (so a tweet stamped at the largest time still
  // matches).
  bool has_until() const { return until_ms != std::numeric_limits<int64_t>::max(); }
};

// InvalidArgument when the query has nothing to search for or misplaces NOT or a filter.
absl::StatusOr<Plan> MakePlan(const QueryNode& query, const analysis::Analyzer& analyzer);

// Parse + MakePlan.
absl::StatusOr<Plan> PlanQuery(std::string_view query, const analysis::Analyzer& analyzer,
                               const QueryLimits& limits = {});

std::string ToString(const PlanNode& node);

}  // namespace tweetsearch::query

#endif  // TWEETSEARCH_INDEXER_QUERY_PLAN_H_
