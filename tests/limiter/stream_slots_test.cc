// The open-stream count shared by front doors through a real redis-server (started by the test
// on a free loopback port): each StreamSlots object stands for one front door.
#include "limiter/stream_slots.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/testing/corpus.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/wait.h"

namespace tweetsearch::limiter {
namespace {

class StreamSlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_unique<testing::RedisServer>(dir_.path());
    ASSERT_TRUE(redis_->Start());
  }
  std::unique_ptr<StreamSlots> FrontDoor(
      std::chrono::milliseconds lease = std::chrono::seconds(15)) {
    RedisOptions options;
    options.port = redis_->port();
    options.command_timeout_ms = 500;  // sanitizers and a loaded machine are slow
    options.retry_interval_ms = 100;
    return std::make_unique<StreamSlots>(options, lease);
  }
  // Until `done` holds, asking every 10 ms; false after 10 s.
  static bool Eventually(const std::function<bool()>& done) {
    return testing::WaitUntil(done, std::chrono::seconds(10), std::chrono::milliseconds(10));
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::RedisServer> redis_;
};

TEST_F(StreamSlotsTest, TheCapHoldsForEveryFrontDoorTogetherAndAGivenSlotIsFreeAgain) {
  // Did: two front doors; a key capped at 3 takes 2 on a, 1 on b; then one more on each;
  // a gives one back; 16 threads on both front doors race for another key's 5 slots.
  // Checked: the fourth is refused on both (ResourceExhausted); after the give, b takes it;
  // exactly 5 of the racers win; other keys are not affected.
  auto a = FrontDoor(), b = FrontDoor();
  absl::StatusOr<std::string> a1 = a->Take("k1", 3), a2 = a->Take("k1", 3), b1 = b->Take("k1", 3);
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok()) << a1.status() << a2.status() << b1.status();
  EXPECT_TRUE(absl::IsResourceExhausted(a->Take("k1", 3).status()));
  EXPECT_TRUE(absl::IsResourceExhausted(b->Take("k1", 3).status()));
  EXPECT_TRUE(b->Take("k2", 1).ok()) << "another key has slots of its own";
  a->Give("k1", *a1);
  EXPECT_TRUE(b->Take("k1", 3).ok());
  EXPECT_EQ(a->held(), 1u);
  EXPECT_EQ(b->held(), 3u);

  std::atomic<int> won{0}, refused{0};
  std::vector<std::thread> racers;
  for (int t = 0; t < 16; ++t) {
    racers.emplace_back([&, door = (t % 2 == 0 ? a.get() : b.get())] {
      absl::StatusOr<std::string> s = door->Take("race", 5);
      if (s.ok()) {
        won++;
      } else if (absl::IsResourceExhausted(s.status())) {
        refused++;
      }
    });
  }
  for (std::thread& t : racers) t.join();
  EXPECT_EQ(won.load(), 5);
  EXPECT_EQ(refused.load(), 11);
}

TEST_F(StreamSlotsTest, ADeadFrontDoorsSlotsLapseWhileALiveOnesAreRenewed) {
  // Did: leases of 1 s (renewed every third of it: a margin for slow sanitizer runs). Front
  // door a takes a key's only slot and keeps running; b asks for it until a has renewed it 15
  // times (five leases); then a second key's only slot is taken by c, which then dies
  // (destroyed without giving it back). Checked: b is refused all along while a lives; c's slot
  // is free again within a few leases.
  constexpr std::chrono::milliseconds kLease{1000};
  auto a = FrontDoor(kLease), b = FrontDoor(kLease);
  ASSERT_TRUE(a->Take("held", 1).ok());
  const uint64_t renewed = a->renewals();
  int asked = 0;
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        EXPECT_TRUE(absl::IsResourceExhausted(b->Take("held", 1).status())) << "ask " << asked;
        ++asked;
        return a->renewals() >= renewed + 15;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(50)));
  EXPECT_GT(asked, 10);

  auto c = FrontDoor(kLease);
  ASSERT_TRUE(c->Take("lapses", 1).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(b->Take("lapses", 1).status()));
  c.reset();  // dies: no give
  EXPECT_TRUE(Eventually([&] { return b->Take("lapses", 1).ok(); }));
}

TEST_F(StreamSlotsTest, WithRedisDownTakeSaysUnavailableAtOnceAndRecovers) {
  // Did: Redis killed, then started again on the same port. Checked: takes are Unavailable
  // (the caller falls back on its own count); once Redis is back, takes succeed again.
  auto a = FrontDoor();
  ASSERT_TRUE(a->Take("k", 10).ok());
  redis_->Stop();
  EXPECT_TRUE(absl::IsUnavailable(a->Take("k", 10).status()));
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(absl::IsUnavailable(a->Take("k", 10).status()));
  ASSERT_TRUE(redis_->Start());
  EXPECT_TRUE(Eventually([&] { return a->Take("k", 10).ok(); }));
}

}  // namespace
}  // namespace tweetsearch::limiter
