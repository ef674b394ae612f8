#include "common/snowflake.h"

#include <gtest/gtest.h>

#include <set>

#include "common/synthetic.h"

namespace tweetsearch {
namespace {

TEST(SnowflakeTest, IdsIncreaseAndEncodeTheirTime) {
  ManualClock clock(kSnowflakeEpochMillis + 1000);
  absl::StatusOr<SnowflakeGenerator> gen = SnowflakeGenerator::Create(7, clock);
  ASSERT_TRUE(gen.ok());
  TweetId previous = 0;
  for (int i = 0; i < 10000; ++i) {  // more than 4096 in one millisecond: borrows ahead
    const TweetId id = gen->Next();
    EXPECT_GT(id, previous);
    previous = id;
  }
  clock.SetUnixMillis(kSnowflakeEpochMillis + 50'000);
  const TweetId later = gen->Next();
  EXPECT_EQ(SnowflakeUnixMillis(later), kSnowflakeEpochMillis + 50'000);
  EXPECT_EQ((later >> 12) & 1023, 7u);
  clock.SetUnixMillis(kSnowflakeEpochMillis + 10);  // the clock steps back
  EXPECT_GT(gen->Next(), later);
  EXPECT_LE(SnowflakeLowerBound(kSnowflakeEpochMillis + 50'000), later);
}

TEST(SnowflakeTest, RejectsNodeIdsThatDoNotFit) {
  EXPECT_FALSE(SnowflakeGenerator::Create(1024, SystemClock()).ok());
}

// tweetgen's tweets can be ingested into a service holding the sample: with the same seed and
// start time, the two generators' ids differ only in their node bits.
TEST(SyntheticTest, GeneratorsOnDifferentNodesNeverMakeTheSameId) {
  SyntheticOptions sample, tweetgen;
  sample.node = kSampleNode;
  tweetgen.node = kTweetgenNode;
  SyntheticTweetGenerator a(sample), b(tweetgen), again(sample);
  std::set<TweetId> ids;
  for (int i = 0; i < 20000; ++i) {
    const SyntheticTweet x = a.Next();
    const SyntheticTweet y = b.Next();
    EXPECT_EQ(again.Next().id, x.id);  // deterministic
    EXPECT_EQ(x.text, y.text);         // the same tweets...
    EXPECT_EQ((x.id >> 12) & 1023, kSampleNode);
    EXPECT_EQ((y.id >> 12) & 1023, kTweetgenNode);
    ids.insert(x.id);
    ids.insert(y.id);
  }
  EXPECT_EQ(ids.size(), 40000u);  // ...under ids that never collide
}

}  // namespace
}  // namespace tweetsearch
