#include "common/snowflake.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tweetsearch
