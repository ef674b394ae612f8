#include "indexer/query/parser.h"

#include <chrono>
#include <optional>

#include "absl/strings/ascii.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace tweetsearch::query {
namespace {

enum class TokenType { kWord, kQuoted, kOpen, kClose, kAnd, kOr, kNot, kMinus, kEnd };

struct Token {
  TokenType type;
  std::string_view text;
  size_t offset;
};

bool IsSpace(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }

// Splits the query into tokens. Words end at white space, parentheses and quotes.
absl::StatusOr<std::vector<Token>> Lex(std::string_view q) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < q.size()) {
    const char c = q[i];
    if (IsSpace(c)) {
      ++i;
    } else if (c == '(') {
      tokens.push_back({TokenType::kOpen, q.substr(i, 1), i});
      ++i;
    } else if (c == ')') {
      tokens.push_back({TokenType::kClose, q.substr(i, 1), i});
      ++i;
    } else if (c == '"') {
      const size_t close = q.find('"', i + 1);
      if (close == std::string_view::npos) return QueryError("unterminated quote", i);
      tokens.push_back({TokenType::kQuoted, q.substr(i + 1, close - i - 1), i});
      i = close + 1;
    } else if (c == '-' && i + 1 < q.size() && !IsSpace(q[i + 1]) && q[i + 1] != ')' &&
               (i == 0 || IsSpace(q[i - 1]) || q[i - 1] == '(')) {
      tokens.push_back({TokenType::kMinus, q.substr(i, 1), i});
      ++i;
    } else {
      size_t end = i;
      while (end < q.size() && !IsSpace(q[end]) && q[end] != '(' && q[end] != ')' &&
             q[end] != '"') {
        ++end;
      }
      std::string_view word = q.substr(i, end - i);
      TokenType type = TokenType::kWord;
      if (word == "AND") type = TokenType::kAnd;
      if (word == "OR") type = TokenType::kOr;
      if (word == "NOT") type = TokenType::kNot;
      tokens.push_back({type, word, i});
      i = end;
    }
  }
  tokens.push_back({TokenType::kEnd, {}, q.size()});
  return tokens;
}

