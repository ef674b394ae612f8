#include "cluster/fan_out.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <optional>

namespace tweetsearch::cluster {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// One partition of two replicas: replica 0 is frozen (its calls end only when cancelled),
// replica 1 answers at once with 1.
class FanOutTest : public ::testing::Test {
 protected:
  std::vector<absl::StatusOr<int>> Run(ReplicaHealth& health) {
    auto fan = std::make_shared<FanOut<int>>(
        std::vector<std::vector<uint32_t>>{{0, 1}}, health, clock_, timers_,
        [this](uint32_t, uint32_t r, grpc::ClientContext* ctx, int* response,
               std::function<void(grpc::Status)> done) {
          {
            std::lock_guard lock(mu_);
            ++started_[r];
            if (r == 0) {
              frozen_[ctx] = std::move(done);
              return;
            }
          }
          // Unlocked: the answer settles the fan-out, which cancels the frozen call.
          *response = 1;
          done(grpc::Status::OK);
        },
        [this](grpc::ClientContext* ctx) {
          std::function<void(grpc::Status)> done;
          {
            std::lock_guard lock(mu_);
            done = std::move(frozen_.at(ctx));
            frozen_.erase(ctx);
          }
          done(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
        });
    return fan->Run(milliseconds(10'000), milliseconds(10));
  }

  ManualClock clock_{1'700'000'000'000};
  TimerThread timers_;
  std::mutex mu_;
  std::map<uint32_t, int> started_;
  std::map<grpc::ClientContext*, std::function<void(grpc::Status)>> frozen_;
};

TEST_F(FanOutTest, AFrozenReplicasCallIsHedgedToTheOtherReplica) {
  ReplicaHealth health({2}, ReplicaHealthOptions{}, clock_);
  std::vector<absl::StatusOr<int>> out = Run(health);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].ok()) << out[0].status();
  EXPECT_EQ(*out[0], 1);
  EXPECT_EQ(started_[0], 1);
  EXPECT_EQ(started_[1], 1);
  EXPECT_TRUE(frozen_.empty());  // the losing call was cancelled
  EXPECT_EQ(health.Records()[0].hedges, 1u);
  EXPECT_EQ(health.Records()[0].hedges_refused, 0u);
}

TEST_F(FanOutTest, ACallRefusedItsHedgeByTheBudgetIsHedgedLater) {
  ReplicaHealthOptions options;
  options.hedge_burst = 0;  // no hedge in reserve, and none earned
  options.hedge_share = 0;
  ReplicaHealth health({2}, options, clock_);
  // Without the late hedge the call would wait at the frozen replica until the deadline
  // (10 s) and the partition would have no answer.
  std::vector<absl::StatusOr<int>> out = Run(health);
  ASSERT_TRUE(out[0].ok()) << out[0].status();
  EXPECT_EQ(*out[0], 1);
  EXPECT_EQ(started_[1], 1);
  EXPECT_TRUE(frozen_.empty());
  EXPECT_EQ(health.Records()[0].hedges_refused, 1u);
  EXPECT_EQ(health.Records()[0].hedges, 1u);
  EXPECT_FALSE(health.TakeHedge(0, 0));  // the late hedge took nothing from the budget
}

// One partition of one replica whose calls wait until the test answers them.
class FanOutStartTest : public ::testing::Test {
 protected:
  std::shared_ptr<FanOut<int>> Make(ReplicaHealth& health) {
    return std::make_shared<FanOut<int>>(
        std::vector<std::vector<uint32_t>>{{0}}, health, clock_, timers_,
        [this](uint32_t, uint32_t, grpc::ClientContext*, int* response,
               std::function<void(grpc::Status)> done) {
          std::lock_guard lock(mu_);
          response_ = response;
          pending_ = std::move(done);
        },
        [this](grpc::ClientContext*) {
          std::function<void(grpc::Status)> done;
          {
            std::lock_guard lock(mu_);
            ++cancels_;
            done = std::move(pending_);
          }
          if (done) done(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
        });
  }

  ManualClock clock_{1'700'000'000'000};
  TimerThread timers_;
  std::mutex mu_;
  int* response_ = nullptr;
  std::function<void(grpc::Status)> pending_;
  int cancels_ = 0;
};

TEST_F(FanOutStartTest, StartReturnsAtOnceAndTheCallThatSettlesItHandsTheAnswerOn) {
  ReplicaHealth health({1}, ReplicaHealthOptions{}, clock_);
  auto fan = Make(health);
  std::optional<std::vector<absl::StatusOr<int>>> answers;
  fan->Start(milliseconds(60'000), milliseconds(60'000),
             [&](std::vector<absl::StatusOr<int>> a) { answers = std::move(a); });
  EXPECT_FALSE(answers.has_value());  // the call has not answered
  std::function<void(grpc::Status)> done;
  {
    std::lock_guard lock(mu_);
    ASSERT_TRUE(pending_);
    *response_ = 7;
    done = std::move(pending_);
  }
  done(grpc::Status::OK);  // the answer comes on the thread of the call that settles it
  ASSERT_TRUE(answers.has_value());
  ASSERT_EQ(answers->size(), 1u);
  ASSERT_TRUE((*answers)[0].ok()) << (*answers)[0].status();
  EXPECT_EQ(*(*answers)[0], 7);
  EXPECT_EQ(cancels_, 0);
}

TEST_F(FanOutStartTest, TheDeadlineSettlesAFanOutWhoseCallNeverAnswers) {
  ReplicaHealth health({1}, ReplicaHealthOptions{}, clock_);
  // Nothing answers the call: only the timer can settle the fan-out, and it cancels the call.
  std::vector<absl::StatusOr<int>> out = Make(health)->Run(milliseconds(30), milliseconds(5));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(out[0].status())) << out[0].status();
  EXPECT_EQ(cancels_, 1);
  EXPECT_GE(timers_.runs(), 1u);
}

}  // namespace
}  // namespace tweetsearch::cluster
