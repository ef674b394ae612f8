#include "indexer/query/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tweetsearch::query {
namespace {

using ::testing::HasSubstr;

class PlanTest : public ::testing::Test {
 protected:
  std::string P(std::string_view q) {
    absl::StatusOr<Plan> plan = PlanQuery(q, *analyzer_);
    if (!plan.ok()) return "ERROR: " + std::string(plan.status().message());
    return ToString(plan->root);
  }
  std::unique_ptr<analysis::Analyzer> analyzer_ = *analysis::Analyzer::Create({});
};

TEST_F(PlanTest, WordsAreAnalyzedLikeTweets) {
  EXPECT_EQ(P("Cats #NYC @Mayor"), "(AND cats #nyc @mayor)");
  EXPECT_EQ(P("e-mail"), "\"e@0 mail@1\"");
  EXPECT_EQ(P("\"To be or not to be\""), "\"to@0 be@1 or@2 not@3 to@4 be@5\"");
  EXPECT_EQ(P("from:Bob lang:EN x"), "(AND [from:bob] [lang:en] x)");
  EXPECT_EQ(P("a (b -c) OR d"), "(OR (AND a b -c) d)");
  EXPECT_EQ(P("a ... b"), "(AND a b)");
  EXPECT_EQ(P("http://www.example.com/page"), "example.com");
}

TEST_F(PlanTest, ContradictionsMatchNothing) {
  EXPECT_EQ(P("cats -cats"), "NOTHING");
  EXPECT_EQ(P("(a OR i) to -to"), "NOTHING");
  EXPECT_EQ(P("x OR (cats -Cats)"), "x");
  EXPECT_EQ(P("x (cats -cats OR dogs -dogs)"), "NOTHING");
  EXPECT_EQ(P("x -(cats -cats)"), "x");
}

TEST_F(PlanTest, FiltersGoToThePlan) {
  absl::StatusOr<Plan> plan =
      PlanQuery("x since:2009-04-06 until:2009-04-07 min_faves:3", *analyzer_);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->since_ms, 1238976000000);
  EXPECT_EQ(plan->until_ms, 1239062400000);
  EXPECT_EQ(plan->min_likes, 3u);
}

TEST_F(PlanTest, RejectsQueriesThatCannotBeAnswered) {
  EXPECT_THAT(P("-cats"), HasSubstr("positive term"));
  EXPECT_THAT(P("a OR -b"), HasSubstr("NOT cannot be an alternative"));
  EXPECT_THAT(P("a OR since:2009-01-01"), HasSubstr("whole query"));
  EXPECT_THAT(P("since:2009-01-01"), HasSubstr("nothing to search for"));
  EXPECT_THAT(P("... !!!"), HasSubstr("nothing to search for"));
}

TEST_F(PlanTest, DroppedStopWordsLeaveGapsInPhrases) {
  analysis::AnalyzerOptions options;
  options.drop_stop_words = true;
  auto dropping = *analysis::Analyzer::Create(options);
  absl::StatusOr<Plan> plan = PlanQuery("\"king of the hill\"", *dropping);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(ToString(plan->root), "\"king@0 hill@3\"");
  EXPECT_FALSE(PlanQuery("to be or not to be", *dropping).ok());
}

}  // namespace
}  // namespace tweetsearch::query
