#include "net/grpc.h"

#include <spdlog/spdlog.h>

#include "common/strings.h"

namespace tweetsearch::net {

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

std::unique_ptr<grpc::ClientContext> DeadlineContext(std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(Deadline(timeout));
  return context;
}

std::shared_ptr<grpc::Channel> Connect(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::StatusOr<RunningServer> StartServer(const std::string& address,
                                          const std::vector<grpc::Service*>& services) {
  RunningServer out;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &out.port);
  builder.SetMaxReceiveMessageSize(256 << 20);
  // One process per address: a second one started by mistake must fail, not share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // gRPC's defaults (at least 1 polling thread, at most 2) start a thread for nearly every
  // call under concurrent load and end one after it: an index server started one per three
  // searches. Up to 64 idle pollers stay, so the threads a burst made are reused
  // (docs/benchmarks.md, "Fewer thread wake-ups per cluster search").
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 64);
  for (grpc::Service* s : services) builder.RegisterService(s);
  out.server = builder.BuildAndStart();
  if (out.server == nullptr || out.port == 0) {
    return absl::UnavailableError(StrCat("cannot listen on ", address));
  }
  return out;
}

grpc::Status InternalError(std::string_view rpc, const std::exception& e) {
  spdlog::error("{}: internal error: {}", rpc, e.what());
  return grpc::Status(grpc::StatusCode::INTERNAL, StrCat("internal error: ", e.what()));
}

}  // namespace tweetsearch::net
