// The demo corpus a fresh server starts with.
#include "common/sample_tweets.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/snowflake.h"

namespace tweetsearch {
namespace {

constexpr int64_t kNow = 1'795'000'000'000;  // 2026-11-18
constexpr int64_t kWeek = int64_t{7} * 86'400'000;

std::vector<SyntheticTweet> Generate(uint64_t count, uint64_t seed = 1) {
  SampleOptions options;
  options.seed = seed;
  options.count = count;
  options.now_ms = kNow;
  SampleTweetGenerator generator(options);
  std::vector<SyntheticTweet> tweets;
  for (uint64_t i = 0; i < count; ++i) tweets.push_back(generator.Next());
  return tweets;
}

TEST(SampleTweetsTest, DatedOverTheWeekBeforeNowWithIdsOfTheirTime) {
  const std::vector<SyntheticTweet> tweets = Generate(20'000);
  std::set<TweetId> ids;
  TweetId previous = 0;
  for (const SyntheticTweet& t : tweets) {
    EXPECT_GT(t.created_at_ms, kNow - kWeek);
    EXPECT_LE(t.created_at_ms, kNow);
    EXPECT_EQ(SnowflakeUnixMillis(t.id), t.created_at_ms);
    EXPECT_EQ((t.id >> kSnowflakeSequenceBits) & 1023, kSampleNode);
    EXPECT_GT(t.id, previous);  // oldest first
    previous = t.id;
    ids.insert(t.id);
  }
  EXPECT_EQ(ids.size(), tweets.size());
  // Spread over the week, not bunched: each day holds a seventh, give or take one tweet.
  std::map<int64_t, int> per_day;
  for (const SyntheticTweet& t : tweets) ++per_day[(kNow - t.created_at_ms) / 86'400'000];
  ASSERT_EQ(per_day.size(), 7u);
  for (const auto& [day, n] : per_day) EXPECT_NEAR(n, 20'000 / 7, 2) << "day " << day;
  // More tweets than milliseconds in the span still get distinct, ascending ids.
  SampleOptions crowded;
  crowded.count = 10'000;
  crowded.now_ms = kNow;
  crowded.span_ms = 2;
  SampleTweetGenerator dense(crowded);
  TweetId last = 0;
  for (int i = 0; i < 10'000; ++i) {
    const TweetId id = dense.Next().id;
    ASSERT_GT(id, last);
    last = id;
  }
}

TEST(SampleTweetsTest, ReadsLikeTweetsWithTheirUsualParts) {
  const std::vector<SyntheticTweet> tweets = Generate(20'000);
  std::map<std::string, int> langs;
  int tags = 0, mentions = 0, links = 0, zero_likes = 0, love = 0;
  uint32_t most_likes = 0;
  std::set<std::string> users;
  for (const SyntheticTweet& t : tweets) {
    ++langs[t.lang];
    tags += t.text.find(" #") != std::string::npos;
    mentions += t.text.starts_with("@");
    links += t.text.find("https://") != std::string::npos;
    zero_likes += t.likes == 0;
    most_likes = std::max(most_likes, t.likes);
    love += t.text.find("love") != std::string::npos;
    users.insert(t.user_name);
    EXPECT_EQ(t.text.find('{'), std::string::npos) << t.text;  // every slot filled
  }
  EXPECT_NEAR(langs["en"], 19'000, 300);
  for (const char* lang : {"es", "fr", "de", "ja"}) EXPECT_GT(langs[lang], 150) << lang;
  EXPECT_NEAR(tags, 0.15 * 0.95 * 20'000, 400);
  EXPECT_NEAR(mentions, 0.25 * 0.95 * 20'000, 400);
  EXPECT_NEAR(links, 0.08 * 0.95 * 20'000, 300);
  EXPECT_GT(zero_likes, 20'000 / 3);  // most tweets have few likes...
  EXPECT_GT(most_likes, 1'000u);      // ...and a few very many
  EXPECT_GT(love, 500);               // common words are common
  EXPECT_GT(users.size(), 2'000u);
  // The same seed and time give the same tweets; another seed others.
  EXPECT_EQ(Generate(50)[49].text, tweets[49].text);
  EXPECT_NE(Generate(50, 2)[49].text + Generate(50, 2)[48].text, tweets[49].text + tweets[48].text);
}

}  // namespace
}  // namespace tweetsearch
