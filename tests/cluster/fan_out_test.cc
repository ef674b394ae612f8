#include "cluster/fan_out.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

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
        std::vector<std::vector<uint32_t>>{{0, 1}}, health, clock_,
        [this](uint32_t, uint32_t r, grpc::ClientContext* ctx, int* response,
               std::function<void(grpc::Status)> done) {
          std::lock_guard lock(mu_);
          ++started_[r];
          if (r == 0) {
            frozen_[ctx] = std::move(done);
            return;
          }
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

}  // namespace
}  // namespace tweetsearch::cluster