std::optional<int64_t> ParseDateMillis(std::string_view s) {
  // YYYY-MM-DD, UTC midnight.
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return std::nullopt;
  int parts[3] = {0, 0, 0};
  const size_t starts[3] = {0, 5, 8}, lengths[3] = {4, 2, 2};
  for (int p = 0; p < 3; ++p) {
    for (size_t k = 0; k < lengths[p]; ++k) {
      const char d = s[starts[p] + k];
      if (!absl::ascii_isdigit(static_cast<unsigned char>(d))) return std::nullopt;
      parts[p] = parts[p] * 10 + (d - '0');
    }
  }
  const std::chrono::year_month_day ymd{std::chrono::year{parts[0]},
                                        std::chrono::month{static_cast<unsigned>(parts[1])},
                                        std::chrono::day{static_cast<unsigned>(parts[2])}};
  if (!ymd.ok()) return std::nullopt;
  const auto days = std::chrono::sys_days{ymd}.time_since_epoch();
  return std::chrono::duration_cast<std::chrono::milliseconds>(days).count();
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const QueryLimits& limits)
      : tokens_(std::move(tokens)), limits_(limits) {}

  absl::StatusOr<QueryNode> ParseQuery() {
    absl::StatusOr<QueryNode> node = ParseOr(0);
    if (!node.ok()) return node;
    if (Peek().type == TokenType::kClose) return QueryError("unbalanced ')'", Peek().offset);
    if (Peek().type != TokenType::kEnd) return QueryError("unexpected text", Peek().offset);
    return node;
  }

 private:
  const Token& Peek() const { return tokens_[pos_]; }
  const Token& Take() { return tokens_[pos_++]; }

  absl::StatusOr<QueryNode> ParseOr(size_t depth) {
    absl::StatusOr<QueryNode> first = ParseAnd(depth);
    if (!first.ok() || Peek().type != TokenType::kOr) return first;
    QueryNode node{QueryNode::Kind::kOr, "", 0, first->offset, {}};
    node.children.push_back(*std::move(first));
    while (Peek().type == TokenType::kOr) {
      const Token& op = Take();
      if (StartsOperand(Peek().type) == false)
        return QueryError("OR needs a term after it", op.offset);
      absl::StatusOr<QueryNode> next = ParseAnd(depth);
      if (!next.ok()) return next;
      node.children.push_back(*std::move(next));
    }
    return node;
  }

  static bool StartsOperand(TokenType t) {
    return t == TokenType::kWord || t == TokenType::kQuoted || t == TokenType::kOpen ||
           t == TokenType::kNot || t == TokenType::kMinus;
  }

  absl::StatusOr<QueryNode> ParseAnd(size_t depth) {
    if (!StartsOperand(Peek().type)) {
      if (Peek().type == TokenType::kEnd) {
        // "(((" ends inside parentheses: the innermost one is what is wrong.
        if (!open_parens_.empty()) return QueryError("unbalanced '('", open_parens_.back());
        return QueryError("expected a term", Peek().offset);
      }
      if (Peek().type == TokenType::kClose) return QueryError("unbalanced ')'", Peek().offset);
      return QueryError(StrCat("'", Peek().text, "' needs a term before it"), Peek().offset);
    }
    QueryNode node{QueryNode::Kind::kAnd, "", 0, Peek().offset, {}};
    while (true) {
      if (Peek().type == TokenType::kAnd) {
        const Token& op = Take();
        if (!StartsOperand(Peek().type)) return QueryError("AND needs a term after it", op.offset);
      }
      if (!StartsOperand(Peek().type)) break;
      absl::StatusOr<QueryNode> child = ParseUnary(depth);
      if (!child.ok()) return child;
      node.children.push_back(*std::move(child));
    }
    if (node.children.size() == 1) return std::move(node.children[0]);
    return node;
  }

  absl::StatusOr<QueryNode> ParseUnary(size_t depth) {
    if (depth >= limits_.max_depth) {
      return QueryError(StrCat("query nests deeper than ", limits_.max_depth, " levels"),
                        Peek().offset);
    }
    if (Peek().type == TokenType::kNot || Peek().type == TokenType::kMinus) {
      const Token& op = Take();
      if (op.type == TokenType::kNot && !StartsOperand(Peek().type)) {
        return QueryError("NOT needs a term after it", op.offset);
      }
      absl::StatusOr<QueryNode> child =
          op.type == TokenType::kNot ? ParseUnary(depth + 1) : ParsePrimary(depth + 1);
      if (!child.ok()) return child;
      QueryNode node{QueryNode::Kind::kNot, "", 0, op.offset, {}};
      node.children.push_back(*std::move(child));
      return node;
    }
    return ParsePrimary(depth);
  }

  absl::StatusOr<QueryNode> ParsePrimary(size_t depth) {
    const Token& t = Take();
    switch (t.type) {
      case TokenType::kOpen: {
        if (Peek().type == TokenType::kClose) return QueryError("empty parentheses", t.offset);
        open_parens_.push_back(t.offset);
        absl::StatusOr<QueryNode> inner = ParseOr(depth + 1);
        if (!inner.ok()) return inner;
        if (Peek().type != TokenType::kClose) return QueryError("unbalanced '('", t.offset);
        open_parens_.pop_back();
        Take();
        return inner;
      }
      case TokenType::kQuoted:
        return Leaf(QueryNode::Kind::kPhrase, t.text, t.offset);
      case TokenType::kWord:
        return Word(t);
      default:
        return QueryError(StrCat("unexpected '", t.text, "'"), t.offset);
    }
  }

  absl::StatusOr<QueryNode> Leaf(QueryNode::Kind kind, std::string_view text, size_t offset) {
    if (++terms_ > limits_.max_terms) {
      return QueryError(StrCat("query has more than ", limits_.max_terms, " terms"), offset);
    }
    return QueryNode{kind, std::string(text), 0, offset, {}};
  }

  absl::StatusOr<QueryNode> Word(const Token& t) {
    const size_t colon = t.text.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Leaf(QueryNode::Kind::kWord, t.text, t.offset);
    }
    const std::string name = absl::AsciiStrToLower(AsAbsl(t.text.substr(0, colon)));
    const std::string_view value = t.text.substr(colon + 1);
    const size_t value_offset = t.offset + colon + 1;
    const bool is_operator = name == "from" || name == "lang" || name == "since" ||
                             name == "until" || name == "min_faves";
    if (!is_operator) return Leaf(QueryNode::Kind::kWord, t.text, t.offset);  // "re:", URLs...
    if (value.empty()) return QueryError(StrCat(name, ": needs a value"), value_offset);
    if (name == "from") {
      std::string_view user = value.starts_with('@') ? value.substr(1) : value;
      for (char c : user) {
        if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
          return QueryError("from: takes a user name of letters, digits and '_'", value_offset);
        }
      }
      if (user.empty()) return QueryError("from: needs a user name", value_offset);
      return Leaf(QueryNode::Kind::kFrom, user, t.offset);
    }
    if (name == "lang") {
      if (value.size() > 8)
        return QueryError("lang: takes a language code such as 'en'", value_offset);
      for (char c : value) {
        if (!absl::ascii_isalpha(static_cast<unsigned char>(c)) && c != '-') {
          return QueryError("lang: takes a language code such as 'en'", value_offset);
        }
      }
      return Leaf(QueryNode::Kind::kLang, value, t.offset);
    }
    absl::StatusOr<QueryNode> node = Leaf(QueryNode::Kind::kWord, "", t.offset);
    if (!node.ok()) return node;
    if (name == "min_faves") {
      int64_t n = 0;
      for (char c : value) {
        if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) || n > 4'000'000'000) {
          return QueryError("min_faves: takes a whole number up to 4000000000", value_offset);
        }
        n = n * 10 + (c - '0');
      }
      if (n > 4'000'000'000) {
        return QueryError("min_faves: takes a whole number up to 4000000000", value_offset);
      }
      node->kind = QueryNode::Kind::kMinFaves;
      node->value = n;
      return node;
    }
    std::optional<int64_t> millis = ParseDateMillis(value);
    if (!millis) return QueryError(StrCat(name, ": takes a date as YYYY-MM-DD"), value_offset);
    node->kind = name == "since" ? QueryNode::Kind::kSince : QueryNode::Kind::kUntil;
    node->value = *millis;
    return node;
  }

  std::vector<Token> tokens_;
  const QueryLimits& limits_;
  size_t pos_ = 0;
  std::vector<size_t> open_parens_;  // offsets of the '(' being parsed, outermost first
  size_t terms_ = 0;
};

}  // namespace

