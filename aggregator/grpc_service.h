// The front door's gRPC service (tweetsearch.v1.TweetSearch): the same calls as the HTTP API,
// through the same FrontDoor. Server reflection is turned on where the server is built, so
// standard tools (grpcurl, grpc_cli) can list and call it.
//
// Thread-safety: gRPC calls the handlers from its own threads; FrontDoor is thread-safe.
#ifndef TWEETSEARCH_AGGREGATOR_GRPC_SERVICE_H_
#define TWEETSEARCH_AGGREGATOR_GRPC_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "aggregator/front_door.h"
#include "aggregator/metrics.h"
#include "usage/usage_recorder.h"

namespace tweetsearch::aggregator {

class GrpcServer {
 public:
  // Listens on `address:port` (port 0 picks a free one) with reflection on. Unavailable if it
  // cannot bind. `door`, `metrics` and `usage` (null: calls are not counted) must outlive the
  // server.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const std::string& address,
                                                           uint16_t port, FrontDoor& door,
                                                           Metrics& metrics,
                                                           usage::UsageRecorder* usage = nullptr);
  virtual ~GrpcServer() = default;
  virtual uint16_t port() const = 0;
  // Stops taking calls and waits for calls in flight (at most `grace`). Idempotent.
  virtual void Shutdown(std::chrono::milliseconds grace) = 0;
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_GRPC_SERVICE_H_
