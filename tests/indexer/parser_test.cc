#include "indexer/query/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tweetsearch::query {
namespace {

using ::testing::HasSubstr;

std::string P(std::string_view q) {
  absl::StatusOr<QueryNode> node = Parse(q);
  if (!node.ok()) return "ERROR: " + std::string(node.status().message());
  return ToString(*node);
}

TEST(ParserTest, ImplicitAndExplicitOperators) {
  EXPECT_EQ(P("cats dogs"), "(AND 'cats' 'dogs')");
  EXPECT_EQ(P("cats AND dogs"), "(AND 'cats' 'dogs')");
  EXPECT_EQ(P("cats OR dogs birds"), "(OR 'cats' (AND 'dogs' 'birds'))");
  EXPECT_EQ(P("(cats OR dogs) birds"), "(AND (OR 'cats' 'dogs') 'birds')");
  EXPECT_EQ(P("cats -dogs NOT birds"), "(AND 'cats' (NOT 'dogs') (NOT 'birds'))");
  EXPECT_EQ(P("to be or not to be"), "(AND 'to' 'be' 'or' 'not' 'to' 'be')");
  EXPECT_EQ(P("well-known x-y"), "(AND 'well-known' 'x-y')");
  EXPECT_EQ(P("-(a b) c"), "(AND (NOT (AND 'a' 'b')) 'c')");
}

TEST(ParserTest, PhrasesTagsAndOperators) {
  EXPECT_EQ(P("\"new york\" #nyc @mayor $SPY"), "(AND \"new york\" '#nyc' '@mayor' '$SPY')");
  EXPECT_EQ(P("from:Alice lang:es min_faves:10"), "(AND from:Alice lang:es min_faves:10)");
  EXPECT_EQ(P("from:@bob"), "from:bob");
  EXPECT_EQ(P("x since:2009-04-06 until:2009-04-07"),
            "(AND 'x' since:1238976000000 until:1239062400000)");
  EXPECT_EQ(P("re:subject http://x.com"), "(AND 're:subject' 'http://x.com')");
}

TEST(ParserTest, ErrorsSayWhatAndWhere) {
  EXPECT_THAT(P("(cats dogs"), HasSubstr("unbalanced '(' at byte 0"));
  EXPECT_THAT(P("cats dogs)"), HasSubstr("unbalanced ')' at byte 9"));
  EXPECT_THAT(P("((("), HasSubstr("unbalanced '(' at byte 2"));
  EXPECT_THAT(P("a (b (c"), HasSubstr("unbalanced '(' at byte 5"));
  EXPECT_THAT(P("a (b ("), HasSubstr("unbalanced '(' at byte 5"));
  EXPECT_THAT(P("cats OR"), HasSubstr("OR needs a term after it at byte 5"));
  EXPECT_THAT(P("OR cats"), HasSubstr("'OR' needs a term before it at byte 0"));
  EXPECT_THAT(P("a \"open"), HasSubstr("unterminated quote at byte 2"));
  EXPECT_THAT(P("since:2009-02-30"), HasSubstr("YYYY-MM-DD at byte 6"));
  EXPECT_THAT(P("min_faves:lots"), HasSubstr("whole number"));
  EXPECT_THAT(P("min_faves:99999999999999999999999"), HasSubstr("whole number"));
  EXPECT_THAT(P("from:a.b"), HasSubstr("user name"));
  EXPECT_THAT(P("lang:"), HasSubstr("needs a value"));
  EXPECT_THAT(P("()"), HasSubstr("empty parentheses"));
  EXPECT_THAT(P("   "), HasSubstr("empty"));
  EXPECT_THAT(P("a NOT"), HasSubstr("NOT needs a term"));
  EXPECT_THAT(P(std::string_view("a \xFF", 3)), HasSubstr("not UTF-8"));
}

TEST(ParserTest, LimitsAreEnforced) {
  std::string deep(20, '(');
  deep += "x" + std::string(20, ')');
  EXPECT_THAT(P(deep), HasSubstr("nests deeper than 16"));
  std::string many;
  for (int i = 0; i < 70; ++i) many += "w" + std::to_string(i) + " ";
  EXPECT_THAT(P(many), HasSubstr("more than 64 terms"));
  EXPECT_THAT(P(std::string(2000, 'a')), HasSubstr("at most 1024"));
  std::string nots;
  for (int i = 0; i < 40; ++i) nots += "NOT ";
  EXPECT_THAT(P(nots + "x"), HasSubstr("nests deeper"));
}

// Random and mutated queries: the parser answers with a value or an InvalidArgument, never a
// crash, hang or other code (a deterministic fuzz loop; ASan and UBSan builds run it too).
TEST(ParserTest, FuzzNeverCrashes) {
  const std::vector<std::string> pieces = {
      "a",          "b",       " ",   "(",   ")",     "\"",
      "-",          "OR",      "AND", "NOT", "from:", "since:2009-01-01",
      "min_faves:", "lang:en", "#",   "@",   "\xFF",  "\xE6\x97\xA5",
      ":"};
  uint64_t state = 7;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  for (int i = 0; i < 20000; ++i) {
    std::string q;
    const int n = static_cast<int>(next() % 24);
    for (int j = 0; j < n; ++j) {
      if (next() % 5 == 0) {
        q.push_back(static_cast<char>(next()));
      } else {
        q += pieces[next() % pieces.size()];
      }
    }
    absl::StatusOr<QueryNode> node = Parse(q);
    if (!node.ok()) {
      EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument) << q;
    }
  }
}

}  // namespace
}  // namespace tweetsearch::query