absl::StatusOr<QueryNode> Parse(std::string_view query, const QueryLimits& limits) {
  if (query.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        StrCat("query is ", query.size(), " bytes; at most ", limits.max_bytes, " are allowed"));
  }
  if (absl::Status valid = ValidateUtf8(query); !valid.ok()) {
    return absl::InvalidArgumentError(StrCat("query is not UTF-8: ", AsStd(valid.message())));
  }
  absl::StatusOr<std::vector<Token>> tokens = Lex(query);
  if (!tokens.ok()) return tokens.status();
  if (tokens->size() == 1) return absl::InvalidArgumentError("query is empty");
  return Parser(*std::move(tokens), limits).ParseQuery();
}

std::string ToString(const QueryNode& node) {
  using Kind = QueryNode::Kind;
  switch (node.kind) {
    case Kind::kAnd:
    case Kind::kOr:
    case Kind::kNot: {
      std::string out = node.kind == Kind::kAnd ? "(AND" : node.kind == Kind::kOr ? "(OR" : "(NOT";
      for (const QueryNode& child : node.children) StrAppend(&out, " ", ToString(child));
      return out + ")";
    }
    case Kind::kWord:
      return StrCat("'", node.text, "'");
    case Kind::kPhrase:
      return StrCat("\"", node.text, "\"");
    case Kind::kFrom:
      return StrCat("from:", node.text);
    case Kind::kLang:
      return StrCat("lang:", node.text);
    case Kind::kSince:
      return StrCat("since:", node.value);
    case Kind::kUntil:
      return StrCat("until:", node.value);
    case Kind::kMinFaves:
      return StrCat("min_faves:", node.value);
  }
  return "?";
}

absl::Status QueryError(std::string_view what, size_t offset) {
  return absl::InvalidArgumentError(StrCat(what, " at byte ", offset));
}

}  // namespace tweetsearch::query
