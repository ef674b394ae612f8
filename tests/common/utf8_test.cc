#include "common/utf8.h"

#include <gtest/gtest.h>

#include "common/tweet_csv.h"

namespace tweetsearch {
namespace {

TEST(Utf8Test, ValidatesAndSanitizes) {
  EXPECT_TRUE(ValidateUtf8("plain ascii, ünïcödé, 日本, \U0001F600").ok());
  EXPECT_FALSE(ValidateUtf8("\xFF").ok());
  EXPECT_EQ(SanitizeUtf8("a\xFFz"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(SanitizeUtf8("fine"), "fine");
  EXPECT_EQ(Latin1ToUtf8("caf\xE9"), "caf\xC3\xA9");
  EXPECT_TRUE(ValidateUtf8(Latin1ToUtf8("\x80\xFF\xA0")).ok());
}

TEST(Sentiment140Test, ParsesALineWithQuotesInTheText) {
  absl::StatusOr<ImportedTweet> t = ParseSentiment140Line(
      "\"0\",\"1467810369\",\"Mon Apr 06 22:19:45 PDT 2009\",\"NO_QUERY\",\"_TheSpecialOne_\","
      "\"say \"hi\" caf\xE9\"");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->id, 1467810369u);
  EXPECT_EQ(t->user_name, "_TheSpecialOne_");
  EXPECT_EQ(t->text, "say \"hi\" caf\xC3\xA9");
  EXPECT_EQ(t->created_at_ms, 1239081585000);  // 2009-04-07T05:19:45Z
  EXPECT_EQ(t->likes, DerivedLikes(1467810369));
  // The corpus escapes its text for HTML; imported tweets read as written.
  absl::StatusOr<ImportedTweet> escaped = ParseSentiment140Line(
      "\"4\",\"1467822272\",\"Mon Apr 06 22:22:45 PDT 2009\",\"NO_QUERY\",\"ersle\","
      "\"tea &amp; toast &lt;3 &quot;yum&quot; &#39;n&#39; &bogus;\"");
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  EXPECT_EQ(escaped->text, "tea & toast <3 \"yum\" 'n' &bogus;");
  EXPECT_FALSE(ParseSentiment140Line("\"0\",\"x\"").ok());
  EXPECT_FALSE(ParseSentiment140Line("garbage").ok());
}

}  // namespace
}  // namespace tweetsearch
