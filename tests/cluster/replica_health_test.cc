#include "cluster/replica_health.h"

#include <gtest/gtest.h>

#include <thread>

namespace tweetsearch::cluster {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

class ReplicaHealthTest : public ::testing::Test {
 protected:
  ManualClock clock_{1'700'000'000'000};
  ReplicaHealthOptions options_;
  ReplicaHealth health_{{2, 2}, options_, clock_};

  std::vector<uint32_t> Order(uint32_t p) {
    std::vector<uint32_t> replicas = {0, 1};
    health_.Order(p, &replicas);
    return replicas;
  }
  void Overtake(uint32_t p, uint32_t r, int times) {
    for (int i = 0; i < times; ++i) health_.Overtaken(p, r);
  }
};

TEST_F(ReplicaHealthTest, FiveBadCallsInARowEjectOneReplicaForASecond) {
  Overtake(0, 0, 2);
  health_.Failed(0, 0);
  health_.Overtaken(0, 0);
  EXPECT_FALSE(health_.Ejected(0, 0));
  EXPECT_EQ(Order(0), (std::vector<uint32_t>{0, 1}));
  health_.Failed(0, 0);
  EXPECT_TRUE(health_.Ejected(0, 0));
  EXPECT_EQ(Order(0), (std::vector<uint32_t>{1, 0}));
  // Only that replica of that partition.
  EXPECT_FALSE(health_.Ejected(0, 1));
  EXPECT_EQ(Order(1), (std::vector<uint32_t>{0, 1}));

  clock_.AdvanceMillis(999);
  EXPECT_TRUE(health_.Ejected(0, 0));
  clock_.AdvanceMillis(1);
  EXPECT_FALSE(health_.Ejected(0, 0));
  EXPECT_EQ(Order(0), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(health_.Records()[0].ejections, 1u);
}

TEST_F(ReplicaHealthTest, AnAnswerClearsTheRecord) {
  Overtake(0, 0, 4);
  health_.Answered(0, 0, microseconds(500));
  Overtake(0, 0, 4);
  EXPECT_FALSE(health_.Ejected(0, 0));
  health_.Overtaken(0, 0);
  EXPECT_TRUE(health_.Ejected(0, 0));
}

TEST_F(ReplicaHealthTest, ABadCallAfterAnEjectionEjectsAgainForTwiceAsLongUpToTheCap) {
  Overtake(0, 1, 5);
  ASSERT_TRUE(health_.Ejected(0, 1));
  // Calls sent before the ejection that end during it count for nothing.
  Overtake(0, 1, 10);
  clock_.AdvanceMillis(1000);
  ASSERT_FALSE(health_.Ejected(0, 1));
  int64_t expected_ms = 2000;
  for (int round = 2; round <= 8; ++round) {
    health_.Failed(0, 1);  // one is enough: no answer since the last ejection
    ASSERT_TRUE(health_.Ejected(0, 1)) << round;
    clock_.AdvanceMillis(expected_ms - 1);
    ASSERT_TRUE(health_.Ejected(0, 1)) << round;
    clock_.AdvanceMillis(1);
    ASSERT_FALSE(health_.Ejected(0, 1)) << round;
    expected_ms = std::min<int64_t>(expected_ms * 2, 30000);
  }
  EXPECT_EQ(health_.Records()[1].ejections, 8u);
  // An answer resets the doubling: the next ejection takes five bad calls and lasts 1 s.
  health_.Answered(0, 1, microseconds(700));
  Overtake(0, 1, 4);
  EXPECT_FALSE(health_.Ejected(0, 1));
  health_.Overtaken(0, 1);
  EXPECT_TRUE(health_.Ejected(0, 1));
  clock_.AdvanceMillis(1000);
  EXPECT_FALSE(health_.Ejected(0, 1));
}

TEST_F(ReplicaHealthTest, EveryReplicaEjectedKeepsTheOrderSoThePartitionIsStillAsked) {
  Overtake(1, 0, 5);
  Overtake(1, 1, 5);
  EXPECT_TRUE(health_.Ejected(1, 0));
  EXPECT_TRUE(health_.Ejected(1, 1));
  EXPECT_EQ(Order(1), (std::vector<uint32_t>{0, 1}));
  std::vector<uint32_t> reversed = {1, 0};
  health_.Order(1, &reversed);
  EXPECT_EQ(reversed, (std::vector<uint32_t>{1, 0}));
}

TEST_F(ReplicaHealthTest, TheHedgeDelayIsTheRecentP95WithinItsBounds) {
  EXPECT_EQ(health_.HedgeDelay(0), options_.max_hedge);  // nothing seen yet
  // 31 answers: not enough to trust a quantile.
  for (int i = 0; i < 31; ++i) health_.Answered(0, i % 2, microseconds(5000));
  EXPECT_EQ(health_.HedgeDelay(0), options_.max_hedge);
  health_.Answered(0, 0, microseconds(5000));
  EXPECT_EQ(health_.HedgeDelay(0), microseconds(5000));
  // 256 answers of 1..256 ms: the 95th percentile is the 244th, 244 ms, above the cap.
  for (int i = 1; i <= 256; ++i) health_.Answered(0, 0, microseconds(i * 1000));
  EXPECT_EQ(health_.HedgeDelay(0), options_.max_hedge);
  // 1..256 × 100 µs: 24.4 ms.
  for (int i = 1; i <= 256; ++i) health_.Answered(0, 0, microseconds(i * 100));
  EXPECT_EQ(health_.HedgeDelay(0), microseconds(24400));
  // All fast: never below the floor.
  for (int i = 0; i < 256; ++i) health_.Answered(0, 1, microseconds(100));
  EXPECT_EQ(health_.HedgeDelay(0), options_.min_hedge);
  // The other partition saw nothing.
  EXPECT_EQ(health_.HedgeDelay(1), options_.max_hedge);
  EXPECT_EQ(health_.HedgeDelays()[0], options_.min_hedge);
}

TEST_F(ReplicaHealthTest, HedgesAddAtMostTheirShareOfAnsweredCallsBeyondTheirReserve) {
  auto records = [&] { return health_.Records(); };  // partition 0: replicas 0 and 1 first
  // The reserve: ten hedges at once, before any call answered (a replica frozen at start).
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(health_.TakeHedge(0, 0)) << i;
  EXPECT_FALSE(health_.TakeHedge(0, 0));
  EXPECT_FALSE(health_.TakeHedge(0, 1));
  EXPECT_EQ(records()[0].hedges_refused, 1u);
  EXPECT_EQ(records()[1].hedges_refused, 1u);
  // Each answered call earns a twentieth of a hedge: 19 are not enough, the 20th is.
  for (int i = 0; i < 19; ++i) health_.Answered(0, 1, microseconds(1000));
  EXPECT_FALSE(health_.TakeHedge(0, 0));
  health_.Answered(0, 1, microseconds(1000));
  EXPECT_TRUE(health_.TakeHedge(0, 0));
  EXPECT_FALSE(health_.TakeHedge(0, 0));
  // Over many calls hedges stay at 5% of them, and the budget never grows past its reserve.
  int hedged = 0;
  for (int i = 0; i < 10'000; ++i) {
    health_.Answered(0, i % 2, microseconds(1000));
    if (health_.TakeHedge(0, 0)) ++hedged;
  }
  EXPECT_EQ(hedged, 500);
  for (int i = 0; i < 10'000; ++i) health_.Answered(0, 0, microseconds(1000));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(health_.TakeHedge(0, 1)) << i;
  EXPECT_FALSE(health_.TakeHedge(0, 1));
  // Each partition has its own budget; out of range, nothing is hedged.
  EXPECT_TRUE(health_.TakeHedge(1, 0));
  EXPECT_FALSE(health_.TakeHedge(2, 0));
  EXPECT_FALSE(health_.TakeHedge(0, 2));
}

TEST_F(ReplicaHealthTest, AReplicaAnsweredWithinAWindowOfItsLastAnswer) {
  EXPECT_FALSE(health_.AnsweredWithin(0, 0, std::chrono::seconds(5)));  // never
  health_.Answered(0, 0, microseconds(800));
  EXPECT_TRUE(health_.AnsweredWithin(0, 0, std::chrono::seconds(5)));
  EXPECT_FALSE(health_.AnsweredWithin(0, 1, std::chrono::seconds(5)));
  clock_.AdvanceMillis(5000);
  EXPECT_TRUE(health_.AnsweredWithin(0, 0, std::chrono::seconds(5)));
  clock_.AdvanceMillis(1);
  EXPECT_FALSE(health_.AnsweredWithin(0, 0, std::chrono::seconds(5)));
  health_.Failed(0, 0);  // failures do not count as answers
  EXPECT_FALSE(health_.AnsweredWithin(0, 0, std::chrono::seconds(5)));
  EXPECT_FALSE(health_.AnsweredWithin(9, 0, std::chrono::seconds(5)));
}

TEST_F(ReplicaHealthTest, OutOfRangeReplicasAreIgnored) {
  health_.Failed(7, 0);
  health_.Overtaken(0, 9);
  health_.Answered(3, 3, microseconds(1));
  EXPECT_FALSE(health_.Ejected(7, 0));
  EXPECT_EQ(health_.HedgeDelay(7), options_.max_hedge);
  EXPECT_EQ(health_.Records().size(), 4u);
}

TEST_F(ReplicaHealthTest, CallsFromManyThreadsAreCountedOnce) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < 1000; ++i) {
        health_.Hedged(1, t % 2);
        health_.Answered(1, t % 2, microseconds(3000));
        std::vector<uint32_t> replicas = {0, 1};
        health_.Order(1, &replicas);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<ReplicaRecord> records = health_.Records();
  EXPECT_EQ(records[2].hedges + records[3].hedges, 4000u);
  EXPECT_EQ(health_.HedgeDelay(1), microseconds(3000));
}

}  // namespace
}  // namespace tweetsearch::cluster
