// Parser for the query language.
//
//   query    := or_expr
//   or_expr  := and_expr ( "OR" and_expr )*
//   and_expr := unary ( ["AND"] unary )*          juxtaposition is AND
//   unary    := "NOT" unary | "-" primary | primary
//   primary  := "(" or_expr ")" | "\"quoted phrase\"" | operator | word
//   operator := from:NAME | lang:CODE | since:YYYY-MM-DD | until:YYYY-MM-DD | min_faves:N
//
// AND, OR and NOT are operators only in capitals ("to be or not to be" is six words). A word
// may be a #hashtag, @mention or $cashtag; words and phrases are analyzed later, by the
// planner, with the index's analyzer.
//
// Every rejection is an InvalidArgument status whose message names the problem and its byte
// offset in the query ("unbalanced ')' at byte 7"); the parser never throws and never crashes
// on any input, which a fuzz test checks.
//
// Thread-safety: pure functions.
#ifndef TWEETSEARCH_INDEXER_QUERY_PARSER_H_
#define TWEETSEARCH_INDEXER_QUERY_PARSER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tweetsearch::query {

struct QueryLimits {
  size_t max_bytes = 1024;  // longer queries are rejected
  size_t max_terms = 64;    // words, phrases and operators together
  size_t max_depth = 16;    // nesting of parentheses and NOT
};

struct QueryNode {
  enum class Kind {
    kAnd,       // children all match
    kOr,        // any child matches
    kNot,       // one child, which must not match
    kWord,      // text: one word as typed (analyzed later)
    kPhrase,    // text: the words between quotes
    kFrom,      // text: user name
    kLang,      // text: language code
    kSince,     // value: Unix milliseconds, inclusive
    kUntil,     // value: Unix milliseconds, exclusive
    kMinFaves,  // value: minimum likes
  };
  Kind kind = Kind::kAnd;
  std::string text;
  int64_t value = 0;
  size_t offset = 0;  // byte offset in the query, for error messages
  std::vector<QueryNode> children;
};

// Parses `query`. InvalidArgument (with a byte offset) for anything malformed or over limits.
absl::StatusOr<QueryNode> Parse(std::string_view query, const QueryLimits& limits = {});

// Debug form, e.g. (AND "a" (OR "b" #c) (NOT "d")). Stable: tests compare it.
std::string ToString(const QueryNode& node);

// The InvalidArgument status of a rejected query: "<what> at byte <offset>".
absl::Status QueryError(std::string_view what, size_t offset);

}  // namespace tweetsearch::query

#endif  // TWEETSEARCH_INDEXER_QUERY_PARSER_H_
