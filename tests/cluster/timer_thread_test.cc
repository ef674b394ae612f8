#include "cluster/timer_thread.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace tweetsearch::cluster {
namespace {

using Clock = std::chrono::system_clock;
using std::chrono::milliseconds;

TEST(TimerThreadTest, CallbacksRunInTheOrderOfTheirTimesAndNeverEarly) {
  TimerThread timers;
  std::mutex mu;
  std::vector<int> order;
  std::vector<bool> early;
  absl::Notification all_ran;
  const Clock::time_point base = Clock::now() + milliseconds(20);
  // Set out of order; two share a time and keep the order they were set in.
  const std::vector<std::pair<int, int>> set = {{3, 30}, {1, 10}, {4, 30}, {0, 0}, {2, 20}};
  for (const auto& entry : set) {
    const int name = entry.first;  // named, not bound: a lambda may capture it
    const Clock::time_point when = base + milliseconds(entry.second);
    timers.At(when, [&, name, when] {
      std::lock_guard lock(mu);
      order.push_back(name);
      early.push_back(Clock::now() < when);
      if (order.size() == set.size()) all_ran.Notify();
    });
  }
  ASSERT_TRUE(all_ran.WaitForNotificationWithTimeout(absl::Seconds(60)));
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(early, std::vector<bool>(set.size(), false));
}

TEST(TimerThreadTest, AnEarlierCallbackWakesTheThreadThatSleepsUntilALaterOne) {
  TimerThread timers;
  timers.At(Clock::now() + std::chrono::hours(1), [] {});
  absl::Notification ran;
  timers.At(Clock::now() + milliseconds(5), [&] { ran.Notify(); });
  // Without the wake it would run in an hour.
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(60)));
}

TEST(TimerThreadTest, CallbacksDueTogetherShareAWake) {
  TimerThread timers;
  absl::Notification all_ran;
  std::atomic<int> runs{0};
  const Clock::time_point when = Clock::now() + milliseconds(30);
  for (int i = 0; i < 100; ++i) {
    timers.At(when, [&] {
      if (runs.fetch_add(1) + 1 == 100) all_ran.Notify();
    });
  }
  ASSERT_TRUE(all_ran.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(timers.runs(), 100u);
  // One wake for the first callback set, one at their time; a wake per callback would be 100.
  EXPECT_LE(timers.wakes(), 4u);
}

TEST(TimerThreadTest, TheDestructorDropsCallbacksStillWaitingWithoutRunningThem) {
  auto held = std::make_shared<int>(1);
  bool ran = false;
  {
    TimerThread timers;
    timers.At(Clock::now() + std::chrono::hours(1), [held, &ran] { ran = true; });
    EXPECT_EQ(held.use_count(), 2);
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(held.use_count(), 1);
}

}  // namespace
}  // namespace tweetsearch::cluster
