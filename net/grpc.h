// The gRPC plumbing every role shares: channels and deadlines for clients, a server on an
// address, status conversions, and the one catch-all of an RPC handler.
//
// Thread-safety: every function may be called from any thread.
#ifndef TWEETSEARCH_NET_GRPC_H_
#define TWEETSEARCH_NET_GRPC_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tweetsearch::net {

// A channel to HOST:PORT (plaintext: the cluster talks on a private network).
std::shared_ptr<grpc::Channel> Connect(const std::string& address);

// A client context whose call must end within `timeout`.
std::unique_ptr<grpc::ClientContext> DeadlineContext(std::chrono::milliseconds timeout);

// The wall-clock time `timeout` from now, as gRPC deadlines take it.
std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout);

// A server on `address` (HOST:PORT; port 0 picks one) with `services`. Unavailable when it
// cannot listen there (the port is taken: no two processes share an address).
struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};
absl::StatusOr<RunningServer> StartServer(const std::string& address,
                                          const std::vector<grpc::Service*>& services);

// absl and gRPC share the canonical code numbers.
inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}
inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Logs an exception that escaped the handler of `rpc` and answers INTERNAL.
grpc::Status InternalError(std::string_view rpc, const std::exception& e);

// Runs the body of one RPC handler inside its catch-all: an exception (a bug) is logged and
// answered INTERNAL rather than left to gRPC's thread.
template <typename Body>
grpc::Status Guarded(std::string_view rpc, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return InternalError(rpc, e);
  }
}

}  // namespace tweetsearch::net

#endif  // TWEETSEARCH_NET_GRPC_H_
