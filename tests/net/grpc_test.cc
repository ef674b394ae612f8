// The RPC catch-all: an exception thrown by a handler is answered INTERNAL, not let loose.
#include "net/grpc.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tweetsearch::net {
namespace {

TEST(GuardedTest, AnExceptionIsAnsweredInternalAndAStatusPassesThrough) {
  grpc::Status thrown =
      Guarded("Test.Throws", []() -> grpc::Status { throw std::runtime_error("a bug"); });
  EXPECT_EQ(thrown.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(thrown.error_message(), "internal error: a bug");

  grpc::Status refused =
      Guarded("Test.Refuses", [] { return ToGrpc(absl::FailedPreconditionError("stale epoch")); });
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(refused.error_message(), "stale epoch");
  EXPECT_EQ(FromGrpc(refused).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Guarded("Test.Ok", [] { return grpc::Status::OK; }).ok());
}

}  // namespace
}  // namespace tweetsearch::net
